"""Reader and writer for whisper.cpp's ggml-*.bin files.

Layout (whisper.cpp whisper_model_load; all little-endian int32 unless said):
  magic 0x67676d6c
  hparams: n_vocab n_audio_ctx n_audio_state n_audio_head n_audio_layer
           n_text_ctx n_text_state n_text_head n_text_layer n_mels ftype
           (ftype % 1000: 0 = f32, 1 = f16, others quantised)
  mel filters: n_mel, n_fft, n_mel*n_fft float32
  vocab: n_words, then n_words x (u32 len, bytes); only the BPE tokens are
         stored: whisper.cpp derives the special ids from hparams.n_vocab
  tensors until EOF: n_dims, name_len, ttype (0 f32 / 1 f16), ne[n_dims]
         (innermost first), name, raw data; openai names; the conv biases
         are stored as [d][1].
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .common import ConvertError, Hparams, WhisperModel, expected_shape, openai_tensor_names, progress
from .tokenizer import is_multilingual, special_token_strings

MAGIC = 0x67676D6C
QNT_VERSION_FACTOR = 1000
HPARAM_ORDER = (
    "n_vocab",
    "n_audio_ctx",
    "n_audio_state",
    "n_audio_head",
    "n_audio_layer",
    "n_text_ctx",
    "n_text_state",
    "n_text_head",
    "n_text_layer",
    "n_mels",
)
_TTYPES = {0: np.float32, 1: np.float16}
N_FFT_BINS = 201
# whisper.cpp keeps these in f32 even in an f16 file (convert-pt-to-ggml.py).
F32_MATRICES = ("encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding", "decoder.positional_embedding")


class _Cursor:
    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = memoryview(data), 0, what

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ConvertError(f"{self.what} is truncated (while reading {field} at byte {self.pos})")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def i32(self, field: str) -> int:
        return struct.unpack("<i", self.take(4, field))[0]

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def load(path: Path) -> WhisperModel:
    """Read a whisper.cpp f16/f32 model file."""
    progress(f"reading {path}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConvertError(f"cannot read {path}: {e.strerror}") from None
    c = _Cursor(data, str(path))
    if c.i32("magic") & 0xFFFFFFFF != MAGIC:
        raise ConvertError(f"{path}: not a whisper.cpp ggml file (bad magic)")
    vals = {k: c.i32(f"hparam {k}") for k in HPARAM_ORDER}
    ftype = c.i32("ftype") % QNT_VERSION_FACTOR
    if ftype not in (0, 1):
        raise ConvertError(f"{path}: quantised ggml files (ftype {ftype}) are not supported; use an f16 or f32 file")
    hp = Hparams(**vals)
    hp.validate()
    filters = _read_filters(c, hp)
    words = _read_vocab(c)
    tokens = _tokens(words, hp.n_vocab)
    tensors = _read_tensors(c, hp)
    return WhisperModel(hparams=hp, tensors=tensors, tokens=tokens, source="ggml", mel_filters=filters)


def _read_filters(c: _Cursor, hp: Hparams) -> np.ndarray:
    n_mel, n_fft = c.i32("mel filter rows"), c.i32("mel filter columns")
    if n_mel != hp.n_mels or n_fft != N_FFT_BINS:
        raise ConvertError(f"{c.what}: mel filters are {n_mel}x{n_fft}, expected {hp.n_mels}x{N_FFT_BINS}")
    return np.frombuffer(c.take(4 * n_mel * n_fft, "mel filters"), dtype="<f4").reshape(n_mel, n_fft).copy()


def _read_vocab(c: _Cursor) -> list[bytes]:
    n = c.i32("vocab size")
    if n < 0 or n > 1_000_000:
        raise ConvertError(f"{c.what}: implausible vocab size {n}")
    words = []
    for i in range(n):
        ln = struct.unpack("<I", c.take(4, f"length of token {i}"))[0]
        words.append(bytes(c.take(ln, f"token {i}")))
    return words


def _tokens(words: list[bytes], n_vocab: int) -> list[bytes]:
    """BPE tokens from the file, specials from openai's fixed layout (the
    file's own names for them, if any, are whisper.cpp's and not openai's)."""
    specials = special_token_strings(n_vocab)
    n_bpe = specials[0][0]
    if len(words) < n_bpe:
        raise ConvertError(f"vocab has {len(words)} tokens, expected at least {n_bpe} BPE tokens for n_vocab {n_vocab}")
    return words[:n_bpe] + [s for _, s in specials]


def _read_tensors(c: _Cursor, hp: Hparams) -> dict[str, np.ndarray]:
    want = set(openai_tensor_names(hp))
    out: dict[str, np.ndarray] = {}
    while not c.at_end():
        n_dims, name_len, ttype = c.i32("tensor header"), c.i32("tensor header"), c.i32("tensor header")
        if not 0 <= n_dims <= 4 or not 0 < name_len < 1024:
            raise ConvertError(f"{c.what}: corrupt tensor header at byte {c.pos - 12}")
        ne = [c.i32("tensor dims") for _ in range(n_dims)]
        name = bytes(c.take(name_len, "tensor name")).decode("utf-8", "replace")
        if ttype not in _TTYPES:
            raise ConvertError(f"{c.what}: tensor {name} has type {ttype}; only f32 and f16 are supported")
        if any(d <= 0 for d in ne):
            raise ConvertError(f"{c.what}: tensor {name} has a bad shape {ne}")
        dt = np.dtype(_TTYPES[ttype]).newbyteorder("<")
        count = int(np.prod(ne, dtype=np.int64))
        a = np.frombuffer(c.take(count * dt.itemsize, f"data of {name}"), dtype=dt).reshape(tuple(reversed(ne)))
        if name not in want:
            raise ConvertError(f"{c.what}: unexpected tensor {name}")
        shape = expected_shape(name, hp)
        if a.size != int(np.prod(shape)):
            raise ConvertError(f"{c.what}: tensor {name} has shape {list(reversed(ne))}, expected {list(shape)}")
        out[name] = a.reshape(shape)  # drops the conv biases' [d][1]
    return out


def write(path: Path, hp: Hparams, filters: np.ndarray, tokens: list[bytes], n_bpe: int, tensors: dict[str, np.ndarray]) -> None:
    """Write an f16 whisper.cpp model the way models/convert-pt-to-ggml.py
    does: matrices f16 (except the conv biases and positional tables, f32),
    vectors f32, vocab = the BPE tokens only."""
    if is_multilingual(hp.n_vocab) != (n_bpe == 50257):
        raise ConvertError(f"n_bpe {n_bpe} does not match n_vocab {hp.n_vocab}: whisper.cpp derives special ids from n_vocab")
    with path.open("wb") as f:
        f.write(struct.pack("<I", MAGIC))
        f.write(struct.pack("<11i", *[getattr(hp, k) for k in HPARAM_ORDER], 1))
        f.write(struct.pack("<ii", *filters.shape))
        f.write(np.ascontiguousarray(filters, dtype="<f4").tobytes())
        f.write(struct.pack("<i", n_bpe))
        for t in tokens[:n_bpe]:
            f.write(struct.pack("<I", len(t)))
            f.write(t)
        for name in openai_tensor_names(hp):
            a = tensors[name]
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                a = a.reshape(a.shape[0], 1)
            f16 = a.ndim >= 2 and name not in F32_MATRICES
            a = np.ascontiguousarray(a, dtype="<f2" if f16 else "<f4")
            bname = name.encode()
            f.write(struct.pack("<iii", a.ndim, len(bname), 1 if f16 else 0))
            f.write(struct.pack(f"<{a.ndim}i", *reversed(a.shape)))
            f.write(bname)
            f.write(a.tobytes())
