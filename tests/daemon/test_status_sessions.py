"""`sotto status` lists the daemon's sessions: the microphone's (a fake
ALSA device, tests/daemon/pcm-sottofake.c, playing jfk.wav), a socket
stream still streaming and one whose client went away (waiting for a
resume), each with its id, source, state, audio seconds, lag and
real-time factor (none before a session's first step); `sessions`
counts the microphone's too. Human output and --json. tiny.en, 3 s of audio per stream: a few seconds in all.
"""

from __future__ import annotations

import json
import subprocess
import time
import wave

import pytest

from conftest import (AUDIO_DIR, BUILD, MSG_AUDIO, MSG_OPEN, SOTTO, RawClient,
                      frame, jframe)

PLUGIN = (BUILD / "tests" / "daemon" /
          "libasound_module_pcm_sottofake.so").resolve()


def jfk() -> bytes:
    with wave.open(str(AUDIO_DIR / "jfk.wav")) as w:
        return w.readframes(w.getnframes())


def status(sock: str, *args) -> subprocess.CompletedProcess:
    cp = subprocess.run([str(SOTTO), "status", "-s", sock, *args],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    return cp


def stream(sock: str, pcm: bytes) -> tuple[RawClient, str]:
    c = RawClient(sock)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000}))
    opened = c.event()
    assert opened["type"] == "opened", opened
    for i in range(0, len(pcm), 3200):
        c.send(frame(MSG_AUDIO, pcm[i:i + 3200]))
    return c, opened["session"]


def test_status_lists_sessions(make_daemon, tmp_path):
    if not PLUGIN.is_file():
        pytest.fail(f"{PLUGIN} is missing: meson compile -C {BUILD}")
    pcm = jfk()
    raw = tmp_path / "mic.raw"
    raw.write_bytes(pcm)
    rc = tmp_path / "asoundrc"
    rc.write_text(f'pcm_type.sottofake {{\n\tlib "{PLUGIN}"\n}}\n'
                  f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n'
                  f'\torigin "{tmp_path / "origin"}"\n}}\n')
    d = make_daemon(env={"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"},
                    conf="[mic]\nenabled = yes\ndevice = sottomic\n"
                    "rate = 16000\nchannels = 1\n").start()
    three_s = pcm[:3 * 16000 * 2]
    live, live_id = stream(d.socket, three_s)
    gone, gone_id = stream(d.socket, three_s)
    gone.close()

    # Until the live stream's 3 s are decoded (a step's result came).
    deadline = time.monotonic() + 60
    while True:
        st = json.loads(status(d.socket, "--json").stdout)
        rows = {r["id"]: r for r in st["session_list"]}
        row = rows.get(live_id)
        if row and row["audio_s"] == 3.0 and (row["rtf"] or 0) > 0 and \
                rows.get(gone_id, {}).get("state") == "waiting":
            break
        assert time.monotonic() < deadline, (st, d.log())
        time.sleep(0.2)

    assert st["sessions"] == 3, st          # two streams and the microphone
    assert st["mic"] == "capturing", st
    assert row["source"] == "socket" and row["state"] == "streaming", row
    assert 0 <= row["lag_s"] <= 3.0, row
    assert 0 < row["rtf"] < 10, row
    assert rows[gone_id]["source"] == "socket", rows
    mic = [r for r in st["session_list"] if r["source"] == "mic"]
    assert len(mic) == 1 and mic[0]["state"] == "live", st
    assert len(st["session_list"]) == 3, st

    text = status(d.socket).stdout
    lines = text.splitlines()
    assert any(ln.startswith("sessions") and ln.split()[1] == "3"
               for ln in lines), text
    head = lines.index(next(ln for ln in lines if ln.startswith("SESSION")))
    table = {ln.split()[0]: ln.split() for ln in lines[head + 1:] if ln.strip()}
    assert table[live_id][1:3] == ["socket", "streaming"], text
    assert table[live_id][3] == "3.000", text
    assert table[gone_id][1:3] == ["socket", "waiting"], text
    assert table[mic[0]["id"]][1:3] == ["mic", "live"], text
    live.close()
    assert d.stop() == 0, d.log()


def test_status_rtf_unknown_before_first_step(make_daemon):
    """A session that has decoded nothing has no real-time factor yet:
    null in --json and "-" in the table, not 0 (which would read as
    infinitely fast)."""
    d = make_daemon().start()
    idle, idle_id = stream(d.socket, b"")
    st = json.loads(status(d.socket, "--json").stdout)
    row = {r["id"]: r for r in st["session_list"]}[idle_id]
    assert row["audio_s"] == 0 and row["rtf"] is None, row
    text = status(d.socket).stdout
    cells = next(ln.split() for ln in text.splitlines()
                 if ln.startswith(idle_id))
    assert cells[1:3] == ["socket", "streaming"] and cells[-1] == "-", text
    idle.close()
    assert d.stop() == 0, d.log()
