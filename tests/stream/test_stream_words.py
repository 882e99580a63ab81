"""Word timestamps of a stream (sotto_stream_params.word_timestamps,
stream-driver -w): every final has words, they spell its text, they go
forward in time, and they are faster-whisper's word_timestamps=True
words on the same weights (tests/e2e/refs.py, cached) within a median of
40 ms. A stream aligns its sliding windows (the committed text forced
as a prefix) where faster-whisper aligns 30 s windows, so single words
at a window's edge may be further off: the p90 and the largest
difference are reported, not bounded.

The words are those of the whole-set run (conftest.py's runs, streamed
with -w). That aligning changes nothing else, batched as sottod steps
streams, is test_stream.py::test_step_many_same_as_alone's check.
"""

from __future__ import annotations

import difflib
import statistics

from conftest import AUDIO_DIR, report
import refs as refslib

FILES = ["jfk.wav", "LJ001-0001_to_LJ001-0017_longform.wav",
         "sense_and_sensibility_01_austen_64kb-0870.wav"]
MEDIAN_MAX = 0.040


def _matched_diffs(ref_words: list[dict], words: list[dict]) -> tuple[list[float], int]:
    a = [w["word"].strip().lower() for w in ref_words]
    b = [w["word"].strip().lower() for w in words]
    d, n = [], 0
    for op, i1, i2, j1, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            n += i2 - i1
            for k in range(i2 - i1):
                d += [abs(ref_words[i1 + k][x] - words[j1 + k][x]) for x in ("start", "end")]
    return d, n


def test_stream_words(runs):
    all_d = []
    for f in (AUDIO_DIR / name for name in FILES):
        finals = [e for e in runs["stream"][f.name] if e["type"] == "final"]
        assert finals, f.name
        words = []
        for e in finals:
            assert "words" in e, e
            assert "".join(w["word"] for w in e["words"]) == e["text"], e
            words += e["words"]
        starts = [w["start"] for w in words]
        assert starts == sorted(starts), f"{f.name}: word starts go back"
        ref = refslib.reference(f, "tiny.en", 5, words=True)
        rw = [w for s in ref["segments"] for w in s["words"]]
        d, n = _matched_diffs(rw, words)
        s = sorted(d)
        report(f"stream words {f.name}: {n} of {len(rw)} words as faster-whisper's, "
               f"|start/end| median {statistics.median(s) * 1000:.0f} ms, p90 "
               f"{s[int(0.9 * (len(s) - 1))] * 1000:.0f} ms, max {s[-1] * 1000:.0f} ms")
        assert n >= 0.85 * len(rw), f"{f.name}: {n} of {len(rw)} words"
        all_d += d
    assert statistics.median(all_d) < MEDIAN_MAX
