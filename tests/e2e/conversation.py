"""Conversations assembled from real recordings of different people.

The readers of ../shared/audio (README.md there says who reads what) take
turns: each turn is one reader's speech, cut from their recordings at
their own pauses, with a short silence between turns. The truth is who
speaks when; `score()` measures a `sotto transcribe --diarize -f json`
transcript against it.
"""

from __future__ import annotations

import itertools
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wer import AUDIO_DIR

RATE = 16000
# The readers, each with their recordings (all 16 kHz mono 16-bit) and
# the level under which their recording is a pause (jfk.wav has a louder
# background than the others).
READERS = {
    "lj": (["LJ001-0001_to_LJ001-0017_longform.wav"], 0.01),
    "austen": ([f"sense_and_sensibility_01_austen_64kb-{n}.wav"
                for n in ("0870", "0880", "0890", "0920", "0930")], 0.01),
    "jfk": (["jfk.wav"], 0.02),
    # a LibriSpeech reader with one short clip: a speaker of one turn
    "ls4507": (["4507-16021-0012.wav"], 0.01),
}


# Three turns of two readers in 10.5 s (2.5, 3.9 and 2.3 s of speech):
# for tests of the labelling code rather than its accuracy, under the
# sanitizers or in several output formats.
SHORT = ["jfk", "lj", "jfk"]


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1, path
        assert w.getsampwidth() == 2, path
        data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def write_wav(path: Path, pcm: np.ndarray) -> None:
    s16 = np.clip(np.round(pcm * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(s16.tobytes())


def trim(pcm: np.ndarray, level: float = 0.01) -> np.ndarray:
    """pcm without the quiet (10 ms RMS under level) at either end."""
    frames = len(pcm) // 160
    rms = np.sqrt(np.mean(pcm[:frames * 160].reshape(frames, 160) ** 2, axis=1))
    loud = np.nonzero(rms >= level)[0]
    if len(loud) == 0:
        return pcm[:0]
    return pcm[loud[0] * 160:(loud[-1] + 1) * 160]


def phrases(pcm: np.ndarray, min_gap_s: float = 0.25,
            level: float = 0.01) -> list[np.ndarray]:
    """pcm cut in the middle of each pause of min_gap_s or more (10 ms RMS
    under level), each part trimmed of its quiet ends."""
    frames = len(pcm) // 160
    rms = np.sqrt(np.mean(pcm[:frames * 160].reshape(frames, 160) ** 2, axis=1))
    quiet = rms < level
    cuts, run = [0], 0
    for i, q in enumerate(quiet):
        run = run + 1 if q else 0
        if q and (i + 1 == frames or not quiet[i + 1]) and run * 0.01 >= min_gap_s:
            cuts.append((i - run // 2) * 160)
    cuts.append(len(pcm))
    parts = [trim(pcm[a:b]) for a, b in zip(cuts, cuts[1:])]
    return [p for p in parts if len(p) >= RATE // 2]


def speech_of(reader: str) -> list[np.ndarray]:
    """A reader's phrases, in the order they were recorded."""
    files, level = READERS[reader]
    out = []
    for f in files:
        out += phrases(read_wav(AUDIO_DIR / f), 0.2, level)
    return out


@dataclass
class Turn:
    speaker: str
    start: float   # seconds in the conversation
    end: float


def assemble(order: list[str], path: Path, min_turn_s: float | tuple = 2.0,
             max_turn_s: float = 20.0,
             gaps_s: tuple = (0.4, 0.2, 0.8, 0.3, 0.6),
             speech: dict[str, list[np.ndarray]] | None = None) -> list[Turn]:
    """Write to path a conversation whose turns are, in order, the readers
    named in order: each turn takes the reader's next phrases (at least
    min_turn_s, at most max_turn_s of them; a tuple of minimums is taken
    in turn), turns apart by the silences of gaps_s in turn (seconds; a
    negative gap is an overlap: the turn starts that long before the
    previous one ends, the two mixed). speech gives the phrases of
    readers that are not in READERS (synthetic voices, say); it is not
    changed. Returns the turns."""
    speech = speech or {}
    left = {r: list(speech[r]) if r in speech else speech_of(r)
            for r in set(order)}
    placed, turns, end = [], [], 0
    gaps = itertools.cycle(gaps_s)
    mins = itertools.cycle(min_turn_s if isinstance(min_turn_s, tuple)
                           else (min_turn_s,))
    for r in order:
        turn, want = [], next(mins)
        while left[r] and (sum(map(len, turn)) < want * RATE):
            nxt = left[r][0]
            if turn and sum(map(len, turn)) + len(nxt) > max_turn_s * RATE:
                break
            turn.append(left[r].pop(0))
            turn.append(np.zeros(int(0.2 * RATE), np.float32))
        assert turn, f"{r} has no speech left for a turn"
        audio = np.concatenate(turn[:-1])
        gap = int(next(gaps) * RATE)
        start = max(0, end + gap)
        turns.append(Turn(r, start / RATE, (start + len(audio)) / RATE))
        placed.append((start, audio))
        end = max(end, start + len(audio))
    pcm = np.zeros(end + int(0.5 * RATE), np.float32)
    for start, audio in placed:
        pcm[start:start + len(audio)] += audio
    write_wav(path, pcm)
    return turns


def truth_of(word: dict, turns: list[Turn]) -> str:
    """The speaker of the turn a word's middle falls in, else the nearest."""
    mid = (word["start"] + word["end"]) / 2

    def dist(tn: Turn) -> float:
        return 0.0 if tn.start <= mid <= tn.end else min(abs(mid - tn.start),
                                                         abs(mid - tn.end))
    return min(turns, key=dist).speaker


def overlap_s(turns: list[Turn]) -> float:
    """Seconds in which two turns overlap."""
    return sum(max(0.0, a.end - b.start) for a, b in zip(turns, turns[1:]))


def in_overlap(word: dict, turns: list[Turn]) -> bool:
    """Whether a word's middle falls in two turns at once."""
    mid = (word["start"] + word["end"]) / 2
    return sum(t.start <= mid <= t.end for t in turns) > 1


def words_of(transcript: dict) -> list[dict]:
    return [w for s in transcript["segments"] for w in s.get("words", [])]


def score(transcript: dict, turns: list[Turn]) -> tuple[float, dict]:
    """The share of words whose label is their speaker's under the best
    one-to-one mapping of labels to speakers, and that mapping."""
    words = words_of(transcript)
    pairs: dict[tuple, int] = {}
    for w in words:
        k = (w["speaker"], truth_of(w, turns))
        pairs[k] = pairs.get(k, 0) + 1
    labels = sorted({w["speaker"] for w in words})
    speakers = sorted({tn.speaker for tn in turns})
    # each speaker given a label of its own (or none, when there are fewer
    # labels); counting pairs keeps this quick for a dozen labels
    best, best_map = -1, {}
    slots = labels + [None] * max(0, len(speakers) - len(labels))
    for perm in itertools.permutations(slots, len(speakers)):
        right = sum(pairs.get((lab, s), 0) for s, lab in zip(speakers, perm))
        if right > best:
            best = right
            best_map = {lab: None for lab in labels} | {
                lab: s for s, lab in zip(speakers, perm) if lab is not None}
    return best / max(1, len(words)), best_map
