"""Helpers and fixtures the converter tests share (test_convert.py,
test_convert_cli.py): the paths, the Python the tools run under, running
a tool, and the real tiny.en source (scripts/fetch-model) and its
conversion, made once a session.

`from conftest import NAME` means this file in these tests (pytest plugin
tests/conftest_switch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
sys.path.insert(0, str(TOOLS))

PY = os.environ.get("SOTTO_PYTHON") or sys.executable


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, SOTTO_PYTHON=PY)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=1200, **kw)


def fetch_source_dir(name: str) -> Path:
    cp = run([REPO / "scripts" / "fetch-model", name, "--source-dir"])
    if cp.returncode != 0:
        pytest.fail(f"scripts/fetch-model {name} --source-dir failed:\n{cp.stderr[-3000:]}")
    return Path(cp.stdout.strip().splitlines()[-1])


def convert(src: Path, out: Path, name: str = "test") -> None:
    cp = run([PY, TOOLS / "convert.py", src, "-o", out, "--name", name])
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == ""


@pytest.fixture(scope="session")
def tiny_ct2() -> Path:
    return fetch_source_dir("tiny.en")


@pytest.fixture(scope="session")
def tiny_gguf(tiny_ct2, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "tiny.en.gguf"
    convert(tiny_ct2, out, "tiny.en")
    return out
