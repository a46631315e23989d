"""A tokenizer without a model (gemlet_tokenizer_*): from a GGUF's tokenizer metadata, a Hugging Face
tokenizer.json or a SentencePiece tokenizer.model, for counting and splitting text before (or
without) loading weights."""

import ctypes
import os

from . import _ffi
from ._api import _check, _encode, _Handle, _utf8
from ._extra import _take_string


class Tokenizer(_Handle):
    """Thread-safe: encode/decode from any number of threads at once."""

    _free = "gemlet_tokenizer_free"

    def __init__(self, path):
        self._h = None
        out = ctypes.c_void_p()
        _check(_ffi.lib().gemlet_tokenizer_open(_utf8(os.fspath(path), "path"), ctypes.byref(out)))
        self._h = out

    @classmethod
    def open(cls, path):
        return cls(path)

    @property
    def vocab_size(self):
        return _ffi.lib().gemlet_tokenizer_vocab_size(self._handle())

    def encode(self, text, add_special=False, parse_special=False):
        """Text to ids; add_special adds BOS (and EOS) as the model's tokenizer does, parse_special
        reads "<start_of_turn>" and the like as their control tokens."""
        return _encode(_ffi.lib().gemlet_tokenizer_encode, self._handle(), text, add_special, parse_special)

    def decode(self, tokens):
        ids = (ctypes.c_int32 * max(1, len(tokens)))(*tokens)
        out = ctypes.c_void_p()
        status = _ffi.lib().gemlet_tokenizer_decode(self._handle(), ids, len(tokens), ctypes.byref(out))
        text = _take_string(out)
        _check(status)
        return text

    def piece(self, token):
        """The vocabulary's piece ("▁the", "<0x0A>"); "" out of range."""
        out = ctypes.c_void_p()
        status = _ffi.lib().gemlet_tokenizer_piece(self._handle(), int(token), ctypes.byref(out))
        text = _take_string(out)
        _check(status)
        return text
