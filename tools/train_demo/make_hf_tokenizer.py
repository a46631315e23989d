#!/usr/bin/env python3
"""SentencePiece tokenizer.model -> Hugging Face tokenizer.json + tokenizer_config.json, Gemma 3 style.

Usage: make_hf_tokenizer.py TOKENIZER_MODEL CHAT_TEMPLATE_JINJA OUT_DIR [MODEL_MAX_LENGTH]

Writes what transformers' GemmaConverter (convert_slow_tokenizer.py) writes for a Gemma .model,
without needing transformers: the same normalizer (" " -> "▁"), pre-tokenizer, BOS post-processor,
decoder (▁ -> " ", byte fallback, fuse), a BPE model whose merges come from the piece scores
(in the order transformers' generate_merges gives), and control / user-defined pieces as added tokens
(<start_of_turn>, <end_of_turn> special, as in Gemma 3). Unlike GemmaConverter it keeps <0x09>
as a byte piece (Gemma's own vocabulary has a literal tab there). Needs only `sentencepiece`
(Debian: python3-sentencepiece, python3-protobuf) for the model's protobuf.
"""
import json
import os
import shutil
import sys

from sentencepiece import sentencepiece_model_pb2 as pb

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPECIAL_USER_DEFINED = {"<start_of_turn>", "<end_of_turn>"}


def _cuts(piece, vocab):
    """The ways to write `piece` as left + right with both halves in `vocab`, shortest left first."""
    halves = ((piece[:k], piece[k:]) for k in range(1, len(piece)))
    return [(left, right) for left, right in halves if left in vocab and right in vocab]


def merges_from_scores(vocab, scores):
    """BPE merge list for a SentencePiece BPE model, as Hugging Face's converter derives it.

    SentencePiece stores no merges, only pieces with scores. Every piece that can be cut into two
    pieces yields one candidate merge per cut, ranked by the score of the piece it builds. The list
    is ordered by that score, highest first; among equal scores, a longer left half comes first,
    then a longer right half; what is still tied keeps the order of the pieces in `scores`. (Two cuts
    of one piece never tie, their left halves differ in length.) `vocab` maps piece -> id, `scores`
    piece -> score, in piece order.
    """
    ranked = []
    for order, (piece, score) in enumerate(scores.items()):
        for left, right in _cuts(piece, vocab):
            ranked.append(((-score, -len(left), -len(right), order), left, right))
    ranked.sort(key=lambda entry: entry[0])
    return [[left, right] for _, left, right in ranked]


def main():
    model_path, template_path, out_dir = sys.argv[1:4]
    max_len = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    proto = pb.ModelProto()
    with open(model_path, "rb") as f:
        proto.ParseFromString(f.read())
    assert proto.trainer_spec.model_type == pb.TrainerSpec.BPE, "expected a BPE model"
    assert not proto.normalizer_spec.add_dummy_prefix, "expected add_dummy_prefix=false (Gemma 3 style)"
    pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
    specials = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    for name, want in specials.items():
        assert pieces[want][0] == name, f"piece {want} is {pieces[want][0]!r}, expected {name!r}"

    vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
    vocab_scores = {p: s for p, s, _ in pieces}
    merges = merges_from_scores(vocab, vocab_scores)

    added = []
    for i, (piece, _, typ) in enumerate(pieces):
        if typ in (CONTROL, UNKNOWN, USER_DEFINED):
            special = typ != USER_DEFINED or piece in SPECIAL_USER_DEFINED
            added.append({"id": i, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": special})

    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab, "merges": merges,
        },
    }
    with open(template_path, encoding="utf-8") as f:
        chat_template = f.read()
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
                                 for a in added},
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "clean_up_tokenization_spaces": False,
        "spaces_between_special_tokens": False,
        "model_max_length": max_len,
        "padding_side": "left",
        "tokenizer_class": "GemmaTokenizer",
        "use_default_system_prompt": False,
        "chat_template": chat_template,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
                   "additional_special_tokens": sorted(SPECIAL_USER_DEFINED, key=lambda s: vocab[s])}, f, indent=2)
        f.write("\n")
    if os.path.abspath(model_path) != os.path.abspath(os.path.join(out_dir, "tokenizer.model")):
        shutil.copyfile(model_path, os.path.join(out_dir, "tokenizer.model"))
    print(f"tokenizer: {len(pieces)} pieces, {len(merges)} merges, {len(added)} added tokens -> {out_dir}")


if __name__ == "__main__":
    main()
