#!/bin/sh
# A long chat under a memory budget (#17): finds the model's floor F as the planner computes it, runs
# a scripted chat of TURNS turns (Chinese and English) under BUDGET (default F + 10%) with the peak
# anonymous memory sampled from outside every 20 ms, and checks that F - 10% is refused before
# loading with one line.   usage: bench/memory/budget_chat.sh GEMLET MODEL [TURNS] [BUDGET_MIB]
set -eu
gemlet=$1
model=$2
turns=${3:-100}
here=$(dirname "$0")
# The floor, from the line a given budget prints: "(memory budget B MiB, this model's floor F MiB: ...)".
floor=$(echo hi | "$gemlet" run -m "$model" --mem-budget 100G -n 1 --temp 0 2>&1 >/dev/null | sed -n 's/.*floor \([0-9]*\) MiB.*/\1/p')
[ -n "$floor" ] || { echo "no floor printed"; exit 1; }
budget=${4:-$(((floor * 11 + 9) / 10))}
low=$((floor * 9 / 10))
echo "model $(basename "$model"): floor $floor MiB; chat under $budget MiB; refused at $low MiB"
script=$(mktemp)
i=0
while [ $i -lt "$turns" ]; do
  case $((i % 4)) in
    0) echo "请用一句话介绍你自己。" ;;
    1) echo "Tell me a short story about a cat." ;;
    2) echo "把这句话改得更礼貌：明天把报告发给我。" ;;
    *) echo "What is 17 times 23? Explain the steps." ;;
  esac
  i=$((i + 1))
done > "$script"
start=$(date +%s)
"$here/peak_memory.sh" sh -c "exec '$gemlet' chat -m '$model' --mem-budget ${budget}M -n 48 --temp 0 < '$script'"
end=$(date +%s)
grep -c "were dropped" /tmp/peak_memory.out | sed 's/^/turns that dropped old messages: /'
grep "memory budget" /tmp/peak_memory.out | head -1
echo "answers: $(grep -vc '^(' /tmp/peak_memory.out) lines in $((end - start)) s"
if out=$(echo hi | "$gemlet" run -m "$model" --mem-budget ${low}M -n 1 2>&1); then
  echo "FAIL: a budget under the floor ran"; exit 1
fi
echo "under the floor: $out"
rm -f "$script"
