#!/usr/bin/env bash
# CPU-seconds per generated token (what a phone's battery pays), gemlet beside llama.cpp on the
# same GGUF files, same thread count, alternating which tool runs first.
#
#   bench/cpu_per_token.sh LLAMA_BUILD_DIR MODEL.gguf...
#
# Each tool decodes N1 and then N2 tokens (llama-bench and gemlet bench, -p 0 -r 1, no prompt) under
# /usr/bin/time; (user + sys at N2 - user + sys at N1) / (N2 - N1) is the CPU time of one decoded
# token with whatever the tool's threads do meanwhile (spinning between steps included), the load,
# warm-up and gemlet's bandwidth probes cancelling out. Also wall seconds per token the same way,
# and their ratio: how many cores a token keeps busy. Medians of ROUNDS (3).
# Environment: ROUNDS, THREADS (2), N1 (16), N2 (144), GEMLET (build/apps/gemlet/gemlet), LLAMA_ARGS.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf..." >&2
  exit 2
fi
llama_bench=$(realpath "$1/bin/llama-bench")
shift
[[ -x $llama_bench ]] || { echo "$0: no llama-bench in the build dir" >&2; exit 2; }
models=()
for model in "$@"; do
  [[ -f $model ]] || { echo "$0: no such model file: $model" >&2; exit 2; }
  models+=("$(realpath "$model")")
done
cd "$(dirname "$0")/.."
gemlet=${GEMLET:-build/apps/gemlet/gemlet}
[[ -x $gemlet ]] || { echo "$0: no gemlet binary at $gemlet" >&2; exit 2; }
rounds=${ROUNDS:-3} threads=${THREADS:-2} n1=${N1:-16} n2=${N2:-144}
out=$(mktemp -d /tmp/cpu_per_token.XXXXXX)
echo "Host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; $threads threads;" \
     "decode of $n1 and $n2 tokens, medians of $rounds rounds; raw results in $out"
echo
run() {  # tool n model round -> "cpu wall" seconds in $out
  local tool=$1 n=$2 model=$3 tag=$4
  if [[ $tool == llama ]]; then
    /usr/bin/time -f "%U %S %e" -o "$out/$tag" "$llama_bench" -m "$model" -p 0 -n "$n" -t "$threads" -r 1 ${LLAMA_ARGS:-} > /dev/null 2>&1
  else
    /usr/bin/time -f "%U %S %e" -o "$out/$tag" "$gemlet" bench -m "$model" -p 0 -n "$n" -t "$threads" -r 1 --ttft-prompt 0 \
      --bandwidth-mib 16 > /dev/null 2>&1
  fi
}
echo "| model | llama.cpp CPU-ms/token | gemlet CPU-ms/token | gemlet / llama.cpp | llama.cpp cores busy | gemlet cores busy |"
echo "|---|---:|---:|---:|---:|---:|"
for model in "${models[@]}"; do
  tag=$(basename "$model" .gguf)
  for ((i = 1; i <= rounds; ++i)); do
    for tool in $( ((i % 2)) && echo "llama gemlet" || echo "gemlet llama"); do
      run "$tool" "$n1" "$model" "$tag.$tool.$i.n1"
      run "$tool" "$n2" "$model" "$tag.$tool.$i.n2"
    done
  done
  python3 - "$out" "$tag" "$rounds" "$n1" "$n2" <<'PY'
import statistics, sys
out, tag, rounds, n1, n2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def per_token(tool):
    cpu, wall = [], []
    for i in range(1, rounds + 1):
        a = [float(x) for x in open(f"{out}/{tag}.{tool}.{i}.n1").read().split()[-3:]]
        b = [float(x) for x in open(f"{out}/{tag}.{tool}.{i}.n2").read().split()[-3:]]
        cpu.append((b[0] + b[1] - a[0] - a[1]) / (n2 - n1))
        wall.append((b[2] - a[2]) / (n2 - n1))
    return statistics.median(cpu), statistics.median(wall)
lc, lw = per_token("llama")
gc, gw = per_token("gemlet")
print(f"| {tag} | {lc * 1e3:.1f} | {gc * 1e3:.1f} | {gc / lc:.2f} | {lc / lw:.2f} | {gc / gw:.2f} |")
PY
done
