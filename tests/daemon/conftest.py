"""Fixtures for the sottod end-to-end tests: a real sottod (build/daemon)
with the real tiny.en model on a socket in a temporary directory, driven by
the real `sotto` client (build/client) and by a raw protocol client.

Nothing skips: a missing binary, model or audio file fails the tests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import wer as werlib  # noqa: E402

BUILD = Path(os.environ.get("SOTTO_BUILD_DIR", REPO / "build"))
SOTTOD = BUILD / "daemon" / "sottod"
SOTTO = BUILD / "client" / "sotto"
AUDIO_DIR = werlib.AUDIO_DIR

REPORT: list[str] = []

MSG_HELLO, MSG_OPEN, MSG_SUBSCRIBE, MSG_AUDIO, MSG_END, MSG_STATUS = range(1, 7)
MSG_EVENT = 0x80


def report(line: str) -> None:
    REPORT.append(line)


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("sottod report")
        for line in REPORT:
            terminalreporter.write_line(line)


# --- binaries, model, audio ---------------------------------------------------

def _need(path: Path) -> Path:
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: meson compile -C {BUILD}")
    return path


@pytest.fixture(scope="session")
def sottod_bin() -> Path:
    return _need(SOTTOD)


@pytest.fixture(scope="session")
def sotto_bin() -> Path:
    return _need(SOTTO)


def fetch_model(name: str) -> Path:
    script = REPO / "scripts" / "fetch-model"
    env = dict(os.environ)
    venv = REPO / ".venv" / "bin" / "python"
    if venv.exists():
        env.setdefault("SOTTO_PYTHON", str(venv))
    cp = subprocess.run([str(script), name], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in cp.stdout.splitlines() if ln.strip()]
    if cp.returncode != 0 or not lines:
        pytest.fail(f"scripts/fetch-model {name} failed:\n{cp.stderr[-3000:]}")
    path = Path(lines[-1].strip())
    path = path if path.is_absolute() else REPO / path
    if not path.is_file():
        pytest.fail(f"fetch-model printed {path}, which does not exist")
    return path


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """tiny.en, and beside it Silero VAD: sottod's default config gives
    live streams and the microphone a VAD, found next to the model."""
    vad = fetch_model("silero-vad")
    path = fetch_model("tiny.en")
    if vad.parent != path.parent:
        pytest.fail(f"{vad} is not beside {path}")
    return path


@pytest.fixture(scope="session")
def manifest() -> dict[str, str]:
    try:
        m = werlib.load_manifest(AUDIO_DIR)
    except OSError as e:
        pytest.fail(f"{AUDIO_DIR}/manifest.tsv: {e}")
    missing = [f for f in m if not (AUDIO_DIR / f).is_file()]
    if missing:
        pytest.fail(f"audio files missing in {AUDIO_DIR}: {missing}")
    return m


# --- the daemon -------------------------------------------------------------------

class Daemon:
    """One sottod process with its own config, socket and log."""

    def __init__(self, workdir: Path, model: Path, *, conf: str = "",
                 env: dict | None = None, argv: list | None = None,
                 wrapper: list | None = None, binary: Path | None = None):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = str(self.dir / "s.sock")
        self.log_path = self.dir / "sottod.log"
        self.conf = self.dir / "sottod.conf"
        self.conf.write_text(
            "[server]\nsocket = %s\nreconnect_grace_seconds = 20\n%s"
            % (self.socket, conf))
        self.model = model
        self.env = dict(os.environ, **(env or {}))
        self.argv = argv or []
        self.wrapper = wrapper or []
        self.binary = binary or SOTTOD
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "Daemon":
        cmd = [*self.wrapper, str(self.binary), "-f", str(self.conf), "-m",
               str(self.model), "-t", "2", "-d", *self.argv]
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"sottod exited {self.proc.returncode}:\n{self.log()}")
            try:
                c = RawClient(self.socket)
                c.hello()
                c.close()
                return self
            except OSError:
                time.sleep(0.1)
        pytest.fail(f"sottod did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-6000:]
        except OSError:
            return ""

    def listen_port(self, door: str = "http", timeout: float = 60) -> int:
        """The TCP port a door ("http", "wyoming") listens on, as its log
        line names it (the tests ask for port 0)."""
        pat = re.compile(rf"{door}: listening on [^ ]*:(\d+)")
        deadline = time.monotonic() + timeout
        while not (m := pat.search(self.log())) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert m, f"no {door} listening line in the log:\n{self.log()}"
        return int(m.group(1))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout: float = 90) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"sottod did not stop within {timeout} s:\n{self.log()}")
        self.logf.close()
        for m in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
            assert m not in self.log(), self.log()
        return rc


@pytest.fixture(scope="session")
def daemon(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("sottod"), tiny_model).start()
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc} on SIGTERM:\n{d.log()}"


@pytest.fixture
def make_daemon(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    """Private daemons for tests that stop or reconfigure them."""
    made = []

    def make(**kw) -> Daemon:
        d = Daemon(tmp_path_factory.mktemp("sottod"), tiny_model, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.alive():
            d.stop(signal.SIGKILL)


# --- TCP ports -------------------------------------------------------------------

def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1. All n are held bound until
    the last is picked: picked one at a time, the kernel may hand out the
    same port twice, and a program that binds with SO_REUSEPORT (HAProxy)
    then listens twice on one port and splits connections between two
    frontends."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# --- a raw protocol client ----------------------------------------------------------

def frame(t: int, payload: bytes = b"") -> bytes:
    return struct.pack("<IB", len(payload) + 1, t) + payload


def jframe(t: int, obj) -> bytes:
    return frame(t, json.dumps(obj).encode())


class RawClient:
    def __init__(self, path: str, timeout: float = 30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.s.sendall(data)

    def hello(self) -> dict:
        self.send(jframe(MSG_HELLO, {"protocol": 1, "client": "pytest"}))
        ev = self.event()
        assert ev and ev["type"] == "hello", ev
        return ev

    def event(self) -> dict | None:
        """The next event, or None at end of connection."""
        while True:
            if len(self.buf) >= 5:
                n, t = struct.unpack("<IB", self.buf[:5])
                assert t == MSG_EVENT, f"frame type {t:#x} from the server"
                if len(self.buf) >= 4 + n:
                    payload = self.buf[5:4 + n]
                    self.buf = self.buf[4 + n:]
                    return json.loads(payload)
            try:
                data = self.s.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                assert not self.buf, f"connection closed inside a frame: {self.buf!r}"
                return None
            self.buf += data

    def events_until(self, kind: str) -> list[dict]:
        out = []
        while True:
            ev = self.event()
            if ev is None:
                pytest.fail(f"closed before a {kind!r} event; got {out}")
            out.append(ev)
            if ev["type"] == kind:
                return out

    def close(self) -> None:
        self.s.close()


# --- sotto stream with arrival times -----------------------------------------------------

class Stream:
    """`sotto stream --format jsonl ...` with each line's arrival time."""

    def __init__(self, socket_path: str, *args, verb: str = "stream"):
        self.cmd = [str(SOTTO), verb, "-s", socket_path, "-f", "jsonl",
                    *map(str, args)]
        self.lines: list[tuple[float, dict]] = []
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            t = time.monotonic()
            try:
                self.lines.append((t, json.loads(line)))
            except ValueError:
                self.lines.append((t, {"type": "<not json>", "line": line}))

    def wait(self, timeout: float = 300) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"{self.cmd} did not finish in {timeout} s")
        self.reader.join(10)
        self.stderr = self.proc.stderr.read()
        return rc

    def events(self, kind: str) -> list[dict]:
        return [e for _, e in self.lines if e.get("type") == kind]

    def text(self) -> str:
        return "".join(s["text"] for e in self.events("final")
                       for s in e["segments"])

    def check(self) -> "Stream":
        rc = self.wait()
        assert rc == 0, f"{self.cmd} exited {rc}:\n{self.stderr}"
        assert self.events("end"), f"no end event: {self.lines[-3:]}"
        ids = [e["id"] for e in self.events("final")]
        assert ids == list(range(len(ids))), f"final ids {ids}"
        return self


class Listen(Stream):
    """`sotto listen --format jsonl --since -1` with each line's arrival
    time."""

    def __init__(self, socket_path: str):
        super().__init__(socket_path, "--since", "-1", verb="listen")


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]
