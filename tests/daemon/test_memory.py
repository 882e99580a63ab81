"""sottod gives memory back: after bursts of short sessions its idle
resident memory returns to what it was after the first session (issue 13
item 1; the full-size run is `bench/daemon --only bursts`)."""

from __future__ import annotations

from bursts import burst, idle_rss, short_pcm
from conftest import AUDIO_DIR, report

# Two bursts after the first session (three took 49 s on forced AVX2;
# `bench/daemon --only bursts` runs five of 50).
BURSTS = 2
SESSIONS = 16
GROWTH = 1.10


def test_idle_memory_after_bursts(make_daemon, manifest):
    d = make_daemon(conf="max_sessions = 32\n"
                    "max_connections_per_uid = 64\n[engine]\nstep_ms = 4000\n").start()
    pcms = short_pcm(AUDIO_DIR)
    pid = d.proc.pid
    bad, _ = burst(d.socket, pcms, 1)
    assert not bad, bad
    base = idle_rss(pid, timeout=3.0)
    bound = base * GROWTH
    after = []
    for i in range(BURSTS):
        bad, wall = burst(d.socket, pcms, SESSIONS)
        assert not bad, f"burst {i + 1}: {bad[:3]}\n{d.log()}"
        after.append(idle_rss(pid, bound))
        assert d.alive(), d.log()
    report(f"memory: idle VmRSS after 1 session {base:.0f} MB; after "
           f"bursts of {SESSIONS}: "
           + ", ".join(f"{x:.0f}" for x in after) + " MB")
    assert max(after) <= bound, (
        f"idle VmRSS after bursts of {SESSIONS} sessions: {after} MB, more "
        f"than {GROWTH:.2f} x the {base:.0f} MB after the first session")
