"""From a WhisperModel to the GGUF file of docs/model-format.md: derive the
tokenizer metadata, cross-check it against what the source's config says,
and write keys and tensors in a fixed order (so two conversions of the same
weights from different formats give byte-identical files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import (
    ALIGNMENT,
    FORMAT_VERSION,
    HPARAM_KEYS,
    ConvertError,
    WhisperModel,
    _Writer,
    atomic_output,
    check_tensors,
    progress,
    to_sotto_tensors,
)
from .melfilters import mel_filters
from .tokenizer import find_specials, normalise_specials, suppress_tokens


def default_alignment_heads(n_layer: int, n_head: int) -> list[tuple[int, int]]:
    """openai's default when a model has no tuned heads: every head of the
    last half of the decoder layers."""
    return [(layer, h) for layer in range(n_layer // 2, n_layer) for h in range(n_head)]


# openai's tuned cross-attention heads for word timing (the _ALIGNMENT_HEADS
# of openai/whisper, as (layer, head)), keyed by what identifies a release
# from its dimensions alone: (n_audio_layer, n_text_layer, n_vocab).
# large-v1 and -v2 share dimensions, so they get the default.
KNOWN_ALIGNMENT_HEADS = {
    (4, 4, 51864): [(1, 0), (2, 0), (2, 5), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4)],
    (4, 4, 51865): [(2, 2), (3, 0), (3, 2), (3, 3), (3, 4), (3, 5)],
    (6, 6, 51864): [(3, 3), (4, 7), (5, 1), (5, 5), (5, 7)],
    (6, 6, 51865): [(3, 1), (4, 2), (4, 3), (4, 7), (5, 1), (5, 2), (5, 4), (5, 6)],
    (12, 12, 51864): [(6, 6), (7, 0), (7, 3), (7, 8), (8, 2), (8, 5), (8, 7), (9, 0), (9, 4), (9, 8),
                      (9, 10), (10, 0), (10, 1), (10, 2), (10, 3), (10, 6), (10, 11), (11, 2), (11, 4)],
    (12, 12, 51865): [(5, 3), (5, 9), (8, 0), (8, 4), (8, 7), (8, 8), (9, 0), (9, 7), (9, 9), (10, 5)],
    (24, 24, 51864): [(11, 4), (14, 1), (14, 12), (14, 14), (15, 4), (16, 0), (16, 4), (16, 9), (17, 12),
                      (17, 14), (18, 7), (18, 10), (18, 15), (20, 0), (20, 3), (20, 9), (20, 14), (21, 12)],
    (24, 24, 51865): [(13, 15), (15, 4), (15, 15), (16, 1), (20, 0), (23, 4)],
    (32, 32, 51866): [(7, 0), (10, 17), (12, 18), (13, 12), (16, 1), (17, 14), (19, 11), (21, 4), (24, 1), (25, 6)],
    (32, 4, 51866): [(2, 4), (2, 11), (3, 3), (3, 6), (3, 11), (3, 14)],
}


def alignment_heads(model: WhisperModel) -> list[tuple[int, int]]:
    """The source's own heads if it names them, else openai's table for a
    recognisable release, else openai's default."""
    hp = model.hparams
    if model.alignment_heads:
        return list(model.alignment_heads)
    known = KNOWN_ALIGNMENT_HEADS.get((hp.n_audio_layer, hp.n_text_layer, hp.n_vocab))
    if known:
        return list(known)
    return default_alignment_heads(hp.n_text_layer, hp.n_text_head)


def metadata(model: WhisperModel, name: str) -> dict:
    """All sotto keys except general.architecture/alignment, as
    {key: (kind, value)} in write order. Raises ConvertError when the
    tokenizer does not look like Whisper's or disagrees with the source's
    own suppress lists."""
    hp = model.hparams
    if len(model.tokens) != hp.n_vocab:
        raise ConvertError(f"tokenizer has {len(model.tokens)} tokens, model has n_vocab {hp.n_vocab}")
    tokens = normalise_specials(model.tokens, hp.n_vocab)
    sp = find_specials(tokens, hp.n_vocab)
    suppress = suppress_tokens(tokens, sp)
    if model.suppress_ids is not None and sorted(set(model.suppress_ids)) != suppress:
        got = set(model.suppress_ids)
        raise ConvertError(
            "computed suppress_tokens disagree with the model's config: "
            f"only computed {sorted(set(suppress) - got)[:10]}, only in config {sorted(got - set(suppress))[:10]}"
        )
    begin = [220, sp.ids["eot"]]
    if model.suppress_begin is not None and list(model.suppress_begin) != begin:
        raise ConvertError(f"config suppress_ids_begin {model.suppress_begin} != [220, eot] = {begin}")
    heads = alignment_heads(model)
    for layer, h in heads:
        if not (0 <= layer < hp.n_text_layer and 0 <= h < hp.n_text_head):
            raise ConvertError(f"alignment head ({layer}, {h}) out of range")
    md: dict = {
        "general.name": ("str", name),
        "sotto.format_version": ("u32", FORMAT_VERSION),
        "sotto.source": ("str", model.source),
    }
    for k in HPARAM_KEYS:
        md[f"whisper.{k}"] = ("u32", getattr(hp, k))
    md["whisper.tokenizer.tokens"] = ("str[]", tokens)
    md["whisper.tokenizer.n_bpe"] = ("u32", sp.n_bpe)
    for k in ("eot", "sot", "translate", "transcribe", "sot_lm", "sot_prev", "no_speech", "no_timestamps", "timestamp_begin"):
        md[f"whisper.token.{k}"] = ("u32", sp.ids[k])
    md["whisper.languages"] = ("str[]", sp.languages)
    md["whisper.suppress_tokens"] = ("i32[]", suppress)
    md["whisper.suppress_begin"] = ("i32[]", begin)
    md["whisper.alignment_heads"] = ("i32[]", [x for pair in heads for x in pair])
    return md


def filters_for(model: WhisperModel) -> np.ndarray:
    """The Slaney filters, computed. A source that ships its own (ggml) must
    agree with them: sotto's front end assumes openai's exact bank."""
    f = mel_filters(model.hparams.n_mels)
    if model.mel_filters is not None:
        if model.mel_filters.shape != f.shape:
            raise ConvertError(f"source mel filters have shape {model.mel_filters.shape}, expected {f.shape}")
        err = float(np.abs(model.mel_filters.astype(np.float32) - f).max())
        if err > 1e-5:
            raise ConvertError(f"source mel filters differ from openai's Slaney filters by {err:g}")
    return f


def write_gguf(model: WhisperModel, out: Path, name: str) -> None:
    """Validate and write, replacing `out` whole or not at all
    (atomic_output)."""
    model.hparams.validate()
    check_tensors(model)
    md = metadata(model, name)
    tensors = to_sotto_tensors(model, filters_for(model))
    with atomic_output(out) as tmp:
        progress(f"writing {out} ({len(tensors)} tensors, alignment {ALIGNMENT})")
        w = _Writer(tmp)
        for key, (kind, val) in md.items():
            if kind == "u32":
                w.u32(key, val)
            elif kind == "str":
                w.string(key, val)
            else:
                w.array(key, val, kind[:-2])
        for tname, a in tensors.items():
            w.tensor(tname, a)
        w.finish()
