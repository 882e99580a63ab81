"""A stream with Silero VAD (sotto_stream_params.vad, stream-driver -v):
non-speech made with sox (white, pink and brown noise, a tone, clicks,
a chord, a plucked chord, a tune) gives no partial and no final, and no
step runs the encoder; speech still comes through. The daemon's WER bound
with VAD is in tests/daemon/test_daemon_vad.py."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import nonspeech
from conftest import AUDIO_DIR, FINE_STEP_MS, REPO, report, run_driver, werlib
from nonspeech import sox

VAD = REPO / "models" / "silero-vad.gguf"


@pytest.fixture(scope="module")
def vad() -> Path:
    if not VAD.is_file():
        pytest.fail(f"{VAD} is missing: scripts/fetch-model silero-vad")
    return VAD


def test_non_speech_gives_nothing(vad, tmp_path):
    sounds = nonspeech.make(tmp_path)
    with ThreadPoolExecutor(2) as pool:      # two at once, a core each
        runs = pool.map(lambda p: run_driver(p, FINE_STEP_MS, None,
                                             ("-v", str(vad))), sounds.values())
    for name, ev in zip(sounds, runs):
        partials = [e["text"] for e in ev if e["type"] == "partial" and e["text"].strip()]
        finals = [e["text"] for e in ev if e["type"] == "final"]
        steps = [e["compute_ms"] for e in ev if e["type"] == "step"]
        assert not partials and not finals, f"{name}: {partials} {finals}"
        assert len(steps) >= 6, f"{name}: {len(steps)} steps for 6 s at 1 s steps"
        assert max(steps) < 80, f"{name}: an encoder pass ({max(steps):.0f} ms)"
        report(f"VAD, {name} (6 s, 1 s steps): {len(steps)} steps, max {max(steps):.1f} ms, no text")


def test_speech_comes_through(vad):
    """jfk at 1 s steps with the VAD: the same words as without."""
    with ThreadPoolExecutor(2) as pool:      # the two at once, a core each
        with_vad = pool.submit(run_driver, AUDIO_DIR / "jfk.wav", FINE_STEP_MS,
                               None, ("-v", str(vad)))
        without = run_driver(AUDIO_DIR / "jfk.wav", FINE_STEP_MS)
        with_vad = with_vad.result()

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
