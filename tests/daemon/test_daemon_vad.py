"""sottod's voice activity detection ([engine] vad, on for live streams and
the microphone by default):

- live streams of non-speech made with sox (noise, a tone, clicks, chords,
  a tune) give no partial and no final, and the daemon spends no encoder
  pass on them (its CPU time stays a fraction of the audio's);
  (with vad = off, as before, a plucked chord and a tune gave " ." and
  " Do" partials here, and the daemon ran the encoder at every step);
- the microphone with room noise above the energy gate: no events, and
  sottod's CPU is reported;
- half the speech set's short files streamed with vad = all: WER within
  0.5 points (or two words) of the same files' streams without VAD
  (test_daemon.py's run);
- a missing VAD model stops sottod with the command that fetches it; a
  bad vad value is refused by --check-config.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

import nonspeech
from conftest import (AUDIO_DIR, BUILD, MSG_STATUS, REPO, SOTTOD, Listen,
                      RawClient, Stream, frame, report, werlib)
from nonspeech import sox

VAD_POINTS = 0.005
LONG_FORM = "LJ001-0001_to_LJ001-0017_longform.wav"
PAUSED = ("jfk.wav", "mfa_longstop.wav")


@pytest.fixture(scope="module")
def signals(tmp_path_factory) -> dict[str, Path]:
    """Non-speech, 6 s each, 16 kHz mono s16 (tests/e2e/nonspeech.py)."""
    return nonspeech.make(tmp_path_factory.mktemp("nonspeech"))


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def live_streams(d, signals) -> tuple[dict, float]:
    """Every signal as a live (paced) stream at once; events per signal and
    sottod's CPU seconds meanwhile."""
    c0 = cpu_s(d.proc.pid)
    streams = {}
    items = list(signals.items())
    # three at a time: without VAD, sottod keeps up at its 1 s step (more
    # would be caught up in larger steps, which Whisper hears differently)
    for i in range(0, len(items), 3):
        batch = {k: Stream(d.socket, p) for k, p in items[i:i + 3]}
        for s in batch.values():
            s.check()
        streams.update(batch)
    return streams, cpu_s(d.proc.pid) - c0


def said(s) -> tuple[list[str], list[str]]:
    partials = [e["text"] for e in s.events("partial") if e["text"].strip()]
    return partials, [s.text()] if s.text().strip() else []


def test_live_non_speech_gives_nothing(daemon, signals):
    """The session daemon runs the default config: vad = live."""
    streams, cpu = live_streams(daemon, signals)
    for name, s in streams.items():
        partials, finals = said(s)
        assert not partials and not finals, f"{name}: partials {partials}, finals {finals}"
    audio = 6.0 * len(signals)
    report(f"vad = live: {len(signals)} live streams of non-speech ({audio:.0f} s of audio): no partial, "
           f"no final; sottod CPU {cpu:.2f} s ({100 * cpu / audio:.1f}% of the audio's duration)")
    # An encoder pass of tiny.en costs ~0.1 s of CPU; one per step of each
    # stream would be >= 0.1 s per second of audio.
    assert cpu < 0.05 * audio, f"sottod used {cpu:.1f} s of CPU for {audio:.0f} s of non-speech"


def test_vad_wer_unchanged(make_daemon, manifest):
    """Half the set's short files (every other one in manifest order, and
    the two with the longest pauses, where the VAD has windows to skip:
    about 38 s of the 64; the 118 s long-form one would be most of the
    audio) streamed (--fast, 4 at a time) with vad = all: WER within 0.5
    points, or two words where that is less, of the same files' streams
    in test_daemon.py (vad = live: only its two paced streams had the
    VAD). A window with speech is decoded as without the VAD, so the
    files differ only where it skips a window."""
    from test_daemon import WER_RESULT

    short = [f for f in manifest if f != LONG_FORM]
    files = [f for i, f in enumerate(short) if i % 2 == 0 or f in PAUSED]
    w, n = set_wer(make_daemon, "all", files, manifest)
    per_file = WER_RESULT.get("per_file")
    if per_file is None:  # run alone: measure without VAD here
        base, _ = set_wer(make_daemon, "off", files, manifest)
    else:
        base = sum(per_file[f][0] for f in files) / n
    report(f"vad = all: stream WER {w:.2%} over {n} words of {len(files)} "
           f"files; without VAD {base:.2%}")
    assert abs(w - base) <= max(VAD_POINTS, 2 / n), (w, base)


def set_wer(make_daemon, vad: str, files: list[str], manifest) -> tuple[float, int]:
    d = make_daemon(conf=f"[engine]\nvad = {vad}\n").start()
    got = {}
    for i in range(0, len(files), 4):
        batch = {f: Stream(d.socket, "--fast", AUDIO_DIR / f) for f in files[i:i + 4]}
        for s in batch.values():
            s.check()
        got.update(batch)
    assert d.stop() == 0
    e = n = 0
    for f in files:
        de, dn = werlib.counts(manifest[f], got[f].text())
        e, n = e + de, n + dn
    return e / n, n


def test_missing_vad_model_stops_sottod(make_daemon, tmp_path):
    d = make_daemon(conf=f"[engine]\nvad_model = {tmp_path / 'none.gguf'}\n")
    cmd = [str(SOTTOD), "-f", str(d.conf), "-m", str(d.model)]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert cp.returncode != 0
    assert "cannot load the VAD model" in cp.stderr and "'scripts/fetch-model silero-vad'" in cp.stderr
    assert "vad = off" in cp.stderr
    cp = subprocess.run(cmd + ["--check-config"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert cp.returncode != 0 and re.search(rf"{re.escape(str(d.conf))}:\d+: vad_model: cannot load the VAD "
                                            "model", cp.stderr), cp.stderr
    conf = tmp_path / "bad.conf"
    conf.write_text("[engine]\nvad = sometimes\n")
    cp = subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config"], capture_output=True, text=True)
    assert cp.returncode != 0 and 'vad: "sometimes" is not live, all or off' in cp.stderr


def test_vad_off_runs_without_model(make_daemon, tmp_path):
    d = make_daemon(conf=f"[engine]\nvad = off\nvad_model = {tmp_path / 'none.gguf'}\n").start()
    s = Stream(d.socket, "--fast", AUDIO_DIR / "jfk.wav").check()
    assert "your country" in s.text().lower()
    assert d.stop() == 0


def test_idle_mic_with_room_noise(make_daemon, tmp_path):
    """The microphone (sottofake, tests/daemon/pcm-sottofake.c) hears room
    noise above the -50 dBFS energy gate (brown noise, about -40 dBFS RMS)
    with a listener: no event but the stream's own, and sottod's CPU over
    10 s is reported (bench/daemon --only idle measures it for longer)."""
    plugin = (BUILD / "tests" / "daemon" / "libasound_module_pcm_sottofake.so").resolve()
    if not plugin.is_file():
        pytest.fail(f"{plugin} is missing: meson compile -C {BUILD}")
    wav = tmp_path / "room.wav"
    sox("-n", "-r", 16000, "-c", 1, "-b", 16, wav, "synth", 40, "brownnoise", "vol", 0.018)
    raw = tmp_path / "room.raw"
    sox(wav, "-t", "raw", raw)
    rc = tmp_path / "asoundrc"
    rc.write_text(f'pcm_type.sottofake {{\n\tlib "{plugin}"\n}}\n'
                  f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n\torigin "{tmp_path / "origin"}"\n}}\n')
    env = {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"}
    d = make_daemon(env=env, conf="[mic]\nenabled = yes\ndevice = sottomic\nrate = 16000\nchannels = 1\n").start()
    listener = Listen(d.socket)
    st = RawClient(d.socket)
    st.hello()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st.send(frame(MSG_STATUS))
        if st.event()["mic"] == "capturing":
            break
        time.sleep(0.2)
    st.close()
    time.sleep(3)
    c0, t0 = cpu_s(d.proc.pid), time.monotonic()
    time.sleep(10)
    cpu = (cpu_s(d.proc.pid) - c0) / (time.monotonic() - t0)
    assert d.stop() == 0
    assert listener.wait() == 0
    partials = [e["text"] for e in listener.events("partial") if e["text"].strip()]
    assert not partials and not listener.text().strip(), (partials, listener.text())
    report(f"idle microphone, brown noise at -40 dBFS, vad = live: sottod {100 * cpu:.1f}% of one core "
           f"over 10 s; no text")
    assert cpu < 0.25, f"sottod used {100 * cpu:.0f}% of a core on room noise: encoder passes?"
