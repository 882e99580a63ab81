"""The stages scripts/test runs before pytest (setup, models, the C unit
tests in both builds, the fuzz targets) pass.

scripts/test runs every stage even when one fails and exits non-zero if any
did, but pytest's summary line is the last line printed: without this test
a failed fuzz stage ended in "508 passed" and an exit status of 1, and CI
that keeps only the end of the output could not say what failed. Here it is
a failure with the stage's name and the end of its log."""

import os
from pathlib import Path

import pytest

TAIL_LINES = 60


def _tail(log: Path) -> list[str]:
    if not log.exists():
        return [f"(no log at {log})"]
    lines = log.read_text(errors="replace").splitlines()
    # libFuzzer's progress lines say nothing about what failed.
    lines = [l for l in lines if not l.startswith("#") or "DONE" in l]
    return lines[-TAIL_LINES:]


def _last_words(lines: list[str]) -> str:
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return "(empty log)"


def test_stages_before_pytest():
    d = os.environ.get("SOTTO_STAGES_DIR")
    if not d:
        pytest.skip("run by scripts/test, which runs the stages before pytest")
    failed_list = Path(d) / "failed"
    if not failed_list.exists():
        return
    names = [n for n in failed_list.read_text().splitlines() if n]
    tails = {n: _tail(Path(d) / (n.replace(" ", "_") + ".log")) for n in names}
    heads = "; ".join(f"{n}: {_last_words(t)}" for n, t in tails.items())
    body = []
    for name, tail in tails.items():
        body.append(f"--- the end of {name}'s log:")
        body.extend("    " + l for l in tail)
    pytest.fail(f"stages failed before pytest: {heads}\n"
                f"logs in {d}\n" + "\n".join(body), pytrace=False)
