"""Word timestamps in sottod's final events: a session whose OPEN has
"word_timestamps": true gets a "words" array (word, start, end,
probability) in every final segment, aligned to the stream's audio as
`sotto transcribe --word-timestamps` aligns a window; other sessions get
none; a resume replays the finals with their words.

The words are checked against faster-whisper's word_timestamps=True on
the same weights (tests/e2e/refs.py, cached): the same words and a
median |start/end difference| under 40 ms. A stream decodes sliding
windows with the committed text forced, not faster-whisper's 30 s
windows, so single words may differ more (tests/stream/test_stream_words.py
reports the spread).
"""

from __future__ import annotations

import difflib
import statistics
import wave

from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_OPEN, RawClient,
                      Stream, frame, jframe, report)
import refs as refslib

JFK = AUDIO_DIR / "jfk.wav"


def pcm16(path) -> bytes:
    with wave.open(str(path)) as w:
        return w.readframes(w.getnframes())


def final_segments(events: list[dict]) -> list[dict]:
    return [s for e in events if e["type"] == "final" for s in e["segments"]]


def test_final_words(daemon):
    st = Stream(daemon.socket, "--fast", "--word-timestamps", JFK).check()
    segs = final_segments([e for _, e in st.lines])
    assert segs
    words = []
    for s in segs:
        assert "words" in s, s
        assert "".join(w["word"] for w in s["words"]) == s["text"], s
        for w in s["words"]:
            assert set(w) == {"word", "start", "end", "probability"}, w
            assert 0.0 <= w["start"] <= w["end"] <= 11.0, w
            assert 0.0 < w["probability"] <= 1.0, w
        words += s["words"]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts), starts
    ref = refslib.reference(JFK, "tiny.en", 5, words=True)
    rw = [w for s in ref["segments"] for w in s["words"]]
    a = [w["word"].strip().lower() for w in rw]
    b = [w["word"].strip().lower() for w in words]
    d = []
    for op, i1, i2, j1, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                d += [abs(rw[i1 + k][x] - words[j1 + k][x]) for x in ("start", "end")]
    report(f"sottod words (jfk, --fast): {len(d) // 2} of {len(rw)} words as "
           f"faster-whisper's, |start/end| median {statistics.median(d) * 1000:.0f} ms, "
           f"max {max(d) * 1000:.0f} ms")
    assert len(d) // 2 >= len(rw) - 2
    assert statistics.median(d) < 0.040


def test_no_words_unless_asked(daemon):
    st = Stream(daemon.socket, "--fast", JFK).check()
    segs = final_segments([e for _, e in st.lines])
    assert segs and all("words" not in s for s in segs)


def test_resume_replays_words(daemon):
    c = RawClient(daemon.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000,
                             "word_timestamps": True}))
    opened = c.event()
    assert opened["type"] == "opened", opened
    pcm = pcm16(JFK)
    for i in range(0, len(pcm), 16000):
        c.send(frame(MSG_AUDIO, pcm[i:i + 16000]))
    c.send(frame(MSG_END))
    first = [e for e in c.events_until("end") if e["type"] == "final"]
    c.close()
    assert first and all("words" in s for e in first for s in e["segments"])
    r = RawClient(daemon.socket)
    r.hello()
    r.send(jframe(MSG_OPEN, {"session": opened["session"], "since": -1}))
    again = [e for e in r.events_until("end") if e["type"] == "final"]
    r.close()
    assert again == first
