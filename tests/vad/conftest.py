"""Fixtures of the Silero VAD tests: the pinned silero-vad package's ONNX
file and its GGUF (both from scripts/fetch-model silero-vad), libsotto's
VAD through ctypes, onnxruntime running the same ONNX file as the
reference, and the speech of ../shared/audio. Anything missing fails."""

from __future__ import annotations

import ctypes
import wave
from pathlib import Path

import numpy as np
import pytest

from small_models import AUDIO_DIR, F32P, PY, REPO, fetch, fetch_source, load_error, load_libsotto

CHUNK = 512


@pytest.fixture(scope="session")
def vad_gguf() -> Path:
    return fetch("silero-vad")


@pytest.fixture(scope="session")
def vad_onnx() -> Path:
    return fetch_source("silero-vad", "silero_vad.onnx")


class VadSpan(ctypes.Structure):
    _fields_ = [("start", ctypes.c_size_t), ("end", ctypes.c_size_t)]


class VadParams(ctypes.Structure):
    _fields_ = [("threshold", ctypes.c_float), ("neg_threshold", ctypes.c_float),
                ("min_speech_ms", ctypes.c_int), ("max_speech_s", ctypes.c_float),
                ("min_silence_ms", ctypes.c_int), ("speech_pad_ms", ctypes.c_int)]


class SottoVad:
    """libsotto's VAD: a loaded network and calls on fresh states."""

    def __init__(self, gguf: Path):
        so = load_libsotto()
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        sigs = {
            "sotto_vad_load": ([cp, ctypes.POINTER(vp), cp], ctypes.c_int),
            "sotto_vad_free": ([vp], None),
            "sotto_vad_state_new": ([vp], vp),
            "sotto_vad_state_free": ([vp], None),
            "sotto_vad_reset": ([vp], None),
            "sotto_vad_chunk": ([vp, F32P], ctypes.c_float),
            "sotto_vad_probs": ([vp, F32P, ctypes.c_size_t, F32P], ctypes.c_size_t),
            "sotto_vad_params_init": ([ctypes.POINTER(VadParams)], None),
            "sotto_vad_speech": ([F32P, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(VadParams),
                                  ctypes.POINTER(ctypes.POINTER(VadSpan)), ctypes.POINTER(ctypes.c_size_t), cp],
                                 ctypes.c_int),
        }
        for name, (args, res) in sigs.items():
            f = getattr(so, name)
            f.argtypes, f.restype = args, res
        self.so = so
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [vp]
        self.vad = vp()
        self.err = ctypes.create_string_buffer(256)
        if so.sotto_vad_load(str(gguf).encode(), ctypes.byref(self.vad), self.err) != 0:
            pytest.fail(f"sotto_vad_load: {self.err.value.decode()}")

    def load_error(self, path: Path) -> tuple[int, str]:
        return load_error(self.so.sotto_vad_load, self.so.sotto_vad_free, path, self.err)

    def probs(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        out = np.zeros((len(x) + CHUNK - 1) // CHUNK, np.float32)
        st = self.so.sotto_vad_state_new(self.vad)
        try:
            k = self.so.sotto_vad_probs(st, x.ctypes.data_as(F32P), len(x), out.ctypes.data_as(F32P))
        finally:
            self.so.sotto_vad_state_free(st)
        assert k == len(out)
        return out

    def chunks(self, x: np.ndarray) -> np.ndarray:
        """One sotto_vad_chunk() call per whole chunk, on one state."""
        x = np.ascontiguousarray(x, np.float32)
        st = self.so.sotto_vad_state_new(self.vad)
        try:
            return np.array([self.so.sotto_vad_chunk(st, x[i:].ctypes.data_as(F32P))
                             for i in range(0, len(x) - CHUNK + 1, CHUNK)], np.float32)
        finally:
            self.so.sotto_vad_state_free(st)

    def speech(self, probs: np.ndarray, n_samples: int, **params) -> list[dict]:
        p = VadParams()
        self.so.sotto_vad_params_init(ctypes.byref(p))
        for k, v in params.items():
            setattr(p, {"min_speech_duration_ms": "min_speech_ms", "max_speech_duration_s": "max_speech_s",
                        "min_silence_duration_ms": "min_silence_ms"}.get(k, k), v)
        probs = np.ascontiguousarray(probs, np.float32)
        spans = ctypes.POINTER(VadSpan)()
        n = ctypes.c_size_t()
        rc = self.so.sotto_vad_speech(probs.ctypes.data_as(F32P), len(probs), n_samples, ctypes.byref(p),
                                      ctypes.byref(spans), ctypes.byref(n), self.err)
        assert rc == 0, self.err.value.decode()
        out = [{"start": spans[i].start, "end": spans[i].end} for i in range(n.value)]
        self.libc.free(ctypes.cast(spans, ctypes.c_void_p))
        return out

    def close(self) -> None:
        self.so.sotto_vad_free(self.vad)


@pytest.fixture(scope="session")
def sotto_vad(vad_gguf):
    v = SottoVad(vad_gguf)
    yield v
    v.close()


class OrtVad:
    """The silero-vad package's own ONNX file in onnxruntime, fed as the
    package's OnnxWrapper feeds it: each 512-sample chunk after the last
    64 samples of the one before (zeros first), state carried over."""

    def __init__(self, path: Path):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        opts.log_severity_level = 4
        self.s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def probs(self, x: np.ndarray) -> np.ndarray:
        n = (len(x) + CHUNK - 1) // CHUNK
        x = np.pad(np.asarray(x, np.float32), (0, n * CHUNK - len(x)))
        state = np.zeros((2, 1, 128), np.float32)
        ctx = np.zeros((1, 64), np.float32)
        sr = np.array(16000, np.int64)
        out = np.zeros(n, np.float32)
        for i in range(n):
            ch = x[i * CHUNK:(i + 1) * CHUNK][None]
            p, state = self.s.run(None, {"input": np.concatenate([ctx, ch], 1), "state": state, "sr": sr})
            ctx = ch[:, -64:]
            out[i] = p[0, 0]
        return out


@pytest.fixture(scope="session")
def ort_vad(vad_onnx):
    return OrtVad(vad_onnx)


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1 or w.getframerate() != 16000:
            pytest.fail(f"{path}: expected 16 kHz mono s16 WAV")
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0


def speech_files() -> list[Path]:
    files = sorted(AUDIO_DIR.glob("*.wav"))
    return files or [AUDIO_DIR / "<no wav files>"]


__all__ = ["AUDIO_DIR", "PY", "REPO"]
