"""The system `meson install` lays out, run as installed.

The build is installed into a DESTDIR. In a private mount namespace (as
root: unshare) the DESTDIR's prefix is bind-mounted over the real prefix
and a tmpfs over /run, so every installed path is exactly where the
installed files say: the service unit's ExecStart= is run word for word
under systemd-socket-activate on the socket unit's ListenStream=, sottod
reads the installed default config, and the installed `sotto` streams real
speech through it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, BUILD, report
import wer as werlib


def meson_dirs() -> dict[str, str]:
    """Installation directories of the build, absolute."""
    cp = subprocess.run(["meson", "introspect", str(BUILD), "--buildoptions"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    opts = {o["name"]: o["value"] for o in json.loads(cp.stdout)
            if o["section"] == "directory"}
    prefix = opts["prefix"]
    return {k: v if v.startswith("/") else f"{prefix}/{v}"
            for k, v in opts.items()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(DESTDIR, directories) after `meson install --destdir`."""
    dest = tmp_path_factory.mktemp("destdir")
    cp = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild",
                         "--quiet", "--destdir", str(dest)],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, f"meson install failed:\n{cp.stdout}{cp.stderr}"
    return dest, meson_dirs()


def unit_values(path: Path, key: str) -> list[str]:
    """Every value of key in a unit file."""
    assert path.is_file(), f"{path} was not installed"
    out = []
    for line in path.read_text().splitlines():
        k, eq, v = line.strip().partition("=")
        if eq and not k.startswith(("#", ";")) and k.strip() == key:
            out.append(v.strip())
    return out


def exec_argv(value: str) -> list[str]:
    """ExecStart= as an argv: systemd's quoting, its prefixes removed."""
    argv = shlex.split(value)
    assert argv, "empty ExecStart="
    argv[0] = argv[0].lstrip("@-:+!|")
    return argv


def unit_dir(dest: Path) -> Path:
    """Where meson put the units (systemd.pc's dir, else prefix/lib)."""
    found = sorted(dest.rglob("sottod.service"))
    assert len(found) == 1, f"sottod.service installed {len(found)} times"
    return found[0].parent


class InstalledRoot:
    """A mount namespace in which the DESTDIR is the installed system."""

    def __init__(self, dest: Path, dirs: dict[str, str], workdir: Path):
        self.dest, self.dirs, self.dir = dest, dirs, workdir
        self.prefix = dirs["prefix"]
        assert self.prefix not in ("/", "/usr"), \
            f"prefix {self.prefix}: this test binds the DESTDIR over the " \
            "prefix and needs one other than / or /usr (meson's default " \
            "/usr/local)"
        for tool in ("unshare", "nsenter", "systemd-socket-activate"):
            assert shutil.which(tool), f"{tool} is missing (util-linux, systemd)"
        self.env = dict(os.environ, LD_LIBRARY_PATH=dirs["libdir"])
        self.proc: subprocess.Popen | None = None

    def start(self, argv: list[str], sock: str, env: dict[str, str]) -> None:
        """argv under systemd-socket-activate -l sock, in the namespace."""
        script = ('mount --bind "$1" "$2" && '
                  'mount -t tmpfs -o mode=0755 tmpfs /run && '
                  'mkdir -p "$(dirname "$3")" && shift 2 && '
                  'exec systemd-socket-activate -l "$@"')
        # systemd-socket-activate passes on only the variables named by -E
        # (the lib dir stands in for the ldconfig a real install runs).
        passed = [a for k in ["LD_LIBRARY_PATH", *env] for a in ("-E", k)]
        self.log_path = self.dir / "sottod.log"
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             "sh", "-c", script, "sh", f"{self.dest}{self.prefix}",
             self.prefix, sock, *passed, *argv],
            stdin=subprocess.DEVNULL, stdout=self.logf,
            stderr=subprocess.STDOUT, env=dict(self.env, **env), cwd="/")
        deadline = time.monotonic() + 20
        while not os.path.exists(f"/proc/{self.proc.pid}/root{sock}"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"no socket {sock} from {argv}:\n{self.log()}")
            time.sleep(0.05)

    def run(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        """argv inside the namespace (the installed paths)."""
        assert self.proc is not None
        return subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m",
                               "--", *argv], capture_output=True, text=True,
                              timeout=timeout, env=self.env, cwd="/")

    def log(self) -> str:
        return self.log_path.read_text()[-6000:]

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.logf.close()
        return rc


def test_installed_unit_starts_sottod(installed, tiny_model, tmp_path):
    """ExecStart= of the installed sottod.service, exactly as written, on
    the installed sottod.socket's ListenStream=, with the installed config,
    answers the installed `sotto stream` (on the socket it defaults to)."""
    dest, dirs = installed
    units = unit_dir(dest)
    exec_start = unit_values(units / "sottod.service", "ExecStart")
    assert len(exec_start) == 1, exec_start
    argv = exec_argv(exec_start[0])
    listen = unit_values(units / "sottod.socket", "ListenStream")
    assert len(listen) == 1 and listen[0].startswith("/"), listen
    assert (dest / argv[0].lstrip("/")).is_file(), \
        f"ExecStart={exec_start[0]}: {argv[0]} is not installed " \
        f"(installed: {sorted(str(p.relative_to(dest)) for p in dest.rglob('sottod'))})"

    root = InstalledRoot(dest, dirs, tmp_path)
    root.start(argv, listen[0], {"SOTTO_MODEL_DIR": str(tiny_model.parent)})
    try:
        wav = AUDIO_DIR / "jfk.wav"
        t0 = time.monotonic()
        cp = root.run([f"{dirs['bindir']}/sotto", "stream", "--fast", "-f",
                       "jsonl", str(wav)])
        took = time.monotonic() - t0
        assert cp.returncode == 0, f"installed sotto stream: {cp.stderr}\n{root.log()}"
        events = [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]
        text = "".join(s["text"] for e in events if e["type"] == "final"
                       for s in e["segments"])
        assert events and events[-1]["type"] == "end", events[-3:]
        ref = werlib.load_manifest(AUDIO_DIR)["jfk.wav"]
        w = werlib.wer([ref], [text])
        assert w <= 0.10, f"WER {w:.2f}: {text!r}"
        assert "socket activation" in root.log(), root.log()
    finally:
        rc = root.stop()
    assert rc == 0, f"sottod exited {rc} on SIGTERM:\n{root.log()}"
    report(f"installed unit: ExecStart={exec_start[0]} on {listen[0]} "
           f"(DESTDIR bound over {dirs['prefix']}): jfk.wav WER {w:.2f} "
           f"in {took:.1f} s")
