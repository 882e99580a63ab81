"""OpenAI's Realtime API in transcription mode at /v1/realtime?intent=transcription
(daemon/realtime, docs/http.md), driven by the official openai Python SDK's
realtime clients (the current one and the beta one) against a real sottod with
the real tiny.en model and the Silero VAD. Each transcript is compared with
`sotto transcribe` on the same file; bad input is sent through the same SDK
connection (its raw send), and the browser's ways to pass the token through the
`websockets` package.
"""

from __future__ import annotations

import base64
import re
import signal
import time
import urllib.request

import jiwer
import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from conftest import AUDIO_DIR, Daemon, report
from speech import words, reference, raw

JFK = AUDIO_DIR / "jfk.wav"
GO = AUDIO_DIR / "goforward.wav"
TOKEN = "sotto-test-token-0123456789"


@pytest.fixture(scope="module")
def rd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-rt"), tiny_model,
               conf=f"[http]\ntoken = {TOKEN}\n",
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"http://127.0.0.1:{d.listen_port()}"
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"





def client(d, key: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=d.base + "/v1", api_key=key, max_retries=0,
                         websocket_base_url=d.base.replace("http", "ws", 1)
                         + "/v1")


def append_all(conn, data: bytes, step: int) -> None:
    for i in range(0, len(data), step):
        conn.input_audio_buffer.append(
            audio=base64.b64encode(data[i:i + step]).decode())


def until(conn, n_completed: int, timeout: float = 120) -> list:
    """Events until n_completed transcripts are in (or an error)."""
    evs, done, t0 = [], 0, time.monotonic()
    for ev in conn:
        evs.append(ev)
        assert ev.type != "error", ev
        if ev.type.endswith("input_audio_transcription.completed"):
            done += 1
            if done == n_completed:
                return evs
        assert time.monotonic() - t0 < timeout, [e.type for e in evs]
    pytest.fail(f"connection closed: {[e.type for e in evs]}")


def check_item(evs: list, item_id: str) -> str:
    """The item's deltas add up to its completed transcript: return it."""
    deltas = [e.delta for e in evs if e.type.endswith("transcription.delta")
              and e.item_id == item_id]
    done = [e for e in evs if e.type.endswith("transcription.completed")
            and e.item_id == item_id]
    assert len(done) == 1, evs
    assert "".join(deltas).strip() == done[0].transcript, (deltas, done)
    assert done[0].usage.type == "duration" and done[0].usage.seconds > 0
    return done[0].transcript


# --- the current shape, the client commits ------------------------------------------

def test_realtime_pcm24_commit(rd, tiny_model):
    """audio/pcm at 24 kHz, turn_detection null: one item, committed by the
    client; deltas while it is decoded, then the same words as `sotto
    transcribe`."""
    ref = reference(JFK, tiny_model)
    data = raw(JFK, "-r", "24000", "-b", "16", "-e", "signed")
    with client(rd).realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        ev = conn.recv()
        assert ev.type == "session.created", ev
        assert ev.session.type == "transcription", ev
        conn.session.update(session={
            "type": "transcription",
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": None}}})
        ev = conn.recv()
        assert ev.type == "session.updated", ev
        assert ev.session.audio.input.turn_detection is None, ev
        append_all(conn, data, 4800)	# 100 ms a message
        conn.input_audio_buffer.commit()
        evs = until(conn, 1)
    types = [e.type for e in evs]
    committed = [e for e in evs if e.type == "input_audio_buffer.committed"]
    assert len(committed) == 1 and committed[0].previous_item_id is None
    item = committed[0].item_id
    assert "conversation.item.created" in types, types
    assert types.count("conversation.item.input_audio_transcription.delta") \
        >= 2, types
    text = check_item(evs, item)
    done = evs[-1]
    assert abs(done.usage.seconds - 11.0) < 0.1, done.usage
    # The item is a live session, and its audio came faster than real
    # time: it is stepped in larger steps as it falls behind, how much
    # larger depends on the machine's load, and Whisper may hear one word
    # differently at another step (0 here in every run).
    errors = word_errors(ref, words(text))
    report(f"realtime pcm24 (openai SDK): {text!r}, {errors} words off "
           "`sotto transcribe`")
    assert errors <= 1, (text, ref)


# --- the beta shape, the server's VAD ------------------------------------------------

def word_errors(ref: list[str], hyp: list[str]) -> int:
    return round(jiwer.wer(" ".join(ref), " ".join(hyp)) * len(ref))


@pytest.mark.parametrize("fmt,sox_fmt,silence", [
    ("pcm16", ["-r", "24000", "-b", "16", "-e", "signed"], b"\0\0" * 3),
    ("g711_ulaw", ["-r", "8000", "-e", "u-law"], b"\xff"),
    ("g711_alaw", ["-r", "8000", "-e", "a-law"], b"\xd5")])
def test_realtime_beta_server_vad(rd, tiny_model, fmt, sox_fmt, silence):
    """transcription_session.update and server_vad: the Silero VAD starts
    and stops the turn, commits it, and its transcript has the words of
    `sotto transcribe` on jfk.wav. G.711 is 8 kHz telephone audio, at the
    edge of what tiny.en hears (`sotto transcribe` of the same G.711 file
    says "American" for "Americans"): one word may differ there (0
    measured here, since the door resamples as `sotto transcribe` does;
    with the fastest resampler, 3)."""
    data = raw(JFK, *sox_fmt) + silence * 16000	# 2 s
    ref = reference(JFK, tiny_model)
    tolerance = 0 if fmt == "pcm16" else 1
    with client(rd).beta.realtime.connect(
            model="whisper-1",
            extra_query={"intent": "transcription"}) as conn:
        ev = conn.recv()
        assert ev.type == "transcription_session.created", ev
        conn.send({"type": "transcription_session.update", "session": {
            "input_audio_format": fmt,
            "input_audio_transcription": {"model": "whisper-1"},
            "turn_detection": {"type": "server_vad", "threshold": 0.5,
                               "prefix_padding_ms": 300,
                               "silence_duration_ms": 1500}}})
        ev = conn.recv()
        assert ev.type == "transcription_session.updated", ev
        assert ev.session.input_audio_format == fmt, ev
        append_all(conn, data, len(data) // 110)	# 100 ms a message
        evs = until(conn, 1)
    types = [e.type for e in evs]
    order = ["input_audio_buffer.speech_started",
             "input_audio_buffer.speech_stopped",
             "input_audio_buffer.committed", "conversation.item.created"]
    assert [t for t in types if t in order] == order, types
    start, stop = evs[types.index(order[0])], evs[types.index(order[1])]
    assert start.item_id == stop.item_id
    assert start.audio_start_ms < 500 and stop.audio_end_ms > 11000, \
        (start, stop)
    text = check_item(evs, start.item_id)
    errors = word_errors(ref, words(text))
    report(f"realtime {fmt} server_vad (openai SDK, beta): {text!r}, "
           f"{errors} words off `sotto transcribe`")
    assert errors <= tolerance, (text, ref)


def test_realtime_items_in_turn(rd):
    """Two commits in a row: two items, transcribed one after the other,
    the second naming the first as its previous item; clear drops audio."""
    data = raw(GO, "-r", "24000", "-b", "16", "-e", "signed")
    with client(rd).realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"turn_detection": None}}})
        assert conn.recv().type == "session.updated"
        append_all(conn, data[:48000], 48000)
        conn.input_audio_buffer.clear()
        append_all(conn, data, 9600)
        conn.input_audio_buffer.commit()
        append_all(conn, data, 9600)
        conn.input_audio_buffer.commit()
        evs = until(conn, 2)
    types = [e.type for e in evs]
    assert types[0] == "input_audio_buffer.cleared", types
    committed = [e for e in evs if e.type == "input_audio_buffer.committed"]
    assert [c.previous_item_id for c in committed] == [
        None, committed[0].item_id], committed
    texts = [check_item(evs, c.item_id) for c in committed]
    # Live sessions fed faster than real time (test_realtime_pcm24_commit)
    assert texts[0] and word_errors(words(texts[0]), words(texts[1])) <= 1, \
        texts
    done = [e for e in evs if e.type.endswith("completed")]
    assert [d.item_id for d in done] == [c.item_id for c in committed]
    assert abs(done[0].usage.seconds - done[1].usage.seconds) < 0.05
    # each item was a session of the door, as /metrics counts them
    req = urllib.request.Request(rd.base + "/metrics", headers={
        "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        m = re.search(r'^sottod_sessions_opened_total\{door="realtime"\} '
                      r'(\d+)$', r.read().decode(), re.M)
    assert m and int(m.group(1)) >= 3, m	# the cleared one, and two


# --- mistakes: error events, the connection stays ---------------------------------------

def test_realtime_client_errors(rd):
    with client(rd).realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        bad = [
            ({"type": "input_audio_buffer.append", "audio": "@@@@",
              "event_id": "e1"}, "invalid_value"),
            ({"type": "input_audio_buffer.commit", "event_id": "e2"},
             "input_audio_buffer_commit_empty"),
            ({"type": "response.create", "event_id": "e3"}, "invalid_event"),
            ({"type": "session.update", "event_id": "e4", "session": {
                "type": "transcription", "audio": {"input": {
                    "format": {"type": "audio/pcm", "rate": 16000}}}}},
             "invalid_value"),
            ({"type": "session.update", "event_id": "e5", "session": {
                "type": "transcription", "audio": {"input": {
                    "turn_detection": {"type": "server_vad",
                                       "threshold": 2}}}}}, "invalid_value"),
            ({"type": "session.update", "event_id": "e6", "session": {
                "type": "realtime"}}, "invalid_value"),
        ]
        for msg, code in bad:
            conn.send(msg)
            ev = conn.recv()
            assert ev.type == "error", (msg, ev)
            assert ev.error.code == code and ev.error.message, (msg, ev)
            assert ev.error.event_id == msg["event_id"], ev
        conn.send({"type": "input_audio_buffer.clear"})
        assert conn.recv().type == "input_audio_buffer.cleared"


def test_realtime_refusals(rd):
    ws = rd.base.replace("http", "ws", 1)
    # the SDK with a wrong key: its WebSocket handshake gets the 401
    with pytest.raises(InvalidStatus) as e:
        with client(rd, key="wrong-token-0123456789").realtime.connect(
                extra_query={"intent": "transcription"}) as conn:
            conn.recv()
    assert e.value.response.status_code == 401
    assert b"invalid_api_key" in e.value.response.body
    for path in ("/v1/realtime?intent=transcription", "/v1/realtime"):
        with pytest.raises(InvalidStatus) as e:
            connect(ws + path)		# no token: refused before the rest
        assert e.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as e:
        connect(ws + "/v1/realtime?model=gpt-realtime",
                additional_headers={"Authorization": f"Bearer {TOKEN}"})
    assert e.value.response.status_code == 400
    assert b"intent=transcription" in e.value.response.body


def test_realtime_browser_token(rd):
    """A browser cannot set headers on a WebSocket: the token goes as the
    subprotocol openai-insecure-api-key.TOKEN (OpenAI's way, answered with
    the subprotocol realtime) or as ?token=."""
    ws = rd.base.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    with connect(ws, subprotocols=["realtime",
                                   f"openai-insecure-api-key.{TOKEN}"]) as c:
        assert c.subprotocol == "realtime"
        assert '"session.created"' in c.recv(timeout=30)
    with connect(ws + f"&token={TOKEN}") as c:
        assert '"session.created"' in c.recv(timeout=30)
    with pytest.raises(InvalidStatus) as e:
        connect(ws, subprotocols=["realtime",
                                  "openai-insecure-api-key.nottheonetoken"])
    assert e.value.response.status_code == 401


def test_realtime_sigterm_finishes_the_item(sottod_bin, sotto_bin, tiny_model,
                                            tmp_path_factory):
    """SIGTERM while an item is decoded: the audio sottod took is decoded
    to its end, the item committed (by sottod if the client's commit had
    not come) and completed, then the close says sottod is stopping."""
    d = Daemon(tmp_path_factory.mktemp("sottod-rt-stop"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    try:
        sigterm_mid_item(d, tiny_model)
    finally:
        if d.alive():
            d.stop(signal.SIGKILL)


def sigterm_mid_item(d, tiny_model) -> None:
    d.base = f"http://127.0.0.1:{d.listen_port()}"
    data = raw(JFK, "-r", "24000", "-b", "16", "-e", "signed")
    evs, closed = [], None
    with client(d, key="unused").realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"turn_detection": None}}})
        assert conn.recv().type == "session.updated"
        append_all(conn, data, 4800)
        conn.input_audio_buffer.commit()
        for ev in conn:		# decoding has begun
            evs.append(ev)
            if ev.type.endswith("transcription.delta"):
                break
        d.proc.send_signal(signal.SIGTERM)
        try:
            for ev in conn:
                evs.append(ev)
        except ConnectionClosed as e:
            closed = e
    types = [e.type for e in evs]
    assert "error" not in types, evs
    done = [e for e in evs if e.type.endswith("transcription.completed")]
    assert len(done) == 1 and "input_audio_buffer.committed" in types, types
    # the audio ends where the signal cut it: its last words may be heard
    # otherwise than in the whole sentence ("ask what you want to do")
    ref, got = reference(JFK, tiny_model), words(done[0].transcript)
    assert len(got) >= 5 and got[:-3] == ref[:len(got) - 3], (got, ref)
    assert 0 < done[0].usage.seconds <= 11.0, done[0].usage
    report(f"realtime SIGTERM: completed {done[0].usage.seconds:.2f} s of "
           f"11 s: {done[0].transcript!r}")
    assert closed is None or closed.rcvd.code == 1001, closed
    assert d.proc.wait(timeout=60) == 0, d.log()


def test_realtime_language_the_model_lacks(rd):
    """tiny.en transcribes English only: audio for an item in German is
    refused with the reason, and the connection closed."""
    with client(rd).realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"transcription": {"model": "whisper-1",
                                        "language": "de"},
                      "turn_detection": None}}})
        assert conn.recv().type == "session.updated"
        conn.input_audio_buffer.append(
            audio=base64.b64encode(b"\0" * 4800).decode())
        ev = conn.recv()
        assert ev.type == "error" and ev.error.code == "bad_value", ev
        assert "English" in ev.error.message or "en" in ev.error.message, ev
