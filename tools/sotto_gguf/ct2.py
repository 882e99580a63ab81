"""Reader for CTranslate2 / faster-whisper model directories.

model.bin layout (CTranslate2 ModelSpec._serialize, binary version 6):
  u32 version, str spec_name, u32 spec_revision, u32 n_vars,
  n_vars x (str name, u8 rank, rank x u32 dims, u8 dtype, u32 nbytes, data),
  u32 n_aliases, n_aliases x (str alias, str target)
where str = u16 length including the NUL, the bytes, NUL. Little-endian,
no padding. CT2 fuses q/k/v (self-attention) and k/v (cross-attention) and
fills the missing key bias with zeros; we split them back into openai's
tensors and check that the key bias really is zero.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .common import ConvertError, Hparams, WhisperModel, progress
from .tokenizer import vocab_strings_to_bytes

# CTranslate2 DataType enum.
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: None}  # 5 = bfloat16
SUPPORTED_BINARY_VERSIONS = (5, 6)


class _Reader:
    """Bounds-checked little-endian cursor: a truncated file becomes a
    ConvertError naming what was being read, never a struct.error."""

    def __init__(self, buf: memoryview, what: str):
        self.buf, self.pos, self.what = buf, 0, what

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConvertError(f"{self.what} is truncated (while reading {field} at byte {self.pos})")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def u8(self, f: str) -> int:
        return self.take(1, f)[0]

    def u16(self, f: str) -> int:
        return struct.unpack("<H", self.take(2, f))[0]

    def u32(self, f: str) -> int:
        return struct.unpack("<I", self.take(4, f))[0]

    def string(self, f: str) -> str:
        n = self.u16(f)
        if n == 0:
            raise ConvertError(f"{self.what}: zero-length string in {f} at byte {self.pos}")
        raw = bytes(self.take(n, f))
        if raw[-1] != 0:
            raise ConvertError(f"{self.what}: string in {f} at byte {self.pos} is not NUL-terminated")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise ConvertError(f"{self.what}: string in {f} is not UTF-8") from None


def read_model_bin(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """Parse model.bin into {name: array}, resolving aliases. Arrays are
    views of the file's bytes (copied by the caller when reshaped)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConvertError(f"cannot read {path}: {e.strerror}") from None
    r = _Reader(memoryview(data), str(path))
    version = r.u32("binary version")
    if version not in SUPPORTED_BINARY_VERSIONS:
        raise ConvertError(f"{path}: not a CTranslate2 model.bin of a supported version (binary version {version}, expected 6)")
    spec = r.string("spec name")
    revision = r.u32("spec revision")
    if spec != "WhisperSpec":
        raise ConvertError(f"{path}: spec is {spec!r}, expected 'WhisperSpec'")
    if revision != 3:
        raise ConvertError(f"{path}: WhisperSpec revision {revision}, expected 3")
    n_vars = r.u32("variable count")
    variables: dict[str, np.ndarray] = {}
    for _ in range(n_vars):
        name = r.string("variable name")
        rank = r.u8(f"rank of {name}")
        dims = tuple(r.u32(f"dims of {name}") for _ in range(rank))
        dtype_id = r.u8(f"dtype of {name}")
        nbytes = r.u32(f"size of {name}")
        if dtype_id not in _DTYPES:
            raise ConvertError(f"{path}: variable {name} has unknown dtype id {dtype_id}")
        dt = _DTYPES[dtype_id]
        if dt is None:
            raise ConvertError(f"{path}: variable {name} is bfloat16, which this converter does not read; convert with --quantization float16")
        raw = r.take(nbytes, f"data of {name}")
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if count * np.dtype(dt).itemsize != nbytes:
            raise ConvertError(f"{path}: variable {name} has {nbytes} bytes for shape {dims} of {np.dtype(dt).name}")
        variables[name] = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<")).reshape(dims)
    n_alias = r.u32("alias count")
    for _ in range(n_alias):
        alias = r.string("alias name")
        target = r.string("alias target")
        if target not in variables:
            raise ConvertError(f"{path}: alias {alias} points to missing variable {target}")
        variables[alias] = variables[target]
    if r.pos != len(data):
        raise ConvertError(f"{path}: {len(data) - r.pos} unexpected trailing bytes")
    if any(k.endswith("_scale") for k in variables):
        raise ConvertError(f"{path}: quantised (int8/int16) CTranslate2 models are not supported; use a float16 or float32 conversion")
    return spec, variables


def _get(v: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name not in v:
        raise ConvertError(f"model.bin has no variable {name}")
    return v[name]


def _split_rows(a: np.ndarray, n: int, what: str) -> list[np.ndarray]:
    if a.shape[0] % n != 0:
        raise ConvertError(f"{what}: {a.shape[0]} rows cannot be split in {n}")
    return np.split(a, n, axis=0)


def _zero_key_bias(b: np.ndarray, what: str) -> None:
    """CT2 fills the key bias Whisper lacks with zeros; anything else means
    this is not a Whisper checkpoint and dropping it would change results."""
    if np.any(b != 0):
        raise ConvertError(f"{what}: fused key bias is not zero (max |b| = {float(np.abs(b).max())}); not a Whisper model")


def _count_layers(v: dict[str, np.ndarray], prefix: str) -> int:
    n = 0
    while any(k.startswith(f"{prefix}/layer_{n}/") for k in v):
        n += 1
    return n


def _attention(v: dict, src: str, dst: str, cross: bool, out: dict) -> None:
    """Split CT2's fused projections of one attention block into openai's
    query/key/value/out tensors."""
    if cross:
        out[f"{dst}.query.weight"] = _get(v, f"{src}/linear_0/weight")
        out[f"{dst}.query.bias"] = _get(v, f"{src}/linear_0/bias")
        wk, wv = _split_rows(_get(v, f"{src}/linear_1/weight"), 2, f"{src}/linear_1/weight")
        bk, bv = _split_rows(_get(v, f"{src}/linear_1/bias"), 2, f"{src}/linear_1/bias")
        o = f"{src}/linear_2"
    else:
        wq, wk, wv = _split_rows(_get(v, f"{src}/linear_0/weight"), 3, f"{src}/linear_0/weight")
        bq, bk, bv = _split_rows(_get(v, f"{src}/linear_0/bias"), 3, f"{src}/linear_0/bias")
        out[f"{dst}.query.weight"], out[f"{dst}.query.bias"] = wq, bq
        o = f"{src}/linear_1"
    _zero_key_bias(bk, src)
    out[f"{dst}.key.weight"] = wk
    out[f"{dst}.value.weight"], out[f"{dst}.value.bias"] = wv, bv
    out[f"{dst}.out.weight"] = _get(v, f"{o}/weight")
    out[f"{dst}.out.bias"] = _get(v, f"{o}/bias")


def _ln(v: dict, src: str, dst: str, out: dict) -> None:
    out[f"{dst}.weight"] = _get(v, f"{src}/gamma")
    out[f"{dst}.bias"] = _get(v, f"{src}/beta")


def _ffn(v: dict, src: str, dst: str, out: dict) -> None:
    _ln(v, f"{src}/layer_norm", f"{dst}mlp_ln", out)
    for i, j in ((0, 0), (1, 2)):
        out[f"{dst}mlp.{j}.weight"] = _get(v, f"{src}/linear_{i}/weight")
        out[f"{dst}mlp.{j}.bias"] = _get(v, f"{src}/linear_{i}/bias")


def ct2_to_openai(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """CT2 variable names -> openai state dict (same arrays, split)."""
    out: dict[str, np.ndarray] = {}
    for c in (1, 2):
        out[f"encoder.conv{c}.weight"] = _get(v, f"encoder/conv{c}/weight")
        out[f"encoder.conv{c}.bias"] = _get(v, f"encoder/conv{c}/bias")
    out["encoder.positional_embedding"] = _get(v, "encoder/position_encodings/encodings")
    for n in range(_count_layers(v, "encoder")):
        s, d = f"encoder/layer_{n}", f"encoder.blocks.{n}."
        _ln(v, f"{s}/self_attention/layer_norm", d + "attn_ln", out)
        _attention(v, f"{s}/self_attention", d + "attn", False, out)
        _ffn(v, f"{s}/ffn", d, out)
    _ln(v, "encoder/layer_norm", "encoder.ln_post", out)
    out["decoder.token_embedding.weight"] = _get(v, "decoder/embeddings/weight")
    out["decoder.positional_embedding"] = _get(v, "decoder/position_encodings/encodings")
    for n in range(_count_layers(v, "decoder")):
        s, d = f"decoder/layer_{n}", f"decoder.blocks.{n}."
        _ln(v, f"{s}/self_attention/layer_norm", d + "attn_ln", out)
        _attention(v, f"{s}/self_attention", d + "attn", False, out)
        _ln(v, f"{s}/attention/layer_norm", d + "cross_attn_ln", out)
        _attention(v, f"{s}/attention", d + "cross_attn", True, out)
        _ffn(v, f"{s}/ffn", d, out)
    _ln(v, "decoder/layer_norm", "decoder.ln", out)
    proj = v.get("decoder/projection/weight")
    if proj is not None and not np.array_equal(proj, out["decoder.token_embedding.weight"]):
        raise ConvertError("decoder/projection/weight differs from the token embedding; Whisper ties them")
    if "decoder/projection/bias" in v:
        raise ConvertError("model.bin has an output projection bias; Whisper has none")
    return out


def _scalar(v: dict, name: str) -> int:
    return int(_get(v, name).reshape(()))


def read_vocabulary(d: Path) -> list[str]:
    """CT2 writes vocabulary.json (a JSON list) since mid-2023 and
    vocabulary.txt (one token per line) before; accept either."""
    j, t = d / "vocabulary.json", d / "vocabulary.txt"
    if j.is_file():
        try:
            vocab = json.loads(j.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConvertError(f"{j}: not valid JSON: {e}") from None
        if not isinstance(vocab, list) or not all(isinstance(s, str) for s in vocab):
            raise ConvertError(f"{j}: expected a JSON list of strings")
        return vocab
    if t.is_file():
        lines = t.read_bytes().decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if lines and all(s.endswith("\r") for s in lines):
            lines = [s[:-1] for s in lines]
        return lines
    raise ConvertError(f"{d}: no vocabulary.json or vocabulary.txt")


def read_config(d: Path) -> dict:
    p = d / "config.json"
    if not p.is_file():
        return {}
    try:
        c = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ConvertError(f"{p}: not valid JSON: {e}") from None
    if not isinstance(c, dict):
        raise ConvertError(f"{p}: expected a JSON object")
    return c


def load(d: Path) -> WhisperModel:
    """Read a faster-whisper / CTranslate2 Whisper directory."""
    mb = d / "model.bin"
    if not mb.is_file():
        raise ConvertError(f"{d}: no model.bin (not a CTranslate2 model directory)")
    progress(f"reading {mb}")
    _, v = read_model_bin(mb)
    act = v.get("decoder/activation")
    if act is not None and int(act.reshape(())) != 3:
        raise ConvertError(f"{mb}: decoder activation is {int(act.reshape(()))}, Whisper uses GELU (3)")
    tensors = ct2_to_openai(v)
    emb = tensors["decoder.token_embedding.weight"]
    conv1 = tensors["encoder.conv1.weight"]
    hp = Hparams(
        n_mels=conv1.shape[1],
        n_audio_ctx=tensors["encoder.positional_embedding"].shape[0],
        n_audio_state=conv1.shape[0],
        n_audio_head=_scalar(v, "encoder/num_heads"),
        n_audio_layer=_count_layers(v, "encoder"),
        n_text_ctx=tensors["decoder.positional_embedding"].shape[0],
        n_text_state=emb.shape[1],
        n_text_head=_scalar(v, "decoder/num_heads"),
        n_text_layer=_count_layers(v, "decoder"),
        n_vocab=emb.shape[0],
    )
    vocab = read_vocabulary(d)
    if len(vocab) != hp.n_vocab:
        raise ConvertError(f"vocabulary has {len(vocab)} tokens but the embedding has {hp.n_vocab} rows")
    if "<|endoftext|>" not in vocab:
        raise ConvertError("vocabulary has no <|endoftext|>")
    tokens = vocab_strings_to_bytes(vocab, vocab.index("<|endoftext|>"))
    cfg = read_config(d)
    heads = cfg.get("alignment_heads")
    return WhisperModel(
        hparams=hp,
        tensors=tensors,
        tokens=tokens,
        source="ct2",
        alignment_heads=[(int(a), int(b)) for a, b in heads] if heads else None,
        suppress_ids=cfg.get("suppress_ids"),
        suppress_begin=cfg.get("suppress_ids_begin"),
    )
