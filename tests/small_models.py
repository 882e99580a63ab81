"""What tests/speaker and tests/vad share: their model (CAM++, Silero VAD)
and its source file from scripts/fetch-model, libsotto through ctypes, and
a load's error. Anything missing fails (a skipped test is not a pass)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = Path(os.environ.get("SOTTO_LIB", REPO / "build" / "lib" / "libsotto.so.0"))
from audio import AUDIO_DIR  # noqa: E402
PY = os.environ.get("SOTTO_PYTHON") or sys.executable
F32P = ctypes.POINTER(ctypes.c_float)


def fetch(model: str, *args: str) -> Path:
    """scripts/fetch-model MODEL ARGS: the path it prints last."""
    env = dict(os.environ, SOTTO_PYTHON=PY)
    cp = subprocess.run([str(REPO / "scripts" / "fetch-model"), model, *args], cwd=REPO, env=env,
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    if cp.returncode != 0:
        pytest.fail(f"scripts/fetch-model {model} {' '.join(args)} failed:\n{cp.stderr[-3000:]}")
    return Path(cp.stdout.strip().splitlines()[-1])


def fetch_source(model: str, filename: str) -> Path:
    """The file filename of the package fetch-model converts model from."""
    p = fetch(model, "--source-dir") / filename
    if not p.is_file():
        pytest.fail(f"{p} is missing")
    return p


def load_libsotto() -> ctypes.CDLL:
    if not LIB.is_file():
        pytest.fail(f"{LIB} is missing: meson compile -C build")
    return ctypes.CDLL(str(LIB))


def load_error(load: Callable, free: Callable, path: Path, err) -> tuple[int, str]:  # noqa: ANN001
    """load(path, &model, err)'s status and message; a model it did load
    is freed."""
    m = ctypes.c_void_p()
    rc = load(str(path).encode(), ctypes.byref(m), err)
    if rc == 0:
        free(m)
    return rc, err.value.decode()
