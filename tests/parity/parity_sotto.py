"""libsotto through ctypes, for the family parity tests: load a model in a
precision, log-mel, encode, the SOT sequence, teacher-forced logits."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
LIB = Path(os.environ.get("SOTTO_LIB", REPO / "build" / "lib" / "libsotto.so.0"))
PREC = {"fp32": 1, "bf16": 2}
N_CTX = 1500
F32P = ctypes.POINTER(ctypes.c_float)
I32P = ctypes.POINTER(ctypes.c_int32)


class ModelParams(ctypes.Structure):
    _fields_ = [("precision", ctypes.c_int), ("threads", ctypes.c_int)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p)] + [(n, ctypes.c_int) for n in (
        "n_mels", "n_audio_state", "n_audio_layer", "n_audio_head", "n_text_state", "n_text_layer",
        "n_text_head", "n_vocab", "multilingual", "precision", "threads")]


def _lib():
    if not LIB.is_file():
        raise RuntimeError(f"{LIB} is missing: meson compile -C build")
    so = ctypes.CDLL(str(LIB))
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    sigs = {
        "sotto_model_params_init": ([ctypes.POINTER(ModelParams)], None),
        "sotto_model_load": ([cp, ctypes.POINTER(ModelParams), ctypes.POINTER(vp), cp], ctypes.c_int),
        "sotto_model_info": ([vp, ctypes.POINTER(ModelInfo)], None),
        "sotto_model_free": ([vp], None),
        "sotto_state_new": ([vp], vp),
        "sotto_state_free": ([vp], None),
        "sotto_language_count": ([vp], ctypes.c_int),
        "sotto_language_code": ([vp, ctypes.c_int], cp),
        "sotto_log_mel": ([vp, F32P, ctypes.c_size_t, F32P, ctypes.c_size_t, cp], ctypes.c_int),
        "sotto_encode": ([vp, F32P, F32P, cp], ctypes.c_int),
        "sotto_sot_sequence": ([vp, cp, ctypes.c_int, ctypes.c_int, I32P, cp], ctypes.c_int),
        "sotto_detect_language": ([vp, F32P, cp], ctypes.c_int),
        "sotto_decode_logits": ([vp, I32P, ctypes.c_int, ctypes.c_int, F32P, cp], ctypes.c_int),
    }
    for name, (args, res) in sigs.items():
        f = getattr(so, name)
        f.argtypes, f.restype = args, res
    return so


_SO = None


def _f32(a: np.ndarray):
    assert a.dtype == np.float32 and a.flags.c_contiguous
    return a.ctypes.data_as(F32P)


class Sotto:
    """One loaded model and one state; close() frees both."""

    def __init__(self, path: Path, precision: str, threads: int = 2):
        global _SO
        if _SO is None:
            _SO = _lib()
        self.so = _SO
        p = ModelParams()
        self.so.sotto_model_params_init(ctypes.byref(p))
        p.precision, p.threads = PREC[precision], threads
        self.model, self.state = ctypes.c_void_p(), None
        err = ctypes.create_string_buffer(256)
        rc = self.so.sotto_model_load(str(path).encode(), ctypes.byref(p), ctypes.byref(self.model), err)
        if rc != 0:
            raise RuntimeError(f"sotto_model_load({path}): {err.value.decode()}")
        self.info = ModelInfo()
        self.so.sotto_model_info(self.model, ctypes.byref(self.info))
        self.state = self.so.sotto_state_new(self.model)
        if not self.state:
            self.close()
            raise RuntimeError("sotto_state_new failed")

    def _check(self, rc, err, what):
        if rc < 0:
            raise RuntimeError(f"{what}: {err.value.decode()}")
        return rc

    def languages(self) -> list[str]:
        n = self.so.sotto_language_count(self.model)
        return [self.so.sotto_language_code(self.model, i).decode() for i in range(n)]

    def log_mel(self, pcm: np.ndarray, n_frames: int) -> np.ndarray:
        out = np.empty((self.info.n_mels, n_frames), np.float32)
        err = ctypes.create_string_buffer(256)
        self._check(self.so.sotto_log_mel(self.model, _f32(pcm), len(pcm), _f32(out), n_frames, err), err, "log_mel")
        return out

    def encode(self, mel: np.ndarray) -> np.ndarray:
        out = np.empty((self.info.n_audio_state, N_CTX), np.float32)
        err = ctypes.create_string_buffer(256)
        self._check(self.so.sotto_encode(self.state, _f32(mel), _f32(out), err), err, "encode")
        return out

    def sot_sequence(self, language: str | None, translate: bool = False, notimestamps: bool = False) -> list[int]:
        out = (ctypes.c_int32 * 4)()
        err = ctypes.create_string_buffer(256)
        n = self._check(self.so.sotto_sot_sequence(self.model, language.encode() if language else None,
                                                   int(translate), int(notimestamps), out, err), err, "sot_sequence")
        return list(out[:n])

    def detect_language(self) -> tuple[int, np.ndarray]:
        """(index of the most likely language, every language's probability)."""
        probs = np.empty(self.so.sotto_language_count(self.model), np.float32)
        err = ctypes.create_string_buffer(256)
        best = self._check(self.so.sotto_detect_language(self.state, _f32(probs), err), err, "detect_language")
        return best, probs

    def decode_logits(self, tokens: list[int], n_prompt: int) -> np.ndarray:
        """Logits after the prompt and after each forced token."""
        toks = (ctypes.c_int32 * len(tokens))(*tokens)
        out = np.empty((len(tokens) - n_prompt + 1, self.info.n_vocab), np.float32)
        err = ctypes.create_string_buffer(256)
        self._check(self.so.sotto_decode_logits(self.state, toks, len(tokens), n_prompt, _f32(out), err), err,
                    "decode_logits")
        return out

    def close(self):
        if self.state:
            self.so.sotto_state_free(self.state)
            self.state = None
        if self.model:
            self.so.sotto_model_free(self.model)
            self.model = ctypes.c_void_p()
