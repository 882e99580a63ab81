#!/usr/bin/env python3
"""What --word-timestamps costs `sotto transcribe`: the same file with and
without it, runs alternating, medians of wall time and of CPU time
(user + system of the process; steadier than wall time on a shared
machine), and the percentage added. faster-whisper's own cost of
word_timestamps=True on the same weights is measured the same way for
comparison (one process per run).

    bench/words.py [--runs N] [--model tiny.en] [--precision auto] [FILE ...]

Default files: the long-form file (118 s, 4 windows) and jfk.wav from
../shared/audio, and the 13 short files of the set in one invocation.
Prints a markdown section for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(HERE))

import machine  # noqa: E402

AUDIO = AUDIO_DIR
SOTTO = REPO / "build" / "client" / "sotto"

FW_WORKER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import refs
from pathlib import Path
m = refs._model("tiny.en")
files = [Path(f) for f in sys.argv[4:]]
o = refs.options(int(sys.argv[3])); o["word_timestamps"] = sys.argv[2] == "1"
t = time.process_time()
for f in files:
    segs, _ = m.transcribe(refs.read_wav(f), **o)
    list(segs)
print(time.process_time() - t)
"""


def run_sotto(files, words: bool, a) -> tuple[float, float]:
    cmd = [str(SOTTO), "transcribe", "-q", "-m", a.model, "--precision",
           a.precision, "-t", str(a.threads), "-f", "json"]
    if words:
        cmd.append("--word-timestamps")
    for attempt in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        cp = subprocess.run(cmd + [str(f) for f in files],
                            stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        wall = time.monotonic() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cp.returncode == 0:
            break
        # on a shared machine a run may be killed from outside: once more
        print(f"sotto exited {cp.returncode}; again", file=sys.stderr)
    else:
        raise SystemExit(f"{cmd} failed 3 times")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_fw(files, words: bool, a) -> float:
    """faster-whisper's CPU time for the files (model load excluded)."""
    py = os.environ.get("SOTTO_PYTHON") or str(REPO / ".venv" / "bin" / "python")
    cp = subprocess.run([py, "-c", FW_WORKER, str(REPO / "tests" / "e2e"),
                         "1" if words else "0", "5", *map(str, files)],
                        check=True, capture_output=True, text=True,
                        stdin=subprocess.DEVNULL)
    return float(cp.stdout.strip().splitlines()[-1])


def pct(a: float, b: float) -> str:
    return f"{100.0 * (b - a) / a:+.1f}%"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", default="tiny.en")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-fw", action="store_true", help="skip faster-whisper")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args(argv)
    if a.files:
        sets = [(f.name, [f]) for f in a.files]
    else:
        short = sorted(p for p in AUDIO.glob("*.wav")
                       if "longform" not in p.name and p.name != "jfk.wav")
        sets = [("LJ001 long-form (118 s)", [AUDIO / "LJ001-0001_to_LJ001-0017_longform.wav"]),
                ("jfk.wav (11 s)", [AUDIO / "jfk.wav"]),
                (f"{len(short)} short files, one run", short)]
    print(f"### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"--word-timestamps, {a.model}, precision {a.precision}, "
          f"{a.threads} threads, {a.runs} runs\n")
    print(f"- CPU: {machine.cpu_model()}; load average at the start "
          f"{machine.loadavg():.1f}")
    print(f"- command: `bench/words.py --runs {a.runs} --model {a.model} "
          f"--precision {a.precision}`\n")
    print("| audio | wall without | wall with | added | CPU without | CPU with "
          "| added | faster-whisper CPU added |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    loads = []
    for name, files in sets:
        res = {False: [], True: []}
        fw = {False: [], True: []}
        for i in range(a.runs):
            for words in ((False, True) if i % 2 == 0 else (True, False)):
                res[words].append(run_sotto(files, words, a))
                loads.append(machine.loadavg())
        if not a.no_fw:
            for i in range(max(1, a.runs // 2)):
                for words in (False, True):
                    fw[words].append(run_fw(files, words, a))
        w0 = statistics.median(r[0] for r in res[False])
        w1 = statistics.median(r[0] for r in res[True])
        c0 = statistics.median(r[1] for r in res[False])
        c1 = statistics.median(r[1] for r in res[True])
        f = (pct(statistics.median(fw[False]), statistics.median(fw[True]))
             if fw[False] else "-")
        print(f"| {name} | {w0:.2f} s | {w1:.2f} s | {pct(w0, w1)} | "
              f"{c0:.2f} s | {c1:.2f} s | {pct(c0, c1)} | {f} |", flush=True)
    print(f"\nLoad average during the runs: median {statistics.median(loads):.1f}, "
          f"max {max(loads):.1f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
