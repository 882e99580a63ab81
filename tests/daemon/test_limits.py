"""sottod's limits, live: a slow reader whose backlog of finals passes
max_client_buffer_bytes.

Real daemon, real tiny.en, real speech, as in test_daemon.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_OPEN, MSG_STATUS,
                      RawClient, Stream, frame, jframe, report)

OPEN = jframe(MSG_OPEN, {"format": "s16le"})


def pcm16(name: str) -> bytes:
    import wave

    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2), f"{name}: not 16 kHz mono s16"
        return w.readframes(w.getnframes())


def wait_log(d, text: str, timeout: float = 30, after: int = 0) -> str:
    """The daemon's whole log once it holds text past offset after."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = d.log_path.read_text()
        if text in log[after:]:
            return log
        assert d.alive(), f"sottod died:\n{d.log()}"
        time.sleep(0.1)
    pytest.fail(f"{text!r} not in the log within {timeout} s:\n{d.log()}")


def reload(d, conf: str, summary: str = "reload: ") -> str:
    """Write conf as the daemon's config, SIGHUP it, return the new log."""
    mark = len(d.log_path.read_text())
    d.conf.write_text(conf)
    d.proc.send_signal(signal.SIGHUP)
    return wait_log(d, summary, after=mark)[mark:]


def status(sock: str) -> dict:
    c = RawClient(sock)
    c.hello()
    c.send(frame(MSG_STATUS))
    ev = c.event()
    c.close()
    assert ev["type"] == "status", ev
    return ev


def open_session(sock: str) -> RawClient:
    c = RawClient(sock)
    c.hello()
    c.send(OPEN)
    ev = c.event()
    assert ev["type"] == "opened", ev
    return c


def refused(sock: str, code: str) -> dict:
    """Connect, HELLO, OPEN: expect one error event with code, then EOF."""
    c = RawClient(sock)
    ev = c.event() if code == "too_many_connections" else None
    if ev is None:
        c.hello()
        c.send(OPEN)
        ev = c.event()
    assert ev and ev["type"] == "error" and ev["code"] == code, ev
    assert ev["message"], ev
    assert c.event() is None
    c.close()
    return ev


def stream_jfk(sock: str) -> str:
    c = RawClient(sock)
    c.hello()
    c.send(OPEN)
    assert c.event()["type"] == "opened"
    pcm = pcm16("jfk.wav")
    for i in range(0, len(pcm), 32000):
        c.send(frame(MSG_AUDIO, pcm[i:i + 32000]))
    c.send(frame(MSG_END))
    evs = c.events_until("end")
    c.close()
    return "".join(s["text"] for e in evs if e["type"] == "final"
                   for s in e["segments"])


# --- a slow reader -------------------------------------------------------------------

def test_slow_reader_cut_after_its_finals(make_daemon):
    """A client that sends a long stream and reads nothing: its partials
    are dropped first, its finals are kept until their backlog passes
    max_client_buffer_bytes (4K here), then it gets slow_reader after
    everything it had not read and is closed; the finals it missed come
    with a resume; other clients see nothing of it."""
    d = make_daemon(conf="max_client_buffer_bytes = 4K\n").start()
    wav = AUDIO_DIR / "jfk.wav"
    solo = Stream(d.socket, "--fast", wav).check().text()
    assert "country" in solo.lower()

    slow = RawClient(d.socket, timeout=60)
    slow.hello()
    slow.send(OPEN)
    opened = slow.event()
    assert opened["type"] == "opened", opened
    sid = opened["session"]
    pcm = pcm16("LJ001-0001_to_LJ001-0017_longform.wav")

    def send_all():
        try:
            for i in range(0, len(pcm), 32000):
                slow.send(frame(MSG_AUDIO, pcm[i:i + 32000]))
        except OSError:
            pass  # cut: the server stopped reading, then closed

    sender = threading.Thread(target=send_all, daemon=True)
    t0 = time.monotonic()
    sender.start()
    others = [Stream(d.socket, "--fast", wav) for _ in range(2)]
    wait_log(d, "slow reader", timeout=400)
    cut_s = time.monotonic() - t0
    # Read everything it was sent, up to the close.
    evs = []
    while (ev := slow.event()) is not None:
        evs.append(ev)
    slow.close()
    sender.join(30)

    assert evs and evs[-1]["type"] == "error", evs[-3:]
    assert evs[-1]["code"] == "slow_reader", evs[-1]
    assert "reconnect" in evs[-1]["message"], evs[-1]
    kinds = [e["type"] for e in evs[:-1]]
    assert set(kinds) <= {"partial", "final"}, kinds
    ids = [e["id"] for e in evs if e["type"] == "final"]
    assert ids == list(range(len(ids))), f"final ids {ids}"
    # Partials went first: the backlog's tail is finals only.
    last_partial = max(i for i, k in enumerate(kinds) if k == "partial")
    tail = kinds[last_partial + 1:]
    assert len(tail) >= 3 and set(tail) == {"final"}, kinds
    tail_bytes = sum(len(json.dumps(e)) for e in evs[last_partial + 1:-1])
    assert tail_bytes >= 2048, tail_bytes
    assert status(d.socket)["dropped_partials"] > 0

    # The others were not slowed down or changed.
    for s in others:
        s.check()
        assert s.text() == solo, (s.text(), solo)

    # Resume: the finals after the last one read, then the rest.
    r = RawClient(d.socket, timeout=120)
    r.hello()
    r.send(jframe(MSG_OPEN, {"session": sid, "since": ids[-1]}))
    ev = r.event()
    assert ev["type"] == "opened" and ev["session"] == sid, ev
    r.send(frame(MSG_END))
    rest = r.events_until("end")
    more = [e["id"] for e in rest if e["type"] == "final"]
    assert more and more == list(range(ids[-1] + 1, ids[-1] + 1 +
                                       len(more))), more
    text = "".join(s["text"] for e in evs + rest if e["type"] == "final"
                   for s in e["segments"]).lower()
    assert "printing" in text, text
    r.close()
    assert d.alive()
    assert d.stop() == 0
    report(f"slow reader (max_client_buffer_bytes 4K): cut after "
           f"{cut_s:.0f} s with slow_reader after {len(ids)} finals "
           f"({len(tail)} finals, {tail_bytes} bytes, after its last "
           f"partial); {len(more)} more finals on resume; 2 other "
           f"streams unchanged")
