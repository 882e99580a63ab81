"""The release build the benchmarks time (bench/run, bench/daemon,
bench/vad, bench/clients, bench/wyoming): set up if missing, the targets
compiled, and a warning when the build directory is not a release one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ensure_built(build: Path, targets: list[str], compile_: bool = True, options: list[str] = ()) -> None:
    """meson setup build (release, with the -D options) if it has no
    build.ninja, or set those options on it, then meson compile the
    targets (unless compile_ is false: --no-build); warn on standard error
    when the build is not a release one."""
    if compile_:
        if not (build / "build.ninja").is_file():
            # its output on standard error: standard output is the report
            subprocess.run(["meson", "setup", str(build), "--buildtype=release", *options], cwd=REPO, check=True,
                           stdout=sys.stderr)
        elif options:
            subprocess.run(["meson", "configure", str(build), *options], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
        print(f"bench: meson compile -C {build}", file=sys.stderr, flush=True)
        subprocess.run(["meson", "compile", "-C", str(build), *targets], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
    info = build / "meson-info" / "intro-buildoptions.json"
    if info.is_file():
        opts = json.loads(info.read_text())
        buildtype = next((o["value"] for o in opts if o["name"] == "buildtype"), "?")
        if buildtype != "release":
            print(f"bench: warning: {build} is a {buildtype} build, not release", file=sys.stderr, flush=True)
