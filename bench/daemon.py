#!/usr/bin/env python3
"""sottod under load: live streams sustained, idle microphone CPU, memory.

    bench/daemon                         all three, tiny.en and base (~40 min)
    bench/daemon --quick                 a short pass to check the harness (~5 min)
    bench/daemon --only rss --minutes 60 --fast
    bench/daemon --only bursts           5 bursts of 50 short sessions, idle memory
    bench/daemon --only soak             the one-hour soak (--soak-minutes)

1. streams: for each model, one sottod; N = 1, 2, 3, ... concurrent
   `sotto stream --format jsonl` clients, each sending --stream-seconds of
   real speech (the files of the audio directory, looped) paced as live,
   started a fraction of a step apart. N holds when the partial latency
   p95 is at most --p95-limit (2 s) and the lag sottod reports
   (status lag_s: audio received but not yet decoded, its largest session)
   stays at most --max-lag; the sweep stops at the first N that does not.
2. idle: sottod with the microphone on, through sottofake (the ALSA test
   plugin of tests/daemon, a capture device paced by the clock) playing a
   quiet floor (white noise at --idle-dbfs); the CPU time of sottod from
   /proc/PID/stat over --idle-seconds, with no listener and with one
   `sotto listen`; and sottod with the microphone off, for reference.
3. rss: one stream of --minutes of speech (paced as live, or --fast: as
   fast as sottod takes it); VmRSS and RssAnon of sottod from
   /proc/PID/status every --rss-interval seconds; start, end, max and the
   least-squares slope per 10 minutes of audio.
1-3 are bench/daemon_load.py; 4. bursts, 5. soak: bench/daemon_service.py (not
part of the default run).

Latency is computed as in tests/daemon (test_daemon.latencies): the arrival
time of an event minus the arrival of `opened` minus the stream time the
event ends at. The daemon, the clients and the status client are those of
tests/daemon/conftest.py.

Every measurement notes what else ran: the CPU time the rest of the machine
used during it (from /proc/stat, minus sottod, its clients and this
script), in cores. Before each one the script waits (up to --wait seconds)
until the rest of the machine uses at most --max-other cores; a stream run
disturbed by more than that which did not hold is run once more (one that
held in spite of it stands, with pessimistic latencies).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import resource
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import wave
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
from machine import HZ, cpu_model, loadavg, machine_busy_s  # noqa: E402
from build import ensure_built  # noqa: E402

DOCS = REPO / "docs" / "benchmarks.md"
RUNS_MARK = "<!-- bench/daemon inserts runs below this line -->"
RATE = 16000


def log(msg: str) -> None:
    print(f"[daemon-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- /proc ------------------------------------------------------------------------------

def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def proc_mem_kb(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                out[k] = int(v.split()[0])
    return out


def own_cpu_s() -> float:
    """This script and its reaped children (the clients), in seconds."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class Window:
    """A measured stretch of time: sottod's CPU and the rest of the machine's.

    `other` is the machine's busy time minus sottod's, this script's and its
    reaped children's, per second of wall time: the cores that other work
    took meanwhile. Clients must be reaped before end() to be counted."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.load0 = loadavg()
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_s()
        self.own0 = own_cpu_s()
        self.d0 = proc_cpu_s(pid) if pid else 0.0

    def end(self) -> "Window":
        self.wall = time.monotonic() - self.t0
        self.sottod_s = (proc_cpu_s(self.pid) if self.pid else 0.0) - self.d0
        busy = machine_busy_s() - self.busy0
        own = own_cpu_s() - self.own0
        self.other = max(0.0, busy - self.sottod_s - own) / self.wall
        self.load1 = loadavg()
        return self

    @property
    def sottod_pct(self) -> float:
        return 100.0 * self.sottod_s / self.wall


def wait_quiet(max_other: float, budget: float, pid: int | None = None) -> tuple[float, float]:
    """Wait until the rest of the machine uses at most max_other cores
    (10 s samples), at most budget seconds. Returns (other, waited)."""
    t0 = time.monotonic()
    while True:
        w = Window(pid)
        time.sleep(10)
        other = w.end().other
        waited = time.monotonic() - t0
        if other <= max_other or waited >= budget:
            if other > max_other:
                log(f"other load still {other:.2f} cores after {waited:.0f} s; measuring anyway")
            return other, waited
        log(f"other processes use {other:.2f} cores (load average {loadavg():.2f}); waiting")


# --- audio --------------------------------------------------------------------------------

def read_pcm(path: Path) -> bytes:
    with wave.open(str(path)) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise SystemExit(f"bench/daemon: {path}: not 16 kHz mono s16")
        return w.readframes(w.getnframes())


def speech_reel(audio: Path) -> tuple[bytes, list[str]]:
    """Every file of the manifest, in its order, 0.5 s of silence after each."""
    names = []
    with open(audio / "manifest.tsv") as f:
        f.readline()
        for line in f:
            if line.strip():
                names.append(line.split("\t", 1)[0])
    gap = bytes(RATE // 2 * 2)
    return b"".join(read_pcm(audio / n) + gap for n in names), names


def looped(reel: bytes, offset_s: float, seconds: float) -> bytes:
    """seconds of the reel from offset_s, wrapping around."""
    n = int(seconds * RATE) * 2
    at = int(offset_s * RATE) * 2 % len(reel)
    out = bytearray()
    while len(out) < n:
        out += reel[at:at + n - len(out)]
        at = 0
    return bytes(out)


def write_wav(path: Path, pcm: bytes) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm)
    return path


def noise_floor(seconds: float, dbfs: float) -> bytes:
    """White noise with an RMS of dbfs (relative to full scale), s16le:
    10 s of it, repeated."""
    rng = random.Random(1)
    sd = 32768.0 * 10 ** (dbfs / 20)
    n = 10 * RATE
    block = struct.pack(f"<{n}h", *(max(-32768, min(32767, round(rng.gauss(0.0, sd)))) for _ in range(n)))
    return block * math.ceil(seconds / 10)


# --- helpers -------------------------------------------------------------------------------

def pct(xs: list[float], p: float) -> float:
    return conftest.percentile(xs, p)


def f2(x: float | None, nd: int = 2) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def slope_per_10min(pts: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (minutes), times 10."""
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return float("nan")
    return 10 * sum((x - mx) * (y - my) for x, y in pts) / sxx


class StatusPoller(threading.Thread):
    """A STATUS request every `every` s on its own connection."""

    def __init__(self, socket_path: str, every: float = 1.0):
        super().__init__(daemon=True)
        self.c = conftest.RawClient(socket_path, timeout=10)
        self.c.hello()
        self.every = every
        self.samples: list[tuple[float, dict]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.c.send(conftest.frame(conftest.MSG_STATUS))
                ev = self.c.event()
            except OSError:
                return
            if ev is None:
                return
            self.samples.append((time.monotonic(), ev))
            self.halt.wait(self.every)

    def stop(self) -> list[tuple[float, dict]]:
        self.halt.set()
        self.join(15)
        self.c.close()
        return self.samples


def stream_ok(s) -> tuple[bool, str]:
    if s.proc.returncode != 0:
        return False, f"exit {s.proc.returncode}: {s.stderr.strip()[-200:]}"
    if not s.events("end"):
        return False, "no end event"
    if s.events("error"):
        return False, f"error {s.events('error')[0]}"
    ids = [e["id"] for e in s.events("final")]
    if ids != list(range(len(ids))):
        return False, f"final ids {ids[:10]}..."
    return True, ""


# --- the benchmark -------------------------------------------------------------------------

class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = Path(tempfile.mkdtemp(prefix="sotto-daemon-bench-"))
        self.results: dict = {"streams": {}, "idle": {}, "rss": None, "bursts": None, "soak": None}
        self.notes: list[str] = []

    # -- setup --

    def setup(self) -> None:
        a = self.a
        build = Path(a.build_dir)
        ensure_built(build, ["daemon/sottod", "client/sotto:executable",
                             "tests/daemon/asound_module_pcm_sottofake"], not a.no_build)
        for b in (conftest.SOTTOD, conftest.SOTTO):
            if not b.is_file():
                raise SystemExit(f"bench/daemon: {b} missing (meson compile -C {build})")
        self.plugin = build / "tests" / "daemon" / "libasound_module_pcm_sottofake.so"
        env = dict(os.environ)
        env.setdefault("SOTTO_PYTHON", sys.executable)
        self.models = {}
        want = a.models + a.idle_models + ([a.rss_model] if "rss" in a.only else [])
        want += ["tiny.en"] if {"bursts", "soak"} & set(a.only) else []
        for name in dict.fromkeys(want + ["silero-vad"]):  # the VAD live streams get, beside the models
            out = subprocess.run([str(REPO / "scripts" / "fetch-model"), name], cwd=REPO, env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            self.models[name] = Path(out[-1])
        self.reel, self.files = speech_reel(Path(a.audio))
        self.reel_s = len(self.reel) / 2 / RATE

    def daemon(self, model: str, tag: str, conf: str = "", env: dict | None = None):
        if self.a.idle_step_ms is not None:
            conf += f"\n[engine]\nidle_step_ms = {self.a.idle_step_ms}\n"
        if self.a.workers is not None:
            conf += f"\n[engine]\nworkers = {self.a.workers}\n"
        d = conftest.Daemon(self.tmp / tag, self.models[model], conf=conf, env=env,
                            argv=["--precision", self.a.precision, "-t", str(self.a.threads)])
        d.start(timeout=120)
        return d

    # -- the report --

    def report(self, started: dt.datetime, load_start: float, wall_min: float) -> str:
        a = self.a
        R = self.results
        L = [f"### {started:%Y-%m-%d %H:%M} UTC: sottod, {', '.join(a.only)}", ""]
        L.append(f"Command: `{a.command}`. Machine: {cpu_model()}, {os.cpu_count()} logical CPUs; sottod "
                 f"`-t {a.threads} --precision {a.precision}`, step {a.step_ms} ms"
                 + (f", idle_step_ms {a.idle_step_ms}" if a.idle_step_ms is not None else "")
                 + (f", workers {a.workers}" if a.workers is not None else "")
                 + ", everything else at its default. "
                 f"Source: {source_note(Path(a.build_dir))}. Load average when the run began: "
                 f"{load_start:.2f} (1 min); the \"other\" columns are the cores the rest of the machine "
                 f"used during each measurement (from /proc/stat, minus sottod, its clients and the "
                 f"harness). Wall time of the whole run: {wall_min:.1f} min.")
        L.append("")
        others = [r["other"] for m in a.models for r in R["streams"].get(m) or []]
        others += [r["other"] for m in a.idle_models for r in R["idle"].get(m) or []]
        if R.get("rss"):
            others.append(R["rss"]["other"])
        if others and max(others) > a.max_other:
            L.append(f"**The machine was busy**: other work used up to {max(others):.2f} of its "
                     f"{os.cpu_count()} cores during these measurements (more than --max-other "
                     f"{a.max_other:g}). sottod got less compute than it would alone: its latencies and "
                     f"the streams it sustained are pessimistic; its own CPU time and memory are not "
                     f"affected much.")
            L.append("")
        L += load.load_report(self, sys.modules[__name__])
        L += service.bursts_report(self, sys.modules[__name__])
        L += service.soak_report(self, sys.modules[__name__])
        return "\n".join(L)


def source_note(build: Path) -> str:
    """Which source the build directory compiles, and its git state."""
    try:
        info = json.loads((build / "meson-info" / "meson-info.json").read_text())
        src = Path(info["directories"]["source"])
    except (OSError, ValueError, KeyError):
        return f"build {build} (source unknown)"
    r = subprocess.run(["git", "-C", str(src), "describe", "--always", "--dirty"], capture_output=True, text=True)
    desc = r.stdout.strip() or "not a git checkout"
    note = f"sotto {desc} ({src}), build {build}"
    if desc.endswith("-dirty"):
        r = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "lib", "daemon", "client"],
                           capture_output=True, text=True)
        changed = [ln[3:] for ln in r.stdout.splitlines()]
        if changed:
            note += f", with uncommitted changes in {', '.join(changed)}"
    return note


def insert_docs(section: str) -> None:
    text = DOCS.read_text()
    if RUNS_MARK not in text:
        raise SystemExit(f"bench/daemon: {DOCS} has no line {RUNS_MARK!r} (in its \"## sottod\" section)")
    head, tail = text.split(RUNS_MARK, 1)
    DOCS.write_text(head + RUNS_MARK + "\n\n" + section.strip("\n") + "\n\n" + tail.lstrip("\n"))


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/daemon", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="check the harness: tiny.en, 20 s streams, N <= 2, 15 s idle, 2 min --fast rss, no docs")
    ap.add_argument("--only", help="comma-separated subset of streams,idle,rss,bursts,soak "
                    "[streams,idle,rss]")
    ap.add_argument("--models", help="models of the stream sweep [tiny.en,base]")
    ap.add_argument("--stream-seconds", type=float, help="audio per stream in each run [60]")
    ap.add_argument("--max-streams", type=int, help="stop the sweep here [12]")
    ap.add_argument("--p95-limit", type=float, default=2.0, help="partial latency p95 bound, s [2]")
    ap.add_argument("--max-lag", type=float, default=4.0,
                    help="bound on status lag_s, s [4: half of the 8 s at which sottod stops reading a client]")
    ap.add_argument("--stagger", action=argparse.BooleanOptionalAction, default=True,
                    help="start the N streams step/N apart rather than at once [yes]")
    ap.add_argument("--idle-models", help="models of the idle measurement [the first of --models]")
    ap.add_argument("--idle-seconds", type=float, help="length of each idle measurement [60]")
    ap.add_argument("--idle-dbfs", type=float, default=-60.0,
                    help="RMS of the microphone's noise floor, dBFS [-60; sottod's gate is at -50]")
    ap.add_argument("--idle-vad", default="live",
                    help="comma-separated [engine] vad values the microphone is measured with [live; "
                         "live,off compares]")
    ap.add_argument("--minutes", type=float, help="audio of the memory stream, minutes [60]")
    ap.add_argument("--fast", action="store_true", help="send the memory stream as fast as sottod takes it")
    ap.add_argument("--rss-model", help="model of the memory stream [tiny.en]")
    ap.add_argument("--rss-interval", type=float, default=30.0, help="seconds between memory samples [30]")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="minutes of audio left out of the memory slope (the engine's first allocations) [2]")
    ap.add_argument("--step-ms", type=int, default=1000,
                    help="sottod's step_ms (the default config's; used for the stagger) [1000]")
    ap.add_argument("--idle-step-ms", type=int, default=None,
                    help="sottod's [engine] idle_step_ms (previews of a lone live stream) [its default]")
    ap.add_argument("--threads", type=int, default=2, help="sottod -t: its engine threads [2]")
    ap.add_argument("--workers", type=int, default=None,
                    help="sottod's [engine] workers (jobs computed at once) [its default]")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"), help="sottod --precision [auto]")
    ap.add_argument("--max-other", type=float, default=0.5,
                    help="cores the rest of the machine may use during a measurement [0.5]")
    ap.add_argument("--wait", type=float, default=600,
                    help="wait at most this long (s) for the rest of the machine to quieten [600]")
    ap.add_argument("--audio", default=str(AUDIO_DIR),
                    help="directory with manifest.tsv and the 16 kHz wav files [SOTTO_AUDIO_DIR, else ../shared/audio]")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"),
                    help="meson build directory, set up as a release build if missing [build-bench]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction,
                    help="insert the report into docs/benchmarks.md [yes, except with --quick]")
    ap.add_argument("--json", metavar="FILE", help="also write every result here")
    ap.add_argument("--bursts", type=int, default=5, help="bursts of sessions [5]")
    ap.add_argument("--burst-sessions", type=int, default=50, help="sessions at once in a burst [50]")
    ap.add_argument("--burst-idle", type=float, default=8.0,
                    help="seconds the idle memory is sampled after a burst [8]")
    ap.add_argument("--soak-minutes", type=float, default=60.0, help="length of the soak [60]")
    ap.add_argument("--soak-streams", type=int, default=16, help="live streams of the soak [16]")
    ap.add_argument("--soak-pollers", type=int, default=16, help="status pollers of the soak [16]")
    ap.add_argument("--soak-session-minutes", type=float, default=5.0,
                    help="length of a soak stream's sessions, +-40%% [5]")
    ap.add_argument("--soak-slot", type=float, help="stretch of the latency series, min [soak/12]")

    a = ap.parse_args()
    q = a.quick
    a.only = (a.only or "streams,idle,rss").split(",")
    kinds = {"streams", "idle", "rss", "bursts", "soak"}
    if set(a.only) - kinds:
        ap.error(f"--only: unknown {set(a.only) - kinds}")
    a.soak_slot = a.soak_slot or max(1.0, a.soak_minutes / 12)
    a.models = (a.models or ("tiny.en" if q else "tiny.en,base")).split(",")
    a.idle_models = a.idle_models.split(",") if a.idle_models else a.models[:1]
    a.idle_vad = a.idle_vad.split(",")
    if any(v not in ("live", "all", "off") for v in a.idle_vad):
        ap.error("--idle-vad: live, all or off")
    a.stream_seconds = a.stream_seconds or (20 if q else 60)
    a.max_streams = a.max_streams or (2 if q else 12)
    a.idle_seconds = a.idle_seconds or (15 if q else 60)
    a.minutes = a.minutes or (2 if q else 60)
    a.rss_model = a.rss_model or "tiny.en"
    if q:
        a.fast = True
    if a.warmup > a.minutes / 2:
        a.warmup = a.minutes / 4
    if a.docs is None:
        a.docs = not q
    if "streams" not in a.only:
        a.models = []
    if "idle" not in a.only:
        a.idle_models = []
    # the path a forced ISA puts sottod on is part of the command
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA")
    a.command = (f"ONEDNN_MAX_CPU_ISA={shlex.quote(isa)} " if isa else "") + \
        "bench/daemon " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    a.build_dir = str(Path(a.build_dir).resolve())

    # tests/daemon's daemon and clients, on this build.
    os.environ["SOTTO_BUILD_DIR"] = a.build_dir
    sys.path.insert(0, str(REPO / "tests" / "daemon"))
    global conftest, latencies, Listen, load, service
    import conftest  # noqa: E402
    import daemon_load as load  # noqa: E402
    import daemon_service as service  # noqa: E402
    from test_daemon import latencies  # noqa: E402
    from test_mic import Listen  # noqa: E402

    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    load_start = loadavg()
    log(f"load average {load_start:.2f}")
    b = Bench(a)
    try:
        b.setup()
        h = sys.modules[__name__]
        for model in a.models:
            load.streams(b, h, model)
        for model in a.idle_models:
            load.idle(b, h, model)
        if "rss" in a.only:
            load.rss(b, h)
        if "bursts" in a.only:
            service.bursts(b, h)
        if "soak" in a.only:
            service.soak(b, h)
    except BaseException as e:  # pytest.fail() from conftest raises a BaseException
        if type(e).__name__ in ("Failed", "AssertionError"):
            raise SystemExit(f"bench/daemon: {e}")
        raise
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)
    section = b.report(started, load_start, (time.monotonic() - t0) / 60)
    print(section)
    out = (Path(a.json) if a.json else
           Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sotto" / "bench" / "results"
           / f"daemon-{started:%Y%m%d-%H%M%S}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv, "results": b.results}, indent=1, default=str))
    log(f"results: {out}")
    if a.docs:
        insert_docs(section)
        log(f"inserted into {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
