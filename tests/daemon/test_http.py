"""sottod's HTTP front door (daemon/http.c, docs/http.md), driven by curl
and by the official openai Python SDK against a real sottod with the real
tiny.en model.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest


def http_port(d) -> int:
    m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
    assert m, f"no http listening line in the log:\n{d.log()}"
    return int(m.group(1))


def curl(url: str, *args: str, timeout: float = 60) -> tuple[int, dict, bytes]:
    """(status, headers with lower-case names, body) of one curl run."""
    cp = subprocess.run(["curl", "-sS", "-D", "-", "--max-time",
                         str(timeout), *args, url],
                        capture_output=True, timeout=timeout + 10)
    assert cp.returncode == 0, f"curl {url} failed: {cp.stderr.decode()}"
    head, _, body = cp.stdout.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 100"):
        head, _, body = body.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def error_body(body: bytes) -> dict:
    """The OpenAI-style error object of a reply."""
    o = json.loads(body)
    assert set(o) == {"error"}, o
    e = o["error"]
    assert isinstance(e["message"], str) and e["message"], e
    assert isinstance(e["type"], str) and e["type"], e
    return e


@pytest.fixture(scope="module")
def hd(make_daemon):
    """A daemon with HTTP on an ephemeral loopback port."""
    d = make_daemon(argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"http://127.0.0.1:{http_port(d)}"
    return d


@pytest.fixture(scope="module")
def make_daemon(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    import signal

    from conftest import Daemon
    made = []

    def make(**kw):
        d = Daemon(tmp_path_factory.mktemp("sottod-http"), tiny_model, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.alive():
            rc = d.stop()
            assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def test_health(hd):
    status, headers, body = curl(hd.base + "/health")
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    o = json.loads(body)
    assert o["status"] == "ok" and o["model"] == "tiny.en", o


def test_unknown_path_and_method(hd):
    status, _, body = curl(hd.base + "/nope")
    assert status == 404
    assert error_body(body)["code"] == "not_found"
    status, headers, body = curl(hd.base + "/health", "-X", "PUT")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert error_body(body)["type"] == "invalid_request_error"


def test_http_off_by_default(make_daemon):
    d = make_daemon().start()
    assert "http:" not in d.log()


def test_bad_listen_address(make_daemon, sottod_bin):
    cp = subprocess.run([str(sottod_bin), "--http", "1.2.3:80",
                         "--check-config"], capture_output=True, text=True)
    assert cp.returncode == 2
    assert "not a numeric IPv4 address" in cp.stderr, cp.stderr
    d = make_daemon(conf="[http]\nlisten = 127.0.0.1:99999\n")
    cp = subprocess.run([str(sottod_bin), "-f", str(d.conf),
                         "--check-config"], capture_output=True, text=True)
    assert cp.returncode == 1
    assert ":5: listen: \"127.0.0.1:99999\" is not ADDRESS:PORT" \
        in cp.stderr, cp.stderr
