"""Fixtures for the streaming tests: build/tests/stream/stream-driver over
../shared/audio (read in place) and `sotto transcribe` on the same files,
and the helpers the test_stream*.py files share (the driver's events by
type, a file's samples and raw s16le for the driver's stdin).
A missing binary, model or audio FAILS the tests: nothing skips."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import wer as werlib  # noqa: E402

DRIVER = Path(os.environ.get("SOTTO_STREAM_DRIVER",
                             REPO / "build" / "tests" / "stream" / "stream-driver"))
SOTTO_BIN = Path(os.environ.get("SOTTO_BIN", REPO / "build" / "client" / "sotto"))
MODEL = REPO / "models" / "tiny.en.gguf"
AUDIO_DIR = werlib.AUDIO_DIR
# One compute thread per process and two processes at a time: steadier
# than two OpenMP threads each on a shared 2-core machine.
THREADS = os.environ.get("SOTTO_TEST_THREADS", "1")
JOBS = int(os.environ.get("SOTTO_TEST_JOBS", "2"))
STEP_MS = 2000          # the whole-set run
FINE_STEP_MS = 1000     # jfk and the silence checks
LONG_FORM = "LJ001-0001_to_LJ001-0017_longform.wav"

REPORT: list[str] = []


def report(line: str) -> None:
    REPORT.append(line)


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("sotto stream report")
        for line in REPORT:
            terminalreporter.write_line(line)


def _need(path: Path, what: str) -> None:
    if not path.is_file():
        pytest.fail(f"{what} {path} is missing: meson compile -C build, "
                    f"scripts/fetch-model tiny.en")


def run_driver(source, step_ms: int, stdin: bytes | None = None,
               extra: tuple = ()) -> list[dict]:
    """Events of the driver on a file (or raw s16le stdin with source '-';
    a list of files with extra -B or -S)."""
    _need(DRIVER, "stream driver")
    _need(MODEL, "model")
    sources = source if isinstance(source, list) else [source]
    cmd = [str(DRIVER), "-t", THREADS, "-s", str(step_ms), *extra,
           str(MODEL), *map(str, sources)]
    cp = subprocess.run(cmd, input=stdin if stdin is not None else b"",
                        capture_output=True, timeout=900)
    if cp.returncode != 0:
        pytest.fail(f"{cmd} exited {cp.returncode}\n"
                    f"{cp.stderr.decode(errors='replace')[-3000:]}")
    return [json.loads(ln) for ln in cp.stdout.decode().splitlines() if ln]


def run_transcribe(files: list[Path]) -> dict[str, str]:
    _need(SOTTO_BIN, "sotto")
    cmd = [str(SOTTO_BIN), "transcribe", "-m", str(MODEL), "-l", "en", "-f",
           "json", "-q", "-t", THREADS, "--beam-size", "1", *map(str, files)]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                        stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        pytest.fail(f"{cmd} exited {cp.returncode}\n{cp.stderr[-3000:]}")
    out = {}
    for ln in cp.stdout.splitlines():
        if ln.strip():
            o = json.loads(ln)
            out[Path(o["file"]).name] = o["text"]
    return out


def finals(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "final"]


def final_text(events: list[dict]) -> str:
    return "".join(e["text"] for e in finals(events))


def steps(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "step"]


def _pcm(name: str) -> list[int]:
    import wave

    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2), name
        raw = w.readframes(w.getnframes())
    return list(struct.unpack(f"<{len(raw) // 2}h", raw))


def _raw(samples) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


@pytest.fixture(scope="session")
def manifest() -> dict[str, str]:
    try:
        m = werlib.load_manifest(AUDIO_DIR)
    except OSError as e:
        pytest.fail(f"{AUDIO_DIR}/manifest.tsv: {e}")
    missing = [f for f in m if not (AUDIO_DIR / f).is_file()]
    if not m or missing:
        pytest.fail(f"manifest empty or files missing in {AUDIO_DIR}: {missing}")
    return m


@pytest.fixture(scope="session")
def runs(manifest) -> dict:
    """Every file through the stream (STEP_MS, with word timestamps, as
    sottod streams: test_stream_words checks the words, and
    test_step_many_same_as_alone that they change nothing else) and
    through transcribe, two processes at a time; plus jfk at FINE_STEP_MS."""
    files = [AUDIO_DIR / f for f in manifest]
    # Longest first so the pool stays busy.
    files.sort(key=lambda p: -p.stat().st_size)
    with ThreadPoolExecutor(JOBS) as pool:
        tr = pool.submit(run_transcribe, files)
        fine = pool.submit(run_driver, AUDIO_DIR / "jfk.wav", FINE_STEP_MS)
        st = {p.name: pool.submit(run_driver, p, STEP_MS, None, ("-w",))
              for p in files}
        return {"transcribe": tr.result(),
                "stream": {k: v.result() for k, v in st.items()},
                "jfk_fine": fine.result()}
