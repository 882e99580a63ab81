"""Bursts of short sessions against a running sottod, and its memory.

Shared by tests/daemon/test_memory.py and `bench/daemon --only bursts`:
each session is a raw protocol client that opens a stream, sends one
short speech file as fast as the socket takes it, ends it and reads
every event up to `end`.
"""

from __future__ import annotations

import threading
import time
import wave
from pathlib import Path

from conftest import (MSG_AUDIO, MSG_END, MSG_OPEN, RawClient, frame,
                      jframe)

# Short files of the speech set (2 to 4 s): a session of one step or two.
SHORT = ["2830-3980-0043.wav", "4507-16021-0012.wav", "8455-210777-0068.wav",
         "goforward.wav", "mfa_thoughts.wav",
         "sense_and_sensibility_01_austen_64kb-0880.wav"]


def short_pcm(audio_dir: Path) -> list[bytes]:
    out = []
    for name in SHORT:
        with wave.open(str(audio_dir / name)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) \
                == (16000, 1, 2), f"{name}: not 16 kHz mono s16"
            out.append(w.readframes(w.getnframes()))
    return out


def rss_mb(pid: int) -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of pid, in MB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024
    return out


def session(sock: str, pcm: bytes) -> str:
    """One short session; "" when it ended well with text, else why not."""
    try:
        c = RawClient(sock, timeout=300)
        try:
            c.hello()
            c.send(jframe(MSG_OPEN, {}))
            for i in range(0, len(pcm), 32000):
                c.send(frame(MSG_AUDIO, pcm[i:i + 32000]))
            c.send(frame(MSG_END))
            evs = []
            while True:
                ev = c.event()
                if ev is None:
                    return f"closed after {evs[-3:]}"
                evs.append(ev)
                if ev["type"] in ("end", "error"):
                    break
        finally:
            c.close()
    except OSError as e:
        return repr(e)
    if ev["type"] == "error":
        return f"error {ev}"
    text = "".join(s["text"] for e in evs if e["type"] == "final"
                   for s in e["segments"])
    return "" if text.strip() else "no text"


def burst(sock: str, pcms: list[bytes], n: int) -> tuple[list[str], float]:
    """n sessions at once; their failures and the wall time."""
    out: list[str] = [""] * n

    def run(i: int) -> None:
        out[i] = session(sock, pcms[i % len(pcms)])

    t0 = time.monotonic()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return [x for x in out if x], time.monotonic() - t0


def idle_rss(pid: int, bound: float | None = None,
             timeout: float = 12.0) -> float:
    """sottod's VmRSS once idle: sampled every 0.25 s for timeout seconds
    (sottod gives free memory back at its next 5 s status tick), or until
    it is at most bound; the least value seen."""
    least = rss_mb(pid)["VmRSS"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bound is not None and least <= bound:
            break
        time.sleep(0.25)
        least = min(least, rss_mb(pid)["VmRSS"])
    return least
