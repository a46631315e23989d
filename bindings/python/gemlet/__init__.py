"""gemlet for Python: Gemma models from GGUF files through libgemlet's C API (ctypes, no build step).

    import gemlet
    engine = gemlet.Engine.load("models/gemlet-demo.gguf")
    chat = engine.conversation()
    for kind, text in chat.stream("Who are you?", temperature=0):
        print(text, end="", flush=True)

The library is found through GEMLET_LIBRARY, else beside this package, else the system's loader.
"""

from ._api import (Adapter, ChunkKind, Conversation, Engine, GemletError, KvType, MemoryLevel, Reply, Session, Stats,
                   Status, StopReason, ThermalState, set_log_callback, set_footprint_callback, version)
from ._extra import (BatchDecoder, GenerationReply, MemoryPlan, MemoryStats, Message, ModelInfo, SessionCost,
                     TokenLogprob, TokenLogprobs, ToolCall, abi_version, available_kernels, default_memory_budget,
                     fit_file_to_budget, parse_byte_size)
from ._tokenizer import Tokenizer
from ._ffi import ABI_VERSION, library_path


def load(path, n_threads=0, **kwargs):
    """Engine.load: the model at `path`."""
    return Engine.load(path, n_threads=n_threads, **kwargs)


__all__ = ["ABI_VERSION", "Adapter", "BatchDecoder", "ChunkKind", "Conversation", "Engine", "GemletError", "GenerationReply",
           "KvType", "MemoryLevel", "MemoryPlan", "MemoryStats", "Message", "ModelInfo", "Reply", "Session",
           "SessionCost", "Stats", "Status", "StopReason", "ThermalState", "TokenLogprob", "TokenLogprobs",
           "Tokenizer", "ToolCall", "abi_version", "available_kernels", "default_memory_budget",
           "fit_file_to_budget", "library_path", "load", "parse_byte_size", "set_footprint_callback",
           "set_log_callback", "version"]
