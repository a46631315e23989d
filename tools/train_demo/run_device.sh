#!/usr/bin/env bash
# On the GPU machine: a smoke run of every stage (a few steps), then the real training, export and
# goldens. Results go to $OUT (default ./out): the HF folder as a tar split into 15 MiB parts,
# goldens.json + goldens_logits.f32, metrics.json, train_log.txt.
# Usage: tools/train_demo/run_device.sh [train.py options]   (after prepare_data.sh)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA=${DATA:-$HERE/work/device}
OUT=${OUT:-$PWD/out}
RUN=${RUN:-/tmp/gemlet-demo-run}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
rm -rf "$RUN" "$RUN-smoke"
trap 'cp "$RUN-smoke/train_log.txt" "$OUT/smoke_log.txt" 2>/dev/null || true' ERR
python3 "$HERE/train.py" --data "$DATA" --out "$RUN-smoke" --smoke
python3 "$HERE/train.py" --data "$DATA" --out "$RUN" "$@"
tar -C "$RUN" -cf "$RUN/hf.tar" hf
split -b 15M -d "$RUN/hf.tar" "$OUT/hf.tar.part-"
cp "$RUN"/goldens.json "$RUN"/goldens_logits.f32 "$RUN"/metrics.json "$RUN"/train_log.txt "$OUT"/ 2>/dev/null || true
(cd "$RUN" && sha256sum hf.tar hf/*)
ls -la "$OUT"
