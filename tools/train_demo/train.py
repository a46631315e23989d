#!/usr/bin/env python3
"""Trains the gemlet demo model (transformers Gemma3ForCausalLM) on one GPU, exports it, writes goldens.

Usage: train.py --data DIR --out DIR [--smoke] [--time-budget S] [--epochs N]
  DIR (data) holds train.bin / eval.bin (uint16 token streams from tokenize_corpus.py), eval.txt,
  and tokenizer/ (tokenizer.model + the tokenizer.json / tokenizer_config.json of make_hf_tokenizer.py).
Writes into --out: hf/ (config.json, generation_config.json, model.safetensors in bfloat16, the
tokenizer files), goldens.json + goldens_logits.f32 (greedy decoding by transformers on CPU in
float32 with eager attention, from exactly the shipped bf16 weights), metrics.json and train_log.txt.
--smoke runs every stage with a handful of steps, to catch API errors before the real run.
"""
import argparse
import copy
import json
import math
import os
import shutil
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

LOG = None


def log(*args):
    msg = " ".join(str(a) for a in args)
    print(msg, flush=True)
    if LOG is not None:
        LOG.write(msg + "\n")
        LOG.flush()


# The demo model: Gemma 3's 5:1 sliding/global pattern twice (layers 5 and 11 global), widths that
# are multiples of 256 so every matrix row fits the K-quant blocks (Q4_K / Q6_K hold 256 values).
MODEL = dict(
    vocab_size=8192,
    hidden_size=256,
    intermediate_size=1536,
    num_hidden_layers=12,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    query_pre_attn_scalar=64,
    sliding_window=128,
    max_position_embeddings=1024,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    pad_token_id=0,
    eos_token_id=1,
    bos_token_id=2,
)
END_OF_TURN = 5


def make_config(attn):
    from transformers import Gemma3TextConfig
    n = MODEL["num_hidden_layers"]
    layer_types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    try:
        cfg = Gemma3TextConfig(**MODEL, layer_types=layer_types, attn_implementation=attn)
    except TypeError:
        cfg = Gemma3TextConfig(**MODEL, layer_types=layer_types)
        cfg._attn_implementation = attn
    assert list(cfg.layer_types) == layer_types, cfg.layer_types
    return cfg


def load_bin(path):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


def lr_at(step, total, warmup, peak, floor):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * p))


@torch.no_grad()
def evaluate(model, eval_x, eval_y, bs):
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, eval_x.shape[0], bs):
        x, y = eval_x[i:i + bs], eval_y[i:i + bs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum")
        tot += loss.item()
        n += y.numel()
    model.train()
    return tot / n


def train(args, dev):
    from transformers import Gemma3ForCausalLM
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cfg = make_config("sdpa")
    model = Gemma3ForCausalLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    log(f"model: {n_params / 1e6:.2f} M parameters ({n_embed / 1e6:.2f} M in the tied embedding)")
    log("config:", json.dumps(cfg.to_diff_dict(), default=str))

    data = load_bin(os.path.join(args.data, "train.bin")).to(dev)
    ev = load_bin(os.path.join(args.data, "eval.bin"))
    T, B = args.seq, args.batch
    n_ev = (ev.numel() - 1) // T
    if args.smoke:
        n_ev = min(n_ev, 4)
    eval_x = ev[:n_ev * T].view(n_ev, T).to(dev)
    eval_y = ev[1:n_ev * T + 1].view(n_ev, T).to(dev)
    tokens_per_step = B * T
    epoch_steps = data.numel() / tokens_per_step
    max_steps = 3 if args.smoke else int(args.epochs * epoch_steps)
    log(f"data: {data.numel() / 1e6:.3f} M train tokens ({epoch_steps:.1f} steps/epoch of {tokens_per_step} tokens), "
        f"eval {n_ev} x {T} tokens")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    offs = torch.arange(T + 1, device=dev)

    total = max_steps
    planned = args.smoke
    eval_every = 5 if args.smoke else 50
    warmup = 2 if args.smoke else args.warmup
    best = (float("inf"), -1, None)
    curve = []
    losses = []
    t0 = time.time()
    step = 0
    torch.cuda.synchronize()
    while step < total:
        lr = lr_at(step, total, warmup, args.lr, args.lr * 0.1)
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, data.numel() - T - 1, (B,), device=dev, generator=gen)
        xy = data[idx[:, None] + offs]
        x, y = xy[:, :-1], xy[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 10 == 0 or step == total or args.smoke:
            lv = loss.item()
            losses.append((step, lv))
            if step % 50 == 0 or args.smoke:
                log(f"step {step}/{total} loss {lv:.4f} lr {lr:.2e} gnorm {gnorm.item():.2f} "
                    f"{time.time() - t0:.1f}s")
        if not planned and step == 30:
            # The step count follows the time budget: measured over steps 10..30 (after warm-up).
            torch.cuda.synchronize()
            dt = (time.time() - t_mark) / 20
            fit = int(args.time_budget / dt)
            total = max(60, min(max_steps, fit))
            planned = True
            eval_every = max(25, total // 24)
            log(f"plan: {dt * 1000:.1f} ms/step, {tokens_per_step / dt / 1e6:.2f} M tokens/s -> {total} steps "
                f"({total / epoch_steps:.2f} epochs; epoch cap {max_steps}, time cap {fit})")
        if step == 10:
            torch.cuda.synchronize()
            t_mark = time.time()
        if step % eval_every == 0 or step == total:
            el = evaluate(model, eval_x, eval_y, 32)
            curve.append({"step": step, "tokens": step * tokens_per_step, "eval_loss": el,
                          "train_loss": losses[-1][1] if losses else None, "time_s": time.time() - t0})
            log(f"eval step {step}: eval loss {el:.4f} (ppl {math.exp(el):.2f})")
            if el < best[0]:
                best = (el, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
    torch.cuda.synchronize()
    train_time = time.time() - t0
    final_eval = curve[-1]["eval_loss"]
    tail = [l for s, l in losses[-5:]]
    metrics = {
        "params": n_params, "embedding_params": n_embed, "steps": step, "batch": B, "seq": T,
        "tokens_per_step": tokens_per_step, "tokens_seen": step * tokens_per_step,
        "epochs": step * tokens_per_step / data.numel(), "train_tokens": data.numel(),
        "train_time_s": train_time, "final_train_loss": sum(tail) / len(tail),
        "final_eval_loss": final_eval, "best_eval_loss": best[0], "best_step": best[1],
        "lr": args.lr, "warmup": warmup, "weight_decay": args.wd, "curve": curve,
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
    }
    if best[2] is not None and best[1] != step:
        log(f"restoring the best checkpoint: step {best[1]} (eval {best[0]:.4f}) instead of step {step} ({final_eval:.4f})")
        model.load_state_dict(best[2])
    log(f"trained {step} steps, {step * tokens_per_step / 1e6:.1f} M tokens in {train_time:.1f} s; "
        f"train loss {metrics['final_train_loss']:.4f}, eval loss final {final_eval:.4f} best {best[0]:.4f}")
    return model, metrics


def export(model, args, hf_dir):
    from transformers import GenerationConfig
    model = model.to(torch.bfloat16).cpu()
    model.config.use_cache = True
    gc = GenerationConfig(bos_token_id=2, pad_token_id=0, eos_token_id=[1, END_OF_TURN])
    model.generation_config = gc
    if os.path.isdir(hf_dir):
        shutil.rmtree(hf_dir)
    model.save_pretrained(hf_dir, safe_serialization=True)
    tok_dir = os.path.join(args.data, "tokenizer")
    for name in ("tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(os.path.join(tok_dir, name), os.path.join(hf_dir, name))
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfgj = json.load(f)
    log("config.json:", json.dumps(cfgj, sort_keys=True))
    from safetensors import safe_open
    with safe_open(os.path.join(hf_dir, "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        log(f"model.safetensors: {len(keys)} tensors, e.g.", keys[:3], f.get_tensor(keys[0]).dtype)
    for n in sorted(os.listdir(hf_dir)):
        log(f"  {n}: {os.path.getsize(os.path.join(hf_dir, n))} bytes")


def check_tokenizer(args, hf_dir, report):
    """transformers' tokenizer from our files vs SentencePiece itself, and the chat template."""
    import sentencepiece as spm
    from transformers import AutoTokenizer
    sp = spm.SentencePieceProcessor(model_file=os.path.join(hf_dir, "tokenizer.model"))
    tok = AutoTokenizer.from_pretrained(hf_dir)
    report["hf_tokenizer_class"] = type(tok).__name__
    with open(os.path.join(args.data, "eval.txt"), encoding="utf-8") as f:
        paras = [p for p in f.read().split("\n\n") if p.strip()]
    if args.smoke:
        paras = paras[:20]
    bad = 0
    for p in paras:
        a = tok(p, add_special_tokens=False)["input_ids"]
        b = sp.encode(p)
        if a != b:
            bad += 1
            if bad <= 3:
                log("tokenizer mismatch:", repr(p[:80]), a[:20], b[:20])
    report["hf_vs_spm_mismatches"] = f"{bad}/{len(paras)} eval paragraphs"
    log(f"tokenizer: {type(tok).__name__}; transformers vs sentencepiece: {bad}/{len(paras)} paragraphs differ")
    ids = tok("Hello world")["input_ids"]
    report["bos_added"] = ids[:1] == [2]
    msgs = [{"role": "user", "content": "Hi!"}]
    rendered = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    want = "<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n"
    report["chat_template_ok"] = rendered == want
    log("chat template:", repr(rendered), "ok" if rendered == want else "MISMATCH")
    # What transformers' own converter makes of the .model (the route the brief suggested), for the record.
    try:
        from transformers import GemmaTokenizerFast
        t2 = GemmaTokenizerFast(vocab_file=os.path.join(hf_dir, "tokenizer.model"))
        bad2 = sum(1 for p in paras if t2(p, add_special_tokens=False)["input_ids"] != sp.encode(p))
        report["gemma_converter_vs_spm_mismatches"] = f"{bad2}/{len(paras)}"
        log(f"GemmaTokenizerFast(vocab_file=...) vs sentencepiece: {bad2}/{len(paras)} paragraphs differ")
    except Exception as e:  # informative only
        report["gemma_converter_error"] = repr(e)[:300]
        log("GemmaTokenizerFast(vocab_file=...) failed:", repr(e)[:300])
    return tok, sp


def goldens(args, hf_dir, out_dir, report):
    from transformers import Gemma3ForCausalLM
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    tok, sp = check_tokenizer(args, hf_dir, report)
    try:
        model = Gemma3ForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = Gemma3ForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    assert model.model.embed_tokens.weight.dtype == torch.float32
    # The weights are bf16 values: rounding them to bf16 again must change nothing.
    w = model.model.embed_tokens.weight
    assert torch.equal(w, w.to(torch.bfloat16).float()), "weights are not bf16-exact"
    log("golden model attn:", model.config._attn_implementation)

    with open(os.path.join(args.data, "eval.txt"), encoding="utf-8") as f:
        held_out = f.read().split("\n\n")
    # A held-out Bible chapter, long enough (> sliding_window tokens) to exercise the sliding layers' window.
    long_text = next(p for p in held_out if len(sp.encode(p)) > 300 and p.isascii())
    long_ids = sp.encode(long_text)[:280]
    long_text = sp.decode(long_ids)
    prompts = [
        ("raw_en", "raw", "And God said, Let there be"),
        ("chat_en", "chat", "What is 12 + 7?"),
        ("chat_zh", "chat", "你好，你是谁？"),
        ("raw_zh", "raw", "床前明月光，"),
        ("raw_long", "raw", long_text),
    ]
    n_new = 2 if args.smoke else 32
    out, logits_all = [], []
    for name, kind, text in prompts:
        if kind == "chat":
            rendered = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                               add_generation_prompt=True)
            ids = tok(rendered, add_special_tokens=False)["input_ids"]
            spm_ids = [2] + sp.encode(rendered[len("<bos>"):])
        else:
            rendered = text
            ids = tok(text)["input_ids"]
            spm_ids = [2] + sp.encode(text)
        if ids != spm_ids:
            log(f"golden {name}: transformers ids differ from sentencepiece's:", ids[:24], spm_ids[:24])
            report[f"prompt_ids_differ_{name}"] = True
        seq = list(ids)
        margins = []
        with torch.no_grad():
            for i in range(n_new):
                logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
                if i == 0:
                    first = logits.clone()
                top = torch.topk(logits, 2)
                margins.append(float(top.values[0] - top.values[1]))
                seq.append(int(top.indices[0]))
        gen_ids = seq[len(ids):]
        top5 = torch.topk(first, 5)
        entry = {
            "name": name, "kind": kind, "user_text": text, "prompt_text": rendered, "prompt_ids": ids,
            "generated_ids": gen_ids, "generated_text": tok.decode(gen_ids, skip_special_tokens=False),
            "logits_offset": len(logits_all) * first.numel(), "logits_count": first.numel(),
            "top5_ids": top5.indices.tolist(), "top5_logits": [round(v, 6) for v in top5.values.tolist()],
            "min_top2_margin": min(margins), "top2_margins": [round(m, 5) for m in margins],
        }
        logits_all.append(first.numpy().astype("<f4"))
        out.append(entry)
        log(f"golden {name}: {len(ids)} prompt ids -> {gen_ids[:12]}... {entry['generated_text'][:80]!r} "
            f"(min top-2 margin {min(margins):.4f})")
    # The same 32 tokens through generate() with the KV cache: transformers agrees with itself.
    try:
        for e in out[:3]:
            g = model.generate(torch.tensor([e["prompt_ids"]]), max_new_tokens=len(e["generated_ids"]),
                               do_sample=False, eos_token_id=None, pad_token_id=0)
            same = g[0, len(e["prompt_ids"]):].tolist() == e["generated_ids"][:g.shape[1] - len(e["prompt_ids"])]
            log(f"generate() with cache, {e['name']}: {'same' if same else 'DIFFERENT'}")
            report[f"generate_cache_same_{e['name']}"] = same
    except Exception as ex:
        log("generate() check failed:", repr(ex)[:300])
    meta = {
        "what": "greedy decoding of the gemlet demo model by transformers",
        "how": "CPU, float32, eager attention, full recompute per token (no KV cache); weights = the "
               "shipped bf16 model.safetensors upcast to float32; logits of each prompt's last position "
               "in goldens_logits.f32 (little-endian float32, logits_offset / logits_count)",
        "transformers": __import__("transformers").__version__, "torch": torch.__version__,
        "vocab_size": MODEL["vocab_size"], "prompts": out,
    }
    with open(os.path.join(out_dir, "goldens.json"), "w", encoding="utf-8") as f:
        # One line per prompt (the committed models/goldens/transformers_f32.json has this layout).
        lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in meta.items() if k != "prompts"]
        lines += [' "prompts": [', ",\n".join("  " + json.dumps(p, ensure_ascii=False) for p in out), " ]", "}"]
        f.write("\n".join(lines) + "\n")
    np.concatenate(logits_all).tofile(os.path.join(out_dir, "goldens_logits.f32"))


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--time-budget", type=float, default=200.0)
    ap.add_argument("--epochs", type=float, default=8.0)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    LOG = open(os.path.join(args.out, "train_log.txt"), "a", encoding="utf-8")
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}, "
        f"smoke={args.smoke}")
    dev = torch.device("cuda")
    log("gpu:", torch.cuda.get_device_name(0))
    model, metrics = train(args, dev)
    hf_dir = os.path.join(args.out, "hf")
    export(model, args, hf_dir)
    report = {}
    try:
        goldens(args, hf_dir, args.out, report)
    except Exception:
        log("GOLDENS FAILED:\n" + traceback.format_exc())
        report["goldens_error"] = traceback.format_exc()[-2000:]
        if args.smoke:
            raise
    metrics["checks"] = report
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
        f.write("\n")
    log("done:", json.dumps({k: v for k, v in metrics.items() if k != "curve"}, default=str)[:3000])


if __name__ == "__main__":
    main()
