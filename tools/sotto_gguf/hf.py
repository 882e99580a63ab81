"""Reader for Hugging Face openai/whisper-* directories (transformers'
WhisperForConditionalGeneration saved as safetensors).

Files: config.json (dimensions), *.safetensors (weights, one file or
shards), tokenizer.json or vocab.json + added_tokens.json, and optionally
generation_config.json (alignment heads and suppress lists, used for the
cross-check). Tensor names are transformers' (`model.encoder.layers.N.
self_attn.q_proj.weight`, ...); the layouts already match openai's.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .common import ConvertError, Hparams, WhisperModel, progress
from .tokenizer import vocab_strings_to_bytes

_ATTN = {"q_proj": "query", "k_proj": "key", "v_proj": "value", "out_proj": "out"}
_LAYER = {
    "self_attn_layer_norm": "attn_ln",
    "encoder_attn_layer_norm": "cross_attn_ln",
    "final_layer_norm": "mlp_ln",
    "fc1": "mlp.0",
    "fc2": "mlp.2",
}


def hf_to_openai_name(name: str) -> str | None:
    """transformers name -> openai name; None for tensors openai lacks
    (the tied proj_out)."""
    n = name.removeprefix("model.")
    if n in ("proj_out.weight",):
        return None
    top = {
        "encoder.conv1.weight": "encoder.conv1.weight",
        "encoder.conv1.bias": "encoder.conv1.bias",
        "encoder.conv2.weight": "encoder.conv2.weight",
        "encoder.conv2.bias": "encoder.conv2.bias",
        "encoder.embed_positions.weight": "encoder.positional_embedding",
        "encoder.layer_norm.weight": "encoder.ln_post.weight",
        "encoder.layer_norm.bias": "encoder.ln_post.bias",
        "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
        "decoder.embed_positions.weight": "decoder.positional_embedding",
        "decoder.layer_norm.weight": "decoder.ln.weight",
        "decoder.layer_norm.bias": "decoder.ln.bias",
    }
    if n in top:
        return top[n]
    parts = n.split(".")
    if len(parts) < 5 or parts[1] != "layers":
        raise ConvertError(f"unknown tensor {name}")
    side, idx, mod, rest = parts[0], parts[2], parts[3], ".".join(parts[4:])
    base = f"{side}.blocks.{idx}."
    if mod in ("self_attn", "encoder_attn") and len(parts) == 6 and parts[4] in _ATTN:
        a = "attn" if mod == "self_attn" else "cross_attn"
        return f"{base}{a}.{_ATTN[parts[4]]}.{parts[5]}"
    if mod in _LAYER:
        return f"{base}{_LAYER[mod]}.{rest}"
    raise ConvertError(f"unknown tensor {name}")


def _read_json(p: Path) -> dict | list:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConvertError(f"cannot read {p}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ConvertError(f"{p}: not valid JSON: {e}") from None


_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def read_safetensors(p: Path) -> dict[str, np.ndarray]:
    """Load one .safetensors file as numpy. Uses the safetensors package
    when installed; otherwise parses the format directly (u64 header length,
    JSON header {name: {dtype, shape, data_offsets}}, raw data)."""
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError:
        return _read_safetensors_plain(p)
    try:
        return dict(load_file(str(p)))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise ConvertError(f"{p}: not a valid safetensors file ({e})") from None


def _read_safetensors_plain(p: Path) -> dict[str, np.ndarray]:
    data = p.read_bytes()
    if len(data) < 8:
        raise ConvertError(f"{p}: truncated safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ConvertError(f"{p}: safetensors header runs past the end of the file")
    try:
        header = json.loads(data[8 : 8 + n])
    except ValueError as e:
        raise ConvertError(f"{p}: bad safetensors header: {e}") from None
    body = memoryview(data)[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info.get("dtype")
        if dt == "BF16":
            lo, hi = info["data_offsets"]
            u16 = np.frombuffer(body[lo:hi], dtype="<u2").astype(np.uint32) << 16
            out[name] = u16.view(np.float32).reshape(info["shape"])
            continue
        if dt not in _ST_DTYPES:
            raise ConvertError(f"{p}: tensor {name} has unsupported dtype {dt}")
        lo, hi = info["data_offsets"]
        if not 0 <= lo <= hi <= len(body):
            raise ConvertError(f"{p}: tensor {name} lies outside the file")
        a = np.frombuffer(body[lo:hi], dtype=_ST_DTYPES[dt])
        if a.size != int(np.prod(info["shape"], dtype=np.int64)):
            raise ConvertError(f"{p}: tensor {name} size does not match its shape")
        out[name] = a.reshape(info["shape"])
    return out


def read_hf_vocab(d: Path, n_vocab: int) -> list[str]:
    """Token strings in id order from tokenizer.json (model.vocab +
    added_tokens) or vocab.json + added_tokens.json. Older tokenizers stop at
    <|notimestamps|>; the timestamp ids after it are filled in (openai
    appends them as <|0.00|> .. <|30.00|>)."""
    tj = d / "tokenizer.json"
    if tj.is_file():
        t = _read_json(tj)
        try:
            vocab = dict(t["model"]["vocab"])
            added = {a["content"]: a["id"] for a in t.get("added_tokens", [])}
        except (KeyError, TypeError):
            raise ConvertError(f"{tj}: not a BPE tokenizer.json") from None
    elif (d / "vocab.json").is_file():
        vocab = dict(_read_json(d / "vocab.json"))
        at = d / "added_tokens.json"
        added = dict(_read_json(at)) if at.is_file() else {}
    else:
        raise ConvertError(f"{d}: no tokenizer.json or vocab.json")
    by_id: dict[int, str] = {}
    for s, i in list(vocab.items()) + list(added.items()):
        if not isinstance(i, int) or not 0 <= i < n_vocab:
            raise ConvertError(f"token {s!r} has id {i} outside 0..{n_vocab - 1}")
        if i in by_id and by_id[i] != s:
            raise ConvertError(f"id {i} names two tokens: {by_id[i]!r} and {s!r}")
        by_id[i] = s
    nt = added.get("<|notimestamps|>")
    missing = [i for i in range(n_vocab) if i not in by_id]
    if missing:
        if nt is None or missing[0] != nt + 1 or len(missing) != n_vocab - nt - 1:
            raise ConvertError(f"tokenizer lacks {len(missing)} ids (first {missing[0]}) that are not the timestamp range")
        for k, i in enumerate(missing):
            by_id[i] = f"<|{k * 0.02:.2f}|>"
    return [by_id[i] for i in range(n_vocab)]


def load(d: Path) -> WhisperModel:
    """Read a Hugging Face Whisper directory."""
    cfg_p = d / "config.json"
    if not cfg_p.is_file():
        raise ConvertError(f"{d}: no config.json (not a Hugging Face model directory)")
    cfg = _read_json(cfg_p)
    if not isinstance(cfg, dict) or cfg.get("model_type") not in (None, "whisper"):
        raise ConvertError(f"{cfg_p}: model_type is {cfg.get('model_type') if isinstance(cfg, dict) else '?'}, expected whisper")
    try:
        hp = Hparams(
            n_mels=int(cfg["num_mel_bins"]),
            n_audio_ctx=int(cfg["max_source_positions"]),
            n_audio_state=int(cfg["d_model"]),
            n_audio_head=int(cfg["encoder_attention_heads"]),
            n_audio_layer=int(cfg["encoder_layers"]),
            n_text_ctx=int(cfg["max_target_positions"]),
            n_text_state=int(cfg["d_model"]),
            n_text_head=int(cfg["decoder_attention_heads"]),
            n_text_layer=int(cfg["decoder_layers"]),
            n_vocab=int(cfg["vocab_size"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConvertError(f"{cfg_p}: missing or bad field {e}") from None
    tensors: dict[str, np.ndarray] = {}
    proj = None
    for p in sorted(d.glob("*.safetensors")):
        progress(f"reading {p}")
        for name, a in read_safetensors(p).items():
            o = hf_to_openai_name(name)
            if o is None:
                proj = a
            elif o in tensors:
                raise ConvertError(f"tensor {name} appears twice")
            else:
                tensors[o] = a
    emb = tensors.get("decoder.token_embedding.weight")
    if proj is not None and emb is not None and not np.array_equal(proj, emb):
        raise ConvertError("proj_out.weight differs from the token embedding; Whisper ties them")
    vocab = read_hf_vocab(d, hp.n_vocab)
    if "<|endoftext|>" not in vocab:
        raise ConvertError("tokenizer has no <|endoftext|>")
    gen_p = d / "generation_config.json"
    gen = _read_json(gen_p) if gen_p.is_file() else {}
    heads = gen.get("alignment_heads")
    return WhisperModel(
        hparams=hp,
        tensors=tensors,
        tokens=vocab_strings_to_bytes(vocab, vocab.index("<|endoftext|>")),
        source="hf",
        alignment_heads=[(int(a), int(b)) for a, b in heads] if heads else None,
        suppress_ids=gen.get("suppress_tokens"),
        suppress_begin=gen.get("begin_suppress_tokens"),
    )
