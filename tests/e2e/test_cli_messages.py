"""What `sotto transcribe` tells the user: progress on a terminal that
ends at 100%, precision advice that this CPU can follow, and, run from
the build tree, the source tree's commands (installed, the installed
ones: tests/daemon/test_install.py).
"""

from __future__ import annotations

import os
import pty
import re
import subprocess

import pytest

from conftest import AUDIO_DIR, REPO, SOTTO_BIN, assert_no_crash

WAV = AUDIO_DIR / "goforward.wav"   # 2.8 s


def progress_lines(model, *extra) -> list[int]:
    """The percentages `sotto transcribe` draws on a terminal (stderr a
    pty), in order."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([str(SOTTO_BIN), "transcribe", "-m", str(model),
                              "-t", "2", "--beam-size", "1", *map(str, extra),
                              str(WAV)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:   # EIO: the other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    p.stdout.read()
    assert p.wait(300) == 0, out
    return [int(m) for m in re.findall(rb"goforward\.wav: +(\d+)%", out)]


@pytest.mark.parametrize("vad", [False, True], ids=["whole", "vad"])
def test_progress_ends_at_100(vad, tiny_model):
    shown = progress_lines(tiny_model, *(["--vad"] if vad else []))
    assert shown, "no progress on a terminal"
    assert shown[-1] == 100, f"progress ended at {shown[-1]}%: {shown}"
    assert shown == sorted(shown), shown


def test_int8_advice_this_cpu_can_follow(tiny_model):
    """A CPU without AVX2 (forced: sotto follows ONEDNN_MAX_CPU_ISA) has
    neither int8 path (AVX512-VNNI, AVX2) nor bf16: the advice is fp32
    (auto), never bf16. (With AVX2, int8 runs: test_int8_avx2.)"""
    cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-m", str(tiny_model),
                         "--precision", "int8", str(WAV)],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, ONEDNN_MAX_CPU_ISA="SSE41"))
    assert_no_crash(cp, "transcribe --precision int8")
    assert cp.returncode == 3, cp.stderr
    assert "int8" in cp.stderr and "AVX512-VNNI" in cp.stderr, cp.stderr
    assert "use auto, which is fp32 on this CPU" in cp.stderr, cp.stderr
    assert "bf16 or" not in cp.stderr and "use bf16" not in cp.stderr, \
        cp.stderr


def test_tree_names_the_tree_commands(tmp_path):
    """From the build tree the commands to run are the source tree's; the
    installed programs name the installed ones (test_install.py)."""
    notgguf = tmp_path / "x.gguf"
    notgguf.write_bytes(b"RIFF" + bytes(60))
    for model, want in (("no-such-model", "'scripts/fetch-model no-such-model'"),
                        (notgguf, "convert the model with scripts/fetch-model")):
        cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-m", str(model),
                             str(WAV)], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path,
                            env={k: v for k, v in os.environ.items()
                                 if k != "SOTTO_MODEL_DIR"})
        assert cp.returncode == 3, cp.stderr
        assert want in cp.stderr, cp.stderr
        assert "sotto-fetch-model" not in cp.stderr, cp.stderr
    assert REPO.joinpath("scripts", "fetch-model").is_file()
