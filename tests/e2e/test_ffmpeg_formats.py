"""`sotto transcribe` of files libsndfile cannot read, which FFmpeg's
libraries decode (common/audio-ffmpeg.c): m4a and mp4 (AAC), webm (Opus),
mkv (Vorbis), and mp3 beside them; and the message of a file that neither
reads, which names the formats that work.

The files are made here from ../shared/audio/jfk.wav by the ffmpeg program
(tests/encoded.py); each must give the WAV's words (normalised as the WER
is: a lossy codec may move a full stop).
"""

from __future__ import annotations

import subprocess

import pytest

import encoded
from conftest import (AUDIO_DIR, SOTTO_BIN, assert_no_crash, by_name,
                      normalise, parse_json_lines, run_sotto)

JFK = AUDIO_DIR / "jfk.wav"
# What the message of an unreadable file must name.
FORMAT_NAMES = ("wav", "flac", "ogg", "mp3", "m4a", "mp4", "webm", "mkv")


def transcribe(model, *args):
    return run_sotto(["-q", "-m", model, "-l", "en", "-t", "2",
                      "--beam-size", "1", *args], timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return encoded.encode_all(JFK, tmp_path_factory.mktemp("ffmpeg"))


def test_formats_give_the_wavs_words(tiny_model, files):
    """All five in one run (one line of JSON each) against the WAV."""
    cp = transcribe(tiny_model, "-f", "json", JFK, *files.values())
    assert cp.returncode == 0, cp.stderr
    got = by_name(parse_json_lines(cp.stdout))
    want = normalise(got[JFK.name]["text"])
    assert want.startswith("and so my fellow americans"), want
    for ext, path in files.items():
        assert normalise(got[path.name]["text"]) == want, (ext, got[path.name])
        # the length is the file's, not a part of it
        assert got[path.name]["duration"] == pytest.approx(11.0, abs=0.1), ext


def assert_names_formats(msg: str) -> None:
    assert "not an audio file" in msg, msg
    for name in FORMAT_NAMES:
        assert name in msg, (name, msg)


def test_unreadable_files_name_the_formats(tiny_model, files, tmp_path):
    """An m4a cut before its index (moov, which ffmpeg writes last) and
    bytes that are no audio: a non-zero exit and a message naming the
    formats that work; no transcript."""
    m4a = files["m4a"].read_bytes()
    cut = tmp_path / "cut.m4a"
    cut.write_bytes(m4a[:len(m4a) // 2])
    junk = tmp_path / "junk.webm"
    junk.write_bytes(bytes((i * 7919) % 251 for i in range(50000)))
    for path in (cut, junk):
        cp = transcribe(tiny_model, path)
        assert cp.returncode != 0 and cp.stdout == "", (path, cp)
        msg = cp.stderr.strip()
        assert msg.startswith(f"sotto transcribe: {path}: "), msg
        assert "FFmpeg: " in msg, msg
        assert_names_formats(msg)


def test_webm_cut_short(tiny_model, files, tmp_path):
    """A webm cut in the middle: the words before the cut, and a non-zero
    exit saying where the file ended against its header's length."""
    webm = files["webm"].read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(webm[:len(webm) // 2])
    cp = transcribe(tiny_model, cut)
    assert cp.returncode != 0, cp
    assert normalise(cp.stdout).startswith("and so my fellow americans"), cp
    assert "ends after" in cp.stderr and "of the 11.0" in cp.stderr, cp.stderr


def test_stdin(tiny_model, files):
    """Redirected from a file, a webm is read as the file; from a pipe,
    whose first bytes libsndfile has taken, it is refused with a message
    saying to give it as a file."""
    with open(files["webm"], "rb") as f:
        cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-q", "-m",
                             str(tiny_model), "-l", "en", "-t", "2",
                             "--beam-size", "1", "-"], stdin=f,
                            capture_output=True, text=True, timeout=300)
    assert_no_crash(cp, "transcribe - < webm")
    assert cp.returncode == 0, cp.stderr
    assert normalise(cp.stdout).startswith("and so my fellow americans")
    cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-q", "-m",
                         str(tiny_model), "-"],
                        input=files["webm"].read_bytes(),
                        capture_output=True, timeout=300)
    assert cp.returncode != 0 and cp.stdout == b"", cp
    assert b"give other formats as a file" in cp.stderr, cp.stderr
