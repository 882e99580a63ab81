"""sottod's Wyoming front door (--wyoming), driven by the `wyoming` package's
own client (AsyncTcpClient, as Home Assistant uses it) with real speech and
the real tiny.en model.

With [wyoming] answer = whole, the transcript of an utterance must be
exactly `sotto transcribe`'s for the same file and model (both with their
default beam of 5), whatever its rate, sample width and channel count.
With answer = live, it is the live session's finals once the session is
finished at audio-stop: the transcript-chunks joined, with no decode of
the whole utterance. Streaming: transcript-start, then transcript-chunks
(closed caption units) while the audio is still being sent, then
transcript and transcript-stop. Hostile input gets an error event and a closed connection,
and the daemon goes on serving everyone else.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import time
import wave
from pathlib import Path

import numpy as np
import pytest
from wyoming.asr import (Transcribe, Transcript, TranscriptChunk,
                         TranscriptStart, TranscriptStop)
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong

from conftest import (AUDIO_DIR, MSG_OPEN, MSG_STATUS, SOTTO, SOTTOD, Daemon,
                      RawClient, jframe, report, werlib)

ONE_SHOT = ["2830-3980-0043.wav", "mfa_thoughts.wav", "whisper.wav",
            "sense_and_sensibility_01_austen_64kb-0890.wav"]
# (file, rate, width, channels): resampled, mixed and widened in sottod.
ODD = [("falsetto.wav", 44100, 2, 2), ("goforward.wav", 8000, 1, 1),
       ("2830-3980-0043.wav", 48000, 3, 3), ("mfa_thoughts.wav", 22050, 4, 1)]


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


@pytest.fixture(scope="module")
def wy(make_daemon):
    d = start(make_daemon, "[wyoming]\nmax_event_bytes = 64K\n"
                           "max_utterance_seconds = 30\nanswer = whole\n")
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture(scope="module")
def wylive(make_daemon):
    d = start(make_daemon, "[wyoming]\nanswer = live\n")
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture(scope="module")
def make_daemon(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    """Module-wide daemons (conftest's make_daemon is per test)."""
    made = []

    def make(**kw) -> Daemon:
        d = Daemon(tmp_path_factory.mktemp("sottod"), tiny_model, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.alive():
            d.stop(signal.SIGKILL)


# --- describe, transcripts ----------------------------------------------------

def test_describe(wy):
    async def go():
        async with AsyncTcpClient("127.0.0.1", wy.port) as c:
            await c.write_event(Describe().event())
            ev = await asyncio.wait_for(c.read_event(), 30)
            assert Info.is_type(ev.type), ev
            info = Info.from_event(ev)
            await c.write_event(Ping(text="hi").event())
            pong = await asyncio.wait_for(c.read_event(), 30)
            return info, pong

    info, pong = asyncio.run(go())
    assert Pong.is_type(pong.type) and Pong.from_event(pong).text == "hi"
    assert len(info.asr) == 1, info
    prog = info.asr[0]
    assert prog.name == "sotto" and prog.installed
    assert prog.supports_transcript_streaming is True
    assert [m.name for m in prog.models] == ["tiny.en"]
    assert prog.models[0].languages == ["en"]
    # Home Assistant shows where the program comes from and which model
    # release this is: neither may be empty (Whisper's releases are
    # versioned by name)
    assert prog.attribution.url.startswith("https://"), prog.attribution
    assert prog.version and prog.models[0].version == "tiny.en", prog


def test_one_shot_equals_transcribe(wy, tiny_model):
    ref = transcribe([AUDIO_DIR / f for f in ONE_SHOT], tiny_model)

    async def go():
        out = {}
        for f in ONE_SHOT:
            pcm, rate, width, ch = read_wav(AUDIO_DIR / f)
            out[f] = await utterance(wy.port, pcm, rate, width, ch)
        return out

    got = asyncio.run(go())
    for f in ONE_SHOT:
        check_order(got[f])
        assert transcript(got[f]) == ref[f], f
        assert ref[f], f"{f}: empty reference"
    report(f"wyoming one-shot: {len(ONE_SHOT)} files, transcript == "
           f"`sotto transcribe` for each")


def test_odd_formats_equal_transcribe(wy, tiny_model, tmp_path):
    files, pcms = [], {}
    for name, rate, width, ch in ODD:
        dst = tmp_path / f"{Path(name).stem}-{rate}-{width * 8}bit-{ch}ch.wav"
        pcms[dst.name] = (write_wav(AUDIO_DIR / name, dst, rate, width, ch),
                          rate, width, ch)
        files.append(dst)
    ref = transcribe(files, tiny_model)

    async def go():
        return {n: await utterance(wy.port, *v) for n, v in pcms.items()}

    got = asyncio.run(go())
    for n in pcms:
        assert ref[n], n
        assert transcript(got[n]) == ref[n], n


def test_streamed_chunks_while_speaking(wy, tiny_model, tmp_path):
    """Two recordings as one utterance, at twice real time: the first
    one's sentence is a transcript-chunk (a closed caption unit) before
    audio-stop; the chunks, joined, are the transcript but for the words
    still tentative at audio-stop."""
    names = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav"]
    pcm = b"".join(read_wav(AUDIO_DIR / n)[0] for n in names)
    both = tmp_path / "both.wav"
    with wave.open(str(both), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm)
    ref = transcribe([both], tiny_model)[both.name]
    # Sent at twice real time, as a live source a little ahead.
    r = asyncio.run(utterance(wy.port, pcm, 16000, 2, 1, pace=2.0))
    check_order(r)
    chunks = [(t, TranscriptChunk.from_event(e).text) for t, e in r["events"]
              if TranscriptChunk.is_type(e.type)]
    assert chunks, kinds(r)
    early = [t for t, _ in chunks if t < r["t_stop"]]
    assert early, f"no chunk before audio-stop ({r['t_stop']:.1f} s): {chunks}"
    # a chunk is a unit: jfk.wav's sentence closes one
    assert any(x.rstrip().endswith("country.") for _, x in chunks), chunks
    assert transcript(r) == ref
    said = werlib.normalise("".join(t for _, t in chunks)).split()
    head = " ".join(werlib.normalise(ref).split()[:len(said)])
    errors, n = werlib.counts(head, " ".join(said))
    assert n >= 5 and errors <= 0.1 * n, (said, ref)
    report(f"wyoming streamed jfk.wav + 0870 at 2x: first chunk "
           f"{chunks[0][0]:.1f} s, {len(early)}/{len(chunks)} chunks before "
           f"audio-stop ({r['t_stop']:.1f} s), {len(said)} of "
           f"{len(werlib.normalise(ref).split())} words, {errors} errors "
           f"against the transcript's")


def chunk_words(r: dict) -> list[str]:
    return " ".join(TranscriptChunk.from_event(e).text for _, e in r["events"]
                    if TranscriptChunk.is_type(e.type)).split()


def test_live_answer_is_the_sessions_finals(wylive, tiny_model):
    """answer = live: at audio-stop the live session is finished (its
    words still tentative decoded once more) and its finals are the
    transcript: the transcript-chunks, joined, are the transcript word
    for word, and the compute thread decodes no whole utterance. Its
    words are about as good as the whole-utterance transcript's (greedy
    steps against a beam of 5: within 10% of its words). Sent as fast as
    possible and paced at twice real time (the session far behind at
    audio-stop, or keeping up)."""
    files = ONE_SHOT + ["jfk.wav", "goforward.wav"]
    ref = transcribe([AUDIO_DIR / f for f in files], tiny_model)
    before = wylive.log_path.read_text().count(
        "transcript from the live session")

    async def go():
        return {(f, pace): await utterance(wylive.port,
                                           *read_wav(AUDIO_DIR / f),
                                           pace=pace)
                for f in files for pace in (0.0, 2.0)}

    got = asyncio.run(go())
    errors = words = 0
    for (f, pace), r in got.items():
        check_order(r)
        text = transcript(r)
        assert text, (f, pace)
        assert chunk_words(r) == text.split(), (f, pace, kinds(r))
        e, n = werlib.counts(ref[f], text)
        errors, words = errors + e, words + n
    log = wylive.log_path.read_text()    # the whole log: d.log() is its end
    assert log.count("transcript from the live session") - before == \
        len(got), wylive.log()
    assert "transcript from the whole utterance" not in log, wylive.log()
    assert errors <= 0.1 * words, (errors, words, {
        k: transcript(r) for k, r in got.items()}, ref)
    report(f"wyoming answer = live: {len(got)} utterances, transcript == "
           f"the chunks joined, {errors} word errors in {words} against "
           f"the whole-utterance transcript")


def test_two_utterances_one_connection(wy, tiny_model):
    names = ["goforward.wav", "2830-3980-0043.wav"]
    ref = transcribe([AUDIO_DIR / f for f in names], tiny_model)

    async def go():
        async with AsyncTcpClient("127.0.0.1", wy.port) as c:
            return [await utterance(wy.port, *read_wav(AUDIO_DIR / f),
                                    client=c) for f in names]

    got = asyncio.run(go())
    assert [transcript(r) for r in got] == [ref[f] for f in names]


def test_no_audio_and_unknown_events(wy):
    async def go():
        async with AsyncTcpClient("127.0.0.1", wy.port) as c:
            await c.write_event(Event(type="no-such-event",
                                      data={"x": [1, {"y": None}]},
                                      payload=b"\x00" * 100))
            await c.write_event(AudioStop().event())
            out = []
            while not out or not TranscriptStop.is_type(out[-1].type):
                out.append(await asyncio.wait_for(c.read_event(), 30))
            return out

    evs = asyncio.run(go())
    assert [e.type for e in evs] == ["transcript-start", "transcript",
                                     "transcript-stop"]
    assert Transcript.from_event(evs[1]).text == ""


# --- hostile input ----------------------------------------------------------------


def raw_exchange(port: int, data: bytes, timeout: float = 30) -> list[dict]:
    """Send data, read header lines until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
    except OSError:
        pass
    buf = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            # Closed with our bytes unread (a line over the limit): the
            # kernel resets, after the error event reached us.
            b = b""
        except TimeoutError as e:
            pytest.fail(f"{e!r} after {buf!r}")
        if not b:
            break
        buf += b
    s.close()
    return [json.loads(line) for line in buf.split(b"\n") if line.strip()]


def error_of(evs: list[dict]) -> dict:
    assert evs and evs[-1]["type"] == "error", evs
    return evs[-1]["data"]


@pytest.mark.parametrize("data,code", [
    (b"{not json}\n", "bad_json"),
    (b"[1, 2]\n", "bad_json"),
    (b'{"type": 5}\n', "bad_json"),
    (b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 2}}\n',
     "bad_json"),
    (b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 9, '
     b'"channels": 1}}\n', "bad_value"),
    (b'{"type": "audio-start", "data": {"rate": 0, "width": 2, '
     b'"channels": 1}}\n', "bad_value"),
    (b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 2, '
     b'"channels": 2}, "payload_length": 6}\n' + b"\x00" * 6, "bad_value"),
    (b'{"type": "describe", "data_length": -1}\n', "bad_value"),
    (b'{"type": "describe", "data_length": 1e3}\n', "bad_json"),
    (b'{"type": "describe", "data_length": 3}\n[1]', "bad_json"),
    (b'{"type": "audio-chunk", "payload_length": 99999999}\n', "too_large"),
    (b'{"type": "describe", "data": {}}' + b" " * 70000, "too_large"),
    (b'{"type": "transcribe", "data": {"language": "xx-YY"}}\n'
     b'{"type": "audio-start", "data": {"rate": 16000, "width": 2, '
     b'"channels": 1}}\n', "bad_value"),
    (b'{"type": "audio-start", "data": {"rate": 16000, "width": 2, '
     b'"channels": 1}}\n{"type": "audio-start", "data": {"rate": 16000, '
     b'"width": 2, "channels": 1}}\n', "bad_order"),
])
def test_malformed_input(wy, data, code):
    evs = raw_exchange(wy.port, data)
    err = error_of(evs)
    assert err["code"] == code, evs
    assert err["text"], evs


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
