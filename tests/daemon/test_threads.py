"""sottod -t N: the engine computes on N threads, whichever thread calls it.

OpenMP keeps the team size per thread. sottod loads its model in one
thread and steps streams in another, so the size set at load never
reached the compute thread: until 2026-11-28 `-t 1` (or `threads = 1`)
still stepped every stream on all the cores, with a team thread per core.
"""

from __future__ import annotations

import os
import time

from conftest import AUDIO_DIR, Stream

FILE = "sense_and_sensibility_01_austen_64kb-0870.wav"


def tasks(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15 of proc(5), 12 and 13 after comm
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_load(d) -> tuple[int, float, float]:
    """sottod's new threads, CPU seconds and wall seconds over a stream of
    FILE sent as fast as it decodes."""
    pid = d.proc.pid
    n0, c0, t0 = tasks(pid), cpu_s(pid), time.monotonic()
    s = Stream(d.socket, "--fast", AUDIO_DIR / FILE).check()
    assert s.text().strip(), s.lines[-3:]
    return tasks(pid) - n0, cpu_s(pid) - c0, time.monotonic() - t0


def test_one_thread_computes_alone(make_daemon):
    d = make_daemon(argv=["-t", "1"]).start()
    new, cpu, wall = stream_load(d)
    assert new == 0, f"-t 1 started {new} more threads"
    # one core busy, the event loop's share beside it
    assert cpu <= 1.2 * wall, f"-t 1 used {cpu:.2f} s of CPU in {wall:.2f} s"
    assert d.stop() == 0


def test_two_threads_make_a_team(make_daemon):
    # the control: the same count sees the team thread of -t 2
    d = make_daemon(argv=["-t", "2"]).start()
    new, _, _ = stream_load(d)
    assert new == 1, f"-t 2 started {new} threads, not its one team thread"
    assert d.stop() == 0
