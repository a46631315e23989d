#!/usr/bin/env bash
# Gathers what the device machine needs for Gemma 3's pan-and-scan golden (pan_and_scan_goldens.py)
# and for llama.cpp's own mmproj files of the hf-mm models, its converter running beside transformers
# 5.17, into .mmref/ (add /.mmref/ to .git/info/exclude), with the command to run there. Then, with
# the device tool: run `bash .mmref/device.sh` carrying .mmref; it returns pan_and_scan_golden.tar.gz
# and llama_mmproj.tar.gz (the files and the converter's logs). (Session 28 made the Gemma 3n golden
# with mm3n_goldens.py, copied too, from an earlier version of this script.)
#   tools/mm_reference/prepare_device.sh LLAMA_CPP_CHECKOUT [SHARED_TESTDATA]
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,8p "$0"; exit 2; }
llama=$1 data=${2:-../shared/testdata}
cd "$(dirname "$0")/../.."
R=.mmref
rm -rf $R && mkdir -p $R/hfmm $R/llama
cp "$data"/hf-mm/mm_goldens.py $R/hfmm/
cp -r "$data"/hf-mm/{gemma3_image,gemma3n_audio,gemma4_bidir_image,gemma4_e2b_image_audio} $R/hfmm/
cp -r tests/data/hf-mm/gemma3n_image_audio $R/hfmm/
rm -f $R/hfmm/*/*.f32
chmod -R u+w $R
cp -r "$llama"/{conversion,gguf-py,convert_hf_to_gguf.py} $R/llama/
cp tools/mm_reference/{mm3n_goldens.py,rename_for_llamacpp.py,pan_and_scan_goldens.py} $R/
cat > $R/device.sh <<'INNER'
#!/bin/bash
# Offline (the converter otherwise waits on the hub), each step bounded.
set -x
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
R=.mmref
python3 -c "import transformers, torch, timm; print(transformers.__version__, torch.__version__, timm.__version__)"
mkdir -p /tmp/pas /tmp/mmproj /tmp/ren
timeout 200 python3 $R/pan_and_scan_goldens.py $R/hfmm /tmp/pas > /tmp/pas/gen.log 2>&1; tail -30 /tmp/pas/gen.log
tar czf $OUT/pan_and_scan_golden.tar.gz -C /tmp/pas .
for d in $R/hfmm/*/; do n=$(basename $d)
  python3 $R/rename_for_llamacpp.py $d /tmp/ren/$n
  for t in f32 f16; do
    PYTHONPATH=$R/llama/gguf-py:$R/llama timeout 100 python3 $R/llama/convert_hf_to_gguf.py /tmp/ren/$n --mmproj \
      --outtype $t --outfile /tmp/mmproj/$n.mmproj-$t.gguf > /tmp/mmproj/$n-$t.log 2>&1 || echo "FAIL $n $t: $(tail -1 /tmp/mmproj/$n-$t.log)"
  done
done
python3 -c "import transformers; print(transformers.__version__)" > /tmp/mmproj/transformers_version.txt
tar czf $OUT/llama_mmproj.tar.gz -C /tmp mmproj
ls -la $OUT
INNER
du -sh $R
