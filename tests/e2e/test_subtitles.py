"""SubRip and WebVTT from words: `sotto transcribe --word-timestamps -f
srt|vtt` with --max-line-width, --max-line-count and --highlight-words
against openai-whisper's own writers (whisper/utils.py WriteSRT and
WriteVTT, from the pinned openai-whisper sdist: that module needs only
the standard library) given sotto's JSON words of the same run.

openai writes WebVTT times without hours below one hour ("00:08.060");
sotto always writes them ("00:00:08.060"), as its segment cues always
have: the comparison reads both as times.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import AUDIO_DIR, REPO, run_sotto
import refs as refslib

UTILS = "openai_whisper-20250625/whisper/utils.py"

# openai's writer options as sotto's: (max_line_width, max_line_count,
# highlight_words)
LAYOUTS = [
    (None, None, False),        # a cue per segment
    (20, 2, False),             # lines, cues of two, a cue at the pause
    (42, 1, True),              # one line a cue, a cue per word
    (30, None, False),          # no count: a cue is still a segment
]


@pytest.fixture(scope="session")
def openai_utils(tmp_path_factory):
    """whisper/utils.py of the pinned openai-whisper sdist (the pin of
    tools/sotto_gguf/openai_sdist.py), imported on its own."""
    sys.path.insert(0, str(REPO / "tools"))
    from sotto_gguf import openai_sdist

    sdist = openai_sdist.tarball(refslib.cache_root(), sys.executable)
    out = tmp_path_factory.mktemp("openai") / "openai_whisper_utils.py"
    with tarfile.open(sdist) as t:
        out.write_bytes(t.extractfile(UTILS).read())
    spec = importlib.util.spec_from_file_location("openai_whisper_utils", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def speech_with_pause(tmp_path_factory):
    """jfk, 4 s of silence, a LibriSpeech sentence: two segments and a
    pause longer than openai's 3 s cue break."""
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup installs it)")
    d = tmp_path_factory.mktemp("subs")
    padded, out = d / "jfk-pad.wav", d / "pause.wav"
    subprocess.run(["sox", AUDIO_DIR / "jfk.wav", padded, "pad", "0", "4"],
                   check=True, stdin=subprocess.DEVNULL)
    subprocess.run(["sox", padded, AUDIO_DIR / "8455-210777-0068.wav", out],
                   check=True, stdin=subprocess.DEVNULL)
    return out


def _args(tiny_model, width, count, highlight):
    a = ["-m", tiny_model, "-q", "--beam-size", "1", "--word-timestamps"]
    if width:
        a += ["--max-line-width", str(width)]
    if count:
        a += ["--max-line-count", str(count)]
    if highlight:
        a += ["--highlight-words"]
    return a


_TIME = re.compile(r"^(?:(\d+):)?(\d\d):(\d\d)[.,](\d\d\d) --> (?:(\d+):)?(\d\d):(\d\d)[.,](\d\d\d)$")


def _cues(text: str) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) of every cue, numbering and header aside."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _TIME.match(lines[i])
        if not m:
            i += 1
            continue
        g = [int(x or 0) for x in m.groups()]
        start = ((g[0] * 60 + g[1]) * 60 + g[2]) * 1000 + g[3]
        end = ((g[4] * 60 + g[5]) * 60 + g[6]) * 1000 + g[7]
        body = []
        i += 1
        while i < len(lines) and lines[i] != "":
            body.append(lines[i])
            i += 1
        out.append((start, end, "\n".join(body)))
    return out


@pytest.mark.parametrize("width,count,highlight", LAYOUTS)
def test_layout_like_openai(width, count, highlight, openai_utils,
                            speech_with_pause, tiny_model):
    args = _args(tiny_model, width, count, highlight)
    cp = run_sotto([*args, "-f", "json", speech_with_pause])
    assert cp.returncode == 0, cp.stderr
    result = json.loads(cp.stdout)
    assert sum(len(s["words"]) for s in result["segments"]) > 20
    opts = {"max_line_width": width, "max_line_count": count,
            "highlight_words": highlight}
    for fmt, writer in (("srt", openai_utils.WriteSRT), ("vtt", openai_utils.WriteVTT)):
        cp = run_sotto([*args, "-f", fmt, speech_with_pause])
        assert cp.returncode == 0, cp.stderr
        buf = io.StringIO()
        writer(".").write_result(result, buf, opts)
        want, got = _cues(buf.getvalue()), _cues(cp.stdout)
        assert want, buf.getvalue()
        assert got == want, (f"{fmt} {opts}\nopenai:\n{buf.getvalue()[:3000]}"
                             f"\nsotto:\n{cp.stdout[:3000]}")
        if fmt == "vtt":
            assert cp.stdout.startswith("WEBVTT\n\n")
        else:
            nums = [ln for ln in cp.stdout.splitlines() if ln.isdigit()]
            assert nums == [str(k) for k in range(1, len(got) + 1)]


def test_layout_options_need_words(tiny_model):
    cp = run_sotto(["-m", tiny_model, "-f", "srt", "--max-line-width", "20",
                    AUDIO_DIR / "jfk.wav"])
    assert cp.returncode == 2
    assert "--word-timestamps" in cp.stderr
