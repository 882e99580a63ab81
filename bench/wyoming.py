#!/usr/bin/env python3
"""sottod's Wyoming front door next to wyoming-faster-whisper, measured by
wyoming-bench (PyPI) against both servers in one run.

    bench/wyoming                  tiny.en, 3 rounds of both modes (~10 min idle)
    bench/wyoming --quick          1 round, non-streaming only, no docs (~2 min)
    bench/wyoming --mode paced     audio-stop to transcript, paced as live (wyoming_paced.py)

Both servers run on this machine with 2 threads, the same beam (5, both
programs' default) and the same weights: sottod (`--wyoming 127.0.0.1:0`, the release build in
build-bench/) on the GGUF of `scripts/fetch-model MODEL`, and
wyoming-faster-whisper (`--stt-library faster-whisper`, `--beam-size 5`,
`--cpu-threads 2`, `--compute-type` int8 by default) on the CTranslate2
model that GGUF was converted from (`scripts/fetch-model MODEL
--source-dir`). The corpus is the manifest's files under 30 s (voice
commands are short) with their reference transcripts. wyoming-bench sends
each file as audio-start / audio-chunk* / audio-stop and times the
transcript: one run non-streaming against both servers, then one
streaming against sottod alone (wyoming-faster-whisper does not stream),
timing the first transcript-chunk and transcript-stop with the audio
paced as live (--chunk-delay: one chunk's duration). The CPU seconds each
server used and the load of the rest of the machine are noted per run;
the report goes into docs/benchmarks.md ("Wyoming"), newest first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
from daemon import proc_cpu_s, source_note  # noqa: E402
from machine import cpu_model, loadavg, machine_busy_s  # noqa: E402
from build import ensure_built  # noqa: E402

DOCS = REPO / "docs" / "benchmarks.md"
RUNS_MARK = "<!-- bench/wyoming inserts runs below this line -->"
CHUNK = 1024


def log(msg: str) -> None:
    print(f"[wyoming-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def corpus(audio: Path, out: Path, max_s: float) -> list[str]:
    """The manifest's files under max_s as NAME.wav + NAME.txt in out."""
    from wer import load_manifest  # tests/e2e, on the path through conftest

    names = []
    for name, ref in load_manifest(audio).items():
        with wave.open(str(audio / name)) as w:
            if w.getnframes() / w.getframerate() >= max_s:
                continue
        (out / name).symlink_to(audio / name)
        (out / name).with_suffix(".txt").write_text(ref + "\n")
        names.append(name)
    return names


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench/wyoming: {what} exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"bench/wyoming: {what} did not listen on {port} in {timeout:.0f} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version(pkg: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(pkg)
    except PackageNotFoundError:
        raise SystemExit(f"bench/wyoming: {pkg} is not installed ({sys.executable} -m pip "
                         f"install -r {REPO / 'bench' / 'requirements-wyoming.txt'})")


class Servers:
    def __init__(self, a, tmp: Path):
        self.a, self.tmp = a, tmp
        self.sottod = self.fw = None
        self.others = []

    def sottod_start(self, gguf: Path, answer: str) -> tuple[object, int]:
        """A sottod with [wyoming] answer, and its Wyoming port."""
        a = self.a
        env = dict(x.split("=", 1) for x in a.sottod_env)
        d = conftest.Daemon(self.tmp / f"sottod-{answer}", gguf, env=env, argv=[
            "--wyoming", "127.0.0.1:0", "--precision", a.precision],
            conf=f"[wyoming]\nbeam_size = {a.beam_size}\nanswer = {answer}\n")
        self.others.append(d)
        d.start(timeout=120)
        m = re.search(r"wyoming: listening on 127\.0\.0\.1:(\d+)", d.log())
        if not m:
            raise SystemExit(f"bench/wyoming: sottod did not say where it listens:\n{d.log()}")
        return d, int(m.group(1))

    def start(self, gguf: Path, ct2: Path) -> None:
        a = self.a
        self.sottod, self.sottod_port = self.sottod_start(gguf, a.answer)
        if a.mode == "paced":
            self.whole, self.whole_port = self.sottod_start(gguf, "whole")
        self.fw_port = free_port()
        cmd = [sys.executable, "-m", "wyoming_faster_whisper", "--uri",
               f"tcp://127.0.0.1:{self.fw_port}", "--model", str(ct2), "--data-dir",
               str(self.tmp / "fw-data"), "--stt-library", "faster-whisper",
               "--compute-type", a.fw_compute_type, "--beam-size", str(a.beam_size), "--cpu-threads",
               str(a.threads), "--language", "en", "--local-files-only"]
        self.fw_cmd = cmd
        self.fw_log = open(self.tmp / "fw.log", "w")
        self.fw = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.fw_log,
                                   stderr=subprocess.STDOUT)
        wait_port(self.fw_port, self.fw, "wyoming-faster-whisper", 120)

    def cpu(self) -> tuple[float, float]:
        return proc_cpu_s(self.sottod.proc.pid), proc_cpu_s(self.fw.pid)

    def stop(self) -> None:
        if self.fw is not None and self.fw.poll() is None:
            self.fw.send_signal(signal.SIGTERM)
            try:
                self.fw.wait(30)
            except subprocess.TimeoutExpired:
                self.fw.kill()
                self.fw.wait()
        for d in self.others:
            if d.alive():
                d.stop()


def run_bench(a, servers: Servers, corpus_dir: Path, mode: str, ports: list[int]) -> str:
    """wyoming-bench stt in mode against the servers on ports."""
    chunk_delay = CHUNK / 16000 if a.paced else 0.0
    cmd = [str(Path(sys.executable).parent / "wyoming-bench"), "stt", "--corpus", str(corpus_dir),
           "--mode", mode, "--rounds", str(a.rounds), "--warmup", str(a.warmup),
           "--chunk-samples", str(CHUNK), "--chunk-delay", f"{chunk_delay:.3f}",
           "--config", '{"language": "en"}', "--timeout", "120", *[f"127.0.0.1:{p}" for p in ports]]
    log(" ".join(shlex.quote(x) for x in cmd))
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    if cp.returncode != 0:
        raise SystemExit(f"bench/wyoming: wyoming-bench exited {cp.returncode}:\n{cp.stdout}\n{cp.stderr}")
    return cp.stdout.replace(f"127.0.0.1:{servers.sottod_port}", "sottod").replace(
        f"127.0.0.1:{servers.fw_port}", "wyoming-faster-whisper")


class Run:
    """One wyoming-bench run: its output, CPU of each server, the machine."""

    def __init__(self, a, servers: Servers, corpus_dir: Path, mode: str, ports: list[int]):
        load0, busy0, t0 = loadavg(), machine_busy_s(), time.monotonic()
        cpu0 = servers.cpu()
        self.out = run_bench(a, servers, corpus_dir, mode, ports)
        cpu1 = servers.cpu()
        self.wall = time.monotonic() - t0
        self.cpu = (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])
        self.other = max(0.0, machine_busy_s() - busy0 - sum(self.cpu)) / self.wall
        self.load = (load0, loadavg())
        self.mode = mode


def report(a, started, names, runs: list[Run]) -> str:
    L = [f"### {started:%Y-%m-%d %H:%M} UTC: Wyoming, sottod and wyoming-faster-whisper, {a.model}", ""]
    L.append(f"`{a.command}`: {len(names)} files of `../shared/audio` under {a.max_seconds:.0f} s, "
             f"{a.rounds} round(s) after {a.warmup} warm-up. {cpu_model()}, {os.cpu_count()} cores. "
             f"{source_note(Path(a.build_dir))}, `-t {a.threads}`, precision {a.precision}, "
             f"[wyoming] beam_size {a.beam_size}. wyoming-faster-whisper {version('wyoming-faster-whisper')} "
             f"(faster-whisper {version('faster-whisper')}, ctranslate2 {version('ctranslate2')}), "
             f"compute_type {a.fw_compute_type}, `--cpu-threads {a.threads} --beam-size {a.beam_size}`. "
             f"wyoming-bench {version('wyoming-bench')}, wyoming {version('wyoming')}.")
    for r in runs:
        what = ("non-streaming, both servers (audio sent as fast as the socket takes it)"
                if r.mode == "non_streaming" else
                "streaming, sottod (wyoming-faster-whisper does not stream)"
                + (", audio paced as live" if a.paced else ""))
        cpu = (f"sottod {r.cpu[0]:.1f} s, wyoming-faster-whisper {r.cpu[1]:.1f} s"
               if r.mode == "non_streaming" else f"sottod {r.cpu[0]:.1f} s")
        L += ["", f"**{what}.** Load average {r.load[0]:.2f} at the start, {r.load[1]:.2f} at the end; "
              f"the rest of the machine used {r.other:.2f} cores on average over the {r.wall / 60:.1f} min. "
              f"CPU time of the servers: {cpu}.", "", "```", r.out.strip("\n"), "```"]
    return "\n".join(L) + "\n"


def paced_report(a, started, servers: Servers, names: list[str]) -> str:
    """--mode paced: the three servers in turn (bench/wyoming_paced.py)."""
    import wyoming_paced
    from wer import load_manifest

    env = " ".join(a.sottod_env)
    ports = {"sottod, answer = live": servers.sottod_port,
             "sottod, answer = whole": servers.whole_port,
             f"wyoming-faster-whisper ({a.fw_compute_type})": servers.fw_port}
    load0, t0 = loadavg(), time.monotonic()
    busy0, cpu0 = machine_busy_s(), servers.cpu()
    whole0 = proc_cpu_s(servers.whole.proc.pid)
    out = wyoming_paced.run(ports, [Path(a.audio) / n for n in names], load_manifest(Path(a.audio)),
                            a.rounds, a.warmup, log)
    wall = time.monotonic() - t0
    cpu1 = servers.cpu()
    mine = cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1] + proc_cpu_s(servers.whole.proc.pid) - whole0
    other = max(0.0, machine_busy_s() - busy0 - mine) / wall
    L = [f"### {started:%Y-%m-%d %H:%M} UTC: Wyoming, audio-stop to transcript, {a.model}", "",
         f"`{a.command}`: {cpu_model()}, {os.cpu_count()} cores; sottod "
         f"{env + ' ' if env else ''}({source_note(Path(a.build_dir))}, `-t {a.threads}`, precision "
         f"{a.precision}, [wyoming] beam_size {a.beam_size}, [engine] beam_size 1); "
         f"wyoming-faster-whisper {version('wyoming-faster-whisper')} compute_type {a.fw_compute_type}, "
         f"`--cpu-threads {a.threads} --beam-size {a.beam_size}`. Load average {load0:.2f} at the "
         f"start, {loadavg():.2f} at the end; the rest of the machine used {other:.2f} cores on "
         f"average over the {wall / 60:.1f} min.", "", "```", out, "```"]
    return "\n".join(L) + "\n"


def insert_docs(section: str) -> None:
    text = DOCS.read_text()
    if RUNS_MARK not in text:
        raise SystemExit(f"bench/wyoming: {DOCS} has no line {RUNS_MARK!r}")
    head, tail = text.split(RUNS_MARK, 1)
    DOCS.write_text(head + RUNS_MARK + "\n\n" + section.strip("\n") + "\n\n" + tail.lstrip("\n"))


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/wyoming", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round, non-streaming, no docs")
    ap.add_argument("--model", default="tiny.en", help="model name for both servers [tiny.en]")
    ap.add_argument("--rounds", type=int, help="timed rounds per file and mode [3]")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs per mode [1]")
    ap.add_argument("--mode", choices=("non_streaming", "streaming", "both", "paced"),
                    help="[both]; paced: audio-stop to transcript, sottod answer = live and whole "
                    "and wyoming-faster-whisper, audio paced as live (bench/wyoming_paced.py)")
    ap.add_argument("--answer", default="live", choices=("live", "whole"),
                    help="sottod's [wyoming] answer (paced: live, and whole beside it) [live]")
    ap.add_argument("--sottod-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of sottod only, e.g. ONEDNN_MAX_CPU_ISA=AVX2 (repeatable)")
    ap.add_argument("--paced", action=argparse.BooleanOptionalAction, default=True,
                    help="streaming mode sends the audio paced as live [yes]")
    ap.add_argument("--max-seconds", type=float, default=30.0, help="files shorter than this [30]")
    ap.add_argument("--threads", type=int, default=2, help="threads of each server [2]")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"), help="sottod [auto]")
    ap.add_argument("--fw-compute-type", default="int8", help="faster-whisper compute_type [int8]")
    ap.add_argument("--beam-size", type=int, default=5,
                    help="beam of both transcripts: sottod [wyoming] beam_size, wyoming-faster-whisper "
                    "--beam-size [5]")
    ap.add_argument("--audio", default=str(AUDIO_DIR))
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"),
                    help="meson build directory, set up as a release build if missing [build-bench]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction,
                    help="insert the report into docs/benchmarks.md [yes, except with --quick]")
    a = ap.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.mode = a.mode or ("non_streaming" if a.quick else "both")
    a.docs = (not a.quick) if a.docs is None else a.docs
    a.command = "bench/wyoming " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    a.build_dir = str(Path(a.build_dir).resolve())
    for pkg in ("wyoming-bench", "wyoming-faster-whisper"):
        version(pkg)

    build = Path(a.build_dir)
    ensure_built(build, ["daemon/sottod"], not a.no_build)
    os.environ["SOTTO_BUILD_DIR"] = a.build_dir
    sys.path.insert(0, str(REPO / "tests" / "daemon"))
    global conftest
    import conftest  # noqa: E402  (tests/daemon's Daemon, on this build)
    env = dict(os.environ, SOTTO_PYTHON=os.environ.get("SOTTO_PYTHON", sys.executable))
    fetch = [str(REPO / "scripts" / "fetch-model"), a.model]
    gguf = Path(subprocess.run(fetch, cwd=REPO, env=env, check=True, capture_output=True,
                               text=True).stdout.split()[-1])
    ct2 = Path(subprocess.run(fetch + ["--source-dir"], cwd=REPO, env=env, check=True,
                              capture_output=True, text=True).stdout.split()[-1])

    started = dt.datetime.now(dt.timezone.utc)
    tmp = Path(tempfile.mkdtemp(prefix="sotto-wyoming-bench."))
    servers = Servers(a, tmp)
    try:
        (tmp / "corpus").mkdir()
        names = corpus(Path(a.audio), tmp / "corpus", a.max_seconds)
        servers.start(gguf, ct2)
        runs = []
        if a.mode in ("non_streaming", "both"):
            runs.append(Run(a, servers, tmp / "corpus", "non_streaming",
                            [servers.sottod_port, servers.fw_port]))
        if a.mode in ("streaming", "both"):
            runs.append(Run(a, servers, tmp / "corpus", "streaming", [servers.sottod_port]))
        if a.mode == "paced":
            section = paced_report(a, started, servers, names)
        else:
            section = report(a, started, names, runs)
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(section)
    if a.docs:
        insert_docs(section)
        log(f"inserted into {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
