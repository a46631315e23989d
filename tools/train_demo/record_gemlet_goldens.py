#!/usr/bin/env python3
"""Records gemlet's own greedy output on the demo goldens' prompts (for models/goldens/gemlet_q4_k_m.json).

Usage: record_gemlet_goldens.py GEMLET_BINARY MODEL.gguf TRANSFORMERS_GOLDENS.json OUT.json [--compare]
Runs `gemlet logits --decode N` (f32 KV cache, 2 threads, as tests/demo/demo_golden_test.cc does) on
each prompt's transformers token ids and writes the greedy ids with each step's top-2 logit margin.
--compare only prints how the model's ids and first-step logits compare with transformers'.
Standard library only.
"""
import array
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile


def rows_of(path, n_vocab):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return [a[i * n_vocab:(i + 1) * n_vocab] for i in range(len(a) // n_vocab)]


def top2(row):
    i1 = max(range(len(row)), key=row.__getitem__)
    v1 = row[i1]
    v2 = max(v for i, v in enumerate(row) if i != i1)
    return i1, v1 - v2


def main():
    gemlet, model, hf_path, out_path = sys.argv[1:5]
    compare = "--compare" in sys.argv[5:]
    with open(hf_path, encoding="utf-8") as f:
        hf = json.load(f)
    logits_path = os.path.join(os.path.dirname(hf_path), os.path.basename(hf_path).replace(".json", "_logits.f32"))
    ref_logits = array.array("f")
    if os.path.exists(logits_path):
        with open(logits_path, "rb") as f:
            ref_logits.frombytes(f.read())
    n_vocab = hf["vocab_size"]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in hf["prompts"]:
            n = len(p["generated_ids"])
            rows_path = os.path.join(tmp, p["name"] + ".f32")
            cmd = [gemlet, "logits", "-m", model, "--tokens", ",".join(map(str, p["prompt_ids"])), "--out", rows_path,
                   "--decode", str(n), "--kv-type", "f32", "-t", "2"]
            res = subprocess.run(cmd, check=True, capture_output=True, text=True)
            ids = json.loads(res.stdout.strip().splitlines()[-1])
            rows = rows_of(rows_path, n_vocab)
            assert len(rows) == n and [top2(r)[0] for r in rows] == ids
            margins = [round(top2(r)[1], 5) for r in rows]
            same = 0
            while same < n and ids[same] == p["generated_ids"][same]:
                same += 1
            ref = ref_logits[p["logits_offset"]:p["logits_offset"] + n_vocab] if ref_logits else None
            extra = ""
            if ref:
                r0 = rows[0]
                dot = sum(a * b for a, b in zip(r0, ref))
                cos = dot / math.sqrt(sum(a * a for a in r0) * sum(b * b for b in ref))
                mad = max(abs(a - b) for a, b in zip(r0, ref))
                extra = f", first-step logits: cosine {cos:.6f}, max |diff| {mad:.4g}"
            print(f"{p['name']}: {same}/{n} greedy ids equal transformers'{extra}")
            out.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "generated_ids": ids, "top2_margins": margins,
                        "same_as_transformers_prefix": same})
    if compare:
        return
    with open(model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    meta = {
        "what": "greedy decoding of models/gemlet-demo.gguf (Q4_K_M) by gemlet itself",
        "how": "gemlet logits --decode N --kv-type f32 -t 2 on each transformers prompt; ids never stop at EOS; "
               "top2_margins: each step's top-1 minus top-2 logit",
        "model_sha256": sha,
        "prompts": out,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(compact_json(meta))


def compact_json(d):
    """The metadata keys one per line, then one line per prompt: small, diffable goldens."""
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in d.items() if k != "prompts"]
    lines += [' "prompts": [', ",\n".join("  " + json.dumps(p, ensure_ascii=False) for p in d["prompts"]), " ]", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
