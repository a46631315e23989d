#!/usr/bin/env bash
# Time to first token from process start (#21 item 4): a chat prompt of about 200 tokens
# (bench/ttft/prompt.txt, English and Chinese), one new token, the page cache warm (and gemlet's
# packed-weight cache built by a first, untimed run), both tools as whole processes under
# /usr/bin/time, alternating which runs first, medians.
#
#   bench/ttft/ttft.sh LLAMA_BUILD_DIR MODEL.gguf
#
# Environment: ROUNDS (5), THREADS (2), GEMLET (build/apps/gemlet/gemlet), PROMPT (the file).
# gemlet: `gemlet run -n 1 --stats` (its chat template; --stats gives load, prompt tokens and
# prefill). llama.cpp: `llama-completion -n 1 -no-cnv --no-warmup` on the same text wrapped in the
# Gemma turn markers by hand (its own template code is not what is timed here).
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf" >&2; exit 2; }
llama=$(realpath "$1")/bin/llama-completion
model=$(realpath "$2")
[[ -x $llama ]] || { echo "$0: no llama-completion in $1/bin" >&2; exit 2; }
[[ -f $model ]] || { echo "$0: no such model file: $2" >&2; exit 2; }
cd "$(dirname "$0")/../.."
gemlet=${GEMLET:-build/apps/gemlet/gemlet}
prompt_file=${PROMPT:-bench/ttft/prompt.txt}
rounds=${ROUNDS:-5} threads=${THREADS:-2}
[[ -x $gemlet ]] || { echo "$0: no gemlet binary at $gemlet" >&2; exit 2; }
prompt=$(cat "$prompt_file")
out=$(mktemp -d /tmp/ttft.XXXXXX)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores; threads $threads; raw output in $out" >&2

run_gemlet() { /usr/bin/time -f %e -o "$out/gemlet.$1.time" "$gemlet" run -m "$model" -t "$threads" -n 1 --temp 0 --stats -p "$prompt" > "$out/gemlet.$1.out" 2>&1; }
run_llama() {
  /usr/bin/time -f %e -o "$out/llama.$1.time" "$llama" -m "$model" -t "$threads" -n 1 --temp 0 -no-cnv --no-warmup \
    -p "<start_of_turn>user"$'\n'"$prompt<end_of_turn>"$'\n'"<start_of_turn>model"$'\n' > "$out/llama.$1.out" 2>&1 < /dev/null
}
# Warm the page cache for both and build gemlet's packed-weight cache.
run_gemlet warm; run_llama warm
for ((i = 1; i <= rounds; ++i)); do
  if ((i % 2)); then run_llama "$i"; run_gemlet "$i"; else run_gemlet "$i"; run_llama "$i"; fi
done
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(tool):
    return statistics.median(float(open(f"{out}/{tool}.{i}.time").read().split()[-1]) for i in range(1, rounds + 1))
g, l = med("gemlet"), med("llama")
stats = open(f"{out}/gemlet.1.out").read()
lo = open(f"{out}/llama.1.out").read()
tokens = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", lo)
print(f"gemlet whole process {g:.2f} s (median of {rounds}); llama.cpp {l:.2f} s; gemlet / llama.cpp {g / l:.2f}")
for line in stats.splitlines():
    if re.search(r"load|first token|prefill|prompt", line, re.I): print("  gemlet:", line.strip())
if tokens: print(f"  llama.cpp: prompt eval {float(tokens.group(1)) / 1000:.2f} s for {tokens.group(2)} tokens")
PY
