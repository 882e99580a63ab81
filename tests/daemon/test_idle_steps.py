"""An idle sottod previews its only live session between steps
([engine] idle_step_ms, sotto_stream_preview) where the engine has the
time (a step in half of idle_step_ms or less): partials come sooner, the
finals are those of whole steps, and with a second session it steps at
step_ms alone again. Steps of 4 s and previews 2 s after them, so a
tiny.en step (0.13-0.8 s in sottod on two cores, AVX-512 or AVX2) has
the time on either kind of machine. Steps are counted by sottod's own /metrics
(sottod_step_seconds_count: steps and previews alike), the stream is
`sotto stream` paced as live.
"""

from __future__ import annotations

import re
import urllib.request

from conftest import AUDIO_DIR, Stream, report, werlib

JFK = AUDIO_DIR / "jfk.wav"     # 11 s


def steps(port: int) -> int:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                  timeout=10).read().decode()
    m = re.search(r"^sottod_step_seconds_count (\d+)$", body, re.M)
    assert m, body
    return int(m.group(1))


def streamed(d, port: int, n: int = 1) -> tuple[int, list[Stream]]:
    before = steps(port)
    runs = [Stream(d.socket, JFK) for _ in range(n)]
    for s in runs:
        s.check()
    return steps(port) - before, runs


def partial_gaps(s: Stream) -> float:
    """Median seconds between two partials of a stream while it speaks."""
    t = sorted(t for t, e in s.lines if e.get("type") == "partial")
    gaps = sorted(b - a for a, b in zip(t, t[1:]))
    return gaps[len(gaps) // 2]


def test_idle_previews_keep_finals(make_daemon):
    http = ["--http", "127.0.0.1:0"]
    on = make_daemon(conf="[engine]\nstep_ms = 4000\nidle_step_ms = 2000\n",
                     argv=http).start()
    off = make_daemon(conf="[engine]\nstep_ms = 4000\nidle_step_ms = 0\n",
                      argv=http).start()
    on_port, off_port = on.listen_port(), off.listen_port()

    n_off, (s_off,) = streamed(off, off_port)
    n_on, (s_on,) = streamed(on, on_port)
    report(f"idle previews (jfk.wav, 11 s live, 4 s steps): {n_on} steps "
           f"and previews with idle_step_ms 2000, {n_off} steps with 0; "
           f"partials every "
           f"{partial_gaps(s_on):.2f} s against {partial_gaps(s_off):.2f} s "
           f"(medians)")
    # The previews commit nothing: the finals are those of 1 s steps. The
    # last may be cut another way (a preview running as the speech ended
    # delays the end-of-speech step, and the finish decodes instead), so
    # the words are compared, not the punctuation.
    assert werlib.normalise(s_on.text()) == werlib.normalise(s_off.text())
    assert s_off.text().strip(), "no words"
    assert n_off <= 6, n_off
    # no preview before the first step (its time is not known yet), then
    # one 2 s after each step: two more than the three steps
    assert n_on > n_off, (n_on, n_off)
    assert partial_gaps(s_on) < 0.75 * partial_gaps(s_off)

    # two sessions: no previews, each stepped at step_ms as before
    n_two, _ = streamed(on, on_port, n=2)
    report(f"two sessions at once: {n_two} steps (one alone: {n_off})")
    assert n_two <= 2 * n_off + 3, (n_two, n_off)
