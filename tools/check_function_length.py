#!/usr/bin/env python3
"""Checks that no function body in src/ and apps/ runs past MAX_LINES lines (../shared/STYLE.md: a
function that grows past that splits by what it does). A body counts from the line of its opening
brace to the line of its closing brace; lambdas and local classes count toward the function that
holds them; namespace, class, struct, enum and extern "C" blocks are not functions.

Usage: check_function_length.py REPO_ROOT   (exit 1 and one `path:line name lines` per offender)
"""
import pathlib
import re
import sys

MAX_LINES = 150
FOLDERS = ("src", "apps")
SUFFIXES = (".cc", ".h")  # -inl.h files end in .h too

SCOPE_KEYWORDS = {"namespace", "class", "struct", "union", "enum", "extern"}
ATTRIBUTE = re.compile(r"\[\[.*?\]\]|\balignas\s*\([^()]*\)", re.S)
ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
IDENT_END = re.compile(r"[A-Za-z0-9_>]$")


def blank(text):
    """The source with comments, string and char literals and preprocessor lines turned to spaces,
    newlines kept, so that braces and line numbers are all that is left to read. A string becomes
    "" so that `extern "C"` still shows as `extern ""`."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A directive runs to the end of the line, further with a trailing backslash.
            j = i
            while j < n:
                k = text.find("\n", j)
                k = n if k < 0 else k
                if k > 0 and text[k - 1] == "\\" and k < n:
                    j = k + 1
                    continue
                j = k
                break
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        line_start = False
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            raw = re.search(r'(?:u8|[uUL])?R$', text[max(0, i - 3):i])
            if raw:
                m = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
                if m:
                    close = ")" + m.group(1) + '"'
                    j = text.find(close, i + m.end())
                    j = n if j < 0 else j + len(close)
                    out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
                    i = j
                    continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('""' + " " * (j - i - 2))
            i = j
        elif c == "'":
            # 1'000'000: a digit separator, not a char literal.
            k = i
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'."):
                k -= 1
            if k < i and text[k].isdigit():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level(head):
    """The head with everything inside (), <> and {} removed, and whether it had a () group."""
    depth, out, had_parens = 0, [], False
    i = 0
    while i < len(head):
        c = head[i]
        if c == "-" and head.startswith("->", i):
            if depth == 0:
                out.append("->")
            i += 2
            continue
        if c in "(<{":
            had_parens |= c == "(" and depth == 0
            depth += 1
            if depth == 1:
                out.append(c + c_close(c))
        elif c in ")>}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out), had_parens


def c_close(c):
    return {"(": ")", "<": ">", "{": "}"}[c]


def clean_head(head):
    head = ATTRIBUTE.sub(" ", head)
    head = ACCESS.sub("", head)
    # operator<, operator(), operator= would read as brackets or an initializer.
    head = re.sub(r"\boperator\s*(\(\)|\[\]|[^\sA-Za-z0-9_(]+)", lambda m: "operator_" + str(len(m.group(1))), head)
    return head.strip()


def strip_template_prefix(head):
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head
        depth, i = 1, m.end()
        while i < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[i], 0)
            i += 1
        head = head[i:]


def classify(head, before):
    """What an opening brace at namespace or class scope opens: 'scope', 'function' or 'init'.
    `before` is the last non-space character in front of the brace."""
    head = strip_template_prefix(clean_head(head))
    flat, had_parens = top_level(head)
    words = flat.split()
    if words and words[0] in SCOPE_KEYWORDS and not (words[0] in {"class", "struct", "enum", "union"} and had_parens):
        return "scope"
    if re.search(r"=\s*\[", head) and ")" in head:
        return "function"  # a lambda at namespace scope reads as one function
    if "=" in flat.replace("->", "") or not had_parens:
        return "init"
    after_params = flat[flat.rfind("()") + 2:]
    ctor_init = re.search(r"(?<!:):(?!:)", flat[flat.find("()") + 2:]) is not None
    if before in ")}":
        return "function"
    if ctor_init:
        return "init"  # a member's brace initializer in a constructor's list: `b_{x}`
    if re.fullmatch(r"[\sA-Za-z0-9_&*:,()<>\->]*", after_params):
        return "function"  # const, override, noexcept, -> T, HWY_ATTR
    return "init"


def function_name(head, class_names):
    head = strip_template_prefix(ATTRIBUTE.sub(" ", ACCESS.sub("", head)))
    m = re.search(r"(\w+)\s*=\s*\[", head)
    if m:
        return m.group(1)
    m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*(?:\(\)|\[\]|[^\sA-Za-z0-9_(]+|\s+[\w:]+)|~?\w+))\s*(?:<[^()]*>)?\s*\(", head)
    name = re.sub(r"\s+", "", m.group(1)) if m else "?"
    if class_names and "::" not in name:
        name = "::".join(class_names) + "::" + name
    return name


def scope_name(head):
    head = strip_template_prefix(clean_head(head))
    m = re.match(r"\s*(?:class|struct|union)\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?(?::|$)", head)
    return m.group(1) if m else None


def long_functions(text, limit):
    """[(line, name, lines)] for every function body in text longer than limit lines."""
    code = blank(text)
    found = []
    stack = []  # one entry per open brace: (kind, line, name)
    head_start = 0
    paren = 0
    line = 1
    in_function = 0  # how many of the open braces are function bodies (0 or 1)
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
            continue
        if in_function:
            if c == "{":
                stack.append(("inner", line, None))
            elif c == "}":
                kind, start, name = stack.pop()
                if kind == "function":
                    in_function = 0
                    if line - start + 1 > limit:
                        found.append((start, name, line - start + 1))
                    head_start = i + 1
            continue
        if c == "(":
            paren += 1
        elif c == ")":
            paren = max(0, paren - 1)
        elif c == ";" and paren == 0 and not (stack and stack[-1][0] == "init"):
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            if paren > 0 or (stack and stack[-1][0] == "init"):
                stack.append(("init", line, None))
                continue
            before = code[:i].rstrip()[-1:] or ";"
            kind = classify(head, before)
            if kind == "function":
                classes = [s[2] for s in stack if s[0] == "scope" and s[2]]
                stack.append(("function", line, function_name(head, classes)))
                in_function = 1
            elif kind == "scope":
                stack.append(("scope", line, scope_name(head)))
                head_start = i + 1
            else:
                stack.append(("init", line, None))
        elif c == "}":
            if stack:
                kind, _, _ = stack.pop()
                if kind == "scope":
                    head_start = i + 1
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    offenders = []
    files = 0
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            files += 1
            rel = path.relative_to(root).as_posix()
            for line, name, lines in long_functions(path.read_text(errors="replace"), MAX_LINES):
                offenders.append(f"{rel}:{line} {name} {lines}")
    for o in offenders:
        print(o)
    if offenders:
        print(f"check_function_length: {len(offenders)} function(s) longer than {MAX_LINES} lines")
        return 1
    print(f"check_function_length: ok ({files} files in {', '.join(FOLDERS)}, none over {MAX_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
