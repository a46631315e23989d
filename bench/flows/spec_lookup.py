#!/usr/bin/env python3
"""Prompt-lookup speculation on the everyday workload: shared/testdata/flows/rewrite_workload.jsonl
(50 Chinese and English messages, each with its task: polish, rewrite formal, rewrite concise),
run through `gemlet polish|rewrite` with --spec none and --spec lookup, greedy, on one model.

Reports per language and overall: tokens kept per verification step, the share of drafts kept,
decode tokens/s without and with lookup (medians over the messages), and whether the outputs were
identical (they must be: speculation changes no token).

  python3 bench/flows/spec_lookup.py --gemlet build/apps/gemlet/gemlet -m models/gemlet-demo.gguf
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

STATS = re.compile(r"decode ([0-9.]+) tok/s, lookup: (\d+) steps, (\d+) drafted, (\d+) kept")


def run(gemlet, model, task, style, text, spec, threads):
    # --lenient: the speed is measured whatever the answer; the demo model's break the contract.
    cmd = [gemlet, task, "-m", model, "--stats", "--lenient", "--spec", spec, "-t", str(threads), "--no-cache"]
    if style:
        cmd += ["--style", style]
    p = subprocess.run(cmd, input=text.encode(), capture_output=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    m = STATS.search(p.stderr.decode(errors="replace"))
    if not m:
        sys.exit(f"no stats line in: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode(), float(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemlet", default="build/apps/gemlet/gemlet")
    ap.add_argument("-m", "--model", default="models/gemlet-demo.gguf")
    ap.add_argument("--workload", default="../shared/testdata/flows/rewrite_workload.jsonl")
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.workload, encoding="utf-8") if line.strip()]
    by_lang = {}
    identical = 0
    for r in rows:
        parts = r["task"].split()
        task, style = parts[0], (parts[1] if len(parts) > 1 else "")
        out0, tps0, _, _, _ = run(args.gemlet, args.model, task, style, r["text"], "none", args.threads)
        out1, tps1, steps, drafted, kept = run(args.gemlet, args.model, task, style, r["text"], "lookup", args.threads)
        identical += out0 == out1
        by_lang.setdefault(r["lang"], []).append((tps0, tps1, steps, drafted, kept))
    print(f"{len(rows)} messages, outputs identical with and without lookup: {identical} of {len(rows)}")
    print("| inputs | messages | steps | drafted | kept | kept per step | drafts kept | decode t/s none | decode t/s lookup | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    everything = []
    for lang, xs in sorted(by_lang.items()) + [("all", None)]:
        xs = xs if xs is not None else everything
        if lang != "all":
            everything.extend(xs)
        steps = sum(x[2] for x in xs)
        drafted = sum(x[3] for x in xs)
        kept = sum(x[4] for x in xs)
        t0 = statistics.median(x[0] for x in xs)
        t1 = statistics.median(x[1] for x in xs)
        print(f"| {lang} | {len(xs)} | {steps} | {drafted} | {kept} | {kept / steps if steps else 0:.2f} | "
              f"{100 * kept / drafted if drafted else 0:.0f}% | {t0:.1f} | {t1:.1f} | {t1 / t0 if t0 else 0:.2f} |")


if __name__ == "__main__":
    main()
