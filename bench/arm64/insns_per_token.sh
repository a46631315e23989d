#!/usr/bin/env bash
# Instructions per prefill token and per decoded token on aarch64, gemlet beside llama.cpp, counted
# under qemu-aarch64 by our TCG plugin (insn_count.c). ARM speed cannot be timed on an x86 host;
# the instruction count is what the kernels decide and what can be measured here.
#
# Each figure is a difference of two whole-process counts that differ only in the tokens:
#   prefill = (count(P2 prompt tokens) - count(P1)) / (P2 - P1), no decoding;
#   decode  = (count(G2 generated) - count(G1)) / (G2 - G1), after a 1-token prompt (llama-bench's
#             tg test decodes from an empty context the same way);
# loading, repacking and set-up cancel. One thread (the counter is exact single-threaded, and no
# thread pool spins), gemlet's gemlet_token_probe against llama-bench on the same file.
#
#   bench/arm64/insns_per_token.sh [-k KERNELS] [-c QEMU_CPU] MODEL.gguf...
#   env: GEMLET_ARM64_BUILD (default build-arm64), LLAMA_ARM64_BIN (default ../ext/llama-arm64/bin),
#        P1 P2 G1 G2 (default 16 80 4 20), LLAMA_COUNTS (a folder that keeps llama.cpp's counts per
#        file and test between runs, when only gemlet changed; default: none)
# Builds: the probe with scripts/test-arm64.sh's cross build (target gemlet_token_probe); llama.cpp
# cross-built with -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+i8mm (bench/RESULTS.md);
# for -c cortex-a76 (dotprod, no i8mm) a second llama.cpp build with armv8.2-a+dotprod, whose
# kernels that CPU can run.
set -euo pipefail
cd "$(dirname "$0")/../.."
kernels=auto
cpu=max
while getopts "k:c:" opt; do
  case $opt in
    k) kernels=$OPTARG ;;
    c) cpu=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-k KERNELS] [-c QEMU_CPU] MODEL.gguf..." >&2; exit 2; }
build=${GEMLET_ARM64_BUILD:-build-arm64}
llama=${LLAMA_ARM64_BIN:-../ext/llama-arm64/bin}
P1=${P1:-16} P2=${P2:-80} G1=${G1:-4} G2=${G2:-20}
probe=$build/bench/arm64/gemlet_token_probe
[ -x "$probe" ] || { echo "no $probe: cmake --build $build --target gemlet_token_probe" >&2; exit 1; }
[ -x "$llama/llama-bench" ] || { echo "no $llama/llama-bench (LLAMA_ARM64_BIN)" >&2; exit 1; }
plugin=$(mktemp -d)/insn_count.so
gcc -shared -fPIC -O2 -o "$plugin" bench/arm64/insn_count.c
count() {  # count CMD...: the instructions CMD executes
  local out
  out=$(mktemp)
  qemu-aarch64 -cpu "$cpu" -plugin "$plugin,out=$out" "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  awk '{print $2}' "$out"
  rm -f "$out"
}
# llama.cpp links libgomp from the cross toolchain's sysroot.
lcount() {
  local key
  key=${LLAMA_COUNTS:+$LLAMA_COUNTS/$(basename "$1")-$cpu-$(echo "${@:2}" | tr ' ' '_')}
  if [ -n "$key" ] && [ -s "$key" ]; then cat "$key"; return; fi
  local n
  n=$(count -L /usr/aarch64-linux-gnu "$llama/llama-bench" -m "$1" -t 1 -r 1 --no-warmup "${@:2}")
  if [ -n "$key" ]; then mkdir -p "$LLAMA_COUNTS"; echo "$n" > "$key"; fi
  echo "$n"
}
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) / n / 1e6 }'; }

echo "CPU (host): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "qemu -cpu $cpu, gemlet kernels $kernels, 1 thread; M instructions per token (prefill: P=$P1..$P2, decode: G=$G1..$G2)"
echo "| file | gemlet prefill | llama.cpp prefill | ratio | gemlet decode | llama.cpp decode | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for model in "$@"; do
  gp1=$(count "$probe" "$model" "$P1" 0 1 "$kernels"); gp2=$(count "$probe" "$model" "$P2" 0 1 "$kernels")
  gg1=$(count "$probe" "$model" 1 "$G1" 1 "$kernels"); gg2=$(count "$probe" "$model" 1 "$G2" 1 "$kernels")
  lp1=$(lcount "$model" -p "$P1" -n 0); lp2=$(lcount "$model" -p "$P2" -n 0)
  lg1=$(lcount "$model" -p 0 -n "$G1"); lg2=$(lcount "$model" -p 0 -n "$G2")
  gp=$(per "$gp1" "$gp2" $((P2 - P1))); lp=$(per "$lp1" "$lp2" $((P2 - P1)))
  gd=$(per "$gg1" "$gg2" $((G2 - G1))); ld=$(per "$lg1" "$lg2" $((G2 - G1)))
  echo "| $(basename "$model") | $gp | $lp | $(awk -v a="$gp" -v b="$lp" 'BEGIN{printf "%.2f", a/b}') | $gd | $ld | $(awk -v a="$gd" -v b="$ld" 'BEGIN{printf "%.2f", a/b}') |"
done
