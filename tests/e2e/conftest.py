"""Shared fixtures and helpers for sotto's end-to-end tests.

Everything here drives the real binary (build/client/sotto) with real models
(scripts/fetch-model) on the real speech in ../shared/audio (read in place).
A missing binary, model or reference package FAILS the tests: nothing skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import refs as refslib  # noqa: E402
import wer as werlib  # noqa: E402
from wer import AUDIO_DIR, normalise  # noqa: E402,F401

REPO = HERE.parents[1]
SOTTO_BIN = Path(os.environ.get("SOTTO_BIN", REPO / "build" / "client" / "sotto"))
VENV_PY = REPO / ".venv" / "bin" / "python"

try:
    MANIFEST = werlib.load_manifest(AUDIO_DIR)
except OSError:
    MANIFEST = {}
# Parametrisation ids; a missing manifest gives one id whose test fails.
MANIFEST_FILES = list(MANIFEST) or ["<manifest.tsv missing>"]

# Results collected during the session for the terminal summary.
REPORT: dict = {"wer": None, "lines": []}


def report(line: str) -> None:
    """Add a line to the 'sotto e2e report' section of the terminal summary."""
    REPORT["lines"].append(line)


# --- running the binary ------------------------------------------------------

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", "Segmentation fault")


def assert_no_crash(cp: subprocess.CompletedProcess, what: str = "") -> None:
    rc = cp.returncode
    err = cp.stderr or ""
    if rc < 0:
        pytest.fail(f"sotto {what} killed by signal {signal.Signals(-rc).name}\n"
                    f"args: {cp.args}\nstderr:\n{err[-4000:]}")
    if rc >= 126:
        pytest.fail(f"sotto {what} exited {rc} (crash/abort?)\nargs: {cp.args}\n"
                    f"stderr:\n{err[-4000:]}")
    for m in SANITIZER_MARKERS:
        if m in err:
            pytest.fail(f"sotto {what}: '{m}' on stderr\nstderr:\n{err[-4000:]}")


def run_sotto(args, *, timeout: float = 900, check_crash: bool = True,
              cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `sotto transcribe ARGS` (extra environment env) and return the
    CompletedProcess (text)."""
    if not (SOTTO_BIN.is_file() and os.access(SOTTO_BIN, os.X_OK)):
        pytest.fail(f"{SOTTO_BIN} is missing: build it with scripts/setup")
    cmd = [str(SOTTO_BIN), "transcribe", *[str(a) for a in args]]
    try:
        cp = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, errors="replace",
                            timeout=timeout,
                            env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"sotto timed out after {timeout} s: {cmd}\n"
                    f"stderr:\n{(e.stderr or b'')[-4000:]!r}")
    if check_crash:
        assert_no_crash(cp, " ".join(cmd[2:])[:200])
    return cp


def parse_json_lines(stdout: str) -> list[dict]:
    """One JSON object per input file, one per line."""
    out = []
    for i, line in enumerate(stdout.splitlines()):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            pytest.fail(f"stdout line {i + 1} is not JSON ({e}): {line[:300]!r}")
    return out


def by_name(objs: list[dict]) -> dict[str, dict]:
    return {Path(o["file"]).name: o for o in objs}


def text_tokens(obj: dict, eot: int) -> list[int]:
    """The text tokens (ids < eot) of all segments, concatenated."""
    return [t for s in obj.get("segments", []) for t in s.get("tokens", []) if t < eot]


def squash(text: str) -> str:
    return " ".join(text.split())


def word_diff(a: str, b: str, la: str = "reference", lb: str = "sotto") -> str:
    import difflib

    aw, bw = a.split(), b.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, aw, bw).get_opcodes():
        if op == "equal":
            continue
        out.append(f"  {op}: {la}[{i1}:{i2}] {' '.join(aw[i1:i2])!r} -> "
                   f"{lb}[{j1}:{j2}] {' '.join(bw[j1:j2])!r}")
    return "\n".join(out) or "  (same words; whitespace differs)"


# --- models -------------------------------------------------------------------

def _fetch_model(name: str) -> Path:
    env = dict(os.environ)
    if VENV_PY.exists():
        env.setdefault("SOTTO_PYTHON", str(VENV_PY))
    script = REPO / "scripts" / "fetch-model"
    if not script.exists():
        pytest.fail(f"{script} is missing")
    try:
        cp = subprocess.run([str(script), name], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/fetch-model {name} timed out")
    lines = [ln for ln in cp.stdout.splitlines() if ln.strip()]
    if cp.returncode != 0 or not lines:
        pytest.fail(f"scripts/fetch-model {name} failed (exit {cp.returncode})\n"
                    f"stdout:\n{cp.stdout[-2000:]}\nstderr:\n{cp.stderr[-4000:]}")
    path = Path(lines[-1].strip())
    if not path.is_absolute():
        path = REPO / path
    if not path.is_file():
        pytest.fail(f"scripts/fetch-model {name} printed {path}, which does not exist")
    return path


@pytest.fixture(scope="session")
def sotto_bin() -> Path:
    if not (SOTTO_BIN.is_file() and os.access(SOTTO_BIN, os.X_OK)):
        pytest.fail(f"{SOTTO_BIN} is missing: build it with scripts/setup")
    return SOTTO_BIN


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return _fetch_model("tiny.en")


@pytest.fixture(scope="session")
def base_model() -> Path:
    return _fetch_model("base")


@pytest.fixture(scope="session")
def manifest() -> dict[str, str]:
    if not MANIFEST:
        pytest.fail(f"{AUDIO_DIR}/manifest.tsv is missing or empty")
    missing = [f for f in MANIFEST if not (AUDIO_DIR / f).is_file()]
    if missing:
        pytest.fail(f"files of manifest.tsv missing in {AUDIO_DIR}: {missing}")
    return MANIFEST


@pytest.fixture(scope="session")
def audio_files(manifest) -> list[Path]:
    return [AUDIO_DIR / f for f in manifest]


# --- reference outputs (faster-whisper, same weights) -------------------------

def _refs(audio_files, beam: int) -> dict[str, dict]:
    return {p.name: refslib.reference(p, "tiny.en", beam) for p in audio_files}


@pytest.fixture(scope="session")
def ref_greedy(audio_files) -> dict[str, dict]:
    REPORT["ref_greedy"] = r = _refs(audio_files, 1)
    return r


@pytest.fixture(scope="session")
def ref_beam5(audio_files) -> dict[str, dict]:
    REPORT["ref_beam5"] = r = _refs(audio_files, 5)
    return r


# --- sotto over the whole set, once per configuration --------------------------

def _halves(files: list[Path]) -> list[list[Path]]:
    """files in two lists of about the same bytes, largest first."""
    out: list[list[Path]] = [[], []]
    size = [0, 0]
    for p in sorted(files, key=lambda p: -p.stat().st_size):
        i = size.index(min(size))
        out[i].append(p)
        size[i] += p.stat().st_size
    return [h for h in out if h]


def _sotto_set(sotto_bin, model: Path, audio_files, *extra) -> dict[str, dict]:
    # Two processes of one thread, half the set each: a third faster than
    # one of two threads here, and the same transcripts (1 and 2 threads
    # give the same words, segment and word times on the set, AVX2 and
    # AVX-512; fp32 without word times identical JSON, the rest
    # probabilities that differ in the last bits).
    with ThreadPoolExecutor(2) as pool:
        cps = list(pool.map(lambda half: run_sotto(
            ["-m", model, "-l", "en", "-f", "json", "-t", "1", "-q", *extra,
             *half], timeout=1800), _halves(list(audio_files))))
    got = {}
    for cp in cps:
        if cp.returncode != 0:
            pytest.fail(f"sotto {' '.join(map(str, extra))} exited {cp.returncode}\n"
                        f"stderr:\n{cp.stderr[-4000:]}")
        got.update(by_name(parse_json_lines(cp.stdout)))
    missing = [p.name for p in audio_files if p.name not in got]
    if missing:
        pytest.fail(f"no JSON output for {missing}\nstderr:\n{cp.stderr[-2000:]}")
    return got


@pytest.fixture(scope="session")
def sotto_greedy(sotto_bin, tiny_model, audio_files) -> dict[str, dict]:
    REPORT["sotto_greedy"] = r = _sotto_set(sotto_bin, tiny_model, audio_files,
                                            "--precision", "fp32", "--beam-size", "1")
    return r


@pytest.fixture(scope="session")
def sotto_beam5(sotto_bin, tiny_model, audio_files) -> dict[str, dict]:
    REPORT["sotto_beam5"] = r = _sotto_set(sotto_bin, tiny_model, audio_files,
                                           "--precision", "fp32", "--beam-size", "5")
    return r


@pytest.fixture(scope="session")
def sotto_bf16(sotto_bin, tiny_model, audio_files) -> dict[str, dict]:
    REPORT["sotto_bf16"] = r = _sotto_set(sotto_bin, tiny_model, audio_files,
                                          "--precision", "bf16", "--beam-size", "1")
    return r


@pytest.fixture(scope="session")
def sotto_int8(sotto_bin, tiny_model, audio_files) -> dict[str, dict]:
    REPORT["sotto_int8"] = r = _sotto_set(sotto_bin, tiny_model, audio_files,
                                          "--precision", "int8", "--beam-size", "1")
    return r


# --- the report in the terminal summary -------------------------------------------

def _wer_table() -> list[str]:
    cols = [("ref greedy", "ref_greedy"), ("sotto greedy", "sotto_greedy"),
            ("ref beam5", "ref_beam5"), ("sotto beam5", "sotto_beam5"),
            ("sotto bf16", "sotto_bf16"), ("sotto int8", "sotto_int8")]
    cols = [(t, k) for t, k in cols if REPORT.get(k)]
    if not cols or not MANIFEST:
        return []
    w = max(len(f) for f in MANIFEST)
    lines = ["WER (tiny.en, Whisper EnglishTextNormalizer; errors/words per file)",
             f"{'file':<{w}}  words  " + "  ".join(f"{t:>12}" for t, _ in cols)]
    tot_e = {k: 0 for _, k in cols}
    tot_n = 0
    for f, ref_text in MANIFEST.items():
        n = None
        cells = []
        for _, k in cols:
            obj = REPORT[k].get(f)
            if obj is None:
                cells.append(f"{'-':>12}")
                continue
            e, n = werlib.counts(ref_text, obj.get("text", ""))
            tot_e[k] += e
            cells.append(f"{e:>12}")
        n = n if n is not None else len(normalise(ref_text).split())
        tot_n += n
        lines.append(f"{f:<{w}}  {n:>5}  " + "  ".join(cells))
    lines.append(f"{'WER':<{w}}  {tot_n:>5}  " + "  ".join(
        f"{tot_e[k] / tot_n:>12.4f}" for _, k in cols))
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = []
    try:
        lines += _wer_table()
    except Exception as e:  # the report must never hide the test results
        lines.append(f"(WER table failed: {e!r})")
    lines += REPORT["lines"]
    if lines:
        terminalreporter.section("sotto e2e report")
        for ln in lines:
            terminalreporter.write_line(ln)
