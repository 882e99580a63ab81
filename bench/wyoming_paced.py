"""bench/wyoming --mode paced: the time from audio-stop to `transcript`,
what a Home Assistant user waits for once they stop speaking.

Each utterance is one connection of the `wyoming` package's own client:
transcribe (en), audio-start, 1024-sample chunks paced as live (one every
64 ms), 0.5 s of silence (as wyoming-bench appends), audio-stop; the clock
runs from audio-stop to `transcript`. The servers take turns file by file,
so the noise of a shared machine falls on all of them alike:
sottod with [wyoming] answer = live (the live session finished), sottod
with answer = whole (the utterance decoded again as one file), and
wyoming-faster-whisper (it does not stream: it decodes at audio-stop).
Words: WER against the manifest's references (Whisper's normaliser,
tests/e2e/wer.py) and, for answer = live, against answer = whole's
transcript of the same file and round.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import wave
from pathlib import Path


def _wyoming_package():
    """The wyoming package, which bench/wyoming.py shadows on the path."""
    here = Path(__file__).resolve().parent
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        sys.modules.pop("wyoming", None)
        import wyoming.asr
        import wyoming.audio
        import wyoming.client
        import wyoming.error
        return wyoming
    finally:
        sys.path[:] = saved


wy = _wyoming_package()

CHUNK = 1024
SILENCE_S = 0.5


def read_pcm(path: Path) -> bytes:
    """16 kHz mono s16 and SILENCE_S of silence after it."""
    with wave.open(str(path)) as w:
        if (w.getframerate(), w.getsampwidth(), w.getnchannels()) != (16000, 2, 1):
            raise SystemExit(f"bench/wyoming: {path} is not 16 kHz mono s16")
        pcm = w.readframes(w.getnframes())
    return pcm + b"\0\0" * int(16000 * SILENCE_S)


async def utterance(port: int, pcm: bytes) -> tuple[float, str]:
    """(seconds from audio-stop to transcript, its text)."""
    Transcribe, Transcript = wy.asr.Transcribe, wy.asr.Transcript
    AudioChunk, AudioStart, AudioStop = wy.audio.AudioChunk, wy.audio.AudioStart, wy.audio.AudioStop
    AsyncTcpClient, Error = wy.client.AsyncTcpClient, wy.error.Error

    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Transcribe(language="en").event())
        await c.write_event(AudioStart(rate=16000, width=2, channels=1).event())
        t0 = time.monotonic()
        step = CHUNK * 2
        for k, i in enumerate(range(0, len(pcm), step)):
            await c.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                           audio=pcm[i:i + step]).event())
            # paced against the clock, so slow writes do not add up
            await asyncio.sleep(max(0.0, t0 + (k + 1) * CHUNK / 16000 - time.monotonic()))
        await c.write_event(AudioStop().event())
        t_stop = time.monotonic()
        while True:
            ev = await asyncio.wait_for(c.read_event(), 120)
            if ev is None:
                raise SystemExit(f"bench/wyoming: port {port} closed before transcript")
            if Error.is_type(ev.type):
                raise SystemExit(f"bench/wyoming: port {port}: {ev.data}")
            if Transcript.is_type(ev.type):
                return time.monotonic() - t_stop, Transcript.from_event(ev).text


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run(servers: dict[str, int], files: list[Path], refs: dict[str, str], rounds: int,
        warmup: int, log) -> str:
    """Every file, rounds times, on every server; the report as text."""
    import wer as werlib  # tests/e2e

    pcms = {f.name: read_pcm(f) for f in files}
    lat: dict[str, list[float]] = {s: [] for s in servers}
    text: dict[str, list[tuple[str, str]]] = {s: [] for s in servers}
    for r in range(-warmup, rounds):
        for name, pcm in pcms.items():
            for s, port in servers.items():
                dt, t = asyncio.run(utterance(port, pcm))
                if r >= 0:
                    lat[s].append(dt)
                    text[s].append((name, t))
        log(f"paced: round {r + 1 if r >= 0 else 'warm-up'} done: " + ", ".join(
            f"{s} p50 {statistics.median(v):.3f} s" for s, v in lat.items() if v))
    audio = sum(len(p) for p in pcms.values()) / 32000
    out = [f"{len(files)} files, {audio:.1f} s of audio with {SILENCE_S} s of silence each, "
           f"{rounds} round(s) after {warmup} warm-up; seconds from audio-stop to transcript:", "",
           f"{'server':<34}{'p50':>8}{'p95':>8}{'max':>8}   WER vs reference"]
    for s in servers:
        e = n = 0
        for name, t in text[s]:
            de, dn = werlib.counts(refs[name], t)
            e, n = e + de, n + dn
        out.append(f"{s:<34}{statistics.median(lat[s]):8.3f}{pct(lat[s], 0.95):8.3f}"
                   f"{max(lat[s]):8.3f}   {100 * e / max(n, 1):.1f}% ({e}/{n} words)")
    live = next((s for s in servers if "answer = live" in s), None)
    whole = next((s for s in servers if "answer = whole" in s), None)
    if live and whole:
        e = n = same = 0
        for (name, t), (_, w) in zip(text[live], text[whole]):
            de, dn = werlib.counts(w, t)
            e, n = e + de, n + dn
            same += werlib.normalise(t) == werlib.normalise(w)
        out += ["", f"answer = live against answer = whole's transcript: WER {100 * e / max(n, 1):.1f}% "
                f"({e}/{n} words), {same}/{len(text[live])} transcripts the same once normalised"]
        diffs = sorted({(name, t, w) for (name, t), (_, w) in zip(text[live], text[whole])
                        if werlib.normalise(t) != werlib.normalise(w)})
        for name, t, w in diffs[:12]:
            out += [f"  {name}: live  {t!r}", f"  {' ' * len(name)}  whole {w!r}"]
    return "\n".join(out)
