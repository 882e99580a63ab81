"""bench/diarize's pieces that need neither torch nor pyannote (CI has
neither; `bench/diarize --quick` runs the rest): conversations with
overlapping turns mixed (tests/e2e/conversation.py), the words of a
labelling made into speech turns for the DER (bench/diarize_ref.py), and
the words right with those in an overlap left out, on made-up tones and
words."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
# tests/e2e's conftest puts it on the path in a whole run; bench/ is not
# put there: its wyoming.py would hide the wyoming package from the tests
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import conversation as conv  # noqa: E402

_spec = importlib.util.spec_from_file_location("diarize_ref", REPO / "bench" / "diarize_ref.py")
diarize_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(diarize_ref)

RATE = conv.RATE


def tone(freq: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_overlapping_turns_are_mixed(tmp_path):
    speech = {"a": [tone(200, 2.0)], "b": [tone(300, 3.0)], "c": [tone(500, 2.5)]}
    turns = conv.assemble(["a", "b", "c"], tmp_path / "c.wav", gaps_s=(0.5, -0.4, 0.3), speech=speech)
    assert [t.speaker for t in turns] == ["a", "b", "c"]
    assert [(t.start, t.end) for t in turns] == [(0.5, 2.5), (2.1, 5.1), (5.4, 7.9)]
    assert speech["a"] and speech["b"], "the caller's phrases are not used up"
    pcm = conv.read_wav(tmp_path / "c.wav")
    assert len(pcm) == int(8.4 * RATE)
    s = slice(int(2.1 * RATE), int(2.5 * RATE))
    both = np.zeros(len(pcm), np.float32)
    both[int(0.5 * RATE):int(2.5 * RATE)] += tone(200, 2.0)
    both[int(2.1 * RATE):int(5.1 * RATE)] += tone(300, 3.0)
    assert np.max(np.abs(pcm[s] - both[s])) < 2 / 32767, "the overlap holds both voices"
    assert np.max(np.abs(pcm[int(5.1 * RATE):int(5.4 * RATE)])) == 0, "a gap is silent"
    assert abs(conv.overlap_s(turns) - 0.4) < 1e-9


def words(*spans) -> list[dict]:
    return [{"word": f"w{i}", "start": a, "end": b} for i, (a, b) in enumerate(spans)]


def test_words_become_turns():
    ws = words((0.0, 0.4), (0.6, 1.0), (1.6, 2.0), (2.1, 2.5), (2.6, 3.0))
    got = diarize_ref.turns_of_words(ws, ["x", "x", "x", "y", "x"])
    # joined across the 0.2 s pause, not across the 0.6 s one, nor across
    # another label
    assert got == [(0.0, 1.0, "x"), (1.6, 2.0, "x"), (2.1, 2.5, "y"), (2.6, 3.0, "x")]


def test_words_right_leave_out_overlaps():
    turns = [conv.Turn("a", 0.0, 3.0), conv.Turn("b", 2.5, 6.0)]
    ws = words((0.5, 1.0), (1.5, 2.0), (2.6, 2.9), (3.5, 4.0), (4.5, 5.0))
    assert [conv.in_overlap(w, turns) for w in ws] == [False, False, True, False, False]
    labels = ["S1", "S1", "S1", "S2", "S1"]  # the word in the overlap is not counted
    right, mapping = conv.score({"segments": [{"words": [dict(w, speaker=lab) for w, lab in zip(ws, labels)
                                                         if not conv.in_overlap(w, turns)]}]}, turns)
    assert right == 0.75 and mapping == {"S1": "a", "S2": "b"}


def test_score_maps_many_labels_quickly():
    """A dozen labels for three speakers: the best one-to-one mapping,
    extra labels mapped to none."""
    turns = [conv.Turn(s, i, i + 1) for i, s in enumerate("abc" * 4)]
    ws = [dict(w, speaker=f"L{i}") for i, w in enumerate(words(*[(i + 0.3, i + 0.6) for i in range(12)]))]
    ws += [dict(w, speaker="L0") for w in words((3.3, 3.5), (6.3, 6.5))]
    right, mapping = conv.score({"segments": [{"words": ws}]}, turns)
    assert right == 5 / 14
    assert mapping["L0"] == "a" and sum(v is not None for v in mapping.values()) == 3
    assert len(mapping) == 12
