"""stream=true on POST /v1/audio/transcriptions (daemon/http/http-stream.c,
docs/http.md): Server-Sent Events read by the official openai Python SDK
(client.audio.transcriptions.create(..., stream=True)) and by curl, against a
real sottod with the real tiny.en model. The streamed text is `sotto
transcribe`'s, and its deltas come as the windows are decided, before the
end of a file longer than one window.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import openai
import pytest

from conftest import AUDIO_DIR, SOTTO, Daemon, report

JFK = AUDIO_DIR / "jfk.wav"


@pytest.fixture(scope="module")
def sd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-sse"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"http://127.0.0.1:{d.listen_port()}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def transcribe_text(path: Path, model: Path) -> str:
    cp = subprocess.run([str(SOTTO), "transcribe", "-q", "-m", str(model),
                         "-t", "2", "-f", "json", str(path)],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)["text"].strip()	# as the json reply


def sdk_stream(d, path: Path) -> list[tuple[float, object]]:
    """(seconds since the request, event) of each event the SDK yields."""
    c = openai.OpenAI(base_url=d.base + "/v1", api_key="unused",
                      max_retries=0, timeout=300)
    t0, out = time.monotonic(), []
    with open(path, "rb") as f:
        for ev in c.audio.transcriptions.create(file=f, model="whisper-1",
                                                stream=True):
            out.append((time.monotonic() - t0, ev))
    return out


def check(evs: list, ref: str, seconds: int) -> list[str]:
    types = [e.type for _, e in evs]
    assert types[-1] == "transcript.text.done", types
    assert set(types[:-1]) == {"transcript.text.delta"}, types
    done = evs[-1][1]
    deltas = [e.delta for _, e in evs[:-1]]
    assert done.text == ref, (done.text, ref)
    assert "".join(deltas).rstrip() == done.text, deltas
    assert done.usage.type == "duration" and done.usage.seconds == seconds
    return deltas


def test_sdk_stream_jfk(sd, tiny_model):
    evs = sdk_stream(sd, JFK)
    deltas = check(evs, transcribe_text(JFK, tiny_model), 11)
    report(f"http stream=true (openai SDK): {len(deltas)} deltas: {deltas}")


def test_sdk_stream_deltas_before_the_end(sd, tiny_model, tmp_path):
    """A file of six windows (jfk.wav six times, 66 s): the first window's
    segments are sent while the others are decoded."""
    six = tmp_path / "jfk6.wav"
    subprocess.run(["sox", "-D", *[str(JFK)] * 6, str(six)],
                   check=True, capture_output=True)
    evs = sdk_stream(sd, six)
    check(evs, transcribe_text(six, tiny_model), 66)
    first, end = evs[0][0], evs[-1][0]
    report(f"http stream=true, 66 s: first delta at {first:.2f} s, done at "
           f"{end:.2f} s, {len(evs) - 1} deltas")
    assert len(evs) - 1 >= 6, evs
    # Sent at the end, the deltas would come within a millisecond or two;
    # sent as decided, after the first come five more windows, each an
    # encoder pass and its tokens: 0.05 s or more even with tiny.en on
    # AMX (a 2-core Xeon, 2026-11-29), 0.3 s or more on AVX2.
    assert end - first > 0.1, (first, end)


def curl(url: str, *args: str) -> tuple[int, str, str]:
    cp = subprocess.run(["curl", "-sS", "-N", "-o", "-", "-w",
                         "\n%{http_code} %{content_type}", *args, url],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    body, _, tail = cp.stdout.rpartition("\n")
    code, _, ctype = tail.partition(" ")
    return int(code), ctype, body


def test_stream_curl_and_refusals(sd, tmp_path):
    url = sd.base + "/v1/audio/transcriptions"
    code, ctype, body = curl(url, "-F", f"file=@{JFK}", "-F", "stream=true")
    assert code == 200 and ctype == "text/event-stream", (code, ctype)
    events = [json.loads(ln[6:]) for ln in body.split("\n\n") if ln]
    assert events[-1]["type"] == "transcript.text.done", events
    assert events[-1]["usage"] == {"type": "duration", "seconds": 11}
    code, _, body = curl(url, "-F", f"file=@{JFK}", "-F", "stream=maybe")
    assert code == 400 and "stream" in body, body
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all" * 64)
    code, ctype, body = curl(url, "-F", f"file=@{junk}", "-F", "stream=true")
    assert code == 400 and ctype == "application/json", (code, body)
    assert json.loads(body)["error"]["code"] == "invalid_audio", body
    code, _, body = curl(sd.base + "/v1/audio/translations", "-F",
                         f"file=@{JFK}", "-F", "stream=true")
    assert code == 400 and "stream" in body, body
