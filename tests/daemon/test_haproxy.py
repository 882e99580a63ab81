"""Two sottods behind HAProxy (Debian's package) with the shipped
conf/haproxy.cfg (its addresses replaced by free ports): leastconn,
health-checked on GET /health (HTTP) and by TCP (Wyoming).

20 transcriptions go through HAProxy from the official openai SDK, four
at a time; both instances serve some (each one's /metrics and log); one
gets SIGTERM while it has requests in flight: those finish (graceful
stop), it exits 0, and no request fails: the ones HAProxy sends it before
the health check marks it down are refused at connect and sent to the
other (retries, option redispatch). A Wyoming describe goes through
HAProxy's TCP frontend too."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from conftest import AUDIO_DIR, REPO, Daemon, free_ports, report

CFG = REPO / "conf" / "haproxy.cfg"
FILE = AUDIO_DIR / "jfk.wav"
N = 20


def _port(d: Daemon, what: str) -> int:
    deadline = time.monotonic() + 60
    while True:
        m = re.search(rf"{what}: listening on [^ ]*:(\d+)", d.log())
        if m:
            return int(m.group(1))
        assert time.monotonic() < deadline, d.log()
        time.sleep(0.1)


def _metric(port: int, name: str) -> float:
    body = subprocess.run(["curl", "-sS", f"http://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    m = re.search(rf"^{name} (\S+)$", body, re.M)
    assert m, body
    return float(m.group(1))


async def _describe(port: int) -> Info:
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Describe().event())
        return Info.from_event(await asyncio.wait_for(c.read_event(), 30))


@pytest.fixture
def haproxy():
    exe = shutil.which("haproxy")
    if exe is None:
        pytest.fail("haproxy is not installed (scripts/setup installs it)")
    procs = []

    def start(cfg) -> subprocess.Popen:
        cp = subprocess.run([exe, "-c", "-f", str(cfg)], capture_output=True,
                            text=True, timeout=30)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        p = subprocess.Popen([exe, "-f", str(cfg), "-db"],
                             stdout=subprocess.DEVNULL,
                             stderr=open(cfg.with_suffix(".log"), "w"))
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.terminate()
        p.wait(30)


def test_two_sottods_behind_haproxy(tiny_model, tmp_path, haproxy):
    ds = [Daemon(tmp_path / f"sottod{i}", tiny_model,
                 argv=["--http", "127.0.0.1:0", "--wyoming", "127.0.0.1:0"])
          for i in (1, 2)]
    try:
        for d in ds:
            d.start()
        http = [_port(d, "http") for d in ds]
        wy = [_port(d, "wyoming") for d in ds]
        front, front_wy = free_ports(2)
        cfg = CFG.read_text()
        for old, new in (("127.0.0.1:8000", front), ("127.0.0.1:8001", http[0]),
                         ("127.0.0.1:8002", http[1]),
                         ("127.0.0.1:10300", front_wy),
                         ("127.0.0.1:10301", wy[0]),
                         ("127.0.0.1:10302", wy[1])):
            assert old in cfg, old
            cfg = cfg.replace(old, f"127.0.0.1:{new}")
        (tmp_path / "haproxy.cfg").write_text(cfg)
        hp = haproxy(tmp_path / "haproxy.cfg")
        _wait_up(front, hp, tmp_path)
        _run(ds, http, front, tmp_path)
        info = asyncio.run(_describe(front_wy))
        assert info.asr and info.asr[0].name == "sotto", info
    finally:
        for d in ds:
            if d.alive():
                d.stop(signal.SIGKILL)


def _wait_up(front: int, hp: subprocess.Popen, tmp_path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert hp.poll() is None, (tmp_path / "haproxy.log").read_text()
        cp = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w",
                             "%{http_code}", f"http://127.0.0.1:{front}/health"],
                            capture_output=True, text=True, timeout=30)
        if cp.stdout == "200":
            return
        assert time.monotonic() < deadline, cp.stdout
        time.sleep(0.2)


def _run(ds, http, front, tmp_path) -> None:
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{front}/v1",
                      api_key="unused", max_retries=0, timeout=300)
    done = []
    lock = threading.Lock()

    def one(i: int):
        t0 = time.monotonic()
        try:
            with open(FILE, "rb") as f:
                r = c.audio.transcriptions.create(file=f, model="whisper-1")
            out = (i, r.text, None, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - reported below
            # the SDK's "Connection error." says nothing: keep httpx's why
            out = (i, None, f"{e!r} <- {e.__cause__!r}", time.monotonic() - t0)
        with lock:
            done.append(out)
        return out

    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(one, i) for i in range(N)]
        # stop the first instance mid-run, with requests in flight on it
        deadline = time.monotonic() + 120
        while not (len(done) >= 6 and _metric(
                http[0], "sottod_http_requests_in_progress") >= 1):
            assert time.monotonic() < deadline, (done, ds[0].log())
            time.sleep(0.02)
        served_before = [_metric(p, "sottod_files_total") for p in http]
        in_flight = _metric(http[0], "sottod_http_requests_in_progress")
        n_done = len(done)
        ds[0].proc.send_signal(signal.SIGTERM)
        t_stop = time.monotonic()
        results = [f.result() for f in futs]
    rc = ds[0].proc.wait(60)
    assert rc == 0, ds[0].log()
    failed = [r for r in results if r[2] is not None]
    assert not failed, f"{len(failed)} of {N} failed: {failed[:3]}\n" \
        f"{(tmp_path / 'haproxy.log').read_text()[-3000:]}"
    for _, text, _, _ in results:
        assert text.startswith("And so, my fellow Americans"), text
    assert all(n >= 1 for n in served_before), served_before
    # every request transcribed once: what the stopped one did (its log)
    # and what the other did (its counter) add up
    first = len(re.findall(r"http: transcription of", ds[0].log()))
    second = _metric(http[1], "sottod_files_total")
    assert first + second == N, (first, second)
    # the requests in flight at SIGTERM were finished, then it stopped
    assert first >= served_before[0] + in_flight, (first, served_before,
                                                   in_flight)
    assert second > served_before[1], "the other got nothing after the stop"
    report(f"haproxy: {N} transcriptions through HAProxy (leastconn, 4 at "
           f"a time) in {time.monotonic() - t0:.1f} s, none failed; "
           f"SIGTERM to one after {n_done} with {in_flight:.0f} in flight "
           f"on it: it finished them and exited 0; the run ended "
           f"{time.monotonic() - t_stop:.1f} s after the SIGTERM; served "
           f"{first} + {second:.0f}")
