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
c_int64 = ctypes.c_int64

# The GEMLET_ABI_VERSION of the gemlet.h these declarations follow: a library of another ABI is
# refused at load (its structs or functions would not be these).
ABI_VERSION = 1

PROGRESS_FN = ctypes.CFUNCTYPE(c_bool, c_float, c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)
FOOTPRINT_FN = ctypes.CFUNCTYPE(ctypes.c_uint64, c_void_p)
# The text arrives as a pointer plus a length, not c_char_p: ctypes would stop a c_char_p at the
# first NUL and copy it twice.
STREAM_FN = ctypes.CFUNCTYPE(c_bool, c_enum, c_void_p, c_size_t, c_void_p)
PROMPT_PROGRESS_FN = ctypes.CFUNCTYPE(None, c_int, c_int, c_void_p)


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
        ("mmproj_path", c_char_p),
        ("audio_hf_eager_mask", c_bool),
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
        ("response_format", c_char_p),
        ("tool_choice", c_char_p),
        ("max_draft", c_int),
        ("logit_bias_tokens", ctypes.POINTER(c_int32)),
        ("logit_bias_values", ctypes.POINTER(c_float)),
        ("n_logit_bias", c_size_t),
        ("logprobs", c_bool),
        ("top_logprobs", c_int),
    ]


class SessionExtraOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("rollback_tokens", c_int),
        ("draft_model", c_void_p),
        ("progress", PROMPT_PROGRESS_FN),
        ("progress_user_data", c_void_p),
    ]


class TokenLogprob(ctypes.Structure):
    _fields_ = [("token", c_int32), ("logprob", c_float)]


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
        ("kv_cache_resident_bytes", c_uint64),
        ("draft_steps", c_int),
        ("drafted_tokens", c_int),
        ("accepted_tokens", c_int),
        ("throttled_steps", c_int),
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


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("architecture", c_char_p),
        ("name", c_char_p),
        ("chat_format", c_char_p),
        ("n_vocab", c_int),
        ("n_ctx_train", c_int),
        ("n_layers", c_int),
        ("d_model", c_int),
        ("n_parameters", c_uint64),
        ("file_bytes", c_uint64),
        ("tensor_bytes", c_uint64),
        ("file_type", c_char_p),
        ("decode_weight_bytes", c_uint64),
        ("load_seconds", c_double),
        ("map_seconds", c_double),
        ("packed_cache", c_char_p),
        ("packed_cache_seconds", c_double),
        ("takes_images", c_bool),
        ("takes_audio", c_bool),
        ("mmproj_projector", c_char_p),
        ("prompt_macs_per_token", c_uint64),
    ]


class MemoryUsage(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t)] + [(n, c_uint64) for n in (
        "rss_bytes", "peak_rss_bytes", "anon_bytes", "model_file_resident_bytes", "on_demand_resident_bytes",
        "packed_weight_bytes", "packed_mapped_bytes", "tokenizer_bytes")]


class MemoryStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("kv_cache_bytes", c_uint64),
        ("kv_cache_resident_bytes", c_uint64),
        ("activation_bytes", c_uint64),
        ("pressure_actions", c_int),
        ("pressure_released_bytes", c_uint64),
    ]


class MemoryPlan(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t)] + [(n, c_uint64) for n in (
        "file_bytes", "weights_resident_bytes", "weights_on_demand_bytes", "kv_cache_bytes", "activation_bytes")] + [
        ("n_ctx", c_int),
        ("text", c_char_p),
    ]


class SessionCost(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t)] + [(n, c_uint64) for n in (
        "kv_bytes", "activation_bytes", "packed_in_memory_bytes", "baseline_bytes", "total_bytes")]


class ToolCall(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("arguments", c_char_p), ("id", c_char_p)]


class ContentPart(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("text", c_char_p), ("media", c_void_p)]


class ImageOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("max_soft_tokens", c_int), ("pan_and_scan", c_int)]


class AudioOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("max_seconds", c_double)]


class Message(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("role", c_char_p),
        ("content", c_char_p),
        ("tool_calls", ctypes.POINTER(ToolCall)),
        ("n_tool_calls", c_size_t),
        ("reasoning", c_char_p),
        ("tool_call_id", c_char_p),
        ("name", c_char_p),
        ("parts", ctypes.POINTER(ContentPart)),
        ("n_parts", c_size_t),
    ]


class ChatOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("add_generation_prompt", c_bool),
        ("thinking", c_bool),
        ("tools", c_char_p),
        ("tool_choice", c_char_p),
    ]


class BatchOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("max_requests", c_int), ("prefill_chunk", c_int)]


STRUCTS = {
    "gemlet_engine_options": EngineOptions,
    "gemlet_session_options": SessionOptions,
    "gemlet_generate_options": GenerateOptions,
    "gemlet_session_extra_options": SessionExtraOptions,
    "gemlet_token_logprob": TokenLogprob,
    "gemlet_stats": Stats,
    "gemlet_conversation_options": ConversationOptions,
    "gemlet_model_info": ModelInfo,
    "gemlet_memory_usage": MemoryUsage,
    "gemlet_memory_stats": MemoryStats,
    "gemlet_memory_plan": MemoryPlan,
    "gemlet_session_cost": SessionCost,
    "gemlet_tool_call": ToolCall,
    "gemlet_message": Message,
    "gemlet_content_part": ContentPart,
    "gemlet_image_options": ImageOptions,
    "gemlet_audio_options": AudioOptions,
    "gemlet_chat_options": ChatOptions,
    "gemlet_batch_options": BatchOptions,
}

_P = c_void_p  # every handle is opaque
_PP = ctypes.POINTER(c_void_p)
_I32P = ctypes.POINTER(c_int32)
_SIZEP = ctypes.POINTER(c_size_t)
_STRP = ctypes.POINTER(c_void_p)  # a char* the caller frees with gemlet_string_free

# name: (restype, argtypes)
_PROTOTYPES = {
    "gemlet_version": (c_char_p, []),
    "gemlet_last_error": (c_char_p, []),
    "gemlet_status_name": (c_char_p, [c_enum]),
    "gemlet_set_log_callback": (None, [LOG_FN, c_void_p]),
    "gemlet_set_footprint_callback": (None, [FOOTPRINT_FN, c_void_p]),
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
    "gemlet_engine_load_adapter": (c_enum, [_P, c_char_p, _PP]),
    "gemlet_adapter_free": (None, [_P]),
    "gemlet_adapter_path": (c_char_p, [_P]),
    "gemlet_adapter_name": (c_char_p, [_P]),
    "gemlet_adapter_sha256": (c_char_p, [_P]),
    "gemlet_adapter_alpha": (c_float, [_P]),
    "gemlet_adapter_rank": (c_int, [_P]),
    "gemlet_adapter_projections": (c_int, [_P]),
    "gemlet_adapter_bytes": (c_uint64, [_P]),
    "gemlet_session_set_adapters": (c_enum, [_P, ctypes.POINTER(c_void_p), ctypes.POINTER(c_float), c_size_t]),
    "gemlet_session_n_adapters": (c_size_t, [_P]),
    "gemlet_conversation_set_adapters": (c_enum, [_P, ctypes.POINTER(c_void_p), ctypes.POINTER(c_float), c_size_t]),
    "gemlet_conversation_n_adapters": (c_size_t, [_P]),
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
    # What gemlet.h added for parity with the C++ API.
    "gemlet_abi_version": (c_int, []),
    "gemlet_stop_reason_name": (c_char_p, [c_enum]),
    "gemlet_kv_type_name": (c_char_p, [c_enum]),
    "gemlet_parse_byte_size": (c_uint64, [c_char_p]),
    "gemlet_default_memory_budget": (c_uint64, []),
    "gemlet_n_available_kernels": (c_size_t, []),
    "gemlet_available_kernel": (c_char_p, [c_size_t]),
    "gemlet_generate_options_validate": (c_enum, [ctypes.POINTER(GenerateOptions)]),
    "gemlet_model_info_default": (ModelInfo, []),
    "gemlet_engine_info": (c_enum, [_P, ctypes.POINTER(ModelInfo)]),
    "gemlet_engine_bos_token": (c_int32, [_P]),
    "gemlet_engine_token_text": (c_enum, [_P, c_int32, _STRP]),
    "gemlet_engine_prepare_weights": (c_enum, [_P, c_int]),
    "gemlet_engine_stop_prepare_weights": (None, [_P]),
    "gemlet_memory_usage_default": (MemoryUsage, []),
    "gemlet_engine_measure_memory": (c_enum, [_P, ctypes.POINTER(MemoryUsage)]),
    "gemlet_engine_decode_kv_bytes_at": (c_uint64, [_P, c_enum, c_int64]),
    "gemlet_engine_apply_chat_template": (c_enum, [_P, ctypes.POINTER(Message), c_size_t, c_bool, _STRP]),
    "gemlet_chat_options_default": (ChatOptions, []),
    "gemlet_engine_tokenize_chat": (c_enum, [_P, ctypes.POINTER(Message), c_size_t, ctypes.POINTER(ChatOptions), _I32P,
                                             c_size_t, _SIZEP]),
    "gemlet_engine_check_response_format": (c_enum, [_P, ctypes.POINTER(GenerateOptions), c_int]),
    "gemlet_session_n_ctx": (c_int, [_P]),
    "gemlet_session_tokens": (_I32P, [_P, _SIZEP]),
    "gemlet_memory_stats_default": (MemoryStats, []),
    "gemlet_memory_plan_default": (MemoryPlan, []),
    "gemlet_session_memory": (c_enum, [_P, ctypes.POINTER(MemoryStats)]),
    "gemlet_session_memory_plan": (c_enum, [_P, ctypes.POINTER(MemoryPlan)]),
    "gemlet_session_generate": (c_enum, [_P, _I32P, c_size_t, ctypes.POINTER(GenerateOptions), STREAM_FN, c_void_p, _PP]),
    "gemlet_session_complete": (c_enum, [_P, _I32P, c_size_t, ctypes.POINTER(GenerateOptions), STREAM_FN, c_void_p, _PP]),
    "gemlet_reply_free": (None, [_P]),
    "gemlet_reply_text": (c_char_p, [_P]),
    "gemlet_reply_thinking": (c_char_p, [_P]),
    "gemlet_reply_tokens": (_I32P, [_P, _SIZEP]),
    "gemlet_reply_n_tool_calls": (c_size_t, [_P]),
    "gemlet_reply_tool_call": (ctypes.POINTER(ToolCall), [_P, c_size_t]),
    "gemlet_reply_stats": (c_enum, [_P, ctypes.POINTER(Stats)]),
    "gemlet_session_cost_default": (SessionCost, []),
    "gemlet_plan_session": (c_enum, [_P, ctypes.POINTER(SessionOptions), ctypes.POINTER(SessionCost)]),
    "gemlet_fit_to_budget": (c_enum, [_P, c_uint64, ctypes.POINTER(SessionOptions), ctypes.POINTER(SessionOptions), _STRP,
                                      ctypes.POINTER(c_uint64)]),
    "gemlet_fit_file_to_budget": (c_enum, [c_char_p, ctypes.POINTER(EngineOptions), c_uint64,
                                           ctypes.POINTER(SessionOptions), ctypes.POINTER(SessionOptions), _STRP,
                                           ctypes.POINTER(c_uint64)]),
    "gemlet_message_default": (Message, []),
    "gemlet_conversation_message_at": (c_enum, [_P, c_size_t, ctypes.POINTER(Message)]),
    "gemlet_conversation_set_messages": (c_enum, [_P, ctypes.POINTER(Message), c_size_t]),
    "gemlet_conversation_set_summarize_dropped": (c_enum, [_P, c_bool]),
    "gemlet_conversation_summary": (c_enum, [_P, _STRP]),
    "gemlet_conversation_n_ctx": (c_int, [_P]),
    "gemlet_conversation_memory": (c_enum, [_P, ctypes.POINTER(MemoryStats)]),
    "gemlet_conversation_memory_plan": (c_enum, [_P, ctypes.POINTER(MemoryPlan)]),
    "gemlet_batch_options_default": (BatchOptions, []),
    "gemlet_batch_decoder_create": (c_enum, [_P, ctypes.POINTER(BatchOptions), _PP]),
    "gemlet_batch_decoder_free": (None, [_P]),
    "gemlet_batch_decoder_submit": (c_enum, [_P, _P, _I32P, c_size_t, ctypes.POINTER(GenerateOptions), STREAM_FN,
                                             c_void_p, ctypes.POINTER(c_int)]),
    "gemlet_batch_decoder_step": (c_enum, [_P, _SIZEP]),
    "gemlet_batch_decoder_finished": (c_enum, [_P, c_size_t, ctypes.POINTER(c_int), _PP]),
    "gemlet_batch_decoder_cancel": (None, [_P, c_int]),
    "gemlet_batch_decoder_running": (c_int, [_P]),
    "gemlet_batch_decoder_last_step_tokens": (c_int, [_P]),
    # Log-probabilities, the session options gemlet_session_options cannot hold, the tokenizer alone.
    "gemlet_reply_n_logprobs": (c_size_t, [_P]),
    "gemlet_reply_logprob": (c_enum, [_P, c_size_t, ctypes.POINTER(TokenLogprob),
                                      ctypes.POINTER(ctypes.POINTER(TokenLogprob)), _SIZEP]),
    "gemlet_conversation_last_n_logprobs": (c_size_t, [_P]),
    "gemlet_conversation_last_logprob": (c_enum, [_P, c_size_t, ctypes.POINTER(TokenLogprob),
                                                  ctypes.POINTER(ctypes.POINTER(TokenLogprob)), _SIZEP]),
    "gemlet_session_extra_options_default": (SessionExtraOptions, []),
    "gemlet_session_create2": (c_enum, [_P, ctypes.POINTER(SessionOptions), ctypes.POINTER(SessionExtraOptions), _PP]),
    "gemlet_conversation_create2": (c_enum, [_P, ctypes.POINTER(ConversationOptions),
                                             ctypes.POINTER(SessionExtraOptions), _PP]),
    "gemlet_session_rollback_room": (c_int, [_P]),
    "gemlet_tokenizer_open": (c_enum, [c_char_p, _PP]),
    "gemlet_tokenizer_free": (None, [_P]),
    "gemlet_tokenizer_encode": (c_enum, [_P, c_char_p, c_size_t, c_bool, c_bool, _I32P, c_size_t, _SIZEP]),
    "gemlet_tokenizer_decode": (c_enum, [_P, _I32P, c_size_t, _STRP]),
    "gemlet_tokenizer_piece": (c_enum, [_P, c_int32, _STRP]),
    "gemlet_tokenizer_vocab_size": (c_int, [_P]),
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
        # The ABI first: a library of another one may lack these functions or lay its structs out
        # otherwise, and setting prototypes on it would only hide that.
        abi = getattr(handle, "gemlet_abi_version", None)
        found = abi() if abi is not None else 0  # a library from before the ABI check
        if found != ABI_VERSION:
            raise OSError(f"{path}: libgemlet ABI {found}, these bindings need ABI {ABI_VERSION}")
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return handle
    raise OSError("libgemlet not found (set GEMLET_LIBRARY to its path); tried:\n  " + "\n  ".join(errors))


def library_path():
    """The file the library was loaded from (for diagnostics)."""
    return lib()._name
