#!/usr/bin/env python3
"""5-fold cross-validation by catalog over the training text: where the second model's settings (more
packages, the bs/hr/sr/sl regression and its weight against naive Bayes) were chosen (bench/RESULTS.md).
dev.tsv holds 20 lines a language, and any two settings differ on it by a line or two; this holds
16,000 lines out, each from a catalog its fold's model was not trained on.

    g++ -O2 -o /tmp/cld2_guesses tools/langid_set/cld2_guesses.cc -lcld2
    /usr/bin/python3 tools/langid_set/crossval.py WORK FOLDS.tsv [TRAIN.tsv] [--union] [--cld2 /tmp/cld2_guesses]

FOLDS.tsv is make_train.py's output whose catalogs make the folds and give the held-out lines (in
bench/RESULTS.md, the 44 packages' text); TRAIN.tsv (FOLDS.tsv if not given) is the text the folds'
models are trained on, with the held-out lines' strings dropped (there, the 142 packages' text: a
catalog that FOLDS.tsv does not hold goes to a fold by its name's hash). WORK keeps the feature counts.

The domains (DOMAIN.mo) are dealt into K folds of about equal size, largest first, each to the lightest
fold; from each fold, 60 lines of 10-40 characters and 40 of 41-200 per Latin- or Cyrillic-script
language (seeded) are scored by the model of the other four folds, made as make_model.py makes it, and
decided as language.cc decides: the candidates the letters allow, CLD2's first candidate its bonus,
English its prior, lines of under 4 letters CLD2's, then the group regression. Prints lines right of
all, short, and the close groups, for the settings bench/RESULTS.md lists.
"""
import collections
import hashlib
import math
import os
import pickle
import random
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model as mm  # noqa: E402

K = 5
LANGS = mm.LANGUAGES
GROUPS = [["bs", "hr", "sr", "sl"], ["es", "pt", "gl", "ca"], ["da", "nb", "sv"], ["cs", "sk"], ["id", "ms"]]
REPORT = [["bs", "hr", "sr"], ["da", "nb", "sv"], ["es", "pt", "gl", "ca"], ["cs", "sk"], ["id", "ms"]]
# language.cc's kRows for the Latin and Cyrillic scripts, in its order: (tag, script, letters beyond a-z).
ROWS = [
    ("en", "L", ""), ("fr", "L", "àâæçéèêëîïôœùûüÿ"), ("de", "L", "äöüßé"), ("es", "L", "áéíñóúü"),
    ("pt", "L", "áâãàçéêíóôõúü"), ("it", "L", "àèéìíîòóùú"), ("ru", "C", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"),
    ("vi", "L", "àáâãèéêìíòóôõùúýăđĩũơư"), ("nl", "L", "áàéèëïóöüíú"), ("sv", "L", "åäöé"), ("da", "L", "æøåé"),
    ("nb", "L", "æøåéèêóòô"), ("fi", "L", "äöåšž"), ("pl", "L", "ąćęłńóśźż"), ("cs", "L", "áčďéěíňóřšťúůýž"),
    ("sk", "L", "áäčďéíĺľňóôŕšťúýž"), ("hu", "L", "áéíóöőúüű"), ("ro", "L", "ăâîșțşţ"), ("hr", "L", "čćđšž"),
    ("sr-Cyrl", "C", "абвгдђежзијклљмнњопрстћуфхцчџш"), ("sr", "L", "čćđšž"), ("bs", "L", "čćđšž"),
    ("sl", "L", "čšžćđ"), ("bg", "C", "абвгдежзийклмнопрстуфхцчшщъьюяѝ"),
    ("uk", "C", "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя"), ("tr", "L", "çğıöşüâîû"), ("id", "L", "é"), ("ms", "L", ""),
    ("gl", "L", "áéíñóúüç"), ("ca", "L", "àçéèíïóòúü·"), ("et", "L", "äöõüšž"), ("lv", "L", "āčēģīķļņšūž"),
    ("lt", "L", "ąčęėįšųūž"),
]


def script_of(cp):
    """L (Latin), C (Cyrillic), X (Greek, Arabic, Devanagari, Thai), H (kana, Hangul, Han), O (other)."""
    if mm.is_letter(cp):
        return "C" if 0x400 <= cp <= 0x4FF else "L"
    if (0x370 <= cp <= 0x3FF or 0x1F00 <= cp <= 0x1FFF or 0x600 <= cp <= 0x6FF or 0x750 <= cp <= 0x77F
            or 0xFB50 <= cp <= 0xFDFF or 0xFE70 <= cp <= 0xFEFF or 0x900 <= cp <= 0x97F or 0xE00 <= cp <= 0xE7F):
        return "X"
    if (0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F or 0x3041 <= cp <= 0x30FF
            or 0x31F0 <= cp <= 0x31FF or 0xFF66 <= cp <= 0xFF9F or 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF
            or 0xF900 <= cp <= 0xFAFF or 0x20000 <= cp <= 0x2FA1F):
        return "H"
    return "O"


def candidates(text):
    """The model languages language.cc would weigh for a Latin or Cyrillic line (None for the others)."""
    n = collections.Counter(script_of(ord(c)) for c in text)
    if n["H"]:
        return None
    main = "L" if n["L"] >= n["C"] else "C"
    if n[main] == 0 or n["X"] > n[main]:
        return None
    own = {mm.lower(ord(c)) for c in text if ord(c) >= 0x80 and script_of(ord(c)) == main}
    ok = lambda row: all(chr(cp) in row[2] or (row[0] == "vi" and 0x1EA0 <= cp <= 0x1EF9) for cp in own)
    rows = [r for r in ROWS if r[1] == main and ok(r)] or [r for r in ROWS if r[1] == main]
    return main, [r[0] for r in rows]


def tag_of(lang):
    return "sr" if lang == "sr-Cyrl" else lang


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            label, text, source = line.rstrip("\n").split("\t")
            yield label, text, source.split("/")[-1]


def is_cyrillic(text):
    return 2 * sum(0x400 <= ord(c) <= 0x4FF for c in text) > sum(map(mm.is_letter, map(ord, text)))


def make_folds(path):
    size = collections.Counter(d for _, _, d in read_tsv(path))
    load, folds = [0] * K, {}
    for d, n in sorted(size.items(), key=lambda x: (-x[1], x[0])):
        folds[d] = min(range(K), key=lambda j: load[j])
        load[folds[d]] += n
    return lambda d: folds[d] if d in folds else int(hashlib.sha1(d.encode()).hexdigest(), 16) % K


def sample(path, fold_of, per_short=60, per_long=40, seed=1):
    pools = collections.defaultdict(list)
    for label, text, domain in read_tsv(path):
        if label in LANGS and candidates(text) is not None:
            pools[(fold_of(domain), label, len(text) <= 40)].append((fold_of(domain), label, text))
    rng = random.Random(seed)
    out = []
    for key in sorted(pools):
        rng.shuffle(pools[key])
        out += pools[key][:per_short if key[2] else per_long]
    return out


def count(path, fold_of, held):
    """Feature counts by (language, fold) and the group's lines (fold, label, feature set)."""
    counts = {(l, k): collections.Counter() for l in LANGS for k in range(K)}
    group = []
    for label, text, domain in read_tsv(path):
        if (label, text) in held or label not in LANGS:
            continue
        k, fs = fold_of(domain), mm.features(text)
        cyrillic = label == "sr" and is_cyrillic(text)
        counts[("sr-Cyrl" if cyrillic else label, k)].update(fs)
        if cyrillic:
            counts[("sr", k)].update(fs)  # make_model.py: Latin Serbian's model holds both scripts
        elif label in mm.GROUP:
            group.append((k, label, set(fs)))
    return counts, group


def build(counts, k, union=False):
    """make_model.py's naive Bayes costs from every fold but k: ({feature: {language: steps}}, floors)."""
    merged = {l: sum((counts[(l, j)] for j in range(K) if j != k), collections.Counter()) for l in LANGS}
    kept = {l: {f: n for f, n in c.most_common(mm.kPerLanguage) if n >= mm.kMinCount} for l, c in merged.items()}
    for g in GROUPS if union else []:  # every group language's cost for each feature one of them kept
        for f in set().union(*(kept[l] for l in g)):
            for l in g:
                if merged[l][f] and f not in kept[l]:
                    kept[l][f] = merged[l][f]
    vocabulary = len(set().union(*kept.values()))
    costs, floors, top = collections.defaultdict(dict), {}, len(mm.CODES) - 1
    for l in LANGS:
        denom = sum(merged[l].values()) + mm.ALPHA * vocabulary
        for f, n in kept[l].items():
            costs[f][l] = min(top, round(-math.log((n + mm.ALPHA) / denom) / mm.kStep))
        floors[l] = min(top, round(-math.log(mm.ALPHA / denom) / mm.kStep))
    return costs, floors


class Scored:
    """The held-out lines' naive Bayes costs (n-grams and whole words apart), candidates, CLD2's pick."""

    def __init__(self, rows, models, cld2):
        idx = {l: i for i, l in enumerate(LANGS)}
        self.labels = np.array([r[1] for r in rows])
        self.short = np.array([len(r[2]) <= 40 for r in rows])
        self.mask = np.zeros((len(rows), len(LANGS)), bool)
        self.ng, self.wd = np.zeros((len(rows), len(LANGS))), np.zeros((len(rows), len(LANGS)))
        self.cld2, self.letters = np.full(len(rows), -1), np.zeros(len(rows), int)
        for i, ((k, _, text), guesses) in enumerate(zip(rows, cld2)):
            cands = candidates(text)[1]
            self.mask[i, [idx[c] for c in cands]] = True
            self.cld2[i] = next((idx[c] for g in guesses for c in cands if tag_of(c) == g), -1)
            costs, floors = models[k]
            floor = np.array([floors[l] for l in LANGS], float)
            for f in mm.features(text):
                self.letters[i] += len(f) == 1
                if f in costs:
                    v = floor.copy()
                    for l, c in costs[f].items():
                        v[idx[l]] = c
                    (self.wd if len(f) > 2 and f[0] == "<" and f[-1] == ">" else self.ng)[i] += v
        order = list(dict.fromkeys(r[0] for r in ROWS))
        self.rank = np.array([order.index(l) for l in LANGS]) * 1e-6  # ties: kRows' order

    def costs(self, ww, bonus, bias):
        """[line, language] naive Bayes cost in nats, CLD2's bonus, English's prior and `bias` taken off."""
        s = (self.ng + ww * self.wd) * mm.kStep
        s[:, LANGS.index("en")] -= 6
        for l, b in bias.items():
            s[:, LANGS.index(l)] -= b
        has = self.cld2 >= 0
        s[np.flatnonzero(has), self.cld2[has]] -= bonus
        return np.where(self.mask, s, np.inf) + self.rank

    def decide(self, ww=4, bonus=2, bias={}, group=None, weight=0.03):
        """Tags as language.cc answers them; group: {line: regression scores over mm.GROUP}."""
        c = self.costs(ww, bonus, bias)
        best = np.where((self.letters < 4) & (self.cld2 >= 0), self.cld2, c.argmin(1))
        gi = [LANGS.index(l) for l in mm.GROUP]
        for i, scores in (group or {}).items():
            members = [j for j, l in enumerate(gi) if self.mask[i, l]]
            if LANGS[best[i]] in mm.GROUP and len(members) >= 2 and self.letters[i] >= 4:
                best[i] = gi[max(members, key=lambda j: scores[j] - weight * c[i, gi[j]])]
        return np.array([tag_of(LANGS[b]) for b in best])

    def report(self, got):
        ok = got == self.labels
        parts = [f"all {ok.sum()}/{len(ok)}", f"short {ok[self.short].sum()}/{self.short.sum()}"]
        for g in REPORT:
            sel = np.isin(self.labels, g)
            parts.append(f"{'/'.join(g)} {ok[sel].sum()}/{sel.sum()}")
        return "  ".join(parts)


def main(work, folds_path, train_path, union, cld2_bin):
    os.makedirs(work, exist_ok=True)
    fold_of = make_folds(folds_path)
    rows = sample(folds_path, fold_of)
    cache = os.path.join(work, "counts_" + os.path.basename(train_path) + ".pkl")
    if not os.path.exists(cache):
        with open(cache, "wb") as f:
            pickle.dump(count(train_path, fold_of, {(r[1], r[2]) for r in rows}), f, protocol=5)
    with open(cache, "rb") as f:
        counts, group_lines = pickle.load(f)
    guesses = subprocess.run([cld2_bin], input="\n".join(r[2] for r in rows) + "\n", capture_output=True,
                             text=True, check=True).stdout.split("\n")[:len(rows)]
    cld2 = [g.split(",") if g else [] for g in guesses]
    S = Scored(rows, {k: build(counts, k, union) for k in range(K)}, cld2)
    print(f"{len(rows)} held-out lines; naive Bayes alone:")
    for ww in (2, 3, 4, 6):
        for bonus in (0, 1, 2, 3, 4):
            print(f"  whole-word weight {ww}, CLD2 bonus {bonus}: {S.report(S.decide(ww, bonus))}")
    for lang in ("bs", "ms", "gl"):
        for b in (1, 2, 3, 4):
            print(f"  bias {b} toward {lang}: {S.report(S.decide(bias={lang: b}))}")
    scores = {}
    for k in range(K):
        vocab, W, b = mm.train_group([(l, fs) for j, l, fs in group_lines if j != k], mm.GROUP)
        index = {f: i for i, f in enumerate(vocab)}
        for i, r in enumerate(rows):
            if r[0] == k:
                idx = [index[f] for f in set(mm.features(r[2])) if f in index]
                scores[i] = b + W[idx].sum(0)
    print(f"with the {'/'.join(mm.GROUP)} regression:")
    for ww in (4, 6):
        for weight in (0, 0.01, 0.02, 0.03, 0.05, 0.1):
            print(f"  whole-word weight {ww}, {weight} x naive Bayes: {S.report(S.decide(ww, group=scores, weight=weight))}")


if __name__ == "__main__":
    args = sys.argv[1:]
    cld2_bin = "/tmp/cld2_guesses"
    if "--cld2" in args:
        i = args.index("--cld2")
        cld2_bin = args[i + 1]
        del args[i:i + 2]
    union = "--union" in args
    args = [a for a in args if a != "--union"]
    main(args[0], args[1], args[2] if len(args) > 2 else args[1], union, cld2_bin)
