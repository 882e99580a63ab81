"""The output formats users of the other tools reach for: openai-whisper's
tsv, whisper.cpp's lrc, and -f all with --output-dir (openai-whisper's
--output_format all); and whisper.cpp's -osrt habit, which here would
write a file named 'srt', refused with what to use instead.

Each format's times and text are those of the json output of the same
run (jfk.wav, tiny.en greedy).
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import AUDIO_DIR, run_sotto

JFK = AUDIO_DIR / "jfk.wav"
GO = AUDIO_DIR / "goforward.wav"


def transcribe(model, *args, cwd=None):
    kw = {"cwd": cwd} if cwd is not None else {}
    return run_sotto(["-q", "-m", model, "-l", "en", "-t", "2", "--beam-size",
                      "1", *args], timeout=300, **kw)


@pytest.fixture(scope="module")
def segments(tiny_model):
    cp = transcribe(tiny_model, "-f", "json", JFK)
    assert cp.returncode == 0, cp.stderr
    segs = json.loads(cp.stdout)["segments"]
    assert len(segs) >= 2, segs
    return segs


def test_tsv(tiny_model, segments):
    """openai-whisper's tsv: a header, start and end in whole ms, text."""
    cp = transcribe(tiny_model, "-f", "tsv", JFK)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.split("\n")
    assert lines[0] == "start\tend\ttext" and lines[-1] == "", lines
    rows = [l.split("\t") for l in lines[1:-1]]
    assert len(rows) == len(segments)
    for (start, end, text), s in zip(rows, segments):
        assert start == str(round(s["start"] * 1000)), (start, s)
        assert end == str(round(s["end"] * 1000)), (end, s)
        assert text == s["text"].strip()


def test_lrc(tiny_model, segments):
    """whisper.cpp's lrc: a [by:] tag, then [mm:ss.xx]text a segment."""
    cp = transcribe(tiny_model, "-f", "lrc", JFK)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert re.fullmatch(r"\[by:[^\]]+\]", lines[0]), lines[0]
    assert len(lines) == len(segments) + 1
    for line, s in zip(lines[1:], segments):
        m = re.fullmatch(r"\[(\d\d):(\d\d)\.(\d\d)\](.*)", line)
        assert m, line
        t = int(m[1]) * 60 + int(m[2]) + int(m[3]) / 100
        assert abs(t - s["start"]) < 0.006, (line, s)
        assert m[4] == s["text"].strip()


def test_all_formats_in_output_dir(tiny_model, tmp_path):
    """-f all: every format of every input, each as -f FORMAT writes it."""
    out = tmp_path / "all"
    out.mkdir()
    cp = transcribe(tiny_model, "-f", "all", "--output-dir", out, JFK, GO)
    assert cp.returncode == 0, cp.stderr
    formats = ["json", "lrc", "srt", "tsv", "txt", "vtt"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}.{f}" for stem in ("jfk", "goforward") for f in formats)
    for f in formats:
        one = tmp_path / f
        one.mkdir()
        cp = transcribe(tiny_model, "-f", f, "--output-dir", one, GO)
        assert cp.returncode == 0, cp.stderr
        assert (out / f"goforward.{f}").read_text() == \
            (one / f"goforward.{f}").read_text(), f


def test_all_needs_output_dir(tiny_model, tmp_path):
    cp = transcribe(tiny_model, "-f", "all", JFK, cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    assert "--output-dir" in cp.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags,use", [
    (["-otxt", "-osrt"], "-f srt"), (["-osrt"], "-f srt"),
    (["-oj"], "-f json"), (["-o", "lrc"], "-f lrc"),
    (["-ocsv"], "-f tsv")])
def test_whisper_cpp_output_flags_refused(flags, use, tiny_model, tmp_path):
    """whisper.cpp's -oFORMAT flags would be -o FILE here: refused before
    any decoding, saying what to use, and no file named after a format."""
    cp = transcribe(tiny_model, *flags, JFK, cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    assert f"use {use}" in cp.stderr, cp.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    # ./srt is how to name such a file
    cp = transcribe(tiny_model, "-o", "./srt", "-f", "srt", GO, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "srt").read_text().startswith("1\n")
