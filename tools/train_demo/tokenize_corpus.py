#!/usr/bin/env python3
"""Encodes the documents with the trained SentencePiece model into flat uint16 token streams.

Usage: tokenize_corpus.py TOKENIZER_MODEL WORK_DIR
Reads WORK_DIR/docs_train.jsonl, chat.jsonl, docs_eval.jsonl; writes WORK_DIR/train.bin and
eval.bin (little-endian uint16, each document as <bos> ids <eos>) and corpus_stats.json.
The training documents are shuffled with a fixed seed, the chat conversations repeated
CHAT_REPEAT times among them so the small chat set is seen often enough to learn the turn format.
"""
import array
import collections
import json
import os
import random
import sys

import sentencepiece as spm

SEED = 1234
CHAT_REPEAT = 10
BOS, EOS = 2, 1


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def encode_docs(sp, docs):
    ids = sp.encode([d["text"] for d in docs])
    return [[BOS] + x + [EOS] for x in ids]


def write_stream(path, seqs):
    a = array.array("H")
    for s in seqs:
        a.extend(s)
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        a.tofile(f)
    return len(a)


def main():
    sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
    assert sp.get_piece_size() <= 65536
    assert sp.bos_id() == BOS and sp.eos_id() == EOS
    work = sys.argv[2]
    train = read(os.path.join(work, "docs_train.jsonl"))
    chat = read(os.path.join(work, "chat.jsonl"))
    evald = read(os.path.join(work, "docs_eval.jsonl"))

    train_ids = encode_docs(sp, train)
    chat_ids = encode_docs(sp, chat)
    eval_ids = encode_docs(sp, evald)

    stats = collections.OrderedDict()
    for d, s in zip(train, train_ids):
        st = stats.setdefault(d["src"], {"docs": 0, "tokens": 0, "bytes": 0})
        st["docs"] += 1
        st["tokens"] += len(s)
        st["bytes"] += len(d["text"].encode("utf-8"))
    stats["chat"] = {"docs": len(chat), "tokens": sum(map(len, chat_ids)),
                     "bytes": sum(len(d["text"].encode("utf-8")) for d in chat), "repeat": CHAT_REPEAT}

    # Unknown pieces would mean byte fallback failed somewhere: there must be none.
    unk = sum(x.count(sp.unk_id()) for x in train_ids + chat_ids + eval_ids)
    assert unk == 0, f"{unk} <unk> tokens"

    seqs = train_ids + chat_ids * CHAT_REPEAT
    random.Random(SEED).shuffle(seqs)
    n_train = write_stream(os.path.join(work, "train.bin"), seqs)
    n_eval = write_stream(os.path.join(work, "eval.bin"), eval_ids)
    out = {"train_tokens": n_train, "eval_tokens": n_eval, "eval_docs": len(evald), "sources": stats}
    with open(os.path.join(work, "corpus_stats.json"), "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    for k, v in stats.items():
        print(f"{k:12s} {v['docs']:7d} docs {v['bytes'] / 1e6:7.2f} MB {v['tokens'] / 1e6:7.3f} M tokens"
              + (f" (x{CHAT_REPEAT} in train.bin)" if k == "chat" else ""))
    print(f"train.bin {n_train / 1e6:.3f} M tokens, eval.bin {n_eval / 1e3:.1f} k tokens ({len(evald)} docs)")


if __name__ == "__main__":
    main()
