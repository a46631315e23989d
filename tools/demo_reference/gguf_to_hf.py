#!/usr/bin/env python3
"""Turns an F32 GGUF of the demo model (the shipped Q4_K_M file dequantized) into an HF checkpoint.

Usage: gguf_to_hf.py DEQUANTIZED_F32.gguf OUT_DIR

DEQUANTIZED_F32.gguf comes from `gemlet quantize models/gemlet-demo.gguf X.gguf F32 --allow-requantize`:
gemlet's dequantizers are bit-exact with ggml's, and its reference kernels (`--kernels ref`) dot those
same f32 rows, so the checkpoint written here is exactly the model that gemlet runs from the Q4_K_M file.
OUT_DIR gets config.json (Gemma3ForCausalLM, model_type gemma3_text) and model.safetensors (float32).

Undone on the way back (src/convert/tensor_plan.cc does the forward direction):
  * names: GGUF `blk.N.attn_norm.weight` -> HF `model.layers.N.input_layernorm.weight`, ...;
  * norms: the GGUF stores 1 + w for Gemma 1-3 (llama.cpp's convention), so w = stored - 1. In f32 that
    subtraction is exact (either 1 + w was exact, or stored is in [0.5, 2] and Sterbenz's lemma applies),
    so transformers' x * (1 + w) multiplies by exactly the stored value;
  * shapes: GGUF ne = [cols, rows] -> HF [rows, cols], same bytes.
Python 3 + numpy only (no gguf / safetensors packages needed).
"""
import json
import os
import struct
import sys

import numpy as np

GGUF_F32 = 0
# GGUF metadata value types -> struct codes (strings 8, arrays 9 handled apart).
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

LAYER_NAMES = {  # GGUF (after blk.N.) -> HF (after model.layers.N.), Gemma 3
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALARS[t])


def read_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    magic, version = r.take("4s"), r.take("I")
    if magic != b"GGUF" or version < 2:
        raise SystemExit(f"{path}: not a GGUF v2+ file")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take("Q") for _ in range(r.take("I"))]
        infos.append((name, ne, r.take("I"), r.take("Q")))
    align = meta.get("general.alignment", 32)
    base = (r.pos + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        if t != GGUF_F32:
            raise SystemExit(f"{path}: tensor {name} has GGUF type {t}, not F32: dequantize the file first "
                             "(gemlet quantize IN OUT F32 --allow-requantize)")
        count = int(np.prod(ne))
        a = np.frombuffer(data, dtype="<f4", count=count, offset=base + off)
        tensors[name] = a.reshape(list(reversed(ne)))
    return meta, tensors


def hf_name(gguf):
    if gguf in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf]
    parts = gguf.split(".", 2)
    if parts[0] == "blk" and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}"
    raise SystemExit(f"no HF name for GGUF tensor {gguf}")


def make_config(meta):
    a = meta["general.architecture"]
    if a != "gemma3":
        raise SystemExit(f"architecture {a}: this script handles the Gemma 3 demo model only")
    g = lambda k: meta[f"{a}.{k}"]  # noqa: E731
    f32 = lambda k: float(str(np.float32(g(k))))  # noqa: E731  (f32 keys as written: 1e-06, not 9.99999997e-07)
    n_layer = g("block_count")
    tokens = meta["tokenizer.ggml.tokens"]
    # gemlet writes the layer pattern (true = sliding); without it llama.cpp makes every 6th layer global.
    pattern = meta.get(f"{a}.attention.sliding_window_pattern", [(i + 1) % 6 != 0 for i in range(n_layer)])
    layer_types = ["sliding_attention" if s else "full_attention" for s in pattern]
    head_dim = g("attention.key_length")
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": len(tokens),
        "hidden_size": g("embedding_length"),
        "intermediate_size": g("feed_forward_length"),
        "num_hidden_layers": n_layer,
        "num_attention_heads": g("attention.head_count"),
        "num_key_value_heads": g("attention.head_count_kv"),
        "head_dim": head_dim,
        # llama.cpp's Gemma 3 scales queries by 1/sqrt(head_dim) (except the 27B's n_embd / n_head).
        "query_pre_attn_scalar": head_dim,
        "sliding_window": g("attention.sliding_window"),
        "layer_types": layer_types,
        "max_position_embeddings": g("context_length"),
        "rms_norm_eps": f32("attention.layer_norm_rms_epsilon"),
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": f32("rope.freq_base")},
            "sliding_attention": {"rope_type": "default", "rope_theta": f32("rope.freq_base_swa")},
        },
        "hidden_activation": "gelu_pytorch_tanh",
        "attention_bias": False,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "tie_word_embeddings": True,
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id", 0),
        "bos_token_id": meta["tokenizer.ggml.bos_token_id"],
        "eos_token_id": meta["tokenizer.ggml.eos_token_id"],
        "use_cache": True,
        "dtype": "float32",
    }


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, out_dir = sys.argv[1:]
    meta, tensors = read_gguf(src)
    config = make_config(meta)
    hf = {}
    for name, a in tensors.items():
        if name.endswith("norm.weight"):
            w = a - np.float32(1)
            assert np.array_equal(w + np.float32(1), a), name  # the subtraction is exact (see above)
            a = w
        hf[hf_name(name)] = a
    assert hf["model.embed_tokens.weight"].shape == (config["vocab_size"], config["hidden_size"])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"), hf)
    print(f"{out_dir}: {len(hf)} tensors, {sum(a.size for a in hf.values())} parameters")


if __name__ == "__main__":
    main()
