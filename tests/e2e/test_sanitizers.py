"""The real CLI built with AddressSanitizer and UndefinedBehaviorSanitizer
(build-asan/, made by `scripts/setup --asan`) on real speech, on both compute
paths, and on bad input. Any sanitizer report fails the test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, REPO, assert_no_crash, squash

ASAN_BIN = REPO / "build-asan" / "client" / "sotto"


def run_asan(args, timeout: float = 900) -> subprocess.CompletedProcess:
    if not (ASAN_BIN.is_file() and os.access(ASAN_BIN, os.X_OK)):
        pytest.fail(f"{ASAN_BIN} is missing: build it with scripts/setup --asan")
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "halt_on_error=1:detect_leaks=1:abort_on_error=0"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    env["LSAN_OPTIONS"] = f"suppressions={REPO / 'tests' / 'lsan.supp'}"
    cmd = [str(ASAN_BIN), "transcribe", *[str(a) for a in args]]
    cp = subprocess.run(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                        capture_output=True, text=True, errors="replace",
                        timeout=timeout)
    assert_no_crash(cp, "(asan) " + " ".join(cmd[2:])[:200])
    return cp


# auto: bf16 where the CPU runs it, else fp32 greedy (beam 5 is fp32's case)
@pytest.mark.parametrize("precision,beam", [("fp32", 5), ("auto", 1)])
def test_asan_transcribe(precision, beam, tiny_model, ref_greedy):
    cp = run_asan(["-m", tiny_model, "--precision", precision, "--beam-size",
                   beam, "-q", AUDIO_DIR / "jfk.wav"])
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "ask what you can do for your country" in squash(cp.stdout).lower()


def test_asan_bad_inputs(tiny_model, tmp_path):
    junk = tmp_path / "junk.wav"
    junk.write_bytes(os.urandom(4096))
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    cp = run_asan(["-m", tiny_model, "-q", "-f", "json", junk, empty,
                   tmp_path / "missing.wav", AUDIO_DIR / "goforward.wav"])
    assert cp.returncode == 1, cp.stderr[-3000:]
    assert "forward" in cp.stdout.lower()
    for name in ("junk.wav", "empty.wav", "missing.wav"):
        assert name in cp.stderr


def test_asan_vad(tiny_model, tmp_path):
    """--vad: speech, a file with a pause cut out, one with no speech, an
    empty one and a junk VAD model."""
    vad = REPO / "models" / "silero-vad.gguf"
    if not vad.is_file():
        pytest.fail(f"{vad} is missing: scripts/fetch-model silero-vad")
    quiet = tmp_path / "quiet.wav"
    subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", quiet, "trim", "0", "3"], check=True)
    paused = tmp_path / "paused.wav"
    subprocess.run(["sox", AUDIO_DIR / "goforward.wav", quiet, AUDIO_DIR / "jfk.wav", paused], check=True)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    cp = run_asan(["-m", tiny_model, "-q", "-f", "json", "--vad", "--vad-min-silence-ms", "500",
                   paused, quiet, empty])
    assert cp.returncode == 1, cp.stderr[-3000:]
    assert "forward" in cp.stdout.lower() and "your country" in cp.stdout.lower()
    assert "empty.wav" in cp.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(Path(vad).read_bytes()[:5000])
    cp = run_asan(["-m", tiny_model, "-q", "--vad-model", junk, quiet])
    assert cp.returncode == 3 and "junk.gguf" in cp.stderr, cp.stderr[-3000:]


def test_asan_corrupt_model(tiny_model, tmp_path):
    data = Path(tiny_model).read_bytes()
    cases = {
        "truncated": data[: len(data) // 3],
        "header-only": data[:4096],
        "flipped": data[:24] + bytes(b ^ 0x5A for b in data[24:4096]) + data[4096:],
    }
    for name, blob in cases.items():
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(blob)
        cp = run_asan(["-m", p, "-q", AUDIO_DIR / "goforward.wav"])
        assert cp.returncode == 3, f"{name}: exit {cp.returncode}\n{cp.stderr[-2000:]}"
        assert cp.stderr.strip(), f"{name}: no message"


def test_asan_diarize(tiny_model, tmp_path):
    """--diarize: two speakers with a pause between, the same overlapping
    (pieces of two speakers touch: diarize-edge.c looks inside them) and
    a file with no speech, with the number of speakers estimated, then
    with --vad (its VAD shared) and --speakers 3 (more than the pieces'
    groups)."""
    quiet = tmp_path / "quiet.wav"
    subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", quiet, "trim", "0", "2"], check=True)
    two = tmp_path / "two.wav"
    subprocess.run(["sox", AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0870.wav", quiet,
                    AUDIO_DIR / "jfk.wav", two], check=True)
    # jfk.wav mixed in 6.3 s into the 7.1 s of the other: no pause between
    touch = tmp_path / "touch.wav"
    subprocess.run(["sox", "-m", AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0870.wav",
                    f"|sox {AUDIO_DIR / 'jfk.wav'} -p pad 6.3", touch], check=True)
    # Each file once (the sanitized engine is slow; the labeller's code is
    # what is checked here, so greedy): the touching pair where the number
    # of speakers is estimated, the paused one with the VAD and a number.
    for extra, wav in (([], touch), (["--vad", "--speakers", "3"], two)):
        cp = run_asan(["-m", tiny_model, "-q", "-f", "json", "--beam-size", "1",
                       "--diarize", *extra, wav, quiet])
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert '"speaker":"S1"' in cp.stdout and "your country" in cp.stdout.lower()
