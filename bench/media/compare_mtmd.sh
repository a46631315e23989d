#!/usr/bin/env bash
# Encode time of one image or clip through gemlet (`gemlet bench --image/--audio`: decode, preprocess,
# tower: the tested path) and llama.cpp's llama-mtmd-cli (its "mtmd batch encoding done in N ms": the
# tower alone, the image already preprocessed), alternating rounds, same files, same threads; prints
# each round and the medians. Run on an otherwise idle machine (no build beside it). BASE_GEMLET
# (optional): another gemlet build timed in the same rounds (before/after a change).
#
#   bench/media/compare_mtmd.sh GEMLET LLAMA_BIN_DIR MODEL.gguf MMPROJ.gguf image|audio FILE ROUNDS THREADS [BASE_GEMLET]
set -euo pipefail
[ $# -eq 8 ] || [ $# -eq 9 ] || { sed -n 2,10p "$0"; exit 2; }
gemlet=$1 bin=$2 model=$3 mmproj=$4 kind=$5 file=$6 rounds=$7 threads=$8 base=${9:-}
prompt="Describe this image."
[ "$kind" = audio ] && prompt="Transcribe this audio."
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
g_all=() l_all=() t_all=() b_all=() bt_all=()
for r in $(seq 1 "$rounds"); do
  if [ -n "$base" ]; then
    j=$("$base" bench -m "$model" --mmproj "$mmproj" --"$kind" "$file" -t "$threads" -r 1 --json)
    b=$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["encode_ms_median"])')
    bt=$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("first_token_ms_median", 0))')
    echo "round $r: base gemlet ${b} ms (first token ${bt} ms)"
    b_all+=("$b") bt_all+=("$bt")
  fi
  j=$("$gemlet" bench -m "$model" --mmproj "$mmproj" --"$kind" "$file" -t "$threads" -r 1 --json)
  g=$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin)["encode_ms_median"])')
  t=$(printf '%s' "$j" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("first_token_ms_median", 0))')
  rss=$(printf '%s' "$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["peak_rss_bytes"]>>20, d["peak_anon_bytes"]>>20)')
  out=$(/usr/bin/time -f "maxrss_kb %M" "$bin/llama-mtmd-cli" -m "$model" --mmproj "$mmproj" --"$kind" "$file" -p "$prompt" \
        -n 1 -t "$threads" --temp 0 --jinja 2>&1 || true)
  l=$(printf '%s' "$out" | sed -n 's/.*mtmd batch encoding done in \([0-9]*\) ms.*/\1/p' | tail -1)
  lrss=$(printf '%s' "$out" | sed -n 's/^maxrss_kb \([0-9]*\)/\1/p' | tail -1)
  [ -n "$l" ] || { printf '%s\n' "$out" | tail -20; echo "llama-mtmd-cli gave no encode time" >&2; exit 1; }
  echo "round $r (load $(cut -d" " -f1 /proc/loadavg)): gemlet ${g} ms (first token ${t} ms; peak RSS/anon MiB ${rss}), llama.cpp ${l} ms (max RSS $((lrss / 1024)) MiB)"
  g_all+=("$g") l_all+=("$l") t_all+=("$t")
done
gm=$(printf '%s\n' "${g_all[@]}" | median) lm=$(printf '%s\n' "${l_all[@]}" | median) tm=$(printf '%s\n' "${t_all[@]}" | median)
if [ -n "$base" ]; then
  bm=$(printf '%s\n' "${b_all[@]}" | median) btm=$(printf '%s\n' "${bt_all[@]}" | median)
  echo "median: base gemlet ${bm} ms (first token ${btm} ms), base/gemlet $(python3 -c "print(round($bm/$gm, 2))")x"
fi
echo "median: gemlet ${gm} ms, llama.cpp ${lm} ms, llama.cpp/gemlet $(python3 -c "print(round($lm/$gm, 2))")x; gemlet first token ${tm} ms"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $threads threads"
