#!/usr/bin/env python3
"""Writes src/flows/langid_model.inc, the naive Bayes model DetectLanguage uses beside CLD2, from the
training text make_train.py extracts (Debian's message catalogs, none of the evaluation sets' catalogs).

    tools/langid_set/make_train.py /tmp/train.tsv tools/langid_set/train_packages.txt
    tools/langid_set/make_model.py /tmp/train.tsv src/flows/langid_model.inc

Why a model of our own: CLD2's tables were trained on web pages, and on 10-40 characters it cannot
tell the close languages apart (bs/hr/sr, es/pt/gl/ca, da/nb/sv, id/ms) and reads a few accentless
words of many languages as English. Trained on short translated strings, character n-grams do better.

Features (language.cc's LanguageModelFeatures computes the same): the text's words (runs of Latin or
Cyrillic letters, lower-cased as language.cc's Lower does) as "<word>", each n-gram of 1-4 code points
of "<word>" but "<" and ">" alone, and the whole "<word>" when longer than 4. For each language the
kPerLanguage most frequent features its text holds at least kMinCount times are kept with their cost, -log P(feature | language) (add-alpha
smoothing over the kept vocabulary), in steps of kStep nats; a feature a language did not keep costs
that language its floor, the cost of a feature seen zero times. The table is text: one line a feature,
"FEATURE CODES", CODES a pair of characters (language, cost) per language that kept it, each character
one of kCodes, so the table compiles as plain string literals.

Then the group model: naive Bayes counts the features Bosnian, Croatian and Serbian share (most of
them) as evidence, and on a few words their small differences in frequency outweigh the words that
tell the three apart ("tačaka"/"točaka", "Da li"/"Je li", "dugme"/"gumb"). A softmax regression over
the same features, trained on the Latin lines of GROUP alone, weighs the features that separate them;
DetectLanguage asks it when naive Bayes chooses a language of GROUP (language.cc's RescoreGroup).
Its table is written like the first, with three characters a language: the language, then the
weight in two (90 * first + second, in steps of kGroupStep above -kGroupZero steps; one character's
90 steps were too coarse for weights of -2.7 to 2.3). Trained with numpy (Debian's python3-numpy),
seeded: the same text gives the same table.
"""
import collections
import math
import sys

import numpy as np

# The languages of the two scripts several languages here share (language.cc's kRows); the others
# are told by their script alone. Cyrillic Serbian has a model of its own: in Serbian's of both
# scripts, the kept features split between them and Cyrillic Serbian lost to Bulgarian on dev.tsv.
# Latin Serbian keeps the model of both scripts (one of Latin lines alone took Bosnian and Croatian
# lines on dev.tsv: 751 of 800 right against 756).
LANGUAGES = ["bg", "bs", "ca", "cs", "da", "de", "en", "es", "et", "fi", "fr", "gl", "hr", "hu", "id", "it", "lt",
             "lv", "ms", "nb", "nl", "pl", "pt", "ro", "ru", "sk", "sl", "sr", "sr-Cyrl", "sv", "tr", "uk", "vi"]
NMAX = 4
# Features kept per language, and how often a language's text must hold one for it to be kept. Tried
# on dev.tsv (kept 2,000 / 8,000 / 20,000 / 30,000 / 50,000; seen at least 1 / 3 / 5 / 8 times):
# 2,000 gave 755 of 800, 20,000 of those seen 3 times 769, more no better (bench/RESULTS.md).
kPerLanguage = 20000
kMinCount = 3
ALPHA = 0.5
kStep = 0.25
# Printable, and no '"', '\\' or '?' (two of which make a trigraph GCC warns about): 90 values.
CODES = "".join(chr(c) for c in range(35, 127) if chr(c) not in "\\?")
# The group model (see above): features seen in 2 lines or more, 6 epochs of Adagrad (rate 0.2, L2
# 1e-6), each language's lines weighted as if the four were as many. Set once and not tuned; whether it
# helps, and its weight against naive Bayes (language.cc), were measured by crossval.py's 5-fold
# cross-validation over the training catalogs (bench/RESULTS.md).
GROUP = ["bs", "hr", "sr", "sl"]
kGroupMinLines = 2
kGroupEpochs = 6
kGroupStep = 0.001
kGroupZero = 4050


def lower(cp):
    if 0x41 <= cp <= 0x5A or (0xC0 <= cp <= 0xDE and cp != 0xD7) or 0x410 <= cp <= 0x42F:
        return cp + 0x20
    if 0x400 <= cp <= 0x40F:
        return cp + 0x50
    if cp == 0x130:
        return 0x69
    if 0x100 <= cp <= 0x137 or 0x14A <= cp <= 0x177 or 0x218 <= cp <= 0x21B or 0x460 <= cp <= 0x4FF:
        return cp | 1
    if 0x139 <= cp <= 0x148 or 0x179 <= cp <= 0x17E:
        return cp + (cp & 1)
    return cp


def is_letter(cp):
    return (0x61 <= cp <= 0x7A or 0x41 <= cp <= 0x5A or (0xC0 <= cp <= 0x24F and cp not in (0xD7, 0xF7))
            or 0x1E00 <= cp <= 0x1EFF or 0x400 <= cp <= 0x4FF)


def features(text):
    words, cur = [], []
    for ch in text + " ":
        if is_letter(ord(ch)):
            cur.append(chr(lower(ord(ch))))
        elif cur:
            words.append("".join(cur))
            cur = []
    out = []
    for w in words:
        p = "<" + w + ">"
        for n in range(1, NMAX + 1):
            for i in range(len(p) - n + 1):
                if p[i:i + n] not in ("<", ">"):
                    out.append(p[i:i + n])
        if len(p) > NMAX:
            out.append(p)
    return out


def train_group(lines, group, seed=0, rate=0.2, l2=1e-6, batch=256):
    """Softmax regression over the features (present or not) of (label, features) lines: weights
    [feature, language] and biases [language]."""
    df = collections.Counter()
    for _, fs in lines:
        df.update(fs)
    vocab = sorted(f for f, n in df.items() if n >= kGroupMinLines)
    index = {f: i for i, f in enumerate(vocab)}
    G = len(group)
    X = [np.array(sorted(index[f] for f in fs if f in index), dtype=np.int64) for _, fs in lines]
    y = np.array([group.index(l) for l, _ in lines])
    weight = len(y) / (G * np.bincount(y, minlength=G))  # each language as if the four were as many
    W, b = np.zeros((len(vocab), G)), np.zeros(G)
    HW, hb = np.full((len(vocab), G), 1e-8), np.full(G, 1e-8)  # Adagrad's sums of squares
    rng = np.random.default_rng(seed)
    for _ in range(kGroupEpochs):
        order = rng.permutation(len(X))
        for s in range(0, len(order), batch):
            rows = order[s:s + batch]
            lens = np.array([len(X[i]) for i in rows])
            idx = np.concatenate([X[i] for i in rows])
            seg = np.repeat(np.arange(len(rows)), lens)
            z = np.zeros((len(rows), G)) + b
            np.add.at(z, seg, W[idx])
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            g = p
            g[np.arange(len(rows)), y[rows]] -= 1
            g *= weight[y[rows]][:, None]
            uniq, inv = np.unique(idx, return_inverse=True)
            gW = np.zeros((len(uniq), G))
            np.add.at(gW, inv, g[seg])
            gW += l2 * W[uniq]
            HW[uniq] += gW ** 2
            W[uniq] -= rate * gW / np.sqrt(HW[uniq])
            gb = g.sum(0)
            hb += gb ** 2
            b -= rate * gb / np.sqrt(hb)
    return vocab, W, b


def write_table(f, name, table):
    f.write(f"constexpr char {name}[] =\n")
    # Several features a source line: one a line cost 2 MB of quotes and indents.
    rows = [f"{feature} {''.join(table[feature])}\\n" for feature in sorted(table, key=lambda s: s.encode("utf-8"))]
    for i in range(0, len(rows), 16):
        f.write(f'    "{"".join(rows[i:i + 16])}"\n')
    f.write("    \"\";\n")


def main(train, out):
    counts = {l: collections.Counter() for l in LANGUAGES}
    lines = collections.Counter()

    def count(counter, text):
        counter.update(features(text))
        lines[next(l for l in LANGUAGES if counts[l] is counter)] += 1
    group_lines = []
    with open(train, encoding="utf-8") as f:
        next(f)
        for line in f:
            label, text, _ = line.rstrip("\n").split("\t")
            cyrillic = label == "sr" and 2 * sum(0x400 <= ord(c) <= 0x4FF for c in text) > sum(map(is_letter, map(ord, text)))
            if cyrillic:
                count(counts["sr-Cyrl"], text)
            if label in counts:
                count(counts[label], text)
            if label in GROUP and not cyrillic:
                group_lines.append((label, set(features(text))))
    kept = {l: {f: n for f, n in c.most_common(kPerLanguage) if n >= kMinCount} for l, c in counts.items()}
    vocabulary = len(set().union(*kept.values()))
    table = collections.defaultdict(list)
    floors = []
    for i, l in enumerate(LANGUAGES):
        denom = sum(counts[l].values()) + ALPHA * vocabulary
        cost = lambda n: min(len(CODES) - 1, round(-math.log((n + ALPHA) / denom) / kStep))
        for feature, n in kept[l].items():
            table[feature].append(CODES[i] + CODES[cost(n)])
        floors.append(CODES[cost(0)])
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated by tools/langid_set/make_model.py from the catalogs tools/langid_set/train_packages.txt\n"
                "// lists: do not edit. " + ", ".join(f"{l} {lines[l]}" for l in LANGUAGES) + " training lines.\n")
        f.write(f'constexpr std::string_view kModelLanguages = "{" ".join(LANGUAGES)}";\n')
        f.write(f'constexpr std::string_view kModelCodes = "{CODES}";\n')
        f.write(f'constexpr std::string_view kModelFloors = "{"".join(floors)}";\n')
        f.write(f"constexpr double kModelStep = {kStep};\n")
        # An array, not a string_view: a constexpr string_view would count its 3 MB at compile time.
        write_table(f, "kModel", table)
        vocab, W, b = train_group(group_lines, GROUP)
        top = len(CODES) ** 2 - 1
        q = np.clip(np.round(W / kGroupStep) + kGroupZero, 0, top).astype(int)
        group_table = {}
        for i, feature in enumerate(vocab):
            if (q[i] != kGroupZero).any():
                group_table[feature] = [CODES[j] + CODES[q[i, j] // len(CODES)] + CODES[q[i, j] % len(CODES)]
                                        for j in range(len(GROUP)) if q[i, j] != kGroupZero]
        f.write(f'constexpr std::string_view kGroupLanguages = "{" ".join(GROUP)}";\n')
        f.write(f"constexpr double kGroupBias[] = {{{', '.join(f'{x:.4f}' for x in b)}}};\n")
        f.write(f"constexpr double kGroupStep = {kGroupStep};\n")
        f.write(f"constexpr int kGroupZero = {kGroupZero};\n")
        write_table(f, "kGroupModel", group_table)
    print(f"{out}: {len(table)} features, {sum(map(len, table.values()))} entries, vocabulary {vocabulary}; "
          f"group {' '.join(GROUP)}: {len(group_lines)} lines, {len(group_table)} of {len(vocab)} features",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
