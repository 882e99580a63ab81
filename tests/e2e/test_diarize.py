"""Speaker labels: `sotto transcribe --diarize` on conversations assembled
from real recordings of different people (conversation.py: turns of 2-20 s
of the readers of ../shared/audio, 0.2-0.8 s of silence between), with
the real tiny.en, CAM++ and Silero VAD models.

What is measured: the share of words whose label is their speaker's under
the best one-to-one mapping of labels to speakers (the truth of a word is
the turn its middle falls in), at least WORDS_RIGHT_MIN, reported; the
number of speakers found when not given; every turn's words mostly
carrying their speaker's label; labels S1, S2, ... in order of first
appearance; and the same labels in txt, vtt and srt as in json.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import _fetch_model, parse_json_lines, report, run_sotto
import conversation as conv

WORDS_RIGHT_MIN = 0.90

# Who speaks in turn, turn after turn.
CONVERSATIONS = {
    "two": ["lj", "austen"] * 5,
    "three": ["lj", "austen", "jfk", "lj", "austen", "jfk", "lj", "jfk",
              "austen", "lj"],
    "four": ["lj", "austen", "jfk", "ls4507", "lj", "austen", "jfk", "lj",
             "austen", "lj"],
}


@pytest.fixture(scope="session")
def diarize_models(tiny_model) -> dict[str, Path]:
    return {"tiny": tiny_model, "campplus": _fetch_model("campplus"),
            "vad": _fetch_model("silero-vad")}


@pytest.fixture(scope="session")
def conversations(tmp_path_factory) -> dict[str, tuple[Path, list]]:
    d = tmp_path_factory.mktemp("conversations")
    out = {}
    for name, order in CONVERSATIONS.items():
        path = d / f"{name}.wav"
        out[name] = (path, conv.assemble(order, path))
    return out


def _diarize_args(models, *extra) -> list:
    # the VAD model is found by name (./models/silero-vad.gguf): giving
    # --vad-model would turn on --vad for the transcription too
    return ["-m", models["tiny"], "--speaker-model", models["campplus"],
            "-q", *extra]


def _run(args, what: str):
    t0 = time.monotonic()
    cp = run_sotto(args)
    took = time.monotonic() - t0
    if cp.returncode != 0:
        pytest.fail(f"sotto transcribe {what} exited {cp.returncode}\n"
                    f"stderr:\n{cp.stderr[-4000:]}")
    return cp, took


@pytest.fixture(scope="session")
def diarized(conversations, diarize_models, tmp_path_factory) -> dict:
    """Each conversation labelled once, written in every format: name ->
    {format: text}, with "json" parsed and "seconds" the run's time."""
    out = {}
    for name, (path, _) in conversations.items():
        d = tmp_path_factory.mktemp(f"diarized-{name}")
        _, took = _run(_diarize_args(diarize_models, "--diarize", "-f", "all",
                                     "--output-dir", d, path), "--diarize")
        got = {f: (d / f"{name}.{f}").read_text() for f in
               ("json", "txt", "vtt", "srt")}
        got["json"] = parse_json_lines(got["json"])[0]
        got["seconds"] = took
        out[name] = got
    return out


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_words_right(name, conversations, diarized):
    _, turns = conversations[name]
    share, mapping = conv.score(diarized[name]["json"], turns)
    words = conv.words_of(diarized[name]["json"])
    labels = sorted({w["speaker"] for w in words})
    report(f"diarize {name} speakers: {share:.1%} of {len(words)} words "
           f"right, labels {labels} -> {mapping}")
    assert share >= WORDS_RIGHT_MIN, (
        f"{share:.1%} of the words have their speaker's label, want "
        f">= {WORDS_RIGHT_MIN:.0%} (mapping {mapping})")
    assert len(labels) == len({t.speaker for t in turns}), (
        f"found {len(labels)} speakers {labels}, the conversation has "
        f"{len({t.speaker for t in turns})}")


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_each_turn_one_label(name, conversations, diarized):
    """Each turn's words carry its speaker's label (under the best
    mapping) more than any other."""
    _, turns = conversations[name]
    transcript = diarized[name]["json"]
    _, mapping = conv.score(transcript, turns)
    label_of = {s: label for label, s in mapping.items() if s is not None}
    for i, turn in enumerate(turns):
        words = [w for w in conv.words_of(transcript)
                 if conv.truth_of(w, turns) == turn.speaker and
                 turn.start - 0.5 <= (w["start"] + w["end"]) / 2 <= turn.end + 0.5]
        counts: dict[str, int] = {}
        for w in words:
            counts[w["speaker"]] = counts.get(w["speaker"], 0) + 1
        assert words, f"turn {i} ({turn}) has no words"
        assert counts.get(label_of.get(turn.speaker), 0) == max(counts.values()), (
            f"turn {i} of {turn.speaker} ({turn.start:.2f}-{turn.end:.2f} s): "
            f"labels {counts}, its speaker is {label_of.get(turn.speaker)}")


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_labels_in_order_of_appearance(name, diarized):
    segs = diarized[name]["json"]["segments"]
    seen: list[str] = []
    for s in segs:
        assert re.fullmatch(r"S[1-9][0-9]*", s["speaker"]), s
        for w in s["words"]:
            assert w["speaker"] == s["speaker"], (
                f"segment {s['id']} ({s['speaker']}) has a word of "
                f"{w['speaker']}: a segment two speakers share is split")
        if s["speaker"] not in seen:
            seen.append(s["speaker"])
    assert seen == [f"S{i + 1}" for i in range(len(seen))], seen
    ids = [s["id"] for s in segs]
    assert ids == list(range(len(segs)))


def _turns_of_segments(segs) -> list[tuple[str, str]]:
    """(speaker, text) of each run of segments of one speaker."""
    out: list[tuple[str, str]] = []
    for s in segs:
        text = s["text"].strip()
        if out and out[-1][0] == s["speaker"]:
            out[-1] = (s["speaker"], out[-1][1] + " " + text)
        else:
            out.append((s["speaker"], text))
    return out


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_txt_a_line_per_turn(name, diarized):
    want = [f"{sp}: {text}" for sp, text in
            _turns_of_segments(diarized[name]["json"]["segments"])]
    assert diarized[name]["txt"].splitlines() == want


def _cues(text: str) -> list[list[str]]:
    """The cues of srt or vtt as lists of lines, without the header."""
    blocks = [b.splitlines() for b in text.strip().split("\n\n")]
    return [b for b in blocks if b and b[0] != "WEBVTT"]


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_vtt_voice_spans(name, diarized):
    segs = diarized[name]["json"]["segments"]
    cues = _cues(diarized[name]["vtt"])
    assert len(cues) == len(segs)
    for cue, s in zip(cues, segs):
        assert "-->" in cue[0], cue
        assert cue[1] == f"<v {s['speaker']}>{s['text'].strip()}", (cue, s)


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_srt_prefix(name, diarized):
    segs = diarized[name]["json"]["segments"]
    cues = _cues(diarized[name]["srt"])
    assert len(cues) == len(segs)
    for i, (cue, s) in enumerate(zip(cues, segs)):
        assert cue[0] == str(i + 1)
        assert cue[2] == f"[{s['speaker']}] {s['text'].strip()}", (cue, s)


def test_split_segments_keep_tokens(diarize_models, tmp_path):
    """Turns 0.1-0.15 s apart, which Whisper runs together into shared
    segments: those are split at the change, each part one speaker's, its
    text its words', and the parts' tokens together the unsplit
    segment's (the same transcript with --speakers 1)."""
    path = tmp_path / "tight.wav"
    turns = conv.assemble(["lj", "austen", "jfk", "lj", "austen", "jfk", "lj",
                           "austen"], path, gaps_s=(0.1, 0.15))
    runs = {}
    for extra in ([], ["--speakers", "1"]):
        cp, _ = _run(_diarize_args(diarize_models, "--diarize", *extra, "-f",
                                   "json", path), " ".join(extra))
        runs[len(extra)] = parse_json_lines(cp.stdout)[0]
    split, whole = runs[0]["segments"], runs[2]["segments"]
    share, _ = conv.score(runs[0], turns)
    report(f"diarize turns 0.1-0.15 s apart: {share:.1%} of the words right, "
           f"{len(whole)} segments split into {len(split)}")
    assert share >= WORDS_RIGHT_MIN
    assert len(split) > len(whole), "no segment was split: the check is void"
    assert [t for s in split for t in s["tokens"]] == \
        [t for s in whole for t in s["tokens"]]
    for s in split:
        assert {w["speaker"] for w in s["words"]} == {s["speaker"]}, s
        assert s["text"] == "".join(w["word"] for w in s["words"]), s
        assert s["tokens"], s


def test_cost(conversations, diarize_models, diarized):
    """What labelling adds to transcribing with word timestamps (reported;
    bounded loosely, the machine being shared)."""
    path, _ = conversations["three"]
    _, plain = _run(["-m", diarize_models["tiny"], "-q", "--word-timestamps",
                     "-f", "json", path], "--word-timestamps")
    labelled = diarized["three"]["seconds"]
    report(f"diarize three speakers ({diarized['three']['json']['duration']:.1f}"
           f" s of audio): {labelled:.2f} s with --diarize, {plain:.2f} s with "
           f"--word-timestamps alone (+{(labelled - plain) / plain:.0%})")
    assert labelled < 2 * plain + 5


def test_change_without_pause(diarize_models, tmp_path):
    """Turns that meet with no pause (each starts as the last ends, or
    0.3 s before it: one region of speech to the VAD) are told apart at
    the change, not about every 3 s where the pieces are cut: the words
    in the first 1.5 s of each turn after the first, which a piece
    spanning the change would give the previous speaker, are mostly
    their own speaker's (diarize-edge.c)."""
    path = tmp_path / "touching.wav"
    turns = conv.assemble(["austen", "lj", "jfk", "austen", "lj", "jfk",
                           "lj", "austen"], path, min_turn_s=3.0,
                          gaps_s=(0.0, -0.3))
    cp, _ = _run(_diarize_args(diarize_models, "--diarize", "--speakers",
                               "3", "-f", "json", path), "--speakers 3")
    out = parse_json_lines(cp.stdout)[0]
    words = [w for w in conv.words_of(out) if not conv.in_overlap(w, turns)]
    _, mapping = conv.score({"segments": [{"words": words}]}, turns)
    near = [w for w in words for t in turns[1:]
            if t.start <= (w["start"] + w["end"]) / 2 < t.start + 1.5]
    right = sum(mapping.get(w["speaker"]) == conv.truth_of(w, turns)
                for w in near)
    report(f"diarize turns with no pause: {right} of the {len(near)} words "
           f"in the first 1.5 s of a turn right")
    assert len(near) >= 10, "too few words near the changes: the check is void"
    assert right >= 0.8 * len(near), (
        f"{right} of {len(near)} words near a change have their speaker")


@pytest.mark.parametrize("extra, name, check", [
    (["--speakers", "2"], "three", lambda n: n == 2),
    (["--max-speakers", "2"], "three", lambda n: n <= 2),
    (["--min-speakers", "3"], "two", lambda n: n >= 3),
])
def test_speaker_counts(extra, name, check, conversations, diarize_models):
    path, _ = conversations[name]
    cp, _ = _run(_diarize_args(diarize_models, "--diarize", *extra, "-f",
                               "json", path), " ".join(extra))
    words = conv.words_of(parse_json_lines(cp.stdout)[0])
    labels = {w["speaker"] for w in words}
    assert check(len(labels)), f"{extra}: labels {sorted(labels)}"


@pytest.mark.parametrize("args, code, says", [
    (["--speakers", "2"], 2, "add --diarize"),
    (["--diarize", "--speakers", "2", "--max-speakers", "3"], 2,
     "give one or the others"),
    (["--diarize", "--min-speakers", "3", "--max-speakers", "2"], 2,
     "more than --max-speakers"),
    (["--diarize", "--speakers", "0"], 2, "1 to 32"),
    (["--diarize", "--no-timestamps"], 2, "drop --no-timestamps"),
    (["--diarize", "--speaker-model", "no-such-speaker-model"], 3,
     "fetch-model no-such-speaker-model"),
])
def test_usage_errors(args, code, says, diarize_models, tmp_path):
    cp = run_sotto(["-m", diarize_models["tiny"], *args,
                    conv.AUDIO_DIR / "jfk.wav"])
    assert cp.returncode == code, cp.stderr
    assert says in cp.stderr, cp.stderr
