#!/usr/bin/env bash
# Patch size vs full size for a realistic update: a gemma3-1b-shaped model (random weights, Gemma 3's
# vocabulary) quantized to Q4_K_M, then again with the FFN tensors of layers 0-3 re-quantized to
# Q8_0; `gemlet diff` between them, `gemlet patch` back (peak RSS: apply streams), cmp with NEW.
#   bench/delta/run.sh [BUILD_DIR] [WORK_DIR]    (results: bench/delta/RESULTS.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
work=${2:-$(mktemp -d /tmp/gemlet-delta-bench-XXXXXX)}
g=$build/apps/gemlet/gemlet
tok=../shared/testdata/tokenizer/gemma3_tokenizer.json.xz
mkdir -p "$work"
[ -f "$work/base-f16.gguf" ] || "$g" synth --preset gemma3-1b --type F16 --seed 1 --tokenizer "$tok" -o "$work/base-f16.gguf"
[ -f "$work/old.gguf" ] || "$g" quantize "$work/base-f16.gguf" "$work/old.gguf" Q4_K_M
[ -f "$work/new.gguf" ] || "$g" quantize "$work/base-f16.gguf" "$work/new.gguf" Q4_K_M \
  --tensor-type 'blk\.[0-3]\.ffn_(gate|up|down)\.weight=Q8_0'
measure() { /usr/bin/time -f "  %e s, peak RSS %M KiB" "$@"; }
echo "== gemlet diff"
measure "$g" diff "$work/old.gguf" "$work/new.gguf" -o "$work/update.gdelta"
echo "== gemlet patch"
rm -f "$work/rebuilt.gguf"
measure "$g" patch "$work/old.gguf" "$work/update.gdelta" -o "$work/rebuilt.gguf"
cmp "$work/rebuilt.gguf" "$work/new.gguf" && echo "== rebuilt.gguf == new.gguf"
ls -l "$work"/old.gguf "$work"/new.gguf "$work"/update.gdelta
