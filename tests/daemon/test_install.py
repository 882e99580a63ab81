"""The system `sudo meson install` lays out, run as installed.

The build is installed as README says, `meson install` as root to the
real root (no DESTDIR, so its install script creates the user sotto and
the models directory and runs ldconfig), but in a private mount namespace
(as root: unshare) in which the prefix and localstatedir are bind mounts
of a staging directory and /etc is a copy: the files land in the staging
directory, and the user and the dynamic linker's cache in the copy, never
on the host. Run in the same kind of namespace, every installed path is
exactly where the installed files say, and the programs start as
installed, with no LD_LIBRARY_PATH: the installed sotto-fetch-model
writes tiny.en into the models directory (owned by sotto), the installed
`sotto transcribe` finds it there, the service unit's ExecStart= is run
word for word under systemd-socket-activate on the socket unit's
ListenStream=, sottod reads the installed default config and model, and
the installed `sotto stream` sends real speech through it. Also: every
file a complete install needs, the soname, pkg-config, man pages that
groff reads without a warning and that document every option and key,
and messages that name the installed commands, never the source tree's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, BUILD, REPO, SOTTO, SOTTOD, report
import wer as werlib

SAMPLE = "sense_and_sensibility_01_austen_64kb-0870.wav"


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


# The namespace both the install and the installed programs run in:
# "$1" (the staging prefix) over "$2" (the prefix), "$3" over "$4" (the
# localstatedir), "$5" (a copy of /etc) over /etc, and a tmpfs over /run;
# then the command after those five.
NAMESPACE = ('mount --bind "$1" "$2" && mount --bind "$3" "$4" && '
             'mount --bind "$5" /etc && mount -t tmpfs -o mode=0755 tmpfs /run '
             '&& shift 5 && exec "$@"')


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(staging directory, directories) after `meson install` as root with
    DESTDIR unset, in the namespace: its files in DEST + the real paths,
    and the copy of /etc it changed (the user sotto, ld.so.cache) in
    DEST/etc-copy."""
    dirs = meson_dirs()
    prefix, var = dirs["prefix"], dirs["localstatedir"]
    assert prefix not in ("/", "/usr") and var.startswith("/var/"), \
        f"prefix {prefix}, localstatedir {var}: this test binds a staging " \
        "directory over both and needs meson's defaults for /usr/local"
    dest = tmp_path_factory.mktemp("destdir")
    for d in (prefix, var):
        (dest / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    etc = dest / "etc-copy"
    cp = subprocess.run(["cp", "-a", "/etc", str(etc)], capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    env = {k: v for k, v in os.environ.items() if k != "DESTDIR"}
    cp = subprocess.run(["unshare", "--mount", "--propagation", "private",
                         "--", "sh", "-c", NAMESPACE, "sh",
                         f"{dest}{prefix}", prefix, f"{dest}{var}", var,
                         str(etc), "meson", "install", "-C", str(BUILD),
                         "--no-rebuild", "--quiet"],
                        capture_output=True, text=True, timeout=300, env=env)
    assert cp.returncode == 0, f"meson install failed:\n{cp.stdout}{cp.stderr}"
    # the install script's ldconfig, and nothing it had to warn about
    assert "libsotto" not in cp.stderr, cp.stderr
    return dest, dirs


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
    """A mount namespace in which the staging directory is the installed
    system."""

    def __init__(self, dest: Path, dirs: dict[str, str], workdir: Path):
        self.dest, self.dirs, self.dir = dest, dirs, workdir
        self.prefix = dirs["prefix"]
        for tool in ("unshare", "nsenter", "systemd-socket-activate"):
            assert shutil.which(tool), f"{tool} is missing (util-linux, systemd)"
        # Only what the install finds by itself: no model directory given,
        # no library path (the install's ldconfig must be enough).
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("SOTTO_MODEL_DIR", "LD_LIBRARY_PATH")}
        self.proc: subprocess.Popen | None = None

    def start(self, argv: list[str], sock: str, env: dict[str, str]) -> None:
        """argv under systemd-socket-activate -l sock, in the namespace."""
        var = self.dirs["localstatedir"]
        # systemd-socket-activate passes on only the variables named by -E.
        passed = [a for k in env for a in ("-E", k)]
        self.log_path = self.dir / "sottod.log"
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             "sh", "-c", NAMESPACE, "sh", f"{self.dest}{self.prefix}",
             self.prefix, f"{self.dest}{var}", var,
             str(self.dest / "etc-copy"), "sh", "-c",
             'mkdir -p "$(dirname "$1")" && exec systemd-socket-activate '
             '-l "$@"', "sh", sock, *passed, *argv],
            stdin=subprocess.DEVNULL, stdout=self.logf,
            stderr=subprocess.STDOUT, env=dict(self.env, **env), cwd="/")
        deadline = time.monotonic() + 20
        while not os.path.exists(f"/proc/{self.proc.pid}/root{sock}"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"no socket {sock} from {argv}:\n{self.log()}")
            time.sleep(0.05)

    def run(self, argv: list[str], timeout: float = 300,
            env: dict | None = None) -> subprocess.CompletedProcess:
        """argv inside the namespace (the installed paths)."""
        assert self.proc is not None
        return subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m",
                               "--", *argv], capture_output=True, text=True,
                              timeout=timeout, env=dict(self.env, **(env or {})),
                              cwd="/")

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




def test_installed_files(installed):
    """Everything a complete system needs, where the directories say."""
    dest, d = installed

    def f(path: str) -> Path:
        return dest / path.lstrip("/")

    want = [f"{d['bindir']}/sotto", f"{d['bindir']}/sotto-fetch-model",
            f"{d['sbindir']}/sottod", f"{d['includedir']}/sotto.h",
            f"{d['libdir']}/pkgconfig/sotto.pc",
            f"{d['sysconfdir']}/sotto/sottod.conf",
            f"{d['prefix']}/lib/sysusers.d/sotto.conf",
            f"{d['prefix']}/lib/tmpfiles.d/sotto.conf",
            f"{d['mandir']}/man1/sotto.1", f"{d['mandir']}/man1/sotto-fetch-model.1",
            f"{d['mandir']}/man5/sottod.conf.5", f"{d['mandir']}/man8/sottod.8",
            f"{d['datadir']}/sotto/models.lock",
            f"{d['datadir']}/sotto/tools/convert.py",
            f"{d['datadir']}/sotto/tools/families.json",
            f"{d['datadir']}/sotto/tools/requirements-convert.txt"]
    want += [f"{d['datadir']}/sotto/tools/{p.relative_to(REPO / 'tools')}"
             for p in [*sorted((REPO / "tools").glob("convert*.py")),
                       *sorted((REPO / "tools" / "sotto_gguf").glob("*.py"))]]
    missing = [p for p in want if not f(p).is_file()]
    assert not missing, f"not installed: {missing}"
    for exe in ("sotto", "sotto-fetch-model"):
        assert os.access(f(f"{d['bindir']}/{exe}"), os.X_OK)
    assert f(f"{d['sysconfdir']}/sotto/sottod.conf").read_text() == \
        (REPO / "conf" / "sottod.conf").read_text()

    # libsotto: the soname, its link, and the development link.
    lib = f(f"{d['libdir']}/libsotto.so.0")
    assert lib.is_symlink() and lib.resolve().is_file(), lib
    assert os.readlink(f(f"{d['libdir']}/libsotto.so")) == "libsotto.so.0"
    cp = subprocess.run(["readelf", "-d", str(lib)], capture_output=True,
                        text=True, timeout=60)
    assert "Library soname: [libsotto.so.0]" in cp.stdout, cp.stdout
    for exe in (f"{d['bindir']}/sotto", f"{d['sbindir']}/sottod"):
        cp = subprocess.run(["readelf", "-d", str(f(exe))],
                            capture_output=True, text=True, timeout=60)
        assert "Shared library: [libsotto.so.0]" in cp.stdout, exe
        assert "RUNPATH" not in cp.stdout and "RPATH" not in cp.stdout, exe

    # The service's user owns the models directory sotto and sottod read.
    tmpfiles = f(f"{d['prefix']}/lib/tmpfiles.d/sotto.conf").read_text()
    assert f"d {d['localstatedir']}/lib/sotto/models 0755 sotto sotto" in tmpfiles
    sysusers = f(f"{d['prefix']}/lib/sysusers.d/sotto.conf").read_text()
    assert "\nu sotto " in sysusers
    service = unit_dir(dest) / "sottod.service"
    assert unit_values(service, "User") == ["sotto"], service.read_text()


def help_options(*cmd: str) -> set[str]:
    cp = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    found = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cp.stdout))
    assert found, cp.stdout
    return found


def help_values(*cmd: str) -> dict[str, set[str]]:
    """Each long option of --help given as a list of values (auto|fp32),
    with those values."""
    cp = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    return {o: set(v.split("|")) for o, v in re.findall(
        r"(?<![\w-])--([a-z][a-z0-9-]*) ([a-z0-9]+(?:\|[a-z0-9]+)+)(?![\w|])",
        cp.stdout)}


def man_values(text: str, opt: str, macro: str = "Fl -") -> list[set[str]]:
    """The value lists the page gives opt (.It Fl -precision Cm a | b)."""
    return [set(v.strip() for v in m.split("|")) for m in re.findall(
        rf"{re.escape(macro + opt)}(?![\w-])(?: Ns = Ns)? Cm ([^\n]+)", text)]


def test_man_pages(installed):
    """groff reads each page without a warning (lintian's check), and each
    documents every long option of its program's --help, and sottod.conf(5)
    every key of the shipped config."""
    dest, d = installed
    man = dest / d["mandir"].lstrip("/")
    pages = {"man1/sotto.1", "man1/sotto-fetch-model.1", "man5/sottod.conf.5",
             "man8/sottod.8"}
    assert {str(p.relative_to(man)) for p in man.rglob("*.[0-9]")} == pages
    for page in sorted(pages):
        cp = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l",
                             "-Tutf8", "-Z", str(man / page)],
                            capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, LC_ALL="C.UTF-8",
                                     MANROFFSEQ="", MANWIDTH="80"))
        assert cp.returncode == 0 and not cp.stderr.strip(), f"{page}: {cp.stderr}"
        left = re.findall(r"@[a-z_]+@", (man / page).read_text())
        assert not left, f"{page}: unsubstituted {left}"

    def documented(page: str, options: set[str]) -> None:
        text = (man / page).read_text()
        missing = sorted(o for o in options
                         if not re.search(rf"Fl -{re.escape(o[2:])}(?![\w-])", text))
        assert not missing, f"{page} does not document {missing}"

    def same_values(page: str, values: dict[str, set[str]]) -> None:
        """Each option's values as --help lists them (--precision int8)."""
        text = (man / page).read_text()
        for opt, want in values.items():
            got = man_values(text, opt)
            assert want in got, f"{page}: --{opt} {sorted(want)}, not {got}"

    sotto = set()
    for cmd in ("transcribe", "stream", "listen", "status"):
        sotto |= help_options(str(SOTTO), cmd, "--help")
        same_values("man1/sotto.1", help_values(str(SOTTO), cmd, "--help"))
    documented("man1/sotto.1", sotto)
    documented("man8/sottod.8", help_options(str(SOTTOD), "--help"))
    sottod_values = help_values(str(SOTTOD), "--help")
    same_values("man8/sottod.8", sottod_values)
    assert "int8" in sottod_values["precision"], sottod_values
    assert sottod_values["precision"] in man_values(
        (man / "man5/sottod.conf.5").read_text(), "precision", "Ic "), \
        "sottod.conf.5: precision"
    documented("man1/sotto-fetch-model.1",
               help_options("python3", str(BUILD / "tools" / "sotto-fetch-model"), "--help"))
    conf = (REPO / "conf" / "sottod.conf").read_text()
    keys = set(re.findall(r"^#?([a-z_]+) =", conf, re.M))
    assert len(keys) >= 15, keys
    text = (man / "man5/sottod.conf.5").read_text()
    missing = sorted(k for k in keys if f".It Ic {k} Ns" not in text)
    assert not missing, f"sottod.conf.5 does not document {missing}"


PROGRAM = r"""
#include <stdio.h>
#include <sotto.h>

int
main(int argc, char **argv)
{
	char err[SOTTO_ERR_MAX];
	int rc = sotto_model_check(argv[1], argv[2], SOTTO_TASK_TRANSCRIBE, err);

	printf("%d %s\n", rc, rc == 0 ? "ok" : err);
	return 0;
}
"""


def owner(dest: Path, path: Path) -> str:
    """The name of path's owner in the installed system's /etc."""
    uid = path.stat().st_uid
    for line in (dest / "etc-copy" / "passwd").read_text().splitlines():
        f = line.split(":")
        if len(f) > 2 and f[2] == str(uid):
            return f[0]
    return str(uid)


def test_installed_system(installed, tiny_model, tmp_path):
    """Model, files, service and clients, as installed: sotto-fetch-model
    puts tiny.en where sotto and sottod look; `sotto transcribe` and the
    unit's ExecStart= (word for word, on the unit's socket, with the
    installed config) use it; a program builds against libsotto with
    pkg-config."""
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
    modeldir = f"{dirs['localstatedir']}/lib/sotto/models"

    root = InstalledRoot(dest, dirs, tmp_path)
    root.start(argv, listen[0], {})
    try:
        # The user and the models directory the install script made.
        assert owner(dest, dest / modeldir.lstrip("/")) == "sotto"
        # The converter runs in the test venv (SOTTO_PYTHON) and the pinned
        # wheel comes from the cache scripts/fetch-model filled: the
        # installed tool does the rest (tests/debian: its own venv).
        t0 = time.monotonic()
        cp = root.run([f"{dirs['bindir']}/sotto-fetch-model", "tiny.en"],
                      env={"SOTTO_PYTHON": str(REPO / ".venv" / "bin" / "python")})
        fetch_s = time.monotonic() - t0
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == f"{modeldir}/tiny.en.gguf", cp.stdout
        installed_model = dest / modeldir.lstrip("/") / "tiny.en.gguf"
        assert installed_model.stat().st_mode & 0o777 == 0o644
        # Silero VAD, which the default config gives live streams, came
        # along (sottod would not start without it).
        assert (installed_model.parent / "silero-vad.gguf").is_file(), cp.stderr
        assert f"{modeldir}/silero-vad.gguf" in cp.stderr, cp.stderr
        # Both belong to sottod's user, as the man page says, not to root.
        for m in (installed_model, installed_model.parent / "silero-vad.gguf"):
            assert owner(dest, m) == "sotto", m
        # The tool as installed: its version, and the interpreter of its #!
        # (meson's -Dpython3, by default /usr/bin/python3), not
        # /usr/bin/env's first python3 on PATH.
        cp = root.run([f"{dirs['bindir']}/sotto-fetch-model", "--version"])
        assert cp.stdout.strip() == f"sotto-fetch-model {meson_version()}", \
            cp.stdout + cp.stderr
        tool = dest / dirs["bindir"].lstrip("/") / "sotto-fetch-model"
        assert tool.read_text().split("\n", 1)[0] == f"#!{configured_python()}"

        # systemd's own check of the installed units, ExecStart= as is
        # (test_units.py can only point it at /bin/true).
        cp = root.run(["systemd-analyze", "verify", str(units / "sottod.socket"),
                       str(units / "sottod-http.socket"),
                       str(units / "sottod-wyoming.socket"),
                       str(units / "sottod.service")])
        ours = [l for l in (cp.stdout + cp.stderr).splitlines() if "sottod" in l]
        assert cp.returncode == 0 and not ours, cp.stdout + cp.stderr

        cp = root.run([f"{dirs['sbindir']}/sottod", "--check-config"])
        assert cp.returncode == 0, f"installed config: {cp.stderr}"
        assert "model = tiny.en" in cp.stdout

        ref = werlib.load_manifest(AUDIO_DIR)
        cp = root.run([f"{dirs['bindir']}/sotto", "transcribe", "-q",
                       str(AUDIO_DIR / SAMPLE)])
        assert cp.returncode == 0, cp.stderr
        w_file = werlib.wer([ref[SAMPLE]], [cp.stdout])
        assert w_file <= 0.10, f"WER {w_file:.2f}: {cp.stdout!r}"

        # Installed, what to run is the installed command, never one of
        # the source tree (scripts/, tools/, tests/).
        notgguf = tmp_path / "not-a-model.gguf"
        notgguf.write_bytes(b"RIFF" + bytes(60))
        said = []
        for cmd in (["sotto", "transcribe", "-m", "no-such-model", SAMPLE],
                    ["sotto", "transcribe", "-m", str(notgguf), SAMPLE],
                    ["sottod", "--check-config", "-m", "no-such-model"],
                    ["sotto-fetch-model", "large-v3-turbo", "-o", str(tmp_path)],
                    ["sotto-fetch-model", "--list"]):
            exe = dirs["sbindir" if cmd[0] == "sottod" else "bindir"]
            cp = root.run([f"{exe}/{cmd[0]}", *cmd[1:]])
            said.append(cp.stdout + cp.stderr)
        said = "\n".join(said)
        for want in ("run 'sotto-fetch-model no-such-model'",
                     "convert the model with sotto-fetch-model",
                     "sotto-fetch-model PATH --name large-v3-turbo",
                     "shapes verified with random weights"):
            assert want in said, f"{want!r} not in:\n{said}"
        for tree in ("scripts/fetch-model", "tools/convert.py", "tests/parity"):
            assert tree not in said, f"{tree!r} in:\n{said}"

        prog = tmp_path / "probe.c"
        prog.write_text(PROGRAM)
        cp = root.run(["sh", "-c", 'cc -o "$1" "$2" $(pkg-config --cflags '
                       '--libs sotto) && "$1" "$3" de && pkg-config '
                       '--modversion sotto', "sh", str(tmp_path / "probe"),
                       str(prog), f"{modeldir}/tiny.en.gguf"],
                      env={"PKG_CONFIG_PATH": f"{dirs['libdir']}/pkgconfig"})
        assert cp.returncode == 0, cp.stderr
        out = cp.stdout.splitlines()
        assert out[0].startswith("-1 model tiny.en is English-only"), out
        assert out[1] == meson_version(), out

        wav = AUDIO_DIR / "jfk.wav"
        t0 = time.monotonic()
        cp = root.run([f"{dirs['bindir']}/sotto", "stream", "--fast", "-f",
                       "jsonl", str(wav)])
        stream_s = time.monotonic() - t0
        assert cp.returncode == 0, f"installed sotto stream: {cp.stderr}\n{root.log()}"
        events = [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]
        text = "".join(s["text"] for e in events if e["type"] == "final"
                       for s in e["segments"])
        assert events and events[-1]["type"] == "end", events[-3:]
        w = werlib.wer([ref["jfk.wav"]], [text])
        assert w <= 0.10, f"WER {w:.2f}: {text!r}"
        log = root.log()
        assert "socket activation" in log and modeldir in log, log
    finally:
        rc = root.stop()
    assert rc == 0, f"sottod exited {rc} on SIGTERM:\n{root.log()}"
    report(f"installed: sotto-fetch-model tiny.en {fetch_s:.1f} s; "
           f"sotto transcribe {SAMPLE} WER {w_file:.2f}; ExecStart="
           f"{exec_start[0]} on {listen[0]}: jfk.wav WER {w:.2f} in "
           f"{stream_s:.1f} s")


def configured_python() -> str:
    """The installed sotto-fetch-model's interpreter, as meson chose it."""
    cp = subprocess.run(["meson", "introspect", str(BUILD), "--buildoptions"],
                        capture_output=True, text=True, timeout=60)
    opt = next(o["value"] for o in json.loads(cp.stdout)
               if o["name"] == "python3")
    if opt:
        return opt
    return "/usr/bin/python3" if os.path.isfile("/usr/bin/python3") else \
        shutil.which("python3")


def meson_version() -> str:
    cp = subprocess.run(["meson", "introspect", str(BUILD), "--projectinfo"],
                        capture_output=True, text=True, timeout=60)
    return json.loads(cp.stdout)["version"]
