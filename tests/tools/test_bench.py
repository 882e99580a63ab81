"""Smoke test of bench/run's random-weight path (issue 17 item 4): a random
tiny (tools/families.json) made, converted and measured by sotto and
faster-whisper int8 with the micro-benchmarks and the fixed-token file,
and both again held to AVX2 (sotto-avx2 from a build without AVX-512,
fw-int8-avx2).
Checks the harness end to end, not the figures (whisper.cpp is left out:
building it takes minutes; `bench/run --random` runs it). sotto runs in
the precisions this CPU has (tests/cpu.py): bf16 (and int8) where it has
them, fp32 where it has not, as bench/run's defaults do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cpu

REPO = Path(__file__).resolve().parents[2]
PY = os.environ.get("SOTTO_PYTHON") or sys.executable
BUILD = REPO / "build"


def clone_levels(build: Path) -> set:
    """The x86 levels of the target_clones in a build's libsotto."""
    lib = next(p for p in (build / "lib").glob("libsotto.so.*") if p.is_file() and not p.is_symlink())
    syms = subprocess.run(["nm", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return {level for level in ("v3", "v4") if f".arch_x86_64_{level}" in syms}


def test_bench_random_tiny(tmp_path):
    assert (BUILD / "bench" / "sotto-bench").is_file(), "build/ is not compiled (scripts/setup)"
    best = f"sotto-{cpu.default_precision()}"
    tools = [best] + (["sotto-int8"] if cpu.int8() and best != "sotto-int8" else []) + ["fw-int8"]
    # the pair that stands in for an AVX2-only CPU on any machine: sotto
    # from a build without AVX-512 (bench.py sets it up when missing; here
    # it is made beforehand, as --no-build compiles nothing)
    tools += ["sotto-avx2", "fw-int8-avx2"]
    avx2 = tmp_path / "build-avx2"
    subprocess.run(["meson", "setup", avx2, "--buildtype=release", "-Dmax_isa=avx2", "-Dtests=disabled"],
                   cwd=REPO, check=True, capture_output=True)
    subprocess.run(["meson", "compile", "-C", avx2, "bench/sotto-bench", "client/sotto:executable"],
                   check=True, capture_output=True)
    assert clone_levels(avx2) == {"v3"} and clone_levels(BUILD) == {"v3", "v4"}
    docs = (REPO / "docs" / "benchmarks.md").read_bytes()
    out = tmp_path / "samples.json"
    cp = subprocess.run([PY, REPO / "bench" / "bench.py", "--random", "--models", "tiny", "--quick", "--no-docs",
                         "--build-dir", BUILD, "--avx2-build-dir", avx2, "--no-build", "--tools", ",".join(tools),
                         "--fixed-tokens", "20",
                         "--json", out], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                        env=dict(os.environ, SOTTO_PYTHON=PY))
    assert cp.returncode == 0, cp.stderr[-3000:]
    report = cp.stdout
    assert "Random weights (seed 0" in report
    assert all(f"| {label} |" in report for label in (f"sotto {cpu.default_precision()}", "faster-whisper int8"))
    assert ("| sotto int8 |" in report) == ("sotto-int8" in tools)
    assert "| sotto auto, AVX2 forced vs faster-whisper int8, AVX2 forced |" in report
    assert "ONEDNN_MAX_CPU_ISA=AVX2 " + str(avx2 / "bench" / "sotto-bench") in report
    assert f"- sotto-avx2: build {avx2} (meson -Dmax_isa=avx2" in report
    assert "CT2_FORCE_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 " in report
    assert "Fixed-token file (60 s, 20 tokens per 30 s window" in report
    assert "WER" not in report  # random weights: no text measured
    res = json.loads(out.read_text())["results"]["tiny"]
    for tool in tools:
        r = {k: v[0] for k, v in res[tool].items()}
        assert 0 < r["encoder_s"] < 60 and 0 < r["step1_ms"] < 1000, (tool, r)
        assert 0 < r["fixed_enc_s"] < 60 and 0 < r["fixed_tok_ms"] < 1000, (tool, r)
        # the process's own peak: a random tiny is ~75 MB of f16 weights
        assert 60 < r["fixed_rss_mb"] < 2000, (tool, r)
        assert r["fixed_wall_s"] > r["fixed_load_s"] + 2 * r["fixed_enc_s"], (tool, r)
    assert (REPO / "docs" / "benchmarks.md").read_bytes() == docs


def test_sotto_bench_arguments(tmp_path):
    """sotto-bench says what it takes and refuses what it does not, rather
    than measuring something else than asked (an unknown option was
    ignored, a bad precision ran auto, --step-rounds 0 ran one round).
    The arguments are checked before the model is read: a missing model
    with good arguments gets as far as the load (exit 3, its message)."""
    exe = BUILD / "bench" / "sotto-bench"
    model = tmp_path / "missing.gguf"
    cp = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0 and "usage: sotto-bench MODEL" in cp.stdout, cp
    for args, said in ((["--runz", "3"], "--runz is not an option"),
                       (["--runs", "0"], "--runs takes a whole number from 1 to 63"),
                       (["--step-rounds", "x"], "--step-rounds takes a whole number"),
                       (["--precision", "int9"], "int9 is not a precision"),
                       (["--threads"], "--threads needs a value")):
        cp = subprocess.run([exe, model, *args], capture_output=True, text=True, timeout=30)
        assert cp.returncode == 2 and said in cp.stderr, (args, cp.returncode, cp.stderr)
    cp = subprocess.run([exe, model, "--load-only", "--precision", "fp32", "--runs", "2"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 3 and "missing.gguf" in cp.stderr, cp
