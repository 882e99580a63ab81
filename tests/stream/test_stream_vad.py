"""A stream with Silero VAD (sotto_stream_params.vad, stream-driver -v):
non-speech made with sox (white, pink and brown noise, a tone, clicks,
a chord, a plucked chord, a tune) gives no partial and no final, and no
step runs the encoder; speech still comes through. The daemon's WER bound
with VAD is in tests/daemon/test_daemon_vad.py."""

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
        assert len(steps) >= 6, f"{name}: {len(steps)} steps for 6 s at 1 s steps"
        assert max(steps) < 80, f"{name}: an encoder pass ({max(steps):.0f} ms)"
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


def test_vad_stream_under_asan(vad, tmp_path):
    """build-asan's stream-driver with the VAD: speech, then noise, then
    the end inside a chunk (finish() pads the last one); no report."""
    import os

    driver = REPO / "build-asan" / "tests" / "stream" / "stream-driver"
    if not driver.is_file():
        pytest.fail(f"{driver} is missing: scripts/setup --asan")
    clip = tmp_path / "clip.wav"
    noise = tmp_path / "noise.wav"
    sox("-n", "-r", 16000, "-c", 1, "-b", 16, noise, "synth", 2.01, "brownnoise", "vol", 0.05)
    sox(AUDIO_DIR / "goforward.wav", noise, clip)
    env = dict(os.environ, ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               LSAN_OPTIONS=f"suppressions={REPO / 'tests' / 'lsan.supp'}")
    cp = subprocess.run([str(driver), "-t", "2", "-s", "2500", "-v", str(vad), str(REPO / "models" / "tiny.en.gguf"),
                         str(clip)], capture_output=True, text=True, env=env, timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    for m in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert m not in cp.stderr, cp.stderr[-3000:]
    assert "forward" in cp.stdout.lower()
