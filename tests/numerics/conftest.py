"""Shared helpers for the numerics tests (pytest).

- whisper_mel_filters(n_mels): openai/whisper's assets/mel_filters.npz,
  fetched once with `pip download` and cached in ~/.cache/sotto/.
- read_wav(path): 16-bit PCM WAV as float32 in [-1, 1), as whisper's
  load_audio (int16 / 32768).
- audio_files(): the development speech samples (tests/audio.py:
  SOTTO_AUDIO_DIR, else ../shared/audio beside the clone).
- build_shared(sources, out): compile C files of this repo into a .so.

The same helpers are exposed as fixtures of the same names.
"""

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import wave
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SOTTO_CACHE_DIR",
                            Path.home() / ".cache" / "sotto"))
from audio import AUDIO_DIR  # noqa: E402
WHISPER_PIN = "openai-whisper==20250625"
MEL_NPZ = "mel_filters.npz"

CFLAGS = ["-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
          "-Wstrict-prototypes", "-Wmissing-prototypes", "-D_GNU_SOURCE",
          "-fPIC", "-shared"]


def _pip():
    """The pip command of this interpreter, or the one on PATH."""
    try:
        subprocess.run([sys.executable, "-m", "pip", "--version"],
                       check=True, capture_output=True)
        return [sys.executable, "-m", "pip"]
    except (subprocess.CalledProcessError, OSError):
        pip = shutil.which("pip3") or shutil.which("pip")
        if pip is None:
            pytest.fail("no pip to fetch %s's mel_filters.npz; put it in %s"
                        % (WHISPER_PIN, CACHE / MEL_NPZ))
        return [pip]


def _fetch_mel_npz():
    """Download openai-whisper's sdist and extract assets/mel_filters.npz."""
    dl = CACHE / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    tarballs = sorted(dl.glob("openai_whisper-*.tar.gz"))
    if not tarballs:
        r = subprocess.run(_pip() + ["download", "--no-deps", WHISPER_PIN,
                                     "-d", str(dl)],
                           capture_output=True, text=True)
        tarballs = sorted(dl.glob("openai_whisper-*.tar.gz"))
        if r.returncode != 0 or not tarballs:
            pytest.fail("pip download %s failed (network?); put "
                        "whisper/assets/%s in %s\n%s"
                        % (WHISPER_PIN, MEL_NPZ, CACHE, r.stderr[-2000:]))
    with tarfile.open(tarballs[-1]) as tf:
        member = next(m for m in tf.getmembers()
                      if m.name.endswith("whisper/assets/" + MEL_NPZ))
        data = tf.extractfile(member).read()
    fd, tmp = tempfile.mkstemp(dir=CACHE, suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, CACHE / MEL_NPZ)


def whisper_mel_filters(n_mels=80):
    """openai/whisper's filter bank, float32 [n_mels][201] (80 or 128)."""
    path = CACHE / MEL_NPZ
    if not path.exists():
        _fetch_mel_npz()
    with np.load(path, allow_pickle=False) as f:
        return np.ascontiguousarray(f["mel_%d" % n_mels], dtype=np.float32)


def read_wav(path):
    """16 kHz mono 16-bit WAV as float32 = int16 / 32768."""
    with wave.open(str(path), "rb") as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != \
                (1, 2, 16000):
            raise ValueError("%s: want 16 kHz mono s16" % path)
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


def audio_files():
    """Sorted paths of the development WAV files (may be empty)."""
    return sorted(AUDIO_DIR.glob("*.wav")) if AUDIO_DIR.is_dir() else []


def build_shared(sources, out, cflags=(), libs=()):
    """Compile repo-relative C sources into the shared library out."""
    cc = os.environ.get("CC", "gcc")
    cmd = [cc] + CFLAGS + ["-I", str(REPO / "lib")] + list(cflags)
    cmd += [str(REPO / s) for s in sources] + ["-o", str(out)] + list(libs)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("build failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return out


def pkg_config(*args):
    """Output of pkg-config split into arguments."""
    r = subprocess.run(["pkg-config"] + list(args), capture_output=True,
                       text=True, check=True)
    return r.stdout.split()


@pytest.fixture(scope="session")
def mel_filters():
    return whisper_mel_filters


@pytest.fixture(scope="session", name="read_wav")
def read_wav_fixture():
    return read_wav


@pytest.fixture(scope="session", name="audio_files")
def audio_files_fixture():
    files = audio_files()
    if not files:
        pytest.fail("no WAV files in %s (set SOTTO_AUDIO_DIR)" % AUDIO_DIR)
    return files
