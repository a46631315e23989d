#!/usr/bin/env python3
"""The Gemma 3n image golden (gemma3n_image_audio) that shared/testdata/hf-mm lacks, in hf-mm's format.

hf-mm's gemma3n_audio stands a small timm model in for the vision tower (its image side is untested).
This builds the same kind of tiny random Gemma3nForConditionalGeneration with a real MobileNet-V5:
timm's mobilenetv5_300m_enc with its architecture string swapped for TINY_MNV5 (the same block kinds
at reduced width and depth; tests/common/tiny_mnv5.h writes the same tensors), a 128x128 processor
square and a 4x4 fusion grid (16 soft tokens), plus hf-mm's audio tower, and runs hf-mm's own
generator (mm_goldens.py gen_one: weights, files, checks) on it. Needs transformers 5.17 and timm
(the device machine's image has both).
  mm3n_goldens.py HF_MM_DIR OUTDIR     (HF_MM_DIR holds mm_goldens.py; writes OUTDIR/mm_goldens_public.tar.gz)
"""
import inspect, os, sys  # noqa: E401

# mobilenetv5_300m_enc's stages and block kinds (edge residual, universal inverted residual, mobile
# MQA with and without key/value down-sampling), at 8-32 channels.
TINY_MNV5 = [
    ["er_r1_k3_s2_e4_c8", "er_r1_k3_s1_e4_c8"],
    ["uir_r1_a3_k5_s2_e6_c16", "uir_r1_a5_k0_s1_e4_c16", "uir_r1_a3_k0_s1_e4_c16"],
    ["uir_r1_a5_k5_s2_e6_c24", "uir_r1_a5_k0_s1_e4_c24", "uir_r1_a0_k0_s1_e1_c24", "mqa_r1_k3_h2_v2_s1_d8_c24",
     "uir_r1_a0_k0_s1_e2_c24", "mqa_r1_k3_h2_v2_s1_d8_c24", "uir_r1_a0_k0_s1_e2_c24"],
    ["uir_r1_a5_k5_s2_e6_c32", "mqa_r1_k3_h2_s1_d12_c32", "uir_r1_a0_k0_s1_e2_c32", "mqa_r1_k3_h2_s1_d12_c32",
     "uir_r1_a0_k0_s1_e2_c32"],
]
IMAGE_SIZE, SOFT_TOKENS, STEM = 128, 16, 8


def use_tiny_arch():
    """timm builds mobilenetv5_300m_enc from an arch string list; hand it TINY_MNV5 instead."""
    import timm.models.mobilenetv5 as mnv5
    original = mnv5.decode_arch_def

    def decode(arch_def, *args, **kwargs):
        if arch_def and arch_def[0] and arch_def[0][0] == "er_r1_k3_s2_e4_c128":
            arch_def = TINY_MNV5
        return original(arch_def, *args, **kwargs)
    mnv5.decode_arch_def = decode


def main(mm_dir, outdir):
    sys.path.insert(0, mm_dir)
    import mm_goldens as mm
    use_tiny_arch()
    side = int(round(SOFT_TOKENS ** 0.5))
    spec = dict(name="gemma3n_image_audio", kind="gemma3n", seed=3105, image=(97, 61), audio=1.9, text=mm.t3n(),
                audio_cfg=mm.A3N, top=dict(audio_soft_tokens_per_image=16, vision_soft_tokens_per_image=SOFT_TOKENS),
                layout=[2, "image", 2, "audio", 3],
                vision_placeholder=dict(timm_architecture="mobilenetv5_300m_enc with TINY_MNV5", arch=TINY_MNV5,
                                        stem=STEM, image_size=IMAGE_SIZE, msfa_output_resolution=side),
                features="Gemma 3n: MobileNet-V5 (mobilenetv5_300m_enc's block kinds at 8-32 channels: edge residual, "
                         "universal inverted residual, mobile MQA with k/v down-sampling), multi-scale fusion of the last "
                         "two stages to a 4x4 grid (16 soft tokens of 2048), vision hard/soft embedder; 128x128 "
                         "SigLIP processor square; USM audio encoder as gemma3n_audio; text AltUp/LAuReL/PLE")

    def build(s):
        import torch
        T = mm._t()
        vision = T.Gemma3nVisionConfig(architecture="mobilenetv5_300m_enc", hidden_size=2048, vocab_size=64,
                                       vocab_offset=384, rms_norm_eps=1e-6,
                                       model_args=dict(msfa_output_resolution=side, stem_size=STEM))
        cfg = T.Gemma3nConfig(text_config=T.Gemma3nTextConfig(**mm.COMMON, **s["text"]), vision_config=vision,
                              audio_config=T.Gemma3nAudioConfig(**s["audio_cfg"]), **s["top"])
        for k, (_, i) in mm.TOK["gemma3n"].items():
            a = next((a for a in (k + "_id", k + "_index") if hasattr(cfg, a)), None)
            if a:
                setattr(cfg, a, i)
        cfg._attn_implementation = "eager"
        torch.manual_seed(s["seed"])
        model = T.Gemma3nForConditionalGeneration(cfg).float().eval()
        model.set_attn_implementation("eager")
        mm.reinit(model, s)
        return model

    def prepare(s, d):
        """hf-mm's prepare for Gemma 3n with an image: Gemma 3n's processor (SigLIP square, bilinear,
        rescale only) and placeholder expansion, checked against Gemma3nProcessor."""
        import numpy as np
        import torch
        from PIL import Image
        T = mm._t()
        tok = {k: i for k, (_, i) in mm.TOK["gemma3n"].items()}
        mm.make_image(os.path.join(d, "image.png"), *s["image"], s["seed"])
        img = Image.open(os.path.join(d, "image.png")).convert("RGB")
        cls = getattr(T, "SiglipImageProcessorFast", None) or T.SiglipImageProcessor
        ip = cls(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, resample=2, do_rescale=True, rescale_factor=1 / 255,
                 do_normalize=False, image_mean=[0.5] * 3, image_std=[0.5] * 3)
        feats = dict(pixel_values=ip([img], return_tensors="pt")["pixel_values"].float())
        mm.make_wav(os.path.join(d, "audio.wav"), s["audio"], s["seed"])
        wav = mm.read_wav(os.path.join(d, "audio.wav"))
        fe = T.Gemma3nAudioFeatureExtractor(feature_size=s["audio_cfg"]["input_feat_size"])
        o = fe([wav], sampling_rate=mm.SR, return_tensors="pt")
        feats["input_features"], feats["input_features_mask"] = o["input_features"].float(), o["input_features_mask"].bool()
        info = dict(n_image=SOFT_TOKENS, n_audio=s["top"]["audio_soft_tokens_per_image"], image_processor=ip,
                    feature_extractor=fe, n_samples=len(wav))
        rng = np.random.default_rng(s["seed"])
        words = [i for i in range(4, 380) if i != mm.NL2 and i not in tok.values()]
        pieces, ids = [], [2]
        for piece in s["layout"]:
            if isinstance(piece, int):
                w = rng.choice(words, size=piece, replace=False).tolist()
                pieces.append(" ".join(f"w{i}" for i in w) + " ")
                ids += w
                continue
            m = piece[0]
            pieces.append(piece)
            ids += [mm.NL2, tok["bo" + m + "_token"]] + [tok[piece + "_token"]] * info["n_" + piece] + \
                [tok["eo" + m + "_token"], mm.NL2]
        # The processor expands a placeholder per medium: the soft token (as hf-mm's gemma3n_audio
        # prompt has it for audio) or the begin token; the text whose expansion equals the manual ids wins.
        tried = []
        for image_placeholder in ("image_token", "boi_token"):
            text = "<bos>" + "".join(mm.TOK["gemma3n"][image_placeholder if p == "image" else "audio_token"][0]
                                     if p in ("image", "audio") else p for p in pieces)
            try:
                proc = T.Gemma3nProcessor(feature_extractor=fe, image_processor=ip,
                                          tokenizer=mm.fake_tokenizer("gemma3n"), audio_seq_length=info["n_audio"],
                                          image_seq_length=info["n_image"])
                po = proc(text=[text], images=[img], audio=[wav], return_tensors="pt")
                pids = po["input_ids"][0].tolist()
                pc = dict(processor="Gemma3nProcessor", image_placeholder=image_placeholder,
                          input_ids_identical_to_manual=pids == ids,
                          features_identical=all(torch.equal(po[k].to(feats[k].dtype), feats[k])
                                                 for k in feats if k in po),
                          processor_output_keys=sorted(po.keys()))
                if pids != ids:
                    pc["processor_ids"] = pids
            except Exception as e:
                pc = dict(image_placeholder=image_placeholder, error=repr(e)[:800])
            tried.append(pc)
            info.update(text=text, processor_check=pc, processor=proc if "error" not in pc else None)
            if pc.get("input_ids_identical_to_manual"):
                break
        info["processor_check"] = dict(tried[-1], attempts=tried[:-1])
        tt = [1 if x == tok["image_token"] else 3 if x == tok["audio_token"] else 0 for x in ids]
        return torch.tensor(ids), torch.tensor(tt), feats, info

    mm.build, mm.prepare = build, prepare
    # The fusion adapter's 2048 channels and the embedder's matrices outgrow gen_one's 4 MB cap.
    source = inspect.getsource(mm.gen_one).replace("4_000_000", "6_000_000")
    exec(compile(source, mm.__file__, "exec"), mm.__dict__)
    mm.PUBLIC[:] = [spec]
    mm.HELDOUT[:] = []
    mm.gen_main(outdir, [spec["name"]])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
