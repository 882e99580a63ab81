"""`sotto transcribe --output-dir DIR`: one transcript file per input,
DIR/NAME.EXT, each as `sotto transcribe` writes it for that file alone
(srt numbered from 1, one WEBVTT header, one json object, no '==>' line),
and a clear error before any decoding when DIR cannot be used.
Two real files (jfk.wav 11 s, goforward.wav 2.8 s), tiny.en greedy.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import AUDIO_DIR, run_sotto

FILES = [AUDIO_DIR / "jfk.wav", AUDIO_DIR / "goforward.wav"]
SECONDS = {"jfk": 11.0, "goforward": 2.78625}
TIME = r"(\d\d):(\d\d):(\d\d)[,.](\d\d\d)"


def transcribe(model, *args):
    return run_sotto(["-m", model, "-l", "en", "-t", "2", "--beam-size", "1",
                      *args], timeout=300)


def secs(m, i):
    h, mi, s, ms = (int(m.group(i + k)) for k in range(1, 5))
    return h * 3600 + mi * 60 + s + ms / 1000


def cues(text: str, srt: bool) -> list[tuple[float, float, str]]:
    blocks = [b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
    if not srt:
        assert blocks[0] == "WEBVTT", blocks[0]
        blocks = blocks[1:]
    out = []
    for i, b in enumerate(blocks, 1):
        lines = b.split("\n")
        if srt:
            assert lines[0] == str(i), f"cue {i} numbered {lines[0]!r}"
            lines = lines[1:]
        m = re.fullmatch(TIME + " --> " + TIME, lines[0])
        assert m, f"bad timing line {lines[0]!r}"
        out.append((secs(m, 0), secs(m, 4), " ".join(lines[1:])))
    return out


@pytest.fixture(scope="module")
def json_dir(tiny_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("json-out")
    cp = transcribe(tiny_model, "-f", "json", "--output-dir", d, *FILES)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "", "with --output-dir nothing goes to stdout"
    return d


def test_json_one_file_per_input(json_dir):
    assert sorted(p.name for p in json_dir.iterdir()) == \
        ["goforward.json", "jfk.json"]
    for f in FILES:
        lines = (json_dir / (f.stem + ".json")).read_text().splitlines()
        assert len(lines) == 1, lines
        obj = json.loads(lines[0])
        assert obj["file"] == str(f)
        assert obj["segments"], obj
    jfk = json.loads((json_dir / "jfk.json").read_text())
    assert "ask not what your country" in jfk["text"].lower()


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitles_one_file_per_input(fmt, json_dir, tiny_model, tmp_path):
    cp = transcribe(tiny_model, "-f", fmt, "--output-dir", tmp_path, *FILES)
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        sorted(f"{f.stem}.{fmt}" for f in FILES)
    for f in FILES:
        got = cues((tmp_path / f"{f.stem}.{fmt}").read_text(), fmt == "srt")
        segs = json.loads((json_dir / (f.stem + ".json")).read_text())["segments"]
        # the file's own cues: its segments, nothing of the other file
        assert [c[2] for c in got] == [s["text"].strip() for s in segs]
        for (a, b, _), s in zip(got, segs):
            assert abs(a - s["start"]) <= 0.001 and abs(b - s["end"]) <= 0.001
            assert b <= SECONDS[f.stem] + 0.001


def test_txt_without_file_headers(json_dir, tiny_model, tmp_path):
    cp = transcribe(tiny_model, "-f", "txt", "--output-dir", tmp_path, *FILES)
    assert cp.returncode == 0, cp.stderr
    for f in FILES:
        text = (tmp_path / f"{f.stem}.txt").read_text()
        assert "==>" not in text
        segs = json.loads((json_dir / (f.stem + ".json")).read_text())["segments"]
        assert text.splitlines() == [s["text"].strip() for s in segs]


def test_without_output_dir_concatenates(tiny_model):
    # Today's behaviour, documented in --help: each file's cues in turn.
    cp = transcribe(tiny_model, "-f", "srt", *FILES)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.count("\n1\n") + cp.stdout.startswith("1\n") == 2


@pytest.mark.parametrize("case", ["missing", "not-a-dir", "same-name",
                                  "with-output"])
def test_unusable_output_dir(case, tiny_model, tmp_path):
    (tmp_path / "f").write_text("x")
    files = [str(FILES[0])]
    extra = []
    if case == "missing":
        d, want = tmp_path / "nope", "No such file or directory"
    elif case == "not-a-dir":
        d, want = tmp_path / "f", "not a directory"
    elif case == "same-name":
        d, want = tmp_path, "would both be written to"
        (tmp_path / "a").mkdir()
        files.append(str(tmp_path / "a" / "jfk.flac"))
    else:
        d, want = tmp_path, "--output and --output-dir"
        extra = ["-o", tmp_path / "x.srt"]
    cp = transcribe(tiny_model, "-f", "srt", "--output-dir", d, *extra, *files)
    assert cp.returncode == 2, cp.stderr
    assert want in cp.stderr, cp.stderr
    assert not list(tmp_path.glob("*.srt")), "nothing may be written"
