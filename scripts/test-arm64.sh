#!/usr/bin/env bash
# ARM64 (phones): cross-compiles the NEON kernels with g++-aarch64-linux-gnu
# (cmake/aarch64-linux-gnu.cmake) and runs, under qemu-aarch64, the kernel tests of the NEON tables
# (NEON; NEON_DOTPROD and NEON_I8MM, the packed weights on sdot and smmla, on an emulated CPU with
# both, on one with dotprod only and on one with neither: each table runs where it is offered, and
# needs no more than it is offered for), a whole model on packed weights, one model golden test (Gemma 4 E2B-like, llama.cpp's GGUF, against HF's logits), and
# the attention kernel over a KV view (f32/f16/q8_0/q4_0 rows, split decode steps) on the NEON kernels, the C
# API's tests, and libgemlet.so's page alignment.
# The scalar tables (ref, and Highway's SCALAR target, which runs the reference matmul) are the
# same code the x86 build tests, and slow under emulation, so they are filtered out.
#   scripts/test-arm64.sh [BUILD_DIR]      (default build-arm64; JOBS sets the build's parallelism)
# Packages: see the ARM64 part of scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-arm64}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$out" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DGEMLET_BUILD_APPS=OFF -DGEMLET_BUILD_TESTS=ON > /dev/null
cmake --build "$out" -j "$jobs" --target kernels_matmul_test kernels_elementwise_test kernels_thread_pool_test \
  kernels_attention_test model_golden_test packed_model_test c_api_test determinism_test gemlet_shared
status=0
run() {
  echo "== qemu-aarch64 ${*#$out/}"
  qemu-aarch64 "$@" || status=1  # the multiarch loader and libc (cmake/aarch64-linux-gnu.cmake says why)
}
run "$out/tests/kernels/kernels_matmul_test" --gtest_filter='*/NEON_*' --gtest_brief=1
run "$out/tests/kernels/kernels_elementwise_test" --gtest_filter='*/NEON*:KernelDispatch.*' --gtest_brief=1
# qemu's default CPU ("max") has dotprod and i8mm. A Cortex-A76 has dotprod only: NEON_I8MM must
# not be offered, and NEON_DOTPROD must run without i8mm (an smmla there would be SIGILL); an A72
# has neither, and only Highway's NEON is offered.
run -cpu cortex-a76 "$out/tests/kernels/kernels_matmul_test" --gtest_filter='*/NEON_DOTPROD_Q*' --gtest_brief=1
run -cpu cortex-a76 "$out/tests/kernels/kernels_elementwise_test" --gtest_filter='KernelDispatch.*' --gtest_brief=1
run -cpu cortex-a72 "$out/tests/kernels/kernels_matmul_test" --gtest_filter='*/NEON_Q4_0:*/NEON_Q6_K' --gtest_brief=1
run -cpu cortex-a72 "$out/tests/kernels/kernels_elementwise_test" --gtest_filter='KernelDispatch.*' --gtest_brief=1
# The lists are captured first: under pipefail, grep -q leaving early could SIGPIPE the emulator and
# hide a match.
a76_tests="$(qemu-aarch64 -cpu cortex-a76 "$out/tests/kernels/kernels_matmul_test" --gtest_list_tests)"
a72_tests="$(qemu-aarch64 -cpu cortex-a72 "$out/tests/kernels/kernels_matmul_test" --gtest_list_tests)"
if grep -q NEON_I8MM <<<"$a76_tests" || grep -q NEON_DOTPROD <<<"$a72_tests"; then
  echo "a table was offered on a CPU without its instructions"; status=1
fi
run "$out/tests/model/packed_model_test" --gtest_brief=1
run "$out/tests/kernels/kernels_thread_pool_test" --gtest_brief=1
run "$out/tests/model/model_golden_test" --gtest_filter='*/gemma4_e2b_like_llamacpp_gguf' --gtest_brief=1
run "$out/tests/kernels/kernels_attention_test" --gtest_brief=1
# Same answer every time on the NEON kernels (NEON_I8MM here): the demo's packed Q4_K/Q6_K, Q4_0.
run "$out/tests/runtime/determinism_test" --gtest_filter='*/demo_q4_k_m:*/gemma4_e2b_like_q4_0' --gtest_brief=1
# The C API on the demo model (a Chinese answer streamed in whole characters, cancel from another
# thread), and libgemlet.so's segments aligned to 16 KiB pages as Android 15+ and iOS load them.
GEMLET_TEST_TIME_SCALE=100 run "$out/tests/api/c_api_test" --gtest_brief=1  # emulated: far slower
# examples/c/chat.c built against the arm64 libgemlet.so, as an app would: two turns on stdin.
echo "== qemu-aarch64 examples/c/chat (over libgemlet.so)"
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude examples/c/chat.c -o "$out/chat" \
  -L"$out/src/api" -lgemlet -Wl,-rpath,"$PWD/$out/src/api"
if printf 'Who are you?\n请背诵《静夜思》。\n' | qemu-aarch64 "$out/chat" models/gemlet-demo.gguf > "$out/chat.txt"; then
  grep -q "床前明月光" "$out/chat.txt" || { cat "$out/chat.txt"; echo "chat: the poem is missing"; status=1; }
else
  echo "chat: failed"; status=1
fi
echo "== libgemlet.so LOAD segments (alignment must be 0x4000)"
if aarch64-linux-gnu-readelf -lW "$out/src/api/libgemlet.so" | awk '$1 == "LOAD" { print; if ($NF != "0x4000") bad = 1 } END { exit bad }'; then
  :
else
  echo "libgemlet.so: a LOAD segment is not 16 KiB-aligned"; status=1
fi
exit $status
