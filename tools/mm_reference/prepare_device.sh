#!/usr/bin/env bash
# Gathers what the device machine needs for the Gemma 3n image golden (mm3n_goldens.py) and for
# llama.cpp's own mmproj files of the hf-mm models into .mmref/ (add /.mmref/ to .git/info/exclude),
# with the command to run there. Then, with the device tool: run `bash .mmref/device.sh` carrying
# .mmref; it returns g3n_golden.tar.gz (hf-mm's format), llama_mmproj.tar.gz (the files and the
# converter's logs) and hf_sources.tar.gz (transformers' Gemma 3n / Gemma 4 assistant sources, to read).
#   tools/mm_reference/prepare_device.sh LLAMA_CPP_CHECKOUT [SHARED_TESTDATA]
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,8p "$0"; exit 2; }
llama=$1 data=${2:-../shared/testdata}
cd "$(dirname "$0")/../.."
R=.mmref
rm -rf $R && mkdir -p $R/hfmm $R/llama
cp "$data"/hf-mm/mm_goldens.py $R/hfmm/
cp -r "$data"/hf-mm/{gemma3_image,gemma3n_audio,gemma4_bidir_image,gemma4_e2b_image_audio} $R/hfmm/
rm -f $R/hfmm/*/*.f32
chmod -R u+w $R
cp -r "$llama"/{conversion,gguf-py,convert_hf_to_gguf.py} $R/llama/
cp tools/mm_reference/{mm3n_goldens.py,rename_for_llamacpp.py} $R/
cat > $R/device.sh <<'INNER'
#!/bin/bash
set -x
export PYTHONUNBUFFERED=1
R=.mmref
python3 -c "import transformers, torch, timm; print(transformers.__version__, torch.__version__, timm.__version__)"
mkdir -p /tmp/g3n /tmp/mmproj /tmp/src
python3 $R/mm3n_goldens.py $R/hfmm /tmp/g3n > /tmp/g3n/gen.log 2>&1
tail -40 /tmp/g3n/gen.log
cp /tmp/g3n/gen.log $OUT/g3n_gen.log
[ -f /tmp/g3n/mm_goldens_public.tar.gz ] && cp /tmp/g3n/mm_goldens_public.tar.gz $OUT/g3n_golden.tar.gz
mkdir -p /tmp/g3nx && tar xzf /tmp/g3n/mm_goldens_public.tar.gz -C /tmp/g3nx 2>/dev/null && cp -r /tmp/g3nx/gemma3n_image_audio $R/hfmm/
for d in $R/hfmm/*/; do n=$(basename $d)
  python3 $R/rename_for_llamacpp.py $d /tmp/ren/$n
  for t in f32 f16; do
    PYTHONPATH=$R/llama/gguf-py:$R/llama python3 $R/llama/convert_hf_to_gguf.py /tmp/ren/$n --mmproj --outtype $t \
      --outfile /tmp/mmproj/$n.mmproj-$t.gguf > /tmp/mmproj/$n-$t.log 2>&1 || echo "FAIL $n $t: $(tail -1 /tmp/mmproj/$n-$t.log)"
  done
done
tar czf $OUT/llama_mmproj.tar.gz -C /tmp mmproj
T=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
for m in gemma3n gemma4 timm_wrapper; do cp $T/models/$m/*.py /tmp/src/ 2>/dev/null; done
ls $T/models | grep -i -E "assist|gemma" > /tmp/src/models_list.txt
for m in $(ls $T/models | grep -i assist); do mkdir -p /tmp/src/$m && cp $T/models/$m/*.py /tmp/src/$m/; done
tar czf $OUT/hf_sources.tar.gz -C /tmp src
ls -la $OUT
INNER
du -sh $R
