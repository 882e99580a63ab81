"""Deepgram's live transcription WebSocket at /v1/listen (daemon/deepgram,
docs/http.md), driven by the official deepgram-sdk Python client against a
real sottod with the real tiny.en model. jfk.wav is streamed about twice as
fast as it plays; its final words are compared with `sotto transcribe` of the
same file, as test_realtime.py compares them.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import numpy as np
import pytest
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from conftest import AUDIO_DIR, Daemon, report
from speech import words, reference, raw

JFK = AUDIO_DIR / "jfk.wav"
TOKEN = "sotto-test-token-0123456789"


@pytest.fixture(scope="module")
def dg(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-dg"), tiny_model,
               conf=f"[http]\ntoken = {TOKEN}\n",
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"127.0.0.1:{d.listen_port()}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def client(d, key: str = TOKEN) -> DeepgramClient:
    """The SDK pointed at sottod: its environment names the hosts."""
    env = DeepgramClientEnvironment(base=f"http://{d.base}",
                                    production=f"ws://{d.base}",
                                    agent=f"ws://{d.base}",
                                    agent_rest=f"http://{d.base}")
    return DeepgramClient(api_key=key, environment=env)


def status(e: Exception) -> int:
    """The HTTP status of a refused upgrade: the SDK's ApiError has it, or,
    with websockets 15 (whose sync client raises InvalidStatus, which the
    SDK does not translate), the handshake response."""
    if isinstance(e, ApiError):
        return e.status_code
    return e.response.status_code






class Reader:
    """The SDK's messages, read on a thread of their own while audio is
    sent, each with the seconds of audio sent when it came."""

    def __init__(self, conn):
        self.conn, self.msgs, self.sent_s = conn, [], 0.0
        self.error: Exception | None = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        try:
            for m in self.conn:
                self.msgs.append((self.sent_s, m))
        except Exception as e:  # the close is the end of the messages
            self.error = e

    def join(self, timeout: float = 120) -> list:
        self.t.join(timeout)
        assert not self.t.is_alive(), [m.type for _, m in self.msgs]
        return [m for _, m in self.msgs]


def stream(conn, reader: Reader, data: bytes, bytes_per_s: int,
           speed: float = 2.0, piece_s: float = 0.1) -> None:
    step = int(bytes_per_s * piece_s)
    for i in range(0, len(data), step):
        conn.send_media(data[i:i + step])
        reader.sent_s = min(len(data), i + step) / bytes_per_s
        time.sleep(piece_s / speed)


def check_finals(msgs: list, audio_s: float) -> list:
    """Finals cover the audio in order; each word within its Results and
    after the one before; interims are never final."""
    results = [m for m in msgs if m.type == "Results"]
    finals = [r for r in results if r.is_final]
    assert finals, [m.type for m in msgs]
    last_end, prev = 0.0, 0.0
    for r in finals:
        assert r.channel_index == [0, 1], r
        assert r.start == pytest.approx(last_end, abs=1e-3), (r, last_end)
        last_end = r.start + r.duration
        alt = r.channel.alternatives[0]
        assert alt.transcript == " ".join(w.punctuated_word
                                          for w in alt.words), alt
        for w in alt.words:
            assert prev - 0.05 <= w.start <= w.end <= audio_s + 0.05, \
                (w, prev)
            assert r.start - 0.05 <= w.start and w.end <= last_end + 1e-3, \
                (w, r.start, last_end)
            assert w.word == re.sub(r"[^a-z0-9'-]", "",
                                    w.punctuated_word.lower()), w
            assert 0 <= w.confidence <= 1, w
            prev = w.start
        assert r.metadata.model_info.name and r.metadata.request_id
    return finals


def final_words(finals: list) -> list[str]:
    return words(" ".join(f.channel.alternatives[0].transcript
                          for f in finals))


def test_deepgram_linear16_interim_and_finals(dg, tiny_model):
    """linear16 at 16 kHz with interim_results: interims while the audio
    plays, finals never revised that hold `sotto transcribe`'s words with
    increasing times; CloseStream: the last Results, Metadata, the close."""
    data = raw(JFK, "-r", "16000", "-b", "16", "-e", "signed")
    t0 = time.monotonic()
    with client(dg).listen.v1.connect(
            model="nova-3", language="en-US", encoding="linear16",
            sample_rate=16000, channels=1, interim_results="true",
            punctuate="true", vad_events="true", utterance_end_ms=1000,
            endpointing=300, tag="ignored") as conn:
        reader = Reader(conn)
        stream(conn, reader, data, 32000)
        conn.send_close_stream()
        msgs = reader.join()
    took = time.monotonic() - t0
    types = [m.type for m in msgs]
    assert types[-1] == "Metadata", (msgs[-1], dg.log()[-4000:])
    md = msgs[-1]
    assert md.duration == pytest.approx(11.0, abs=0.05), md
    assert md.channels == 1 and len(md.sha256) == 64 and md.request_id
    interims = [(s, m) for s, m in reader.msgs
                if m.type == "Results" and not m.is_final]
    # interims came while the audio was still being sent
    assert len(interims) >= 3 and interims[0][0] < 8.0, \
        [s for s, _ in interims]
    assert any(m.channel.alternatives[0].transcript for _, m in interims)
    finals = check_finals(msgs, 11.0)
    got, ref = final_words(finals), reference(JFK, tiny_model)
    report(f"deepgram linear16 (deepgram-sdk): {len(interims)} interim, "
           f"{len(finals)} final Results, {took:.1f} s: {' '.join(got)!r}")
    # a live stream fed faster than real time is stepped in larger steps
    # when it falls behind (test_realtime.py): one word may differ
    assert len(got) >= len(ref) - 1, (got, ref)
    assert sum(a != b for a, b in zip(got, ref)) <= 1, (got, ref)
    assert "SpeechStarted" in types and types.index("SpeechStarted") < \
        types.index("Results"), types
    assert not any(m.from_finalize for m in finals)
    # utterance_end_ms: UtteranceEnd after the last final word, at its end
    ends = [m for m in msgs if m.type == "UtteranceEnd"]
    assert ends and types.index("UtteranceEnd") > \
        types.index("Results"), types
    last_word = finals[-1].channel.alternatives[0].words[-1]
    assert ends[-1].last_word_end == pytest.approx(last_word.end, abs=1e-3)


def test_deepgram_mulaw_8k(dg, tiny_model):
    """mulaw at 8 kHz (telephone audio, as sox encodes it), no interim
    results: only finals, the words of `sotto transcribe`."""
    data = raw(JFK, "-r", "8000", "-e", "u-law")
    with client(dg).listen.v1.connect(
            model="nova-2-phonecall", encoding="mulaw", sample_rate=8000,
            language="en") as conn:
        reader = Reader(conn)
        stream(conn, reader, data, 8000, speed=3.0)
        conn.send_close_stream()
        msgs = reader.join()
    assert all(m.is_final for m in msgs if m.type == "Results"), msgs
    finals = check_finals(msgs, 11.0)
    got, ref = final_words(finals), reference(JFK, tiny_model)
    report(f"deepgram mulaw 8 kHz: {' '.join(got)!r}")
    assert msgs[-1].type == "Metadata", (msgs[-1], dg.log()[-4000:])
    # as G.711 in test_realtime.py: "American" for "Americans" may happen
    assert sum(a != b for a, b in zip(got, ref)) <= 1 and \
        abs(len(got) - len(ref)) <= 1, (got, ref)


def test_deepgram_finalize_stereo(dg):
    """Finalize flushes: the finals of the audio so far come with
    from_finalize true; the connection goes on, and later audio is heard
    at its own time. The audio is stereo, speech on the left and silence
    on the right: downmixed, it is transcribed all the same."""
    mono = np.frombuffer(raw(JFK, "-r", "16000", "-b", "16", "-e", "signed"),
                         dtype="<i2")
    data = np.stack([mono, np.zeros_like(mono)], axis=1).tobytes()
    per_s = 64000
    with client(dg).listen.v1.connect(model="nova-3", encoding="linear16",
                                      sample_rate=16000, channels=2) as conn:
        reader = Reader(conn)
        stream(conn, reader, data[:per_s * 4], per_s, speed=4.0)
        conn.send_finalize()
        deadline = time.monotonic() + 60
        while not any(getattr(m, "from_finalize", False)
                      for _, m in reader.msgs):
            assert time.monotonic() < deadline, (reader.msgs,
                                                 dg.log()[-4000:])
            time.sleep(0.1)
        stream(conn, reader, data[per_s * 4:per_s * 8], per_s, speed=4.0)
        conn.send_close_stream()
        msgs = reader.join()
    results = [m for m in msgs if m.type == "Results"]
    flushed = [r for r in results if r.from_finalize]
    assert flushed and all(r.is_final for r in flushed), results
    assert words(" ".join(r.channel.alternatives[0].transcript
                          for r in results if r.is_final))[:3] == \
        ["and", "so", "my"], results
    later = [r for r in results[results.index(flushed[-1]) + 1:]
             if r.is_final and r.channel.alternatives[0].words]
    assert later and later[0].channel.alternatives[0].words[0].start >= 3.5, \
        later
    assert msgs[-1].type == "Metadata"
    assert msgs[-1].duration == pytest.approx(8.0, abs=0.05)


def test_deepgram_token(dg):
    """With [http] token: 401 without it or with a wrong one; the SDK's
    Authorization: Token works (the tests above), and so do Bearer and the
    browser's subprotocol pair "token", TOKEN."""
    url = f"ws://{dg.base}/v1/listen?encoding=linear16&sample_rate=16000"
    with pytest.raises(Exception) as e:
        with client(dg, key="wrong-token-0123456789").listen.v1.connect(
                model="nova-3") as conn:
            conn.send_keep_alive()
    assert status(e.value) == 401
    for headers in ({}, {"Authorization": "Token nope"}):
        with pytest.raises(Exception) as e:
            connect(url, additional_headers=headers)
        assert e.value.response.status_code == 401, e.value
    with connect(url, additional_headers={
            "Authorization": f"Bearer {TOKEN}"}) as c:
        c.send(json.dumps({"type": "CloseStream"}))
        assert json.loads(c.recv(timeout=30))["type"] == "Metadata"
    with connect(url, subprotocols=["token", TOKEN]) as c:
        assert c.subprotocol == "token"
        c.send(json.dumps({"type": "CloseStream"}))
        assert json.loads(c.recv(timeout=30))["type"] == "Metadata"


@pytest.mark.parametrize("query,param", [
    ("encoding=opus&sample_rate=16000", "encoding"),
    ("encoding=linear16&sample_rate=abc", "sample_rate"),
    ("interim_results=maybe", "interim_results"),
    ("channels=0", "channels"),
    ("language=de", "language"),		# tiny.en is English-only
])
def test_deepgram_bad_parameter(dg, query, param):
    """A bad value is a 400 on the upgrade, saying which parameter."""
    with pytest.raises(Exception) as e:
        connect(f"ws://{dg.base}/v1/listen?{query}",
                additional_headers={"Authorization": f"Token {TOKEN}"})
    resp = e.value.response
    assert resp.status_code == 400, resp
    body = json.loads(resp.body)
    assert body["err_code"] == "Bad Request" and param in body["err_msg"], body


def test_deepgram_bad_parameter_sdk(dg):
    with pytest.raises(Exception) as e:
        with client(dg).listen.v1.connect(model="nova-3", encoding="opus"):
            pass
    assert status(e.value) == 400


@pytest.fixture(scope="module")
def dg_idle(sottod_bin, tiny_model, tmp_path_factory):
    """A sottod whose idle timeout is 3 s (no token)."""
    d = Daemon(tmp_path_factory.mktemp("sottod-dg-idle"), tiny_model,
               conf="[server]\nidle_timeout_seconds = 3\n",
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"127.0.0.1:{d.listen_port()}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def test_deepgram_keepalive(dg_idle):
    """idle_timeout_seconds is 3 here: KeepAlive every second holds an idle
    connection for 5 s; without it, it is closed with an Error."""
    dg = dg_idle
    with client(dg).listen.v1.connect(model="nova-3") as conn:
        for _ in range(5):
            conn.send_keep_alive()
            time.sleep(1)
        conn.send_media(b"\0\0" * 1600)
        conn.send_close_stream()
        msgs = list(conn)
    assert msgs[-1].type == "Metadata", msgs
    with client(dg).listen.v1.connect(model="nova-3") as conn:
        t0 = time.monotonic()
        reader = Reader(conn)
        msgs = reader.join(30)
    # the close says why too: 1008 timeout (protocol.md, WebSocket)
    assert reader.error is not None and reader.error.rcvd.code == 1008
    assert msgs and msgs[-1].type == "Error", msgs
    assert "idle" in msgs[-1].description and msgs[-1].variant == "timeout"
    assert 2.5 < time.monotonic() - t0 < 10


def test_deepgram_bad_message(dg):
    """A text message that is not one of the three: an Error, and the
    connection stays."""
    with connect(f"ws://{dg.base}/v1/listen", additional_headers={
            "Authorization": f"Token {TOKEN}"}) as c:
        c.send(json.dumps({"type": "Configure", "x": 1}))
        m = json.loads(c.recv(timeout=30))
        assert m["type"] == "Error" and "Configure" in m["description"], m
        c.send("not json")
        assert json.loads(c.recv(timeout=30))["type"] == "Error"
        c.send(json.dumps({"type": "CloseStream"}))
        assert json.loads(c.recv(timeout=30))["type"] == "Metadata"


def test_deepgram_sigterm(sottod_bin, tiny_model, tmp_path_factory):
    """SIGTERM mid-stream: the audio sottod took is decoded to its end,
    its finals and Metadata sent, then the close says sottod is stopping
    (1001) and sottod exits 0."""
    d = Daemon(tmp_path_factory.mktemp("sottod-dg-stop"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    try:
        data = raw(JFK, "-r", "16000", "-b", "16", "-e", "signed")[:32000 * 5]
        msgs, closed = [], None
        with connect(f"ws://127.0.0.1:{d.listen_port()}/v1/listen"
                     "?interim_results=true") as c:
            for i in range(0, len(data), 3200):
                c.send(data[i:i + 3200])
            while True:		# decoding has begun
                msgs.append(json.loads(c.recv(timeout=60)))
                if msgs[-1]["type"] == "Results":
                    break
            d.proc.send_signal(signal.SIGTERM)
            try:
                while True:
                    msgs.append(json.loads(c.recv(timeout=60)))
            except ConnectionClosed as e:
                closed = e
        assert closed is not None and closed.rcvd.code == 1001, closed
        assert msgs[-1]["type"] == "Metadata", msgs
        finals = [m for m in msgs if m["type"] == "Results" and m["is_final"]]
        got = words(" ".join(m["channel"]["alternatives"][0]["transcript"]
                             for m in finals))
        assert got[:4] == ["and", "so", "my", "fellow"], got
        assert d.proc.wait(timeout=60) == 0, d.log()
    finally:
        if d.alive():
            d.stop(signal.SIGKILL)
