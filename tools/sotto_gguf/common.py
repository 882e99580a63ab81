"""Shared pieces of the converters: the error type, the in-memory model every
reader produces (openai names and layouts), and the GGUF writer that maps it
onto docs/model-format.md.

Every reader converts its source to the *openai* state-dict naming
(`encoder.blocks.0.attn.query.weight`, ...) with openai's array layouts, so
there is exactly one mapping onto sotto's tensor names (here) and one back
(tools/export_ggml.py uses the same table).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
ALIGNMENT = 64


class ConvertError(Exception):
    """An expected failure caused by the input (missing file, wrong format,
    truncated data, inconsistent tokenizer). The CLI prints it as one line on
    stderr and exits non-zero, without a traceback."""


def progress(msg: str) -> None:
    """Progress goes to stderr so stdout stays clean for scripts."""
    print(msg, file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in pieces (sources can be large)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def atomic_output(out: Path) -> Iterator[Path]:
    """Yield a temporary path in out's directory to write the whole file to;
    when the block ends it is synced and renamed over `out`, and the rename
    synced. Whoever has the old file (a running sottod, a reader) keeps it
    whole, a new reader gets the whole new one, and a failed or interrupted
    write leaves `out` as it was (the temporary file is removed). An OSError
    in the block or the rename becomes a ConvertError naming `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        _sync_file(tmp)
        os.replace(tmp, out)
        _sync_dir(out.parent)
    except OSError as e:
        raise ConvertError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    """The rename itself on disk (best effort: not every filesystem lets a
    directory be fsynced)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


HPARAM_KEYS = (
    "n_mels",
    "n_audio_ctx",
    "n_audio_state",
    "n_audio_head",
    "n_audio_layer",
    "n_text_ctx",
    "n_text_state",
    "n_text_head",
    "n_text_layer",
    "n_vocab",
)


@dataclass
class Hparams:
    """openai's ModelDimensions."""

    n_mels: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_vocab: int

    def validate(self) -> None:
        """Reject dimensions the engine cannot run, before any tensor work."""
        if self.n_mels not in (80, 128):
            raise ConvertError(f"n_mels is {self.n_mels}, expected 80 or 128")
        if self.n_audio_ctx != 1500:
            raise ConvertError(f"n_audio_ctx is {self.n_audio_ctx}, expected 1500")
        for side in ("audio", "text"):
            d = getattr(self, f"n_{side}_state")
            h = getattr(self, f"n_{side}_head")
            if h <= 0 or d % h != 0:
                raise ConvertError(f"n_{side}_state {d} is not a multiple of n_{side}_head {h}")
            if getattr(self, f"n_{side}_layer") <= 0:
                raise ConvertError(f"n_{side}_layer must be positive")
        if self.n_text_ctx <= 0 or self.n_vocab <= 0:
            raise ConvertError("n_text_ctx and n_vocab must be positive")


@dataclass
class WhisperModel:
    """What every reader returns.

    tensors: openai names -> arrays in openai layout (linear [out][in],
    conv [out][in][3], positional tables [ctx][d]); matrices stay float16 as
    they arrive, vectors are converted to float32 by the writer.
    tokens: n_vocab byte strings in id order (BPE tokens as raw bytes,
    specials and timestamps as their text).
    suppress_ids / suppress_begin: what the source's own config says, used
    only to cross-check our computation (None when the source has none).
    """

    hparams: Hparams
    tensors: dict[str, np.ndarray]
    tokens: list[bytes]
    source: str
    alignment_heads: list[tuple[int, int]] | None = None
    suppress_ids: list[int] | None = None
    suppress_begin: list[int] | None = None
    mel_filters: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)


def openai_tensor_names(hp: Hparams) -> list[str]:
    """Every tensor an openai Whisper checkpoint has (without the tied
    output projection), in a stable order."""
    names = [
        "encoder.conv1.weight",
        "encoder.conv1.bias",
        "encoder.conv2.weight",
        "encoder.conv2.bias",
        "encoder.positional_embedding",
    ]
    for n in range(hp.n_audio_layer):
        p = f"encoder.blocks.{n}."
        names += [p + s for s in _block_suffixes(cross=False)]
    names += ["encoder.ln_post.weight", "encoder.ln_post.bias"]
    names += ["decoder.token_embedding.weight", "decoder.positional_embedding"]
    for n in range(hp.n_text_layer):
        p = f"decoder.blocks.{n}."
        names += [p + s for s in _block_suffixes(cross=True)]
    names += ["decoder.ln.weight", "decoder.ln.bias"]
    return names


def _block_suffixes(cross: bool) -> list[str]:
    attn = ["attn_ln.weight", "attn_ln.bias"]
    attn += _attn_suffixes("attn")
    if cross:
        attn += ["cross_attn_ln.weight", "cross_attn_ln.bias"]
        attn += _attn_suffixes("cross_attn")
    attn += [
        "mlp_ln.weight",
        "mlp_ln.bias",
        "mlp.0.weight",
        "mlp.0.bias",
        "mlp.2.weight",
        "mlp.2.bias",
    ]
    return attn


def _attn_suffixes(a: str) -> list[str]:
    return [
        f"{a}.query.weight",
        f"{a}.query.bias",
        f"{a}.key.weight",
        f"{a}.value.weight",
        f"{a}.value.bias",
        f"{a}.out.weight",
        f"{a}.out.bias",
    ]


_BLOCK_MAP = {
    "attn_ln.weight": "attn_ln.w",
    "attn_ln.bias": "attn_ln.b",
    "cross_attn_ln.weight": "cross_ln.w",
    "cross_attn_ln.bias": "cross_ln.b",
    "mlp_ln.weight": "mlp_ln.w",
    "mlp_ln.bias": "mlp_ln.b",
    "mlp.0.weight": "mlp.fc1.w",
    "mlp.0.bias": "mlp.fc1.b",
    "mlp.2.weight": "mlp.fc2.w",
    "mlp.2.bias": "mlp.fc2.b",
}
for _a, _s in (("attn", "attn"), ("cross_attn", "cross")):
    for _o, _t in (("query", "q"), ("key", "k"), ("value", "v"), ("out", "o")):
        _BLOCK_MAP[f"{_a}.{_o}.weight"] = f"{_s}.{_t}.w"
        _BLOCK_MAP[f"{_a}.{_o}.bias"] = f"{_s}.{_t}.b"

_TOP_MAP = {
    "encoder.conv1.weight": "enc.conv1.w",
    "encoder.conv1.bias": "enc.conv1.b",
    "encoder.conv2.weight": "enc.conv2.w",
    "encoder.conv2.bias": "enc.conv2.b",
    "encoder.positional_embedding": "enc.pos",
    "encoder.ln_post.weight": "enc.ln_post.w",
    "encoder.ln_post.bias": "enc.ln_post.b",
    "decoder.token_embedding.weight": "dec.tok_emb",
    "decoder.positional_embedding": "dec.pos",
    "decoder.ln.weight": "dec.ln.w",
    "decoder.ln.bias": "dec.ln.b",
}


def sotto_name(openai_name: str) -> str:
    """openai tensor name -> sotto GGUF tensor name."""
    if openai_name in _TOP_MAP:
        return _TOP_MAP[openai_name]
    side, blocks, n, rest = openai_name.split(".", 3)
    if blocks != "blocks" or rest not in _BLOCK_MAP:
        raise KeyError(openai_name)
    return f"{'enc' if side == 'encoder' else 'dec'}.{n}.{_BLOCK_MAP[rest]}"


def openai_name(sotto: str) -> str:
    """sotto GGUF tensor name -> openai tensor name (inverse of sotto_name)."""
    for k, v in _TOP_MAP.items():
        if v == sotto:
            return k
    side, n, rest = sotto.split(".", 2)
    for k, v in _BLOCK_MAP.items():
        if v == rest:
            return f"{'encoder' if side == 'enc' else 'decoder'}.blocks.{n}.{k}"
    raise KeyError(sotto)


def expected_shape(name: str, hp: Hparams) -> tuple[int, ...]:
    """openai layout shape of a tensor, from the hyper-parameters alone."""
    if name == "encoder.conv1.weight":
        return (hp.n_audio_state, hp.n_mels, 3)
    if name == "encoder.conv2.weight":
        return (hp.n_audio_state, hp.n_audio_state, 3)
    if name == "encoder.positional_embedding":
        return (hp.n_audio_ctx, hp.n_audio_state)
    if name == "decoder.positional_embedding":
        return (hp.n_text_ctx, hp.n_text_state)
    if name == "decoder.token_embedding.weight":
        return (hp.n_vocab, hp.n_text_state)
    d = hp.n_audio_state if name.startswith("encoder") else hp.n_text_state
    if name.endswith("mlp.0.weight"):
        return (4 * d, d)
    if name.endswith("mlp.0.bias"):
        return (4 * d,)
    if name.endswith("mlp.2.weight"):
        return (d, 4 * d)
    if name.endswith(".weight") and ("attn." in name):
        return (d, d)
    return (d,)


def check_tensors(model: WhisperModel) -> None:
    """Every expected tensor is present, with the expected shape, and nothing
    else: a reader bug or a corrupt file must not produce a half model."""
    hp = model.hparams
    want = openai_tensor_names(hp)
    missing = [n for n in want if n not in model.tensors]
    if missing:
        raise ConvertError(f"missing tensors: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else ""))
    extra = sorted(set(model.tensors) - set(want))
    if extra:
        raise ConvertError(f"unexpected tensors: {', '.join(extra[:5])}")
    for n in want:
        shape = tuple(model.tensors[n].shape)
        if shape != expected_shape(n, hp):
            raise ConvertError(f"tensor {n} has shape {shape}, expected {expected_shape(n, hp)}")
        if not np.issubdtype(model.tensors[n].dtype, np.floating):
            raise ConvertError(f"tensor {n} has dtype {model.tensors[n].dtype}, expected a float type")


def to_sotto_tensors(model: WhisperModel, mel_filters: np.ndarray) -> dict[str, np.ndarray]:
    """openai layout -> sotto layout and types, in GGUF write order.

    Matrices (rank >= 2 weights) become F16 ([out][in]; convs tap-major
    [3][out][in]); vectors, positional tables and mel filters become F32;
    enc.pos is transposed to channels-first [d][1500].
    """
    out: dict[str, np.ndarray] = {"mel.filters": np.ascontiguousarray(mel_filters, dtype=np.float32)}
    for name in openai_tensor_names(model.hparams):
        a = model.tensors[name]
        sname = sotto_name(name)
        if name in ("encoder.conv1.weight", "encoder.conv2.weight"):
            a = np.transpose(a, (2, 0, 1)).astype(np.float16)
        elif name == "encoder.positional_embedding":
            a = a.T.astype(np.float32)
        elif name == "decoder.positional_embedding" or a.ndim == 1:
            a = a.astype(np.float32)
        else:
            a = a.astype(np.float16)
        out[sname] = np.ascontiguousarray(a)
    return out


def from_sotto_tensors(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """sotto layout -> openai layout (inverse of to_sotto_tensors); used by
    the ggml exporter. Types are kept (F16 matrices, F32 vectors)."""
    out = {}
    for sname, a in tensors.items():
        if sname == "mel.filters":
            continue
        name = openai_name(sname)
        if name in ("encoder.conv1.weight", "encoder.conv2.weight"):
            a = np.transpose(a, (1, 2, 0))
        elif name == "encoder.positional_embedding":
            a = a.T
        out[name] = np.ascontiguousarray(a)
    return out


class _Writer:
    """Thin wrapper over gguf.GGUFWriter. gguf 0.19.0 refuses to write an
    empty array (and add_array silently drops it), but the contract requires
    `whisper.languages` to be present and empty for .en models, so empty
    arrays are packed here by hand."""

    def __init__(self, path: Path):
        import gguf

        self.gguf = gguf

        class W(gguf.GGUFWriter):
            def _pack_val(self, val, vtype, add_vtype, sub_type=None):  # noqa: ANN001
                if vtype == gguf.GGUFValueType.ARRAY and len(val) == 0 and sub_type is not None:
                    b = bytearray()
                    if add_vtype:
                        b += self._pack("I", vtype)
                    b += self._pack("I", sub_type)
                    b += self._pack("Q", 0)
                    return bytes(b)
                return super()._pack_val(val, vtype, add_vtype, sub_type)

        self.w = W(str(path), "whisper")
        self.w.add_custom_alignment(ALIGNMENT)

    def u32(self, key: str, v: int) -> None:
        self.w.add_uint32(key, int(v))

    def string(self, key: str, v: str) -> None:
        self.w.add_key_value(key, v, self.gguf.GGUFValueType.STRING)

    def array(self, key: str, vals: list, sub: str) -> None:
        t = self.gguf.GGUFValueType
        self.w.add_key_value(key, list(vals), t.ARRAY, sub_type={"str": t.STRING, "i32": t.INT32}[sub])

    def tensor(self, name: str, a: np.ndarray) -> None:
        self.w.add_tensor(name, a)

    def finish(self) -> None:
        finish_gguf(self.w)


def finish_gguf(w) -> None:  # noqa: ANN001
    """Write out and close a gguf.GGUFWriter whose keys and tensors are all
    added."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
