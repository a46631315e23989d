#!/usr/bin/env bash
# The README's first command ends here: one English and one Chinese request to the bundled demo
# model (models/gemlet-demo.gguf), answers streamed to the terminal.
set -euo pipefail
gemlet=${1:-build/apps/gemlet/gemlet}
cd "$(dirname "$0")/.."
if [ ! -f models/gemlet-demo.gguf ]; then
  echo "models/gemlet-demo.gguf is missing; pass a model with: $gemlet run -m MODEL.gguf -p '...'" >&2
  exit 1
fi
echo "== gemlet run (demo model: a tiny Gemma-3-architecture model trained for this repo; see models/README.md)"
echo
for prompt in "Polish this sentence: me and him goes to school every days." "请背诵《静夜思》。"; do
  echo "> $prompt"
  "$gemlet" run -m demo --temp 0 -n 80 -p "$prompt"
  echo
done
echo "> (raw text continuation, sampled) And it came to pass"
"$gemlet" run -m demo --raw --temp 0.8 --seed 7 -n 60 --stats -p "And it came to pass"
