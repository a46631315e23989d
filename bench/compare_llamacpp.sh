#!/usr/bin/env bash
# Side-by-side speed of llama.cpp and gemlet on the same GGUF files, same thread count, in
# alternation (llama-bench, gemlet bench, llama-bench, ...: this machine is shared and noisy), and
# the ratios of their medians.
#
#   bench/compare_llamacpp.sh LLAMA_BUILD_DIR MODEL.gguf...
#
# Environment: ROUNDS (3), THREADS (2), P (512, prompt tokens), N (128, generated tokens), D (0,
# tokens of context before each test: both tools' -d, for attention at long context),
# GEMLET (build/apps/gemlet/gemlet), OUT (a new temporary folder: every run's JSON and max RSS),
# LLAMA_ARGS (more llama-bench options), GEMLET_ARGS (more gemlet bench options: `--kernels AVX2` for
# the AVX2 table, beside a llama.cpp built for AVX2 only). On a machine shared with other busy processes, run
#   OMP_WAIT_POLICY=passive LLAMA_ARGS="--poll 0" bench/compare_llamacpp.sh ...
# so that llama.cpp's threads do not busy-wait (ggml's polling and libgomp's barriers): with them
# spinning, its decode fell to a tenth here (tg16 0.30 t/s against 1.5-3.1 t/s passive).
# Prints the host's CPU model, then one markdown row per model: medians of pp and tg tokens/s of
# both, gemlet / llama.cpp, the bandwidth bound (the best of all gemlet bench's probes in the run:
# 12 before and 12 after each of its runs) and both tools' decode as a fraction of it, and peak RSS
# of both (llama-bench's from /usr/bin/time; gemlet's own VmHWM, its probes' buffers apart). The
# tools alternate which runs first in each round.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf..." >&2
  exit 2
fi
llama_dir=$1
shift
llama_bench=$llama_dir/bin/llama-bench
[[ -x $llama_bench ]] || { echo "$0: no llama-bench in $llama_dir/bin" >&2; exit 2; }
# Model paths are taken from where the script was called; it then runs from the repository root.
models=()
for model in "$@"; do
  [[ -f $model ]] || { echo "$0: no such model file: $model" >&2; exit 2; }
  models+=("$(realpath "$model")")
done
set -- "${models[@]}"
llama_bench=$(realpath "$llama_bench")
cd "$(dirname "$0")/.."
gemlet=${GEMLET:-build/apps/gemlet/gemlet}
[[ -x $gemlet ]] || { echo "$0: no gemlet binary at $gemlet (build it, or set GEMLET)" >&2; exit 2; }
rounds=${ROUNDS:-3} threads=${THREADS:-2} p=${P:-512} n=${N:-128} depth=${D:-0}
depth_args=()
[[ $depth == 0 ]] || depth_args=(-d "$depth")
echo "llama-bench options: -p $p -n $n ${depth_args[*]} -t $threads -r 1 ${LLAMA_ARGS:-} (OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-});" \
     "gemlet bench: -p $p -n $n ${depth_args[*]} -t $threads -r 1 ${GEMLET_ARGS:-}" >&2
out=${OUT:-$(mktemp -d /tmp/compare_llamacpp.XXXXXX)}
mkdir -p "$out"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores; threads $threads;" \
     "llama.cpp $("$llama_bench" --version 2>&1 | grep -o 'commit [0-9a-f]*' || echo '?')," \
     "gemlet $(git rev-parse --short HEAD 2>/dev/null || echo '?'); raw results in $out" >&2

for model in "$@"; do
  [[ -z ${SUMMARY_ONLY:-} ]] || break  # SUMMARY_ONLY=1 OUT=DIR: the table of runs already in DIR
  [[ -f $model ]] || { echo "$0: no such model file: $model" >&2; exit 2; }
  tag=$(basename "$model" .gguf)
  for ((i = 1; i <= rounds; ++i)); do
    # Which tool goes first alternates between rounds: neither always meets the warmer machine.
    for tool in $( ((i % 2)) && echo "llama gemlet" || echo "gemlet llama"); do
      if [[ $tool == llama ]]; then
        echo "[$tag] round $i/$rounds: llama-bench" >&2
        /usr/bin/time -f %M -o "$out/$tag.llama.$i.rss" \
          "$llama_bench" -m "$model" -p "$p" -n "$n" "${depth_args[@]}" -t "$threads" -r 1 ${LLAMA_ARGS:-} -o json > "$out/$tag.llama.$i.json"
      else
        echo "[$tag] round $i/$rounds: gemlet bench" >&2
        "$gemlet" bench -m "$model" -p "$p" -n "$n" "${depth_args[@]}" -t "$threads" -r 1 ${GEMLET_ARGS:-} --json > "$out/$tag.gemlet.$i.json"
      fi
    done
  done
done

python3 - "$out" "$rounds" "$p" "$n" "$depth" "$@" <<'PY'
import json, os, statistics, sys
out, rounds, p, n, depth, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
at = f" @ d{depth}" if depth else ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
print(f"Host CPU: {cpu}, {os.cpu_count()} cores; medians of {rounds} alternating rounds. The bound: the best of every "
      "gemlet bench bandwidth probe in these runs (12 probes before and after each run); both tools' decode is shown "
      "as a fraction of it, from the bytes a token reads (gemlet's count: weights + KV).")
print()

def speeds(tool, tag, key, value):
    runs = [json.load(open(f"{out}/{tag}.{tool}.{i}.json")) for i in range(1, rounds + 1)]
    return [t["avg_ts"] for r in runs for t in r if t[key] == value and t["n_prompt" if key == "n_gen" else "n_gen"] == 0], runs

print(f"| model | pp{p}{at} llama.cpp | pp{p}{at} gemlet | pp ratio | tg{n}{at} llama.cpp | tg{n}{at} gemlet | tg ratio "
      f"| bound GB/s | llama.cpp of bound | gemlet of bound | peak RSS llama.cpp | peak RSS gemlet | RSS ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for model in models:
    tag = os.path.basename(model)[:-len(".gguf")] if model.endswith(".gguf") else os.path.basename(model)
    med = lambda v: statistics.median(v) if v else float("nan")
    lpp, _ = speeds("llama", tag, "n_prompt", p)
    gpp, gruns = speeds("gemlet", tag, "n_prompt", p)
    ltg, _ = speeds("llama", tag, "n_gen", n)
    gtg, _ = speeds("gemlet", tag, "n_gen", n)
    tg_tests = [t for r in gruns for t in r if t.get("n_gen") == n and t.get("n_prompt") == 0]
    bound = max(t["mem_read_bw_gbs"] for r in gruns for t in r) * 1e9
    per_token = med([t["weight_bytes_per_token"] + t["kv_bytes_per_token"] for t in tg_tests]) if tg_tests else float("nan")
    frac = lambda tg: f"{med(tg) * per_token / bound:.0%}" if tg else "-"
    lrss = med([int(open(f"{out}/{tag}.llama.{i}.rss").read().split()[-1]) * 1024 for i in range(1, rounds + 1)])
    grss = med([r[0]["peak_rss_bytes"] for r in gruns])
    ratio = lambda a, b: f"{med(a) / med(b):.2f}x" if a and b else "-"
    mib = lambda b: f"{b / 2**20:.0f} MiB"
    print(f"| {tag} | {med(lpp):.2f} | {med(gpp):.2f} | {ratio(gpp, lpp)} | {med(ltg):.2f} | {med(gtg):.2f} | "
          f"{ratio(gtg, ltg)} | {bound / 1e9:.1f} | {frac(ltg)} | {frac(gtg)} | {mib(lrss)} | {mib(grss)} | {grss / lrss:.2f} |")
PY
