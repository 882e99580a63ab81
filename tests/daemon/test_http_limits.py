"""What the HTTP listener does not let a client do (daemon/net/httpd-conn.c,
httpd-head.c, httpd-listen.c; docs/http.md "Limits" and "Errors"): hold
more connections than [http] max_connections (and per address), make
sottod spin when accept(2) runs out of descriptors, make it read and keep
a body the token does not allow, send a request line, headers or a body
byte by byte for ever. Raw sockets, as an attacker's client is; the
openai SDK where a real client's behaviour matters. Each against a real
sottod with tiny.en, each in a few seconds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time

import openai
import pytest

from conftest import AUDIO_DIR, RawClient, jframe, MSG_OPEN, report
from test_http import (JFK, TOKEN, Daemons, client, curl, error_body, raw,
                       raw_error)


@pytest.fixture(scope="module")
def daemons(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    ds = Daemons(tmp_path_factory, tiny_model)
    yield ds
    ds.stop_all()


def port(d) -> int:
    return int(d.base.rsplit(":", 1)[1])


def connect(d, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port(d)))
    return s


def read_all(s: socket.socket, limit: float = 5) -> bytes:
    """What the server sends until it closes (or limit seconds)."""
    s.settimeout(limit)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def answered(s: socket.socket, wait: float) -> bytes:
    """Whatever came within wait seconds (b"" if nothing)."""
    s.settimeout(wait)
    try:
        return s.recv(65536)
    except socket.timeout:
        return b""


def rss_kb(d) -> int:
    status = open(f"/proc/{d.proc.pid}/status").read()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1))


def cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


# --- item 2: connections are capped; accept(2) out of descriptors ----------------

def test_connection_caps(daemons):
    """max_connections_per_address = 8, max_connections = 12: the ninth
    idle connection from 127.0.0.1 gets 503 + Retry-After at once, and
    127.0.0.2 then has 4 until the total is reached. Closing some lets
    others in."""
    d = daemons.start(conf="[http]\nmax_connections = 12\n"
                           "max_connections_per_address = 8\n")
    mine = [connect(d) for _ in range(10)]
    replies = [answered(s, 1.0) for s in mine]
    refused = [r for r in replies if r]
    assert len(refused) == 2, replies
    for r in refused:
        e = raw_error(r, 503)
        assert e["code"] == "too_many_connections", e
        assert "max_connections_per_address = 8" in e["message"], e
        assert r.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), r
        assert b"\r\nRetry-After: 1\r\n" in r, r
    others = [connect(d, "127.0.0.2") for _ in range(5)]
    replies2 = [answered(s, 1.0) for s in others]
    assert sum(1 for r in replies2 if r) == 1, replies2
    e = raw_error(next(r for r in replies2 if r), 503)
    assert "max_connections = 12" in e["message"], e
    for s in mine[:4]:
        s.close()
    time.sleep(0.3)
    status, _, body = curl(d.base + "/metrics")
    assert status == 200, body
    assert re.search(rb"^sottod_http_connections 9$", body, re.M), body
    for s in mine + others:
        s.close()
    report(f"http: 10 idle connections from one address and 5 from another "
           f"with max_connections_per_address 8, max_connections 12: "
           f"{len(refused)} + 1 refused with 503 at once")


def test_accept_out_of_descriptors(daemons, sottod_bin, tiny_model,
                                   tmp_path_factory):
    """sottod with 48 descriptors and room for 1000 connections: 80
    clients connect. accept(2) fails with EMFILE; the listener pauses
    instead of spinning (one log line, next to no CPU), and accepts again
    once descriptors are free."""
    d = daemons.start(conf="[http]\nmax_connections = 1000\n"
                           "max_connections_per_address = 1000\n",
                      wrapper=["prlimit", "--nofile=48:48", "--"])
    held = [connect(d) for _ in range(80)]
    t0, c0 = time.monotonic(), cpu_s(d.proc.pid)
    time.sleep(3)
    cpu = cpu_s(d.proc.pid) - c0
    elapsed = time.monotonic() - t0
    lines = [ln for ln in d.log_path.read_text().splitlines()
             if "accept" in ln.lower() and "open files" in ln.lower()]
    assert len(lines) == 1, (len(lines), d.log()[-3000:])
    assert "not accepting connections" in lines[0], lines
    assert cpu < 0.5, f"{cpu:.2f} s of CPU in {elapsed:.1f} s with accept failing"
    for s in held:
        s.close()
    status, _, _ = curl(d.base + "/health", timeout=30)
    assert status == 200
    deadline = time.monotonic() + 10
    while "accepting connections again" not in d.log():
        assert time.monotonic() < deadline, d.log()[-3000:]
        time.sleep(0.1)
    report(f"http: accept(2) out of descriptors with 80 clients: "
           f"{len(lines)} log line, {cpu:.2f} s of CPU in {elapsed:.1f} s, "
           f"accepting again once they closed")
    assert d.stop() == 0


# --- item 3: the token before the body; big buffers given back --------------------

def head(path: str, length: int, *extra: str) -> bytes:
    return ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/"
            "form-data; boundary=b\r\nContent-Length: %d\r\n%s\r\n" % (
                path, length, "".join(h + "\r\n" for h in extra))).encode()


def test_token_checked_before_body(daemons):
    """With [http] token: a request without it is answered 401 as soon as
    its headers are in, before any of its body is read (and the
    connection closed); 8 clients sending 25 MB bodies without the token
    leave sottod's memory as it was. The openai SDK, sending the body
    regardless, reads the 401."""
    d = daemons.start(conf=f"[http]\ntoken = {TOKEN}\n")
    url = "/v1/audio/transcriptions"
    s = connect(d)
    t0 = time.monotonic()
    s.sendall(head(url, 25 * 2**20))
    reply = read_all(s, 5)
    took = time.monotonic() - t0
    e = raw_error(reply, 401)
    assert e["code"] == "invalid_api_key", e
    assert b"WWW-Authenticate: Bearer" in reply and took < 2, (took, reply)
    s.close()
    s = connect(d)
    s.sendall(head(url, 25 * 2**20, "Authorization: Bearer wrong"))
    assert raw_error(read_all(s, 5), 401)["message"] == "incorrect API key"
    s.close()
    # /health needs no token, even so
    assert curl(d.base + "/health")[0] == 200

    body = os.urandom(25 * 2**20)
    before = rss_kb(d)

    def upload(out: list):
        s = connect(d, timeout=30)
        s.sendall(head(url, len(body)))
        try:
            s.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass            # closed: the 401 is already there
        out.append(read_all(s, 10))
        s.close()

    replies: list[bytes] = []
    threads = [threading.Thread(target=upload, args=(replies,))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    after = rss_kb(d)
    assert len(replies) == 8
    for r in replies:
        assert raw_error(r, 401)["code"] == "invalid_api_key", r[:200]
    assert after - before < 20 * 1024, f"VmRSS {before} -> {after} kB"
    with pytest.raises(openai.AuthenticationError):
        client(d).audio.transcriptions.create(
            file=("big.wav", body), model="whisper-1")

    # with the token: 4 x 20 MB forms that do not parse (400), on
    # connections kept open; libevent's small buffers of them are given
    # back once each reply is sent
    form = (b"--b\r\nContent-Disposition: form-data; name=file\r\n\r\n" +
            body[:20 * 2**20])
    kept: list[socket.socket] = []

    def bad_form():
        s = connect(d, timeout=30)
        s.sendall(head(url, len(form), f"Authorization: Bearer {TOKEN}") +
                  form)
        assert s.recv(4096).startswith(b"HTTP/1.1 400 "), "not a 400"
        kept.append(s)

    before2 = rss_kb(d)
    threads = [threading.Thread(target=bad_form) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    time.sleep(0.3)
    after2 = rss_kb(d)
    assert len(kept) == 4
    assert after2 - before2 < 20 * 1024, f"VmRSS {before2} -> {after2} kB"
    for s in kept:
        s.close()
    report(f"http: 8 x 25 MB uploads without the token: 401 before the "
           f"body, VmRSS {before // 1024} -> {after // 1024} MB; 4 x 20 MB "
           f"bad forms with it: VmRSS {before2 // 1024} -> "
           f"{after2 // 1024} MB, connections open")
    assert d.stop() == 0


def test_framing_refused_at_once(daemons):
    """Expect: 100-continue with a Content-Length over max_request_bytes
    gets 413 at once (the client waits to be told to send); two different
    Content-Length headers get 400 (evhttp would use the first)."""
    d = daemons.start(conf="[http]\nmax_request_bytes = 64K\n")
    s = connect(d)
    s.sendall(head("/v1/audio/transcriptions", 10**6,
                   "Expect: 100-continue"))
    reply = answered(s, 2)
    e = raw_error(reply, 413)
    assert reply.startswith(b"HTTP/1.1 413 Content Too Large\r\n"), reply
    assert e["code"] == "request_too_large" and "1000000" in e["message"]
    s.close()
    reply = raw(d, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                   b"Content-Length: 5\r\n\r\nhello", half_close=False)
    e = raw_error(reply, 400)
    assert "two different Content-Length" in e["message"], e
    # a body within the limit, with Expect, still gets its 100 Continue
    status, _, _ = curl(d.base + "/v1/audio/transcriptions", "-H",
                        "Expect: 100-continue", "-F",
                        f"file=@{AUDIO_DIR / '2830-3980-0043.wav'}")
    assert status == 200
    assert d.stop() == 0


# --- item 5: slow headers and slow bodies ------------------------------------------

def test_slow_headers_and_body(daemons):
    """header_timeout_seconds = 2, min_body_bytes_per_second = 1000: a
    request line sent a byte at a time (which request_timeout_seconds,
    counting only silence, never stops), a connection that sends nothing,
    and a body at 200 bytes a second all get 408 and are closed within
    a few seconds."""
    d = daemons.start(conf="[http]\nheader_timeout_seconds = 2\n"
                           "min_body_bytes_per_second = 1000\n")
    line = b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
    s = connect(d)
    t0 = time.monotonic()
    reply = b""
    for b in line * 10:
        try:
            s.send(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            break
        if (reply := answered(s, 0.1)):
            break
    took = time.monotonic() - t0
    e = raw_error(reply + read_all(s, 2), 408)
    assert e["code"] == "request_timeout" and 1.5 < took < 4, (took, e)
    s.close()

    s = connect(d)
    t0 = time.monotonic()
    reply = read_all(s, 6)
    assert raw_error(reply, 408)["code"] == "request_timeout"
    assert time.monotonic() - t0 < 4
    s.close()

    s = connect(d)
    s.sendall(head("/v1/audio/transcriptions", 100000))
    t0 = time.monotonic()
    reply = b""
    while time.monotonic() - t0 < 10 and not reply:
        try:
            s.send(b"x" * 100)
        except (BrokenPipeError, ConnectionResetError):
            break
        reply = answered(s, 0.5)
    took = time.monotonic() - t0
    e = raw_error(reply + read_all(s, 2), 408)
    assert "min_body_bytes_per_second" in e["message"], e
    assert 2 < took < 5, took
    s.close()
    # a real upload is not slowed down by any of it
    with open(JFK, "rb") as f:
        assert client(d).audio.transcriptions.create(
            file=f, model="whisper-1").text.startswith("And so")
    report(f"http: a body at 200 B/s cut after {took:.1f} s "
           f"(min_body_bytes_per_second 1000, 2 s of grace)")
    assert d.stop() == 0


# --- item 9: reason phrases; /ws refusals as JSON ------------------------------------

def test_reasons_and_ws_refusal_json(daemons):
    """A 429 says Too Many Requests (evhttp calls it Client Error); /ws
    refused for a foreign Origin answers the JSON error shape."""
    d = daemons.start(conf="[server]\nmax_sessions = 1\n")
    c = RawClient(d.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le"}))
    assert c.event()["type"] == "opened"
    form = (b"--b\r\nContent-Disposition: form-data; name=file\r\n\r\n"
            b"x\r\n--b--\r\n")
    reply = raw(d, head("/v1/audio/transcriptions", len(form),
                        "Connection: close") + form, half_close=False)
    assert reply.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), reply
    assert raw_error(reply, 429)["code"] == "busy"
    c.close()
    reply = raw(d, b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                   b"Origin: http://evil.example\r\nUpgrade: websocket\r\n"
                   b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                   % port(d))
    e = raw_error(reply, 403)
    assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n"), reply
    assert e["code"] == "forbidden_origin" and "another origin" in \
        e["message"], e
    assert d.stop() == 0
