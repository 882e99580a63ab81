"""`sotto transcribe -` reads standard input, as `sotto stream -` does:
any format libsndfile reads from a pipe (WAV, Ogg), a regular file
redirected to it, or raw PCM with --raw-format, --rate and --channels
(stream's options and defaults). Each gives the transcript of the same
samples given as a file.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import wave

import numpy as np
import pytest

from conftest import AUDIO_DIR, SOTTO_BIN, assert_no_crash

WAV = AUDIO_DIR / "goforward.wav"   # 2.8 s, 16 kHz mono s16


def sotto(model, *args, stdin=subprocess.DEVNULL, data: bytes | None = None,
          cwd=None) -> subprocess.CompletedProcess:
    cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-q", "-m", str(model),
                         "-l", "en", "-t", "2", "--beam-size", "1", "-f",
                         "json", *map(str, args)],
                        stdin=stdin if data is None else None, input=data,
                        capture_output=True, timeout=300, cwd=cwd)
    assert_no_crash(subprocess.CompletedProcess(cp.args, cp.returncode,
                                                cp.stdout, cp.stderr.decode(
                                                    errors="replace")))
    return cp


def result(cp) -> dict:
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    return json.loads(cp.stdout)


def samples() -> np.ndarray:
    with wave.open(str(WAV)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2)
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


@pytest.fixture(scope="module")
def as_file(tiny_model) -> dict:
    return result(sotto(tiny_model, WAV))


def same(got: dict, want: dict) -> None:
    assert got["file"] == "-", got["file"]
    assert got["text"] == want["text"], (got["text"], want["text"])
    assert got["duration"] == want["duration"]


def test_wav_from_a_pipe(tiny_model, as_file):
    same(result(sotto(tiny_model, "-", data=WAV.read_bytes())), as_file)


def test_ogg_from_a_pipe(tiny_model, tmp_path):
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup installs it)")
    ogg = tmp_path / "go.ogg"
    subprocess.run(["sox", str(WAV), str(ogg)], check=True, capture_output=True)
    same(result(sotto(tiny_model, "-", data=ogg.read_bytes())),
         result(sotto(tiny_model, ogg)))


def test_redirected_file(tiny_model, as_file):
    with WAV.open("rb") as f:
        same(result(sotto(tiny_model, "-", stdin=f)), as_file)


def test_raw_s16le_defaults(tiny_model, as_file):
    """--raw-format s16le at stream's defaults (16 kHz, mono): the WAV's
    own samples, so the same transcript."""
    same(result(sotto(tiny_model, "--raw-format", "s16le", "-",
                      data=samples().tobytes())), as_file)


def test_raw_f32le_8k_stereo(tiny_model, tmp_path):
    """f32le at 8 kHz, two channels: as the WAV of those samples."""
    x = samples().astype(np.float32)[::2] / 32768
    st = np.stack([x, x * 0.5], axis=1).astype("<f4")
    wav = tmp_path / "st.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes((st * 32768).round().astype("<i2").tobytes())
    s16 = result(sotto(tiny_model, "--rate", "8000", "--channels", "2", "-",
                       data=(st * 32768).round().astype("<i2").tobytes()))
    same(s16, result(sotto(tiny_model, wav)))
    f32 = result(sotto(tiny_model, "--raw-format", "f32le", "--rate", "8000",
                       "--channels", "2", "-", data=st.tobytes()))
    assert f32["duration"] == s16["duration"]
    assert f32["text"].split()[:2] == s16["text"].split()[:2], \
        (f32["text"], s16["text"])


def test_flac_from_a_pipe_says_why(tiny_model, tmp_path):
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup installs it)")
    flac = tmp_path / "go.flac"
    subprocess.run(["sox", str(WAV), str(flac)], check=True, capture_output=True)
    cp = sotto(tiny_model, "-", data=flac.read_bytes())
    err = cp.stderr.decode()
    assert cp.returncode == 1, err
    assert err.startswith("sotto transcribe: standard input: "), err


def test_terminal_refused(tiny_model):
    master, slave = pty.openpty()
    try:
        cp = sotto(tiny_model, "-", stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert cp.returncode == 1
    assert b"standard input is a terminal" in cp.stderr, cp.stderr


@pytest.mark.parametrize("args,want", [
    (["-", "-"], "can be read only once"),
    (["--rate", "8000", WAV], "give '-' as the input"),
    (["--raw-format", "f32", "-"], "--raw-format must be s16le or f32le"),
    (["--channels", "0", "-"], "bad number"),
    (["--output-dir", ".", "-"], "has no name"),
])
def test_usage(args, want, tiny_model, tmp_path):
    cp = sotto(tiny_model, *args, data=b"", cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    assert want.encode() in cp.stderr, cp.stderr
    assert list(tmp_path.iterdir()) == []
