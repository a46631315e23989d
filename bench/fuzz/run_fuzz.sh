#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz for a number of executions each (or a time limit) and
# prints one markdown table row per target: executions, seconds, executions per second, coverage,
# corpus growth and crashes. New corpus entries are merged into tests/fuzz/corpora/TARGET
# (-merge=1: only those that add coverage); a crash input is copied there too, so the replay ctest
# fails until it is fixed.
#
#   bench/fuzz/run_fuzz.sh [--build DIR] [--jobs J] [TARGET[:FORMAT][=RUNS] ...]
#
# TARGET:FORMAT holds fuzz_image (png, jpeg, webp, heic) or fuzz_audio (wav, flac, ogg, mp3) to one
# decoder (GEMLET_FUZZ_FORMAT), on the target's whole corpus: `image:png=1000000`.
# Default: every target, 10 M executions for http_parser, http_body and json_schema, 1 M for the
# others, 20 minutes at most each. The build directory (default build-fuzz) is configured with clang and
# -fsanitize=fuzzer-no-link,address,undefined for every library (tests/fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-fuzz
jobs=2
max_seconds=1200
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-seconds) max_seconds=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(http_parser=10000000 http_body=10000000 json_schema=10000000 http_request=1000000
                                     hf_config=1000000 chat_format=1000000 safetensors=1000000 tokenizer_json=1000000
                                     session=1000000 delta=1000000 image=1000000 audio=1000000)
names=()
for t in "${targets[@]}"; do
  spec=${t%%=*}
  names+=("fuzz_${spec%%:*}")
done
cmake --build "$build" -j "$jobs" --target "${names[@]}" > /dev/null

echo "| target | executions | seconds | exec/s | coverage (edges) | corpus files (before -> after) | crashes |"
echo "|---|---|---|---|---|---|---|"
for t in "${targets[@]}"; do
  spec=${t%%=*}
  name=${spec%%:*}
  format=""
  [ "$spec" = "$name" ] || format=${spec#*:}
  runs=${t#*=}
  [ "$runs" = "$t" ] && runs=1000000
  bin=$(find "$build" -name "fuzz_$name" -type f -perm -u+x | head -1)
  corpus=tests/fuzz/corpora/$name
  work=$(mktemp -d "/tmp/gemlet-fuzz-$name-XXXXXX")
  before=$(ls "$corpus" | wc -l)
  # The log and the crash inputs go beside the new corpus, not in it: -merge=1 below reads every
  # file there (a log merged in once became a corpus input, and a crash would crash the merge).
  log=$work.log
  artifacts=$work.artifacts
  mkdir -p "$artifacts"
  start=$(date +%s.%N)
  set +e
  GEMLET_FUZZ_FORMAT=$format ASAN_OPTIONS=detect_leaks=1 "$bin" "$work" "$corpus" -runs="$runs" -max_total_time="$max_seconds" -max_len=8192 \
    -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts/" -print_final_stats=1 > "$log" 2>&1
  status=$?
  set -e
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  crashes=0
  for c in "$artifacts"/crash-* "$artifacts"/timeout-* "$artifacts"/oom-* "$artifacts"/leak-*; do
    [ -e "$c" ] || continue
    crashes=$((crashes + 1))
    cp "$c" "$corpus/regression-$(basename "$c")"
  done
  [ $status -eq 0 ] || [ $crashes -gt 0 ] || { tail -20 "$log" >&2; echo "fuzz_$name failed (status $status)" >&2; }
  "$bin" -merge=1 -artifact_prefix="$artifacts/" "$corpus" "$work" > /dev/null 2>&1 || true
  after=$(ls "$corpus" | wc -l)
  printf '| %s | %s | %.0f | %.0f | %s | %s -> %s | %s |\n' "$name${format:+ ($format)}" "$execs" "$seconds" \
    "$(awk -v n="$execs" -v s="$seconds" 'BEGIN { print n / s }')" "$cov" "$before" "$after" "$crashes"
  rm -rf "$work" "$log" "$artifacts"
done
