#!/usr/bin/env bash
# models/goldens/transformers_q4_k_m.*: the shipped Q4_K_M file, dequantized by gemlet, as an HF
# checkpoint, decoded greedily by transformers in float64 (models/README.md, "Check against transformers").
# Usage: tools/demo_reference/make_goldens.sh GEMLET_BINARY [WORK_DIR]   (from the repository root)
# Steps 1-2 need python3 + numpy; step 3 needs torch + transformers (a GPU if there is one, else the
# CPU). Without torch here, it stops after step 2 and says what to run where torch is.
set -euo pipefail
G=${1:?path to the gemlet binary}
W=${2:-tools/demo_reference/work}
PY=${PYTHON:-python3}
HERE=tools/demo_reference
mkdir -p "$W"
# 1. Dequantize: Q4_K / Q6_K rows -> f32 with gemlet's ggml-exact dequantizers; norms copied as they are.
"$G" quantize models/gemlet-demo.gguf "$W/gemlet-demo-dequantized-f32.gguf" F32 --allow-requantize
# 2. HF names, w = stored - 1 for the norms, config.json from the GGUF metadata.
"$PY" $HERE/gguf_to_hf.py "$W/gemlet-demo-dequantized-f32.gguf" "$W/hf"
sha256sum "$W/hf/model.safetensors"
# 3. transformers, float64, 5 prompts x 32 greedy steps.
if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
  echo "no torch/transformers for $PY: copy $W/hf, $HERE/hf_reference.py, models/goldens/transformers_f32.json"
  echo "and models/gemlet-demo.gguf to a machine that has them, run"
  echo "  python3 hf_reference.py hf transformers_f32.json gemlet-demo.gguf OUT"
  echo "and copy OUT/transformers_q4_k_m.json and OUT/transformers_q4_k_m_logits.f32 to models/goldens/"
  exit 0
fi
"$PY" $HERE/hf_reference.py "$W/hf" models/goldens/transformers_f32.json models/gemlet-demo.gguf "$W/out"
cp "$W/out/transformers_q4_k_m.json" "$W/out/transformers_q4_k_m_logits.f32" models/goldens/
