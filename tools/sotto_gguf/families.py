"""The Whisper releases sotto knows (tools/families.json) as Hparams.

The dimensions are data, not code: a release differs from another only by
the numbers in that file (mel bins, widths, heads, layers, vocabulary);
everything that follows from them (special token ids, language count,
alignment-head defaults) is derived the way openai/whisper derives it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from .common import ConvertError, Hparams

FAMILIES_JSON = Path(__file__).resolve().parent.parent / "families.json"
N_AUDIO_CTX = 1500
N_TEXT_CTX = 448
_DIMS = ("n_mels", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_state", "n_text_head",
         "n_text_layer", "n_vocab")


@dataclass(frozen=True)
class Family:
    """One release: its dimensions and where its weights are published."""

    name: str
    hparams: Hparams
    hf: str  # Hugging Face repository of the transformers checkpoint
    ct2: str  # Hugging Face repository of the faster-whisper conversion


def load(path: Path = FAMILIES_JSON) -> dict[str, Family]:
    """Every family of the file, in its order."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConvertError(f"cannot read {path}: {e}") from None
    out = {}
    for name, f in raw.items():
        if name.startswith("_"):
            continue
        try:
            hp = Hparams(n_audio_ctx=N_AUDIO_CTX, n_text_ctx=N_TEXT_CTX, **{k: int(f[k]) for k in _DIMS})
        except (KeyError, TypeError, ValueError) as e:
            raise ConvertError(f"{path}: family {name}: missing or bad field {e}") from None
        hp.validate()
        out[name] = Family(name, hp, f.get("hf", ""), f.get("ct2", ""))
    return out


def get(name: str) -> Family:
    fams = load()
    if name not in fams:
        raise ConvertError(f"unknown family {name!r} (known: {', '.join(fams)})")
    return fams[name]


def reduced(hp: Hparams, n_audio_layer: int | None = None, n_text_layer: int | None = None) -> Hparams:
    """The same release with fewer layers (real widths, heads, mel bins and
    vocabulary): what the CI parity tests run for the deep ones."""
    return dataclasses.replace(
        hp,
        n_audio_layer=min(hp.n_audio_layer, n_audio_layer or hp.n_audio_layer),
        n_text_layer=min(hp.n_text_layer, n_text_layer or hp.n_text_layer),
    )
