"""Non-speech made with sox, 6 s each at 16 kHz mono s16: noise of three
colours, a tone, a chord, a plucked chord, clicks and a plucked tune. Both
the stream's VAD tests (tests/stream) and the daemon's (tests/daemon) feed
them, so that they judge the same sounds."""

from __future__ import annotations

import subprocess
from pathlib import Path

SECONDS = 6
_R = ("-r", 16000, "-c", 1, "-b", 16)


def sox(*args) -> None:
    cp = subprocess.run(["sox", *map(str, args)], capture_output=True,
                        text=True, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, f"sox {args}: {cp.stderr}"


def make(d: Path) -> dict[str, Path]:
    """Write the signals into directory d; name -> path."""
    out = {}
    for kind in ("whitenoise", "pinknoise", "brownnoise"):
        out[kind] = d / f"{kind}.wav"
        sox("-n", *_R, out[kind], "synth", SECONDS, kind, "vol", 0.5)
    out["tone"] = d / "tone.wav"
    sox("-n", *_R, out["tone"], "synth", SECONDS, "sine", 440, "vol", 0.5)
    out["chord"] = d / "chord.wav"
    sox("-n", "-r", 16000, "-b", 16, out["chord"], "synth", SECONDS,
        "sine", 261.63, "sine", 329.63, "sine", 392.0, "remix", "-",
        "vol", 0.5)
    out["plucked-chord"] = d / "plucked.wav"
    sox("-n", "-r", 16000, "-b", 16, out["plucked-chord"], "synth", SECONDS,
        "pluck", "C4", "pluck", "E4", "pluck", "G4", "remix", "-", "vol", 0.6)
    click = d / "click.wav"
    sox("-n", *_R, click, "synth", 0.004, "square", 1000, "pad", 0, 0.246)
    out["clicks"] = d / "clicks.wav"
    sox(click, out["clicks"], "repeat", 23)
    notes = []
    for i, semis in enumerate([0, 4, 7, 12, 7, 4, 0, -5, 0, 4, 7, 4]):
        n = d / f"note{i}.wav"
        sox("-n", *_R, n, "synth", 0.5, "pluck", f"%{semis}",
            "fade", 0, 0.5, 0.1)
        notes.append(n)
    out["tune"] = d / "tune.wav"
    sox(*notes, out["tune"])
    return out
