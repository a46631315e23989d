#!/usr/bin/env bash
# Time to first token from process start (#21 item 4): a chat prompt of about 200 tokens
# (bench/ttft/prompt.txt, English and Chinese), one new token, the page cache warm (and gemlet's
# packed-weight cache built by a first, untimed run), alternating which tool runs first, medians.
# Two times per run, both from the moment the process is started: the first byte of the answer on
# stdout (what a user waits for) and the process's exit (which also counts what a tool does after
# the token: gemlet's API evaluates the last token into the cache so that a chat can go on, and
# both unmap and free the model).
#
#   bench/ttft/ttft.sh LLAMA_BUILD_DIR MODEL.gguf
#
# Environment: ROUNDS (5), THREADS (2), GEMLET (build/apps/gemlet/gemlet), PROMPT (the file).
# gemlet: `gemlet run -n 1 --stats` (its chat template; --stats gives load, prompt tokens and
# prefill). llama.cpp: `llama-completion -n 1 -no-cnv --no-warmup --no-display-prompt` on the same
# text wrapped in the model's turn markers by hand (Gemma 4: <|turn>, earlier: <start_of_turn>; its
# own template code is not what is timed here).
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
[[ -f $prompt_file ]] || { echo "$0: no prompt file $prompt_file" >&2; exit 2; }
arch=$("$gemlet" inspect "$model" 2>/dev/null | awk '$1 == "general.architecture" { gsub(/"/, "", $3); print $3; exit }')
[[ -n $arch ]] || { echo "$0: cannot read general.architecture of $model" >&2; exit 2; }
out=$(mktemp -d /tmp/ttft.XXXXXX)
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores; threads $threads; $arch; raw output in $out" >&2

python3 - "$out" "$rounds" "$threads" "$gemlet" "$llama" "$model" "$prompt_file" "$arch" <<'PY'
import re, statistics, subprocess, sys, time
out, rounds, threads, gemlet, llama, model, prompt_file, arch = sys.argv[1:]
rounds = int(rounds)
prompt = open(prompt_file, encoding="utf-8").read().rstrip("\n")
if arch == "gemma4":
    wrapped = f"<|turn>user\n{prompt}<turn|>\n<|turn>model\n"
else:
    wrapped = f"<start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n"
cmds = {
    "gemlet": [gemlet, "run", "-m", model, "-t", threads, "-n", "1", "--temp", "0", "--stats", "-p", prompt],
    "llama": [llama, "-m", model, "-t", threads, "-n", "1", "--temp", "0", "-no-cnv", "--no-warmup",
              "--no-display-prompt", "-p", wrapped],
}

def run(tool, tag):
    """Seconds from the start to the first stdout byte and to the exit; stderr kept in a file."""
    with open(f"{out}/{tool}.{tag}.err", "wb") as err:
        start = time.monotonic()
        p = subprocess.Popen(cmds[tool], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        first = p.stdout.read(1)
        t_first = time.monotonic() - start
        rest = p.stdout.read()
        rc = p.wait()
        t_exit = time.monotonic() - start
    if rc != 0 or not first:
        sys.exit(f"{tool} failed (rc {rc}); see {out}/{tool}.{tag}.err")
    open(f"{out}/{tool}.{tag}.out", "wb").write(first + rest)
    return t_first, t_exit

run("gemlet", "warm"); run("llama", "warm")  # page cache, and gemlet's packed-weight cache
times = {"gemlet": [], "llama": []}
for i in range(1, rounds + 1):
    order = ["llama", "gemlet"] if i % 2 else ["gemlet", "llama"]
    for tool in order: times[tool].append(run(tool, i))
for tool in times:
    with open(f"{out}/{tool}.times", "w") as f:
        for a, b in times[tool]: f.write(f"{a:.3f} {b:.3f}\n")
med = lambda tool, k: statistics.median(t[k] for t in times[tool])
gf, ge, lf, le = med("gemlet", 0), med("gemlet", 1), med("llama", 0), med("llama", 1)
print(f"first token: gemlet {gf:.2f} s, llama.cpp {lf:.2f} s, gemlet / llama.cpp {gf / lf:.2f} (medians of {rounds})")
print(f"whole process: gemlet {ge:.2f} s, llama.cpp {le:.2f} s, gemlet / llama.cpp {ge / le:.2f}")
print("  gemlet rounds (first token / exit):", ", ".join(f"{a:.2f}/{b:.2f}" for a, b in times["gemlet"]))
print("  llama.cpp rounds (first token / exit):", ", ".join(f"{a:.2f}/{b:.2f}" for a, b in times["llama"]))
stats = open(f"{out}/gemlet.1.err", encoding="utf-8", errors="replace").read()
for line in stats.splitlines():
    if line.startswith("[stats]"): print("  gemlet:", line.strip())
lo = open(f"{out}/llama.1.err", encoding="utf-8", errors="replace").read()
tokens = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", lo)
if tokens: print(f"  llama.cpp: prompt eval {float(tokens.group(1)) / 1000:.2f} s for {tokens.group(2)} tokens")
PY
