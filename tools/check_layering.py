#!/usr/bin/env python3
"""Checks the layering of ../shared/STYLE.md and docs/architecture.md: a folder of src/ (and the CLI) may include headers only
from the folders its CMake target links, directly or through them, and the public headers in
include/gemlet/ reach nothing of src/. The CLI sits on the public API alone (gemlet.hpp,
tools.hpp, history.hpp, store.hpp, fetch.hpp): it includes nothing of src/ at all.

Usage: check_layering.py REPO_ROOT   (exit 1 and one line per violation when the layering is broken)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LIBRARY = re.compile(r'gemlet_library\(\s*(\w+)(.*?)\)', re.S)
DEPS = re.compile(r'\bgemlet_(\w+)\b')
LINK = re.compile(r'target_link_libraries\(\s*(\w+)\s+(?:PUBLIC|PRIVATE|INTERFACE)(.*?)\)', re.S)

# The folders that implement public headers: src/api (gemlet.hpp, gemlet.h), src/tools (tools.hpp),
# src/history (history.hpp), src/store (store.hpp), src/fetch (fetch.hpp).
IMPLEMENTS_PUBLIC = {"api", "tools", "history", "server", "store", "fetch"}
# Public headers every layer may include: Status and the limits on JSON from outside (src/base
# implements them), and the public value types (plain data, header-only: the runtime and the
# sampler take the public options, messages and replies as they are, with no twin structs).
BASE_PUBLIC_HEADERS = {"gemlet/status.hpp", "gemlet/json_input.hpp", "gemlet/types.hpp"}
# The folders that stand on the public API alone, as the CLI does: src/server includes the public
# headers and its own files, nothing else of src/.
OVER_PUBLIC_API = {"server"}


def folder_deps(root):
    """{folder: set of folders its library links directly}, from src/*/CMakeLists.txt."""
    deps = {}
    for cmake in sorted((root / "src").glob("*/CMakeLists.txt")):
        folder = cmake.parent.name
        text = cmake.read_text()
        for name, body in LIBRARY.findall(text):
            if name != "gemlet_" + folder:
                continue
            after = body.split("DEPS", 1)[1] if "DEPS" in body else ""
            deps[folder] = {d for d in DEPS.findall(after)} - {folder}
        # An optional piece a library links only where it is built (src/api's gemlet_store).
        for name, body in LINK.findall(text):
            if name == "gemlet_" + folder and folder in deps:
                deps[folder] |= {d for d in DEPS.findall(body)} - {folder}
    return deps


def documented_layers(root):
    """{folder: set of folders it may link}, from the ```layers block of docs/architecture.md."""
    text = (root / "docs" / "architecture.md").read_text()
    block = text.split("```layers", 1)[1].split("```", 1)[0]
    layers = {}
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        folder, _, allowed = line.partition(":")
        layers[folder.strip()] = set(allowed.split())
    return layers


def closure(folder, deps, seen=None):
    seen = set() if seen is None else seen
    for d in deps.get(folder, ()):
        if d not in seen:
            seen.add(d)
            closure(d, deps, seen)
    return seen


def sources(path):
    return sorted(p for p in path.rglob("*") if p.suffix in {".h", ".hpp", ".cc", ".cpp", ".c"})


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    deps = folder_deps(root)
    src_folders = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    problems = []

    def check(path, allowed, public_allowed):
        rel = path.relative_to(root).as_posix()
        for header in INCLUDE.findall(path.read_text(errors="replace")):
            top = header.split("/", 1)[0] if "/" in header else None
            if top is None:
                continue  # a header of the same folder ("command.h")
            if top == "gemlet":
                if not (public_allowed or header in BASE_PUBLIC_HEADERS):
                    problems.append(f"{rel}: includes the public API <{header}>, which only src/api, src/tools, src/history, src/store, src/fetch and src/server implement or use")
            elif top in src_folders and top not in allowed:
                problems.append(f"{rel}: includes {header}, but its target does not link gemlet_{top}")

    for folder in sorted(deps):
        allowed = {folder} if folder in OVER_PUBLIC_API else {folder} | closure(folder, deps)
        for path in sources(root / "src" / folder):
            check(path, allowed, public_allowed=(folder in IMPLEMENTS_PUBLIC))

    # The public headers: nothing of src/.
    for path in sources(root / "include"):
        check(path, allowed=set(), public_allowed=True)

    # The CLI: the public API only.
    for path in sources(root / "apps/gemlet"):
        check(path, set(), public_allowed=True)

    # docs/architecture.md's table: every folder listed, no link it does not allow.
    layers = documented_layers(root)
    for folder in sorted(deps):
        if folder not in layers:
            problems.append(f"src/{folder}: not in docs/architecture.md's layer table")
            continue
        for d in sorted(deps[folder] - layers[folder]):
            problems.append(f"src/{folder}: links gemlet_{d}, which docs/architecture.md's table does not allow it")

    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} include(s) break the layering of STYLE.md")
        return 1
    print(f"check_layering: ok ({len(deps)} src folders, include/, apps/gemlet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
