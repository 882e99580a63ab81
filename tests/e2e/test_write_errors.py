"""A transcript that cannot be written is an error: `sotto transcribe`
says which file and why and exits 1, whether the output is standard
output, -o FILE or --output-dir on a full disk, and --output-dir leaves
no empty or partial file behind (an older transcript stays as it was).

/dev/full stands for a full disk; a real full file system is a small
tmpfs in a private mount namespace (as root, as CI runs), and a file size
limit (RLIMIT_FSIZE: EFBIG) does the same without root.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess

import pytest

from conftest import AUDIO_DIR, SOTTO_BIN, assert_no_crash

WAV = AUDIO_DIR / "goforward.wav"   # 2.8 s


def transcribe(model, *args, stdout=subprocess.PIPE, preexec=None,
               wrap=()) -> subprocess.CompletedProcess:
    cmd = [*wrap, str(SOTTO_BIN), "transcribe", "-q", "-m", str(model),
           "-l", "en", "-t", "2", "--beam-size", "1", *map(str, args)]
    cp = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=stdout,
                        stderr=subprocess.PIPE, text=True, timeout=300,
                        preexec_fn=preexec)
    assert_no_crash(cp, "transcribe")
    return cp


def test_output_file_full(tiny_model):
    cp = transcribe(tiny_model, "-o", "/dev/full", WAV)
    assert cp.returncode == 1, cp.stderr
    assert "/dev/full: No space left on device" in cp.stderr, cp.stderr


@pytest.mark.parametrize("fmt", ["txt", "json", "srt"])
def test_stdout_full(fmt, tiny_model):
    with open("/dev/full", "w") as full:
        cp = transcribe(tiny_model, "-f", fmt, WAV, WAV, stdout=full)
    assert cp.returncode == 1, cp.stderr
    lines = cp.stderr.splitlines()
    # one message, and the second file is not decoded for nothing
    assert lines == ["sotto transcribe: standard output: No space left on "
                     "device"], cp.stderr


def test_help_to_full_stdout():
    with open("/dev/full", "w") as full:
        cp = subprocess.run([str(SOTTO_BIN), "--help"], stdout=full,
                            stderr=subprocess.PIPE, text=True, timeout=60)
    assert cp.returncode == 1, cp.stderr
    assert "standard output: No space left on device" in cp.stderr


def _no_leftovers(d, keep=()):
    left = sorted(p.name for p in d.iterdir() if p.name not in keep)
    assert left == [], f"left behind in {d}: {left}"


def _fsize_limit():
    """In the child: files may not grow past 1 byte (EFBIG, SIGXFSZ
    ignored so that write() fails instead of killing it)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))


def test_output_dir_file_too_large(tiny_model, tmp_path):
    old = tmp_path / "goforward.srt"
    old.write_text("1\n00:00:00,000 --> 00:00:01,000\nolder\n\n")
    cp = transcribe(tiny_model, "-f", "srt", "--output-dir", tmp_path, WAV,
                    preexec=_fsize_limit)
    assert cp.returncode == 1, cp.stderr
    assert f"{old}: File too large" in cp.stderr, cp.stderr
    assert str(WAV) in cp.stderr, cp.stderr
    assert old.read_text().endswith("older\n\n"), "the older transcript changed"
    _no_leftovers(tmp_path, keep={"goforward.srt"})


def test_output_dir_full_disk(tiny_model, tmp_path):
    """A tmpfs filled to its last block: no space for the transcript, and
    nothing of it left there (listed before the namespace, and with it
    the mount, is gone)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("mounting a tmpfs needs root (CI runs as root); "
                    "test_output_dir_file_too_large covers the same path")
    d = tmp_path / "full"
    d.mkdir()
    script = ('mount -t tmpfs -o size=16k tmpfs "$1" && '
              'head -c 16384 /dev/zero > "$1/filler" 2>/dev/null; '
              'dir=$1; shift; "$@"; rc=$?; ls -A "$dir"; exit $rc')
    cp = transcribe(tiny_model, "-f", "json", "--output-dir", d, WAV,
                    wrap=["unshare", "--mount", "--propagation", "private",
                          "--", "sh", "-c", script, "sh", str(d)])
    assert cp.returncode == 1, cp.stderr
    assert f"{d}/goforward.json: No space left on device" in cp.stderr, \
        cp.stderr
    assert cp.stdout.split() == ["filler"], cp.stdout
