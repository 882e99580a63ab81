"""Speech helpers the daemon's door tests share (Realtime, Deepgram,
vocabulary, telephony): words as compared, `sotto transcribe`'s words of
a file as the reference, and a file's samples in a raw format made by sox.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import SOTTO


def words(text: str) -> list[str]:
    """Lower-case words and numbers, punctuation dropped."""
    return re.findall(r"[a-z0-9']+", text.lower())


_refs: dict[tuple[Path, Path], list[str]] = {}


def reference(path: Path, model: Path) -> list[str]:
    """`sotto transcribe`'s words of path (the defaults: beam 5), once per
    file and model in a run."""
    key = (path, model)
    if key not in _refs:
        cp = subprocess.run([str(SOTTO), "transcribe", "-q", "-m", str(model),
                             "-t", "2", "-f", "txt", str(path)],
                            capture_output=True, text=True, timeout=600)
        assert cp.returncode == 0, cp.stderr
        _refs[key] = words(cp.stdout)
    return _refs[key]


def raw(path: Path, *fmt: str) -> bytes:
    """The file's samples, mono, in a raw format as sox writes it
    (-D: without dither, which is random, so the same samples every run)."""
    return subprocess.run(["sox", "-D", str(path), "-c", "1", *fmt, "-t",
                           "raw", "-"], capture_output=True,
                          check=True).stdout
