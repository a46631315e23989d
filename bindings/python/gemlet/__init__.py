"""gemlet for Python: Gemma models from GGUF files through libgemlet's C API (ctypes, no build step).

    import gemlet
    engine = gemlet.Engine.load("models/gemlet-demo.gguf")
    chat = engine.conversation()
    for kind, text in chat.stream("Who are you?", temperature=0):
        print(text, end="", flush=True)

The library is found through GEMLET_LIBRARY, else beside this package, else the system's loader.
"""

from ._api import (ChunkKind, Conversation, Engine, GemletError, KvType, MemoryLevel, Reply, Session, Stats,
                   Status, StopReason, ThermalState, set_log_callback, version)
from ._ffi import library_path


def load(path, n_threads=0, **kwargs):
    """Engine.load: the model at `path`."""
    return Engine.load(path, n_threads=n_threads, **kwargs)


__all__ = ["ChunkKind", "Conversation", "Engine", "GemletError", "KvType", "MemoryLevel", "Reply", "Session",
           "Stats", "Status", "StopReason", "ThermalState", "library_path", "load", "set_log_callback", "version"]
