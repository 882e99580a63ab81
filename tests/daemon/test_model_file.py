"""The model file under a running sottod (issue 13 item 2): truncated or
overwritten while streams run, the daemon and its clients carry on (it
read the file into memory of its own); SIGHUP loads the new file without
dropping anyone: sessions open at the reload finish on the old model, new
ones get the new model, the microphone moves to it with its times and
final ids going on, and a broken file is refused."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (AUDIO_DIR, BUILD, MSG_STATUS, REPO, Daemon, Listen,
                      RawClient, Stream, frame, report, werlib)
from test_mic import PLUGIN, samples

JFK = AUDIO_DIR / "jfk.wav"
SENSE = AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0870.wav"
# 3.3 s: a --fast stream is a 30 s window encoded each second of audio
SHORT = AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0930.wav"


@pytest.fixture(scope="session")
def base_model() -> Path:
    env = dict(os.environ)
    venv = REPO / ".venv" / "bin" / "python"
    if venv.exists():
        env.setdefault("SOTTO_PYTHON", str(venv))
    cp = subprocess.run([str(REPO / "scripts" / "fetch-model"), "base"],
                        cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=1800)
    lines = [ln for ln in cp.stdout.splitlines() if ln.strip()]
    if cp.returncode != 0 or not lines:
        pytest.fail(f"scripts/fetch-model base failed:\n{cp.stderr[-3000:]}")
    return Path(lines[-1].strip())


def wer_of(s: Stream, wav: Path) -> float:
    ref = werlib.load_manifest(AUDIO_DIR)[wav.name]
    return werlib.wer([ref], [s.text()])


def hello_model(sock: str) -> str:
    c = RawClient(sock)
    try:
        return c.hello()["model"]
    finally:
        c.close()


def status(sock: str) -> dict:
    c = RawClient(sock)
    try:
        c.hello()
        c.send(frame(MSG_STATUS))
        return c.event()
    finally:
        c.close()


def wait_log(d: Daemon, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = d.log_path.read_text()
        if text in log:
            return log
        assert d.alive(), d.log()
        time.sleep(0.1)
    pytest.fail(f"{text!r} not in the log within {timeout} s:\n{d.log()}")


def wait_partial(s: Stream, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not s.events("partial"):
        time.sleep(0.05)
    assert s.events("partial"), s.lines


def test_model_file_truncated_and_overwritten(tiny_model, base_model,
                                              tmp_path):
    model = tmp_path / "model.gguf"
    shutil.copyfile(tiny_model, model)
    d = Daemon(tmp_path / "d", model).start()
    try:
        # Streams decoding (live) while the file is truncated, then
        # overwritten in place with another model, as `cp` does.
        s1, s2 = Stream(d.socket, JFK), Stream(d.socket, SENSE)
        wait_partial(s1)
        os.truncate(model, 0)
        time.sleep(1.0)
        shutil.copyfile(base_model, model)
        for s, wav in ((s1, JFK), (s2, SENSE)):
            s.check()
            assert wer_of(s, wav) <= 0.2, s.text()
        assert d.alive(), d.log()
        assert hello_model(d.socket) == "tiny.en"
        s3 = Stream(d.socket, SHORT, "--fast").check()
        assert wer_of(s3, SHORT) <= 0.2, s3.text()

        # SIGHUP: the file is not the one loaded any more: loaded again.
        # (The streams after the first two are a 3.3 s clip: base streams
        # jfk.wav's 11 s slowly on AVX2.)
        d.proc.send_signal(signal.SIGHUP)
        log = wait_log(d, "reload: new sessions use model base")
        assert hello_model(d.socket) == "base"
        s4 = Stream(d.socket, SHORT, "--fast").check()
        assert wer_of(s4, SHORT) <= 0.2, s4.text()

        # A file cut short is refused; the model in use stays.
        os.truncate(model, model.stat().st_size // 2)
        d.proc.send_signal(signal.SIGHUP)
        log = wait_log(d, "reload: cannot load model")
        assert "still base" in log, log
        assert status(d.socket)["model"] == "base"
        s5 = Stream(d.socket, SHORT, "--fast").check()
        assert wer_of(s5, SHORT) <= 0.2, s5.text()
    finally:
        rc = d.stop()
    assert rc == 0, d.log()
    report("model file truncated, then base copied over it, under 2 live "
           "streams: both finished (WER <= 0.2), sottod alive; SIGHUP "
           "loaded base; a file cut in half was refused")


def mic_timeline(seconds: int) -> bytes:
    """jfk.wav at 0 and the sense clip at 13 s, silence after."""
    out = bytearray(seconds * 16000 * 2)
    for at, wav in ((0, JFK), (13, SENSE)):
        pcm = samples(wav.name)
        out[at * 32000:at * 32000 + len(pcm)] = pcm
    return bytes(out)


def test_sighup_new_model_keeps_clients(tiny_model, base_model, tmp_path):
    if not PLUGIN.is_file():
        pytest.fail(f"{PLUGIN} is missing: meson compile -C {BUILD}")
    model = tmp_path / "model.gguf"
    shutil.copyfile(tiny_model, model)
    raw = tmp_path / "speech.raw"
    raw.write_bytes(mic_timeline(24))
    rc = tmp_path / "asoundrc"
    rc.write_text(
        f'pcm_type.sottofake {{\n\tlib "{PLUGIN}"\n}}\n'
        f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n'
        f'\torigin "{tmp_path / "origin"}"\n}}\n')
    env = {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"}
    d = Daemon(tmp_path / "d", model, env=env,
               conf="[mic]\nenabled = yes\ndevice = sottomic\n"
               "rate = 16000\nchannels = 1\n").start()
    try:
        listener = Listen(d.socket)
        a = Stream(d.socket, JFK)
        wait_partial(a)
        # A new model renamed into place (as fetch-model and the
        # converter write it), then SIGHUP, while both run.
        tmp = tmp_path / "model.gguf.new"
        shutil.copyfile(base_model, tmp)
        os.replace(tmp, model)
        t_reload = time.monotonic()
        d.proc.send_signal(signal.SIGHUP)
        wait_log(d, "reload: new sessions use model base")
        b = Stream(d.socket, SHORT, "--fast").check()
        a.check()
        # a finished on the model it started with, and was not dropped
        assert [e["model"] for e in a.events("hello")] == ["tiny.en"]
        assert [e["model"] for e in b.events("hello")] == ["base"]
        assert wer_of(a, JFK) <= 0.2 and wer_of(b, SHORT) <= 0.2, \
            (a.text(), b.text())
        # the old model was kept until the last stream on it was done
        sid = a.events("opened")[0]["session"]
        log = wait_log(d, "model tiny.en freed")
        assert log.index(f"session {sid}: ended") < \
            log.index("model tiny.en freed"), log
        # the microphone moved to base; its finals go on after the reload
        wait_log(d, "moved to model base")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and \
                "dashwood" not in listener.text().lower():
            time.sleep(0.2)
        assert status(d.socket)["model"] == "base"
    finally:
        rc_d = d.stop()
    assert rc_d == 0, d.log()
    assert listener.wait() == 0, listener.stderr
    types = [e["type"] for _, e in listener.lines]
    assert "error" not in types, listener.lines
    finals = listener.events("final")
    ids = [e["id"] for e in finals]
    assert ids == list(range(len(ids))), ids
    text = listener.text().lower()
    assert "fellow americans" in text and "dashwood" in text, text
    # times go on across the move: the clip played from 13 s on is there
    segs = [g for e in finals for g in e["segments"]]
    dash = next(g for g in segs if "dashwood" in g["text"].lower())
    assert dash["start"] >= 12.0, segs
    after = [t for t, e in listener.lines if e["type"] == "final"
             and t > t_reload]
    assert after, "no microphone final after the reload"
    report(f"SIGHUP to base with a live stream and the microphone: the "
           f"stream finished on tiny.en, a new one got base, the "
           f"microphone moved ({len(finals)} finals, times increasing)")
