#!/usr/bin/env python3
"""Goldens for Gemma 4's speculative drafter (transformers' Gemma4AssistantForCausalLM) on tiny backbones.

For each tiny Gemma 4 backbone (the shared test folders: Gemma4ForCausalLM with KV sharing and PLE, the MoE one
with K=V and no KV sharing, and a Gemma4ForConditionalGeneration from hf-mm) this builds tiny random assistants
of its shape (one with the plain tied LM head, one with the ordered "masked" embedding the E2B/E4B assistants
use), then records in float32 on the CPU with eager attention:

  * the backbone's post-final-norm hidden states (what the drafter reads) and its shared K/V (the last
    KV-source layer of each layer type) for the test prompt;
  * drafter chains at a few anchor positions p: step 1 takes [embed(token p) ; hidden(p-1)] at position p with
    the backbone's K/V of positions [0, p); step k > 1 takes [embed(draft k-1) ; the drafter's own projected
    state] at the same position (transformers' SinglePositionMultiTokenCandidateGenerator; llama.cpp's
    draft-mtp with shared memory). Each step's inputs_embeds, logits and projected state are written;
  * a plain PyTorch restatement of the drafter (this file's own, from the model's documented math) run on the
    same inputs with three readings of the sliding window (the last W keys, W - 1 or W + 1), so that meta.json
    says which one transformers computes (W + 1: restate_drafter.py; session 28's goldens predate that reading);
  * transformers' own assisted generation (model.generate(assistant_model=...)) against plain greedy
    decoding, with a trace of what its candidate generator fed the drafter (which hidden row, token, position
    and K/V lengths), matched against the backbone's rows.

It also saves each assistant as an HF folder (config.json + model.safetensors) for `gemlet convert`, and, given a
llama.cpp checkout, converts each with llama.cpp's convert_hf_to_gguf.py (its vocabulary patched in: the tiny
models have 512 made-up pieces and no tokenizer files).

usage: drafter_goldens.py SRC OUT [LLAMA_CPP_DIR]
  SRC: a folder holding the backbone folders named below (tools/drafter_reference/prepare_device.sh fills it).
Each model runs in its own try/except; everything is logged to stdout and failures are listed at the end.
"""
import inspect
import json
import math
import os
import subprocess
import sys
import traceback

import torch
import transformers

N_DRAFT = 4           # drafter steps per chain
N_GENERATE = 16       # tokens of the assisted-generation check
SEED_BASE = 4300

# backbone folder -> (HF class name, anchor positions p). Anchors cover a context inside the sliding window,
# the prompt's end, and one well past the window (the drafter's sliding layers then see only the last keys).
BACKBONES = {
    "gemma4_e2b_like": ("Gemma4ForCausalLM", [3, 12, 33]),
    "gemma4_moe_kv_eq_v": ("Gemma4ForCausalLM", [5, 12, 37]),
    "gemma4_e2b_image_audio": ("Gemma4ForConditionalGeneration", [4, 12, 30]),
}
VARIANTS = [
    # the tied LM head over the whole vocabulary
    dict(name="plain", ordered=False, seed_offset=1),
    # E2B/E4B's ordered embedding: logits only for the tokens of the top-k centroids
    dict(name="ordered", ordered=True, seed_offset=2, num_centroids=16, top_k=4),
]
ASSISTANT_HIDDEN = 48
ASSISTANT_FFN = 96
ASSISTANT_LAYERS = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]  # as E2B's

failures = []


def log(*a):
    print(*a, flush=True)


def write_f32(path, t):
    t.detach().to(torch.float32).contiguous().cpu().numpy().tofile(path)


def print_signatures():
    log("transformers", transformers.__version__, "torch", torch.__version__, "python", sys.version.split()[0])
    names = ["Gemma4AssistantConfig", "Gemma4AssistantForCausalLM", "Gemma4ForCausalLM",
             "Gemma4ForConditionalGeneration", "Gemma4TextModel", "Gemma4TextConfig"]
    for n in names:
        cls = getattr(transformers, n, None)
        if cls is None:
            log(f"  {n}: MISSING")
            continue
        for meth in ("__init__", "forward"):
            f = getattr(cls, meth, None)
            if f is not None:
                try:
                    log(f"  {n}.{meth}{inspect.signature(f)}")
                except (TypeError, ValueError) as e:
                    log(f"  {n}.{meth}: {e}")


def save_sources(out):
    """The code these goldens depend on, as installed: what the candidate generator feeds the drafter, the
    masks, the attention's shared-K/V path. Kept beside the goldens so their semantics can be read later."""
    parts = []

    def add(label, get):
        try:
            obj = get()
            parts.append(f"##### {label}\n{inspect.getsource(obj)}")
        except Exception as e:  # noqa: BLE001 - a missing name is recorded, not fatal
            parts.append(f"##### {label}: not found ({e})")

    import importlib
    mods = {
        "assistant": "transformers.models.gemma4_assistant.modeling_gemma4_assistant",
        "gemma4": "transformers.models.gemma4.modeling_gemma4",
        "masks": "transformers.masking_utils",
        "cand": "transformers.generation.candidate_generator",
    }
    loaded = {}
    for k, m in mods.items():
        try:
            loaded[k] = importlib.import_module(m)
        except Exception as e:  # noqa: BLE001
            parts.append(f"##### import {m}: {e}")
    if "assistant" in loaded:
        add("modeling_gemma4_assistant (whole file)", lambda: loaded["assistant"])
    if "cand" in loaded:
        add("SinglePositionMultiTokenCandidateGenerator",
            lambda: loaded["cand"].SinglePositionMultiTokenCandidateGenerator)
    if "masks" in loaded:
        for f in ("sliding_window_bidirectional_overlay", "bidirectional_mask_function",
                  "create_bidirectional_mask", "create_bidirectional_sliding_window_mask", "eager_mask", "sdpa_mask"):
            add(f"masking_utils.{f}", lambda f=f: getattr(loaded["masks"], f))
    if "gemma4" in loaded:
        for c in ("Gemma4TextAttention", "Gemma4TextDecoderLayer", "Gemma4TextModel", "Gemma4TextScaledWordEmbedding"):
            add(f"modeling_gemma4.{c}", lambda c=c: getattr(loaded["gemma4"], c))
    try:
        from transformers.generation import utils as gen_utils
        src = inspect.getsource(gen_utils)
        for key in ("SinglePositionMultiTokenCandidateGenerator", "target_model_input_embeddings"):
            for i, line in enumerate(src.splitlines()):
                if key in line:
                    parts.append(f"##### generation/utils.py:{i + 1}: {line.strip()}")
    except Exception as e:  # noqa: BLE001
        parts.append(f"##### generation utils: {e}")
    with open(os.path.join(out, "hf_sources.txt"), "w") as f:
        f.write("\n\n".join(parts))
    log(f"  wrote hf_sources.txt ({sum(len(p) for p in parts)} chars)")


# ---------------------------------------------------------------------------------------------------------
# Backbones

def load_backbone(folder, cls_name):
    cls = getattr(transformers, cls_name)
    model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    if cls_name == "Gemma4ForConditionalGeneration":
        text = model.model.language_model
    else:
        text = model.model
    return model, text, model.get_input_embeddings(), text.config


def prompt_ids(folder, text_config, seed):
    """tokens.json's input_ids where there is one; else [bos] + ids drawn from 3..(lowest special id - 1)."""
    tj = os.path.join(folder, "tokens.json")
    if os.path.exists(tj):
        with open(tj) as f:
            t = json.load(f)
        return torch.tensor(t["input_ids"], dtype=torch.long), int(t["prompt_len"])
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    special = [v for k, v in cfg.items() if k.endswith("token_id") or k.endswith("token_index")]
    hi = min([v for v in special if isinstance(v, int) and v > 3] + [text_config.vocab_size])
    g = torch.Generator().manual_seed(seed)
    ids = torch.cat([torch.tensor([2]), torch.randint(3, hi, (39,), generator=g)])
    return ids, 12


def backbone_states(text_model, ids):
    """Post-final-norm hidden states [T, Db], the final norm's input (the residual stream after the last
    layer) [T, Db] and the shared K/V {type: (K, V)} ([kv_heads, T, head_dim] each)."""
    grabbed = {}

    def pre_norm_hook(mod, args):
        grabbed["prenorm"] = args[0].detach().clone()

    def layer_pre_hook(mod, args, kwargs):
        if "skv" not in grabbed and isinstance(kwargs.get("shared_kv_states"), dict):
            grabbed["skv"] = kwargs["shared_kv_states"]

    hooks = [text_model.norm.register_forward_pre_hook(pre_norm_hook),
             text_model.layers[0].register_forward_pre_hook(layer_pre_hook, with_kwargs=True)]
    note = {}
    try:
        with torch.no_grad():
            try:
                out = text_model(input_ids=ids[None], use_cache=False, output_hidden_states=True,
                                 return_shared_kv_states=True)
                skv_src = out.shared_kv_states
                note["shared_kv_from"] = "return_shared_kv_states=True"
            except TypeError as e:
                log(f"  return_shared_kv_states refused ({e}); taking the layers' own dict")
                out = text_model(input_ids=ids[None], use_cache=False, output_hidden_states=True)
                skv_src = grabbed.get("skv") or {}
                note["shared_kv_from"] = "the decoder layers' shared_kv_states dict (hook)"
    finally:
        for h in hooks:
            h.remove()
    last = out.last_hidden_state[0]
    prenorm = grabbed["prenorm"][0]
    if out.hidden_states is not None:
        hs_last = out.hidden_states[-1][0]
        note["max|hidden_states[-1] - last_hidden_state|"] = float((hs_last - last).abs().max())
        note["max|hidden_states[-1] - final norm input|"] = float((hs_last - prenorm).abs().max())
    skv = {k: (v[0][0], v[1][0]) for k, v in skv_src.items()}
    for t in ("full_attention", "sliding_attention"):
        if t not in skv:
            raise RuntimeError(f"no shared K/V for {t}: got {list(skv)}")
    return last, prenorm, skv, note


# ---------------------------------------------------------------------------------------------------------
# Assistants

def assistant_config(bb_text_cfg, variant):
    """A Gemma4AssistantConfig whose attention reads this backbone's shared K/V: the same head sizes and
    KV heads per layer type, window, RoPE; its own (smaller) hidden size."""
    base = bb_text_cfg.to_dict()
    drop = {"architectures", "_name_or_path", "transformers_version", "dtype", "torch_dtype", "model_type",
            "layer_types", "per_layer_config", "num_kv_shared_layers"}
    tc = {k: v for k, v in base.items() if k not in drop}
    n = len(ASSISTANT_LAYERS)
    tc.update(
        hidden_size=ASSISTANT_HIDDEN, intermediate_size=ASSISTANT_FFN, num_hidden_layers=n,
        layer_types=list(ASSISTANT_LAYERS), num_kv_shared_layers=n,
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0, use_double_wide_mlp=False,
        enable_moe_block=False, num_experts=None, top_k_experts=None, moe_intermediate_size=None,
        final_logit_softcapping=None,
    )
    # attention_k_eq_v stays the backbone's: transformers gives full layers num_global_key_value_heads only
    # together with it, and the shared global K/V have that many heads (a shared layer has no k/v weights).
    # Full-attention layers read the backbone's global K/V: its global head size and KV heads.
    plc = {}
    glob_hd = base.get("global_head_dim")
    glob_kv = base.get("num_global_key_value_heads")
    for i, t in enumerate(base.get("layer_types", [])):
        if t == "full_attention":
            lc = (base.get("per_layer_config") or {}).get(str(i), {})
            glob_hd = lc.get("head_dim", glob_hd)
            glob_kv = lc.get("num_key_value_heads", glob_kv)
            break
    for i, t in enumerate(ASSISTANT_LAYERS):
        if t == "full_attention":
            entry = {}
            if glob_hd is not None:
                entry["head_dim"] = glob_hd
            if glob_kv is not None:
                entry["num_key_value_heads"] = glob_kv
            if entry:
                plc[str(i)] = entry
    if plc:
        tc["per_layer_config"] = plc
    tc["model_type"] = "gemma4_text"
    kw = dict(text_config=tc, backbone_hidden_size=base["hidden_size"],
              use_ordered_embeddings=variant["ordered"], tie_word_embeddings=True)
    if variant["ordered"]:
        kw.update(num_centroids=variant["num_centroids"], centroid_intermediate_top_k=variant["top_k"])
    try:
        return transformers.Gemma4AssistantConfig(**kw)
    except Exception as e:  # noqa: BLE001 - a key this version does not take: retry without the per-layer table
        log(f"    Gemma4AssistantConfig refused the text config ({type(e).__name__}: {e}); retrying without per_layer_config")
        tc.pop("per_layer_config", None)
        return transformers.Gemma4AssistantConfig(**kw)


def reinit_assistant(model, seed, ordered):
    """hf_goldens.py's recipe: linears N(0,1)*gain/sqrt(fan_in), embedding N(0,1)/sqrt(hidden), 1-D weights
    default + N(0,0.3) (q_norm x 2/sqrt(head_dim): attention scale 1), post norms x2, final norm x5,
    layer_scalar U(0.5,1.5); the ordered embedding's token_ordering a random permutation."""
    g = torch.Generator().manual_seed(seed)
    H = model.config.get_text_config().hidden_size

    def randn(shape):
        return torch.randn(tuple(shape), generator=g, dtype=torch.float32)

    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                new = p.detach().clone() + 0.3 * randn(p.shape)
                if name.endswith("self_attn.q_norm.weight"):
                    new = new * (2.0 / math.sqrt(p.shape[0]))
                if name.endswith("post_attention_layernorm.weight") or name.endswith("post_feedforward_layernorm.weight"):
                    new = new * 2.0
                if name == "model.norm.weight":
                    new = new * 5.0
                p.copy_(new)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(randn(p.shape) / math.sqrt(H))
            else:
                p.copy_(randn(p.shape) / math.sqrt(p.shape[-1]))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(tuple(b.shape), generator=g))
            if name.endswith("token_ordering"):
                b.copy_(torch.randperm(b.numel(), generator=g).reshape(b.shape).to(b.dtype))
    if ordered:
        assert model.masked_embedding is not None


def draft_chain(assistant, embed, hidden, skv, ids, p, n_steps):
    """transformers' drafter chain at anchor p: [embed(ids[p]) ; hidden[p-1]] at position p over the K/V of
    positions [0, p); then each step's argmax with the drafter's projected state, same position."""
    token = ids[p:p + 1][None]                    # [1, 1]
    h = hidden[p - 1:p][None]                     # [1, 1, Db]
    kv = {k: (K[None, :, :p], V[None, :, :p]) for k, (K, V) in skv.items()}
    pos = torch.tensor([[p]], dtype=torch.long)
    rows = []
    with torch.no_grad():
        for _ in range(n_steps):
            inp = torch.cat([embed(token), h], dim=-1)
            out = assistant(inputs_embeds=inp, position_ids=pos, shared_kv_states=kv, attention_mask=None,
                            use_cache=False)
            logits = out.logits[0, -1]
            nxt = int(logits.argmax())
            rows.append(dict(inp=inp[0, 0].clone(), logits=logits.clone(), h=out.last_hidden_state[0, -1].clone(),
                             token=int(token.reshape(-1)[0]), argmax=nxt))
            token = torch.tensor([[nxt]])
            h = out.last_hidden_state[:, -1:]
    return rows


def rope_at(text_model, cfg, layer_type, hd, p, x):
    """cos, sin [hd] at position p: the model's own rotary module where it takes a layer type, else
    computed here (sliding: theta^(-2i/hd); proportional: the same exponents, frequencies past the rotary
    fraction zero)."""
    try:
        cos, sin = text_model.rotary_emb(x[None, None], torch.tensor([[p]]), layer_type=layer_type)
        return cos.reshape(-1)[-hd:], sin.reshape(-1)[-hd:]
    except Exception:  # noqa: BLE001
        rp = cfg.rope_parameters[layer_type]
        inv = 1.0 / (rp["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        if rp.get("rope_type") == "proportional":
            n_rot = int(hd * rp.get("partial_rotary_factor", 1.0)) // 2
            inv[n_rot:] = 0.0
        ang = p * inv
        emb = torch.cat([ang, ang])
        return emb.cos(), emb.sin()


def restated_drafter(assistant, inp, p, skv, window_keys):
    """The drafter as this file reads the model: pre_projection, then per layer RMSNorm (direct weight), q,
    per-head q_norm, RoPE at position p, attention (scale 1) over the shared K/V of its layer type (sliding
    layers: the last `window_keys` of positions [0, p)), o, post-attention norm, residual, GeGLU MLP between
    its norms, residual, times layer_scalar; final norm; LM head (tied; ordered: top-k centroids' tokens, the
    rest at min - 1); post_projection. Returns (logits, projected state)."""
    cfg = assistant.config.get_text_config()
    m = assistant.model
    eps = cfg.rms_norm_eps

    def rms(x, w):
        x32 = x.float()
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w

    x = assistant.pre_projection(inp)                        # [d]
    for i, layer in enumerate(m.layers):
        lt = cfg.layer_types[i]
        a = layer.self_attn
        xn = rms(x, layer.input_layernorm.weight)
        hd = a.head_dim
        q = a.q_proj(xn).view(-1, hd)                         # [heads, hd]
        q = rms(q, a.q_norm.weight)
        # RoPE from the model's own rotary module for this layer type (inv_freq and attention scaling)
        half = hd // 2
        cos, sin = rope_at(m, cfg, lt, hd, p, x)             # [hd] each
        rot = torch.cat([-q[:, half:], q[:, :half]], dim=-1)
        q = q * cos + rot * sin
        K, V = skv[lt]
        K, V = K[:, :p], V[:, :p]
        if lt == "sliding_attention":
            K, V = K[:, max(0, p - window_keys):], V[:, max(0, p - window_keys):]
        groups = q.shape[0] // K.shape[0]
        Kr = K.repeat_interleave(groups, dim=0)
        Vr = V.repeat_interleave(groups, dim=0)
        s = torch.einsum("hd,hkd->hk", q, Kr)               # scale 1
        w = torch.softmax(s.float(), dim=-1)
        o = torch.einsum("hk,hkd->hd", w, Vr).reshape(-1)
        o = a.o_proj(o)
        x = x + rms(o, layer.post_attention_layernorm.weight)
        f = rms(x, layer.pre_feedforward_layernorm.weight)
        mlp = layer.mlp
        f = mlp.down_proj(torch.nn.functional.gelu(mlp.gate_proj(f), approximate="tanh") * mlp.up_proj(f))
        x = x + rms(f, layer.post_feedforward_layernorm.weight)
        x = x * layer.layer_scalar.reshape(-1)[0]
    hn = rms(x, m.norm.weight)
    E = assistant.lm_head.weight
    if assistant.config.use_ordered_embeddings:
        me = assistant.masked_embedding
        c = me.centroids(hn)
        top = torch.topk(c, k=me.centroid_intermediate_top_k).indices
        per = me.token_ordering.long().view(me.num_centroids, -1)
        sel = per[top].reshape(-1)
        sl = E[sel] @ hn
        logits = torch.full((E.shape[0],), float(sl.min()) - 1.0)
        logits[sel] = sl
    else:
        logits = E @ hn
    return logits, assistant.post_projection(hn)


def assisted_generation(model, assistant, embed, ids, P, hidden, prenorm):
    """transformers' assisted generation with this assistant against plain greedy decoding, and a trace of
    the drafter's calls (inputs matched against the backbone's rows and the embedding table)."""
    prompt = ids[None, :P]
    gc = transformers.GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=N_GENERATE, eos_token_id=None,
                                       pad_token_id=0, bos_token_id=2)
    with torch.no_grad():
        plain = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), generation_config=gc)
    trace = []
    orig = assistant.forward
    Db = hidden.shape[-1]
    table = embed.weight.detach()
    escale = float(getattr(embed, "embed_scale", 1.0))

    def wrapped(*args, **kw):
        out = orig(*args, **kw)
        if len(trace) < 24:
            inp = kw.get("inputs_embeds")
            pos = kw.get("position_ids")
            kv = kw.get("shared_kv_states") or {}
            row = dict(position_ids=pos.reshape(-1).tolist() if pos is not None else None,
                       q_len=int(inp.shape[1]) if inp is not None else None,
                       kv_len={k: int(v[0].shape[-2]) for k, v in kv.items()},
                       attention_mask=None if kw.get("attention_mask") is None else list(kw["attention_mask"].shape),
                       argmax=out.logits[0, -1].argmax().item())
            if inp is not None:
                e, h = inp[0, -1, :Db], inp[0, -1, Db:]
                d = ((table * escale) - e).abs().max(dim=-1).values
                row["token"] = int(d.argmin())
                row["token_match"] = float(d.min())
                # Rows of the prompt's forward only: generated tokens differ from input_ids past P.
                for label, rows in (("post_norm", hidden[:P]), ("pre_norm", prenorm[:P])):
                    dh = (rows - h).abs().max(dim=-1).values
                    row[f"{label}_row"] = int(dh.argmin())
                    row[f"{label}_row_match"] = float(dh.min())
            trace.append(row)
        return out

    assistant.forward = wrapped
    try:
        assistant.generation_config.num_assistant_tokens = N_DRAFT
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        with torch.no_grad():
            spec = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), generation_config=gc,
                                  assistant_model=assistant)
    finally:
        assistant.forward = orig
    plain_ids = plain[0, P:].tolist()
    spec_ids = spec[0, P:].tolist()
    return dict(plain=plain_ids, assisted=spec_ids, identical=plain_ids == spec_ids, trace=trace)


def run_case(src, out, bb_name, cls_name, anchors, llama):
    folder = os.path.join(src, bb_name)
    model, text, embed, tcfg = load_backbone(folder, cls_name)
    ids, P = prompt_ids(folder, tcfg, SEED_BASE + 7)
    T = ids.numel()
    hidden, prenorm, skv, note = backbone_states(text, ids)
    log(f"  backbone {bb_name}: T={T} P={P} hidden {tuple(hidden.shape)} shared K/V "
        + ", ".join(f"{k}: K{tuple(v[0].shape)} V{tuple(v[1].shape)}" for k, v in skv.items()) + f" {note}")
    W = tcfg.sliding_window
    for vi, variant in enumerate(VARIANTS):
        name = f"{bb_name}__{variant['name']}"
        try:
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            cfg = assistant_config(tcfg, variant)
            torch.manual_seed(0)
            assistant = transformers.Gemma4AssistantForCausalLM(cfg).eval()
            seed = SEED_BASE + 10 * list(BACKBONES).index(bb_name) + variant["seed_offset"]
            reinit_assistant(assistant, seed, variant["ordered"])
            assistant.config._attn_implementation = "eager"
            assistant.model.config._attn_implementation = "eager"
            assistant.save_pretrained(d, safe_serialization=True)
            if variant["ordered"]:
                # The token order is a buffer: make sure the checkpoint carries it (HF's own files do).
                from safetensors.torch import load_file, save_file
                st = os.path.join(d, "model.safetensors")
                tensors = load_file(st)
                if "masked_embedding.token_ordering" not in tensors:
                    log("    save_pretrained left out masked_embedding.token_ordering: added")
                    tensors["masked_embedding.token_ordering"] = assistant.masked_embedding.token_ordering.clone().long()
                    save_file(tensors, st, metadata={"format": "pt"})
            reloaded = transformers.Gemma4AssistantForCausalLM.from_pretrained(
                d, dtype=torch.float32, attn_implementation="eager").eval()
            write_f32(os.path.join(d, "backbone_hidden.f32"), hidden)
            write_f32(os.path.join(d, "backbone_prenorm.f32"), prenorm)
            for k, (K, V) in skv.items():
                write_f32(os.path.join(d, f"backbone_{k}_k.f32"), K)
                write_f32(os.path.join(d, f"backbone_{k}_v.f32"), V)
            chains = []
            for p in anchors:
                rows = draft_chain(reloaded, embed, hidden, skv, ids, p, N_DRAFT)
                rows_orig = draft_chain(assistant, embed, hidden, skv, ids, p, N_DRAFT)
                reload_diff = max(float((a["logits"] - b["logits"]).abs().max()) for a, b in zip(rows, rows_orig))
                write_f32(os.path.join(d, f"draft_in_p{p}.f32"), torch.stack([r["inp"] for r in rows]))
                write_f32(os.path.join(d, f"draft_logits_p{p}.f32"), torch.stack([r["logits"] for r in rows]))
                write_f32(os.path.join(d, f"draft_h_p{p}.f32"), torch.stack([r["h"] for r in rows]))
                restated = {}
                for label, wk in (("window_W", W), ("window_W_minus_1", W - 1), ("window_W_plus_1", W + 1)):
                    worst = 0.0
                    try:
                        with torch.no_grad():
                            for r in rows:
                                lg, hh = restated_drafter(reloaded, r["inp"], p, skv, wk)
                                worst = max(worst, float((lg - r["logits"]).abs().max()),
                                            float((hh - r["h"]).abs().max()))
                        restated[label] = worst
                    except Exception as e:  # noqa: BLE001 - the restatement is a check, not a golden
                        restated[label] = f"{type(e).__name__}: {e}"
                gaps = []
                for r in rows:
                    top2 = torch.topk(r["logits"], 2).values
                    gaps.append(float(top2[0] - top2[1]))
                chains.append(dict(p=p, tokens=[r["token"] for r in rows], argmax=[r["argmax"] for r in rows],
                                   top2_gap=gaps, reload_max_abs_diff=reload_diff,
                                   restated_max_abs_diff=restated,
                                   logits_std=float(torch.stack([r["logits"] for r in rows]).std())))
                log(f"    {name} p={p}: tokens {chains[-1]['tokens']} -> argmax {chains[-1]['argmax']} "
                    f"restated {restated} reload {reload_diff:.3g}")
            gen = None
            try:
                gen = assisted_generation(model, reloaded, embed, ids, P, hidden, prenorm)
                log(f"    {name} assisted generation identical to greedy: {gen['identical']}; "
                    f"trace[0:3] {gen['trace'][:3]}")
            except Exception as e:  # noqa: BLE001
                gen = dict(error=f"{type(e).__name__}: {e}")
                log(f"    {name} assisted generation FAILED: {gen['error']}")
                traceback.print_exc()
            tensors = {}
            try:
                from safetensors import safe_open
                with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
                    for k in f.keys():
                        t = f.get_tensor(k)
                        tensors[k] = dict(shape=list(t.shape), dtype=str(t.dtype))
            except Exception as e:  # noqa: BLE001
                tensors = {"error": str(e)}
            meta = dict(
                name=name, backbone=bb_name, backbone_class=cls_name, variant=variant,
                transformers_version=transformers.__version__, torch_version=torch.__version__,
                compute=dict(device="cpu", dtype="float32", attn_implementation="eager"),
                seed=seed, input_ids=ids.tolist(), prompt_len=P, backbone_hidden_size=int(hidden.shape[-1]),
                backbone_sliding_window=W, backbone_note=note,
                shared_kv={k: dict(k_shape=list(v[0].shape), v_shape=list(v[1].shape)) for k, v in skv.items()},
                files=dict(
                    backbone_hidden="[T, Db] post-final-norm hidden states of input_ids (row t: after token t)",
                    backbone_prenorm="[T, Db] the final norm's input (the residual after the last layer)",
                    backbone_TYPE_k="[kv_heads, T, head_dim] shared keys of layer type TYPE (after k_norm and RoPE)",
                    backbone_TYPE_v="[kv_heads, T, head_dim] shared values (after v_norm)",
                    draft_in_pP="[N_DRAFT, 2*Db] each step's inputs_embeds: [embed(token) * sqrt(Db) ; state]",
                    draft_logits_pP="[N_DRAFT, vocab] each step's logits",
                    draft_h_pP="[N_DRAFT, Db] each step's projected state (post_projection of the normed hidden)",
                ),
                chain_rule=("step 1: token input_ids[p], state backbone_hidden[p-1], position_ids [[p]], shared K/V of "
                            "positions [0, p), attention_mask None; step k>1: token = argmax of step k-1, state = its "
                            "projected state, same position and K/V"),
                n_draft=N_DRAFT, chains=chains, assisted_generation=gen,
                config=json.loads(reloaded.config.to_json_string()), tensors=tensors,
            )
            with open(os.path.join(d, "meta.json"), "w") as f:
                json.dump(meta, f, indent=1)
            if llama:
                convert_llama(llama, d)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{name}: {type(e).__name__}: {e}")
            log(f"  FAILED {name}: {e}")
            traceback.print_exc()


# ---------------------------------------------------------------------------------------------------------
# llama.cpp's converter, with the tiny vocabulary written in place of set_vocab (the folders have no
# tokenizer files; the pieces are those of shared/testdata/gguf: <pad> <eos> <bos> <unk> <t4> ... ).

LLAMA_SHIM = r'''
import sys
llama = sys.argv.pop(1)
sys.path.insert(0, llama + "/gguf-py")
sys.path.insert(0, llama)
import gguf
import conversion.gemma as gm
import convert_hf_to_gguf as c

def tiny_vocab(self):
    n = self.hparams.get("vocab_size") or self.hparams["text_config"]["vocab_size"]
    toks = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<t{i}>" for i in range(4, n)]
    w = self.gguf_writer
    w.add_tokenizer_model("gemma4")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores([-1000.0] * n)
    w.add_token_types([gguf.TokenType.CONTROL] * 4 + [gguf.TokenType.USER_DEFINED] * (n - 4))
    w.add_token_merges(["<t4> <t5>"])
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)

gm.Gemma4AssistantModel.set_vocab = tiny_vocab
c.main()
'''


def convert_llama(llama, d):
    shim = os.path.join(d, "..", "_llama_shim.py")
    with open(shim, "w") as f:
        f.write(LLAMA_SHIM)
    for outtype in ("f32",):
        dst = os.path.join(d, f"llamacpp-{outtype}.gguf")
        cmd = [sys.executable, shim, llama, d, "--outtype", outtype, "--outfile", dst]
        r = subprocess.run(cmd, capture_output=True, text=True)
        tail = (r.stdout + r.stderr)[-3000:]
        with open(os.path.join(d, f"llamacpp-{outtype}.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            failures.append(f"llama.cpp convert {os.path.basename(d)} {outtype}: rc={r.returncode}")
            log(f"    llama.cpp convert FAILED rc={r.returncode}\n{tail}")
        else:
            log(f"    llama.cpp convert ok: {dst} ({os.path.getsize(dst)} bytes)")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    src, out = sys.argv[1], sys.argv[2]
    llama = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(out, exist_ok=True)
    torch.set_grad_enabled(False)
    print_signatures()
    try:
        save_sources(out)
    except Exception as e:  # noqa: BLE001
        log(f"save_sources failed: {e}")
    for bb, (cls_name, anchors) in BACKBONES.items():
        if not os.path.isdir(os.path.join(src, bb)):
            failures.append(f"{bb}: no folder in {src}")
            continue
        log(f"== {bb} ({cls_name})")
        try:
            run_case(src, out, bb, cls_name, anchors, llama)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{bb}: {type(e).__name__}: {e}")
            log(f"  FAILED {bb}: {e}")
            traceback.print_exc()
    log("failures:" if failures else "all cases done")
    for f in failures:
        log("  " + f)


if __name__ == "__main__":
    main()
