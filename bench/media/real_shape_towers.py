#!/usr/bin/env python3
"""Writes a checkpoint folder with the real dimensions of a released Gemma's vision/audio towers and random
weights (towers only, no text decoder), for encode-speed benchmarks: `gemlet convert DIR --mmproj-out F.gguf`.

  real_shape_towers.py gemma3-4b  HF_MM_TEMPLATE_DIR OUT_DIR   # SigLIP-so400m 896px/patch 14, 27 layers
  real_shape_towers.py gemma4-e2b HF_MM_TEMPLATE_DIR OUT_DIR   # Gemma 4 E2B vision (768, 16 layers) + audio

HF_MM_TEMPLATE_DIR is the matching tiny model of shared/testdata/hf-mm (gemma3_image, gemma4_e2b_image_audio):
its config.json and processor configs are copied with the tower sizes replaced by transformers' defaults for
the released checkpoints (Gemma4VisionConfig / Gemma4AudioConfig for google/gemma-4-e2b-it, Gemma 3's
SiglipVisionConfig so400m). Needs only the Python standard library: matrices are BF16 with random sign and
mantissa and magnitude 2^-6..2^-5 (about what N(0,1)/sqrt(fan_in) gives at these widths), norms 1.
"""
import json, os, shutil, struct, sys  # noqa: E401

HI = bytes(((b & 0x80) | 60) for b in range(256))   # sign, exponent 121 (high 7 bits)
LO = bytes((0x80 | (b & 0x7F)) for b in range(256))  # exponent's low bit, 7 mantissa bits


def random_bf16(n):
    raw = bytearray(os.urandom(2 * n))
    raw[1::2] = bytes(raw[1::2]).translate(HI)
    raw[0::2] = bytes(raw[0::2]).translate(LO)
    return bytes(raw)


def ones_f32(n, value=1.0):
    return struct.pack("<f", value) * n


def gemma3_tensors(H=1152, I=4304, L=27, P=14, S=896, text_h=2560):
    t = {"vision_tower.embeddings.patch_embedding.weight": [H, 3, P, P],
         "vision_tower.embeddings.patch_embedding.bias": [H],
         "vision_tower.embeddings.position_embedding.weight": [(S // P) ** 2, H],
         "vision_tower.post_layernorm.weight": [H], "vision_tower.post_layernorm.bias": [H],
         "multi_modal_projector.mm_input_projection_weight": [H, text_h],
         "multi_modal_projector.mm_soft_emb_norm.weight": [H]}
    for i in range(L):
        p = f"vision_tower.encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            t[p + n + ".weight"], t[p + n + ".bias"] = [H], [H]
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[p + f"self_attn.{n}.weight"], t[p + f"self_attn.{n}.bias"] = [H, H], [H]
        t[p + "mlp.fc1.weight"], t[p + "mlp.fc1.bias"] = [I, H], [I]
        t[p + "mlp.fc2.weight"], t[p + "mlp.fc2.bias"] = [H, I], [H]
    return t


def gemma4_tensors(text_h=1536, Hv=768, Iv=3072, Lv=16, heads_v=12, hd_v=64, P=16, pos=10240,
                   Ha=1024, La=12, heads_a=8, sub=(128, 32), mels=128, K=5, out_a=1536):
    t = {"model.vision_tower.patch_embedder.input_proj.weight": [Hv, 3 * P * P],
         "model.vision_tower.patch_embedder.position_embedding_table": [2, pos, Hv],
         "model.embed_vision.embedding_projection.weight": [text_h, Hv]}
    for i in range(Lv):
        p = f"model.vision_tower.encoder.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[p + n + ".weight"] = [Hv]
        for n in ("q_proj", "k_proj", "v_proj"):
            t[p + f"self_attn.{n}.linear.weight"] = [heads_v * hd_v, Hv]
        t[p + "self_attn.o_proj.linear.weight"] = [Hv, heads_v * hd_v]
        t[p + "self_attn.q_norm.weight"], t[p + "self_attn.k_norm.weight"] = [hd_v], [hd_v]
        t[p + "mlp.gate_proj.linear.weight"], t[p + "mlp.up_proj.linear.weight"] = [Iv, Hv], [Iv, Hv]
        t[p + "mlp.down_proj.linear.weight"] = [Hv, Iv]
    a = "model.audio_tower."
    t[a + "subsample_conv_projection.layer0.conv.weight"] = [sub[0], 1, 3, 3]
    t[a + "subsample_conv_projection.layer0.norm.weight"] = [sub[0]]
    t[a + "subsample_conv_projection.layer1.conv.weight"] = [sub[1], sub[0], 3, 3]
    t[a + "subsample_conv_projection.layer1.norm.weight"] = [sub[1]]
    t[a + "subsample_conv_projection.input_proj_linear.weight"] = [Ha, sub[1] * (mels // 4)]
    t[a + "output_proj.weight"], t[a + "output_proj.bias"] = [out_a, Ha], [out_a]
    t["model.embed_audio.embedding_projection.weight"] = [text_h, out_a]
    clipped = []
    for i in range(La):
        p = f"{a}layers.{i}."
        for ff in ("feed_forward1", "feed_forward2"):
            t[p + ff + ".ffw_layer_1.linear.weight"] = [4 * Ha, Ha]
            t[p + ff + ".ffw_layer_2.linear.weight"] = [Ha, 4 * Ha]
            t[p + ff + ".pre_layer_norm.weight"], t[p + ff + ".post_layer_norm.weight"] = [Ha], [Ha]
            clipped += [p + ff + ".ffw_layer_1", p + ff + ".ffw_layer_2"]
        t[p + "lconv1d.conv_norm.weight"], t[p + "lconv1d.pre_layer_norm.weight"] = [Ha], [Ha]
        t[p + "lconv1d.depthwise_conv1d.weight"] = [Ha, 1, K]
        t[p + "lconv1d.linear_start.linear.weight"] = [2 * Ha, Ha]
        t[p + "lconv1d.linear_end.linear.weight"] = [Ha, Ha]
        clipped += [p + "lconv1d.linear_start", p + "lconv1d.linear_end"]
        for n in ("norm_out", "norm_post_attn", "norm_pre_attn"):
            t[p + n + ".weight"] = [Ha]
        for n in ("q_proj", "k_proj", "v_proj", "post"):
            t[p + f"self_attn.{n}.linear.weight"] = [Ha, Ha]
            clipped.append(p + f"self_attn.{n}")
        t[p + "self_attn.per_dim_scale"] = [Ha // heads_a]
        t[p + "self_attn.relative_k_proj.weight"] = [Ha, Ha]
    for c in clipped:   # clipping bounds far outside any activation: the timed work is the same
        for n, v in (("input_min", -1e30), ("input_max", 1e30), ("output_min", -1e30), ("output_max", 1e30)):
            t[f"{c}.{n}"] = ([], v)
    return t


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        spec = tensors[name]
        shape, value = (spec if isinstance(spec, tuple) else (spec, None))
        n = 1
        for d in shape:
            n *= d
        matrix = len(shape) >= 2
        if matrix:
            data, dt = random_bf16(n), "BF16"
        else:
            data, dt = ones_f32(n, 1.0 if value is None else value), "F32"
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    return off


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("gemma3-4b", "gemma4-e2b"):
        raise SystemExit(__doc__)
    which, tpl, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(tpl, "config.json")))
    for fn in ("image_processor_config.json", "feature_extractor_config.json"):
        if os.path.exists(os.path.join(tpl, fn)):
            shutil.copy(os.path.join(tpl, fn), os.path.join(out, fn))
    if which == "gemma3-4b":
        cfg["vision_config"].update(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                                    num_attention_heads=16, patch_size=14, image_size=896)
        cfg["mm_tokens_per_image"] = 256
        cfg["text_config"]["hidden_size"] = 2560
        tensors = gemma3_tensors()
        ip = json.load(open(os.path.join(out, "image_processor_config.json")))
        ip["size"] = {"height": 896, "width": 896}
        json.dump(ip, open(os.path.join(out, "image_processor_config.json"), "w"), indent=1)
    else:
        cfg["vision_config"].update(hidden_size=768, intermediate_size=3072, num_hidden_layers=16,
                                    num_attention_heads=12, num_key_value_heads=12, head_dim=64, patch_size=16,
                                    pooling_kernel_size=3, position_embedding_size=10240, use_clipped_linears=False,
                                    standardize=False)
        cfg["audio_config"].update(hidden_size=1024, num_hidden_layers=12, num_attention_heads=8,
                                   subsampling_conv_channels=[128, 32], conv_kernel_size=5, output_proj_dims=1536,
                                   use_clipped_linears=True)
        cfg["text_config"]["hidden_size"] = 1536
        tensors = gemma4_tensors()
        ip = json.load(open(os.path.join(out, "image_processor_config.json")))
        ip.update(patch_size=16, pooling_kernel_size=3, max_soft_tokens=280)
        json.dump(ip, open(os.path.join(out, "image_processor_config.json"), "w"), indent=1)
        fe = json.load(open(os.path.join(out, "feature_extractor_config.json")))
        fe["feature_size"] = 128
        json.dump(fe, open(os.path.join(out, "feature_extractor_config.json"), "w"), indent=1)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    n = write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    print(f"{out}: {len(tensors)} tensors, {n / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
