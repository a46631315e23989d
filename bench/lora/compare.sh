#!/usr/bin/env bash
# What one LoRA adapter costs: prefill (pp) and decode (tg) speed of the base and of the base with the
# adapter, in gemlet (`gemlet bench`, the tested path) and in llama.cpp (llama-batched-bench, one
# sequence, --lora), alternating rounds, same files, same threads; prints each round and the medians,
# and each tool's adapter/base ratio. Run on an otherwise idle machine (no build beside it).
#
#   bench/lora/compare.sh GEMLET LLAMA_BIN_DIR MODEL.gguf ADAPTER.gguf ROUNDS THREADS [PP TG]
set -euo pipefail
[ $# -ge 6 ] || { sed -n 2,7p "$0"; exit 2; }
gemlet=$1 bin=$2 model=$3 adapter=$4 rounds=$5 threads=$6 pp=${7:-128} tg=${8:-64}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
gem() {  # gemlet bench [--lora A]: "pp tg" in t/s
  "$gemlet" bench -m "$model" -p "$pp" -n "$tg" -t "$threads" -r 1 --ttft-prompt 0 --json "$@" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); r={("pp" if t["n_prompt"] else "tg"): t["avg_ts"] for t in d}; print(r["pp"], r["tg"])'
}
lla() {  # llama-batched-bench [--lora A]: "pp tg" in t/s
  "$bin/llama-batched-bench" -m "$model" -c $((pp + tg + 16)) -b 512 -ub 512 -npp "$pp" -ntg "$tg" -npl 1 -t "$threads" "$@" 2>/dev/null |
    awk -F'|' 'NF > 9 && $2 ~ /[0-9]/ {gsub(/ /, "", $7); gsub(/ /, "", $9); print $7, $9}' | tail -1
}
declare -A all
for r in $(seq 1 "$rounds"); do
  read -r a b <<<"$(gem)";                all[gb_pp]+="$a " all[gb_tg]+="$b "
  read -r a b <<<"$(gem --lora "$adapter")"; all[gl_pp]+="$a " all[gl_tg]+="$b "
  read -r a b <<<"$(lla)";                all[lb_pp]+="$a " all[lb_tg]+="$b "
  read -r a b <<<"$(lla --lora "$adapter")"; all[ll_pp]+="$a " all[ll_tg]+="$b "
  echo "round $r: gemlet base $(echo ${all[gb_pp]} | awk '{print $NF}')/$(echo ${all[gb_tg]} | awk '{print $NF}')," \
       "lora $(echo ${all[gl_pp]} | awk '{print $NF}')/$(echo ${all[gl_tg]} | awk '{print $NF}');" \
       "llama.cpp base $(echo ${all[lb_pp]} | awk '{print $NF}')/$(echo ${all[lb_tg]} | awk '{print $NF}')," \
       "lora $(echo ${all[ll_pp]} | awk '{print $NF}')/$(echo ${all[ll_tg]} | awk '{print $NF}') (pp/tg t/s)"
done
m() { printf '%s\n' ${all[$1]} | median; }
for k in gb_pp gb_tg gl_pp gl_tg lb_pp lb_tg ll_pp ll_tg; do declare "$k=$(m $k)"; done
echo "median pp$pp t/s: gemlet base $gb_pp, lora $gl_pp ($(python3 -c "print(round($gl_pp/$gb_pp,2))")x);" \
     "llama.cpp base $lb_pp, lora $ll_pp ($(python3 -c "print(round($ll_pp/$lb_pp,2))")x); lora gemlet/llama.cpp $(python3 -c "print(round($gl_pp/$ll_pp,2))")x"
echo "median tg$tg t/s: gemlet base $gb_tg, lora $gl_tg ($(python3 -c "print(round($gl_tg/$gb_tg,2))")x);" \
     "llama.cpp base $lb_tg, lora $ll_tg ($(python3 -c "print(round($ll_tg/$lb_tg,2))")x); lora gemlet/llama.cpp $(python3 -c "print(round($gl_tg/$ll_tg,2))")x"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $threads threads"
