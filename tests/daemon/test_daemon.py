"""sottod end to end: real daemon, real tiny.en, real speech, real clients.

Streams of every short file of ../shared/audio against `sotto transcribe`
(the long-form recording's streamed words are tests/stream's); latency
of live-paced streams; eight concurrent streams with a killed client and a
reader that never reads; malformed input of every kind; resume after a lost
connection; SIGTERM while streaming; socket activation; the microphone
through an ALSA file PCM with two listeners.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_EVENT, MSG_HELLO,
                      MSG_OPEN, MSG_STATUS, MSG_SUBSCRIBE, SOTTO, SOTTOD,
                      Listen, RawClient, Stream, frame, jframe, percentile,
                      report, werlib)

PACED = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav"]
# Issue 3 asks for streamed finals within 2 points of `sotto transcribe`.
# Measured at the daemon's 1 s step (tests/stream/stream-driver gives the
# same finals) over the 14 short files, AVX-512 and forced AVX2 alike:
# 3.65% vs 2.19% of 137 words, 1.5 points (two errors: 0890's "cold
# hearted" as "coldhearted").
WER_SLACK = 0.02
WER_RESULT: dict = {}


def pcm16(name: str) -> bytes:
    """A file of the speech set (all 16 kHz mono s16 WAV) as s16le bytes."""
    import wave

    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2), f"{name}: not 16 kHz mono s16"
        return w.readframes(w.getnframes())


def transcribe(files: list[Path], model: Path,
               threads: int = 2) -> dict[str, str]:
    cp = subprocess.run([str(SOTTO), "transcribe", "-m", str(model), "-t",
                         str(threads), "-q", "--beam-size", "1", "-f", "json",
                         *map(str, files)], capture_output=True, text=True,
                        timeout=600)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for line in cp.stdout.splitlines():
        o = json.loads(line)
        out[Path(o["file"]).name] = o["text"]
    return out


def latencies(s: Stream) -> tuple[list[float], list[float]]:
    """Partial and final latency: arrival - stream start - audio end."""
    t0 = next(t for t, e in s.lines if e["type"] == "opened")
    part = [t - t0 - e["end"] for t, e in s.lines if e["type"] == "partial"
            and e["text"].strip()]
    fin = [t - t0 - e["segments"][-1]["end"] for t, e in s.lines
           if e["type"] == "final"]
    return part, fin


# --- transcripts ---------------------------------------------------------------------

def short_files(manifest: dict[str, str]) -> list[str]:
    """The files under one 30 s window. The long-form recording streamed
    --fast took 60-100 s here; its streamed words are checked by
    tests/stream/test_stream.py::test_wer_vs_transcribe on the same engine
    (the daemon's finals equal stream-driver's); long streams through sottod
    are test_lifecycle's (four 40 s streams beside a file) and bench/soaks."""
    import wave

    out = []
    for f in manifest:
        with wave.open(str(AUDIO_DIR / f)) as w:
            if w.getnframes() < 30 * w.getframerate():
                out.append(f)
    return out


def test_stream_wer_and_latency(daemon, manifest, tiny_model):
    files = short_files(manifest)
    assert len(files) >= 10, files
    # Live-paced first, with only the reference transcription beside them
    # (on one core: the paced streams leave most of the other idle), so
    # their latency is close to the daemon's own.
    paced = {f: Stream(daemon.socket, AUDIO_DIR / f) for f in PACED}
    ref = transcribe([AUDIO_DIR / f for f in files], tiny_model, threads=1)
    for s in paced.values():
        s.check()
    fast = {}
    rest = [f for f in files if f not in PACED]
    for i in range(0, len(rest), 4):
        batch = {f: Stream(daemon.socket, "--fast", AUDIO_DIR / f)
                 for f in rest[i:i + 4]}
        for s in batch.values():
            s.check()
        fast.update(batch)
    got = {**paced, **fast}

    e_s = e_t = n = 0
    per_file = {}
    report("stream vs transcribe (tiny.en, greedy), WER vs manifest:")
    for f in files:
        es, nw = werlib.counts(manifest[f], got[f].text())
        et, _ = werlib.counts(manifest[f], ref[f])
        e_s, e_t, n = e_s + es, e_t + et, n + nw
        per_file[f] = (es, nw)
        report(f"  {f:<48} words {nw:4d}  stream {es / max(nw, 1):6.1%}"
               f"  transcribe {et / max(nw, 1):6.1%}"
               f"{'  (paced)' if f in PACED else ''}")
    w_s, w_t = e_s / n, e_t / n
    report(f"  total: stream {w_s:.2%}, transcribe {w_t:.2%} ({n} words)")
    WER_RESULT.update(stream=w_s, transcribe=w_t, per_file=per_file)

    part, fin = [], []
    for s in paced.values():
        p, f = latencies(s)
        part += p
        fin += f
    report(f"latency of paced streams ({len(part)} partials, {len(fin)} "
           f"finals): partial p50 {percentile(part, 50):.2f} s p95 "
           f"{percentile(part, 95):.2f} s; final p50 {percentile(fin, 50):.2f}"
           f" s p95 {percentile(fin, 95):.2f} s")
    assert part and fin
    # A sanity bound, not the goal (issue 3's benchmark is p95 < 2 s, see
    # the report above): on a quiet 2-core machine p95 is about 2 s, and a
    # busy one (a benchmark alongside) has pushed it past 6 s.
    assert percentile(part, 95) < 10.0
    for f in files:
        assert got[f].text().strip(), f"{f}: no final text"
    # every partial and final says how far behind the decoding is: about
    # a step at most for a live stream the daemon keeps up with
    lags = [e["lag"] for s in paced.values() for _, e in s.lines
            if e["type"] in ("partial", "final")]
    assert lags and all(0 <= x < 10 for x in lags), lags
    report(f"lag in the paced streams' events: p50 {percentile(lags, 50):.2f}"
           f" s, max {max(lags):.2f} s")


def test_stream_wer_close_to_transcribe():
    """The streaming policy's cost in accuracy (engine: lib/stream*.c).
    The daemon adds none: its finals equal tests/stream/stream-driver's."""
    assert WER_RESULT, "test_stream_wer_and_latency did not run"
    w_s, w_t = WER_RESULT["stream"], WER_RESULT["transcribe"]
    assert w_s <= w_t + WER_SLACK, (
        f"stream WER {w_s:.2%} vs transcribe {w_t:.2%}")


def test_status(daemon):
    cp = subprocess.run([str(SOTTO), "status", "-s", daemon.socket, "--json"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    st = json.loads(cp.stdout)
    assert st["type"] == "status" and st["model"] == "tiny.en"
    for k in ("sessions", "clients", "rtf", "lag_s", "uptime_s"):
        assert k in st
    # which kernels run the products (sotto_model_info's compute)
    assert st["compute"] and st["compute"].split()[0] in ("fp32", "bf16", "int8"), st["compute"]


def test_process_name(daemon):
    """sottod re-execs itself to set OpenMP's wait policy; it must keep
    its name for ps, pgrep, killall and the journal."""
    comm = Path(f"/proc/{daemon.proc.pid}/comm").read_text().strip()
    assert comm == "sottod"


def test_output_formats(daemon):
    wav = AUDIO_DIR / "goforward.wav"     # 2.8 s: the formats, not the words
    for fmt, check in (("text", "forward"), ("srt", " --> "),
                       ("vtt", "WEBVTT")):
        cp = subprocess.run([str(SOTTO), "stream", "--fast", "-s",
                             daemon.socket, "-f", fmt, str(wav)],
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
        assert check in cp.stdout, cp.stdout


def test_opus_and_resampled_input(daemon):
    wav = AUDIO_DIR / "jfk.wav"
    opus = Stream(daemon.socket, "--fast", "--opus", wav).check()
    assert "fellow americans" in opus.text().lower()
    # s16le stereo at 44.1 kHz through stdin (resampled in the daemon).
    import numpy as np
    mono = np.frombuffer(pcm16("jfk.wav"), "<i2").astype(np.float32)
    t = np.arange(0, len(mono) * 44100 // 16000) * (16000 / 44100)
    up = np.interp(t, np.arange(len(mono)), mono).astype("<i2")
    stereo = np.repeat(up[:, None], 2, axis=1).tobytes()
    cp = subprocess.run([str(SOTTO), "stream", "-s", daemon.socket, "-f",
                         "text", "--rate", "44100", "--channels", "2", "-"],
                        input=stereo, capture_output=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    # Standard input is live unless --fast: sent all at once, it is caught
    # up in larger steps, and a final may end between any two words.
    assert b"fellow americans" in b" ".join(cp.stdout.lower().split()), \
        cp.stdout


# --- many clients -------------------------------------------------------------------------

def test_eight_concurrent_kill_and_slow_reader(daemon):
    # 5.3 s, a final or two and a partial at each of its steps (jfk.wav's
    # 11 s took twice the steps for the same check)
    wav = AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0890.wav"
    solo = Stream(daemon.socket, "--fast", wav).check().text()
    assert solo.strip()

    # A reader that never reads: sends 15 s of speech as fast as it can
    # (its events stay far below a socket buffer either way; the cut of
    # a reader that falls behind is test_limits.py's).
    slow = RawClient(daemon.socket)
    slow.send(jframe(MSG_HELLO, {"protocol": 1}))
    slow.send(jframe(MSG_OPEN, {"format": "s16le"}))
    long_pcm = pcm16("LJ001-0001_to_LJ001-0017_longform.wav")[:16000 * 2 * 15]
    slow.s.setblocking(False)
    sent = 0

    def push_slow():
        nonlocal sent
        while sent < len(long_pcm):
            try:
                sent += slow.s.send(frame(MSG_AUDIO,
                                          long_pcm[sent:sent + 32000])) - 5
            except BlockingIOError:
                return

    push_slow()
    streams = [Stream(daemon.socket, "--fast", wav) for _ in range(8)]
    victim = Stream(daemon.socket, "--realtime", wav)
    time.sleep(2.0)
    victim.proc.kill()
    t0 = time.monotonic()
    for s in streams:
        push_slow()
        s.check()
    elapsed = time.monotonic() - t0
    victim.wait()
    for i, s in enumerate(streams):
        assert s.text() == solo, f"stream {i}: {s.text()!r} != {solo!r}"
    report(f"8 concurrent {wav.name} streams (+1 killed, +1 never reading) "
           f"done in {elapsed:.1f} s; all transcripts equal to the solo one")
    # The daemon still serves, and the slow reader never stalled anyone.
    assert daemon.alive()
    slow.close()


def test_resume_after_lost_connection(daemon):
    pcm = pcm16("jfk.wav")
    half = len(pcm) // 2 & ~1
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000}))
    opened = c.event()
    assert opened["type"] == "opened"
    sid = opened["session"]
    for i in range(0, half, 8000):
        c.send(frame(MSG_AUDIO, pcm[i:min(i + 8000, half)]))
    # Read some events, remember the last final id, then vanish.
    last = -1
    c.s.settimeout(5)
    deadline = time.monotonic() + 20
    while last < 0 and time.monotonic() < deadline:
        ev = c.event()
        if ev and ev["type"] == "final":
            last = ev["id"]
    c.close()
    r = RawClient(daemon.socket)
    r.hello()
    r.send(jframe(MSG_OPEN, {"session": sid, "since": last}))
    ev = r.event()
    assert ev["type"] == "opened" and ev["session"] == sid, ev
    for i in range(half, len(pcm), 8000):
        r.send(frame(MSG_AUDIO, pcm[i:i + 8000]))
    r.send(frame(MSG_END))
    evs = r.events_until("end")
    ids = [e["id"] for e in evs if e["type"] == "final"]
    assert ids and ids[0] == last + 1 and ids == list(range(ids[0],
                                                            ids[-1] + 1))
    text = "".join(s["text"] for e in evs if e["type"] == "final"
                   for s in e["segments"])
    assert "country" in text.lower(), text
    # Unknown session: an error and a close.
    x = RawClient(daemon.socket)
    x.hello()
    x.send(jframe(MSG_OPEN, {"session": "nosuchsession"}))
    ev = x.event()
    assert ev["type"] == "error" and ev["code"] == "no_session", ev
    assert x.event() is None


# --- malformed input ---------------------------------------------------------------------

HELLO = jframe(MSG_HELLO, {"protocol": 1})
OPEN = jframe(MSG_OPEN, {"format": "s16le"})

BAD = {
    "truncated-header": (b"\x10\x00", "bad_frame"),
    "truncated-hello": (frame(MSG_HELLO, b'{"protocol":1}')[:-4], "bad_frame"),
    "truncated-open": (HELLO + frame(MSG_OPEN, b'{"format":"s16le"}')[:-3],
                       "bad_frame"),
    "truncated-audio": (HELLO + OPEN + frame(MSG_AUDIO, b"\0" * 100)[:50],
                        "bad_frame"),
    "hello-json-cut": (frame(MSG_HELLO, b'{"protocol":'), "bad_json"),
    "open-json-cut": (HELLO + frame(MSG_OPEN, b'{"format":"s1'), "bad_json"),
    "subscribe-bad-json": (HELLO + frame(MSG_SUBSCRIBE, b"mic"), "bad_json"),
    "status-bad-json": (HELLO + frame(MSG_STATUS, b"{{"), "bad_json"),
    "end-bad-json": (HELLO + OPEN + frame(MSG_END, b"]"), "bad_json"),
    "oversized": (struct.pack("<IB", 0xFFFFFFF0, MSG_AUDIO), "too_large"),
    "oversized-hello": (struct.pack("<IB", 2 * 1024 * 1024, MSG_HELLO),
                        "too_large"),
    "zero-length": (struct.pack("<I", 0) + b"\x01", "bad_frame"),
    "unknown-type": (frame(0x42, b"{}"), "bad_frame"),
    "event-from-client": (HELLO + frame(MSG_EVENT, b"{}"), "bad_frame"),
    "wrong-field-type": (HELLO + jframe(MSG_OPEN, {"rate": "16k"}), "bad_json"),
    "bad-value": (HELLO + jframe(MSG_OPEN, {"format": "mp3"}), "bad_value"),
    "open-before-hello": (OPEN, "bad_order"),
    "audio-before-open": (HELLO + frame(MSG_AUDIO, b"\0\0"), "bad_order"),
    "end-before-open": (HELLO + frame(MSG_END), "bad_order"),
    "hello-twice": (HELLO + HELLO, "bad_order"),
    "unknown-version": (jframe(MSG_HELLO, {"protocol": 2}), "version"),
    "no-version": (jframe(MSG_HELLO, {"client": "x"}), "bad_json"),
    "garbage-opus": (HELLO + jframe(MSG_OPEN, {"format": "opus"}) +
                     frame(MSG_AUDIO, bytes(range(256)) * 20), "bad_frame"),
    "mic-not-enabled": (HELLO + jframe(MSG_SUBSCRIBE, {"source": "mic"}),
                        "unavailable"),
}


def test_malformed_input(daemon):
    good = Stream(daemon.socket, "--realtime", AUDIO_DIR / "jfk.wav")
    rnd = random.Random(7)
    for name, (data, code) in BAD.items():
        c = RawClient(daemon.socket, timeout=20)
        c.send(data)
        c.s.shutdown(1)  # half-close: a truncated frame ends here
        evs = []
        while (ev := c.event()) is not None:
            evs.append(ev)
        errors = [e for e in evs if e["type"] == "error"]
        assert errors and errors[-1]["code"] == code, (name, evs)
        assert errors[-1]["message"], (name, evs)
        c.close()
    # Garbage PCM is audio: decoded, no crash, a clean end.
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "f32le", "rate": 22050,
                             "channels": 3}))
    c.send(frame(MSG_AUDIO, rnd.randbytes(22050 * 12 * 3)))
    c.send(frame(MSG_END))
    evs = c.events_until("end")
    assert not [e for e in evs if e["type"] == "error"], evs
    good.check()
    assert "country" in good.text().lower(), good.text()
    assert daemon.alive()


def test_session_limit(make_daemon):
    d = make_daemon(conf="max_sessions = 1\n").start()
    a = RawClient(d.socket)
    a.hello()
    a.send(OPEN)
    assert a.event()["type"] == "opened"
    b = RawClient(d.socket)
    b.hello()
    b.send(OPEN)
    ev = b.event()
    assert ev["type"] == "error" and ev["code"] == "busy", ev
    assert b.event() is None
    a.send(frame(MSG_END))
    a.events_until("end")
    assert d.stop() == 0


# --- lifecycle ------------------------------------------------------------------------------

def test_sigterm_while_streaming(make_daemon):
    d = make_daemon().start()
    streams = [Stream(d.socket, "--realtime", AUDIO_DIR / f)
               for f in ("jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav")]
    time.sleep(6.0)
    t0 = time.monotonic()
    rc = d.stop(signal.SIGTERM)
    stop_s = time.monotonic() - t0
    assert rc == 0, d.log()
    for s in streams:
        rc = s.wait(60)
        assert rc == 0, s.stderr
        assert s.events("end"), s.lines[-3:]
        finals = s.events("final")
        assert finals, "no final text after SIGTERM"
        heard = s.events("final")[-1]["segments"][-1]["end"]
        report(f"  SIGTERM: {s.cmd[-1].split('/')[-1]}: {s.text()!r} "
               f"(last final ends at {heard} s)")
    # jfk.wav: "And so my fellow Americans" ends at 3.5 s, "ask not what
    # your country can do for you" at 7.7 s: the first is in, the rest not.
    jfk = streams[0].text().lower()
    assert "fellow americans" in jfk and "for your country" not in jfk, jfk
    report(f"SIGTERM after 6 s of two live streams: both got their finals "
           f"and end; sottod exited 0 in {stop_s:.1f} s")


def test_socket_activation(tiny_model, tmp_path):
    tool = shutil.which("systemd-socket-activate")
    assert tool, "systemd-socket-activate (package systemd) is missing"
    sock = str(tmp_path / "act.sock")
    conf = tmp_path / "c.conf"
    conf.write_text("[server]\nsocket = /nonexistent/not-used.sock\n")
    log = open(tmp_path / "log", "w")
    p = subprocess.Popen([tool, "-l", sock, str(SOTTOD), "-f", str(conf),
                          "-m", str(tiny_model), "-t", "2", "-d"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        s = Stream(sock, "--fast", AUDIO_DIR / "jfk.wav").check()
        assert "country" in s.text().lower()
        text = (tmp_path / "log").read_text()
        assert "socket activation" in text, text
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, (tmp_path / "log").read_text()


def test_check_config_and_usage(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("[server]\nmax_sessions = 3\n")
    cp = subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config",
                         "-s", "/tmp/x.sock"], capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert "max_sessions = 3" in cp.stdout and "/tmp/x.sock" in cp.stdout
    conf.write_text("[server]\nmax_sessions = lots\n")
    cp = subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode != 0 and "c.conf:2" in cp.stderr, cp.stderr
    cp = subprocess.run([str(SOTTO), "stream", "-s", str(tmp_path / "none"),
                         str(AUDIO_DIR / "jfk.wav")], capture_output=True,
                        text=True, timeout=30)
    assert cp.returncode == 4 and "cannot connect" in cp.stderr


def test_stale_socket_replaced(make_daemon):
    d = make_daemon()
    import socket as so
    s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    s.bind(d.socket)
    s.close()  # a socket file nobody listens on
    d.start()
    assert d.stop() == 0
    # A second daemon on a live socket refuses to start.
    d2 = make_daemon().start()
    d3 = make_daemon()
    d3.conf.write_text(d2.conf.read_text())
    cp = subprocess.run([str(SOTTOD), "-f", str(d3.conf), "-m",
                         str(d2.model)], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode != 0 and "another sottod" in cp.stderr, cp.stderr
    assert d2.stop() == 0


# --- the microphone ------------------------------------------------------------------------

def test_alsa_mic_two_listeners(make_daemon, tmp_path):
    raw = tmp_path / "speech.raw"
    # Speech, then silence: after the end of its file the ALSA file plugin
    # repeats stale buffer contents, which are then silence too.
    raw.write_bytes(pcm16("jfk.wav") + b"\0" * 16000 * 2 * 20)
    rc = tmp_path / "asoundrc"
    rc.write_text('pcm.sottomic {\n\ttype file\n\tslave.pcm null\n'
                  '\tfile "/dev/null"\n\tinfile "%s"\n\tformat raw\n}\n' % raw)
    env = {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"}
    d = make_daemon(env=env, conf="[mic]\nenabled = yes\ndevice = sottomic\n"
                    "rate = 16000\nchannels = 1\n").start()
    listeners = [Listen(d.socket) for _ in range(2)]
    # Until both have the whole sentence (the file PCM runs unpaced, so
    # the session drops audio beyond its lag bound: that is fine here).
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not all(
            "your country" in l.text().lower() for l in listeners):
        time.sleep(0.5)
    time.sleep(2)
    assert d.stop() == 0, d.log()
    finals = []
    for l in listeners:
        assert l.wait() == 0, l.stderr
        types = [e["type"] for _, e in l.lines]
        assert types[:2] == ["hello", "subscribed"] and types[-1] == "end", \
            types
        finals.append(l.events("final"))
    assert finals[0] == finals[1]
    text = "".join(s["text"] for e in finals[0] for s in e["segments"])
    assert "fellow americans" in text.lower(), text
    report(f"mic via ALSA file PCM: 2 listeners, {len(finals[0])} identical "
           f"finals: {text.strip()[:60]!r}...")
