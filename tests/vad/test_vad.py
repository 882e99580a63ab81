"""Silero VAD in libsotto against the silero-vad package's own ONNX model in
onnxruntime (speech probabilities within 1e-3 per 32 ms chunk), and its
speech regions against faster-whisper's get_speech_timestamps() on the
same probabilities (identical regions)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import AUDIO_DIR, CHUNK, PY, REPO, read_wav, speech_files

TOL = 1e-3
SR = 16000


def synthetic() -> dict[str, np.ndarray]:
    """Non-speech and edge signals, 4 s each (fixed seed)."""
    rng = np.random.default_rng(20251125)
    t = np.arange(4 * SR) / SR
    chord = sum(np.sin(2 * np.pi * f * t) for f in (261.6, 329.6, 392.0)) / 3
    clicks = np.zeros_like(t)
    clicks[:: SR // 4] = 0.9
    return {
        "silence": np.zeros(4 * SR),
        "white": 0.1 * rng.standard_normal(4 * SR),
        "tone": 0.5 * np.sin(2 * np.pi * 440 * t),
        "chord": 0.5 * chord,
        "clicks": clicks,
        "square-full-scale": np.sign(np.sin(2 * np.pi * 100 * t)),
        "odd-length": 0.05 * rng.standard_normal(SR + 77),
    }


@pytest.mark.parametrize("path", speech_files(), ids=lambda p: p.name)
def test_probs_match_onnxruntime_speech(path, sotto_vad, ort_vad):
    x = read_wav(path)
    got, ref = sotto_vad.probs(x), ort_vad.probs(x)
    err = float(np.abs(got - ref).max())
    print(f"{path.name}: {len(ref)} chunks, max |sotto - onnxruntime| {err:.2e}, "
          f"speech chunks {(ref >= 0.5).mean():.2f}")
    assert err <= TOL
    assert (ref >= 0.5).any(), "speech with no chunk over 0.5: wrong audio?"


@pytest.mark.parametrize("name", list(synthetic()))
def test_probs_match_onnxruntime_synthetic(name, sotto_vad, ort_vad):
    x = synthetic()[name].astype(np.float32)
    got, ref = sotto_vad.probs(x), ort_vad.probs(x)
    assert float(np.abs(got - ref).max()) <= TOL


def test_chunk_calls_equal_probs(sotto_vad):
    """sotto_vad_chunk() one chunk at a time is sotto_vad_probs()."""
    x = read_wav(AUDIO_DIR / "jfk.wav")[: 200 * CHUNK]
    assert np.array_equal(sotto_vad.chunks(x), sotto_vad.probs(x))


def test_state_is_per_stream(sotto_vad):
    """A fresh state starts from zeros: the same audio twice gives the same
    probabilities, and audio before it changes them (the LSTM remembers)."""
    x = read_wav(AUDIO_DIR / "jfk.wav")[: 100 * CHUNK]
    a, b = sotto_vad.probs(x), sotto_vad.probs(x)
    assert np.array_equal(a, b)
    c = sotto_vad.probs(np.concatenate([x, x]))[100:]
    assert not np.array_equal(a, c)


def test_load_refuses_a_whisper_model(sotto_vad, tmp_path):
    tiny = REPO / "models" / "tiny.en.gguf"
    if tiny.is_file():
        rc, msg = sotto_vad.load_error(tiny)
        assert rc != 0 and "is not a Silero VAD model" in msg and "fetch-model silero-vad" in msg
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 8)
    rc, msg = sotto_vad.load_error(bad)
    assert rc != 0 and str(bad) in msg


# --- speech regions ----------------------------------------------------------

PARAMS = [
    {},
    {"threshold": 0.6, "min_silence_duration_ms": 500, "speech_pad_ms": 200},
    {"min_speech_duration_ms": 250, "min_silence_duration_ms": 100, "speech_pad_ms": 30},
    {"max_speech_duration_s": 5.0, "min_silence_duration_ms": 300},
    {"max_speech_duration_s": 2.0, "min_silence_duration_ms": 100, "speech_pad_ms": 0},
    {"neg_threshold": 0.2, "threshold": 0.4, "min_silence_duration_ms": 0},
]


def fw_regions(probs: np.ndarray, n: int, params: dict, monkeypatch) -> list[dict]:
    from faster_whisper import vad as fwvad

    monkeypatch.setattr(fwvad, "get_vad_model", lambda: (lambda audio: probs[: len(audio) // CHUNK]))
    return fwvad.get_speech_timestamps(np.zeros(n, np.float32), fwvad.VadOptions(**params))


def random_probs(seed: int, n: int) -> np.ndarray:
    """Runs of speech and silence of random lengths, probabilities near
    both thresholds: the splitting paths of long regions are taken."""
    rng = np.random.default_rng(seed)
    out, speech = [], False
    while len(out) < n:
        run = int(rng.integers(1, 400 if speech else 120))
        centre = 0.8 if speech else 0.2
        out += list(np.clip(centre + 0.25 * rng.standard_normal(run), 0, 1))
        speech = not speech
    return np.array(out[:n], np.float32)


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults")
def test_regions_match_faster_whisper(params, sotto_vad, monkeypatch):
    cases = []
    for path in speech_files():
        x = read_wav(path)
        # faster-whisper pads with 512 - n % 512 zeros: one whole chunk more
        # when n is a multiple of 512
        padded = np.pad(x, (0, CHUNK - len(x) % CHUNK))
        cases.append((path.name, sotto_vad.probs(padded), len(x)))
    for seed in range(4):
        n_chunks = 6000
        cases.append((f"random{seed}", random_probs(seed, n_chunks), (n_chunks - 1) * CHUNK + 100 * seed))
    for name, probs, n in cases:
        want = fw_regions(probs, n, params, monkeypatch)
        got = sotto_vad.speech(probs, n, **params)
        assert got == want, f"{name}: {len(got)} regions, faster-whisper {len(want)}"


# --- the converter -----------------------------------------------------------

def test_converter_reads_both_onnx_layouts(vad_onnx, vad_gguf, tmp_path):
    """silero_vad.onnx keeps its weights in If branches (16 kHz and 8 kHz),
    silero_vad_16k_op15.onnx as initializers: one and the same GGUF."""
    import zipfile

    import gguf

    wheel = next((p for p in (vad_onnx.parents[2] / "wheels").glob("silero_vad-*.whl")), None)
    assert wheel is not None, "the pinned silero-vad wheel is not in the cache"
    op15 = tmp_path / "op15.onnx"
    with zipfile.ZipFile(wheel) as z:
        op15.write_bytes(z.read("silero_vad/data/silero_vad_16k_op15.onnx"))
    out = tmp_path / "op15.gguf"
    cp = subprocess.run([PY, str(REPO / "tools" / "convert_vad.py"), str(op15), "-o", str(out)],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    a, b = gguf.GGUFReader(str(vad_gguf)), gguf.GGUFReader(str(out))
    ta = {t.name: np.array(t.data) for t in a.tensors}
    tb = {t.name: np.array(t.data) for t in b.tensors}
    assert sorted(ta) == sorted(tb) and len(ta) == 15
    for k in ta:
        assert np.array_equal(ta[k], tb[k]), k
    arch = a.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]) == b"silero-vad"


def test_converter_refuses_other_files(tmp_path):
    bad = tmp_path / "not.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    out = tmp_path / "out.gguf"
    cp = subprocess.run([PY, str(REPO / "tools" / "convert_vad.py"), str(bad), "-o", str(out)],
                        capture_output=True, text=True)
    assert cp.returncode == 1 and "Traceback" not in cp.stderr and "convert_vad: error:" in cp.stderr
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))
    whisper_like = tmp_path / "other.onnx"
    import onnx
    from onnx import helper, numpy_helper

    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
                          [numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")])
    onnx.save(helper.make_model(g), str(whisper_like))
    cp = subprocess.run([PY, str(REPO / "tools" / "convert_vad.py"), str(whisper_like), "-o", str(out)],
                        capture_output=True, text=True)
    assert cp.returncode == 1 and "not a Silero VAD v5/v6 ONNX file" in cp.stderr, cp.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
