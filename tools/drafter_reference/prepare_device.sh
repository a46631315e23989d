#!/usr/bin/env bash
# Gathers what the device machine needs for the drafter goldens (drafter_goldens.py) into .drafterref/
# (ignored: add /.drafterref/ to .git/info/exclude), with the command to run there. Then, with the device
# tool: run `bash .drafterref/device.sh` carrying .drafterref; it returns drafter_goldens.tar.gz (one folder
# per backbone and assistant: the assistant's HF folder, its goldens, meta.json, llama.cpp's conversion),
# drafter_log.txt and hf_sources.txt (the transformers code the goldens depend on, as installed there).
#   tools/drafter_reference/prepare_device.sh LLAMA_CPP_CHECKOUT [SHARED_TESTDATA] [REPO]
# REPO: the checkout the device tool sends (default: this script's own); .drafterref/ goes at its root.
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,10p "$0"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
llama=$(cd "$1" && pwd) data=$(cd "${2:-$here/../../../shared/testdata}" && pwd)
cd "${3:-$here/../..}"
R=.drafterref
rm -rf $R && mkdir -p $R/src $R/llama
for m in gemma4_e2b_like gemma4_moe_kv_eq_v; do
  mkdir -p $R/src/$m && cp "$data/hf/$m"/{config.json,model.safetensors,tokens.json} $R/src/$m/
done
m=gemma4_e2b_image_audio
mkdir -p $R/src/$m && cp "$data/hf-mm/$m"/{config.json,model.safetensors} $R/src/$m/
cp -r "$llama"/{conversion,gguf-py,convert_hf_to_gguf.py} $R/llama/
cp "$here/drafter_goldens.py" $R/
cat > $R/device.sh <<'INNER'
#!/bin/bash
set -x
export PYTHONUNBUFFERED=1
R=.drafterref
python3 -c "import transformers, torch, safetensors; print(transformers.__version__, torch.__version__)"
mkdir -p /tmp/drafter
python3 $R/drafter_goldens.py $R/src /tmp/drafter $R/llama > /tmp/drafter_log.txt 2>&1
tail -60 /tmp/drafter_log.txt
cp /tmp/drafter_log.txt $OUT/drafter_log.txt
cp /tmp/drafter/hf_sources.txt $OUT/hf_sources.txt
rm -f /tmp/drafter/_llama_shim.py
tar czf $OUT/drafter_goldens.tar.gz -C /tmp drafter
INNER
du -sh $R
