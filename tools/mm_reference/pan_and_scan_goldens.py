#!/usr/bin/env python3
"""Gemma 3 pan-and-scan goldens: HF's image processor and processor with do_pan_and_scan on hf-mm's
gemma3_image model, and the model's logits with the whole image and its crops in the prompt.

Runs where transformers 5.17 and torch are installed (the device machine); needs no network.
  pan_and_scan_goldens.py HFMM_DIR OUTDIR
HFMM_DIR holds mm_goldens.py and gemma3_image/ (config.json, model.safetensors, image.png, input_ids.json).
Writes OUTDIR/gemma3_pan_and_scan/: preprocessor_config.json (the processor's own save), pixel_values.f32
[1 + crops, 3, S, S], input_ids.json (the processor's ids, its expanded prompt text and token strings),
logits.f32 [T, V], logits_without_crops.f32 (the same prompt with the crops' pixels zeroed: how much they
matter), meta.json.
"""
import json, os, sys  # noqa: E401

# The pan-and-scan settings: the 97x61 image (ratio 1.59 >= 1.2) gives two crops of 49 and 48 columns.
PAS = dict(do_pan_and_scan=True, pan_and_scan_min_crop_size=20, pan_and_scan_max_num_crops=4,
           pan_and_scan_min_ratio_to_activate=1.2)
# Words of the processor's expansion text, given ids in the tiny vocabulary so its ids can be read back.
WORDS = ["Here", "is", "the", "original", "image", "and", "here", "are", "some", "crops", "to", "help", "you",
         "see", "better"]
WORD_ID0 = 460


def tokenizer(mg):
    """mm_goldens' word-level test tokenizer plus the expansion's words (ids WORD_ID0...)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    T = mg._t()
    fixed = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "\n\n": mg.NL2, **{s: i for s, i in mg.TOK["gemma3"].values()}}
    words = {w: WORD_ID0 + i for i, w in enumerate(WORDS)}
    taken = set(fixed.values()) | set(words.values())
    vocab = dict(fixed, **words, **{f"w{i}": i for i in range(mg.V) if i not in taken})
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in fixed if s != "\n\n"])
    tk.add_tokens([AddedToken("\n\n", normalized=False)])
    extra = {k: s for k, (s, _) in mg.TOK["gemma3"].items()}
    cls = getattr(T, "PreTrainedTokenizerFast", None) or T.TokenizersBackend
    return cls(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
               extra_special_tokens=extra)


def main(hfmm, outdir):
    import numpy as np
    import torch
    from PIL import Image
    sys.path.insert(0, hfmm)
    import mm_goldens as mg
    T = mg._t()
    src = os.path.join(hfmm, "gemma3_image")
    out = os.path.join(outdir, "gemma3_pan_and_scan")
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    size = json.load(open(os.path.join(src, "image_processor_config.json")))["size"]
    n_image = cfg["mm_tokens_per_image"]
    ip = T.Gemma3ImageProcessor(size=size, **PAS)
    ip.save_pretrained(out)
    img = Image.open(os.path.join(src, "image.png")).convert("RGB")
    tk = tokenizer(mg)
    proc = T.Gemma3Processor(image_processor=ip, tokenizer=tk, image_seq_length=n_image)
    text = json.load(open(os.path.join(src, "input_ids.json")))["prompt_text"]
    po = proc(text=[text], images=[img], return_tensors="pt", **PAS)  # the processor's own defaults say no pan-and-scan
    ids = po["input_ids"][0]
    pixels = po["pixel_values"].float()
    num_crops = po.get("num_crops")
    pixels.numpy().astype("<f4").tofile(os.path.join(out, "pixel_values.f32"))
    alone = ip([img], return_tensors="pt")
    model = T.Gemma3ForConditionalGeneration.from_pretrained(src, attn_implementation="eager").eval()
    tt = (ids == mg.TOK["gemma3"]["image_token"][1]).long()

    def logits(px):
        kw = dict(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None], pixel_values=px,
                  token_type_ids=tt[None], use_cache=False)
        with torch.no_grad():
            return model(**kw).logits[0].float()
    full = logits(pixels)
    zeroed = pixels.clone()
    zeroed[1:] = 0
    no_crops = logits(zeroed)
    full.numpy().astype("<f4").tofile(os.path.join(out, "logits.f32"))
    no_crops.numpy().astype("<f4").tofile(os.path.join(out, "logits_without_crops.f32"))
    json.dump(dict(input_ids=ids.tolist(), prompt_text=text, tokens=tk.convert_ids_to_tokens(ids.tolist()),
                   expansion_words={w: WORD_ID0 + i for i, w in enumerate(WORDS)}),
              open(os.path.join(out, "input_ids.json"), "w"), indent=1)
    meta = dict(transformers=T.__version__, torch=torch.__version__, source="hf-mm/gemma3_image", pan_and_scan=PAS,
                num_crops=None if num_crops is None else np.asarray(num_crops).tolist(),
                pixel_values_shape=list(pixels.shape), logits_shape=list(full.shape),
                image_tokens=int(tt.sum()), mm_tokens_per_image=n_image,
                whole_image_identical_to_plain_processor=bool(torch.equal(pixels[:1], alone["pixel_values"].float())),
                crops_move_logits_max_abs=float((full - no_crops).abs().max()),
                note="pixel_values row 0 is the whole image, then the crops in HF's order; logits row t predicts t+1")
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
