"""sottod as a long-running service: connections that say nothing time
out instead of holding their uid's slots; the connection limit and the
session limit are separate, so `sotto status` answers while every session
is in use.

Real daemon, real tiny.en, real speech, driven by the real `sotto` client
and by a raw protocol client (conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import time
import wave

from conftest import (AUDIO_DIR, MSG_HELLO, MSG_OPEN, MSG_STATUS, SOTTO, RawClient,
                      frame, jframe, report)

OPEN = jframe(MSG_OPEN, {"format": "s16le"})


def pcm16(name: str) -> bytes:
    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2), f"{name}: not 16 kHz mono s16"
        return w.readframes(w.getnframes())


def sotto_status(sock: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SOTTO), "status", "-s", sock, "--json"],
                          capture_output=True, text=True, timeout=30)


def open_session(sock: str) -> RawClient:
    c = RawClient(sock)
    c.hello()
    c.send(OPEN)
    ev = c.event()
    assert ev["type"] == "opened", ev
    return c


def closed_with(c: RawClient, code: str) -> dict:
    """The next event is an error with code, then the connection ends."""
    ev = c.event()
    assert ev and ev["type"] == "error" and ev["code"] == code, ev
    assert c.event() is None
    return ev


# --- timeouts and limits -----------------------------------------------------------

def test_idle_connections_time_out(make_daemon):
    """32 sockets that never finish a HELLO (the per-uid cap) lock the uid
    out only until handshake_timeout_seconds; a client that opened a
    session and went quiet is closed after idle_timeout_seconds; one that
    keeps sending is not."""
    d = make_daemon(conf="handshake_timeout_seconds = 2\n"
                    "idle_timeout_seconds = 3\n").start()
    time.sleep(0.3)  # start()'s probe connection is gone
    t0 = time.monotonic()
    idle = []
    for i in range(32):
        c = RawClient(d.socket)
        if i % 2:
            c.send(b"\x10\x00")  # 2 bytes of a frame header
        idle.append(c)
    # The uid is at its cap: status is refused for now.
    cp = sotto_status(d.socket)
    assert cp.returncode != 0 and "too_many_connections" in cp.stderr, cp
    for c in idle:
        ev = closed_with(c, "timeout")
        assert "handshake_timeout_seconds" in ev["message"], ev
        c.close()
    waited = time.monotonic() - t0
    assert 1.5 < waited < 6, waited
    # Freed: the same uid gets in again.
    cp = sotto_status(d.socket)
    assert cp.returncode == 0, cp.stderr
    quiet = open_session(d.socket)
    talker = RawClient(d.socket)
    talker.hello()
    t1 = time.monotonic()
    while time.monotonic() - t1 < 4.5:
        talker.send(frame(MSG_STATUS))
        assert talker.event()["type"] == "status"
        time.sleep(0.5)
    ev = closed_with(quiet, "timeout")
    assert "idle_timeout_seconds" in ev["message"], ev
    # The talker outlived the quiet one's 3 s and is still served.
    talker.send(frame(MSG_STATUS))
    assert talker.event()["type"] == "status"
    talker.close()
    quiet.close()
    assert d.stop() == 0
    report(f"timeouts: 32 idle sockets (the uid's cap) closed with "
           f"'timeout' after {waited:.1f} s (handshake 2 s); a quiet "
           f"session after its idle 3 s")


def test_status_while_every_session_is_in_use(make_daemon):
    """Default limits: one user holds all 16 sessions; a 17th OPEN gets
    busy, and `sotto status` still answers."""
    d = make_daemon().start()
    held = [open_session(d.socket) for _ in range(16)]
    c = RawClient(d.socket)
    c.hello()
    c.send(OPEN)
    ev = closed_with(c, "busy")
    assert "16 sessions" in ev["message"], ev
    c.close()
    cp = sotto_status(d.socket)
    assert cp.returncode == 0, cp.stderr
    st = json.loads(cp.stdout)
    assert st["sessions"] == 16, st
    for c in held:
        c.close()
    assert d.stop() == 0


def test_connection_limit_is_its_own(make_daemon):
    """max_connections caps connections of every kind (busy, naming the
    key), apart from max_sessions, and is applied live."""
    d = make_daemon(conf="max_connections = 3\n").start()
    time.sleep(0.3)
    held = [RawClient(d.socket) for _ in range(3)]
    for c in held:
        c.hello()
    c = RawClient(d.socket)
    ev = closed_with(c, "busy")
    assert "max_connections = 3" in ev["message"], ev
    c.close()
    held.pop().close()
    deadline = time.monotonic() + 10
    while True:
        c = RawClient(d.socket)
        c.send(jframe(MSG_HELLO, {"protocol": 1}))
        if c.event()["type"] == "hello":
            break
        c.close()
        assert time.monotonic() < deadline, "closed peer still counted"
        time.sleep(0.1)
    held.append(c)
    for c in held:
        c.close()
    assert d.stop() == 0
