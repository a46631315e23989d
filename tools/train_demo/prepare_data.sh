#!/usr/bin/env bash
# The demo model's data recipe: Debian packages -> cleaned documents -> train / held-out split ->
# SentencePiece BPE tokenizer (+ tokenizer.json) -> uint16 token streams for train.py.
#
# Needs (Debian 12): apt-get (run `apt-get update` first), dpkg, the `sentencepiece` package
# (spm_train) and python3 with python3-sentencepiece. No network beyond the Debian archive.
# Deterministic: pinned package versions, no clocks or random seeds beyond fixed ones; rerunning it
# gives byte-identical outputs (checked with work/manifest.sha256).
#
# Output, git-ignored, under tools/train_demo/work/ (override with WORK=...):
#   docs_train.jsonl docs_eval.jsonl chat.jsonl   the documents ({"src", "text"} per line)
#   device/train.bin device/eval.bin              token streams (what train.py reads)
#   device/eval.txt                               held-out text, also for `gemlet eval`
#   device/tokenizer/                             tokenizer.model/.vocab, tokenizer.json, tokenizer_config.json
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${WORK:-$HERE/work}
PY=${PYTHON:-/usr/bin/python3}
VOCAB=8192

# Pinned to Debian 12 (bookworm). bible-kjv holds the `bible` program that decompresses bible-kjv-text.
PKGS=(
  bible-kjv-text=4.38
  bible-kjv=4.38
  fortunes=1:1.99.1-7.3
  fortunes-min=1:1.99.1-7.3
  fortunes-zh=2.98
  dict-devil=1.0-13.1
  dict-gcide=0.48.5+nmu2
)

mkdir -p "$WORK/debs" "$WORK/pkgs" "$WORK/text" "$WORK/device/tokenizer"

echo "== download"
(
  cd "$WORK/debs"
  for p in "${PKGS[@]}"; do
    name=${p%%=*}
    ls "${name}"_*.deb >/dev/null 2>&1 || apt-get download "$p"
  done
  sha256sum ./*.deb > ../debs.sha256
)

echo "== extract"
for deb in "$WORK"/debs/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  rm -rf "$WORK/pkgs/$name"
  dpkg -x "$deb" "$WORK/pkgs/$name"
done
T=$WORK/text
# The KJV comes compressed in bible-kjv's own format; its `bible` program prints every verse
# ("Ge1:1 In the beginning ..."); -f turns pretty-printing off.
"$WORK/pkgs/bible-kjv/usr/bin/bible" -f -p "$WORK/pkgs/bible-kjv-text/usr/lib" Gen1:1-Rev22:21 </dev/null > "$T/kjv.txt"
# dictzip files are gzip files.
zcat "$WORK/pkgs/dict-devil/usr/share/dictd/devil.dict.dz" > "$T/devil.dict"
zcat "$WORK/pkgs/dict-gcide/usr/share/dictd/gcide.dict.dz" > "$T/gcide.dict"
for p in fortunes fortunes-min fortunes-zh; do ln -sfn "$WORK/pkgs/$p" "$T/$p"; done
wc -c "$T/kjv.txt" "$T/devil.dict" "$T/gcide.dict"

echo "== clean and split"
"$PY" "$HERE/clean.py" "$T" "$WORK"
"$PY" "$HERE/chat_data.py" "$WORK/docs_train.jsonl" "$WORK/chat.jsonl"

echo "== tokenizer"
# SentencePiece reads one sentence per line: every non-empty line of the training documents and chats.
"$PY" - "$WORK" <<'EOF'
import json, os, sys
work = sys.argv[1]
with open(os.path.join(work, "spm_input.txt"), "w", encoding="utf-8") as out:
    for name in ("docs_train.jsonl", "chat.jsonl"):
        with open(os.path.join(work, name), encoding="utf-8") as f:
            for line in f:
                for l in json.loads(line)["text"].split("\n"):
                    if l.strip():
                        out.write(l + "\n")
EOF
# Gemma 3 conventions: <pad>=0 <eos>=1 <bos>=2 <unk>=3; <start_of_turn>, <end_of_turn> and the
# newline pieces are user-defined (always split out, as in Gemma's vocabulary); no dummy prefix,
# whitespace kept as ▁, identity normalization, digits split, bytes for whatever is not a piece.
(
  cd "$WORK"
  spm_train --input=spm_input.txt --model_prefix=device/tokenizer/tokenizer --model_type=bpe \
    --vocab_size=$VOCAB --character_coverage=0.9995 --byte_fallback=true --split_digits=true \
    --add_dummy_prefix=false --remove_extra_whitespaces=false --normalization_rule_name=identity \
    --allow_whitespace_only_pieces=true \
    --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 \
    --pad_piece='<pad>' --eos_piece='<eos>' --bos_piece='<bos>' --unk_piece='<unk>' \
    --user_defined_symbols=$'<start_of_turn>,<end_of_turn>,\n,\n\n' \
    --max_sentence_length=16384 --input_sentence_size=0 --num_threads="$(nproc)" --minloglevel=2
)
"$PY" "$HERE/make_hf_tokenizer.py" "$WORK/device/tokenizer/tokenizer.model" "$HERE/chat_template.jinja" \
  "$WORK/device/tokenizer" 1024

echo "== token streams"
"$PY" "$HERE/tokenize_corpus.py" "$WORK/device/tokenizer/tokenizer.model" "$WORK"
mv "$WORK/train.bin" "$WORK/eval.bin" "$WORK/device/"
cp "$WORK/eval.txt" "$WORK/corpus_stats.json" "$WORK/device/"

(cd "$WORK" && sha256sum docs_train.jsonl docs_eval.jsonl chat.jsonl device/*.* device/tokenizer/* > manifest.sha256)
echo "== done: $WORK/device ($(du -sh "$WORK/device" | cut -f1))"
