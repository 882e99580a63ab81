"""libsotto's CAM++ built with AddressSanitizer and UndefinedBehaviorSanitizer
(build-asan/, made by `scripts/setup --asan`): tests/speaker/speaker_driver.c
embeds real speech and is given bad input. Any sanitizer report, a leak
included, fails the test; the embeddings still match PyTorch's."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from conftest import AUDIO_DIR, REPO, cosine

ASAN_DRIVER = REPO / "build-asan" / "tests" / "speaker" / "speaker-driver"
FILES = {"jfk": "jfk.wav", "goforward": "goforward.wav", "ls-2830": "2830-3980-0043.wav",
         "sas-0880": "sense_and_sensibility_01_austen_64kb-0880.wav"}


def run_asan(*args) -> subprocess.CompletedProcess:
    if not (ASAN_DRIVER.is_file() and os.access(ASAN_DRIVER, os.X_OK)):
        pytest.fail(f"{ASAN_DRIVER} is missing: build it with scripts/setup --asan")
    env = dict(os.environ, ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               LSAN_OPTIONS=f"suppressions={REPO / 'tests' / 'lsan.supp'}")
    cp = subprocess.run([str(ASAN_DRIVER), *map(str, args)], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                        capture_output=True, text=True, errors="replace", timeout=900)
    for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert mark not in cp.stderr, cp.stderr[-4000:]
    assert cp.returncode in (0, 1), cp.stderr[-4000:]
    return cp


def test_asan_embeddings(campplus_gguf, torch_reference):
    cp = run_asan(campplus_gguf, *(AUDIO_DIR / f for f in FILES.values()))
    assert cp.returncode == 0, cp.stderr[-3000:]
    lines = cp.stdout.splitlines()
    assert len(lines) == len(FILES)
    for name, line in zip(FILES, lines):
        emb = np.array(line.split()[1:], np.float64)
        assert emb.shape == (192,)
        assert cosine(emb, torch_reference[name]["embedding"]) >= 0.999


def test_asan_bad_inputs(campplus_gguf, tmp_path):
    junk = tmp_path / "junk.wav"
    junk.write_bytes(os.urandom(4096))
    short = tmp_path / "short.wav"
    with open(AUDIO_DIR / "goforward.wav", "rb") as f:
        short.write_bytes(f.read()[:44 + 2 * 500])  # the header and 500 samples
    cp = run_asan(campplus_gguf, junk, short, tmp_path / "missing.wav", AUDIO_DIR / "goforward.wav")
    assert cp.returncode == 1 and len(cp.stdout.splitlines()) == 1
    assert "at least 720 samples" in cp.stderr
    for name in ("junk.wav", "missing.wav"):
        assert name in cp.stderr
    bad_model = tmp_path / "bad.gguf"
    bad_model.write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(64))
    cp = run_asan(bad_model, AUDIO_DIR / "goforward.wav")
    assert cp.returncode == 1 and str(bad_model) in cp.stderr
