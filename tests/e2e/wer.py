"""Word error rate with Whisper's English text normaliser (whisper-normalizer + jiwer)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# bench/ and the daemon tests import this module with only tests/e2e on the
# path; tests/audio.py says where the speech set is for all of them.
if str(REPO / "tests") not in sys.path:
    sys.path.append(str(REPO / "tests"))
from audio import AUDIO_DIR  # noqa: E402

_NORMALISER = None


def normalise(text: str) -> str:
    global _NORMALISER
    if _NORMALISER is None:
        from whisper_normalizer.english import EnglishTextNormalizer

        _NORMALISER = EnglishTextNormalizer()
    return " ".join(_NORMALISER(text).split())


def load_manifest(audio_dir: Path = AUDIO_DIR) -> dict[str, str]:
    """file name -> reference transcript, in manifest order."""
    out: dict[str, str] = {}
    with open(audio_dir / "manifest.tsv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            out[row["file"]] = row["reference_transcript"]
    return out


def counts(ref: str, hyp: str) -> tuple[int, int]:
    """(errors, reference words) after normalisation."""
    import jiwer

    r, h = normalise(ref), normalise(hyp)
    n = len(r.split())
    if n == 0:
        return len(h.split()), 0
    if not h:
        return n, n
    o = jiwer.process_words(r, h)
    return o.substitutions + o.deletions + o.insertions, n


def wer(refs: list[str], hyps: list[str]) -> float:
    """Corpus WER: total errors / total reference words."""
    assert len(refs) == len(hyps)
    e = n = 0
    for r, h in zip(refs, hyps):
        de, dn = counts(r, h)
        e += de
        n += dn
    return e / n if n else 0.0
