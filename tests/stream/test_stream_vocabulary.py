"""A stream's vocabulary (sotto_stream_params.prompt, stream-driver -p):
a rare name tiny.en misspells when streamed is spelled as the vocabulary
gives it, on the AVX-512 and AVX2 paths alike (measured: "Guttenburg" /
"Gudenberg" without, "Gutenberg" with). The hinted stream is 16.5 s of
the LJ Speech long-form recording, cut here with sox from
../shared/audio; the unhinted one is that whole recording as
test_stream.py streams it. A vocabulary longer than the stream keeps
(111 tokens) is cut, not refused: tests/daemon/test_vocabulary.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, STEP_MS, report, run_driver

LONG = AUDIO_DIR / "LJ001-0001_to_LJ001-0017_longform.wav"


@pytest.fixture(scope="module")
def gutenberg(tmp_path_factory) -> Path:
    """"... the earliest book printed with movable types, the Gutenberg,
    or forty-two line Bible ...": 36.0 to 52.5 s."""
    out = tmp_path_factory.mktemp("vocab") / "gutenberg.wav"
    subprocess.run(["sox", str(LONG), str(out), "trim", "36", "=52.5"],
                   check=True)
    return out


def finals_text(events: list[dict]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "final")


def test_vocabulary_spells_the_name(runs, gutenberg):
    # streamed without a vocabulary (the long-form run of test_stream.py)
    plain = finals_text(runs["stream"][LONG.name])
    hinted = finals_text(run_driver(gutenberg, STEP_MS,
                                    extra=("-p", "Gutenberg")))
    at = plain.find("42")
    report(f"vocabulary: without {plain[max(at - 40, 0):at + 10]!r}; with "
           f"'Gutenberg' {hinted!r}")
    # the hint is what spells it: without it tiny.en hears another name
    assert "Gutenberg" not in plain and "Bible" in plain, plain
    assert "Gutenberg" in hinted and "surpassed" in hinted, hinted
