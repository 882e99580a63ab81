"""systemd units: systemd-analyze verify and the security exposure score.

Works on the units meson configured into the build directory (build/systemd,
or $SOTTO_BUILD_DIR/systemd), without a running systemd and without sottod:
verify needs ExecStart= to exist, so a copy points it at /bin/true.
test_configured checks that ExecStart= names the sottod meson installs;
test_install.py runs it as written from an installed tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_install import meson_dirs

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SOTTO_BUILD_DIR", REPO / "build"))
UNITS = BUILD / "systemd"
EXPOSURE_MAX = 2.0
SOCKETS = ("sottod.socket", "sottod-http.socket", "sottod-wyoming.socket")


def unit_text(name: str) -> str:
    path = UNITS / name
    if not path.is_file():
        pytest.fail(f"{path} missing: run meson setup/compile on {BUILD}")
    return path.read_text()


def keys(text: str) -> dict[str, list[str]]:
    """Key -> values of a unit file (comments and sections ignored)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;[" or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out.setdefault(k.strip(), []).append(v.strip())
    return out


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    """The built units, with ExecStart= pointing at /bin/true."""
    service = unit_text("sottod.service")
    exec_start = keys(service)["ExecStart"][0].split()[0]
    (tmp_path / "sottod.service").write_text(
        service.replace(exec_start, "/bin/true"))
    for name in SOCKETS:
        (tmp_path / name).write_text(unit_text(name))
    return tmp_path


def analyze(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.fail("systemd-analyze not found (package systemd)")
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_configured():
    service = unit_text("sottod.service")
    left = re.findall(r"@[a-z_]+@", service)
    assert not left, f"unsubstituted {left} in sottod.service"
    k = keys(service)
    assert k["Type"] == ["notify"]
    dirs = meson_dirs()
    assert k["ExecStart"][0].split()[0] == f"{dirs['sbindir']}/sottod", \
        f"ExecStart={k['ExecStart'][0]}, but sottod installs in {dirs['sbindir']}"
    assert k["WatchdogSec"] == ["30"]
    assert k["Restart"] == ["on-failure"]
    assert k["RuntimeDirectory"] == ["sotto"]
    assert "audio" in k["SupplementaryGroups"]
    assert k["RestrictAddressFamilies"] == ["AF_UNIX"]
    # oneDNN JIT-compiles kernels into writable, then executable memory.
    assert "MemoryDenyWriteExecute" not in k
    s = keys(unit_text("sottod.socket"))
    assert s["ListenStream"] == ["/run/sotto/sottod.sock"]
    assert s["SocketMode"] == ["0660"] and s["SocketGroup"] == ["audio"]
    # the TCP front doors: loopback, named as daemon/base/systemd.c takes
    # them, activating sottod.service (which sottod.socket requires)
    for name, fd, port in (("sottod-http.socket", "http", 8000),
                           ("sottod-wyoming.socket", "wyoming", 10300)):
        s = keys(unit_text(name))
        assert s["ListenStream"] == [f"127.0.0.1:{port}"], name
        assert s["FileDescriptorName"] == [fd], name
        assert s["Service"] == ["sottod.service"], name
        assert "sockets.target" in s["WantedBy"], name
        assert name in k["After"][0].split(), k["After"]


def test_verify(unit_dir: Path):
    # --man=no: the man pages of Documentation= are not installed here
    # (test_install.py verifies the installed units with them).
    cp = analyze("verify", "--man=no", *(f"./{n}" for n in SOCKETS),
                 "./sottod.service", cwd=unit_dir)
    ours = [l for l in (cp.stdout + cp.stderr).splitlines() if "sottod" in l]
    assert cp.returncode == 0 and not ours, \
        f"systemd-analyze verify: rc {cp.returncode}\n{cp.stdout}{cp.stderr}"


def test_security_exposure(unit_dir: Path):
    cp = analyze("security", "--offline=true", "--no-pager",
                 "./sottod.service", cwd=unit_dir)
    m = re.search(r"Overall exposure level for sottod\.service: "
                  r"([0-9.]+) (\w+)", cp.stdout)
    assert m, f"no exposure level in output:\n{cp.stdout}{cp.stderr}"
    score, verdict = float(m.group(1)), m.group(2)
    print(f"sottod.service exposure: {score} {verdict}")
    assert score <= EXPOSURE_MAX and verdict == "OK", cp.stdout
