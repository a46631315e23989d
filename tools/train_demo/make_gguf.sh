#!/usr/bin/env bash
# Step 3 of models/README.md "Reproduce": the exported HF folder -> F32 GGUF -> Q8_0 and the shipped
# Q4_K_M, with metadata that says what the model is.
# Usage: tools/train_demo/make_gguf.sh GEMLET_BINARY   (run from the repository root)
set -euo pipefail
G=${1:?path to the gemlet binary}
W=tools/train_demo/work
description="gemlet's bundled demo model, not Gemma: 18.6M parameters with the Gemma 3 architecture \
(12 layers, sliding-window and global attention) and its own 8,192-piece SentencePiece vocabulary, \
trained from scratch for about two minutes on King James Bible verses, dictionary entries (GCIDE, \
The Devil's Dictionary), fortunes and Chinese poems from Debian packages, plus short chat exchanges in \
Gemma's turn format. A toy that shows the machinery working; it knows little. Data, licences and \
numbers: models/README.md in the gemlet repository."
meta=(--override-kv "general.description=str:$description"
      --override-kv "general.basename=str:gemlet-demo"
      --override-kv "general.size_label=str:19M"
      --override-kv "general.organization=str:gemlet")
"$G" convert $W/run/hf -o $W/gemlet-demo-f32.gguf --outtype f32 --name gemlet-demo
"$G" quantize $W/gemlet-demo-f32.gguf $W/gemlet-demo-q8_0.gguf Q8_0 "${meta[@]}"
"$G" quantize $W/gemlet-demo-f32.gguf models/gemlet-demo.gguf Q4_K_M "${meta[@]}"
sha256sum models/gemlet-demo.gguf
