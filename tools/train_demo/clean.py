#!/usr/bin/env python3
"""Turns the extracted Debian packages into documents, split into train / held-out eval.

Usage: clean.py EXTRACT_DIR OUT_DIR
  EXTRACT_DIR holds kjv.txt (the `bible` program's dump), devil.dict, gcide.dict and the
  fortunes trees under fortunes/, fortunes-min/, fortunes-zh/ (as `dpkg -x` lays them out).
Writes OUT_DIR/docs_train.jsonl, OUT_DIR/docs_eval.jsonl ({"src": ..., "text": ...} per line),
OUT_DIR/eval.txt (the held-out documents as plain text, for `gemlet eval`) and prints a summary.
Standard library only; the output depends on the input bytes alone (no randomness, no clock).
"""
import hashlib
import json
import os
import re
import sys

# Share of each source's documents held out for evaluation (chosen by a hash of the text).
EVAL_PERMILLE = 10
# GCIDE is 40 MB of dictionary text; every GCIDE_STRIDE-th entry keeps it from drowning the rest.
GCIDE_STRIDE = 2

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def norm_lines(text):
    """Trailing spaces off, tabs to spaces, no leading/trailing blank lines, at most one blank line in a row."""
    out = []
    for line in text.replace("\r", "").split("\n"):
        line = line.replace("\t", "    ").rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def dedent(text):
    lines = text.split("\n")
    ind = min((len(l) - len(l.lstrip(" ")) for l in lines if l.strip()), default=0)
    return "\n".join(l[ind:] for l in lines)


def kjv(path):
    """One document per chapter, one verse per line, references dropped."""
    docs, cur, key = [], [], None
    ref = re.compile(r"^([0-9]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    with open(path, encoding="latin-1") as f:
        for line in f:
            m = ref.match(line.rstrip("\n"))
            if not m:
                continue
            k = (m.group(1), m.group(2))
            if k != key and cur:
                docs.append("\n".join(cur))
                cur = []
            key = k
            cur.append(m.group(4).strip())
    if cur:
        docs.append("\n".join(cur))
    return docs


def fortune_file(path, chinese=False):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if chinese:
        text = ANSI.sub("", text)
    docs = []
    for chunk in re.split(r"^%\n", text, flags=re.M):
        d = norm_lines(dedent(chunk))
        if not d or "\ufffd" in d:
            continue
        if chinese and re.search(r"[\u2500-\u257f]", d):  # tables from the Debian reference manual
            continue
        # Leading indentation of attributions ("\t\t-- Mark Twain") carries no meaning here.
        d = "\n".join(l.strip() if l.lstrip().startswith("--") else l for l in d.split("\n"))
        if len(d) >= 8:
            docs.append(d)
    return docs


def fortunes(root, chinese=False):
    docs = []
    names = sorted(n for n in os.listdir(root) if not n.endswith((".dat", ".u8")) and not os.path.islink(os.path.join(root, n)))
    for n in names:
        p = os.path.join(root, n)
        if os.path.isfile(p):
            docs += [(n, d) for d in fortune_file(p, chinese)]
    return docs


def devil(path):
    with open(path, encoding="latin-1") as f:
        text = f.read()
    start = text.find("ABASEMENT, n.")
    end = text.find("End of The Project Gutenberg")
    body = text[start:end if end > 0 else len(text)]
    # An entry starts at a line "WORD, n." (capitals, then a comma) after a blank line.
    parts = re.split(r"\n\n(?=[A-Z][A-Z'\- ]+[,\.] )", body)
    docs = []
    for p in parts:
        d = norm_lines(p)
        if d and not d.startswith("00-database"):
            docs.append(d)
    return docs


GCIDE_CODES = {
    "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "'e": "é", "`e": "è", "^e": "ê", '"e': "ë",
    "'a": "á", "`a": "à", "^a": "â", '"a': "ä", "'o": "ó", "^o": "ô", '"o': "ö", '"u': "ü",
    "^u": "û", '"i': "ï", ",c": "ç", "~n": "ñ", "deg": "°", "sect": "§", "eth": "ð", "th": "þ",
}


def gcide_entry(entry):
    lines = entry.split("\n")
    head = lines[0]
    # "Abaca \Ab"a*ca\ ([a^]b"[.a]*k[.a]), n. [The native name.]" -> "Abaca, n. [The native name.]";
    # a run-on entry names the word only in its syllabified form: "\U`ra*no*graph"ic*al\, a. ..."
    if head.startswith("\\"):
        head = re.sub(r"[*`\"']", "", head[1:head.find("\\", 1)]) + " " + head
    head = re.sub(r"\s*\\[^\\]*\\(\s*\([^)]*\))?", " ", head)
    head = re.sub(r"\s+", " ", head).strip()
    head = re.sub(r"\s*,(\s*,)+", ",", head)
    head = re.sub(r"\s+,", ",", head)
    head = re.sub(r"^([^,]*?)\s+(?=(n|v|a|adj|adv|prep|conj|interj|pron|p\. ?p|imp|pl|v\. ?[ti])\b)", r"\1, ", head)
    body = [head] + [l.strip() for l in lines[1:]]
    out = []
    for l in body:
        if re.fullmatch(r"\[[^\]]*(Webster|PJC|WordNet|Century|Supp|Suppl)[^\]]*\]", l):
            continue
        if not l:
            if out and out[-1]:
                out.append("")
            continue
        # Wrapped lines continue the paragraph; a numbered sense, "Syn:" or a quotation starts a line.
        if out and out[-1] and not re.match(r"^(\d+\.|\([a-z]\)|Syn:|Note:|--)", l):
            out[-1] += " " + l
        else:
            out.append(l)
    text = "\n".join(out).strip()
    text = re.sub(r"\[([^\]\s]{1,4})\]", lambda m: GCIDE_CODES.get(m.group(1), m.group(0)), text)
    text = re.sub(r"\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\s*\[[^\]]*(Webster|PJC|WordNet)[^\]]*\]", "", text)
    text = text.replace("''", '"').replace("``", '"')
    if re.search(r"\[[^\]\s]{1,4}\]", text) and re.search(r"\[(?:[^\]\s]*[\^=~`'\"\.,-][^\]\s]*)\]", text):
        return None  # leftover pronunciation markup
    return norm_lines(text)


def gcide(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    entries, cur = [], []
    for line in text.split("\n"):
        if line and not line[0].isspace():
            if cur:
                entries.append("\n".join(cur))
            cur = [line]
        elif cur:
            cur.append(line)
    if cur:
        entries.append("\n".join(cur))
    docs = []
    kept = 0
    for e in entries:
        if e.startswith("00-database") or "\ufffd" in e or "GNU" in e[:200]:
            continue
        d = gcide_entry(e)
        if not d or len(d) < 24 or "\n" not in d and len(d) < 40:
            continue
        kept += 1
        if kept % GCIDE_STRIDE == 0:
            docs.append(d)
    return docs


def is_eval(src, text):
    h = hashlib.sha256((src + "\0" + text).encode("utf-8")).digest()
    return int.from_bytes(h[:4], "little") % 1000 < EVAL_PERMILLE


def main():
    src_dir, out_dir = sys.argv[1], sys.argv[2]
    j = lambda *p: os.path.join(src_dir, *p)
    sources = []
    sources += [("kjv", d) for d in kjv(j("kjv.txt"))]
    sources += [("devil", d) for d in devil(j("devil.dict"))]
    sources += [("gcide", d) for d in gcide(j("gcide.dict"))]
    for pkg in ("fortunes-min", "fortunes"):
        sources += [("fortunes/" + n, d) for n, d in fortunes(j(pkg, "usr/share/games/fortunes"))]
    sources += [("fortunes-zh/" + n, d) for n, d in fortunes(j("fortunes-zh", "usr/share/games/fortunes"), chinese=True)]

    seen = set()
    stats = {}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "docs_train.jsonl"), "w", encoding="utf-8") as tr, \
         open(os.path.join(out_dir, "docs_eval.jsonl"), "w", encoding="utf-8") as ev, \
         open(os.path.join(out_dir, "eval.txt"), "w", encoding="utf-8") as et:
        first = True
        for src, text in sources:
            if text in seen:
                continue
            seen.add(text)
            group = src.split("/")[0] if not src.startswith("fortunes-zh") else "fortunes-zh"
            split = "eval" if is_eval(src, text) else "train"
            s = stats.setdefault(group, {"train_docs": 0, "train_bytes": 0, "eval_docs": 0, "eval_bytes": 0})
            s[split + "_docs"] += 1
            s[split + "_bytes"] += len(text.encode("utf-8"))
            line = json.dumps({"src": group, "text": text}, ensure_ascii=False) + "\n"
            if split == "eval":
                ev.write(line)
                et.write(("" if first else "\n\n") + text)
                first = False
            else:
                tr.write(line)
        et.write("\n")
    for k, v in stats.items():
        print(f"{k:12s} train {v['train_docs']:7d} docs {v['train_bytes']/1e6:7.2f} MB   eval {v['eval_docs']:5d} docs {v['eval_bytes']/1e3:7.1f} kB")


if __name__ == "__main__":
    main()
