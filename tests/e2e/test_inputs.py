"""`sotto transcribe` on hostile input files: float samples that are not
numbers or far out of range.

Files are generated here (numpy, sox) from ../shared/audio/jfk.wav; the real
binary and tiny.en run on them.
"""

from __future__ import annotations

import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from conftest import (AUDIO_DIR, normalise, parse_json_lines, report,
                      run_sotto)

JFK = AUDIO_DIR / "jfk.wav"


def jfk_samples() -> np.ndarray:
    with wave.open(str(JFK)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    return pcm.astype(np.float32) / 32768


def write_f32_wav(path: Path, x: np.ndarray, rate: int = 16000) -> Path:
    """An IEEE-float WAV (format 3) of x: [frames] or [frames][channels]."""
    x = np.asarray(x, "<f4")
    ch = 1 if x.ndim == 1 else x.shape[1]
    data = x.tobytes()
    fmt = struct.pack("<HHIIHH", 3, ch, rate, rate * 4 * ch, 4 * ch, 32)
    with path.open("wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
                + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
                + b"data" + struct.pack("<I", len(data)) + data)
    return path


def _transcribe(model, path: Path, *extra):
    """The CLI's defaults (beam 5), as a user runs it."""
    cp = run_sotto(["-m", model, "-f", "json", "-q", *extra, path],
                   timeout=300)
    objs = parse_json_lines(cp.stdout)
    return cp, (objs[0] if objs else None)


# --- float samples are sanitised as sottod does: NaN/Inf as 0, clipped --------

def _hostile_files(tmp_path: Path) -> dict[str, tuple[Path, bool]]:
    """name -> (file, whether it holds JFK's speech)."""
    x = jfk_samples()
    files = {}

    def add(name, y, speech=True, rate=16000):
        files[name] = (write_f32_wav(tmp_path / f"{name}.wav", y, rate),
                       speech)

    add("plain", x)
    for v in (1e10, 1e20, np.inf, -np.inf, np.nan):
        y = x.copy()
        y[80000] = v
        add(f"one-{v}", y)
    y = x.copy()
    y[40000:40400] = np.nan         # 25 ms of NaN in a word
    add("nan-burst", y)
    add("gain-8", x * 8)            # clipped hard, still speech
    add("all-nan", np.full(160000, np.nan, np.float32), speech=False)
    add("all-inf", np.full(160000, np.inf, np.float32), speech=False)
    # through the resampler: one NaN used to poison every sample after it
    idx = np.arange(0, len(x), 16000 / 22050)
    y22 = np.interp(idx, np.arange(len(x)), x).astype(np.float32)
    y22[len(y22) // 3] = np.nan
    y22[len(y22) // 2] = 1e10
    add("22k-nan-1e10", y22, rate=22050)
    st = np.stack([x, x], axis=1)
    st[80000, 0] = np.nan           # one channel bad, the other fine
    add("stereo-nan", st)
    return files


def test_float_samples_sanitised(tiny_model, tmp_path):
    files = _hostile_files(tmp_path)
    cp, plain = _transcribe(tiny_model, files["plain"][0])
    assert cp.returncode == 0 and plain, cp.stderr
    want = normalise(plain["text"])
    assert "ask not what your country" in want, want
    problems = []
    for name, (path, speech) in files.items():
        cp, obj = _transcribe(tiny_model, path)
        if cp.returncode != 0 or obj is None:
            problems.append(f"{name}: exit {cp.returncode}: {cp.stderr[-300:]}")
            continue
        got = normalise(obj["text"])
        if speech and got != want:
            problems.append(f"{name}: {obj['text']!r}")
        if not speech and got:
            problems.append(f"{name}: text from no audio: {obj['text']!r}")
        report(f"f32 input {name}: {obj['text'].strip()[:60]!r}")
    assert not problems, "float input not sanitised:\n" + "\n".join(problems)
