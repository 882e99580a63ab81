"""The OpenAI API's word timestamps and language name in verbose_json, and
a client that goes away mid-request (daemon/http/http-openai.c, docs/http.md),
driven by the official openai SDK and curl against a real sottod with the
real tiny.en model.

Words are compared with `sotto transcribe --word-timestamps -f json` on
the same file and model: the same words (OpenAI's have no outer blanks)
at the same times (both rounded to milliseconds).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import wave
from pathlib import Path

import openai
import pytest

from conftest import AUDIO_DIR, SOTTO, Daemon, report

JFK = AUDIO_DIR / "jfk.wav"
LONG = AUDIO_DIR / "LJ001-0001_to_LJ001-0017_longform.wav"
# real speech of several speakers and lengths
WORD_FILES = [JFK, AUDIO_DIR / "goforward.wav",
              AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0870.wav"]


def _port(d: Daemon) -> int:
    deadline = time.monotonic() + 60
    while True:
        m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
        if m:
            return int(m.group(1))
        assert time.monotonic() < deadline, d.log()
        time.sleep(0.1)


@pytest.fixture(scope="module")
def wd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-words"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"http://127.0.0.1:{_port(d)}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def _cli_words(path: Path, model: Path) -> dict:
    cp = subprocess.run([str(SOTTO), "transcribe", "-q", "-m", str(model),
                         "-t", "2", "-f", "json", "--word-timestamps",
                         str(path)], capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def _sdk(d, path: Path, granularities: list[str]):
    c = openai.OpenAI(base_url=d.base + "/v1", api_key="unused",
                      max_retries=0, timeout=300)
    with open(path, "rb") as f:
        return c.audio.transcriptions.create(
            file=f, model="whisper-1", response_format="verbose_json",
            timestamp_granularities=granularities)


@pytest.mark.parametrize("path", WORD_FILES, ids=lambda p: p.stem[:12])
def test_sdk_word_timestamps(wd, tiny_model, path):
    ref = _cli_words(path, tiny_model)
    want = [(w["word"].strip(), w["start"], w["end"])
            for s in ref["segments"] for w in s["words"]]
    assert len(want) >= 4, ref
    r = _sdk(wd, path, ["word"])
    assert isinstance(r, openai.types.audio.TranscriptionVerbose)
    assert r.language == "english"
    assert r.text == ref["text"].strip()
    # only words were asked for: no segments, as OpenAI's
    assert r.segments is None
    got = [(w.word, w.start, w.end) for w in r.words]
    assert got == want
    assert all(a <= b for _, a, b in got)
    report(f"http words (openai SDK) {path.name}: {len(got)} words as "
           f"`sotto transcribe --word-timestamps`, first {got[0]}")


def test_sdk_words_and_segments(wd, tiny_model):
    ref = _cli_words(JFK, tiny_model)
    r = _sdk(wd, JFK, ["word", "segment"])
    assert [(s.start, s.end, s.text) for s in r.segments] == \
        [(s["start"], s["end"], s["text"]) for s in ref["segments"]]
    assert [w.word for w in r.words] == \
        [w["word"].strip() for s in ref["segments"] for w in s["words"]]
    # segments take their words' times (openai/whisper's word_timestamps)
    assert r.segments[0].start == r.words[0].start
    assert r.segments[-1].end == r.words[-1].end


def _metric(d, name: str) -> float:
    body = subprocess.run(["curl", "-sS", d.base + "/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    m = re.search(rf"^{name} (\S+)$", body, re.M)
    assert m, body
    return float(m.group(1))


def test_disconnect_cancels(wd, tmp_path):
    """curl gives up after 2 s on a 472 s file (a minute of compute on a
    quiet machine): sottod cancels the file's decoding at its next window,
    so its session is gone within seconds, not when the file is done."""
    long4 = tmp_path / "long4.wav"
    with wave.open(str(LONG), "rb") as r:
        params, frames = r.getparams(), r.readframes(r.getnframes())
    with wave.open(str(long4), "wb") as w:
        w.setparams(params)
        for _ in range(4):
            w.writeframes(frames)
    files_before = _metric(wd, "sottod_files_total")
    cp = subprocess.run(["curl", "-sS", "--max-time", "2",
                         wd.base + "/v1/audio/transcriptions",
                         "-F", f"file=@{long4}"],
                        capture_output=True, timeout=60)
    assert cp.returncode == 28, cp     # curl: operation timed out
    t0 = time.monotonic()
    # the upload itself can take curl's 2 s: sottod may have canceled the
    # session already (the log line below says it did)
    assert _metric(wd, "sottod_sessions") <= 1, wd.log()
    while _metric(wd, "sottod_sessions") > 0:
        assert time.monotonic() - t0 < 8, \
            f"the file still decodes 8 s after its client went away:\n" \
            f"{wd.log()}"
        time.sleep(0.1)
    gone = time.monotonic() - t0
    assert _metric(wd, "sottod_http_requests_in_progress") == 0
    assert _metric(wd, "sottod_files_total") == files_before + 1
    assert "canceled: the client went away" in wd.log()
    # and sottod serves the next request as before
    r = _sdk(wd, JFK, ["segment"])
    assert r.text.startswith("And so, my fellow Americans")
    report(f"http: a client that went away: its 472 s file canceled, "
           f"session gone {gone:.1f} s after curl's --max-time")
