"""sottod built with AddressSanitizer and UndefinedBehaviorSanitizer
(build-asan/, made by `scripts/setup --asan`), driven through every front
door and the edge cases of a session's life, then stopped with SIGTERM.
UBSan halts on its first report and ASan on its first error, so any
report fails the test (the daemon dies, or its log names it: Daemon.stop
checks). The C unit tests run under both sanitizers in meson; this is the
daemon as clients use it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import time
import wave

import openai
import pytest
from websockets.sync.client import connect as ws_connect
from wyoming.asr import Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_OPEN, MSG_STATUS,
                      REPO, SOTTO, Daemon, RawClient, frame, jframe,
                      report)

ASAN_SOTTOD = REPO / "build-asan" / "daemon" / "sottod"
SAN_ENV = {
    "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "LSAN_OPTIONS": f"suppressions={REPO / 'tests' / 'lsan.supp'}",
}


def pcm16(name: str) -> bytes:
    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2)
        return w.readframes(w.getnframes())


def events_until_end(c: RawClient) -> list[dict]:
    evs = []
    while (ev := c.event()) is not None:
        evs.append(ev)
        if ev["type"] in ("end", "error"):
            break
    return evs


async def wyoming_utterance(port: int, pcm: bytes) -> str:
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(AudioStart(rate=16000, width=2,
                                       channels=1).event())
        for i in range(0, len(pcm), 32000):
            await c.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                           audio=pcm[i:i + 32000]).event())
        await c.write_event(AudioStop().event())
        while True:
            ev = await asyncio.wait_for(c.read_event(), 300)
            assert ev is not None, "the connection closed before transcript"
            if Transcript.is_type(ev.type):
                return Transcript.from_event(ev).text


def test_sanitized_daemon_every_door(tiny_model, tmp_path):
    if not (ASAN_SOTTOD.is_file() and os.access(ASAN_SOTTOD, os.X_OK)):
        pytest.fail(f"{ASAN_SOTTOD} is missing: build it with "
                    "scripts/setup --asan")
    # Greedy doors, 4 s of speech and 2 s steps: the sanitized engine is
    # slow, and what is checked here is the daemon's code, not the words.
    d = Daemon(tmp_path / "d", tiny_model, env=SAN_ENV, binary=ASAN_SOTTOD,
               argv=["--http", "127.0.0.1:0", "--wyoming", "127.0.0.1:0"],
               conf="[engine]\nstep_ms = 2000\n[http]\nbeam_size = 1\n"
               "[wyoming]\nbeam_size = 1\n")
    d.start(timeout=180)
    jfk = pcm16("jfk.wav")[:4 * 32000]     # "And so my fellow Americans"
    wav = tmp_path / "jfk4.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(jfk)
    done = []

    # A stream that ends before any audio.
    c = RawClient(d.socket, timeout=300)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000,
                             "channels": 1}))
    assert c.event()["type"] == "opened"
    c.send(frame(MSG_END))
    evs = events_until_end(c)
    assert evs and evs[-1]["type"] == "end", f"{evs}:\n{d.log()}"
    done.append("a stream ended before any audio")

    # A short stream with word times, a vocabulary and live speaker
    # labels, then STATUS on the same connection.
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000,
                             "channels": 1, "word_timestamps": True,
                             "prompt": "Americans, fellow",
                             "diarize": True}))
    assert c.event()["type"] == "opened"
    for i in range(0, len(jfk), 16000):
        c.send(frame(MSG_AUDIO, jfk[i:i + 16000]))
    c.send(frame(MSG_END))
    evs = events_until_end(c)
    text = " ".join(s["text"] for e in evs if e["type"] == "final"
                    for s in e["segments"])
    assert "fellow" in text.lower(), f"{evs}:\n{d.log()}"
    assert {s.get("speaker") for e in evs if e["type"] == "final"
            for s in e["segments"]} == {"S1"}, evs
    c.send(frame(MSG_STATUS))
    assert c.event()["type"] == "status"
    c.close()
    done.append("a stream with word times, a vocabulary and speaker "
                "labels, status")

    # Bad frames: a wrong type, then a frame cut by the connection's end.
    c = RawClient(d.socket)
    c.send(frame(0x7f))
    assert c.event()["type"] == "error"
    c.close()
    c = RawClient(d.socket)
    c.send(b"\x10\x00\x00\x00\x01{")
    c.close()
    done.append("bad frames")

    # The HTTP API and the WebSocket.
    hp = d.listen_port("http")
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{hp}/v1", api_key="x",
                        timeout=300, max_retries=0)
    with open(wav, "rb") as f:
        r = sdk.audio.transcriptions.create(
            model="whisper-1", file=f, response_format="verbose_json",
            timestamp_granularities=["word"])
    assert "fellow" in r.text.lower(), r
    with ws_connect(f"ws://127.0.0.1:{hp}/ws", open_timeout=30) as ws:
        assert json.loads(ws.recv(30))["type"] == "hello"
        ws.send(json.dumps({"format": "s16le", "rate": 16000,
                            "channels": 1}))
        assert json.loads(ws.recv(30))["type"] == "opened"
        ws.send(jfk)
        ws.send(json.dumps({"type": "end"}))
        while json.loads(ws.recv(300))["type"] != "end":
            pass
    done.append("HTTP transcription, WebSocket stream")

    # stream=true, and the Realtime door: mu-law through the server VAD,
    # a clear, a bad event, 24 kHz PCM committed by the client (2.8 s of
    # speech each: the sanitized engine is slow).
    go = AUDIO_DIR / "goforward.wav"
    with open(go, "rb") as f:
        evs = list(sdk.audio.transcriptions.create(
            model="whisper-1", file=f, stream=True))
    assert "forward" in evs[-1].text.lower(), evs
    rt = openai.OpenAI(base_url=f"http://127.0.0.1:{hp}/v1", api_key="x",
                       websocket_base_url=f"ws://127.0.0.1:{hp}/v1")
    ulaw = subprocess.run(["sox", "-D", str(go), "-r", "8000", "-e", "u-law",
                           "-t", "raw", "-"], capture_output=True,
                          check=True).stdout + b"\xff" * 16000
    pcm24 = subprocess.run(["sox", "-D", str(go), "-r", "24000", "-b", "16", "-e",
                            "signed", "-t", "raw", "-"], capture_output=True,
                           check=True).stdout
    with rt.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"format": {"type": "audio/pcmu"}, "turn_detection": {
                "type": "server_vad", "silence_duration_ms": 1500}}}})
        conn.send({"type": "input_audio_buffer.append", "audio": "@"})
        for i in range(0, len(ulaw), 1600):
            conn.input_audio_buffer.append(
                audio=base64.b64encode(ulaw[i:i + 1600]).decode())
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000},
                      "turn_detection": None}}})
        conn.input_audio_buffer.append(
            audio=base64.b64encode(pcm24[:48000]).decode())
        conn.input_audio_buffer.clear()
        for i in range(0, len(pcm24), 4800):
            conn.input_audio_buffer.append(
                audio=base64.b64encode(pcm24[i:i + 4800]).decode())
        conn.input_audio_buffer.commit()
        texts = []
        for ev in conn:
            if ev.type.endswith("transcription.completed"):
                texts.append(ev.transcript)
                if len(texts) == 2:
                    break
    assert all("forward" in t.lower() for t in texts), texts
    done.append("HTTP stream=true, Realtime (VAD, mu-law, PCM, clear)")

    # The Deepgram door: mu-law, interim results and the events, a bad
    # text message; 2 s of speech, Finalize, then silence in a second
    # session (one decoding step: about 7 s here), CloseStream.
    url = (f"ws://127.0.0.1:{hp}/v1/listen?encoding=mulaw&sample_rate=8000"
           "&interim_results=true&vad_events=true&utterance_end_ms=1000")
    t0 = time.monotonic()
    with ws_connect(url, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "Configure"}))
        assert json.loads(ws.recv(30))["type"] == "Error"
        for i in range(0, 8000 * 2, 800):
            ws.send(ulaw[i:i + 800])
        ws.send(json.dumps({"type": "Finalize"}))
        ws.send(b"\xff" * 4000)
        ws.send(json.dumps({"type": "CloseStream"}))
        msgs = []
        while not msgs or msgs[-1]["type"] != "Metadata":
            msgs.append(json.loads(ws.recv(300)))
    finals = " ".join(m["channel"]["alternatives"][0]["transcript"]
                      for m in msgs if m["type"] == "Results" and
                      m["is_final"])
    assert "forward" in finals.lower() and any(
        m.get("from_finalize") for m in msgs), msgs
    done.append(f"Deepgram (mu-law, Finalize, CloseStream: "
                f"{time.monotonic() - t0:.1f} s)")

    # A Wyoming utterance.
    text = asyncio.run(wyoming_utterance(d.listen_port("wyoming"), jfk))
    assert "fellow" in text.lower(), text
    done.append("a Wyoming utterance")

    # SIGTERM with a stream open: it is finished, then sottod exits 0.
    p = subprocess.Popen([str(SOTTO), "stream", "-s", d.socket, str(wav)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    c = RawClient(d.socket)
    c.hello()
    streaming = False
    while not streaming and p.poll() is None:
        c.send(frame(MSG_STATUS))
        streaming = any(s["state"] == "streaming"
                        for s in c.event().get("session_list", []))
        time.sleep(0.1)
    c.close()
    assert streaming, (f"sotto stream exited {p.poll()} before its session "
                       f"was seen: {p.communicate()}")
    time.sleep(2)       # "And so, my": what was written is decoded
    rc = d.stop(signal.SIGTERM, timeout=300)
    out, err = p.communicate(timeout=60)
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"
    assert p.returncode == 0 and out.strip(), (p.returncode, out, err)
    done.append("SIGTERM mid-stream")
    report("sanitized sottod (ASan + UBSan, halt on error): " +
           "; ".join(done) + ": no report")
