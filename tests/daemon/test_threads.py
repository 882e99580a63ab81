"""sottod -t N: the engine computes on N threads, whichever thread calls it.

OpenMP keeps the team size per thread. sottod loads its model in one
thread and steps streams in another, so the size set at load never
reached the compute thread: until 2026-11-28 `-t 1` (or `threads = 1`)
still stepped every stream on all the cores, with a team thread per core.
"""

from __future__ import annotations

import os
import re
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
    # the control: the same count sees the team threads of -t 2 (one for
    # each compute thread that stepped the lone stream with both cores)
    d = make_daemon(argv=["-t", "2"]).start()
    new, _, _ = stream_load(d)
    assert 1 <= new <= 2, f"-t 2 started {new} threads"
    assert d.stop() == 0


# --- compute threads ([engine] workers) --------------------------------------

PAIR = ["sense_and_sensibility_01_austen_64kb-0870.wav",
        "sense_and_sensibility_01_austen_64kb-0890.wav"]


BATCH = re.compile(r"(compute \d+): batch of \d+ at ([\d.]+) in ([\d.]+) s")


def batches(log: str) -> dict[str, list[tuple[float, float]]]:
    """Each compute thread's batches, as (start, end) in seconds, from
    sottod's debug log."""
    out: dict[str, list[tuple[float, float]]] = {}
    for name, t0, dt in BATCH.findall(log):
        out.setdefault(name, []).append((float(t0), float(t0) + float(dt)))
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Seconds during which a batch of a and one of b both ran."""
    return sum(max(0.0, min(x1, y1) - max(x0, y0))
               for x0, x1 in a for y0, y1 in b)


def two_streams(d) -> list[str]:
    """The finals of PAIR sent at once as fast as sottod takes them."""
    streams = [Stream(d.socket, "--fast", AUDIO_DIR / f) for f in PAIR]
    return [s.check().text() for s in streams]


def test_streams_step_at_once(make_daemon):
    debug = "log_level = debug\n"
    one = make_daemon(conf=debug + "[engine]\nworkers = 1\n").start()
    alone = two_streams(one)
    assert one.stop() == 0
    assert set(batches(one.log())) == {"compute 1"}, one.log()
    two = make_daemon(conf=debug).start()     # -t 2: two compute threads
    both = two_streams(two)
    assert two.stop() == 0
    log = two.log_path.read_text()
    assert "2 compute threads sharing 2 engine threads" in log
    b = batches(log)
    assert set(b) == {"compute 1", "compute 2"}, b
    # the two streams were stepped at the same time, for most of a step
    # or more (a step of one of them alone takes 0.4-0.9 s here)
    assert overlap(b["compute 1"], b["compute 2"]) > 0.3, b
    # a stream's words do not depend on the thread that stepped it, nor
    # on how many engine threads it had (2 alone, 1 each here)
    assert both == alone
    assert all(t.strip() for t in both), both
