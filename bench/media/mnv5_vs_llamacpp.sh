#!/usr/bin/env bash
# Gemma 3n's vision tower, gemlet against llama.cpp (a manual check; CI has no llama.cpp): the tiny
# MobileNet-V5 checkpoint of tests/common/tiny_mnv5.h at 768 x 768 (llama.cpp's graph hard-codes the
# 16 x 16 fusion grid) converted by gemlet's mmproj writer, one 768 x 768 PNG (no resize in either
# tool), gemlet's embeddings (reference and best kernels) against llama.cpp's clip_image_encode.
#   bench/media/mnv5_vs_llamacpp.sh [BUILD_DIR] [LLAMA_CPP_DIR]
# BUILD_DIR: gemlet's build with tests (default build); LLAMA_CPP_DIR: a llama.cpp checkout built in
# its build/ (default /work/ext/llama.cpp). Exits 0 with a note when llama.cpp is absent.
# TYPE=f16 (default) writes the matrices as llama.cpp's converter does by default; with TYPE=f32
# llama.cpp (as of its checkout here) aborts scheduling the graph (GGML_ASSERT(*cur_backend_id != -1)
# in ggml_backend_sched_split_graph): an op of its MobileNet-V5 graph has no CPU kernel for F32
# weights. ggml's CPU GELU reads an FP16 table and its depthwise im2col runs in F16, so expect ~1e-3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
llama=${2:-/work/ext/llama.cpp}
if [[ ! -f $llama/tools/mtmd/clip.h || ! -f $llama/build/bin/libmtmd.so ]]; then
  echo "skipped: no llama.cpp build at $llama (tools/mtmd/clip.h, build/bin/libmtmd.so)"
  exit 0
fi
test_bin=$(find "$build" -name gemma3n_vision_test -type f -perm -u+x | head -1)
[[ -n $test_bin ]] || { echo "build gemlet's gemma3n_vision_test first (cmake --build $build --target gemma3n_vision_test)"; exit 1; }
out=$(mktemp -d /tmp/gemlet-mnv5-xcheck.XXXXXX)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$out"' EXIT
GEMLET_MNV5_XCHECK_DIR=$out GEMLET_MNV5_XCHECK_TYPE=${TYPE:-f16} "$test_bin" --gtest_filter=Gemma3nVisionLlamaCpp.Export > "$out/test.log" 2>&1 || { cat "$out/test.log"; exit 1; }
g++ -std=c++17 -O2 -o "$out/mnv5_llamacpp" "$here/mnv5_llamacpp.cc" -I"$llama/tools/mtmd" -I"$llama/include" \
    -I"$llama/ggml/include" -L"$llama/build/bin" -lmtmd -lggml -lggml-base -Wl,-rpath,"$llama/build/bin"
LLAMA_BACKEND_DIR=$llama/build/bin "$out/mnv5_llamacpp" "$out/mmproj.gguf" "$out/image.rgb" 768 "$out/llama.bin" "$out/gemlet-ref.bin" "$out/gemlet-auto.bin" \
    2> "$out/llama.log" || { tail -20 "$out/llama.log"; exit 1; }
