"""8 kHz G.711 telephone audio on the live doors that take PCM: OPEN
"format": "mulaw" / "alaw" over the socket (`sotto stream --raw-format`)
and the WebSocket. jfk.wav is encoded by sox (an encoder nobody here
wrote), and the reference is the same bytes decoded by sox to 16-bit PCM
and streamed as s16le at 8 kHz: sottod's G.711 decoding must give the
same words (the telephone band itself costs tiny.en "Americans" and
"ask", which is not what is tested here)."""

from __future__ import annotations

import json
import subprocess

from websockets.sync.client import connect as ws_connect

from conftest import AUDIO_DIR, SOTTO, Daemon, report
from speech import words

import pytest

JFK = AUDIO_DIR / "jfk.wav"


@pytest.fixture(scope="module")
def td(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-g711"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"



def g711(law: str) -> bytes:
    return subprocess.run(["sox", "-D", str(JFK), "-r", "8000", "-e", law,
                           "-t", "raw", "-"], capture_output=True,
                          check=True).stdout


def socket_words(d, data: bytes, fmt: str) -> list[str]:
    cp = subprocess.run([str(SOTTO), "stream", "-s", d.socket, "--fast",
                         "--raw-format", fmt, "--rate", "8000", "-"],
                        input=data, capture_output=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    return words(cp.stdout.decode())


_refs: dict[str, list[str]] = {}


def reference(d, law: str) -> list[str]:
    """The G.711 bytes as sox decodes them, streamed as s16le."""
    if law not in _refs:
        pcm = subprocess.run(["sox", "-t", "raw", "-r", "8000", "-e", law,
                              "-c", "1", "-", "-e", "signed", "-b", "16",
                              "-t", "raw", "-"], input=g711(law),
                             capture_output=True, check=True).stdout
        _refs[law] = socket_words(d, pcm, "s16le")
    return _refs[law]


def test_socket_mulaw_8k(td):
    got = socket_words(td, g711("u-law"), "mulaw")
    report(f"mu-law 8 kHz over the socket: {' '.join(got)!r}")
    assert got == reference(td, "u-law"), got


def test_websocket_alaw_8k(td):
    port = td.listen_port("http")
    text = ""
    with ws_connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
        assert json.loads(ws.recv(30))["type"] == "hello"
        ws.send(json.dumps({"format": "alaw", "rate": 8000, "channels": 1}))
        assert json.loads(ws.recv(30))["type"] == "opened"
        data = g711("a-law")
        for i in range(0, len(data), 1600):
            ws.send(data[i:i + 1600])
        ws.send(json.dumps({"type": "end"}))
        while (ev := json.loads(ws.recv(120)))["type"] != "end":
            if ev["type"] == "final":
                text += " ".join(s["text"] for s in ev["segments"])
    got = words(text)
    report(f"A-law 8 kHz over the WebSocket: {' '.join(got)!r}")
    assert got == reference(td, "a-law"), got


def test_bad_format_names_the_formats(td):
    cp = subprocess.run([str(SOTTO), "stream", "-s", td.socket,
                         "--raw-format", "ulaw", "-"], input="",
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2 and "mulaw or alaw" in cp.stderr, cp.stderr
