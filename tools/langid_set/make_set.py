#!/usr/bin/env python3
"""Builds tests/data/langid/{labelled,dev}.tsv from the translated message catalogs Debian packages install.

Every line is a human translator's string from /usr/share/locale/<locale>/LC_MESSAGES/*.mo (English: the
catalogs' msgids, the strings the programs were written with). Nothing is written by hand, and lines are
picked without looking at what any detector says about them: filters on the text, then a fixed hash order.

    tools/langid_set/make_set.py OUT_DIR   (run on a Debian 12 machine; the result depends on what is installed)

Two disjoint sets: labelled.tsv is the one the tests and bench/RESULTS.md report on; dev.tsv is what
detector choices (thresholds, fallbacks) may be tried on, so the reported number is not tuned to its lines.
"""
import collections
import glob
import hashlib
import os
import re
import struct
import sys
import unicodedata

# label -> locale folders (all of them are the same language; pt_BR and pt_PT are both "pt").
LOCALES = {
    "fr": ["fr"], "de": ["de"], "es": ["es"], "pt": ["pt", "pt_PT", "pt_BR"], "it": ["it"], "nl": ["nl"],
    "sv": ["sv"], "da": ["da"], "nb": ["nb", "nb_NO", "no"], "fi": ["fi"], "pl": ["pl"], "cs": ["cs"], "sk": ["sk"],
    "hu": ["hu"], "ro": ["ro"], "hr": ["hr"], "sr": ["sr", "sr@latin", "sr@Latn"], "bs": ["bs"], "sl": ["sl"],
    "el": ["el"], "bg": ["bg"], "uk": ["uk"], "ru": ["ru"], "tr": ["tr"], "vi": ["vi"], "id": ["id"], "ms": ["ms"],
    "ar": ["ar"], "hi": ["hi"], "th": ["th"], "ja": ["ja"], "ko": ["ko"], "zh-Hans": ["zh_CN", "zh_Hans"],
    "zh-Hant": ["zh_TW", "zh_HK", "zh_Hant"], "gl": ["gl"], "ca": ["ca"], "et": ["et"], "lv": ["lv"], "lt": ["lt"],
}
# The script a language's lines must be written in (the letters of any other script, beyond a few
# Latin ones such as a product name, mean the string was left partly untranslated).
SCRIPT = {"el": "GREEK", "bg": "CYRILLIC", "uk": "CYRILLIC", "ru": "CYRILLIC", "ar": "ARABIC", "hi": "DEVANAGARI",
          "th": "THAI", "ja": "CJK", "ko": "HANGUL", "zh-Hans": "CJK", "zh-Hant": "CJK"}
SHORT, LONG = (10, 40), (41, 200)  # characters: the messages users polish, and longer ones
PER_LABEL = {"short": 12, "long": 8}  # in each of labelled.tsv and dev.tsv


def read_mo(path):
    """(msgid, msgstr) pairs of a GNU .mo file; msgctxt and plural forms beyond the first dropped."""
    data = open(path, "rb").read()
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if endian is None:
        return []
    _, n, orig, trans = struct.unpack(endian + "4I", data[4:20])
    out = []
    for i in range(n):
        olen, ooff = struct.unpack(endian + "2I", data[orig + 8 * i:orig + 8 * i + 8])
        tlen, toff = struct.unpack(endian + "2I", data[trans + 8 * i:trans + 8 * i + 8])
        try:
            msgid = data[ooff:ooff + olen].decode("utf-8")
            msgstr = data[toff:toff + tlen].decode("utf-8")
        except UnicodeDecodeError:
            return []  # a catalog in a legacy charset: skipped whole
        if not msgid:
            continue  # the header
        out.append((msgid.split("\x04")[-1].split("\x00")[0], msgstr.split("\x00")[0]))
    return out


def owners():
    """.mo path -> Debian package that installed it."""
    out = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        for line in open(lst, encoding="utf-8", errors="replace"):
            if line.endswith(".mo\n"):
                out[line[:-1]] = pkg
    return out


MARKUP = re.compile(r"[%{}<>$\\/@=|\[\]#*^~`_]|https?:|\.\w{2,4}\b|\w\.\w|--|\t")


def clean(s):
    s = re.sub(r"&(?=\w)", "", s)          # Qt accelerators (GTK's "_" is refused below with markup)
    s = re.sub(r"\(&\w\)|\(_\w\)", "", s)  # CJK catalogs' "(&F)" accelerators
    s = re.sub(r"\s+", " ", s).strip()
    return s


def script_of(ch):
    name = unicodedata.name(ch, "")
    if "CJK" in name or "HIRAGANA" in name or "KATAKANA" in name:
        return "CJK"
    for script in ("LATIN", "CYRILLIC", "GREEK", "ARABIC", "DEVANAGARI", "THAI", "HANGUL"):
        if name.startswith(script):
            return script
    return "OTHER"


def acceptable(label, msgid, text):
    n = len(text)
    if not (SHORT[0] <= n <= LONG[1]) or MARKUP.search(text) or any(c.isdigit() for c in text):
        return False
    if text.casefold() == clean(msgid).casefold() and label != "en":
        return False  # untranslated
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 0.6 * len(text.replace(" ", "")):
        return False
    scripts = collections.Counter(script_of(c) for c in letters)
    want = SCRIPT.get(label, "LATIN")
    if label == "sr":
        want = "CYRILLIC" if scripts["CYRILLIC"] >= scripts["LATIN"] else "LATIN"
    if scripts[want] < (0.85 if want != "LATIN" else 1.0) * len(letters):
        return False
    if want == "LATIN":
        words = re.findall(r"\w+", text.casefold())
        if len(words) < 2:
            return False
        if label != "en":
            source = set(re.findall(r"\w+", msgid.casefold()))
            if sum(w in source for w in words) >= 0.5 * len(words):
                return False  # mostly the English words left as they were
        if sum(w[0].isupper() for w in text.split()) > 0.6 * len(words) and len(words) > 3:
            return False  # Title Case Menu Labels Are Not Sentences
    return True


def h(s):
    return hashlib.sha1(s.encode("utf-8")).hexdigest()


def main(out_dir):
    owner = owners()
    cands = collections.defaultdict(dict)  # label -> text -> source
    english = {}
    for label, locales in LOCALES.items():
        for loc in locales:
            for path in sorted(glob.glob(f"/usr/share/locale/{loc}/LC_MESSAGES/*.mo")):
                if owner.get(path) == "iso-codes":
                    continue  # names of languages, countries and scripts: proper nouns, not messages
                source = f"{owner.get(path, '?')}:{loc}/{os.path.basename(path)}"
                for msgid, msgstr in read_mo(path):
                    text = clean(msgstr)
                    if msgstr and acceptable(label, msgid, text):
                        cands[label].setdefault(text, source)
                    en = clean(msgid)
                    if acceptable("en", msgid, en):
                        english.setdefault(en, f"{owner.get(path, '?')}:msgid/{os.path.basename(path)}")
    cands["en"] = english
    # A string that more than one language's catalogs hold (a product name, a shared word) says
    # nothing about either language: out of all of them.
    seen = collections.Counter(t for texts in cands.values() for t in texts)
    sets = {"labelled": [], "dev": []}
    for label in ["en"] + list(LOCALES):
        texts = {t: s for t, s in cands[label].items() if seen[t] == 1}
        for kind, (lo, hi) in (("short", SHORT), ("long", LONG)):
            pool = [t for t in texts if lo <= len(t) <= hi]
            # Round-robin over catalogs in hash order, so no single program's vocabulary dominates.
            by_domain = collections.defaultdict(list)
            for t in sorted(pool, key=h):
                by_domain[texts[t].split("/")[-1]].append(t)
            domains = sorted(by_domain, key=h)
            picked = []
            while len(picked) < 2 * PER_LABEL[kind] and any(by_domain.values()):
                for d in domains:
                    if by_domain[d] and len(picked) < 2 * PER_LABEL[kind]:
                        picked.append(by_domain[d].pop(0))
            if len(picked) < 2 * PER_LABEL[kind]:
                print(f"{label} {kind}: only {len(picked)} candidates", file=sys.stderr)
            for i, t in enumerate(picked):
                sets["labelled" if i % 2 == 0 else "dev"].append((label, t, texts[t]))
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in sets.items():
        with open(os.path.join(out_dir, name + ".tsv"), "w", encoding="utf-8") as f:
            f.write("label\ttext\tsource\n")
            for label, text, source in rows:
                f.write(f"{label}\t{text}\t{source}\n")
        print(f"{name}.tsv: {len(rows)} lines, {len({r[0] for r in rows})} languages", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/langid")
