#!/usr/bin/env bash
# llama.cpp's logits with its own converted adapters (tests/data/lora/<model>/llamacpp_*.f32), for the
# two category-A files of shared/testdata/gguf: builds llama_logits.cc against a llama.cpp checkout
# whose build/ has libllama (any build: `cmake -B build -DLLAMA_CURL=OFF && cmake --build build
# --target llama`), then runs it on tokens.json's input ids, without and with the adapters.
#   tools/lora_reference/make_llamacpp_logits.sh LLAMA_CPP_CHECKOUT [SHARED_TESTDATA]
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,6p "$0"; exit 2; }
llama=$(realpath "$1") data=$(realpath "${2:-../shared/testdata}")
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)/llama_logits
g++ -O2 -std=c++17 -Wall -Wextra -I"$llama/include" -I"$llama/ggml/include" tools/lora_reference/llama_logits.cc \
  -L"$llama/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$llama/build/bin" -o "$bin"
for m in gemma1_2b_like_mqa gemma4_moe_kv_eq_v; do
  d=tests/data/lora/$m
  ids=$(python3 -c "import json, sys; print(','.join(map(str, json.load(open(sys.argv[1]))['input_ids'])))" "$data/hf/$m/tokens.json")
  "$bin" "$data/gguf/$m.gguf" "$ids" "$d/llamacpp_base.f32"
  # llama.cpp scales by alpha / r; at user scale 2 its rsLoRA file (alpha 8, r 4) gets PEFT's alpha / sqrt(r).
  "$bin" "$data/gguf/$m.gguf" "$ids" "$d/llamacpp_all_r8.f32" "$d/all_r8/llama-f32.gguf:1"
  "$bin" "$data/gguf/$m.gguf" "$ids" "$d/llamacpp_qv_rs4.f32" "$d/qv_rs4/llama-f32.gguf:2"
  "$bin" "$data/gguf/$m.gguf" "$ids" "$d/llamacpp_combo.f32" "$d/all_r8/llama-f32.gguf:0.5" "$d/qv_rs4/llama-f32.gguf:2"
done
