#!/usr/bin/env python3
"""The task presets' output contract measured on shared/testdata/flows/rewrite_workload.jsonl (50
Chinese and English messages, each with its task), through the CLI, with
bench/flows/workload_glossary.tsv (one term of each message) as --glossary:

1. Scripted answers (`gemlet synth --script`, one model per message and kind, Gemma 4's vocabulary),
   each with the exit code and output the contract must give:
   - good:       the message's own words (a stand-in for a right answer)  -> exit 0, printed as is
   - lead-in:    "Sure! Here is the polished message: "..."" / "好的，以下是润色后的内容：\\n\\n“...”"
                                                                       -> exit 0, the words alone
   - bare lead-in: "Here is a better way to say it" (no result to cut out) -> exit 3, nothing printed
   - wrong language: the other language's message of the same number  -> exit 4, nothing printed
   - term dropped: the message with its glossary term replaced          -> exit 5, nothing printed
2. The demo model (-m demo): its answers are noise; counts of each exit code, and what passed.

  python3 bench/flows/contract.py --gemlet build/apps/gemlet/gemlet \\
      --vocab ../shared/testdata/tokenizer/gemma4/ggml-vocab-gemma-4.gguf.xz
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

LEAD_IN = {"en": 'Sure! Here is the polished message: "{}"', "zh": "好的，以下是润色后的内容：\n\n“{}”"}
BARE_LEAD_IN = {"en": "Here is a better way to say it", "zh": "以下是更好的说法"}
DROPPED = {"en": "that", "zh": "那个"}
BREACHES = [("opens with a lead-in", "lead-in"), ("the answer is empty", "empty"), ("cut off", "cut off"),
            ("of the input's words", "unrelated"), ("the answer is in ", "language"), ("lacks the glossary", "glossary")]
EXPECT = {"good": 0, "lead-in": 0, "bare lead-in": 3, "wrong language": 4, "term dropped": 5}


def task_args(row):
    parts = row["task"].split()
    return [parts[0]] + (["--style", parts[1]] if len(parts) > 1 else [])


def run(cmd, text):
    p = subprocess.run(cmd, input=text.encode(), capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemlet", default="build/apps/gemlet/gemlet")
    ap.add_argument("--vocab", default="../shared/testdata/tokenizer/gemma4/ggml-vocab-gemma-4.gguf.xz",
                    help="a GGUF with Gemma 4's tokenizer (.xz is decompressed)")
    ap.add_argument("--workload", default="../shared/testdata/flows/rewrite_workload.jsonl")
    ap.add_argument("--glossary", default="bench/flows/workload_glossary.tsv")
    ap.add_argument("--demo", default="demo", help="the model of part 2 (-m)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.workload, encoding="utf-8") if line.strip()]
    terms = [t.strip() for t in open(args.glossary, encoding="utf-8") if t.strip() and not t.startswith("#")]
    by_id = {r["id"]: r for r in rows}
    common = ["--no-cache", "-t", str(args.threads), "--glossary", args.glossary]
    tmp = tempfile.mkdtemp(prefix="gemlet-contract-")
    vocab = args.vocab
    if vocab.endswith(".xz"):
        vocab = os.path.join(tmp, "vocab.gguf")
        with open(vocab, "wb") as out:
            subprocess.run(["xz", "-dc", args.vocab], stdout=out, check=True)

    results = collections.defaultdict(lambda: collections.Counter())  # kind -> {"right": n, "wrong": n}
    failures = []
    for r in rows:
        lang = "zh" if r["lang"].startswith("zh") else "en"
        text = r["text"]
        twin = by_id[("en-" if lang == "zh" else "zh-") + r["id"].split("-")[1]]["text"]
        term = next(t for t in terms if t in text)  # the message's own term (the glossary's order)
        answers = {
            "good": text,
            "lead-in": LEAD_IN[lang].format(text),
            "bare lead-in": BARE_LEAD_IN[lang],
            "wrong language": twin,
            "term dropped": text.replace(term, DROPPED[lang]),
        }
        for kind, answer in answers.items():
            script = os.path.join(tmp, "s.json")
            model = os.path.join(tmp, "m.gguf")
            with open(script, "w", encoding="utf-8") as f:
                json.dump({"answers": [answer + "<turn|>"]}, f, ensure_ascii=False)
            made = subprocess.run([args.gemlet, "synth", "--script", script, "--tokenizer", vocab, "-o", model],
                                  capture_output=True)
            if made.returncode != 0:
                sys.exit(f"synth failed: {made.stderr.decode(errors='replace')}")
            code, out, err = run([args.gemlet] + task_args(r) + ["-m", model] + common, text)
            want_out = text + "\n" if EXPECT[kind] == 0 else ""
            right = code == EXPECT[kind] and out == want_out
            results[kind]["right" if right else "wrong"] += 1
            results[kind][f"exit {code}"] += 1
            if not right:
                failures.append(f"{r['id']} {kind}: exit {code}, stdout {out!r}, stderr {err.strip()!r}")

    print(f"## scripted answers: {len(rows)} messages each\n")
    print("| answer | expected | as expected | exit codes |")
    print("|---|---|---:|---|")
    for kind, want in EXPECT.items():
        c = results[kind]
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(c.items()) if k.startswith("exit"))
        expected = "exit 0, the words alone" if want == 0 else f"exit {want}, nothing on stdout"
        print(f"| {kind} | {expected} | {c['right']} of {len(rows)} | {codes} |")
    for f in failures:
        print("  not as expected:", f)

    if args.skip_demo:
        return
    codes = collections.Counter()
    by_lang = collections.defaultdict(collections.Counter)
    breaches = collections.Counter()  # every breach named on stderr, not only the one the exit code tells
    passed = []
    for r in rows:
        code, out, err = run([args.gemlet] + task_args(r) + ["-m", args.demo] + common, r["text"])
        codes[code] += 1
        by_lang[r["lang"]][code] += 1
        for line in err.splitlines():
            for key, name in BREACHES:
                if key in line:
                    breaches[name] += 1
        if code == 0:
            passed.append(f"{r['id']}: {out.strip()[:80]!r}")
        elif out:
            passed.append(f"{r['id']}: exit {code} but printed {out.strip()[:80]!r}")
    print(f"\n## the demo model ({args.demo}): {len(rows)} messages\n")
    print("| inputs | 0 printed | 3 not a result | 4 language | 5 glossary | other |")
    print("|---|---:|---:|---:|---:|---:|")
    for lang, c in sorted(by_lang.items()) + [("all", codes)]:
        other = sum(v for k, v in c.items() if k not in (0, 3, 4, 5))
        print(f"| {lang} | {c[0]} | {c[3]} | {c[4]} | {c[5]} | {other} |")
    print("\nbreaches named (a message may have several): " +
          ", ".join(f"{name} {breaches[name]}" for _, name in BREACHES))
    for p in passed:
        print("  passed:", p)


if __name__ == "__main__":
    main()
