#!/usr/bin/env python3
"""Extracts the training text for the langid model (make_model.py) from Debian's message catalogs.

The same strings make_set.py would pick from (its read_mo, clean and acceptable: translators' strings
of 10-200 characters, no markup, in the language's script, not left in English), with everything that
could leak the evaluation sets out of it:
  - every string of tests/data/langid/{labelled,dev}.tsv, in any language;
  - every catalog (DOMAIN.mo) any of their lines came from, in every language: a program's other
    strings share its words ("Kalendar", "Datoteka") with the held-out line;
  - strings more than one language's catalogs hold (make_set.py drops them too).

    tools/langid_set/make_train.py OUT.tsv [PACKAGES.txt] [--root DIR]

With --root, the catalogs are read from DIR/usr/share/locale, where fetch_train.sh unpacked the
packages (without installing them), and DIR/owners.tsv says which package each came from.

OUT.tsv is label<TAB>text<TAB>source like the evaluation sets; PACKAGES.txt lists the Debian packages
(with versions) whose catalogs gave lines, and how many each. The result depends on what is installed;
tests/data/langid/README.md names what the committed model was trained from.
"""
import collections
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_set import LOCALES, acceptable, clean, owners, read_mo  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = [os.path.join(HERE, "../../tests/data/langid", n) for n in ("labelled.tsv", "dev.tsv")]


def held_out():
    texts, domains = set(), set()
    for path in SETS:
        with open(path, encoding="utf-8") as f:
            next(f)
            for line in f:
                label, text, source = line.rstrip("\n").split("\t")
                texts.add(text)
                domains.add(source.split("/")[-1])
    return texts, domains


def main(out, packages_out, root):
    texts_out, domains_out = held_out()
    if root:
        with open(os.path.join(root, "owners.tsv"), encoding="utf-8") as f:
            owner = {os.path.join(root, path.lstrip("/")): pkg for path, pkg in (l.rstrip("\n").split("\t") for l in f)}
    else:
        owner = owners()
    cands = collections.defaultdict(dict)
    english = {}
    for label, locales in LOCALES.items():
        for loc in locales:
            for path in sorted(glob.glob(f"{root or ''}/usr/share/locale/{loc}/LC_MESSAGES/*.mo")):
                domain = os.path.basename(path)
                if owner.get(path) == "iso-codes" or domain in domains_out:
                    continue
                pkg = owner.get(path, "?")
                for msgid, msgstr in read_mo(path):
                    text = clean(msgstr)
                    if msgstr and acceptable(label, msgid, text):
                        cands[label].setdefault(text, f"{pkg}:{loc}/{domain}")
                    en = clean(msgid)
                    if acceptable("en", msgid, en):
                        english.setdefault(en, f"{pkg}:msgid/{domain}")
    cands["en"] = english
    seen = collections.Counter(t for texts in cands.values() for t in texts)
    per_pkg = collections.Counter()
    rows = []
    for label in ["en"] + list(LOCALES):
        for text, source in sorted(cands[label].items()):
            if seen[text] == 1 and text not in texts_out:
                rows.append((label, text, source))
                per_pkg[source.split(":")[0]] += 1
    with open(out, "w", encoding="utf-8") as f:
        f.write("label\ttext\tsource\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    counts = collections.Counter(r[0] for r in rows)
    print(f"{out}: {len(rows)} lines; " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)), file=sys.stderr)
    if packages_out:
        pkgs = sorted(p for p in per_pkg if p != "?")
        if root:  # fetch_train.sh's versions.tsv: what was unpacked, not what is installed
            with open(os.path.join(root, "versions.tsv"), encoding="utf-8") as f:
                versions = dict(line.rstrip("\n").split("\t") for line in f)
        else:
            versions = dict(line.split("\t") for line in subprocess.run(
                ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"] + pkgs, capture_output=True, text=True).stdout.splitlines()
                if "\t" in line)
        with open(packages_out, "w", encoding="utf-8") as f:
            for p in pkgs:
                f.write(f"{p}\t{versions.get(p, '?')}\t{per_pkg[p]}\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    root = None
    if "--root" in args:
        i = args.index("--root")
        root = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    main(args[0], args[1] if len(args) > 1 else None, root)
