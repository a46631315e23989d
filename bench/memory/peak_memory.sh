#!/bin/sh
# Runs a command and samples it from outside every 20 ms through /proc/PID/smaps_rollup, as a phone's
# memory accounting sees it: prints the peak anonymous memory (what iOS and Android count) and the
# peak resident set.   usage: bench/memory/peak_memory.sh COMMAND [ARGS...]
set -eu
"$@" > /tmp/peak_memory.out 2>&1 &
pid=$!
peak_anon=0
peak_rss=0
while kill -0 "$pid" 2>/dev/null; do
  if [ -r "/proc/$pid/smaps_rollup" ]; then
    set -- $(awk '/^Rss:/ {r=$2} /^Anonymous:/ {a=$2} END {print r+0, a+0}' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0 0)
    [ "$1" -gt "$peak_rss" ] && peak_rss=$1
    [ "$2" -gt "$peak_anon" ] && peak_anon=$2
  fi
  sleep 0.02
done
wait "$pid" || { echo "the command failed:"; cat /tmp/peak_memory.out; exit 1; }
echo "peak anonymous $((peak_anon / 1024)) MiB, peak RSS $((peak_rss / 1024)) MiB"
