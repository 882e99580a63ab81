#!/usr/bin/env python3
"""Fairness of sottod's compute thread: a short stream behind bulk work.

    bench/fairness                              50 x 3 s bulk, 3 runs
    bench/fairness --compare /tmp/old/build     the same against another build

Each run starts one sottod (tiny.en, 2 threads, max_sessions above the
load) and --bulk clients at once, each sending --seconds of real speech
(the speech files of the audio directory, looped) as fast as sottod takes
it, not live (as `sotto stream --fast` does), then END. Once every bulk
session is open and decoding has begun (the first partial or final of any
of them) and --probe-after seconds more, the probe opens: --probe (2.8 s
of speech) sent the same way, or with --probe-live as `sotto stream`
sends a microphone (OPEN with live: true, the audio paced as spoken).
The probe's latency is the time from its OPEN to its `end`, and from its
END to its `end`; the run also notes when the last bulk session ended,
how many bulk sessions ended before the probe, and sottod's CPU time
(user + system: the work done, which a busy machine disturbs less than
wall time). With --compare the other build's sottod runs the same
load, the runs of the two builds taking turns. Medians over --runs, with
the load average before and after (a shared machine slows both alike).

The clients are raw protocol clients (tests/daemon/conftest.py), one
thread each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import wave
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
RATE = 16000


def log(msg: str) -> None:
    print(f"[fairness {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr,
          flush=True)


def read_pcm(path: Path) -> bytes:
    with wave.open(str(path)) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != \
                (RATE, 1, 2):
            raise SystemExit(f"{path}: not 16 kHz mono s16")
        return w.readframes(w.getnframes())


def reel(audio: Path, skip: str) -> bytes:
    """Every speech file of the audio directory but skip, back to back."""
    return b"".join(read_pcm(p) for p in sorted(audio.glob("*.wav"))
                    if p.name != skip)


def piece(r: bytes, offset_s: float, seconds: float) -> bytes:
    """seconds of r from offset_s on, looped."""
    n = int(seconds * RATE) * 2
    at = int(offset_s * RATE) * 2 % len(r)
    return (r[at:] + r * (n // len(r) + 1))[:n]


class Client(threading.Thread):
    """One stream: OPEN, all of pcm as fast as sottod reads it, END,
    every event up to `end`, with the monotonic times of OPEN and end."""

    def __init__(self, sock: str, pcm: bytes, first: threading.Event,
                 live: bool = False):
        super().__init__(daemon=True)
        self.sock, self.pcm, self.first = sock, pcm, first
        self.live = live
        self.opened = threading.Event()
        self.t_open = self.t_end = self.t_sent = None
        self.error = None

    def run(self) -> None:
        try:
            c = C.RawClient(self.sock, timeout=600)
            c.hello()
            c.send(C.jframe(C.MSG_OPEN, {"format": "s16le",
                                         "live": self.live}))
            ev = c.event()
            if ev["type"] != "opened":
                raise RuntimeError(f"OPEN: {ev}")
            self.t_open = time.monotonic()
            self.opened.set()
            reader = threading.Thread(target=self.read, args=(c,),
                                      daemon=True)
            reader.start()
            step = 3200 if self.live else 32000   # 100 ms paced, or 1 s
            for i in range(0, len(self.pcm), step):
                if self.live:   # as it is spoken
                    time.sleep(max(0.0, self.t_open + i / 2 / RATE -
                                   time.monotonic()))
                c.send(C.frame(C.MSG_AUDIO, self.pcm[i:i + step]))
            c.send(C.frame(C.MSG_END))
            self.t_sent = time.monotonic()
            reader.join()
            c.close()
        except Exception as e:  # noqa: BLE001 - reported per client
            self.error = repr(e)
            self.opened.set()

    def read(self, c) -> None:
        while True:
            ev = c.event()
            if ev is None:
                self.error = self.error or "closed before end"
                return
            if ev["type"] in ("partial", "final"):
                self.first.set()
            elif ev["type"] == "end":
                self.t_end = time.monotonic()
                return
            elif ev["type"] == "error":
                self.error = f"error event: {ev}"
                return


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc: the work it
    did, less sensitive than wall time to what else the machine runs)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def one_run(build: Path, model: Path, bulk: list[bytes], probe: bytes,
            after: float, live: bool, tmp: Path) -> dict:
    C.SOTTOD = build / "daemon" / "sottod"
    n = len(bulk)
    d = C.Daemon(tmp, model, conf=f"max_sessions = {n + 4}\n"
                 f"max_connections_per_uid = {2 * n + 8}\n"
                 f"max_connections = {2 * n + 16}\n")
    d.start(timeout=120)
    load0 = os.getloadavg()[0]
    try:
        first = threading.Event()
        t0 = time.monotonic()
        clients = [Client(d.socket, pcm, first) for pcm in bulk]
        for c in clients:
            c.start()
        for c in clients:
            c.opened.wait(120)
        first.wait(300)
        time.sleep(after)
        p = Client(d.socket, probe, threading.Event(), live)
        p.start()
        for c in clients + [p]:
            c.join(1200)
        cpu = cpu_seconds(d.proc.pid)
        bad = [c.error for c in clients + [p] if c.error or c.t_end is None]
        if bad:
            raise SystemExit(f"bench/fairness: {len(bad)} streams failed: "
                             f"{bad[:3]}\n{d.log()}")
    finally:
        d.stop(timeout=120)
    last = max(c.t_end for c in clients)
    return dict(probe_s=p.t_end - p.t_open, probe_start_s=p.t_open - t0,
                after_s=p.t_end - p.t_sent,
                bulk_s=last - t0, probe_end_s=p.t_end - t0,
                bulk_before=sum(c.t_end < p.t_end for c in clients),
                cpu_s=cpu,
                load=(load0 + os.getloadavg()[0]) / 2)


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bulk", type=int, default=50,
                    help="bulk streams at once [50]")
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="speech each bulk stream sends [3]")
    ap.add_argument("--probe", default="goforward.wav",
                    help="the late stream's file, in the audio directory "
                    "[goforward.wav: 2.8 s]")
    ap.add_argument("--probe-after", type=float, default=0.0,
                    help="seconds from the bulk's first result to the "
                    "probe's OPEN [0]")
    ap.add_argument("--probe-live", action="store_true",
                    help="the probe is live (OPEN with live: true, its "
                    "audio paced as spoken, as `sotto stream` sends a "
                    "microphone) instead of sent as fast as sottod takes it")
    ap.add_argument("--runs", type=int, default=3, help="runs per build [3]")
    ap.add_argument("--compare", metavar="OTHER_BUILD",
                    help="also run another build directory's sottod")
    ap.add_argument("--model", default="tiny.en", help="model [tiny.en]")
    ap.add_argument("--build-dir", default=str(REPO / "build"),
                    help="this build [build]")
    ap.add_argument("--audio", default=str(AUDIO_DIR),
                    help="speech files [SOTTO_AUDIO_DIR, else ../shared/audio]")
    a = ap.parse_args()

    os.environ["SOTTO_BUILD_DIR"] = str(Path(a.build_dir).resolve())
    sys.path.insert(0, str(REPO / "tests" / "daemon"))
    global C
    import conftest as C  # noqa: E402

    import subprocess
    env = dict(os.environ, SOTTO_PYTHON=os.environ.get("SOTTO_PYTHON",
                                                        sys.executable))
    out = subprocess.run([str(REPO / "scripts" / "fetch-model"), a.model],
                         cwd=REPO, env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    model = Path(out[-1]).resolve()
    audio = Path(a.audio)
    r = reel(audio, a.probe)
    bulk = [piece(r, i * 7.3, a.seconds) for i in range(a.bulk)]
    probe = read_pcm(audio / a.probe)
    builds = {"this": Path(a.build_dir).resolve()}
    if a.compare:
        builds["other"] = Path(a.compare).resolve()
    for name, b in builds.items():
        if not (b / "daemon" / "sottod").is_file():
            raise SystemExit(f"bench/fairness: {b}/daemon/sottod is missing")
    rows: dict[str, list[dict]] = {k: [] for k in builds}
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sotto-fairness-") as tmp:
        for run in range(a.runs):
            for name, b in builds.items():
                row = one_run(b, model, bulk, probe, a.probe_after,
                              a.probe_live, Path(tmp) / f"{name}-{run}")
                rows[name].append(row)
                log(f"{name} run {run + 1}: probe {row['probe_s']:.1f} s, "
                    f"{row['after_s']:.1f} s after its END "
                    f"(opened at {row['probe_start_s']:.1f} s, ended at "
                    f"{row['probe_end_s']:.1f} s), last bulk at "
                    f"{row['bulk_s']:.1f} s, {row['bulk_before']} of "
                    f"{a.bulk} bulk ended before it; sottod CPU "
                    f"{row['cpu_s']:.1f} s; load {row['load']:.1f}")
    load_end = os.getloadavg()[0]
    cmd = "bench/fairness " + " ".join(sys.argv[1:])
    how = "live (paced as spoken)" if a.probe_live else "sent at once"
    print(f"`{cmd}` ({a.model}, {a.bulk} x {a.seconds:g} s bulk, probe "
          f"{a.probe} {len(probe) / 2 / RATE:.1f} s {how}, opened "
          f"{a.probe_after:g} s after the bulk's first result, {a.runs} "
          f"runs; load "
          f"average {load_start:.1f} at the start, {load_end:.1f} at the "
          f"end)\n")
    print("| build | probe OPEN to end, median (runs) | its END to end | "
          "probe ended at | last bulk ended at | bulk ended before the "
          "probe | sottod CPU time | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, b in builds.items():
        rs = rows[name]
        each = ", ".join(f"{x['probe_s']:.1f}" for x in rs)
        print(f"| {name} ({b}) | {med(rs, 'probe_s'):.1f} s ({each}) | "
              f"{med(rs, 'after_s'):.1f} s | "
              f"{med(rs, 'probe_end_s'):.1f} s | {med(rs, 'bulk_s'):.1f} s | "
              f"{med(rs, 'bulk_before'):.0f} of {a.bulk} | "
              f"{med(rs, 'cpu_s'):.1f} s | "
              f"{med(rs, 'load'):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
