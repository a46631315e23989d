"""ctypes declarations of include/gemlet/gemlet.h and the search for libgemlet; nothing else.

The structs must match gemlet.h field for field: the library reads only struct_size bytes of an
options struct, so a missing field here silently shifts every field after it.
tests/bindings/python_binding_test.py checks each size and offset against a compiled C program.
"""

import ctypes
import os
import sys
import threading

c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_float = ctypes.c_float
c_double = ctypes.c_double
c_bool = ctypes.c_bool
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_int32 = ctypes.c_int32
c_uint64 = ctypes.c_uint64
# C enums are int-sized on every ABI gemlet builds for.
c_enum = ctypes.c_int

PROGRESS_FN = ctypes.CFUNCTYPE(c_bool, c_float, c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)
# The text arrives as a pointer plus a length, not c_char_p: ctypes would stop a c_char_p at the
# first NUL and copy it twice.
STREAM_FN = ctypes.CFUNCTYPE(c_bool, c_enum, c_void_p, c_size_t, c_void_p)


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("n_threads", c_int),
        ("cache_dir", c_char_p),
        ("data_dir", c_char_p),
        ("progress", PROGRESS_FN),
        ("progress_user_data", c_void_p),
        ("kernels", c_char_p),
        ("thermal_zone", c_char_p),
        ("thermal_root", c_char_p),
        ("thermal_limit_c", ctypes.c_double),
        ("thermal_off", ctypes.c_bool),
        ("memory_pressure_path", c_char_p),
        ("on_memory_action", c_void_p),  # a C function pointer; the binding leaves it NULL
        ("memory_action_user_data", c_void_p),
    ]


class SessionOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("n_ctx", c_int),
        ("n_threads", c_int),
        ("max_batch", c_int),
        ("kv_type", c_enum),
    ]


class GenerateOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("max_tokens", c_int),
        ("temperature", c_float),
        ("top_k", c_int),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("seed", c_uint64),
        ("stop", ctypes.POINTER(c_char_p)),
        ("n_stop", c_size_t),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("prompt_tokens", c_int),
        ("cached_tokens", c_int),
        ("generated_tokens", c_int),
        ("ttft_seconds", c_double),
        ("prefill_tokens_per_second", c_double),
        ("decode_tokens_per_second", c_double),
        ("stop", c_enum),
        ("kv_cache_bytes", c_uint64),
        ("activation_bytes", c_uint64),
        ("dropped_messages", c_int),
        ("dropped_tokens", c_int),
        ("reevaluated_tokens", c_int),
        ("summarized_messages", c_int),
        ("summary_tokens", c_int),
        ("pressure_actions", c_int),
        ("pressure_released_bytes", c_uint64),
    ]


class ConversationOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("session", SessionOptions),
        ("system", c_char_p),
        ("thinking", c_bool),
        ("summarize_dropped", c_bool),
        ("summary_max_tokens", c_int),
        ("state_path", c_char_p),
    ]


STRUCTS = {
    "gemlet_engine_options": EngineOptions,
    "gemlet_session_options": SessionOptions,
    "gemlet_generate_options": GenerateOptions,
    "gemlet_stats": Stats,
    "gemlet_conversation_options": ConversationOptions,
}

_P = c_void_p  # every handle is opaque
_PP = ctypes.POINTER(c_void_p)
_I32P = ctypes.POINTER(c_int32)

# name: (restype, argtypes)
_PROTOTYPES = {
    "gemlet_version": (c_char_p, []),
    "gemlet_last_error": (c_char_p, []),
    "gemlet_status_name": (c_char_p, [c_enum]),
    "gemlet_set_log_callback": (None, [LOG_FN, c_void_p]),
    "gemlet_engine_options_default": (EngineOptions, []),
    "gemlet_engine_load": (c_enum, [c_char_p, ctypes.POINTER(EngineOptions), _PP]),
    "gemlet_engine_free": (None, [_P]),
    "gemlet_engine_n_vocab": (c_int, [_P]),
    "gemlet_engine_n_ctx_train": (c_int, [_P]),
    "gemlet_engine_architecture": (c_char_p, [_P]),
    "gemlet_tokenize": (c_enum, [_P, c_char_p, c_size_t, c_bool, c_bool, _I32P, c_size_t,
                                 ctypes.POINTER(c_size_t)]),
    # c_void_p, not c_char_p: the pointer must survive to be given back to gemlet_string_free.
    "gemlet_detokenize": (c_enum, [_P, _I32P, c_size_t, ctypes.POINTER(c_void_p)]),
    "gemlet_string_free": (None, [c_void_p]),
    "gemlet_engine_set_thread_limit": (c_enum, [_P, c_int]),
    "gemlet_engine_set_kernels": (c_enum, [_P, c_char_p]),
    "gemlet_engine_kernels": (c_char_p, [_P]),
    "gemlet_engine_set_thermal_state": (c_enum, [_P, c_enum]),
    "gemlet_engine_thermal_state": (c_enum, [_P]),
    "gemlet_engine_memory_warning": (c_enum, [_P, c_enum]),
    "gemlet_engine_memory_level": (c_enum, [_P]),
    "gemlet_engine_on_background": (c_enum, [_P]),
    "gemlet_engine_on_foreground": (c_enum, [_P]),
    "gemlet_engine_in_background": (c_bool, [_P]),
    "gemlet_session_options_default": (SessionOptions, []),
    "gemlet_session_create": (c_enum, [_P, ctypes.POINTER(SessionOptions), _PP]),
    "gemlet_session_free": (None, [_P]),
    "gemlet_session_evaluate": (c_enum, [_P, _I32P, c_size_t, ctypes.POINTER(c_float)]),
    "gemlet_session_truncate": (c_enum, [_P, c_int]),
    "gemlet_session_discard": (c_enum, [_P, c_int, c_int, ctypes.POINTER(c_int)]),
    "gemlet_session_save": (c_enum, [_P, c_char_p]),
    "gemlet_session_restore": (c_enum, [_P, c_char_p]),
    "gemlet_session_reset": (None, [_P]),
    "gemlet_session_n_past": (c_int, [_P]),
    "gemlet_session_cancel": (None, [_P]),
    "gemlet_generate_options_default": (GenerateOptions, []),
    "gemlet_conversation_options_default": (ConversationOptions, []),
    "gemlet_conversation_create": (c_enum, [_P, ctypes.POINTER(ConversationOptions), _PP]),
    "gemlet_conversation_free": (None, [_P]),
    "gemlet_conversation_send": (c_enum, [_P, c_char_p, ctypes.POINTER(GenerateOptions), STREAM_FN, c_void_p,
                                          ctypes.POINTER(Stats)]),
    "gemlet_conversation_last_reply": (c_char_p, [_P]),
    "gemlet_conversation_cancel": (None, [_P]),
    "gemlet_conversation_set_system": (c_enum, [_P, c_char_p]),
    "gemlet_conversation_reset": (None, [_P]),
    "gemlet_conversation_set_thinking": (c_enum, [_P, c_bool]),
    "gemlet_conversation_n_messages": (c_size_t, [_P]),
    "gemlet_conversation_message": (c_enum, [_P, c_size_t, ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p)]),
    "gemlet_conversation_n_past": (c_int, [_P]),
    "gemlet_conversation_save": (c_enum, [_P, c_char_p]),
    "gemlet_conversation_load": (c_enum, [_P, c_char_p]),
    "gemlet_conversation_save_state": (c_enum, [_P, c_char_p]),
    "gemlet_conversation_restore_state": (c_enum, [_P, c_char_p]),
}


def _library_names():
    if sys.platform == "darwin":
        return ["libgemlet.dylib", "libgemlet.0.dylib"]
    if sys.platform == "win32":
        return ["gemlet.dll", "libgemlet.dll"]
    return ["libgemlet.so", "libgemlet.so.0"]


def _candidates():
    """Where libgemlet may be, in the order tried: GEMLET_LIBRARY, beside the package (a wheel
    bundles it there), then the system loader's own search (LD_LIBRARY_PATH, ldconfig's cache)."""
    env = os.environ.get("GEMLET_LIBRARY")
    if env:
        # An explicit choice that fails is an error, not a reason to load some other copy.
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    paths = []
    for folder in (here, os.path.dirname(here)):
        paths += [os.path.join(folder, n) for n in _library_names()]
    paths = [p for p in paths if os.path.exists(p)]
    paths += _library_names()
    import ctypes.util
    found = ctypes.util.find_library("gemlet")
    if found:
        paths.append(found)
    return paths, False


_lib = None
_lib_lock = threading.Lock()


def lib():
    """The loaded libgemlet with every prototype set; loaded on first use, so `import gemlet`
    works (and its docs read) without the library."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is None:
            _lib = _load()
    return _lib


def _load():
    paths, explicit = _candidates()
    errors = []
    for path in paths:
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            if explicit:
                break
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return handle
    raise OSError("libgemlet not found (set GEMLET_LIBRARY to its path); tried:\n  " + "\n  ".join(errors))


def library_path():
    """The file the library was loaded from (for diagnostics)."""
    return lib()._name
