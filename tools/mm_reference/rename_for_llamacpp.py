#!/usr/bin/env python3
"""Copies an hf-mm checkpoint folder with the names llama.cpp's convert_hf_to_gguf.py expects.

transformers 5 saves Gemma 3's SigLIP tower as `vision_tower.<module>` where llama.cpp's converter
maps `vision_tower.vision_model.<module>` (the transformers 4 layout of the hub's checkpoints), and
the hf-mm folders hold the image processor's config as image_processor_config.json where the
converter reads preprocessor_config.json; the hub's preprocessor_config.json also carries the
processor's image_seq_length (Gemma 3's soft tokens per image, from which the converter derives the
pooling), here taken from input_ids.json's image placeholder count. Nothing else changes: the
tensors' bytes are copied as they are.
  rename_for_llamacpp.py SRC_DIR DST_DIR
"""
import json, os, shutil, struct, sys  # noqa: E401


def rename(name):
    if name.startswith("vision_tower.") and not name.startswith("vision_tower.vision_model."):
        return "vision_tower.vision_model." + name[len("vision_tower."):]
    return name


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    for fn in os.listdir(src):
        if fn.endswith(".json") or fn.endswith(".png") or fn.endswith(".wav"):
            shutil.copy(os.path.join(src, fn), os.path.join(dst, fn))
    for fn in ("image_processor_config.json", "feature_extractor_config.json"):
        if os.path.exists(os.path.join(src, fn)):
            pre = json.load(open(os.path.join(src, fn)))
            break
    else:
        pre = {}
    placeholders = json.load(open(os.path.join(src, "input_ids.json"))).get("placeholders", {})
    if "image" in placeholders and "image_seq_length" not in pre:
        pre["image_seq_length"] = placeholders["image"]["count"]
    json.dump(pre, open(os.path.join(dst, "preprocessor_config.json"), "w"), indent=2)
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    renamed = {rename(k): v for k, v in header.items()}
    text = json.dumps(renamed, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)
    print(f"{src} -> {dst}: {sum(k != rename(k) for k in header)} names changed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
