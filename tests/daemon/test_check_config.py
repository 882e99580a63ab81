"""sottod --check-config checks the model the configuration names, not only
the file's syntax: the name resolves to a file, the file is a Whisper GGUF
sotto reads, and [engine]/[mic] languages are ones the model has. Each
error names the file and line of the key at fault (or --model)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, SOTTOD, report


@pytest.fixture(scope="module")
def base_model() -> Path:
    """The multilingual base model (scripts/test fetches it)."""
    env = dict(os.environ)
    env.setdefault("SOTTO_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    cp = subprocess.run([str(REPO / "scripts" / "fetch-model"), "base"],
                        cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=1800)
    path = Path(cp.stdout.strip().splitlines()[-1]) if cp.stdout.strip() else None
    if cp.returncode != 0 or path is None or not path.is_file():
        pytest.fail(f"scripts/fetch-model base failed:\n{cp.stderr[-3000:]}")
    return path


def check(conf: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config",
                           *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


def line_of(text: str, needle: str) -> int:
    return next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)


def test_english_only_model_with_another_language(tiny_model, tmp_path):
    conf = tmp_path / "sottod.conf"
    text = f"[server]\nmax_sessions = 4\n\n[engine]\nmodel = {tiny_model}\n" \
           "# German speakers\nlanguage = de\n"
    conf.write_text(text)
    cp = check(conf)
    want = f"{conf}:{line_of(text, 'language = de')}: language: "
    assert cp.returncode == 1, cp.stdout
    assert want in cp.stderr and "English-only" in cp.stderr, cp.stderr
    assert cp.stdout == "", "printed the configuration after an error"
    report(f"--check-config: {cp.stderr.strip()}")

    for ok in ("en", "auto"):
        conf.write_text(text.replace("language = de", f"language = {ok}"))
        cp = check(conf)
        assert cp.returncode == 0, cp.stderr
        assert f"language = {ok}" in cp.stdout


def test_multilingual_model_languages(base_model, tmp_path):
    conf = tmp_path / "sottod.conf"
    text = f"[engine]\nmodel = {base_model}\nlanguage = de\n\n[mic]\n" \
           "enabled = no\nlanguage = fr\n"
    conf.write_text(text)
    cp = check(conf)
    assert cp.returncode == 0, cp.stderr
    assert "language = de" in cp.stdout and "language = fr" in cp.stdout

    # "zz" has the form of a code but is no language of Whisper's.
    bad = text.replace("language = fr", "language = zz")
    conf.write_text(bad)
    cp = check(conf)
    assert cp.returncode == 1, cp.stdout
    assert f"{conf}:{line_of(bad, 'language = zz')}: language: " in cp.stderr
    assert '"zz"' in cp.stderr, cp.stderr

    # The same [mic] language with an English-only model on the command line.
    cp = check(conf, "-m", str(base_model.parent / "tiny.en.gguf"))
    assert cp.returncode == 1
    assert f"{conf}:{line_of(bad, 'language = de')}: language: " in cp.stderr


def test_model_that_does_not_resolve_or_load(tiny_model, tmp_path):
    conf = tmp_path / "sottod.conf"
    empty = tmp_path / "models"
    empty.mkdir()
    text = "[engine]\nmodel = no-such-model\n"
    conf.write_text(text)
    cp = check(conf, env={"SOTTO_MODEL_DIR": str(empty)})
    assert cp.returncode == 1
    assert f"{conf}:2: model: model 'no-such-model' not found" in cp.stderr, cp.stderr
    # from the build tree, the source tree's command (installed, the
    # installed one: test_install.py)
    assert "'scripts/fetch-model no-such-model'" in cp.stderr, cp.stderr

    # A file cut short (a download that stopped) and a file that is no GGUF.
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_model.read_bytes()[: 1 << 20])
    notgguf = tmp_path / "text.gguf"
    notgguf.write_text("not a model\n" * 100)
    for f, what in ((cut, "past the end of the file"), (notgguf, "not a GGUF")):
        conf.write_text(f"[server]\nlog_level = info\n[engine]\nmodel = {f}\n")
        cp = check(conf)
        assert cp.returncode == 1
        assert f"{conf}:4: model: {f}" in cp.stderr and what in cp.stderr, cp.stderr

    # From the command line, the message names --model.
    conf.write_text("[engine]\nlanguage = en\n")
    cp = check(conf, "-m", str(cut))
    assert cp.returncode == 1 and cp.stderr.startswith("sottod: --model: "), cp.stderr
    cp = check(conf, "-m", str(tiny_model))
    assert cp.returncode == 0, cp.stderr


def test_listeners(tiny_model, tmp_path):
    """[http] listen off loopback without [http] token, and HTTP and
    Wyoming on one port: errors at the key's line (or the flag), as
    sottod would refuse to start; a token, or another port, passes."""
    conf = tmp_path / "sottod.conf"
    text = f"[engine]\nmodel = {tiny_model}\n\n[http]\n" \
           "listen = 0.0.0.0:8000\n\n[wyoming]\nlisten = 127.0.0.1:8000\n"
    conf.write_text(text)
    cp = check(conf)
    assert cp.returncode == 1, cp.stdout
    assert f"{conf}:{line_of(text, 'listen = 0.0.0.0')}: listen: " \
        "0.0.0.0:8000 is not a loopback address: set [http] token" \
        in cp.stderr, cp.stderr
    report(f"--check-config: {cp.stderr.strip()}")
    text = text.replace("[http]\n", "[http]\ntoken = t0ken-0123456789\n")
    conf.write_text(text)
    cp = check(conf)
    assert cp.returncode == 1, cp.stdout
    assert f"{conf}:{line_of(text, 'listen = 127.0.0.1:8000')}: listen: " \
        "127.0.0.1:8000 and [http] listen 0.0.0.0:8000 share a port" \
        in cp.stderr, cp.stderr
    report(f"--check-config: {cp.stderr.strip()}")
    # the flags win over the file, and are named as such
    cp = check(conf, "--wyoming", "[::1]:8000", "--http", "10.1.2.3:8000")
    assert cp.returncode == 0, cp.stderr
    assert "listen = [::1]:8000" in cp.stdout, cp.stdout
    conf.write_text(text.replace("token = t0ken-0123456789\n", ""))
    cp = check(conf, "--http", "[::]:8000")
    assert cp.returncode == 1 and cp.stderr.startswith(
        "sottod: --http: [::]:8000 is not a loopback address"), cp.stderr
    conf.write_text(text.replace("127.0.0.1:8000", "127.0.0.1:10300"))
    cp = check(conf)
    assert cp.returncode == 0, cp.stderr
    assert "listen = 127.0.0.1:10300" in cp.stdout, cp.stdout
