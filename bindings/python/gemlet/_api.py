"""The Python objects over the C API: Engine, Session, Conversation, their enums and GemletError."""

import atexit
import ctypes
import os
import dataclasses
import enum
import queue
import threading

from . import _ffi


class _IntEnum(enum.IntEnum):
    # Python 3.11 prints an IntEnum as its number; "StopReason.CANCELLED" says more.
    __str__ = enum.Enum.__str__


class Status(_IntEnum):
    OK = 0
    ERROR = 1
    INVALID_ARGUMENT = 2
    CANCELLED = 3
    CONTEXT_FULL = 4
    OUT_OF_MEMORY = 5
    BUFFER_TOO_SMALL = 6
    TOO_LARGE = 7


class ChunkKind(_IntEnum):
    TEXT = 0
    THINKING = 1   # Gemma 4's thought channel
    TOOL_CALL = 2  # Gemma 4's call:NAME{ARGS}


class StopReason(_IntEnum):
    END_OF_TURN = 0
    STOP_STRING = 1
    MAX_TOKENS = 2
    CONTEXT_FULL = 3
    CANCELLED = 4


class ThermalState(_IntEnum):
    """iOS ProcessInfo.ThermalState; gemlet.h says how Android's THERMAL_STATUS_* map onto it."""
    NOMINAL = 0
    FAIR = 1
    SERIOUS = 2
    CRITICAL = 3


class MemoryLevel(_IntEnum):
    """Android's onTrimMemory levels, by value."""
    NONE = 0
    RUNNING_MODERATE = 5
    RUNNING_LOW = 10
    RUNNING_CRITICAL = 15
    UI_HIDDEN = 20
    BACKGROUND = 40
    MODERATE = 60
    COMPLETE = 80


class KvType(_IntEnum):
    F16 = 0
    F32 = 1
    Q8_0 = 2
    Q4_0 = 3


class GemletError(Exception):
    """A failed gemlet call: `code` is a Status, `message` gemlet_last_error()'s text."""

    def __init__(self, code, message):
        try:
            code = Status(code)
        except ValueError:
            pass
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self):
        name = self.code.name.lower() if isinstance(self.code, Status) else str(self.code)
        return f"{self.message} ({name})" if self.message else name


def _check(status):
    # gemlet_last_error is per thread, so it must be read here, on the thread that made the call,
    # before any other gemlet call on it.
    if status != Status.OK:
        raise GemletError(status, _ffi.lib().gemlet_last_error().decode("utf-8", "replace"))


def _utf8(text, what):
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    data = text.encode("utf-8")
    # The C API takes these as NUL-terminated strings: a NUL inside would silently cut the text.
    if b"\0" in data:
        raise ValueError(f"{what} contains a NUL character")
    return data


def _encode(fn, handle, text, add_special, parse_special):
    """Token ids of `text` from a C encode call (gemlet_tokenize, gemlet_tokenizer_encode): the text
    goes with its length (a NUL inside is fine), into a buffer that grows when the call reports a
    larger count."""
    data = text.encode("utf-8")
    n = ctypes.c_size_t()
    capacity = len(data) + 8  # a first guess that fits most texts
    while True:
        buf = (ctypes.c_int32 * capacity)()
        status = fn(handle, data, len(data), add_special, parse_special, buf, capacity, ctypes.byref(n))
        if status == Status.BUFFER_TOO_SMALL and n.value > capacity:
            capacity = n.value
            continue
        _check(status)
        return list(buf[:n.value])


def version():
    return _ffi.lib().gemlet_version().decode()


_log_callback = None  # keeps the ctypes thunk alive while the library may call it


def set_log_callback(callback):
    """callback(level, message) receives the library's messages (0 debug .. 3 error), from any
    thread; None restores the default (warnings and errors to stderr)."""
    global _log_callback
    lib = _ffi.lib()
    if callback is None:
        lib.gemlet_set_log_callback(_ffi.LOG_FN(), None)
        _log_callback = None
        return

    def thunk(level, message, _user):
        try:
            callback(level, message.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - an exception must not unwind into C
            pass

    fn = _ffi.LOG_FN(thunk)
    if _log_callback is None:
        # A message logged while the interpreter shuts down must not call into a dying Python.
        atexit.register(set_log_callback, None)
    lib.gemlet_set_log_callback(fn, None)
    _log_callback = fn


_footprint_callback = None  # keeps the ctypes thunk alive while the library may call it


def set_footprint_callback(callback):
    """callback() returns the process's memory footprint in bytes as the host reads it (budget
    planning and memory reports count it as the process's dirty memory); None restores the
    default (/proc on Linux)."""
    global _footprint_callback
    lib = _ffi.lib()
    if callback is None:
        lib.gemlet_set_footprint_callback(_ffi.FOOTPRINT_FN(), None)
        _footprint_callback = None
        return

    def thunk(_user):
        try:
            return int(callback())
        except Exception:  # noqa: BLE001 - an exception must not unwind into C
            return 0

    fn = _ffi.FOOTPRINT_FN(thunk)
    if _footprint_callback is None:
        atexit.register(set_footprint_callback, None)
    lib.gemlet_set_footprint_callback(fn, None)
    _footprint_callback = fn


@dataclasses.dataclass
class Stats:
    """One turn's figures (gemlet_stats)."""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    ttft_seconds: float = 0.0
    prefill_tokens_per_second: float = 0.0
    decode_tokens_per_second: float = 0.0
    stop: StopReason = StopReason.END_OF_TURN
    kv_cache_bytes: int = 0
    activation_bytes: int = 0
    dropped_messages: int = 0    # the oldest messages dropped to make room (the chat goes on)
    dropped_tokens: int = 0
    reevaluated_tokens: int = 0  # kept tokens evaluated again for it (0: the cache was shifted)
    summarized_messages: int = 0  # summarize_dropped: the dropped messages summarized for this turn
    summary_tokens: int = 0

    @classmethod
    def _from_c(cls, s):
        return cls(s.prompt_tokens, s.cached_tokens, s.generated_tokens, s.ttft_seconds,
                   s.prefill_tokens_per_second, s.decode_tokens_per_second, StopReason(s.stop),
                   s.kv_cache_bytes, s.activation_bytes, s.dropped_messages, s.dropped_tokens,
                   s.reevaluated_tokens, s.summarized_messages, s.summary_tokens)


@dataclasses.dataclass
class Reply:
    """An answer: its text (without thinking) and the turn's stats; with send(logprobs=True) (or
    top_logprobs=N), a TokenLogprobs per generated token."""
    text: str
    stats: Stats
    logprobs: list = dataclasses.field(default_factory=list)

    @property
    def cancelled(self):
        return self.stats.stop == StopReason.CANCELLED

    def __str__(self):
        return self.text


def _session_options(n_ctx, n_threads, max_batch, kv_type, base=None):
    o = base if base is not None else _ffi.lib().gemlet_session_options_default()
    if n_ctx is not None:
        o.n_ctx = n_ctx
    if n_threads is not None:
        o.n_threads = n_threads
    if max_batch is not None:
        o.max_batch = max_batch
    if kv_type is not None:
        o.kv_type = KvType(kv_type)
    return o


class _Handle:
    """Owns one C handle: close() (also on `with` exit and garbage collection) frees it once;
    _handle() is the live handle, or ValueError once closed. Subclasses name their free function."""

    _free = None  # name of the gemlet_*_free function

    def _free_now(self):
        getattr(_ffi.lib(), self._free)(self._h)
        self._h = None

    def close(self):
        if getattr(self, "_h", None):
            self._free_now()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not getattr(self, "_h", None):
            raise ValueError(f"the {type(self).__name__.lower()} is closed")
        return self._h


class Engine(_Handle):
    """A loaded model: immutable weights that its sessions and conversations share; usable from
    many threads at once."""

    def __init__(self, path, n_threads=0, cache_dir=None, data_dir=None, progress=None, kernels=None):
        """Loads the GGUF at `path`. progress(fraction) is called while loading; returning False
        cancels the load (GemletError with Status.CANCELLED). kernels: "auto" (None), "ref" or a
        CPU target name ("AVX2", "NEON")."""
        lib = _ffi.lib()
        self._h = None
        o = lib.gemlet_engine_options_default()
        o.n_threads = n_threads
        if cache_dir is not None:
            o.cache_dir = _utf8(str(cache_dir), "cache_dir")
        if data_dir is not None:
            o.data_dir = _utf8(str(data_dir), "data_dir")
        if kernels is not None:
            o.kernels = _utf8(str(kernels), "kernels")
        failure = []
        if progress is not None:
            def on_progress(fraction, _user):
                try:
                    return progress(fraction) is not False
                except BaseException as e:  # noqa: BLE001 - raised again below, outside C
                    failure.append(e)
                    return False
            o.progress = _ffi.PROGRESS_FN(on_progress)
        out = ctypes.c_void_p()
        status = lib.gemlet_engine_load(_utf8(str(path), "path"), ctypes.byref(o), ctypes.byref(out))
        if failure:
            raise failure[0]
        _check(status)
        self._h = out

    @classmethod
    def load(cls, path, n_threads=0, **kwargs):
        return cls(path, n_threads=n_threads, **kwargs)

    _free = "gemlet_engine_free"  # its sessions and conversations keep the weights alive

    def load_adapter(self, path):
        """A LoRA adapter (llama.cpp's GGUF format) for this model; another model's is refused."""
        return Adapter(self, path)

    @property
    def n_vocab(self):
        return _ffi.lib().gemlet_engine_n_vocab(self._handle())

    @property
    def n_ctx_train(self):
        return _ffi.lib().gemlet_engine_n_ctx_train(self._handle())

    @property
    def architecture(self):
        return _ffi.lib().gemlet_engine_architecture(self._handle()).decode()

    @property
    def info(self):
        """What the model is: a ModelInfo (architecture, name, n_layers, file_type, ...)."""
        c = _ffi.lib().gemlet_model_info_default()
        _check(_ffi.lib().gemlet_engine_info(self._handle(), ctypes.byref(c)))
        return _extra.ModelInfo._from_c(c)

    def measure_memory(self):
        """What the process holds now (a dict of gemlet_memory_usage's fields, in bytes)."""
        c = _ffi.lib().gemlet_memory_usage_default()
        _check(_ffi.lib().gemlet_engine_measure_memory(self._handle(), ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in c._fields_[1:]}

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The model's chat format applied to messages (Message, dicts or (role, content) pairs)."""
        array, n, _keep = _extra.messages_array(messages)
        out = ctypes.c_void_p()
        status = _ffi.lib().gemlet_engine_apply_chat_template(self._handle(), array, n, add_generation_prompt,
                                                              ctypes.byref(out))
        text = _extra._take_string(out)
        _check(status)
        return text

    def tokenize_chat(self, messages, add_generation_prompt=True, thinking=False, tools=None, tool_choice=None):
        """The chat prompt as tokens, BOS first, ready for Session.complete."""
        lib = _ffi.lib()
        array, n, _keep = _extra.messages_array(messages)
        o = lib.gemlet_chat_options_default()
        o.add_generation_prompt, o.thinking = add_generation_prompt, thinking
        if tools is not None:
            o.tools = _utf8(tools, "tools")
        if tool_choice is not None:
            o.tool_choice = _utf8(tool_choice, "tool_choice")
        count = ctypes.c_size_t()
        status = lib.gemlet_engine_tokenize_chat(self._handle(), array, n, ctypes.byref(o), None, 0, ctypes.byref(count))
        if status != Status.BUFFER_TOO_SMALL:
            _check(status)
        buf = (ctypes.c_int32 * max(1, count.value))()
        _check(lib.gemlet_engine_tokenize_chat(self._handle(), array, n, ctypes.byref(o), buf, count.value,
                                               ctypes.byref(count)))
        return list(buf[:count.value])

    def plan_session(self, n_ctx=None, kv_type=None):
        """What a session with these options would cost: a SessionCost."""
        o = _extra._session_options_c(n_ctx, kv_type)
        c = _ffi.lib().gemlet_session_cost_default()
        _check(_ffi.lib().gemlet_plan_session(self._handle(), ctypes.byref(o), ctypes.byref(c)))
        return _extra.SessionCost(**_extra._fields(_extra.SessionCost, c))

    def fit_to_budget(self, budget_bytes, n_ctx=None, kv_type=None):
        """The session options that fit budget_bytes: (n_ctx, KvType, note, floor_bytes); GemletError
        (INVALID_ARGUMENT) when even the floor does not fit."""
        wanted = _extra._session_options_c(n_ctx, kv_type)
        fitted = _ffi.lib().gemlet_session_options_default()
        note, floor = ctypes.c_void_p(), ctypes.c_uint64()
        status = _ffi.lib().gemlet_fit_to_budget(self._handle(), int(budget_bytes), ctypes.byref(wanted),
                                                 ctypes.byref(fitted), ctypes.byref(note), ctypes.byref(floor))
        return _extra.fit_result(status, fitted, note, floor)

    def decode_kv_bytes_at(self, kv_type, pos):
        return _ffi.lib().gemlet_engine_decode_kv_bytes_at(self._handle(), int(KvType(kv_type)), pos)

    def prepare_weights(self, n_threads=1):
        """Packs the weights for the kernels now (else on first use); stop_prepare_weights() from
        another thread ends it early."""
        _check(_ffi.lib().gemlet_engine_prepare_weights(self._handle(), n_threads))

    def stop_prepare_weights(self):
        if self._h:
            _ffi.lib().gemlet_engine_stop_prepare_weights(self._h)

    def tokenize(self, text, add_special=True, parse_special=False):
        """Text to token ids; add_special adds <bos>, parse_special reads "<start_of_turn>" and the
        like as the special tokens they name."""
        return _encode(_ffi.lib().gemlet_tokenize, self._handle(), text, add_special, parse_special)

    def detokenize(self, tokens):
        lib = _ffi.lib()
        ids = (ctypes.c_int32 * len(tokens))(*tokens)
        out = ctypes.c_void_p()
        _check(lib.gemlet_detokenize(self._handle(), ids, len(tokens), ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode("utf-8")
        finally:
            lib.gemlet_string_free(out)

    def set_thread_limit(self, n_threads):
        """At most n_threads for every session of the engine from its next call on (0: no limit)."""
        _check(_ffi.lib().gemlet_engine_set_thread_limit(self._handle(), n_threads))

    @property
    def kernels(self):
        """The kernels sessions run ("AVX3_DL", "NEON", "ref", ...)."""
        return _ffi.lib().gemlet_engine_kernels(self._handle()).decode()

    @kernels.setter
    def kernels(self, name):
        """From each session's next call on: "auto", "ref" or a CPU target name."""
        _check(_ffi.lib().gemlet_engine_set_kernels(self._handle(), _utf8(str(name), "kernels")))

    # ---- platform signals, passed in by the app ----

    @property
    def thermal_state(self):
        return ThermalState(_ffi.lib().gemlet_engine_thermal_state(self._handle()))

    @thermal_state.setter
    def thermal_state(self, state):
        _check(_ffi.lib().gemlet_engine_set_thermal_state(self._handle(), int(state)))

    def memory_warning(self, level):
        _check(_ffi.lib().gemlet_engine_memory_warning(self._handle(), int(level)))

    @property
    def memory_level(self):
        return MemoryLevel(_ffi.lib().gemlet_engine_memory_level(self._handle()))

    def on_background(self):
        _check(_ffi.lib().gemlet_engine_on_background(self._handle()))

    def on_foreground(self):
        _check(_ffi.lib().gemlet_engine_on_foreground(self._handle()))

    @property
    def in_background(self):
        return bool(_ffi.lib().gemlet_engine_in_background(self._handle()))

    # ---- what runs on it ----

    def conversation(self, system=None, n_ctx=None, n_threads=None, max_batch=None, kv_type=None, thinking=False,
                     summarize_dropped=False, summary_max_tokens=None, state_path=None, **extra):
        """extra: Session's rollback_tokens, draft_model and progress."""
        return Conversation(self, system=system, n_ctx=n_ctx, n_threads=n_threads, max_batch=max_batch,
                            kv_type=kv_type, thinking=thinking, summarize_dropped=summarize_dropped,
                            summary_max_tokens=summary_max_tokens, state_path=state_path, **extra)

    def session(self, n_ctx=None, n_threads=None, max_batch=None, kv_type=None, **extra):
        """extra: rollback_tokens, draft_model (an Engine) and progress(done, total), as Session's."""
        return Session(self, n_ctx=n_ctx, n_threads=n_threads, max_batch=max_batch, kv_type=kv_type, **extra)


class Adapter(_Handle):
    """A LoRA adapter loaded for one engine (Engine.load_adapter): sessions and conversations run any
    set of them, unmerged on the base (set_adapters)."""

    _free = "gemlet_adapter_free"  # sessions using it keep their own reference

    def __init__(self, engine, path):
        self._h = None
        out = ctypes.c_void_p()
        _check(_ffi.lib().gemlet_engine_load_adapter(engine._handle(), _utf8(str(path), "path"), ctypes.byref(out)))
        self._h = out

    def _text(self, fn):
        return getattr(_ffi.lib(), fn)(self._handle()).decode("utf-8")

    path = property(lambda self: self._text("gemlet_adapter_path"))
    name = property(lambda self: self._text("gemlet_adapter_name"))
    sha256 = property(lambda self: self._text("gemlet_adapter_sha256"))
    alpha = property(lambda self: _ffi.lib().gemlet_adapter_alpha(self._handle()))
    rank = property(lambda self: _ffi.lib().gemlet_adapter_rank(self._handle()))
    projections = property(lambda self: _ffi.lib().gemlet_adapter_projections(self._handle()))
    nbytes = property(lambda self: _ffi.lib().gemlet_adapter_bytes(self._handle()))


def _adapter_lists(adapters):
    """[Adapter or (Adapter, scale), ...] as the C arrays of handles and scales."""
    pairs = [a if isinstance(a, tuple) else (a, 1.0) for a in adapters]
    handles = (ctypes.c_void_p * max(1, len(pairs)))(*[a._handle().value for a, _ in pairs])
    scales = (ctypes.c_float * max(1, len(pairs)))(*[float(s) for _, s in pairs])
    return handles, scales, len(pairs)


class _OneCallAtATime(_Handle):
    """The C API allows one call at a time on a session or conversation (cancel excepted); two
    threads racing on one would corrupt its KV cache, so the second gets an error instead."""

    _cancel = None  # name of the gemlet_*_cancel function

    def __init__(self):
        self._busy = threading.Lock()
        # Held to free the handle and to cancel: a cancel() racing close() must not reach freed memory.
        self._life = threading.Lock()

    def close(self):
        if getattr(self, "_h", None):
            self.cancel()
            with self._busy, self._life:  # a call still running on another thread finishes first
                if self._h:
                    self._free_now()

    def cancel(self):
        """Thread-safe: stops the call running on another thread."""
        with self._life:
            if self._h:
                getattr(_ffi.lib(), self._cancel)(self._h)

    _progress_failure = None  # what the prompt progress callback raised during the current call

    def _raise_progress_failure(self):
        failure, self._progress_failure = self._progress_failure, None
        if failure is not None:
            raise failure

    def _enter(self):
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(f"the {type(self).__name__.lower()} is already running a call on another thread")

    def _leave(self):
        self._busy.release()


class Session(_OneCallAtATime):
    """Tokens in, logits out, one KV cache."""

    def __init__(self, engine, n_ctx=None, n_threads=None, max_batch=None, kv_type=None, rollback_tokens=None,
                 draft_model=None, progress=None):
        """rollback_tokens: what truncate() takes back without evaluating again (16); draft_model: an
        Engine of the same vocabulary whose greedy drafts generation's max_draft verifies (no token
        changes); progress(done, total): after each chunk of a long prompt, and each decoded token as
        (1, 1) (False cancels)."""
        super().__init__()
        lib = _ffi.lib()
        self._h = None
        self._n_vocab = engine.n_vocab
        o = _session_options(n_ctx, n_threads, max_batch, kv_type)
        extra, self._progress = _extra.session_extra_options(self, rollback_tokens, draft_model, progress)
        out = ctypes.c_void_p()
        _check(lib.gemlet_session_create2(engine._handle(), ctypes.byref(o), ctypes.byref(extra) if extra else None,
                                          ctypes.byref(out)))
        self._h = out

    _free = "gemlet_session_free"
    _cancel = "gemlet_session_cancel"

    def evaluate(self, tokens, logits=True):
        """Evaluates `tokens` after those cached; returns the last position's n_vocab logits (a
        ctypes float array, indexable and convertible with list()) or None."""
        ids = (ctypes.c_int32 * len(tokens))(*tokens)
        out = (ctypes.c_float * self._n_vocab)() if logits else None
        self._enter()
        try:
            status = _ffi.lib().gemlet_session_evaluate(self._handle(), ids, len(tokens), out)
            self._raise_progress_failure()
            _check(status)
        finally:
            self._leave()
        return out

    def truncate(self, n_keep):
        _check(_ffi.lib().gemlet_session_truncate(self._handle(), n_keep))

    def discard(self, begin, count):
        """Drops tokens [begin, begin + count) and shifts the rest down (keys re-rotated, nothing
        evaluated); returns the tokens evaluated again (0 unless sliding windows could not follow)."""
        redone = ctypes.c_int(0)
        _check(_ffi.lib().gemlet_session_discard(self._handle(), begin, count, ctypes.byref(redone)))
        return redone.value

    def save_state(self, path):
        """Writes the tokens and KV rows to `path` (bound to this model file)."""
        _check(_ffi.lib().gemlet_session_save(self._handle(), _utf8(str(path), "path")))

    def restore_state(self, path):
        """Maps a saved state back with nothing evaluated; a bad file raises and changes nothing."""
        _check(_ffi.lib().gemlet_session_restore(self._handle(), _utf8(str(path), "path")))

    def reset(self):
        _ffi.lib().gemlet_session_reset(self._handle())

    def set_adapters(self, adapters):
        """Runs the next calls with these LoRA adapters ([Adapter or (Adapter, scale)]; [] for the
        base). Another set, order or scale empties the cache: no other adapter's K/V are reused."""
        handles, scales, n = _adapter_lists(adapters)
        _check(_ffi.lib().gemlet_session_set_adapters(self._handle(), handles, scales, n))

    @property
    def n_adapters(self):
        return _ffi.lib().gemlet_session_n_adapters(self._handle())

    @property
    def n_past(self):
        return _ffi.lib().gemlet_session_n_past(self._handle())

    @property
    def n_ctx(self):
        return _ffi.lib().gemlet_session_n_ctx(self._handle())

    @property
    def rollback_room(self):
        """Tokens truncate() takes back without evaluating anything again."""
        return _ffi.lib().gemlet_session_rollback_room(self._handle())

    @property
    def tokens(self):
        """The tokens the cache holds."""
        n = ctypes.c_size_t()
        ptr = _ffi.lib().gemlet_session_tokens(self._handle(), ctypes.byref(n))
        return list(ptr[:n.value]) if n.value else []

    def memory(self):
        return _memory(self, "gemlet_session_memory")

    def memory_plan(self):
        return _memory_plan(self, "gemlet_session_memory_plan")

    def generate(self, prompt, on_text=None, **options):
        """Evaluates `prompt` (token ids after the cache's) and generates: a GenerationReply.
        on_text(kind, text) streams the pieces; returning False, or cancel(), stops the answer (not an
        error: reply.cancelled). Options as Conversation.send's, plus response_format, tool_choice,
        max_draft and logit_bias ({token: bias})."""
        return self._generation("gemlet_session_generate", prompt, on_text, options)

    def complete(self, prompt, on_text=None, **options):
        """As generate() for a fresh session, keeping the longest prefix of `prompt` the cache holds
        (stats.cached_tokens)."""
        return self._generation("gemlet_session_complete", prompt, on_text, options)

    def _generation(self, fn, prompt, on_text, options):
        g, _keep = _extra.generate_options(**options)
        ids = (ctypes.c_int32 * max(1, len(prompt)))(*prompt)
        failure = []
        thunk = _extra.stream_thunk(on_text, failure)
        reply = ctypes.c_void_p()
        self._enter()
        try:
            status = getattr(_ffi.lib(), fn)(self._handle(), ids, len(prompt), ctypes.byref(g), thunk, None,
                                             ctypes.byref(reply))
            result = _extra._reply_from_c(reply) if reply.value else None
            if failure:
                raise failure[0]
            self._raise_progress_failure()
            if status != Status.CANCELLED or result is None:
                _check(status)
        finally:
            self._leave()
        return result



_STREAM_END = object()


class Conversation(_OneCallAtATime):
    """Messages in the model's chat format, with streamed answers. One send at a time; cancel()
    from any thread."""

    def __init__(self, engine, system=None, n_ctx=None, n_threads=None, max_batch=None, kv_type=None,
                 thinking=False, summarize_dropped=False, summary_max_tokens=None, state_path=None,
                 rollback_tokens=None, draft_model=None, progress=None):
        super().__init__()
        lib = _ffi.lib()
        self._h = None
        self._stop_requested = False
        o = lib.gemlet_conversation_options_default()
        _session_options(n_ctx, n_threads, max_batch, kv_type, base=o.session)
        if system is not None:
            o.system = _utf8(system, "system")
        o.thinking = thinking
        # summarize_dropped: dropped turns are summarized by the model first; state_path: restored
        # from it when there, saved to it by Engine.on_background().
        o.summarize_dropped = bool(summarize_dropped)
        if summary_max_tokens is not None:
            o.summary_max_tokens = int(summary_max_tokens)
        if state_path is not None:
            o.state_path = _utf8(os.fspath(state_path), "state_path")
        extra, self._progress = _extra.session_extra_options(self, rollback_tokens, draft_model, progress)
        out = ctypes.c_void_p()
        _check(lib.gemlet_conversation_create2(engine._handle(), ctypes.byref(o),
                                               ctypes.byref(extra) if extra else None, ctypes.byref(out)))
        self._h = out
        self.last_stats = None

    _free = "gemlet_conversation_free"
    _cancel = "gemlet_conversation_cancel"

    def send(self, text, on_text=None, *, max_tokens=None, temperature=None, top_k=None, top_p=None, min_p=None,
             repeat_penalty=None, repeat_last_n=None, presence_penalty=None, frequency_penalty=None, seed=None,
             stop=None, logprobs=False, top_logprobs=None):
        """Sends a user message and returns the Reply. on_text(kind, text) receives each streamed
        piece (whole UTF-8 characters, as str); returning False from it stops the answer. Options
        left None keep the library's defaults (temperature 0 is greedy). A stop by on_text or by
        cancel() is not an error: the Reply's stats.stop is StopReason.CANCELLED. logprobs=True, or
        top_logprobs=N (0 to 20 alternatives, which implies it), fills the Reply's logprobs."""
        lib = _ffi.lib()
        g = lib.gemlet_generate_options_default()
        for name, value in (("max_tokens", max_tokens), ("temperature", temperature), ("top_k", top_k),
                            ("top_p", top_p), ("min_p", min_p), ("repeat_penalty", repeat_penalty),
                            ("repeat_last_n", repeat_last_n), ("presence_penalty", presence_penalty),
                            ("frequency_penalty", frequency_penalty), ("seed", seed)):
            if value is not None:
                setattr(g, name, value)
        if logprobs or top_logprobs is not None:
            g.logprobs, g.top_logprobs = True, int(top_logprobs or 0)
        if stop:
            if isinstance(stop, str):
                stop = [stop]
            stops = (ctypes.c_char_p * len(stop))(*[_utf8(s, "stop") for s in stop])
            g.stop = ctypes.cast(stops, ctypes.POINTER(ctypes.c_char_p))
            g.n_stop = len(stop)
        data = _utf8(text, "text")

        failure = []

        def on_chunk(kind, ptr, length, _user):
            # Also stops for a cancel() that came between the call's start and the library's reset
            # of its own cancel flag (gemlet_conversation_send clears a cancel made before it).
            if self._stop_requested:
                return False
            if on_text is None:
                return True
            try:
                return on_text(ChunkKind(kind), ctypes.string_at(ptr, length).decode("utf-8")) is not False
            except BaseException as e:  # noqa: BLE001 - raised again below, outside C
                failure.append(e)
                return False

        stats = _ffi.Stats()
        stats.struct_size = ctypes.sizeof(stats)
        self._enter()
        try:
            self._stop_requested = False
            # The thunk lives until the call returns: the library calls it only during the call.
            status = lib.gemlet_conversation_send(self._handle(), data, ctypes.byref(g), _ffi.STREAM_FN(on_chunk),
                                                  None, ctypes.byref(stats))
            if failure:
                raise failure[0]
            self._raise_progress_failure()
            if status == Status.CANCELLED:
                # A cancel during the prompt's evaluation returns before the stats are written.
                stats.stop = StopReason.CANCELLED
            else:
                _check(status)
            reply = Reply(lib.gemlet_conversation_last_reply(self._h).decode("utf-8"), Stats._from_c(stats),
                          _extra._logprobs_from_c(self._h, "gemlet_conversation_last_n_logprobs",
                                                  "gemlet_conversation_last_logprob"))
        finally:
            self._leave()
        self.last_stats = reply.stats
        return reply

    def stream(self, text, **options):
        """Sends a user message and yields (ChunkKind, str) pieces as they come; the generator's
        return value (StopIteration.value, or `yield from`'s) is the Reply, also in last_stats.
        Leaving the loop early stops the answer. Takes send()'s keyword options."""
        if "on_text" in options:
            raise TypeError("stream() yields the pieces; on_text is send()'s")
        pieces = queue.Queue()
        abandoned = threading.Event()

        def on_text(kind, piece):
            if abandoned.is_set():
                return False
            pieces.put((kind, piece))
            return True

        def run():
            # send() runs on this thread, so its last error is read here too.
            try:
                pieces.put((_STREAM_END, self.send(text, on_text, **options)))
            except BaseException as e:  # noqa: BLE001 - handed to the consumer's thread
                pieces.put((_STREAM_END, e))

        worker = threading.Thread(target=run, name="gemlet-stream", daemon=True)
        worker.start()
        try:
            while True:
                kind, item = pieces.get()
                if kind is _STREAM_END:
                    if isinstance(item, BaseException):
                        raise item
                    return item
                yield kind, item
        finally:
            if worker.is_alive():
                abandoned.set()
                self.cancel()
            worker.join()

    def cancel(self):
        """Thread-safe: stops the send running on another thread, in the prompt's evaluation too."""
        with self._life:
            if self._h:
                self._stop_requested = True
                _ffi.lib().gemlet_conversation_cancel(self._h)

    @property
    def last_reply(self):
        """The last answer's text (without thinking)."""
        return _ffi.lib().gemlet_conversation_last_reply(self._handle()).decode("utf-8")

    def set_system(self, system):
        _check(_ffi.lib().gemlet_conversation_set_system(self._handle(), _utf8(system or "", "system")))

    def reset(self):
        """Forgets the messages, keeps the system message."""
        _ffi.lib().gemlet_conversation_reset(self._handle())

    def set_adapters(self, adapters):
        """The next turns run with these LoRA adapters ([Adapter or (Adapter, scale)]; [] for the base);
        a change evaluates the conversation again under them at the next send."""
        handles, scales, n = _adapter_lists(adapters)
        _check(_ffi.lib().gemlet_conversation_set_adapters(self._handle(), handles, scales, n))

    def set_thinking(self, on):
        """Gemma 4: think before answering from the next send on."""
        _check(_ffi.lib().gemlet_conversation_set_thinking(self._handle(), bool(on)))

    @property
    def messages(self):
        """The user and assistant turns so far, as (role, content) pairs."""
        lib = _ffi.lib()
        n = lib.gemlet_conversation_n_messages(self._handle())
        out = []
        role, content = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(n):
            _check(lib.gemlet_conversation_message(self._handle(), i, ctypes.byref(role), ctypes.byref(content)))
            out.append((role.value.decode("utf-8"), content.value.decode("utf-8")))
        return out

    @property
    def n_past(self):
        return _ffi.lib().gemlet_conversation_n_past(self._handle())

    @property
    def n_ctx(self):
        return _ffi.lib().gemlet_conversation_n_ctx(self._handle())

    @property
    def history(self):
        """The user and assistant turns so far as Message objects, tool calls included."""
        lib = _ffi.lib()
        out = []
        for i in range(lib.gemlet_conversation_n_messages(self._handle())):
            m = lib.gemlet_message_default()
            _check(lib.gemlet_conversation_message_at(self._h, i, ctypes.byref(m)))
            out.append(_extra.Message._from_c(m))
        return out

    def set_messages(self, messages):
        """Replaces the turns (Message, dicts or (role, content) pairs; user and assistant only),
        evaluated on the next send."""
        array, n, _keep = _extra.messages_array(messages)
        _check(_ffi.lib().gemlet_conversation_set_messages(self._handle(), array, n))

    @property
    def summary(self):
        """The summary of dropped turns the conversation carries ("" when none)."""
        out = ctypes.c_void_p()
        status = _ffi.lib().gemlet_conversation_summary(self._handle(), ctypes.byref(out))
        text = _extra._take_string(out)
        _check(status)
        return text

    def set_summarize_dropped(self, on):
        _check(_ffi.lib().gemlet_conversation_set_summarize_dropped(self._handle(), bool(on)))

    def memory(self):
        return _memory(self, "gemlet_conversation_memory")

    def memory_plan(self):
        return _memory_plan(self, "gemlet_conversation_memory_plan")

    def save(self, path):
        _check(_ffi.lib().gemlet_conversation_save(self._handle(), _utf8(str(path), "path")))

    def load(self, path):
        _check(_ffi.lib().gemlet_conversation_load(self._handle(), _utf8(str(path), "path")))

    def save_state(self, path):
        """The whole conversation, KV cache included: restore_state resumes it with nothing evaluated."""
        _check(_ffi.lib().gemlet_conversation_save_state(self._handle(), _utf8(str(path), "path")))

    def restore_state(self, path):
        _check(_ffi.lib().gemlet_conversation_restore_state(self._handle(), _utf8(str(path), "path")))


def _memory(obj, fn):
    c = _ffi.lib().gemlet_memory_stats_default()
    _check(getattr(_ffi.lib(), fn)(obj._handle(), ctypes.byref(c)))
    return _extra.MemoryStats(**_extra._fields(_extra.MemoryStats, c))


def _memory_plan(obj, fn):
    c = _ffi.lib().gemlet_memory_plan_default()
    _check(getattr(_ffi.lib(), fn)(obj._handle(), ctypes.byref(c)))
    return _extra.MemoryPlan._from_c(c)


from . import _extra  # noqa: E402 - it builds on the classes above
