"""Live speaker labels on the Realtime door (daemon/realtime, docs/http.md):
OpenAI's conversation.item.input_audio_transcription.segment events, which
OpenAI sends for its diarizing model (gpt-4o-transcribe-diarize), through the
official openai SDK's realtime client against a real sottod with tiny.en and
CAM++. The conversation is test_live_speakers.py's (three readers, eight
turns, tests/e2e/conversation.py); the client commits an item in each pause
between turns (turn_detection null), so each item is a session of its own
and the labels must go on from one item to the next.

- Every segment event parses as the SDK's own type, has its item's id and a
  speaker label "A", "B", ...; its text is the item's.
- Most segments get their reader's label under the best mapping; labels
  come in order of first appearance, one per reader, kept across items.
- Another model: no segment events.
- The diarizing model on a sottod whose speaker model does not load: the
  session.update is an error event saying what to fetch.
"""

from __future__ import annotations

import base64
import collections

import pytest
from openai.types.realtime import ConversationItemInputAudioTranscriptionSegment

import conversation as conv
from conftest import Daemon, report
from speech import raw
from test_http_speakers import (  # noqa: F401 (sd: a fixture)
    _start as _start_http, best_share, sd)
from test_realtime import client, until

MIN_RIGHT = 0.85		# as test_http_speakers.py's, per segment
CONVERSATION = ["lj", "austen", "jfk", "lj", "austen", "jfk", "lj", "austen"]
DIARIZE = "gpt-4o-transcribe-diarize"
PER_S = 2 * 24000		# pcm16 at 24 kHz, bytes a second


def _start(tmp_path_factory, model, speaker_model) -> Daemon:
    """test_http_speakers.py's sottod, its base the URL test_realtime's
    client takes."""
    d = _start_http(tmp_path_factory, model, speaker_model)
    d.base = "http://" + d.base
    return d


@pytest.fixture(scope="module")
def rd(sd):
    """test_http_speakers.py's sottod (this module's own), its base the
    URL test_realtime's client takes."""
    sd.base = "http://" + sd.base
    return sd


def update(conn, model: str):
    conn.session.update(session={"type": "transcription", "audio": {
        "input": {"format": {"type": "audio/pcm", "rate": 24000},
                  "transcription": {"model": model, "language": "en"},
                  "turn_detection": None}}})
    return conn.recv()


def items(d, data: bytes, cuts: list[float], model: str) -> list:
    """data sent as fast as the SDK sends it, committed at each cut (s)."""
    with client(d, "none").realtime.connect(
            extra_query={"intent": "transcription"}) as conn:
        assert conn.recv().type == "session.created"
        assert update(conn, model).type == "session.updated"
        at = 0
        for t in cuts:
            end = int(t * 24000) * 2
            for i in range(at, end, 9600):
                conn.input_audio_buffer.append(audio=base64.b64encode(
                    data[i:min(i + 9600, end)]).decode())
            conn.input_audio_buffer.commit()
            at = end
        return until(conn, len(cuts), timeout=300)


def test_segments_with_speakers(rd, tmp_path):
    path = tmp_path / "conversation.wav"
    turns = conv.assemble(CONVERSATION, path)
    cuts = [(a.end + b.start) / 2 for a, b in zip(turns, turns[1:])]
    cuts.append(turns[-1].end + 0.3)
    evs = items(rd, raw(path, "-r", "24000", "-b", "16", "-e", "signed"),
                cuts, DIARIZE)
    order = [e.item_id for e in evs
             if e.type == "input_audio_buffer.committed"]
    assert len(order) == len(cuts), order
    start = dict(zip(order, [0.0] + cuts[:-1]))
    segs = [e for e in evs if e.type.endswith("transcription.segment")]
    assert segs and all(isinstance(
        s, ConversationItemInputAudioTranscriptionSegment) for s in segs)
    assert all(s.item_id in start and s.speaker.isalpha() and s.text
               for s in segs), segs
    # the segments of an item are its transcript
    for e in evs:
        if e.type.endswith("transcription.completed"):
            mine = "".join(s.text for s in segs if s.item_id == e.item_id)
            assert mine.split() == e.transcript.split(), (mine, e)
    # item times: the item started at its cut
    truth = lambda s: conv.truth_of(  # noqa: E731
        {"start": start[s.item_id] + s.start,
         "end": start[s.item_id] + s.end}, turns)
    share, m = best_share(segs, lambda s: s.speaker, truth)
    report(f"Realtime {DIARIZE}: {share:.0%} of {len(segs)} segments right, "
           f"{len(cuts)} items of 3 readers ({m})")
    assert share >= MIN_RIGHT, (share, m, [(s.speaker, truth(s), s.text)
                                           for s in segs])
    labels = list(dict.fromkeys(s.speaker for s in segs))
    assert labels == ["A", "B", "C"], labels
    # kept across items: a reader's items all have their first one's label
    per = collections.defaultdict(set)
    for s in segs:
        per[truth(s)].add(s.speaker)
    assert sorted(len(v) for v in per.values()) == [1, 1, 1], per


def test_other_model_has_no_segments(rd):
    pcm = raw(conv.AUDIO_DIR / "jfk.wav", "-r", "24000", "-b", "16", "-e",
              "signed")[:PER_S * 4]
    evs = items(rd, pcm, [4.0], "whisper-1")
    assert not [e for e in evs if e.type.endswith("transcription.segment")]
    assert evs[-1].transcript


def test_refused_without_speaker_model(sottod_bin, tiny_model,
                                       tmp_path_factory):
    missing = tmp_path_factory.mktemp("nomodel") / "none.gguf"
    d = _start(tmp_path_factory, tiny_model, missing)
    try:
        with client(d, "none").realtime.connect(
                extra_query={"intent": "transcription"}) as conn:
            assert conn.recv().type == "session.created"
            ev = update(conn, DIARIZE)
            assert ev.type == "error", ev
            assert ev.error.type == "invalid_request_error", ev
            assert "fetch-model campplus" in ev.error.message, ev
            # the connection stays, and serves another model
            assert update(conn, "whisper-1").type == "session.updated"
    finally:
        assert d.stop() == 0, d.log()
