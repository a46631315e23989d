#!/usr/bin/env python3
"""Greedy decoding of the dequantized demo model by transformers in float64: the exact goldens.

Usage: hf_reference.py HF_DIR PROMPTS.json MODEL.gguf OUT_DIR [--steps 32] [--top-k 64] [--device cuda]

HF_DIR is gguf_to_hf.py's checkpoint of models/gemlet-demo.gguf, PROMPTS.json is
models/goldens/transformers_f32.json (its prompts' names and token ids are reused), MODEL.gguf is only
hashed (the goldens name the file they belong to). Writes into OUT_DIR:
  transformers_q4_k_m.json + transformers_q4_k_m_logits.f32: the goldens (models/README.md, "Files");
  full_logits_f64.npy: every step's 8,192 logits [prompt, step, vocab], for measuring, not committed;
  report.json: f32 vs f64 and cached vs recomputed figures.
Each step recomputes the whole sequence (use_cache=False): no KV cache in the reference. Greedy never
stops at EOS / <end_of_turn>. float64 everywhere except where transformers itself computes in float32
(RMSNorm, the rotary angles): that costs ~1e-6 relative, far below the tests' 1e-3.
"""
import argparse
import hashlib
import json
import os
import time

import numpy as np
import torch


def load(hf_dir, dtype, device):
    from transformers import Gemma3ForCausalLM
    model = Gemma3ForCausalLM.from_pretrained(hf_dir, dtype=dtype, attn_implementation="eager")
    return model.to(device).eval()


def check_config(model):
    c = model.config
    assert c.model_type == "gemma3_text", c.model_type
    assert c.sliding_window == 128 and c.max_position_embeddings == 1024, (c.sliding_window, c.max_position_embeddings)
    assert [i for i, t in enumerate(c.layer_types) if t == "full_attention"] == [5, 11], c.layer_types
    rp = c.rope_parameters
    assert rp["full_attention"]["rope_theta"] == 1e6 and rp["sliding_attention"]["rope_theta"] == 1e4, rp
    assert c.query_pre_attn_scalar == 64 and c.final_logit_softcapping is None and c.attn_logit_softcapping is None
    assert model.config._attn_implementation == "eager", model.config._attn_implementation


def top2_margin(row):
    a = np.partition(row, -2)[-2:]
    return float(a.max() - a.min())


def compact_json(d):
    """The metadata keys one per line, then one line per prompt (the layout of the other goldens)."""
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in d.items() if k != "prompts"]
    lines += [' "prompts": [', ",\n".join("  " + json.dumps(p, ensure_ascii=False) for p in d["prompts"]), " ]", "}"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("prompts")
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)["prompts"]
    with open(args.gguf, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()

    model = load(args.hf_dir, torch.float64, dev)
    check_config(model)
    w = model.model.embed_tokens.weight
    assert w.dtype == torch.float64 and torch.equal(w, w.float().double()), "weights are not the f32 values"
    model32 = load(args.hf_dir, torch.float32, dev)
    n_vocab = model.config.vocab_size
    report = {"device": str(dev), "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None}
    out, blobs, full_all, offset = [], [], [], 0
    full_steps = [0, args.steps - 1]
    t0 = time.time()
    for p in prompts:
        ids = list(p["prompt_ids"])
        seq, rows = list(ids), []
        with torch.no_grad():
            for _ in range(args.steps):
                x = torch.tensor([seq], device=dev)
                row = model(input_ids=x, use_cache=False).logits[0, -1].double().cpu().numpy()
                rows.append(row)
                seq.append(int(np.argmax(row)))  # the first maximum, as gemlet's ArgMax
            rows = np.stack(rows)
            # The same logits from one forward pass over the whole sequence, and in float32 (TF32 off):
            # how far transformers' own results move with the route and the precision.
            x = torch.tensor([seq[:-1]], device=dev)
            n = len(ids) - 1
            once = model(input_ids=x, use_cache=False).logits[0, n:].double().cpu().numpy()
            f32 = model32(input_ids=x, use_cache=False).logits[0, n:].double().cpu().numpy()
        gen = seq[len(ids):]
        top = np.argsort(-rows, axis=1, kind="stable")[:, :args.top_k]
        margins = [top2_margin(r) for r in rows]
        entry = {
            "name": p["name"], "prompt_ids": ids, "generated_ids": gen,
            "top2_margins": [round(m, 6) for m in margins],
            "full_rows_offset": offset, "full_row_steps": full_steps,
            "topk_offset": offset + len(full_steps) * n_vocab,
            "topk_ids": top.tolist(),
        }
        blobs += [rows[full_steps].astype("<f4").ravel(), np.take_along_axis(rows, top, axis=1).astype("<f4").ravel()]
        offset += len(full_steps) * n_vocab + args.steps * args.top_k
        out.append(entry)
        full_all.append(rows)
        report[p["name"]] = {
            "same_ids_as_bf16_goldens": int(np.argmin(np.array(gen + [-1]) == np.array(p["generated_ids"] + [-2]))),
            "min_top2_margin": min(margins), "max_abs_logit": float(np.abs(rows).max()),
            "recompute_vs_one_pass_max_abs": float(np.abs(rows - once).max()),
            "f32_vs_f64_max_abs": float(np.abs(rows - f32).max()),
            "f32_argmax_equal": int((f32.argmax(axis=1) == rows.argmax(axis=1)).sum()),
        }
        print(p["name"], json.dumps(report[p["name"]]), gen[:12], flush=True)
    report["seconds"] = time.time() - t0
    import transformers
    meta = {
        "what": "greedy decoding of models/gemlet-demo.gguf (Q4_K_M), dequantized exactly, by transformers",
        "how": "tools/demo_reference: gemlet quantize ... F32 --allow-requantize, gguf_to_hf.py, hf_reference.py; "
               "Gemma3ForCausalLM in float64, eager attention, TF32 off, whole sequence recomputed per step "
               "(no KV cache), greedy without stopping at EOS; top2_margins: each step's top-1 minus top-2 logit; "
               "logits in transformers_q4_k_m_logits.f32 (little-endian float32): at full_rows_offset the full "
               "rows of full_row_steps, at topk_offset each step's logits of its topk_ids (best first)",
        "model_sha256": sha, "transformers": transformers.__version__, "torch": torch.__version__,
        "device": report["gpu"] or str(dev), "vocab_size": n_vocab, "steps": args.steps, "top_k": args.top_k,
        "logits_file": "transformers_q4_k_m_logits.f32", "logits_count": offset,
        "prompts": out,
    }
    with open(os.path.join(args.out_dir, "transformers_q4_k_m.json"), "w", encoding="utf-8") as f:
        f.write(compact_json(meta))
    np.concatenate(blobs).tofile(os.path.join(args.out_dir, "transformers_q4_k_m_logits.f32"))
    np.save(os.path.join(args.out_dir, "full_logits_f64.npy"), np.stack(full_all))
    with open(os.path.join(args.out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, dict)}))


if __name__ == "__main__":
    main()
