"""The WebSocket at /ws (daemon/ws/ws.c, ws-conn.c, ws-msg.c) and the page at /
(daemon/http/web.c), driven by the `websockets` package from PyPI against a real
sottod with the real tiny.en model. Bad input is written as raw bytes on a
socket whose handshake and replies websockets' sans-I/O client protocol
handles, so what the server sends is judged by a parser nobody here wrote.
"""

from __future__ import annotations

import fcntl
import json
import re
import socket
import struct
import termios
import threading
import time
import wave

import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close, Opcode
from websockets.http11 import Response
from websockets.sync.client import connect
from websockets.uri import parse_uri

from conftest import AUDIO_DIR, SOTTO, Daemon, report

MAX_FRAME = 64 * 1024


def http_port(d) -> int:
    # The line may reach the log after the Unix socket answers (busy machine).
    deadline = time.monotonic() + 60
    while True:
        m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
        if m or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert m, f"no http listening line in the log:\n{d.log()}"
    return int(m.group(1))


@pytest.fixture(scope="module")
def wd(make_daemon_module):
    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf=f"max_frame_bytes = {MAX_FRAME}\n").start()
    d.port = http_port(d)
    d.url = f"ws://127.0.0.1:{d.port}/ws"
    return d


@pytest.fixture(scope="module")
def make_daemon_module(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    import signal

    made = []

    def make(**kw) -> Daemon:
        d = Daemon(tmp_path_factory.mktemp("sottod-ws"), tiny_model, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.alive():
            assert d.stop() == 0, d.log()
        else:
            d.stop(signal.SIGKILL)


def pcm16(name: str) -> tuple[bytes, int]:
    with wave.open(str(AUDIO_DIR / name)) as w:
        return w.readframes(w.getnframes()), w.getframerate()


def stream(url: str, name: str, chunk_s: float = 0.1, **kw) -> list[dict]:
    """Every event of one stream of a speech file, until end or error."""
    pcm, rate = pcm16(name)
    events = []
    # Sent faster than real time: sottod stops reading while the stream
    # lags (pings wait too), so no keepalive timeout.
    with connect(url, ping_interval=None, **kw) as ws:
        events.append(json.loads(ws.recv()))
        ws.send(json.dumps({"type": "open", "format": "s16le",
                            "rate": rate}))
        events.append(json.loads(ws.recv()))
        assert events[-1]["type"] == "opened", events
        step = int(rate * chunk_s) * 2
        for i in range(0, len(pcm), step):
            ws.send(pcm[i:i + step])
        ws.send(json.dumps({"type": "end"}))
        while events[-1]["type"] not in ("end", "error"):
            events.append(json.loads(ws.recv()))
    return events


def final_text(events: list[dict]) -> str:
    return "".join(s["text"] for e in events if e["type"] == "final"
                   for s in e["segments"])


class Raw:
    """A socket with websockets' client protocol for the handshake and
    for reading what the server sends; bad frames are written raw."""

    def __init__(self, d, headers: dict | None = None, url: str = "",
                 rcvbuf: int = 0):
        self.s = socket.socket()
        if rcvbuf:      # before connect: no autotuning of the window
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(20)
        self.s.connect(("127.0.0.1", d.port))
        self.p = ClientProtocol(parse_uri(url or d.url), max_size=None)
        req = self.p.connect()
        for k, v in (headers or {}).items():
            if k in req.headers:
                del req.headers[k]
            req.headers[k] = v
        self.p.send_request(req)
        self.flush()
        self.response = None
        self.frames = []
        while self.response is None:
            self.pump()

    def flush(self) -> None:
        for data in self.p.data_to_send():
            if data:
                try:
                    self.s.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass    # the server closed first: it may

    def pump(self) -> bool:
        """Read once; False at the end of the connection."""
        try:
            data = self.s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            data = b""
        if data:
            self.p.receive_data(data)
        else:
            self.p.receive_eof()
        for ev in self.p.events_received():
            if isinstance(ev, Response):
                self.response = ev
            else:
                self.frames.append(ev)
        self.flush()
        return bool(data)

    def send_raw(self, data: bytes) -> None:
        self.s.sendall(data)

    def until_closed(self) -> tuple[list[dict], Close | None]:
        """Events, then the server's close frame (None: none came)."""
        while self.pump():
            pass
        events, close = [], None
        for f in self.frames:
            if f.opcode == Opcode.TEXT:
                assert close is None, "a text message after the close"
                events.append(json.loads(f.data))
            elif f.opcode == Opcode.CLOSE:
                close = Close.parse(f.data)
        return events, close

    def close(self) -> None:
        self.s.close()


def frame(opcode: int, payload: bytes, *, fin: bool = True,
          mask: bool = True, rsv: int = 0) -> bytes:
    """A client frame as RFC 6455 section 5.2 lays it out (test input)."""
    b0 = (0x80 if fin else 0) | rsv << 4 | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        hdr = bytes([b0, m | n])
    elif n < 65536:
        hdr = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        hdr = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if not mask:
        return hdr + payload
    key = b"\x1f\x2e\x3d\x4c"
    return hdr + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def text(obj) -> bytes:
    return frame(0x1, json.dumps(obj).encode())


def bad(d, data: bytes, code: str, close: int, *, opened: bool = False,
        headers: dict | None = None) -> dict:
    """Send data (after an OPEN when opened); the connection must end with
    one error event of code, then a close frame with close."""
    r = Raw(d, headers)
    assert r.response.status_code == 101, r.response
    if opened:
        r.send_raw(text({"format": "s16le", "rate": 16000}))
    r.send_raw(data)
    events, c = r.until_closed()
    r.close()
    types = [e["type"] for e in events]
    assert types[0] == "hello" and types[-1] == "error", events
    err = events[-1]
    assert err["code"] == code and err["message"], err
    assert c is not None and c.code == close, (c, err)
    assert types.count("error") == 1, events
    return err


# --- the good path ---------------------------------------------------------------

def test_ws_stream_jfk(wd):
    ev = stream(wd.url, "jfk.wav")
    types = [e["type"] for e in ev]
    assert types[0] == "hello" and ev[0]["model"] == "tiny.en", ev[0]
    assert types[-1] == "end" and "error" not in types, types
    ids = [e["id"] for e in ev if e["type"] == "final"]
    assert ids == list(range(len(ids))) and ids, ids
    assert "fellow americans" in final_text(ev).lower(), final_text(ev)
    assert ev[-1]["last_final"] == ids[-1]


def test_ws_same_events_as_socket(wd, sotto_bin):
    """The WebSocket carries the socket protocol's events: the same finals
    and caption units for the same audio as `sotto stream --fast`, field
    for field."""
    import subprocess
    name = "sense_and_sensibility_01_austen_64kb-0870.wav"
    cp = subprocess.run([str(sotto_bin), "stream", "-s", wd.socket, "-f",
                         "jsonl", "--fast", str(AUDIO_DIR / name)],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    sock = [json.loads(ln) for ln in cp.stdout.splitlines()]
    web = stream(wd.url, name)

    def finals(evs):
        return [(e["id"], e["segments"]) for e in evs if e["type"] == "final"]
    def units(evs):
        return [{k: v for k, v in e.items() if k != "session"} for e in evs
                if e["type"] == "unit" and e["closed"]]
    assert finals(web) == finals(sock)
    assert units(web) == units(sock) and units(web)
    assert {e["type"] for e in web} <= {"hello", "opened", "partial",
                                         "final", "unit", "end"}


def test_ws_follow_needs_mic(wd):
    """SUBSCRIBE without [mic]: the socket protocol's unavailable error."""
    assert bad(wd, text({"type": "subscribe", "source": "mic"}),
               "unavailable", 1008)["message"]


def test_ws_status_and_reopen(wd):
    with connect(wd.url) as ws:
        assert json.loads(ws.recv())["type"] == "hello"
        ws.send('{"type":"status"}')
        st = json.loads(ws.recv())
        assert st["type"] == "status" and st["model"] == "tiny.en", st
        # Two streams one after the other on one connection.
        for _ in range(2):
            ws.send('{"rate":16000}')
            assert json.loads(ws.recv())["type"] == "opened"
            ws.send(b"\x00\x00" * 8000)
            ws.send('{"type":"end"}')
            while json.loads(ws.recv())["type"] != "end":
                pass


def test_page(wd):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{wd.port}/") as r:
        body = r.read().decode()
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        csp = r.headers["Content-Security-Policy"]
    assert "connect-src 'self'" in csp and "default-src 'none'" in csp
    assert "<title>sotto" in body and "AudioWorkletProcessor" in body
    # Offline: the page fetches nothing from anywhere.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", body)


# --- origin and handshake ----------------------------------------------------------------

def test_ws_origin(wd):
    host = f"127.0.0.1:{wd.port}"
    for origin, ok in ((f"http://{host}", True), (None, True),
                       ("http://evil.example", False),
                       (f"http://{host}.evil.example", False),
                       ("null", False)):
        headers = {"Origin": origin} if origin else {}
        r = Raw(wd, headers)
        assert (r.response.status_code == 101) == ok, (origin, r.response)
        if not ok:
            assert r.response.status_code == 403
            assert b"another origin" in r.response.body
        r.close()
    # DNS rebinding: a page of evil.example, whose name now points at
    # 127.0.0.1, is of "the same origin"; without a token only loopback
    # names may be in Host.
    evil = f"evil.example:{wd.port}"
    r = Raw(wd, {"Host": evil, "Origin": f"http://{evil}"})
    assert r.response.status_code == 403, r.response
    assert b"loopback" in r.response.body
    r.close()


def test_ws_token(make_daemon_module):
    """With [http] token: /ws wants it (a header, or ?token= from the
    page); the page itself is open (it holds nothing), /health too."""
    import urllib.request
    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf="[http]\ntoken = s3cret-T0ken-0123\n").start()
    d.port = http_port(d)
    d.url = f"ws://127.0.0.1:{d.port}/ws"
    for url, headers, ok in (
            (d.url, {}, False),
            (d.url + "?token=wrong", {}, False),
            (d.url + "?token=s3cret-T0ken-012", {}, False),
            (d.url + "?token=s3cret-T0ken-0123", {}, True),
            (d.url, {"Authorization": "Bearer s3cret-T0ken-0123"}, True),
            (d.url, {"Authorization": "Bearer nope"}, False)):
        r = Raw(d, headers, url)
        assert r.response.status_code == (101 if ok else 401), \
            (url, headers, r.response)
        if not ok:
            assert json.loads(r.response.body)["error"]["code"] == \
                "invalid_api_key"
        r.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/") as r:
        assert r.status == 200
    with connect(d.url + "?token=s3cret-T0ken-0123") as ws:
        assert json.loads(ws.recv())["type"] == "hello"


def test_ws_handshake_errors(wd):
    s = socket.create_connection(("127.0.0.1", wd.port), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 426"), head
    assert b"Sec-WebSocket-Version: 13" in head, head
    s.close()
    s = socket.create_connection(("127.0.0.1", wd.port), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: short\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 400")
    s.close()


# --- bad input: the error event, the right close code, nobody else affected ---

def test_ws_bad_input(wd):
    cases = [
        # (what, bytes, error code, close code, after an OPEN)
        ("not JSON", frame(0x1, b"{nope"), "bad_json", 1007, False),
        ("unknown type", text({"type": "hello"}), "bad_value", 1008, False),
        ("bad rate", text({"rate": 5}), "bad_value", 1008, False),
        ("audio first", frame(0x2, b"\x00\x00"), "bad_order", 1008, False),
        ("end first", text({"type": "end"}), "bad_order", 1008, False),
        ("open twice", text({"rate": 16000}), "bad_order", 1008, True),
        ("unmasked", frame(0x2, b"\x00\x00", mask=False), "bad_frame",
         1002, True),
        ("reserved bit", frame(0x2, b"\x00\x00", rsv=4), "bad_frame", 1002,
         True),
        ("reserved opcode", frame(0x3, b""), "bad_frame", 1002, True),
        ("text not UTF-8", frame(0x1, b'{"a":"\xff"}'), "bad_frame", 1007,
         False),
        ("long ping", frame(0x9, b"x" * 126), "bad_frame", 1002, True),
        ("too large", frame(0x2, b"\x00" * (MAX_FRAME + 2)), "too_large",
         1009, True),
        ("too large in pieces", frame(0x2, b"\x00" * MAX_FRAME, fin=False)
         + frame(0x0, b"\x00\x00"), "too_large", 1009, True),
        ("too many messages", frame(0x2, b"\x00\x00") * 400, "too_fast",
         1008, True),
    ]
    # A stream that must not notice any of it.
    good: dict = {}
    t = threading.Thread(target=lambda: good.update(
        ev=stream(wd.url, "jfk.wav", chunk_s=0.05)))
    t.start()
    for what, data, code, close, opened in cases:
        try:
            bad(wd, data, code, close, opened=opened)
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None
    t.join(120)
    assert "fellow americans" in final_text(good["ev"]).lower(), good
    report(f"ws: {len(cases)} kinds of bad input each got its error event "
           "and close code; a stream alongside was not affected")


def test_ws_client_vanishes_mid_stream(wd):
    """A connection that drops while streaming frees its peer; the daemon
    serves the next one."""
    r = Raw(wd)
    r.send_raw(text({"format": "s16le", "rate": 16000}))
    r.send_raw(frame(0x2, b"\x00\x01" * 16000))
    r.send_raw(frame(0x2, b"\x00" * 100)[:20])     # cut inside a frame
    r.close()
    time.sleep(0.5)
    assert "fellow americans" in final_text(stream(wd.url,
                                                   "jfk.wav")).lower()


def test_ws_client_close_is_answered(wd):
    with connect(wd.url) as ws:
        ws.recv()
        ws.close(1000)
        assert ws.close_code == 1000
    with pytest.raises(ConnectionClosed):
        with connect(wd.url) as ws:
            ws.recv()
            ws.send("{nope")
            ws.recv()
            ws.recv()


def unacked(s: socket.socket) -> int:
    """Bytes written to s that its peer's kernel has not taken yet."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ,
                                          b"\0" * 4))[0]


def test_ws_sigterm_takes_what_was_written(make_daemon_module):
    """A client writes 22 s of speech and end as fast as it can (a send
    buffer that holds them all), then sottod gets SIGTERM: what reached
    sottod's socket before the signal (it reads at the pace it decodes,
    so most waits there) is taken and decoded, as the socket door does;
    `end` says how much (undecoded_s 0), then the close says sottod is
    stopping (1001) and it exits 0. What TCP had not yet moved from the
    client's buffer to sottod's is not sottod's to take."""
    import signal

    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf="shutdown_grace_seconds = 60\n").start()
    pcm = pcm16("jfk.wav")[0] * 2
    step = 3200
    s = socket.create_connection(("127.0.0.1", http_port(d)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    events, closed = [], None
    with connect(f"ws://127.0.0.1:{http_port(d)}/ws", sock=s,
                 ping_interval=None) as ws:
        assert json.loads(ws.recv())["type"] == "hello"
        ws.send(json.dumps({"type": "open", "format": "s16le",
                            "rate": 16000}))
        assert json.loads(ws.recv())["type"] == "opened"
        for i in range(0, len(pcm), step):
            ws.send(pcm[i:i + step])
        time.sleep(0.2)     # sottod has paused: its socket fills
        # each binary message: 2 + 2 bytes of header and a 4-byte mask;
        # anything still unacked from before (the open) only lowers it
        wire = sum(len(pcm[i:i + step]) + 8
                   for i in range(0, len(pcm), step))
        reached = (wire - unacked(s)) * step / (step + 8) / 32000
        d.proc.send_signal(signal.SIGTERM)
        try:
            while True:
                events.append(json.loads(ws.recv(timeout=120)))
        except ConnectionClosed as e:
            closed = e
    end = [e for e in events if e["type"] == "end"]
    assert end, events[-3:]
    # a frame cut by the moment (0.1 s), and audio_s to 0.1 s
    assert end[0]["audio_s"] >= reached - 0.2, (end, reached)
    assert end[0]["undecoded_s"] == 0, end
    assert closed is not None and closed.rcvd.code == 1001, closed
    assert d.proc.wait(timeout=60) == 0, d.log()
    report(f"/ws SIGTERM after a client wrote {len(pcm) / 32000:.1f} s "
           f"fast: {reached:.1f} s had reached sottod's socket, "
           f"{end[0]['audio_s']:.1f} s taken and decoded, close 1001")


# --- control frames --------------------------------------------------------------

def vmrss_kb(pid: int) -> int:
    for ln in open(f"/proc/{pid}/status"):
        if ln.startswith("VmRSS:"):
            return int(ln.split()[1])
    raise AssertionError("no VmRSS")


def test_ws_ping_flood(wd):
    """Pings count against the message rate: each costs a pong."""
    err = bad(wd, frame(0x9, b"") * 300, "too_fast", 1008)
    assert "pings" in err["message"], err


def test_ws_pings_without_reading(make_daemon_module):
    """A client that pings within the rate but never reads: its pongs
    count against max_client_buffer_bytes like events, and past it the
    client is dropped as a slow reader (its error event and close frame
    queued after what it did not read), instead of sottod queueing pongs
    without end."""
    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf="max_client_buffer_bytes = 64K\n").start()
    d.port = http_port(d)
    d.url = f"ws://127.0.0.1:{d.port}/ws"
    r = Raw(d, rcvbuf=4096)
    assert r.response.status_code == 101, r.response
    rss0 = vmrss_kb(d.proc.pid)
    ping = frame(0x9, b"p" * 125)
    t0 = time.monotonic()
    sent = 0
    r.s.settimeout(1)
    # Until sottod says it drops the client; then read what it queued
    # (it waits PEER_CLOSE_TIMEOUT_S for that before it closes).
    try:
        while time.monotonic() - t0 < 30 and \
                "does not read" not in d.log():
            r.s.sendall(ping * 15)          # 150 a second
            sent += 15
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    took = time.monotonic() - t0
    rss1 = vmrss_kb(d.proc.pid)
    r.s.settimeout(20)
    events, close = r.until_closed()
    r.close()
    assert took < 30, f"still connected after {sent} pings in {took:.0f} s"
    assert events and events[-1].get("code") == "slow_reader", \
        (events, d.log())
    assert close is not None and close.code == 1008, close
    assert rss1 - rss0 < 32 * 1024, (rss0, rss1)
    assert d.stop() == 0, d.log()
    report(f"ws pings without reading: dropped as a slow reader after "
           f"{sent} pings ({took:.1f} s), VmRSS {rss0 // 1024} -> "
           f"{rss1 // 1024} MB")


def test_ws_count_against_http_caps(make_daemon_module):
    """WebSockets taken over from the HTTP listener count against [http]
    max_connections_per_address (and max_connections) as the HTTP
    connections they were: idle upgrades from one process cannot pile up,
    and the Unix socket, counted apart, keeps serving sotto status."""
    import subprocess

    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf="[http]\nmax_connections_per_address = 4\n"
                           ).start()
    d.port = http_port(d)
    url = d.url = f"ws://127.0.0.1:{d.port}/ws"
    held = []
    try:
        for _ in range(4):
            held.append(connect(url, open_timeout=30))
            assert json.loads(held[-1].recv(30))["type"] == "hello"
        r = Raw(d)      # the upgrade request, then what comes back
        assert r.response.status_code == 503, r.response
        assert b"max_connections_per_address" in r.response.body
        r.close()
        cp = subprocess.run([str(SOTTO), "status", "-s", d.socket],
                            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 0, cp.stderr
        held.pop().close()
        time.sleep(0.5)
        held.append(connect(url, open_timeout=30))   # room again
    finally:
        for w in held:
            w.close()
    report("ws caps: 4 WebSockets from one address held, the 5th refused "
           "503 at accept, sotto status served, room again after a close")
