"""Uploads and streams of files libsndfile cannot read, which FFmpeg's
libraries decode in sottod from memory (common/audio-ffmpeg.c): an m4a
(AAC) and a webm (Opus) posted to /v1/audio/transcriptions give the words
of the WAV they were made from; an upload of bytes that are no audio gets
400 with a message naming the formats, and a webm cut short 400 saying
it is damaged; `sotto stream` of the webm gives the WAV's words. The
files are made by the ffmpeg program (tests/encoded.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest

import encoded
from conftest import AUDIO_DIR, SOTTO, Daemon, Stream
from wer import normalise

JFK = AUDIO_DIR / "jfk.wav"


@pytest.fixture(scope="module")
def hd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    """A daemon with HTTP on an ephemeral loopback port."""
    d = Daemon(tmp_path_factory.mktemp("sottod-ffmpeg"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"http://127.0.0.1:{d.listen_port('http')}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return encoded.encode_all(JFK, tmp_path_factory.mktemp("ffmpeg"),
                              ["m4a", "webm"])


@pytest.fixture(scope="module")
def want(tiny_model) -> str:
    """The WAV's words from `sotto transcribe`, normalised."""
    cp = subprocess.run([str(SOTTO), "transcribe", "-q", "-m",
                         str(tiny_model), "-t", "2", "-f", "json", str(JFK)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    words = normalise(json.loads(cp.stdout)["text"])
    assert words.startswith("and so my fellow americans"), words
    return words


def upload(d, path, endpoint="transcriptions") -> tuple[int, dict]:
    cp = subprocess.run(["curl", "-sS", "--max-time", "120", "-o", "-",
                         "-w", "\n%{http_code}", "-F", f"file=@{path}",
                         "-F", "model=whisper-1",
                         f"{d.base}/v1/audio/{endpoint}"],
                        capture_output=True, text=True, timeout=130)
    assert cp.returncode == 0, cp.stderr
    body, _, status = cp.stdout.rpartition("\n")
    return int(status), json.loads(body)


def test_upload_m4a_webm(hd, files, want):
    for ext, path in files.items():
        status, body = upload(hd, path)
        assert status == 200, (ext, body)
        assert normalise(body["text"]) == want, (ext, body)


def test_upload_garbage(hd, tmp_path):
    junk = tmp_path / "junk.m4a"
    junk.write_bytes(bytes((i * 7919) % 251 for i in range(50000)))
    status, body = upload(hd, junk)
    assert status == 400, body
    e = body["error"]
    assert e["code"] == "invalid_audio" and e["param"] == "file", e
    assert "not an audio file" in e["message"], e
    for name in ("wav", "flac", "ogg", "mp3", "m4a", "mp4", "webm", "mkv"):
        assert name in e["message"], (name, e)
    # the daemon is still there for the next one
    status, _ = upload(hd, JFK)
    assert status == 200


def test_upload_cut_webm(hd, files, tmp_path):
    """A webm cut in the middle is damaged: 400 saying where it ends."""
    webm = files["webm"].read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(webm[:len(webm) // 2])
    status, body = upload(hd, cut)
    assert status == 400, body
    e = body["error"]
    assert e["code"] == "invalid_audio" and "damaged" in e["message"], e
    assert "ends after" in e["message"], e


def test_stream_webm(hd, files, want):
    st = Stream(hd.socket, "--fast", files["webm"]).check()
    assert normalise(st.text()) == want, st.text()
