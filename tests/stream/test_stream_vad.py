"""A stream with Silero VAD (sotto_stream_params.vad, stream-driver -v):
non-speech made with sox (white, pink and brown noise, a tone, clicks,
a chord, a plucked chord, a tune) gives no partial and no final, and no
step runs the encoder; speech still comes through. The daemon's WER bound
with VAD is in tests/daemon/test_vad.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, FINE_STEP_MS, REPO, report, run_driver, werlib

VAD = REPO / "models" / "silero-vad.gguf"


def sox(*args) -> None:
    cp = subprocess.run(["sox", *map(str, args)], capture_output=True, text=True)
    assert cp.returncode == 0, f"sox {args}: {cp.stderr}"


def make_signals(d: Path) -> dict[str, Path]:
    r = ("-r", 16000, "-c", 1, "-b", 16)
    out = {}
    for kind in ("whitenoise", "pinknoise", "brownnoise"):
        out[kind] = d / f"{kind}.wav"
        sox("-n", *r, out[kind], "synth", 6, kind, "vol", 0.5)
    out["tone"] = d / "tone.wav"
    sox("-n", *r, out["tone"], "synth", 6, "sine", 440, "vol", 0.5)
    out["chord"] = d / "chord.wav"
    sox("-n", "-r", 16000, "-b", 16, out["chord"], "synth", 6, "sine", 261.63, "sine", 329.63,
        "sine", 392.0, "remix", "-", "vol", 0.5)
    out["plucked-chord"] = d / "plucked.wav"
    sox("-n", "-r", 16000, "-b", 16, out["plucked-chord"], "synth", 6, "pluck", "C4", "pluck", "E4",
        "pluck", "G4", "remix", "-", "vol", 0.6)
    click = d / "click.wav"
    sox("-n", *r, click, "synth", 0.004, "square", 1000, "pad", 0, 0.246)
    out["clicks"] = d / "clicks.wav"
    sox(click, out["clicks"], "repeat", 23)
    notes = []
    for i, semis in enumerate([0, 4, 7, 12, 7, 4, 0, -5, 0, 4, 7, 4]):
        n = d / f"note{i}.wav"
        sox("-n", *r, n, "synth", 0.5, "pluck", f"%{semis}", "fade", 0, 0.5, 0.1)
        notes.append(n)
    out["tune"] = d / "tune.wav"
    sox(*notes, out["tune"])
    return out


@pytest.fixture(scope="module")
def vad() -> Path:
    if not VAD.is_file():
        pytest.fail(f"{VAD} is missing: scripts/fetch-model silero-vad")
    return VAD


def test_non_speech_gives_nothing(vad, tmp_path):
    for name, path in make_signals(tmp_path).items():
        ev = run_driver(path, FINE_STEP_MS, extra=("-v", str(vad)))
        partials = [e["text"] for e in ev if e["type"] == "partial" and e["text"].strip()]
        finals = [e["text"] for e in ev if e["type"] == "final"]
        steps = [e["compute_ms"] for e in ev if e["type"] == "step"]
        assert not partials and not finals, f"{name}: {partials} {finals}"
        assert len(steps) >= 6 and max(steps) < 80, f"{name}: an encoder pass ({max(steps):.0f} ms)"
        report(f"VAD, {name} (6 s, 1 s steps): {len(steps)} steps, max {max(steps):.1f} ms, no text")


def test_speech_comes_through(vad):
    """jfk at 1 s steps with the VAD: the same words as without."""
    with_vad = run_driver(AUDIO_DIR / "jfk.wav", FINE_STEP_MS, extra=("-v", str(vad)))
    without = run_driver(AUDIO_DIR / "jfk.wav", FINE_STEP_MS)

    def text(ev):
        return werlib.normalise("".join(e["text"] for e in ev if e["type"] == "final"))

    assert text(with_vad) == text(without) and "ask what you can do for your country" in text(with_vad)


def test_bad_vad_file(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 60)
    cp = subprocess.run([str(REPO / "build" / "tests" / "stream" / "stream-driver"), "-v", str(junk),
                         str(REPO / "models" / "tiny.en.gguf"), str(AUDIO_DIR / "jfk.wav")],
                        capture_output=True, text=True)
    assert cp.returncode == 3 and "junk.gguf" in cp.stderr
