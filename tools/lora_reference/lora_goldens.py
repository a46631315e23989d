#!/usr/bin/env python3
"""LoRA goldens for gemlet's adapter tests: transformers' own Gemma models with PEFT's documented LoRA.

peft is not installed where this runs, so the adapter is applied by forward hooks that do what PEFT's
LoRA Linear documents: y = W x + scaling * B(A(dropout(x))) with dropout off, scaling = lora_alpha / r,
or lora_alpha / sqrt(r) with use_rslora. The same script writes each adapter as a PEFT folder
(adapter_config.json + adapter_model.safetensors with PEFT's key names) for `gemlet convert-lora`, and,
when given llama.cpp's converter, as llama.cpp's own GGUF adapters (convert_lora_to_gguf.py).

usage: lora_goldens.py HF_ROOT OUT [LLAMA_CPP_DIR]
  HF_ROOT: ../shared/testdata/hf (the tiny models and their tokens.json)
Everything is computed on the CPU in float32 with eager attention, as the base goldens were.
"""
import json
import math
import os
import subprocess
import sys

import torch
import transformers
from safetensors.torch import save_file

MODELS = [
    "gemma1_2b_like_mqa",
    "gemma2_gqa_softcap",
    "gemma3_1b_like",
    "gemma3n_e2b_like",
    "gemma4_e2b_like",
    "gemma4_moe_kv_eq_v",
]
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
VARIANTS = [
    # every attention and MLP projection, alpha / r
    dict(name="all_r8", r=8, alpha=16.0, rslora=False, targets=ALL, seed=4201),
    # two projections, rsLoRA (alpha / sqrt(r))
    dict(name="qv_rs4", r=4, alpha=8.0, rslora=True, targets=["q_proj", "v_proj"], seed=4202),
]
# Both adapters at once, with user scales (llama.cpp's --lora-scaled): y += sum_i s_i * scaling_i * B_i A_i x
COMBO = [("all_r8", 0.5), ("qv_rs4", 1.0)]
B_GAIN = 0.25  # B ~ N(0,1) * gain / sqrt(r): PEFT starts B at zero, which would test nothing


def target_linears(model, targets):
    """(peft module name, module) of every nn.Linear in a decoder layer whose last name is a target."""
    out = []
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.Linear):
            continue
        parts = name.split(".")
        if parts[-1] in targets and ".layers." in name and "experts" not in name:
            out.append((name, mod))
    return out


def make_adapter(model, v):
    g = torch.Generator().manual_seed(v["seed"])
    tensors = {}
    weights = {}
    for name, mod in target_linears(model, v["targets"]):
        n_in, n_out = mod.in_features, mod.out_features
        a = torch.randn(v["r"], n_in, generator=g) / math.sqrt(n_in)
        b = torch.randn(n_out, v["r"], generator=g) * B_GAIN / math.sqrt(v["r"])
        tensors[f"base_model.model.{name}.lora_A.weight"] = a.contiguous()
        tensors[f"base_model.model.{name}.lora_B.weight"] = b.contiguous()
        weights[name] = (a, b)
    scaling = v["alpha"] / (math.sqrt(v["r"]) if v["rslora"] else v["r"])
    return tensors, weights, scaling


def write_peft(folder, v, tensors, base_name):
    os.makedirs(folder, exist_ok=True)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_name,
        "r": v["r"],
        "lora_alpha": v["alpha"],
        "lora_dropout": 0.0,
        "use_rslora": v["rslora"],
        "target_modules": sorted(v["targets"]),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    save_file(tensors, os.path.join(folder, "adapter_model.safetensors"), metadata={"format": "pt"})


def logits_with(model, ids, adapters):
    """adapters: list of (weights {module name: (A, B)}, scale). Hooks add each one's B(A x) * scale."""
    modules = dict(model.named_modules())
    hooks = []
    for weights, scale in adapters:
        for name, (a, b) in weights.items():
            def hook(mod, inputs, output, a=a, b=b, scale=scale):
                x = inputs[0]
                return output + scale * ((x @ a.T) @ b.T)
            hooks.append(modules[name].register_forward_hook(hook))
    try:
        with torch.no_grad():
            return model(ids[None], use_cache=False).logits[0].float().clone()
    finally:
        for h in hooks:
            h.remove()


def merged_logits(model, ids, adapters):
    """The same adapters merged into the weights (W += scale * B A), then restored."""
    modules = dict(model.named_modules())
    saved = {}
    with torch.no_grad():
        for weights, scale in adapters:
            for name, (a, b) in weights.items():
                w = modules[name].weight
                saved.setdefault(name, w.detach().clone())
                w += scale * (b @ a)
        try:
            return model(ids[None], use_cache=False).logits[0].float().clone()
        finally:
            for name, w0 in saved.items():
                modules[name].weight.copy_(w0)


def write_f32(path, t):
    t.detach().float().contiguous().numpy().tofile(path)


def main():
    hf_root, out = sys.argv[1], sys.argv[2]
    llama = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(out, exist_ok=True)
    report = {"transformers": transformers.__version__, "torch": torch.__version__, "b_gain": B_GAIN,
              "variants": VARIANTS, "combo": COMBO, "models": {}}
    for m in MODELS:
        src = os.path.join(hf_root, m)
        config = json.load(open(os.path.join(src, "config.json")))
        cls = getattr(transformers, config["architectures"][0])
        model = cls.from_pretrained(src, dtype=torch.float32, attn_implementation="eager").eval()
        try:
            model.config._experts_implementation = "eager"
        except Exception:
            pass
        ids = torch.tensor(json.load(open(os.path.join(src, "tokens.json")))["input_ids"], dtype=torch.long)
        base = logits_with(model, ids, [])
        entry = {"T": len(ids), "vocab": base.shape[-1], "variants": {}}
        os.makedirs(os.path.join(out, m), exist_ok=True)
        write_f32(os.path.join(out, m, "base_logits.f32"), base)
        made = {}
        for v in VARIANTS:
            tensors, weights, scaling = make_adapter(model, v)
            folder = os.path.join(out, m, v["name"])
            write_peft(folder, v, tensors, m)
            lg = logits_with(model, ids, [(weights, scaling)])
            mg = merged_logits(model, ids, [(weights, scaling)])
            write_f32(os.path.join(folder, "logits.f32"), lg)
            made[v["name"]] = (weights, scaling)
            info = {
                "modules": len(weights), "scaling": scaling,
                "max_abs_moved_from_base": float((lg - base).abs().max()),
                "argmax_changed": int((lg.argmax(-1) != base.argmax(-1)).sum()),
                "merged_vs_hooks_max_abs": float((mg - lg).abs().max()),
            }
            if llama:
                info["llama_cpp"] = {}
                for outtype in ("f32", "f16", "q8_0"):
                    dst = os.path.join(folder, f"llama-{outtype}.gguf")
                    r = subprocess.run([sys.executable, os.path.join(llama, "convert_lora_to_gguf.py"), "--base", src,
                                        "--outtype", outtype, "--outfile", dst, folder],
                                       capture_output=True, text=True,
                                       env=dict(os.environ, PYTHONPATH=os.path.join(llama, "gguf-py") + ":" + llama))
                    info["llama_cpp"][outtype] = "ok" if r.returncode == 0 else r.stderr[-1500:]
            entry["variants"][v["name"]] = info
        combo = [(made[n][0], made[n][1] * s) for n, s in COMBO]
        lc = logits_with(model, ids, combo)
        write_f32(os.path.join(out, m, "combo_logits.f32"), lc)
        entry["combo"] = {"max_abs_moved_from_base": float((lc - base).abs().max()),
                          "merged_vs_hooks_max_abs": float((merged_logits(model, ids, combo) - lc).abs().max())}
        report["models"][m] = entry
        print(m, json.dumps(entry)[:400], flush=True)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
