"""sottod's Wyoming door under limits and shutdown: max_sessions shared
with the socket's sessions, max_utterance_seconds, a stalled half-header
client, the connection caps that keep room for local clients, listen
errors, and SIGTERM mid-utterance (within and past shutdown_grace_seconds)
for both answers (live and whole).
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time

import pytest
from wyoming.asr import Transcript, TranscriptChunk, TranscriptStart
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.ping import Ping, Pong

from conftest import (AUDIO_DIR, MSG_OPEN, MSG_STATUS, SOTTO, SOTTOD,
                      RawClient, jframe, report)
from wyoming_client import kinds, read_wav, start, utterance

ONE_SHOT = ["2830-3980-0043.wav", "mfa_thoughts.wav", "whisper.wav",
            "sense_and_sensibility_01_austen_64kb-0890.wav"]
# (file, rate, width, channels): resampled, mixed and widened in sottod.
ODD = [("falsetto.wav", 44100, 2, 2), ("goforward.wav", 8000, 1, 1),
       ("2830-3980-0043.wav", 48000, 3, 3), ("mfa_thoughts.wav", 22050, 4, 1)]


def test_limits_and_sharing(make_daemon):
    """max_sessions counts Wyoming utterances with socket sessions; an
    utterance over max_utterance_seconds is refused; a client that goes
    away mid-utterance frees its session; a stalled client with half a
    header does not hold up the others."""
    d = start(make_daemon, "max_sessions = 1\n[wyoming]\n"
                           "max_utterance_seconds = 3\n")
    port = d.port
    pcm, rate, width, ch = read_wav(AUDIO_DIR / "jfk.wav")
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b'{"type": "descr')

    async def go():
        c = AsyncTcpClient("127.0.0.1", port)
        await c.connect()
        await c.write_event(AudioStart(rate=rate, width=width,
                                       channels=ch).event())
        await c.write_event(AudioChunk(rate=rate, width=width, channels=ch,
                                       audio=pcm[:32000]).event())
        ev = await asyncio.wait_for(c.read_event(), 30)
        assert TranscriptStart.is_type(ev.type), ev
        # The one session is taken: a socket client is refused ...
        rc = RawClient(d.socket)
        rc.hello()
        rc.send(jframe(MSG_OPEN, {"format": "s16le"}))
        ev = rc.event()
        assert ev["type"] == "error" and ev["code"] == "busy", ev
        rc.close()
        # ... and so is another Wyoming utterance.
        r = await utterance(port, pcm[:32000], rate, width, ch)
        assert Error.is_type(r["events"][-1][1].type), kinds(r)
        assert Error.from_event(r["events"][-1][1]).code == "busy"
        # Gone mid-utterance: the session goes with it.
        await c.disconnect()
        for _ in range(100):
            rc = RawClient(d.socket)
            rc.hello()
            rc.send(jframe(MSG_STATUS, {}))
            st = rc.event()
            rc.close()
            if st["sessions"] == 0:
                break
            await asyncio.sleep(0.1)
        assert st["sessions"] == 0, st
        # 11 s of audio with max_utterance_seconds = 3.
        r = await utterance(port, pcm, rate, width, ch)
        return r

    r = asyncio.run(go())
    err = Error.from_event(r["events"][-1][1])
    assert err.code == "too_large" and "max_utterance_seconds" in err.text
    stalled.close()
    assert d.stop() == 0


@pytest.mark.parametrize("answer", ["live", "whole"])
def test_sigterm_mid_utterance(make_daemon, tiny_model, answer):
    """SIGTERM: the utterance so far is transcribed and sent, then the
    connection closes and sottod exits 0."""
    d = start(make_daemon, f"[wyoming]\nanswer = {answer}\n")
    port = d.port
    pcm, rate, width, ch = read_wav(AUDIO_DIR / "jfk.wav")

    async def go():
        async with AsyncTcpClient("127.0.0.1", port) as c:
            await c.write_event(AudioStart(rate=rate, width=width,
                                           channels=ch).event())
            await c.write_event(AudioChunk(rate=rate, width=width,
                                           channels=ch,
                                           audio=pcm[:16000 * 2 * 4]).event())
            # The pong comes once the chunk before it has been taken.
            await c.write_event(Ping(text="after the audio").event())
            ev = await asyncio.wait_for(c.read_event(), 30)
            assert TranscriptStart.is_type(ev.type), ev
            ev = await asyncio.wait_for(c.read_event(), 30)
            assert Pong.is_type(ev.type), ev
            d.proc.send_signal(signal.SIGTERM)
            out = []
            while (ev := await asyncio.wait_for(c.read_event(), 60)):
                out.append(ev)
            return out

    evs = asyncio.run(go())
    assert [e.type for e in evs][-2:] == ["transcript", "transcript-stop"]
    assert "fellow americans" in Transcript.from_event(evs[-2]).text.lower()
    assert d.proc.wait(60) == 0, d.log()
    d.stop()


def test_listen_errors(make_daemon, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        d = make_daemon(argv=["--wyoming", f"127.0.0.1:{port}"])
        cp = subprocess.run([str(SOTTOD), "-f", str(d.conf), "-m",
                             str(d.model), "--wyoming", f"127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1, cp.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in cp.stderr, cp.stderr
    conf = tmp_path / "bad.conf"
    conf.write_text("[wyoming]\nlisten = 10300\n")
    cp = subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 1 and "bad.conf:2: listen:" in cp.stderr, cp.stderr


# --- connection limits ------------------------------------------------------------

def read_line(s: socket.socket, timeout: float) -> dict | None:
    """One Wyoming event's header (no data), or None when closed."""
    s.settimeout(timeout)
    buf = b""
    while not buf.endswith(b"\n"):
        try:
            b = s.recv(1)
        except (ConnectionResetError, socket.timeout):
            return None
        if not b:
            return None
        buf += b
    return json.loads(buf)


def test_connection_caps_spare_local_clients(make_daemon):
    """Wyoming connections have caps of their own ([wyoming]
    max_connections, max_connections_per_address), apart from the Unix
    socket's max_connections: idle TCP connections never lock local
    clients (sotto status) out. One that sends no event within
    handshake_timeout_seconds is told so and closed."""
    d = start(make_daemon, "[server]\nmax_connections = 6\n"
                           "handshake_timeout_seconds = 3\n"
                           "[wyoming]\nmax_connections = 8\n"
                           "max_connections_per_address = 4\n")
    held = []
    try:
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", d.port)))
            held[-1].sendall(b'{"type": "ping"}\n')
            assert read_line(held[-1], 10)["type"] == "pong"
        extra = socket.create_connection(("127.0.0.1", d.port))
        ev = read_line(extra, 10)
        assert ev is not None and ev["type"] == "error", ev
        extra.close()
        # Six more on the socket's own cap: all of them get status.
        for _ in range(6):
            cp = subprocess.run([str(SOTTO), "status", "-s", d.socket,
                                 "--json"], capture_output=True, text=True,
                                timeout=30)
            assert cp.returncode == 0, cp.stderr
        # An idle connection (nothing sent) is closed with a timeout.
        held[0].close()
        idle = socket.create_connection(("127.0.0.1", d.port))
        t0 = time.monotonic()
        ev = read_line(idle, 30)
        assert ev is not None and ev["type"] == "error", ev
        assert 2 <= time.monotonic() - t0 < 15
        idle.close()
    finally:
        for s in held:
            s.close()
    log = d.log()
    assert "max_connections_per_address = 4" in log, log
    assert "no event within 3 s" in log, log
    report("wyoming caps: 4 per address held, the 5th refused, `sotto "
           "status` served meanwhile; an idle connection closed after 3 s")


@pytest.mark.parametrize("answer", ["live", "whole"])
def test_sigterm_grace_over_mid_utterance(make_daemon, answer):
    """SIGTERM with an utterance that cannot be transcribed within
    shutdown_grace_seconds: the client still gets the transcript of what
    was final (the chunks it was sent), or an error, and then a clean
    close; never a reset with nothing."""
    d = start(make_daemon, "[server]\nshutdown_grace_seconds = 1\n"
                           f"[wyoming]\nanswer = {answer}\n")
    port = d.port
    pcm, rate, width, ch = read_wav(AUDIO_DIR / "jfk.wav")
    pcm = pcm * 6       # 66 s: more than the grace to transcribe

    async def go():
        async with AsyncTcpClient("127.0.0.1", port) as c:
            await c.write_event(AudioStart(rate=rate, width=width,
                                           channels=ch).event())
            for i in range(0, len(pcm), 32000):
                await c.write_event(AudioChunk(
                    rate=rate, width=width, channels=ch,
                    audio=pcm[i:i + 32000]).event())
            await c.write_event(Ping(text="after the audio").event())
            out = []
            while (ev := await asyncio.wait_for(c.read_event(), 60)):
                out.append(ev)
                if Pong.is_type(ev.type):
                    break
            d.proc.send_signal(signal.SIGTERM)
            try:
                while (ev := await asyncio.wait_for(c.read_event(), 60)):
                    out.append(ev)
            except ConnectionResetError:
                out.append(Event(type="reset"))
            return out

    evs = asyncio.run(go())
    kinds = [e.type for e in evs]
    assert "reset" not in kinds, kinds
    assert kinds[-2:] == ["transcript", "transcript-stop"] or \
        kinds[-1] == "error", kinds
    if kinds[-1] == "transcript-stop":
        chunks = " ".join(TranscriptChunk.from_event(e).text for e in evs
                          if TranscriptChunk.is_type(e.type))
        text = Transcript.from_event(evs[-2]).text
        assert text.split() == chunks.split() or "fellow" in text.lower(), \
            (text, chunks)
    assert d.proc.wait(60) == 0, d.log()
    d.stop()
    report(f"wyoming SIGTERM past the grace: {kinds[-2:]} then a clean "
           "close")
