#!/usr/bin/env python3
"""Held-out perplexity of GGUF models through gemlet's own forward pass (`gemlet logits`).

Usage: perplexity.py GEMLET_BINARY EVAL_BIN MODEL.gguf [MODEL.gguf ...]
EVAL_BIN is prepare_data.sh's device/eval.bin (held-out documents as <bos> ids <eos>, uint16). It is
cut into non-overlapping 1024-token windows and every next token is scored, exactly as train.py's
"eval loss" is computed, so the F32 line can be compared with the training log. (`gemlet eval`
measures text files the way llama-perplexity does; this script keeps the training loss's procedure.)
Needs numpy (Debian: python3-numpy).
"""
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

WINDOW = 1024


def main():
    gemlet, eval_bin = sys.argv[1:3]
    models = sys.argv[3:]
    ids = np.fromfile(eval_bin, dtype="<u2").astype(np.int64)
    n_win = (len(ids) - 1) // WINDOW
    print(f"{eval_bin}: {len(ids)} tokens, {n_win} windows of {WINDOW}, {n_win * WINDOW} scored")
    for model in models:
        t0 = time.time()
        nll, n = 0.0, 0
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "logits.f32")
            for w in range(n_win):
                x = ids[w * WINDOW:(w + 1) * WINDOW]
                y = ids[w * WINDOW + 1:(w + 1) * WINDOW + 1]
                subprocess.run([gemlet, "logits", "-m", model, "--tokens", ",".join(map(str, x.tolist())),
                                "--out", out, "--kv-type", "f32"], check=True, capture_output=True)
                logits = np.fromfile(out, dtype="<f4").reshape(WINDOW, -1).astype(np.float64)
                m = logits.max(axis=1, keepdims=True)
                lse = (m[:, 0] + np.log(np.exp(logits - m).sum(axis=1)))
                nll += float((lse - logits[np.arange(WINDOW), y]).sum())
                n += WINDOW
        loss = nll / n
        print(f"{os.path.basename(model)}\tsize {os.path.getsize(model) / 2**20:.2f} MiB\tloss {loss:.4f}\t"
              f"ppl {math.exp(loss):.3f}\t({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
