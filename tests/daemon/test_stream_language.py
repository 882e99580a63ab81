"""The detected language in a stream's events: with language "auto" on a
multilingual model (base), a `language` event (language, probability,
settled) comes before the first partial or final, again when the
detected language changes, and once settled (3 s of audio heard) never
again; `sotto stream -f jsonl` prints it as sent. A given language gets
no such event. With none given, sottod's default ([engine] language =
auto) detects it on a multilingual model, for streams and Wyoming
utterances alike. Real speech (jfk.wav) and German synthesised by
espeak-ng.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import wave

import pytest
from wyoming.asr import Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from conftest import AUDIO_DIR, Daemon, Stream, fetch_model

GERMAN = ("Guten Morgen. Heute ist das Wetter sehr schön, und wir gehen "
          "zusammen in den Park.")


@pytest.fixture(scope="module")
def base_daemon(sottod_bin, sotto_bin, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-base"), fetch_model("base"),
               argv=["--wyoming", "127.0.0.1:0"]).start()
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture(scope="module")
def german(tmp_path_factory):
    if not shutil.which("espeak-ng"):
        pytest.fail("espeak-ng is not installed (scripts/setup installs it)")
    p = tmp_path_factory.mktemp("espeak") / "stream-de.wav"
    subprocess.run(["espeak-ng", "-v", "de", "-s", "140", "-w", str(p), GERMAN],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return p


def events(d: Daemon, path, language: str | None) -> list[dict]:
    lang = ["-l", language] if language is not None else []
    s = Stream(d.socket, "--fast", *lang, path).check()
    return [e for _, e in s.lines]


def check_language(evs: list[dict], want: str) -> dict:
    kinds = [e["type"] for e in evs]
    langs = [e for e in evs if e["type"] == "language"]
    assert langs, f"no language event: {kinds}"
    first_text = min(kinds.index(k) for k in ("partial", "final") if k in kinds)
    assert kinds.index("language") < first_text, kinds
    settled = [e for e in langs if e["settled"]]
    assert len(settled) == 1 and langs[-1] is settled[0], langs
    last = settled[0]
    assert last["language"] == want, langs
    assert 0 < last["probability"] <= 1, last
    assert last["session"] == evs[1]["session"], last
    return last


def test_language_of_german_speech(base_daemon, german):
    last = check_language(events(base_daemon, german, "auto"), "de")
    print(f"german: {last}")


def test_language_of_english_speech(base_daemon):
    last = check_language(events(base_daemon, AUDIO_DIR / "jfk.wav", "auto"),
                          "en")
    assert last["probability"] > 0.5, last


def test_no_language_event_when_given(base_daemon):
    evs = events(base_daemon, AUDIO_DIR / "goforward.wav", "en")
    assert any(e["type"] == "final" for e in evs), evs
    assert not [e for e in evs if e["type"] == "language"], evs


def test_default_detects_on_a_multilingual_model(base_daemon, german):
    """No language in OPEN and none in the config: detected, not taken as
    en (the default was en, which gave English words for German)."""
    check_language(events(base_daemon, german, None), "de")


def test_wyoming_detects_the_language(base_daemon, german):
    """A Wyoming utterance with no transcribe event (Home Assistant sends
    none unless a language is set): detected, as wyoming-faster-whisper
    does; transcript-start and transcript name it."""
    port = int(re.search(r"wyoming: listening on 127\.0\.0\.1:(\d+)",
                         base_daemon.log()).group(1))
    with wave.open(str(german)) as w:
        rate, width, ch = w.getframerate(), w.getsampwidth(), w.getnchannels()
        pcm = w.readframes(w.getnframes())

    async def go():
        async with AsyncTcpClient("127.0.0.1", port) as c:
            await c.write_event(AudioStart(rate=rate, width=width,
                                           channels=ch).event())
            await c.write_event(AudioChunk(rate=rate, width=width,
                                           channels=ch, audio=pcm).event())
            await c.write_event(AudioStop().event())
            while (ev := await asyncio.wait_for(c.read_event(), 300)):
                if Transcript.is_type(ev.type):
                    return Transcript.from_event(ev)

    t = asyncio.run(go())
    assert t.language == "de", t
    assert "morgen" in t.text.lower(), t
