#!/usr/bin/env python3
"""Checks that the C API (include/gemlet/gemlet.h) covers the public C++ API (include/gemlet/gemlet.hpp):
every public member function of Engine, Session, Conversation, BatchDecoder and TextTokenizer, and
every free GEMLET_CXX_API function, must have a C counterpart, or be on EXCEPTIONS with its reason.
Apps in Swift, Kotlin and Python reach gemlet through the C API only, so a C++ function without one
is a feature they cannot have.

The counterpart's name comes from a rule: gemlet_ + the class's C name + the function's name in
snake_case (Session::SetSystem -> gemlet_session_set_system, Engine::DecodeKvBytesAt ->
gemlet_engine_decode_kv_bytes_at, a destructor -> gemlet_<object>_free, a free function
ParseByteSize -> gemlet_parse_byte_size), or from TABLE where the C name says it differently.
Overloads are told apart by their parameters' types, "Validate(KernelOptions)". Deleted functions
(copy constructors and assignments) are not functions anyone calls and are skipped.

The check also fails on a TABLE or EXCEPTIONS entry that names no C++ declaration any more, so the
lists cannot go stale.

Usage: check_c_parity.py REPO_ROOT [--list]   (exit 1 with one line per missing function)
"""
import pathlib
import re
import sys

CLASSES = {
    "Engine": "engine",
    "Session": "session",
    "Conversation": "conversation",
    "BatchDecoder": "batch_decoder",
    "TextTokenizer": "tokenizer",
    "Adapter": "adapter",
}

# C++ declaration -> its C function, where the rule's name is not the C name.
TABLE = {
    "MemoryPressureName": "gemlet_memory_level_name",  # the C enum is gemlet_memory_level
    "KvCacheTypeName": "gemlet_kv_type_name",          # ... and gemlet_kv_type
    "ParseKvCacheType": "gemlet_parse_kv_type",
    "AvailableKernels": "gemlet_available_kernel",     # with gemlet_n_available_kernels: a list, by index
    "Validate(KernelOptions)": "gemlet_kernel_options_validate",
    "Validate(GenerateOptions)": "gemlet_generate_options_validate",
    "Engine::LoadFromFd(int, uint64_t, uint64_t, EngineOptions)": "gemlet_engine_load_fd",
    "Engine::LoadFromFd(int, uint64_t, uint64_t)": "gemlet_engine_load_fd",  # options NULL: the defaults
    "Engine::Tokenize": "gemlet_tokenize",
    "Engine::Detokenize": "gemlet_detokenize",
    "Engine::kernels_name": "gemlet_engine_kernels",
    "Engine::OnMemoryWarning": "gemlet_engine_memory_warning",
    "Engine::memory_pressure": "gemlet_engine_memory_level",
    "Session::SaveState": "gemlet_session_save",
    "Session::LoadState": "gemlet_session_restore",
    "Conversation::LoadState": "gemlet_conversation_restore_state",
    "Conversation::messages": "gemlet_conversation_message_at",  # with gemlet_conversation_n_messages
    "Session::adapters": "gemlet_session_adapter_at",  # with gemlet_session_n_adapters
    "Conversation::adapters": "gemlet_conversation_adapter_at",  # with gemlet_conversation_n_adapters
    # Prompts with images or audio: the same calls over a gemlet_prompt.
    "Session::Evaluate(Prompt, float, bool)": "gemlet_session_evaluate_prompt",
    "Session::Generate(Prompt, GenerateOptions, StreamCallback)": "gemlet_session_generate_prompt",
    "Session::Complete(Prompt, GenerateOptions, StreamCallback)": "gemlet_session_complete_prompt",
    "Session::media": "gemlet_session_media_at",  # with gemlet_session_n_media
    "BatchDecoder::Submit(Session, Prompt, GenerateOptions, StreamCallback)": "gemlet_batch_decoder_submit_prompt",
    "Conversation::Send(span, GenerateOptions, StreamCallback)": "gemlet_conversation_send_parts",
}

# C++ declarations with no C counterpart, each with the reason. Keep it short: an entry here is a
# feature apps cannot reach.
EXCEPTIONS = {
    "Engine::options": "its function-valued fields (progress, on_memory_action) cannot come back as the "
                       "caller's C function pointers; an app keeps the gemlet_engine_options it loaded with, "
                       "and gemlet_engine_kernel_options gives the part that changes",
    "Engine::impl": "the pimpl's internals, for the library's own files (not API)",
    "Session::impl": "the pimpl's internals, for the library's own files (not API)",
    "Adapter::impl": "the pimpl's internals, for the library's own files (not API)",
    "Adapter::Adapter(unique_ptr)": "the pimpl constructor Engine::LoadAdapter uses; C loads with gemlet_engine_load_adapter",
    "TextTokenizer::TextTokenizer(unique_ptr)": "the pimpl constructor Open uses; C opens with gemlet_tokenizer_open",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def matching_brace(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced braces in gemlet.hpp")


def collapse_bodies(text):
    """Inline bodies and nested struct bodies become ';', so that every declaration is one
    ';'-terminated statement. Empty braces (a default argument `= {}`) stay as they are."""
    text = re.sub(r"\{\s*\}", "EMPTY_BRACES", text)
    out, i = [], 0
    while True:
        j = text.find("{", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j] + ";")
        i = matching_brace(text, j) + 1
    return "".join(out).replace("EMPTY_BRACES", "{}")


def split_top_level(params):
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def param_type(param):
    """`const std::string& path = {}` -> "string"; `std::span<const int32_t> tokens` -> "span"."""
    param = param.split("=")[0]
    param = re.sub(r"<.*>", "", param)  # template arguments
    words = [w for w in re.findall(r"[A-Za-z_]\w*", param) if w not in ("const", "std", "struct")]
    if len(words) > 1:
        words = words[:-1]  # the parameter's name
    return words[-1] if words else "?"


FUNCTION = re.compile(r"(operator\s*[^\s(]+|~?[A-Za-z_]\w*)\s*\((.*)\)", re.S)


def parse_function(statement):
    """(name, [param types]) of a function declaration, or None for anything else."""
    if statement.startswith(("using ", "struct ", "class ", "friend ", "typedef ")) or "(" not in statement:
        return None
    m = FUNCTION.search(statement)
    if not m:
        return None
    params = m.group(2).strip()
    types = [] if params in ("", "void") else [param_type(p) for p in split_top_level(params)]
    return m.group(1).replace(" ", ""), types


def declarations(hpp_text):
    """[(scope, name, param types)] of the public C++ API: scope "" for free functions."""
    text = strip_comments(hpp_text)
    found = []
    # Free functions: GEMLET_CXX_API at namespace level (class bodies are cut out first).
    outside = text
    for m in re.finditer(r"class\s+GEMLET_CXX_API\s+(\w+)\s*\{", text):
        cls, start = m.group(1), m.end() - 1
        end = matching_brace(text, start)
        outside = outside.replace(text[m.start():end + 1], " ")
        if cls not in CLASSES:
            raise SystemExit(f"check_c_parity: class {cls} of gemlet.hpp has no C object in CLASSES")
        body = collapse_bodies(text[start + 1:end])
        public = False  # a class starts private
        for piece in re.split(r"\b(public|private|protected)\s*:", body):
            if piece in ("public", "private", "protected"):
                public = piece == "public"
                continue
            if not public:
                continue
            for statement in piece.split(";"):
                statement = " ".join(statement.split())
                if not statement or re.search(r"=\s*delete$", statement):
                    continue  # deleted: copy constructors and assignments nobody calls
                f = parse_function(statement)
                if f:
                    found.append((cls, f[0], f[1]))
    for m in re.finditer(r"GEMLET_CXX_API\s+([^;{]*?\([^;{]*?\))\s*;", outside, re.S):
        f = parse_function(" ".join(m.group(1).split()))
        if f:
            found.append(("", f[0], f[1]))
    return found


def snake(name):
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name).lower()


def c_functions(h_text):
    return set(re.findall(r"\bGEMLET_API\b[^;]*?\b(gemlet_\w+)\s*\(", strip_comments(h_text)))


def rule_name(scope, name):
    if not scope:
        return "gemlet_" + snake(name)
    obj = CLASSES[scope]
    if name == "~" + scope:
        return f"gemlet_{obj}_free"
    return f"gemlet_{obj}_{snake(name)}"


def check(hpp_text, h_text):
    """(problems, [(key, C name or exception)]) for the two headers' texts."""
    decls = declarations(hpp_text)
    c_names = c_functions(h_text)
    counts = {}
    for scope, name, _ in decls:
        counts[(scope, name)] = counts.get((scope, name), 0) + 1
    problems, rows, used = [], [], set()
    for scope, name, types in decls:
        short = f"{scope}::{name}" if scope else name
        full = f"{short}({', '.join(types)})"
        # An entry may name the function alone, or one overload by its parameters.
        keys = [full, short] if counts[(scope, name)] > 1 else [short, full]
        key = next((k for k in keys if k in EXCEPTIONS), None)
        if key:
            used.add(key)
            rows.append((full, "exception: " + EXCEPTIONS[key]))
            continue
        key = next((k for k in keys if k in TABLE), None)
        if key:
            used.add(key)
        target = TABLE[key] if key else rule_name(scope, name)
        rows.append((full, target))
        if target not in c_names:
            problems.append(f"{full} has no C counterpart: {target} is not declared in gemlet.h "
                            "(add it, map it in TABLE, or list it in EXCEPTIONS with the reason)")
    for stale in sorted((set(TABLE) | set(EXCEPTIONS)) - used):
        problems.append(f"check_c_parity.py names {stale}, which gemlet.hpp does not declare (a stale entry)")
    if not decls:
        problems.append("no declarations found in gemlet.hpp: the parser no longer reads it")
    return problems, rows


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = pathlib.Path(argv[1])
    problems, rows = check((root / "include/gemlet/gemlet.hpp").read_text(), (root / "include/gemlet/gemlet.h").read_text())
    if "--list" in argv:
        for key, target in rows:
            print(f"{key:70} {target}")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check_c_parity: {len(rows)} C++ declarations, each with a C counterpart or a listed reason")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
