"""A session's vocabulary through every door that streams: the socket's
OPEN "prompt" (`sotto stream --prompt`), the WebSocket's OPEN, the OpenAI
Realtime session's transcription prompt (the openai SDK) and Deepgram's
keyterm / keywords (the deepgram-sdk). The rare name: tiny.en streams
"Guttenburg" for the Gutenberg Bible in the LJ Speech long-form recording
(tests/stream/test_stream_vocabulary.py shows it without the vocabulary);
with "Gutenberg" as the vocabulary it spells it. The other doors carry a
vocabulary that shows on 2.8 s of speech: goforward.wav is "Go forward
10 meters." without one and "go forward ten meters" with "ten".
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading

import openai
import pytest
from deepgram import DeepgramClient
from deepgram.environment import DeepgramClientEnvironment
from websockets.sync.client import connect as ws_connect

from conftest import AUDIO_DIR, SOTTO, Daemon, RawClient, jframe, MSG_OPEN, \
    report
from speech import raw

LONG = AUDIO_DIR / "LJ001-0001_to_LJ001-0017_longform.wav"
GO = AUDIO_DIR / "goforward.wav"


@pytest.fixture(scope="module")
def vd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod-vocab"), tiny_model,
               argv=["--http", "127.0.0.1:0"]).start()
    d.hp = d.listen_port("http")
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"



def sotto_stream(d, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SOTTO), "stream", "-s", d.socket, "--fast",
                           *args], capture_output=True, text=True,
                          timeout=300)


def test_socket_vocabulary_spells_the_name(vd, tmp_path):
    wav = tmp_path / "gutenberg.wav"      # 36.0-52.5 s: "... the Gutenberg,
    subprocess.run(["sox", str(LONG), str(wav), "trim", "36", "=52.5"],
                   check=True)            # or forty-two line Bible ..."
    cp = sotto_stream(vd, "--prompt", "Gutenberg", str(wav))
    assert cp.returncode == 0, cp.stderr
    report(f"vocabulary over the socket: {cp.stdout.strip()!r}")
    assert "Gutenberg" in cp.stdout and "surpassed" in cp.stdout, cp.stdout


def test_socket_vocabulary_limits(vd):
    # past the 111 tokens a stream keeps: cut, and the stream runs
    long = "ten " + " ".join(f"w{i}" for i in range(200))
    cp = sotto_stream(vd, "--prompt", long, str(GO))
    assert cp.returncode == 0 and "forward" in cp.stdout.lower(), cp
    # past the 1023 bytes OPEN takes: refused, by sotto and by sottod
    cp = sotto_stream(vd, "--prompt", "x" * 1024, str(GO))
    assert cp.returncode == 2 and "--prompt" in cp.stderr, cp
    c = RawClient(vd.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000,
                             "channels": 1, "prompt": "x" * 1024}))
    ev = c.event()
    assert ev["type"] == "error" and "prompt" in ev["message"], ev
    c.close()


def test_websocket_vocabulary(vd):
    pcm = raw(GO, "-r", "16000", "-b", "16", "-e", "signed")
    texts = {}
    for prompt in ("", "ten"):
        with ws_connect(f"ws://127.0.0.1:{vd.hp}/ws", open_timeout=30) as ws:
            assert json.loads(ws.recv(30))["type"] == "hello"
            ws.send(json.dumps({"format": "s16le", "rate": 16000,
                                "channels": 1, "prompt": prompt}))
            assert json.loads(ws.recv(30))["type"] == "opened"
            ws.send(pcm)
            ws.send(json.dumps({"type": "end"}))
            text = ""
            while (ev := json.loads(ws.recv(120)))["type"] != "end":
                if ev["type"] == "final":
                    text += "".join(s["text"] for s in ev["segments"])
            texts[prompt] = text
    report(f"vocabulary over the WebSocket: {texts}")
    assert "10" in texts[""] and "ten" not in texts[""].lower(), texts
    assert "ten" in texts["ten"].lower() and "10" not in texts["ten"], texts


def test_realtime_vocabulary(vd):
    """The current session shape's audio.input.transcription.prompt, echoed
    in session.updated, steers the item's transcript."""
    rt = openai.OpenAI(base_url=f"http://127.0.0.1:{vd.hp}/v1", api_key="x",
                       websocket_base_url=f"ws://127.0.0.1:{vd.hp}/v1",
                       max_retries=0)
    pcm24 = raw(GO, "-r", "24000", "-b", "16", "-e", "signed")
    with rt.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        conn.recv()
        conn.session.update(session={"type": "transcription", "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000},
                      "turn_detection": None,
                      "transcription": {"model": "whisper-1",
                                        "prompt": "ten"}}}})
        for i in range(0, len(pcm24), 4800):
            conn.input_audio_buffer.append(
                audio=base64.b64encode(pcm24[i:i + 4800]).decode())
        conn.input_audio_buffer.commit()
        updated = text = None
        for ev in conn:
            if ev.type == "session.updated":
                updated = ev
            if ev.type == "conversation.item.input_audio_transcription.completed":
                text = ev.transcript
                break
            assert ev.type != "error", ev
    assert updated.session.audio.input.transcription.prompt == "ten", updated
    report(f"vocabulary over the Realtime API: {text!r}")
    assert "ten" in text.lower() and "10" not in text, text


def test_deepgram_keyterm(vd):
    """keyterm (and keywords with a boost, which Whisper has no use for)
    become the vocabulary."""
    env = DeepgramClientEnvironment(base=f"http://127.0.0.1:{vd.hp}",
                                    production=f"ws://127.0.0.1:{vd.hp}",
                                    agent=f"ws://127.0.0.1:{vd.hp}",
                                    agent_rest=f"http://127.0.0.1:{vd.hp}")
    pcm = raw(GO, "-r", "16000", "-b", "16", "-e", "signed")
    texts = {}
    for kw in ({"keyterm": "ten"}, {"keywords": "ten:2"}):
        msgs = []
        with DeepgramClient(api_key="x", environment=env).listen.v1.connect(
                model="nova-3", encoding="linear16", sample_rate=16000,
                **kw) as conn:
            t = threading.Thread(target=lambda: msgs.extend(conn),
                                 daemon=True)
            t.start()
            for i in range(0, len(pcm), 3200):
                conn.send_media(pcm[i:i + 3200])
            conn.send_close_stream()
            t.join(120)
        texts[next(iter(kw))] = " ".join(
            m.channel.alternatives[0].transcript for m in msgs
            if m.type == "Results" and m.is_final)
    report(f"vocabulary over Deepgram's API: {texts}")
    for k, text in texts.items():
        assert "ten" in text.lower() and "10" not in text, (k, texts)
