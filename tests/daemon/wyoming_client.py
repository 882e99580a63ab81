"""The Wyoming tests' client side: a sottod with the Wyoming door, an
utterance sent with the `wyoming` package's own AsyncTcpClient (as Home
Assistant sends one), WAV input in the shapes the door accepts, and what
the answer's events say.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import wave
from pathlib import Path

import numpy as np
from wyoming.asr import Transcribe, Transcript, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event

from conftest import SOTTO, Daemon

def start(make_daemon, conf: str = "") -> "Daemon":
    """A sottod with Wyoming on a free port (0: the log names it)."""
    d = make_daemon(argv=["--wyoming", "127.0.0.1:0"], conf=conf).start()
    m = re.search(r"wyoming: listening on 127\.0\.0\.1:(\d+)", d.log())
    assert m, f"no wyoming listening line in the log:\n{d.log()}"
    d.port = int(m.group(1))
    return d


def transcribe(files: list[Path], model: Path) -> dict[str, str]:
    """`sotto transcribe`'s text per file (its defaults: beam 5, as
    [wyoming] beam_size)."""
    cp = subprocess.run([str(SOTTO), "transcribe", "-m", str(model), "-t",
                         "2", "-q", "-f", "json", *map(str, files)],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return {Path(o["file"]).name: o["text"].strip()
            for o in map(json.loads, cp.stdout.splitlines())}


def write_wav(src: Path, dst: Path, rate: int, width: int, ch: int) -> bytes:
    """src (16 kHz mono s16) at another rate, width and channel count."""
    with wave.open(str(src)) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0
    t = np.arange(len(x) * rate // 16000) * (16000 / rate)
    y = np.interp(t, np.arange(len(x)), x)
    # Channels differ, so the mix to mono is not a copy of one of them.
    y = np.stack([y * (1 - 0.2 * c) for c in range(ch)], axis=1).ravel()
    if width == 1:
        pcm = (y * 127 + 128).astype(np.uint8).tobytes()
    elif width == 2:
        pcm = (y * 32767).astype("<i2").tobytes()
    elif width == 3:
        v = (y * 8388607).astype("<i4")
        pcm = np.stack([v & 255, v >> 8 & 255, v >> 16 & 255],
                       axis=1).astype(np.uint8).tobytes()
    else:
        pcm = (y * 2147483647).astype("<i4").tobytes()
    with wave.open(str(dst), "wb") as w:
        w.setframerate(rate)
        w.setsampwidth(width)
        w.setnchannels(ch)
        w.writeframes(pcm)
    return pcm


def read_wav(path: Path) -> tuple[bytes, int, int, int]:
    with wave.open(str(path)) as w:
        return (w.readframes(w.getnframes()), w.getframerate(),
                w.getsampwidth(), w.getnchannels())


async def utterance(port: int, pcm: bytes, rate: int, width: int, ch: int, *,
                    pace: float = 0.0, language: str | None = "en",
                    client: AsyncTcpClient | None = None) -> dict:
    """One transcribe + audio-start/chunk*/stop, reading events as they come.

    pace: seconds of audio per second sent (0: as fast as possible). Returns
    the events with their arrival times and when audio-stop was sent."""
    own = client is None
    c = client or AsyncTcpClient("127.0.0.1", port)
    if own:
        await c.connect()
    got: list[tuple[float, Event]] = []
    t0 = time.monotonic()

    async def reader():
        while True:
            ev = await asyncio.wait_for(c.read_event(), 120)
            if ev is None:
                return
            got.append((time.monotonic() - t0, ev))
            if TranscriptStop.is_type(ev.type) or Error.is_type(ev.type):
                return

    task = asyncio.create_task(reader())
    await c.write_event(Transcribe(language=language).event())
    await c.write_event(AudioStart(rate=rate, width=width, channels=ch).event())
    step = 1024 * width * ch
    for i in range(0, len(pcm), step):
        await c.write_event(AudioChunk(rate=rate, width=width, channels=ch,
                                       audio=pcm[i:i + step]).event())
        if pace:
            await asyncio.sleep(1024 / rate / pace)
    t_stop = time.monotonic() - t0
    await c.write_event(AudioStop().event())
    await task
    if own:
        await c.disconnect()
    return {"events": got, "t_stop": t_stop}


def kinds(r: dict) -> list[str]:
    return [e.type for _, e in r["events"]]


def transcript(r: dict) -> str:
    ts = [Transcript.from_event(e).text for _, e in r["events"]
          if Transcript.is_type(e.type)]
    assert len(ts) == 1, kinds(r)
    return ts[0]


def check_order(r: dict) -> None:
    k = kinds(r)
    assert k[0] == "transcript-start" and k[-2:] == ["transcript",
                                                     "transcript-stop"], k
    assert set(k[1:-2]) <= {"transcript-chunk"}, k
