#!/usr/bin/env python3
"""sottod through the real clients of the APIs it speaks: what a user of
the openai and deepgram-sdk Python packages sees, paced as live.

    bench/clients                  jfk.wav and the long-form file, live (~7 min)
    bench/clients --fast           the same sent 4x faster, no docs (~2 min)

One sottod (the release build, `--http 127.0.0.1:0 -t 2`, the default
config, the model given) answers three clients in turn, one at a time, for
each file:

1. realtime: the openai SDK's `client.realtime.connect(extra_query={"intent":
   "transcription"})`, session.update with audio/pcm at 24 kHz (the file
   resampled by sox) and turn_detection null, one input_audio_buffer.append
   per 100 ms of audio, a commit at the end; the
   conversation.item.input_audio_transcription.delta events (sottod's
   finals: deltas only append) and the .completed transcript.
2. sse: the openai SDK's `client.audio.transcriptions.create(file=...,
   stream=True)`, the WAV file uploaded 100 ms of audio at a time (a
   file object whose reads wait for the clock); transcript.text.delta
   events and transcript.text.done. sottod reads the whole upload before it
   transcribes (docs/http.md), so no delta can come while the audio is sent:
   this is what a file upload of a recording that just ended costs.
3. deepgram: the deepgram-sdk `listen.v1.connect(...)` (linear16, 16 kHz,
   interim_results=true, punctuate=true), pointed at sottod with a
   DeepgramClientEnvironment; one send_media per 100 ms, CloseStream at the
   end; interim (is_final false) and final Results.

Live pacing: the clock starts when the first sample is "spoken" (t = 0) and
each 100 ms piece is sent when its last sample has been (t = (k+1) x 0.1 s,
divided by 4 with --fast), so the end of the audio is at t = its duration.
For each client and file: the events that came while audio was still being
sent, the first non-empty one's arrival, the final transcript's arrival
after the end of the audio, its WER against the manifest's reference and
against `sotto transcribe` of the same file (greedy, --beam-size 1, and the
default beam 5), normalised as tests/e2e/wer.py (Whisper's English
normaliser, jiwer). Nothing is asserted. The report (with the CPU's ISA and
the precision sotto takes on it, tests/cpu.py) is printed and, unless
--fast or --no-docs, inserted into docs/benchmarks.md ("Clients"), newest
first; every event with its arrival time goes to
~/.cache/sotto/bench/results/clients-*.json.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from daemon import proc_cpu_s, source_note  # noqa: E402
from machine import cpu_model, loadavg, machine_busy_s  # noqa: E402
from build import ensure_built  # noqa: E402

import cpu  # noqa: E402  (tests/cpu.py)
from wer import counts, load_manifest  # noqa: E402  (tests/e2e/wer.py)

DOCS = REPO / "docs" / "benchmarks.md"
RUNS_MARK = "<!-- bench/clients inserts runs below this line -->"
FILES = ["jfk.wav", "LJ001-0001_to_LJ001-0017_longform.wav"]
CLIENTS = ["realtime", "sse", "deepgram"]
PIECE_S = 0.1


def log(msg: str) -> None:
    print(f"[clients-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def raw(path: Path, *fmt: str) -> bytes:
    """The file's samples in a raw format, as sox writes them (no dither),
    as tests/daemon/test_realtime.py sends them."""
    return subprocess.run(["sox", "-D", str(path), "-c", "1", *fmt, "-t", "raw", "-"],
                          capture_output=True, check=True).stdout


class Clock:
    """Live pacing: piece k (of PIECE_S seconds of audio) is due when its
    last sample has been spoken."""

    def __init__(self, speed: float):
        self.speed, self.t0 = speed, time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def wait_audio(self, audio_s: float) -> None:
        dt_ = self.t0 + audio_s / self.speed - time.monotonic()
        if dt_ > 0:
            time.sleep(dt_)


class Run:
    """One client on one file: events as (seconds since t0, kind, text)."""

    def __init__(self, client: str, name: str, duration: float, speed: float):
        self.client, self.name, self.duration, self.speed = client, name, duration, speed
        self.events: list[tuple[float, str, str]] = []
        self.end_sent: float | None = None  # the last piece of audio sent (since t0)
        self.final: str = ""
        self.final_at: float | None = None
        self.error: str | None = None

    def add(self, clock: Clock, kind: str, text: str) -> None:
        self.events.append((clock.now(), kind, text))

    def during(self, kind: str) -> list:
        end = self.end_sent if self.end_sent is not None else float("inf")
        return [e for e in self.events if e[1] == kind and e[0] <= end]

    def first(self, kinds: tuple[str, ...]) -> float | None:
        return next((t for t, k, x in self.events if k in kinds and x.strip()), None)


# --- the three clients --------------------------------------------------------------------------

def run_realtime(base: str, path: Path, r: Run, timeout: float) -> None:
    import openai

    data = raw(path, "-r", "24000", "-b", "16", "-e", "signed")
    step = int(24000 * 2 * PIECE_S)
    c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0,
                      websocket_base_url=base.replace("http", "ws", 1) + "/v1")
    with c.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        ev = conn.recv()
        assert ev.type == "session.created", ev
        conn.session.update(session={
            "type": "transcription",
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": None}}})
        ev = conn.recv()
        assert ev.type == "session.updated", ev
        clock = Clock(r.speed)
        done = threading.Event()

        def reader() -> None:
            try:
                for ev in conn:
                    if ev.type == "conversation.item.input_audio_transcription.delta":
                        r.add(clock, "delta", ev.delta)
                    elif ev.type == "conversation.item.input_audio_transcription.completed":
                        r.add(clock, "completed", ev.transcript)
                        r.final, r.final_at = ev.transcript, clock.now()
                        break
                    elif ev.type in ("error", "conversation.item.input_audio_transcription.failed"):
                        r.error = f"{ev.type}: {ev}"
                        break
            except Exception as e:  # noqa: BLE001  (the report says what ended it)
                r.error = f"{type(e).__name__}: {e}"
            done.set()

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        for i in range(0, len(data), step):
            piece = data[i:i + step]
            clock.wait_audio((i + len(piece)) / (24000 * 2))
            conn.input_audio_buffer.append(audio=base64.b64encode(piece).decode())
        r.end_sent = clock.now()
        conn.input_audio_buffer.commit()
        if not done.wait(timeout):
            r.error = f"no completed within {timeout:.0f} s of the commit"
    t.join(5)


class PacedUpload(io.RawIOBase):
    """A WAV file whose audio reads wait for the live clock: 100 ms of audio
    a read (the header at once), so the SDK's upload is paced as live."""

    def __init__(self, wav: bytes, data_at: int, bytes_per_s: int, r: Run):
        super().__init__()
        self.wav, self.data_at, self.bps, self.r = wav, data_at, bytes_per_s, r
        self.pos, self.clock = 0, None
        self.piece = int(bytes_per_s * PIECE_S)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = {0: off, 1: self.pos + off, 2: len(self.wav) + off}[whence]
        return self.pos

    def readinto(self, b) -> int:
        if self.pos >= len(self.wav):
            if self.r.end_sent is None:
                self.r.end_sent = self.clock.now()
            return 0
        if self.pos < self.data_at:
            end = self.data_at
        else:
            k = (self.pos - self.data_at) // self.piece
            end = min(len(self.wav), self.data_at + (k + 1) * self.piece)
            self.clock.wait_audio((end - self.data_at) / self.bps)
        end = min(end, self.pos + len(b))
        n = end - self.pos
        b[:n] = self.wav[self.pos:end]
        self.pos = end
        return n


def data_offset(wav: bytes) -> int:
    """Where the samples of a RIFF/WAVE file start."""
    i = 12
    while i + 8 <= len(wav):
        cid, size = wav[i:i + 4], int.from_bytes(wav[i + 4:i + 8], "little")
        if cid == b"data":
            return i + 8
        i += 8 + size + (size & 1)
    raise SystemExit("bench/clients: no data chunk in the WAV file")


def run_sse(base: str, path: Path, r: Run, timeout: float) -> None:
    import openai

    wav = path.read_bytes()
    up = PacedUpload(wav, data_offset(wav), 32000, r)
    c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=timeout)
    up.clock = clock = Clock(r.speed)
    try:
        for ev in c.audio.transcriptions.create(file=(path.name, up, "audio/wav"),
                                                model="whisper-1", stream=True):
            if ev.type == "transcript.text.delta":
                r.add(clock, "delta", ev.delta)
            elif ev.type == "transcript.text.done":
                r.add(clock, "done", ev.text)
                r.final, r.final_at = ev.text, clock.now()
    except Exception as e:  # noqa: BLE001
        r.error = f"{type(e).__name__}: {e}"


def run_deepgram(base: str, path: Path, r: Run, timeout: float) -> None:
    from deepgram import DeepgramClient
    from deepgram.environment import DeepgramClientEnvironment

    host = base.split("://", 1)[1]
    env = DeepgramClientEnvironment(base=f"http://{host}", production=f"ws://{host}",
                                    agent=f"ws://{host}", agent_rest=f"http://{host}")
    data = raw(path, "-r", "16000", "-b", "16", "-e", "signed")
    step = int(32000 * PIECE_S)
    finals: list[str] = []
    with DeepgramClient(api_key="unused", environment=env).listen.v1.connect(
            model="nova-3", language="en-US", encoding="linear16", sample_rate=16000,
            channels=1, interim_results="true", punctuate="true") as conn:
        clock = Clock(r.speed)

        def reader() -> None:
            try:
                for m in conn:
                    if m.type != "Results":
                        continue
                    text = m.channel.alternatives[0].transcript
                    if m.is_final:
                        r.add(clock, "final", text)
                        if text.strip():
                            finals.append(text.strip())
                        r.final_at = clock.now()
                    else:
                        r.add(clock, "interim", text)
            except Exception as e:  # noqa: BLE001  (the close is the end of the messages)
                if "ConnectionClosedOK" not in type(e).__name__:
                    r.error = f"{type(e).__name__}: {e}"

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        for i in range(0, len(data), step):
            piece = data[i:i + step]
            clock.wait_audio((i + len(piece)) / 32000)
            conn.send_media(piece)
        r.end_sent = clock.now()
        conn.send_close_stream()
        t.join(timeout)
        if t.is_alive():
            r.error = f"the connection was not closed within {timeout:.0f} s of CloseStream"
    r.final = " ".join(finals)


RUNNERS = {"realtime": run_realtime, "sse": run_sse, "deepgram": run_deepgram}
WHAT = {"realtime": "openai SDK, Realtime (`client.realtime.connect`)",
        "sse": "openai SDK, `audio.transcriptions.create(stream=True)` (SSE)",
        "deepgram": "deepgram-sdk, `listen.v1.connect` (interim_results)"}


# --- references ----------------------------------------------------------------------------------

def transcribe(sotto: Path, model: Path, path: Path, beam: int) -> str:
    cp = subprocess.run([str(sotto), "transcribe", "-q", "-m", str(model), "-t", "2",
                         "--beam-size", str(beam), "-f", "txt", str(path)],
                        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        raise SystemExit(f"bench/clients: sotto transcribe exited {cp.returncode}: {cp.stderr}")
    return " ".join(cp.stdout.split())


def wer_cell(ref: str, hyp: str) -> str:
    e, n = counts(ref, hyp)
    return f"{100.0 * e / n:.1f}% ({e}/{n})" if n else "-"


# --- the report ----------------------------------------------------------------------------------

def version(pkg: str) -> str:
    from importlib.metadata import version as v

    return v(pkg)


def table(runs: list[Run], refs: dict, sotto_txt: dict) -> list[str]:
    L = ["| client | file | events while the audio was sent | first, s after the start | "
         "final, s after the end of the audio | WER vs reference | vs `sotto transcribe` greedy | "
         "vs beam 5 | sottod CPU s | other cores |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if r.client == "deepgram":
            n = f"{len(r.during('interim'))} interim, {len(r.during('final'))} final"
            first = r.first(("interim", "final"))
        else:
            nd = len(r.during('delta'))
            n = f"{nd} delta{'' if nd == 1 else 's'}"
            first = r.first(("delta",))
        if r.client == "sse" and first is not None:
            first_c = f"{first:.2f} ({first - r.end_sent:+.2f} after the end)"
        else:
            first_c = "-" if first is None else f"{first:.2f}"
        fin = "-" if r.final_at is None or r.end_sent is None else f"{r.final_at - r.end_sent:.2f}"
        short = "jfk (11 s)" if r.name == "jfk.wav" else "long-form (118 s)"
        err = f" **{r.error}**" if r.error else ""
        L.append(f"| {r.client} | {short} | {n} | {first_c} | {fin}{err} | "
                 f"{wer_cell(refs[r.name], r.final)} | {wer_cell(sotto_txt[r.name, 1], r.final)} | "
                 f"{wer_cell(sotto_txt[r.name, 5], r.final)} | {r.cpu:.1f} | {r.other:.2f} |")
    return L


def report(a, started, runs: list[Run], refs: dict, sotto_txt: dict, load: tuple) -> str:
    isa = cpu.describe()
    pace = "paced as live" if a.speed == 1 else f"sent {a.speed:g}x faster than live (--fast)"
    L = [f"### {started:%Y-%m-%d %H:%M} UTC: clients, {Path(a.model).stem}, {pace}", ""]
    L.append(f"`{a.command}`: {cpu_model()}, {os.cpu_count()} cores, oneDNN ISA {isa}, precision auto "
             f"= {cpu.default_precision()}{' with AMX' if cpu.amx() else ''}. {source_note(Path(a.build_dir))}, "
             f"sottod `--http 127.0.0.1:0 -t 2`, the default config. openai {version('openai')}, "
             f"deepgram-sdk {version('deepgram-sdk')}, websockets {version('websockets')}. "
             f"Load average {load[0]:.2f} at the start, {load[1]:.2f} at the end; \"other cores\" is what "
             f"the rest of the machine used during each run (/proc/stat minus sottod and this script's "
             f"process). Pieces of {PIECE_S * 1000:.0f} ms, {pace}; times are wall-clock seconds from the "
             f"audio's start (0; its end is at the file's duration{'' if a.speed == 1 else ' / ' + format(a.speed, 'g')}).")
    L.append("")
    L += table(runs, refs, sotto_txt)
    L.append("")
    L.append("`sotto transcribe` against the reference: " + "; ".join(
        f"{name}, greedy {wer_cell(refs[name], sotto_txt[name, 1])}, beam 5 {wer_cell(refs[name], sotto_txt[name, 5])}"
        for name in dict.fromkeys(r.name for r in runs)) + ".")
    return "\n".join(L) + "\n"


def insert_docs(section: str) -> None:
    text = DOCS.read_text()
    if RUNS_MARK not in text:
        raise SystemExit(f"bench/clients: {DOCS} has no line {RUNS_MARK!r}")
    head, tail = text.split(RUNS_MARK, 1)
    DOCS.write_text(head + RUNS_MARK + "\n\n" + section.strip("\n") + "\n\n" + tail.lstrip("\n"))


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/clients", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fast", action="store_true",
                    help="send the audio 4x faster than live, a quick check; no docs")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help=f"comma-separated subset of {','.join(CLIENTS)} [all, in that order]")
    ap.add_argument("--files", default=",".join(FILES),
                    help=f"comma-separated files of --audio [{','.join(FILES)}]")
    ap.add_argument("--model", default=str(REPO / "models" / "tiny.en.gguf"),
                    help="the GGUF sottod and sotto transcribe load [models/tiny.en.gguf]")
    ap.add_argument("--audio", default=str(AUDIO_DIR),
                    help="directory with manifest.tsv and the files [SOTTO_AUDIO_DIR, else ../shared/audio]")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a client waits for its final transcript after the end of the audio [120]")
    ap.add_argument("--build-dir", default=str(REPO / "build"),
                    help="meson build directory with daemon/sottod and client/sotto, set up as a release "
                    "build if missing [build]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction,
                    help="insert the report into docs/benchmarks.md [yes, except with --fast]")
    a = ap.parse_args()
    a.speed = 4.0 if a.fast else 1.0
    a.docs = (not a.fast) if a.docs is None else a.docs
    a.clients = a.clients.split(",")
    if set(a.clients) - set(CLIENTS):
        ap.error(f"--clients: unknown {','.join(set(a.clients) - set(CLIENTS))}")
    a.files = a.files.split(",")
    a.command = " ".join(["bench/clients", *(shlex.quote(x) for x in sys.argv[1:])])
    a.build_dir = str(Path(a.build_dir).resolve())
    audio = Path(a.audio)
    manifest = load_manifest(audio)
    for f in a.files:
        if f not in manifest:
            ap.error(f"--files: {f} is not in {audio / 'manifest.tsv'}")

    build = Path(a.build_dir)
    ensure_built(build, ["daemon/sottod", "client/sotto:executable"], not a.no_build)
    os.environ["SOTTO_BUILD_DIR"] = a.build_dir
    sys.path.insert(0, str(REPO / "tests" / "daemon"))
    import conftest  # noqa: E402  (tests/daemon's Daemon, on this build)

    model = Path(a.model).resolve()
    refs = {f: manifest[f] for f in a.files}
    sotto_txt = {}
    for f in a.files:
        for beam in (1, 5):
            log(f"sotto transcribe --beam-size {beam} {f}")
            sotto_txt[f, beam] = transcribe(conftest.SOTTO, model, audio / f, beam)

    started = dt.datetime.now(dt.timezone.utc)
    tmp = Path(tempfile.mkdtemp(prefix="sotto-clients-bench."))
    d = conftest.Daemon(tmp / "sottod", model, argv=["--http", "127.0.0.1:0"])
    runs: list[Run] = []
    load0 = loadavg()
    try:
        d.start(timeout=120)
        base = f"http://127.0.0.1:{d.listen_port()}"
        log(f"sottod at {base}")
        for f in a.files:
            path = audio / f
            duration = float(subprocess.run(["soxi", "-D", str(path)], capture_output=True, text=True,
                                            check=True).stdout)
            for c in a.clients:
                r = Run(c, f, duration, a.speed)
                log(f"{c}: {f} ({duration:.1f} s, {duration / a.speed:.0f} s to send)")
                busy0, cpu0, own0 = machine_busy_s(), proc_cpu_s(d.proc.pid), proc_cpu_s(os.getpid())
                t0 = time.monotonic()
                try:
                    RUNNERS[c](base, path, r, a.timeout)
                except Exception as e:  # noqa: BLE001  (reported, not asserted)
                    r.error = f"{type(e).__name__}: {e}"
                wall = time.monotonic() - t0
                r.cpu = proc_cpu_s(d.proc.pid) - cpu0
                own = proc_cpu_s(os.getpid()) - own0
                r.other = max(0.0, machine_busy_s() - busy0 - r.cpu - own) / wall
                runs.append(r)
                log(f"  {len(r.events)} events, final {r.final_at}, end {r.end_sent}"
                    + (f", error {r.error}" if r.error else ""))
                time.sleep(1.0)
    finally:
        if d.alive():
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    section = report(a, started, runs, refs, sotto_txt, (load0, loadavg()))
    print(section)
    out = (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sotto" / "bench" / "results"
           / f"clients-{started:%Y%m%d-%H%M%S}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv, "sotto_transcribe": {f"{k[0]} beam {k[1]}": v
                                                                       for k, v in sotto_txt.items()},
                               "runs": [vars(r) for r in runs]}, indent=1))
    log(f"events: {out}")
    if a.docs:
        insert_docs(section)
        log(f"inserted into {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
