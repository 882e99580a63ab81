"""Audio files in the formats FFmpeg decodes for sotto
(common/audio-ffmpeg.c), made at test time from a WAV of ../shared/audio
by Debian's ffmpeg program, an encoder independent of sotto's decoding.

`import encoded` works from every test folder (pytest.ini: pythonpath =
tests). Nothing is written into the tree: the files go to the directory
the caller gives (a pytest tmp_path).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# Each format with the codec a user's file most often holds, and some
# with another rate or more channels, so that mixing and resampling run.
FORMATS: dict[str, list[str]] = {
    "m4a": ["-c:a", "aac", "-b:a", "64k"],
    "mp4": ["-c:a", "aac", "-b:a", "96k", "-ar", "44100", "-ac", "2"],
    "webm": ["-c:a", "libopus", "-b:a", "32k"],
    "mkv": ["-c:a", "libvorbis", "-ar", "22050", "-ac", "3"],
    "mp3": ["-c:a", "libmp3lame", "-b:a", "64k"],
}


def encode(src: Path, dst: Path, args: list[str]) -> Path:
    """src encoded into dst (its suffix names the container)."""
    if not shutil.which("ffmpeg"):
        pytest.fail("the ffmpeg program is not installed (scripts/setup "
                    "installs it)")
    cp = subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y",
                         "-i", str(src), "-vn", *args, str(dst)],
                        stdin=subprocess.DEVNULL, capture_output=True,
                        text=True, timeout=120)
    if cp.returncode != 0 or not dst.is_file():
        pytest.fail(f"ffmpeg could not make {dst.name}: {cp.stderr[-2000:]}")
    return dst


def encode_all(src: Path, out: Path, names=None) -> dict[str, Path]:
    """{extension: file} of src in each of FORMATS (or those named)."""
    return {ext: encode(src, out / f"{src.stem}.{ext}", FORMATS[ext])
            for ext in (names or FORMATS)}
