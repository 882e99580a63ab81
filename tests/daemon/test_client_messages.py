"""What the sottod clients (sotto stream, listen, status) say when things
go wrong, and their exit status: output that cannot be written (/dev/full
for a full disk), a socket the user may not use, a socket-activated
sottod that fails to start, sottod refusing a status request, and a
microphone whose device is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import AUDIO_DIR, SOTTO, SOTTOD, RawClient

WAV = AUDIO_DIR / "goforward.wav"   # 2.8 s


def sotto(*args, stdout=subprocess.PIPE, timeout=120, preexec=None,
          wrap=()) -> subprocess.CompletedProcess:
    return subprocess.run([*wrap, str(SOTTO), *map(str, args)],
                          stdin=subprocess.DEVNULL, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=preexec)


# --- output that cannot be written -----------------------------------------------

@pytest.mark.parametrize("cmd", ["stream", "status"])
def test_full_stdout(cmd, daemon):
    args = ["stream", "--fast", "-s", daemon.socket, WAV] if cmd == "stream" \
        else ["status", "-s", daemon.socket]
    with open("/dev/full", "w") as full:
        cp = sotto(*args, stdout=full)
    assert cp.returncode == 1, cp.stderr
    assert cp.stderr.splitlines() == [
        f"sotto {cmd}: standard output: No space left on device"], cp.stderr


def mic_down_daemon(make_daemon):
    """A sottod whose microphone device does not exist: it keeps the mic
    session (and its subscribers) and tries to open the device again."""
    return make_daemon(conf="[mic]\nenabled = yes\ndevice = sotto-no-such-device\n"
                       "rate = 16000\nchannels = 1\n").start()


def test_listen_full_stdout(make_daemon):
    d = mic_down_daemon(make_daemon)
    with open("/dev/full", "w") as full:
        cp = sotto("listen", "-f", "jsonl", "-s", d.socket, stdout=full,
                   timeout=60)
    assert cp.returncode == 1, cp.stderr
    assert "sotto listen: standard output: No space left on device" in \
        cp.stderr.splitlines(), cp.stderr


# --- the microphone is down --------------------------------------------------------

def test_listen_says_the_mic_is_down(make_daemon):
    d = mic_down_daemon(make_daemon)
    p = subprocess.Popen([str(SOTTO), "listen", "-s", d.socket],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "microphone is down" in err and "[mic] device" in err and \
        "journalctl -u sottod" in err, err
    assert err.count("microphone is down") == 1, err
    assert out == "", out


# --- sottod refuses -------------------------------------------------------------------

def test_status_refused_is_a_sentence(make_daemon):
    d = make_daemon(conf="max_connections_per_uid = 1\n").start()
    held = RawClient(d.socket)
    held.hello()
    try:
        cp = sotto("status", "-s", d.socket)
    finally:
        held.close()
    assert cp.returncode == 4, cp.stderr
    assert "{" not in cp.stderr, f"raw JSON: {cp.stderr}"
    assert cp.stderr.startswith("sotto status: sottod refused: "), cp.stderr
    assert "max_connections_per_uid = 1" in cp.stderr and \
        "(error too_many_connections)" in cp.stderr, cp.stderr
    assert cp.stdout == ""


# --- cannot connect ---------------------------------------------------------------------

def test_permission_denied_names_the_group(tmp_path):
    """EACCES: the fix is the socket's group (audio) or mode, not starting
    sottod. A socket only root may use, tried as nobody."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to run the client as another user (CI "
                    "runs as root)")
    d = tmp_path / "run"
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    path = str(d / "s.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    os.chmod(path, 0o600)
    try:
        cp = sotto("status", "-s", path,
                   wrap=["setpriv", "--reuid=65534", "--regid=65534",
                         "--clear-groups"])
    finally:
        s.close()
    assert cp.returncode == 4, cp.stderr
    assert "Permission denied" in cp.stderr, cp.stderr
    assert "audio group" in cp.stderr and "usermod -aG audio" in cp.stderr, \
        cp.stderr
    assert "is sottod running" not in cp.stderr, cp.stderr


@pytest.mark.parametrize("cmd", ["status", "stream", "listen"])
def test_socket_activated_sottod_that_fails(cmd, tmp_path):
    """systemd holds the socket and takes the connection; the sottod it
    starts cannot load its model and exits, and the connection closes
    without a word: the client points at sottod's log."""
    if not shutil.which("systemd-socket-activate"):
        pytest.fail("systemd-socket-activate is missing (Debian: systemd)")
    path = str(tmp_path / "s.sock")
    act = subprocess.Popen(
        ["systemd-socket-activate", "-l", path, "sh", "-c",
         f'sleep 1; exec "{SOTTOD}" -m "{tmp_path}/missing.gguf"'],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            assert time.monotonic() < deadline, "no socket"
            time.sleep(0.02)
        args = {"status": ["status"], "listen": ["listen"],
                "stream": ["stream", "--fast", WAV]}[cmd]
        cp = sotto(*args, "-s", path, timeout=60)
    finally:
        act.wait(30)
    assert "missing.gguf" in act.stderr.read()
    assert cp.returncode == 4, cp.stderr
    assert "without answering" in cp.stderr and \
        "journalctl -u sottod" in cp.stderr, cp.stderr
