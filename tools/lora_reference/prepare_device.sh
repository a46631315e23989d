#!/usr/bin/env bash
# Gathers what the device machine needs for the LoRA goldens (lora_goldens.py) and for llama.cpp's own
# mmproj files of the hf-mm models into .loraref/ (add /.loraref/ to .git/info/exclude), with the
# command to run there. Then, with the device tool: run `bash .loraref/device.sh` carrying .loraref;
# it returns lora_goldens.tar.gz (PEFT folders, logits, llama.cpp's converted adapters), lora_meta.json
# and llama_mmproj.tar.gz.
#   tools/lora_reference/prepare_device.sh LLAMA_CPP_CHECKOUT [SHARED_TESTDATA]
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,7p "$0"; exit 2; }
llama=$1 data=${2:-../shared/testdata}
cd "$(dirname "$0")/../.."
R=.loraref
rm -rf $R && mkdir -p $R/hf $R/hfmm $R/llama
for m in gemma1_2b_like_mqa gemma2_gqa_softcap gemma3_1b_like gemma3n_e2b_like gemma4_e2b_like gemma4_moe_kv_eq_v; do
  mkdir -p $R/hf/$m && cp "$data/hf/$m"/{config.json,model.safetensors,tokens.json} $R/hf/$m/
done
cp -r "$data"/hf-mm/{gemma3_image,gemma3n_audio,gemma4_bidir_image,gemma4_e2b_image_audio} $R/hfmm/
rm -f $R/hfmm/*/*.f32
cp -r "$llama"/{conversion,gguf-py,convert_hf_to_gguf.py,convert_lora_to_gguf.py} $R/llama/
cp tools/lora_reference/lora_goldens.py $R/
cat > $R/device.sh <<'INNER'
#!/bin/bash
set -x
export PYTHONUNBUFFERED=1
R=.loraref
python3 -c "import transformers, torch, safetensors; print(transformers.__version__, torch.__version__)"
mkdir -p /tmp/lora /tmp/mmproj
python3 $R/lora_goldens.py $R/hf /tmp/lora $R/llama 2>&1 | tail -40
cp /tmp/lora/meta.json $OUT/lora_meta.json
tar czf $OUT/lora_goldens.tar.gz -C /tmp lora
for d in $R/hfmm/*/; do n=$(basename $d); for t in f32 f16; do
  PYTHONPATH=$R/llama/gguf-py:$R/llama python3 $R/llama/convert_hf_to_gguf.py $d --mmproj --outtype $t \
    --outfile /tmp/mmproj/$n.mmproj-$t.gguf > /tmp/mmproj/$n-$t.log 2>&1 || echo "FAIL $n $t"; done; done
tar czf $OUT/llama_mmproj.tar.gz -C /tmp mmproj
INNER
du -sh $R
