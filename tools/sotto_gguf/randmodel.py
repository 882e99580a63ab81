"""Random Whisper models of any release, written the way users' models
arrive: a CTranslate2 (faster-whisper) directory and a Hugging Face
(transformers, safetensors) directory.

A Whisper of a release's dimensions with random weights exercises every
shape and index the real one does, and an independent implementation
running the same weights (CTranslate2) is an exact reference for it; the
timing of a model does not depend on its values either (bench/).

Weights: uniform with a fixed seed and standard deviation std (0.02, as
transformers initialises Whisper, though with a normal distribution: a
uniform one is drawn 4x faster and serves as well), LayerNorm gains 1 +
the same noise, the encoder's positions openai's sinusoids (a buffer, not
a weight, in openai's model); all float16, as released checkpoints are.
Biases are random too (not zero as at initialisation) so that a bias in
the wrong place shows.

The model.bin writer follows CTranslate2's ModelSpec._serialize (binary
version 6, WhisperSpec revision 3; see sotto_gguf/ct2.py for the layout).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from .common import ConvertError, Hparams, openai_tensor_names, expected_shape
from .tokenizer import bytes_to_unicode

CT2_BINARY_VERSION = 6
CT2_SPEC_REVISION = 3
_CT2_DTYPE = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3,
              np.dtype(np.float16): 4}


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> np.ndarray:
    """openai's encoder positions, [length][channels]."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1)


def random_tensors(hp: Hparams, seed: int, std: float = 0.02) -> dict[str, np.ndarray]:
    """openai state dict (names and layouts) of a random model, float16."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in openai_tensor_names(hp):
        shape = expected_shape(name, hp)
        if name == "encoder.positional_embedding":
            a = sinusoids(*shape)
        else:
            a = rng.random(shape, dtype=np.float32)
            a -= 0.5
            a *= std * np.sqrt(12.0)  # uniform on [-0.5, 0.5) has std 1/sqrt(12)
            if name.endswith("ln.weight") or name.endswith("ln_post.weight"):
                a += 1.0
        out[name] = a.astype(np.float16)
    return out


def gpt2_strings(tokens: list[bytes], n_bpe: int) -> list[str]:
    """Token bytes -> the strings HF and CT2 vocabularies hold: BPE tokens
    in GPT-2's byte alphabet, specials and timestamps as their text."""
    table = bytes_to_unicode()
    return ["".join(table[b] for b in t) if i < n_bpe else t.decode("utf-8") for i, t in enumerate(tokens)]


# --- CTranslate2 ----------------------------------------------------------------

def _ct2_attention(t: dict, src: str, d: int, cross: bool) -> dict[str, np.ndarray]:
    """openai's q/k/v/out of one attention block -> CT2's fused linears
    (the key has no bias: CT2 stores zeros in its place)."""
    q, k, v, o = (t[f"{src}.{x}.weight"] for x in ("query", "key", "value", "out"))
    zero = np.zeros(d, np.float16)
    if cross:
        return {"linear_0/weight": q, "linear_0/bias": t[f"{src}.query.bias"],
                "linear_1/weight": np.concatenate([k, v]), "linear_1/bias": np.concatenate([zero, t[f"{src}.value.bias"]]),
                "linear_2/weight": o, "linear_2/bias": t[f"{src}.out.bias"]}
    return {"linear_0/weight": np.concatenate([q, k, v]),
            "linear_0/bias": np.concatenate([t[f"{src}.query.bias"], zero, t[f"{src}.value.bias"]]),
            "linear_1/weight": o, "linear_1/bias": t[f"{src}.out.bias"]}


def _ct2_block(t: dict, side: str, n: int, d: int) -> dict[str, np.ndarray]:
    p, out = f"{side}.blocks.{n}.", {}
    blocks = [("self_attention", "attn", False)]
    if side == "decoder":
        blocks.append(("attention", "cross_attn", True))
    for ct2, oa, cross in blocks:
        out[f"{ct2}/layer_norm/gamma"] = t[f"{p}{oa}_ln.weight"]
        out[f"{ct2}/layer_norm/beta"] = t[f"{p}{oa}_ln.bias"]
        for k, a in _ct2_attention(t, p + oa, d, cross).items():
            out[f"{ct2}/{k}"] = a
    out["ffn/layer_norm/gamma"], out["ffn/layer_norm/beta"] = t[p + "mlp_ln.weight"], t[p + "mlp_ln.bias"]
    for i, j in ((0, 0), (1, 2)):
        out[f"ffn/linear_{i}/weight"], out[f"ffn/linear_{i}/bias"] = t[f"{p}mlp.{j}.weight"], t[f"{p}mlp.{j}.bias"]
    return {f"{side}/layer_{n}/{k}": a for k, a in out.items()}


def ct2_variables(hp: Hparams, t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """CT2's WhisperSpec variables (without the aliased projection)."""
    v: dict[str, np.ndarray] = {}
    for c in (1, 2):
        v[f"encoder/conv{c}/weight"] = t[f"encoder.conv{c}.weight"]
        v[f"encoder/conv{c}/bias"] = t[f"encoder.conv{c}.bias"]
    v["encoder/position_encodings/encodings"] = t["encoder.positional_embedding"]
    v["encoder/num_heads"] = np.array(hp.n_audio_head, np.int16)
    for n in range(hp.n_audio_layer):
        v.update(_ct2_block(t, "encoder", n, hp.n_audio_state))
    v["encoder/layer_norm/gamma"], v["encoder/layer_norm/beta"] = t["encoder.ln_post.weight"], t["encoder.ln_post.bias"]
    v["decoder/embeddings/weight"] = t["decoder.token_embedding.weight"]
    v["decoder/position_encodings/encodings"] = t["decoder.positional_embedding"]
    for n in range(hp.n_text_layer):
        v.update(_ct2_block(t, "decoder", n, hp.n_text_state))
    v["decoder/layer_norm/gamma"], v["decoder/layer_norm/beta"] = t["decoder.ln.weight"], t["decoder.ln.bias"]
    scalars = {"num_heads": (hp.n_text_head, np.int16), "pre_norm": (1, np.int8), "activation": (3, np.int8),
               "alignment_layer": (-1, np.int16), "alignment_heads": (1, np.int16), "scale_embeddings": (0, np.int8),
               "alibi": (0, np.int8), "start_from_zero_embedding": (0, np.int8)}
    for k, (val, dt) in scalars.items():
        v[f"decoder/{k}"] = np.array(val, dt)
    return v


def _ct2_string(s: str) -> bytes:
    b = s.encode("utf-8") + b"\0"
    return struct.pack("<H", len(b)) + b


def write_model_bin(path: Path, variables: dict[str, np.ndarray], aliases: dict[str, str]) -> None:
    """CTranslate2 model.bin: variables sorted by name, then the aliases."""
    with path.open("wb") as f:
        f.write(struct.pack("<I", CT2_BINARY_VERSION))
        f.write(_ct2_string("WhisperSpec"))
        f.write(struct.pack("<II", CT2_SPEC_REVISION, len(variables)))
        for name in sorted(variables):
            a = np.asarray(variables[name], order="C")  # ascontiguousarray makes scalars 1-D
            f.write(_ct2_string(name))
            f.write(struct.pack("<B", a.ndim) + struct.pack(f"<{a.ndim}I", *a.shape))
            f.write(struct.pack("<BI", _CT2_DTYPE[a.dtype], a.nbytes))
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
        f.write(struct.pack("<I", len(aliases)))
        for alias, target in aliases.items():
            f.write(_ct2_string(alias) + _ct2_string(target))


def write_ct2(d: Path, hp: Hparams, tensors: dict[str, np.ndarray], strings: list[str], config: dict,
              n_bpe: int | None = None) -> None:
    """A faster-whisper directory: model.bin, vocabulary.json, config.json
    (config: alignment_heads, lang_ids, suppress_ids, suppress_ids_begin),
    preprocessor_config.json (faster-whisper reads its feature_size) and,
    given n_bpe, tokenizer.json as the published conversions carry it
    (faster-whisper downloads openai's from the Hub when it is missing;
    tools/convert.py reads vocabulary.json)."""
    if len(strings) != hp.n_vocab:
        raise ConvertError(f"{len(strings)} vocabulary strings for n_vocab {hp.n_vocab}")
    d.mkdir(parents=True, exist_ok=True)
    write_model_bin(d / "model.bin", ct2_variables(hp, tensors), {"decoder/projection/weight": "decoder/embeddings/weight"})
    (d / "vocabulary.json").write_text(json.dumps(strings, ensure_ascii=False), encoding="utf-8")
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (d / "preprocessor_config.json").write_text(json.dumps(preprocessor_config(hp)), encoding="utf-8")
    if n_bpe is not None:
        write_tokenizer_json(d, strings, n_bpe)


def write_tokenizer_json(d: Path, strings: list[str], n_bpe: int) -> None:
    """tokenizer.json in the Hugging Face tokenizers format (its library
    loads it): the byte-level BPE vocabulary plus the added special tokens.
    No merges: ids map to strings and back, text is not split into BPE
    tokens as openai's tokenizer would."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(strings) if i >= n_bpe]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
             "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
             "vocab": {s: i for i, s in enumerate(strings[:n_bpe])}, "merges": []}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level, "model": model}
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")


def preprocessor_config(hp: Hparams) -> dict:
    return {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": hp.n_mels, "hop_length": 160,
            "n_fft": 400, "n_samples": 480000, "nb_max_frames": 3000, "chunk_length": 30, "sampling_rate": 16000,
            "padding_side": "right", "padding_value": 0.0, "return_attention_mask": False}


# --- Hugging Face -----------------------------------------------------------------

_HF_TOP = {
    "encoder.positional_embedding": "encoder.embed_positions.weight",
    "encoder.ln_post": "encoder.layer_norm",
    "decoder.token_embedding": "decoder.embed_tokens",
    "decoder.positional_embedding": "decoder.embed_positions.weight",
    "decoder.ln": "decoder.layer_norm",
}
_HF_BLOCK = {"attn_ln": "self_attn_layer_norm", "cross_attn_ln": "encoder_attn_layer_norm", "mlp_ln": "final_layer_norm",
             "mlp.0": "fc1", "mlp.2": "fc2", "attn.query": "self_attn.q_proj", "attn.key": "self_attn.k_proj",
             "attn.value": "self_attn.v_proj", "attn.out": "self_attn.out_proj",
             "cross_attn.query": "encoder_attn.q_proj", "cross_attn.key": "encoder_attn.k_proj",
             "cross_attn.value": "encoder_attn.v_proj", "cross_attn.out": "encoder_attn.out_proj"}


def hf_name(openai: str) -> str:
    """openai tensor name -> transformers' WhisperForConditionalGeneration name."""
    base, _, leaf = openai.rpartition(".")
    if openai in _HF_TOP:
        return "model." + _HF_TOP[openai]
    if base in _HF_TOP:
        return f"model.{_HF_TOP[base]}.{leaf}"
    if base in ("encoder.conv1", "encoder.conv2"):
        return "model." + openai
    side, blocks, n, rest = openai.split(".", 3)
    mod, _, leaf = rest.rpartition(".")
    if blocks != "blocks" or mod not in _HF_BLOCK:
        raise KeyError(openai)
    return f"model.{side}.layers.{n}.{_HF_BLOCK[mod]}.{leaf}"


def hf_config(hp: Hparams, special: dict[str, int]) -> dict:
    """config.json as transformers writes it for Whisper (the fields our
    reader and transformers need)."""
    return {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
            "num_mel_bins": hp.n_mels, "max_source_positions": hp.n_audio_ctx, "max_target_positions": hp.n_text_ctx,
            "d_model": hp.n_audio_state, "encoder_layers": hp.n_audio_layer, "encoder_attention_heads": hp.n_audio_head,
            "encoder_ffn_dim": 4 * hp.n_audio_state, "decoder_layers": hp.n_text_layer,
            "decoder_attention_heads": hp.n_text_head, "decoder_ffn_dim": 4 * hp.n_text_state,
            "vocab_size": hp.n_vocab, "activation_function": "gelu", "scale_embedding": False,
            "tie_word_embeddings": True, "torch_dtype": "float16", "bos_token_id": special["eot"],
            "eos_token_id": special["eot"], "pad_token_id": special["eot"],
            "decoder_start_token_id": special["sot"]}


def write_hf(d: Path, hp: Hparams, tensors: dict[str, np.ndarray], strings: list[str], n_bpe: int,
             special: dict[str, int], generation: dict) -> None:
    """A Hugging Face directory: model.safetensors (transformers' names, the
    tied proj_out left out as transformers saves it), config.json,
    generation_config.json, preprocessor_config.json and tokenizer.json
    (byte-level BPE vocabulary plus the added special tokens)."""
    from safetensors.numpy import save_file

    d.mkdir(parents=True, exist_ok=True)
    save_file({hf_name(k): np.ascontiguousarray(a) for k, a in tensors.items()}, str(d / "model.safetensors"),
              metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(hf_config(hp, special)), encoding="utf-8")
    (d / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    (d / "preprocessor_config.json").write_text(json.dumps(preprocessor_config(hp)), encoding="utf-8")
    write_tokenizer_json(d, strings, n_bpe)
