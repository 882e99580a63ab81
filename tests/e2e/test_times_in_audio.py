"""No segment or word ends after the audio does.

A window's last timestamp token can name a time past the last sample (the
window is padded to 30 s): before libsotto clamped it, the long-form file
(118.30 s) ended at 119.16 s greedy and 119.56 s with beam 5, and a 20 s
tone at 25.26 s. The durations here come from the WAV header (Python's
wave module), not from sotto's own "duration" field.
"""

from __future__ import annotations

import math
import struct
import wave
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, MANIFEST_FILES, parse_json_lines, run_sotto

# JSON times are printed to the millisecond: allow its rounding.
ROUNDING = 0.0005


def wav_seconds(path: Path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


def assert_within(obj: dict, duration: float, what: str) -> None:
    for s in obj["segments"]:
        assert s["start"] <= s["end"], f"{what}: {s}"
        assert s["end"] <= duration + ROUNDING, \
            f"{what}: segment ends at {s['end']} s, audio is {duration} s"
        for w in s.get("words", []):
            assert w["end"] <= duration + ROUNDING, \
                f"{what}: word {w} ends after {duration} s"


@pytest.mark.parametrize("name", MANIFEST_FILES)
def test_set_within_audio(name, sotto_greedy, sotto_beam5):
    duration = wav_seconds(AUDIO_DIR / name)
    assert_within(sotto_greedy[name], duration, f"{name} greedy")
    assert_within(sotto_beam5[name], duration, f"{name} beam 5")


def test_longform_last_segment_reaches_the_end(sotto_greedy):
    # The clamp keeps the end, it does not drop the last segment.
    name = "LJ001-0001_to_LJ001-0017_longform.wav"
    duration = wav_seconds(AUDIO_DIR / name)
    last = sotto_greedy[name]["segments"][-1]
    assert duration - 2.0 < last["end"] <= duration + ROUNDING, last


def write_tone(path: Path, seconds: float, hz: float = 440.0) -> None:
    rate = 16000
    frames = b"".join(struct.pack("<h", int(16000 * math.sin(
        2 * math.pi * hz * i / rate))) for i in range(int(seconds * rate)))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)


@pytest.mark.parametrize("extra", [(), ("--word-timestamps",)],
                         ids=["segments", "words"])
def test_tone_within_audio(extra, tiny_model, tmp_path):
    tone = tmp_path / "tone-20s.wav"
    write_tone(tone, 20.0)
    cp = run_sotto(["-m", tiny_model, "-l", "en", "-f", "json", "-t", "2",
                    "-q", "--beam-size", "1", *extra, tone], timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    (obj,) = parse_json_lines(cp.stdout)
    assert_within(obj, 20.0, f"20 s tone {' '.join(extra)}")
