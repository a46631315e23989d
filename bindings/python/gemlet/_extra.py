"""What the C API gained for parity with the C++ one, for Python: model info, memory plans and
stats, generation on a session, chat messages in and out, budget fitting, the batch decoder and the
ABI check. Engine, Session and Conversation (_api.py) reach these through thin methods."""

import ctypes
import dataclasses

from . import _ffi
from ._api import GemletError, KvType, Stats, Status, StopReason, _check, _Handle, _utf8


def abi_version():
    """The library's ABI (gemlet_abi_version); the bindings refuse a library of another one at load."""
    return _ffi.lib().gemlet_abi_version()


def available_kernels():
    """The kernel names this build runs on this CPU: "ref", then the SIMD targets, best first."""
    lib = _ffi.lib()
    return [lib.gemlet_available_kernel(i).decode() for i in range(lib.gemlet_n_available_kernels())]


def parse_byte_size(text):
    """"300M", "1.5G", "512K" or bytes to a number of bytes; 0 when it is none of those."""
    return _ffi.lib().gemlet_parse_byte_size(_utf8(text, "text"))


def default_memory_budget():
    """The cgroup's memory limit if any, else half of MemAvailable; 0 when neither is known."""
    return _ffi.lib().gemlet_default_memory_budget()


def _take_string(ptr):
    """A char* the library allocated, as str, given back with gemlet_string_free."""
    lib = _ffi.lib()
    try:
        return ctypes.string_at(ptr.value).decode("utf-8") if ptr.value else ""
    finally:
        lib.gemlet_string_free(ptr)


def _text(value):
    return value.decode("utf-8") if value else ""


def _fields(cls, c):
    return {f.name: getattr(c, f.name) for f in dataclasses.fields(cls)}


@dataclasses.dataclass
class ModelInfo:
    """What a loaded model is (gemlet_model_info)."""
    architecture: str
    name: str
    chat_format: str
    n_vocab: int
    n_ctx_train: int
    n_layers: int
    d_model: int
    n_parameters: int
    file_bytes: int
    tensor_bytes: int
    file_type: str
    decode_weight_bytes: int
    load_seconds: float
    map_seconds: float
    packed_cache: str
    packed_cache_seconds: float

    @classmethod
    def _from_c(cls, c):
        values = _fields(cls, c)
        for key in ("architecture", "name", "chat_format", "file_type", "packed_cache"):
            values[key] = _text(values[key])
        return cls(**values)


@dataclasses.dataclass
class MemoryStats:
    """Memory a session or conversation holds (gemlet_memory_stats)."""
    kv_cache_bytes: int
    kv_cache_resident_bytes: int
    activation_bytes: int
    pressure_actions: int
    pressure_released_bytes: int


@dataclasses.dataclass
class MemoryPlan:
    """What a session costs (gemlet_memory_plan); text is the readable table."""
    file_bytes: int
    weights_resident_bytes: int
    weights_on_demand_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    n_ctx: int
    text: str

    @classmethod
    def _from_c(cls, c):
        values = _fields(cls, c)
        values["text"] = _text(c.text)
        return cls(**values)


@dataclasses.dataclass
class SessionCost:
    """What a session with some options would cost in dirty memory, at worst (gemlet_session_cost)."""
    kv_bytes: int
    activation_bytes: int
    packed_in_memory_bytes: int
    baseline_bytes: int
    total_bytes: int


@dataclasses.dataclass
class ToolCall:
    name: str
    arguments: str  # a JSON object's text
    id: str = ""


@dataclasses.dataclass
class Message:
    """A chat message: role "system", "user", "assistant" or (Gemma 4) "tool"."""
    role: str
    content: str = ""
    tool_calls: list = dataclasses.field(default_factory=list)
    reasoning: str = ""
    tool_call_id: str = ""
    name: str = ""

    @classmethod
    def _from_c(cls, c):
        calls = [ToolCall(_text(c.tool_calls[i].name), _text(c.tool_calls[i].arguments), _text(c.tool_calls[i].id))
                 for i in range(c.n_tool_calls)]
        return cls(_text(c.role), _text(c.content), calls, _text(c.reasoning), _text(c.tool_call_id), _text(c.name))


@dataclasses.dataclass
class TokenLogprob:
    token: int
    logprob: float  # natural log


@dataclasses.dataclass
class TokenLogprobs:
    """One generated token's log-probability and the most likely alternatives (most likely first)."""
    token: int
    logprob: float
    top: list = dataclasses.field(default_factory=list)  # TokenLogprob


@dataclasses.dataclass
class GenerationReply:
    """A session's or a batch request's result: text, generated ids, thought, tool calls, stats;
    with logprobs=True (or top_logprobs=N), a TokenLogprobs per generated token."""
    text: str
    tokens: list
    stats: Stats
    thinking: str = ""
    tool_calls: list = dataclasses.field(default_factory=list)
    logprobs: list = dataclasses.field(default_factory=list)

    @property
    def cancelled(self):
        return self.stats.stop == StopReason.CANCELLED

    def __str__(self):
        return self.text


def _reply_from_c(handle):
    """A GenerationReply from a gemlet_reply, which is freed."""
    lib = _ffi.lib()
    try:
        n = ctypes.c_size_t()
        ptr = lib.gemlet_reply_tokens(handle, ctypes.byref(n))
        tokens = list(ptr[:n.value]) if n.value else []
        calls = []
        for i in range(lib.gemlet_reply_n_tool_calls(handle)):
            c = lib.gemlet_reply_tool_call(handle, i).contents
            calls.append(ToolCall(_text(c.name), _text(c.arguments), _text(c.id)))
        stats = _ffi.Stats(struct_size=ctypes.sizeof(_ffi.Stats))
        _check(lib.gemlet_reply_stats(handle, ctypes.byref(stats)))
        return GenerationReply(_text(lib.gemlet_reply_text(handle)), tokens, Stats._from_c(stats),
                               _text(lib.gemlet_reply_thinking(handle)), calls, _logprobs_from_c(handle))
    finally:
        lib.gemlet_reply_free(handle)


def _logprobs_from_c(handle, count="gemlet_reply_n_logprobs", entry="gemlet_reply_logprob"):
    """TokenLogprobs from a reply, or (with the gemlet_conversation_last_* pair) a conversation's last send."""
    lib = _ffi.lib()
    n_entries, read = getattr(lib, count), getattr(lib, entry)
    out = []
    chosen, top, n_top = _ffi.TokenLogprob(), ctypes.POINTER(_ffi.TokenLogprob)(), ctypes.c_size_t()
    for i in range(n_entries(handle)):
        _check(read(handle, i, ctypes.byref(chosen), ctypes.byref(top), ctypes.byref(n_top)))
        out.append(TokenLogprobs(chosen.token, chosen.logprob,
                                 [TokenLogprob(top[k].token, top[k].logprob) for k in range(n_top.value)]))
    return out


_SAMPLING = ("max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n",
             "presence_penalty", "frequency_penalty", "seed", "max_draft")


def generate_options(stop=None, response_format=None, tool_choice=None, logit_bias=None, logprobs=False,
                     top_logprobs=None, **kw):
    """A gemlet_generate_options from keyword options (None keeps the library's default), and the
    ctypes objects its pointers refer to, which must live as long as it is used. logprobs=True, or
    top_logprobs=N (0 to 20 alternatives, which implies it), fills the reply's logprobs."""
    unknown = set(kw) - set(_SAMPLING)
    if unknown:
        raise TypeError(f"unknown generation option(s): {', '.join(sorted(unknown))}")
    g = _ffi.lib().gemlet_generate_options_default()
    for name, value in kw.items():
        if value is not None:
            setattr(g, name, value)
    keep = []
    if stop:
        stop = [stop] if isinstance(stop, str) else list(stop)
        stops = (ctypes.c_char_p * len(stop))(*[_utf8(s, "stop") for s in stop])
        g.stop = ctypes.cast(stops, ctypes.POINTER(ctypes.c_char_p))
        g.n_stop = len(stop)
        keep.append(stops)
    if logprobs or top_logprobs is not None:
        g.logprobs, g.top_logprobs = True, int(top_logprobs or 0)
    if response_format is not None:
        g.response_format = _utf8(response_format, "response_format")
    if tool_choice is not None:
        g.tool_choice = _utf8(tool_choice, "tool_choice")
    if logit_bias:
        items = list(dict(logit_bias).items())
        tokens = (ctypes.c_int32 * len(items))(*[int(t) for t, _ in items])
        values = (ctypes.c_float * len(items))(*[float(b) for _, b in items])
        g.logit_bias_tokens, g.logit_bias_values, g.n_logit_bias = tokens, values, len(items)
        keep += [tokens, values]
    return g, keep


def _as_message(m):
    if isinstance(m, Message):
        return m
    if isinstance(m, dict):
        calls = [c if isinstance(c, ToolCall) else ToolCall(**c) for c in m.get("tool_calls", [])]
        return Message(**{**m, "tool_calls": calls})
    role, content = m
    return Message(role, content)


def messages_array(messages):
    """A gemlet_message array for messages (Message, dicts of its fields, or (role, content) pairs),
    and the ctypes objects it points to."""
    messages = [_as_message(m) for m in messages]
    array = (_ffi.Message * max(1, len(messages)))()
    keep = [array]
    for i, m in enumerate(messages):
        c = array[i]
        c.struct_size = ctypes.sizeof(_ffi.Message)
        c.role, c.content = _utf8(m.role, "role"), _utf8(m.content or "", "content")
        c.reasoning, c.tool_call_id, c.name = (_utf8(m.reasoning or "", "reasoning"),
                                               _utf8(m.tool_call_id or "", "tool_call_id"), _utf8(m.name or "", "name"))
        if m.tool_calls:
            calls = (_ffi.ToolCall * len(m.tool_calls))()
            for k, t in enumerate(m.tool_calls):
                calls[k].name, calls[k].arguments = _utf8(t.name, "name"), _utf8(t.arguments, "arguments")
                calls[k].id = _utf8(t.id or "", "id")
            c.tool_calls, c.n_tool_calls = calls, len(m.tool_calls)
            keep.append(calls)
    return array, len(messages), keep


def _session_options_c(n_ctx, kv_type):
    o = _ffi.lib().gemlet_session_options_default()
    if n_ctx is not None:
        o.n_ctx = n_ctx
    if kv_type is not None:
        o.kv_type = KvType(kv_type)
    return o


def fit_result(status, fitted, note, floor):
    """(n_ctx, KvType, note, floor_bytes) of a fit, or GemletError; the note is freed either way."""
    text = _take_string(note)
    _check(status)
    return fitted.n_ctx, KvType(fitted.kv_type), text, floor.value


def fit_file_to_budget(path, budget_bytes, n_ctx=None, kv_type=None):
    """The session options that fit budget_bytes for the model at `path`, before loading it:
    (n_ctx, KvType, note, floor_bytes). GemletError (INVALID_ARGUMENT) when even the floor does not fit."""
    wanted = _session_options_c(n_ctx, kv_type)
    fitted = _ffi.lib().gemlet_session_options_default()
    note, floor = ctypes.c_void_p(), ctypes.c_uint64()
    status = _ffi.lib().gemlet_fit_file_to_budget(_utf8(str(path), "path"), None, int(budget_bytes), ctypes.byref(wanted),
                                                  ctypes.byref(fitted), ctypes.byref(note), ctypes.byref(floor))
    return fit_result(status, fitted, note, floor)


def stream_thunk(on_text, failure, stop_requested=lambda: False):
    """A STREAM_FN over on_text(kind, str); an exception is kept in `failure` and stops the answer."""
    from ._api import ChunkKind

    def on_chunk(kind, ptr, length, _user):
        if stop_requested():
            return False
        if on_text is None:
            return True
        try:
            return on_text(ChunkKind(kind), ctypes.string_at(ptr, length).decode("utf-8")) is not False
        except BaseException as e:  # noqa: BLE001 - raised again by the caller, outside C
            failure.append(e)
            return False
    return _ffi.STREAM_FN(on_chunk)


class BatchDecoder(_Handle):
    """Several sessions' requests stepped together, one forward per step (servers). One thread
    submits and steps; cancel(id) may come from any thread."""

    _free = "gemlet_batch_decoder_free"

    def __init__(self, engine, max_requests=None, prefill_chunk=None):
        lib = _ffi.lib()
        self._h = None
        o = lib.gemlet_batch_options_default()
        if max_requests is not None:
            o.max_requests = max_requests
        if prefill_chunk is not None:
            o.prefill_chunk = prefill_chunk
        out = ctypes.c_void_p()
        _check(lib.gemlet_batch_decoder_create(engine._handle(), ctypes.byref(o), ctypes.byref(out)))
        self._h = out
        self._requests = {}  # id: what must live while it runs (session, thunk, options' arrays)

    def submit(self, session, prompt, on_text=None, **options):
        """Starts a request on `session` (which runs nothing else meanwhile); returns its id.
        on_text(kind, text) runs on the thread calling step(); returning False does not stop it
        (use cancel)."""
        g, keep = generate_options(**options)
        ids = (ctypes.c_int32 * len(prompt))(*prompt)
        failure = []
        thunk = stream_thunk(on_text, failure)
        out = ctypes.c_int()
        _check(_ffi.lib().gemlet_batch_decoder_submit(self._handle(), session._handle(), ids, len(prompt),
                                                      ctypes.byref(g), thunk, None, ctypes.byref(out)))
        self._requests[out.value] = (session, thunk, g, keep, failure)
        return out.value

    def step(self):
        """One step of every running request: {id: GenerationReply or GemletError} of those that
        finished in it."""
        lib = _ffi.lib()
        n = ctypes.c_size_t()
        _check(lib.gemlet_batch_decoder_step(self._handle(), ctypes.byref(n)))
        done = {}
        for i in range(n.value):
            rid, reply = ctypes.c_int(), ctypes.c_void_p()
            status = lib.gemlet_batch_decoder_finished(self._h, i, ctypes.byref(rid), ctypes.byref(reply))
            if status == Status.OK:
                done[rid.value] = _reply_from_c(reply)
            else:
                done[rid.value] = GemletError(status, lib.gemlet_last_error().decode("utf-8", "replace"))
            self._requests.pop(rid.value, None)
        return done

    def cancel(self, request_id):
        """Thread-safe: the request ends at the next step with StopReason.CANCELLED."""
        if self._h:
            _ffi.lib().gemlet_batch_decoder_cancel(self._h, request_id)

    @property
    def running(self):
        return _ffi.lib().gemlet_batch_decoder_running(self._handle())

    @property
    def last_step_tokens(self):
        return _ffi.lib().gemlet_batch_decoder_last_step_tokens(self._handle())


def session_extra_options(owner, rollback_tokens=None, draft_model=None, progress=None):
    """The gemlet_session_extra_options for a Session or Conversation being created (None when every
    option keeps its default, for gemlet_*_create), and the progress thunk, which the owner keeps:
    the library calls it during the owner's calls. progress(done, total) returning False, or
    raising, cancels the call in progress; the exception is raised again by that call."""
    if rollback_tokens is None and draft_model is None and progress is None:
        return None, None
    o = _ffi.lib().gemlet_session_extra_options_default()
    if rollback_tokens is not None:
        o.rollback_tokens = int(rollback_tokens)
    if draft_model is not None:
        o.draft_model = draft_model._handle().value  # the library keeps its own reference to the draft
    thunk = None
    if progress is not None:
        def on_progress(done, total, _user):
            try:
                go = progress(done, total) is not False
            except BaseException as e:  # noqa: BLE001 - an exception must not unwind into C
                owner._progress_failure = e
                go = False
            if not go:
                owner.cancel()  # thread-safe, and allowed from the evaluating thread
        thunk = _ffi.PROMPT_PROGRESS_FN(on_progress)
        o.progress = thunk
    return o, thunk
