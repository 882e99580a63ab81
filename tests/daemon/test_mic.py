"""The microphone through a device that fails: sottofake
(tests/daemon/pcm-sottofake.c, built by meson), an ALSA plugin that plays
real speech as a live capture device, overruns at a set time and is
unplugged for a while. sottod must log the overrun and the loss, keep its
listeners, and keep sending finals after each.
"""

from __future__ import annotations

import time
import wave

import pytest

from conftest import (AUDIO_DIR, BUILD, MSG_STATUS, Listen, RawClient, frame,
                      report)

PLUGIN = (BUILD / "tests" / "daemon" /
          "libasound_module_pcm_sottofake.so").resolve()
RATE = 16000

# Device time (ms) of the schedule: speech A (jfk.wav's first 4 s: "And
# so, my fellow Americans"), the overrun in the pause after it, speech B,
# the unplug after B, then speech C once sottod has had time to open the
# device again (it retries every 2 s).
A_MS = 4000
XRUN_MS = 5000
B_MS = 6000
UNPLUG_MS = 14500
AWAY_MS = 3000
C_MS = 22000
END_MS = 35000


def samples(name: str) -> bytes:
    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (RATE, 1, 2), f"{name}: not 16 kHz mono s16"
        return w.readframes(w.getnframes())


def timeline() -> bytes:
    """A: jfk.wav's first A_MS at 0, B at B_MS, C at C_MS, silence between
    and after."""
    out = bytearray(END_MS * RATE // 1000 * 2)
    for ms, name in ((0, "jfk.wav"),
                     (B_MS, "sense_and_sensibility_01_austen_64kb-0870.wav"),
                     (C_MS, "sense_and_sensibility_01_austen_64kb-0920.wav")):
        pcm = samples(name)
        if ms == 0:
            pcm = pcm[:A_MS * RATE // 1000 * 2]
        at = ms * RATE // 1000 * 2
        out[at:at + len(pcm)] = pcm
    return bytes(out)


def test_mic_survives_xrun_and_unplug(make_daemon, tmp_path):
    if not PLUGIN.is_file():
        pytest.fail(f"{PLUGIN} is missing: meson compile -C {BUILD}")
    raw = tmp_path / "speech.raw"
    raw.write_bytes(timeline())
    rc = tmp_path / "asoundrc"
    rc.write_text(
        f'pcm_type.sottofake {{\n\tlib "{PLUGIN}"\n}}\n'
        f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n'
        f'\torigin "{tmp_path / "origin"}"\n\txrun_ms "{XRUN_MS}"\n'
        f'\tunplug_ms {UNPLUG_MS}\n\taway_ms {AWAY_MS}\n}}\n')
    env = {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"}
    d = make_daemon(env=env, conf="[mic]\nenabled = yes\ndevice = sottomic\n"
                    "rate = 16000\nchannels = 1\n").start()
    listener = Listen(d.socket)

    # Watch the microphone's state until speech C is in the finals.
    seen = set()
    st = RawClient(d.socket)
    st.hello()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st.send(frame(MSG_STATUS))
        seen.add(st.event()["mic"])
        if "respectable" in listener.text().lower():
            break
        time.sleep(0.2)
    st.close()
    time.sleep(1)
    assert d.stop() == 0, d.log()
    assert listener.wait() == 0, listener.stderr
    log = d.log_path.read_text()

    types = [e["type"] for _, e in listener.lines]
    assert types[:2] == ["hello", "subscribed"] and types[-1] == "end", types
    assert "error" not in types, listener.lines
    finals = listener.events("final")
    ids = [e["id"] for e in finals]
    assert ids == list(range(len(ids))), ids
    text = listener.text().lower()
    # The overrun: logged, recovered, and speech B (played only after
    # it) was transcribed.
    assert "mic: overrun (xrun) on sottomic" in log, log
    assert "dashwood" in text, text
    # The unplug: logged, the device opened again, and speech C (played
    # only after it came back) was transcribed.
    assert 'ALSA device "sottomic" disconnected; reopening' in log, log
    assert "mic: capturing from sottomic (16000 Hz, 1 channels) again" \
        in log, log
    assert "down" in seen and "capturing" in seen, seen
    assert "respectable" in text, text
    assert "fellow americans" in text, text
    report(f"mic via sottofake: xrun at {XRUN_MS / 1000:.0f} s and unplug "
           f"for {AWAY_MS / 1000:.0f} s recovered; {len(finals)} finals: "
           f"{listener.text().strip()[:70]!r}...")
