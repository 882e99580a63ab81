"""Socket activation of the TCP front doors (daemon/base/systemd.c): sottod
takes the Unix socket and TCP sockets named http and wyoming from systemd
(FileDescriptorName=, as systemd/sottod-http.socket and
sottod-wyoming.socket set them) and serves each, here under
systemd-socket-activate, which passes sockets and names as the manager
does. Driven by the openai SDK and the wyoming package's client."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import socket
import subprocess
import time
import wave
from pathlib import Path

import openai
import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from conftest import AUDIO_DIR, SOTTOD, free_ports, report

JFK = AUDIO_DIR / "jfk.wav"


def _activate(tmp_path: Path, model: Path, listen: list[str],
              names: str | None, conf: str = ""):
    tool = shutil.which("systemd-socket-activate")
    assert tool, "systemd-socket-activate (package systemd) is missing"
    cfg = tmp_path / "c.conf"
    cfg.write_text("[server]\nsocket = /nonexistent/not-used.sock\n" + conf)
    log = open(tmp_path / "log", "w")
    argv = [tool]
    for a in listen:
        argv += ["-l", a]
    if names:
        argv.append(f"--fdname={names}")
    argv += [str(SOTTOD), "-f", str(cfg), "-m", str(model), "-t", "2", "-d"]
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


async def _wyoming(port: int) -> tuple[Info, str]:
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Describe().event())
        info = Info.from_event(await c.read_event())
        with wave.open(str(JFK), "rb") as w:
            rate, width, ch = (w.getframerate(), w.getsampwidth(),
                               w.getnchannels())
            pcm = w.readframes(w.getnframes())
        await c.write_event(Transcribe(language="en").event())
        await c.write_event(AudioStart(rate=rate, width=width,
                                       channels=ch).event())
        for i in range(0, len(pcm), 32000):
            await c.write_event(AudioChunk(rate=rate, width=width, channels=ch,
                                           audio=pcm[i:i + 32000]).event())
        await c.write_event(AudioStop().event())
        while True:
            e = await asyncio.wait_for(c.read_event(), 120)
            assert e is not None
            if Transcript.is_type(e.type):
                return info, Transcript.from_event(e).text


def test_http_and_wyoming_activated(tiny_model, tmp_path):
    sock = str(tmp_path / "act.sock")
    hp, wp = free_ports(2)
    # [http] listen is replaced by the socket from systemd
    p = _activate(tmp_path, tiny_model,
                  [sock, f"127.0.0.1:{hp}", f"127.0.0.1:{wp}"],
                  "sottod.socket:http:wyoming",
                  "[http]\nlisten = 127.0.0.1:1\n")
    try:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{hp}/v1",
                          api_key="unused", max_retries=0, timeout=120)
        # the first connection starts sottod (systemd-socket-activate)
        with open(JFK, "rb") as f:
            r = c.audio.transcriptions.create(file=f, model="whisper-1")
        assert "country" in r.text.lower(), r.text
        info, text = asyncio.run(_wyoming(wp))
        assert info.asr and info.asr[0].models, info
        assert "country" in text.lower(), text
        log = (tmp_path / "log").read_text()
        assert "http: the socket from systemd replaces listen = " \
            "127.0.0.1:1" in log, log
        assert f"http: listening on 127.0.0.1:{hp}" in log, log
        assert f"wyoming: listening on 127.0.0.1:{wp}" in log, log
        assert "socket activation" in log, log
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, (tmp_path / "log").read_text()
    report(f"socket activation: HTTP (openai SDK) and Wyoming on sockets "
           f"from systemd-socket-activate: {r.text!r}")


@pytest.mark.parametrize("names,want", [
    (None, "name it FileDescriptorName=http or FileDescriptorName=wyoming"),
    ("http:http", "are both the http socket"),
])
def test_wrong_tcp_sockets(tiny_model, tmp_path, names, want):
    """A TCP socket without our name, or two named http: sottod says
    which and exits non-zero."""
    p = _activate(tmp_path, tiny_model, [f"127.0.0.1:{port}"
                                         for port in free_ports(2)], names)
    port = None
    try:
        log = tmp_path / "log"
        deadline = time.monotonic() + 10
        while "Listening on" not in log.read_text() and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        port = int(re.search(r"127\.0\.0\.1:(\d+)", log.read_text())[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass                # starts sottod
        rc = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc != 0
    assert want in log.read_text(), log.read_text()
