"""Caption units (docs/protocol.md, "Caption units") through sottod.

- The unit events of a stream: ids 0, 1, 2... with no gap, an open
  unit's committed text only grows, the closed units hold every final's
  text once and in order, each after the final that closed it, and the
  last closes before `end`; a unit stays within two caption lines.
- `sotto stream` to a pipe prints one line per closed unit.
- `sotto stream -f srt -o FILE` paced live: cues are in the file, whole,
  while the audio is still being sent, one per unit (before the change
  there was no -o, and a cue per final).
- Compatibility: a protocol-1 client that knows nothing of units gets
  its finals, partials and resume as before (no unit replayed unless it
  asks with since_unit); `sotto stream` against a sottod that does not
  announce units prints its finals, one a line.
jfk.wav (11 s), tiny.en: a few seconds each (the live SRT test 12 s).
The long-form figures (median unit, punctuation, WER with punctuation
and case) are tests/stream/test_stream.py's, from the same builder.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import threading
import time
import wave

import pytest

from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_EVENT, MSG_OPEN,
                      SOTTO, RawClient, Stream, jframe, frame, werlib)

JFK = AUDIO_DIR / "jfk.wav"
MAX_CHARS = 84


def pcm16(path) -> bytes:
    with wave.open(str(path)) as w:
        return w.readframes(w.getnframes())


def closed(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "unit" and e["closed"]]


def final_text(events: list[dict]) -> str:
    return "".join(s["text"] for e in events if e["type"] == "final"
                   for s in e["segments"])


def check_units(events: list[dict]) -> None:
    """The invariants of the unit events of one session."""
    units = [e for e in events if e["type"] == "unit"]
    done = closed(events)
    assert done, [e["type"] for e in events]
    assert [u["id"] for u in done] == list(range(len(done))), done
    assert "".join(u["text"] for u in done) == final_text(events)
    last_text: dict[int, str] = {}
    for u in units:
        before = last_text.get(u["id"], "")
        assert u["text"].startswith(before), (before, u)
        last_text[u["id"]] = u["text"]
    for u in done:
        assert u["tentative"] == "" and u["start"] <= u["end"], u
        words = u["text"].split()
        assert len(u["text"].strip()) <= MAX_CHARS or len(words) == 1, u
    kinds = [e["type"] for e in events]
    seen_final = -1
    for e in events:
        if e["type"] == "final":
            seen_final = e["id"]
        elif e["type"] == "unit" and e["closed"]:
            assert e["last_final"] <= seen_final, e
    assert kinds.index("end") > max(i for i, e in enumerate(events)
                                    if e["type"] == "unit"), kinds


def test_unit_events(daemon):
    st = Stream(daemon.socket, "--fast", JFK).check()
    events = [e for _, e in st.lines]
    assert events[0]["type"] == "hello" and events[0]["units"] is True
    check_units(events)
    text = " ".join(u["text"].strip() for u in closed(events))
    ref = werlib.load_manifest(AUDIO_DIR)["jfk.wav"]
    e, n = werlib.counts(ref, text)
    assert e / n <= 0.1, text
    # a sentence ends a unit: jfk.wav is one sentence
    assert closed(events)[-1]["text"].rstrip().endswith("."), events


def test_text_lines_are_units(daemon):
    cp = subprocess.run([str(SOTTO), "stream", "-s", daemon.socket, "--fast",
                         str(JFK)], capture_output=True, text=True,
                        timeout=120, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    st = Stream(daemon.socket, "--fast", JFK).check()
    units = [u["text"].strip() for u in closed([e for _, e in st.lines])]
    # --fast steps at the daemon's step whatever the load: the same text
    assert cp.stdout.splitlines() == units, (cp.stdout, units)


SRT_CUE = re.compile(r"(\d+)\n(\d\d:\d\d:\d\d,\d\d\d) --> "
                     r"(\d\d:\d\d:\d\d,\d\d\d)\n(.+?)\n\n", re.S)


def test_live_srt_cue_by_cue(daemon, tmp_path):
    """Three recordings one after the other on standard input, paced at
    twice real time: whole cues are in the file while audio is still
    being sent (standard input open), and at the end a cue per unit."""
    out = tmp_path / "live.srt"
    names = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav",
             "sense_and_sensibility_01_austen_64kb-0920.wav"]
    pcm = b"".join(pcm16(AUDIO_DIR / n) for n in names)
    p = subprocess.Popen([str(SOTTO), "stream", "-s", daemon.socket, "-f",
                          "srt", "-o", str(out), "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    chunk = 3200                     # 0.1 s
    cues_while_open = 0
    t0 = time.monotonic()
    for k, i in enumerate(range(0, len(pcm), chunk)):
        p.stdin.write(pcm[i:i + chunk])
        p.stdin.flush()
        time.sleep(max(0.0, t0 + (k + 1) * 0.05 - time.monotonic()))
        if k % 10 == 0 and out.exists():
            cues_while_open = len(SRT_CUE.findall(out.read_text()))
    # the last cues may wait for the daemon to catch up: still open
    deadline = time.monotonic() + 30
    while cues_while_open < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        cues_while_open = len(SRT_CUE.findall(out.read_text()))
    p.stdin.close()
    p.wait(timeout=60)
    stdout, stderr = p.stdout.read(), p.stderr.read()
    assert p.returncode == 0, stderr.decode()
    assert stdout == b"", stdout
    text = out.read_text()
    cues = SRT_CUE.findall(text)
    assert SRT_CUE.sub("", text) == "", text
    assert [int(c[0]) for c in cues] == list(range(1, len(cues) + 1)), text
    assert cues_while_open >= 2, text
    assert len(cues) >= cues_while_open, text
    ref = " ".join(werlib.load_manifest(AUDIO_DIR)[n] for n in names)
    e, n = werlib.counts(ref, " ".join(c[3] for c in cues))
    assert e / n <= 0.15, text


def test_protocol_1_client_without_units(daemon):
    """What a client written before units sees: finals, partials and
    resume as they were; units only when it asks for them."""
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {}))
    opened = c.events_until("opened")[-1]
    pcm = pcm16(JFK)
    for i in range(0, len(pcm), 32000):
        c.send(frame(MSG_AUDIO, pcm[i:i + 32000]))
    c.send(frame(MSG_END))
    live = c.events_until("end")
    c.close()
    finals = [e for e in live if e["type"] == "final"]
    assert [f["id"] for f in finals] == list(range(len(finals)))
    assert {e["type"] for e in live} <= {"opened", "partial", "final",
                                         "unit", "end"}
    check_units(live)
    # a resume of the ended session: finals after since, no units ...
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"session": opened["session"], "since": 0}))
    again = c.events_until("end")
    c.close()
    assert [e["id"] for e in again if e["type"] == "final"] == \
        [f["id"] for f in finals[1:]]
    assert not [e for e in again if e["type"] == "unit"], again
    # ... unless asked: the closed units after since_unit
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"session": opened["session"], "since": 0,
                             "since_unit": -1}))
    units = closed(c.events_until("end"))
    c.close()
    assert units == closed(live)


class OldServer:
    """A sottod of before units, as far as `sotto stream` can tell: hello
    without "units", then two finals (with a partial between) and end."""

    def __init__(self, path: str):
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        self.ls.listen(1)
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _event(obj) -> bytes:
        import json

        return frame(MSG_EVENT, json.dumps(obj).encode())

    def _serve(self) -> None:
        c, _ = self.ls.accept()
        buf = b""
        frames = 0
        while frames < 2:           # HELLO, OPEN
            buf += c.recv(65536)
            while len(buf) >= 5:
                n = struct.unpack("<I", buf[:4])[0]
                if len(buf) < 4 + n:
                    break
                buf = buf[4 + n:]
                frames += 1
        sid = "old"
        seg = lambda a, b, t: {"start": a, "end": b, "text": t}  # noqa: E731
        for ev in ({"type": "hello", "protocol": 1, "server": "sottod/0.0",
                    "model": "tiny.en"},
                   {"type": "opened", "session": sid, "last_final": -1,
                    "audio_frames": 0},
                   {"type": "final", "session": sid, "id": 0,
                    "segments": [seg(0.5, 1.5, " And so my")]},
                   {"type": "partial", "session": sid, "text": " fellow",
                    "start": 1.5, "end": 2.0},
                   {"type": "final", "session": sid, "id": 1,
                    "segments": [seg(1.5, 3.0, " fellow Americans,")]},
                   {"type": "end", "session": sid, "last_final": 1,
                    "last_final_end": 3.0, "audio_s": 11.0,
                    "undecoded_s": 0}):
            c.sendall(self._event(ev))
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass
        c.close()

    def close(self) -> None:
        self.ls.close()


def test_new_client_old_server(tmp_path):
    path = str(tmp_path / "old.sock")
    srv = OldServer(path)
    try:
        cp = subprocess.run([str(SOTTO), "stream", "-s", path, "--fast",
                             str(JFK)], capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    finally:
        srv.close()
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "And so my\nfellow Americans,\n", cp.stdout
