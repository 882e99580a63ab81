"""Live speaker labels (OPEN "diarize": true, `sotto stream --diarize`, the
WebSocket): a real sottod with tiny.en and CAM++ (scripts/fetch-model
campplus) labels the finals of conversations assembled from the readers
of ../shared/audio (tests/e2e/conversation.py), streamed as fast as sottod
takes them.

- Most words get their reader's label under the best mapping of labels to
  readers (the measure of tests/e2e/test_diarize.py); every reader gets one
  label, in order of first appearance, and keeps it: the label a reader's
  first turn got is the label of most of each later turn's words.
- Every final segment and caption unit carries its label (decided with
  the final, so no later event), and a unit is one speaker's.
- `sotto stream --diarize` text starts a line "S1: " at each change of
  speaker, vtt cues open with <v S1>, srt cues with [S1].
- A single reader stays S1; over the WebSocket too.
- OPEN with diarize on a sottod whose speaker model does not load is
  refused (unavailable) with what to run; the same OPEN without it works.
"""

from __future__ import annotations

import collections
import itertools
import json
import re
import subprocess

import numpy as np
import pytest
from websockets.sync.client import connect

import conversation as conv
from conftest import (MSG_OPEN, RawClient, SOTTO, Stream, fetch_model, jframe,
                      report)
from test_ws import http_port, make_daemon_module  # noqa: F401 (fixture)

# Measured (8 turns of three readers, 36.7 s, 91 words): 98.9 % of words
# right (one word, "And", a 0.5 s final before its reader was known). The
# files' labeller has >= 90 % in tests/e2e/test_diarize.py; live labels
# decide each final once, with less audio, so the same bound.
MIN_RIGHT = 0.90
CONVERSATION = ["lj", "austen", "jfk", "lj", "austen", "jfk", "lj", "austen"]


@pytest.fixture(scope="module")
def sd(make_daemon_module):
    spk = fetch_model("campplus")
    d = make_daemon_module(argv=["--http", "127.0.0.1:0"],
                           conf=f"[engine]\nspeaker_model = {spk}\n").start()
    d.url = f"ws://127.0.0.1:{http_port(d)}/ws"
    return d


def stream(d, path, *args) -> Stream:
    return Stream(d.socket, "--fast", "--diarize", *args, str(path)).check()


def labelled(st: Stream) -> dict:
    """The finals as a transcript (conversation.score's shape): each word
    with its segment's speaker."""
    segs = [s for e in st.events("final") for s in e["segments"]]
    for s in segs:
        for w in s.get("words", []):
            w["speaker"] = s.get("speaker")
    return {"segments": segs}


def test_live_labels_conversation(sd, tmp_path):
    path = tmp_path / "conversation.wav"
    turns = conv.assemble(CONVERSATION, path)
    st = stream(sd, path, "--word-timestamps")
    transcript = labelled(st)
    segs = transcript["segments"]
    assert segs, st.lines[-3:]
    # every final segment has its label with it
    assert all(re.fullmatch(r"S[1-9]\d*", s.get("speaker", "")) for s in segs), \
        [s for s in segs if "speaker" not in s]
    share, mapping = conv.score(transcript, turns)
    words = conv.words_of(transcript)
    report(f"live speaker labels, {len(turns)} turns of 3 readers "
           f"({turns[-1].end:.1f} s): {share:.1%} of {len(words)} words right, "
           f"{len(set(mapping))} labels")
    assert share >= MIN_RIGHT, (share, mapping, segs)
    # one label per reader, numbered in order of first appearance
    order = list(dict.fromkeys(s["speaker"] for s in segs))
    assert order == [f"S{i}" for i in range(1, len(order) + 1)], order
    assert sorted(mapping.values()) == sorted(set(CONVERSATION)), mapping
    # a reader keeps the label of their first turn
    first = {}
    for tn in turns:
        got = collections.Counter(
            w["speaker"] for w in words
            if tn.start <= (w["start"] + w["end"]) / 2 <= tn.end)
        if not got:
            continue
        label = got.most_common(1)[0][0]
        assert first.setdefault(tn.speaker, label) == label, (tn, got, first)
    # units: each one speaker's, as its finals' (a final of two segments
    # may be split between two units): each label's text is the same
    # (units join a word's punctuation to it: compared without blanks)
    units = [u for u in st.events("unit") if u["closed"]]
    assert units
    for label in order:
        in_units = "".join(u["text"] for u in units if u["speaker"] == label)
        in_finals = "".join(s["text"] for s in segs if s["speaker"] == label)
        assert re.sub(r"\s", "", in_units) == re.sub(r"\s", "", in_finals), \
            (label, in_units, in_finals)


def test_text_vtt_srt_turns(sd, tmp_path):
    path = tmp_path / "short.wav"
    conv.assemble(conv.SHORT, path)
    # The three at once: sottod steps them together, and --fast streams
    # give the same finals whatever else is stepped beside them.
    procs = {fmt: subprocess.Popen([str(SOTTO), "stream", "-s", sd.socket,
                                    "--fast", "--diarize", "-f", fmt,
                                    str(path)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
             for fmt in ("text", "vtt", "srt")}
    out = {}
    for fmt, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        out[fmt] = stdout
    lines = out["text"].splitlines()
    turns = [ln.split(":")[0] for ln in lines if re.match(r"S\d+: ", ln)]
    assert turns == ["S1", "S2", "S1"], out["text"]
    assert lines[0].startswith("S1: "), lines
    cues = re.findall(r"^<v (S\d+)>", out["vtt"], re.M)
    assert cues and len(cues) == out["vtt"].count(" --> "), out["vtt"]
    assert [k for k, _ in itertools.groupby(cues)] == \
        ["S1", "S2", "S1"], out["vtt"]
    srt = re.findall(r"^\[(S\d+)\] ", out["srt"], re.M)
    assert srt == cues, out["srt"]


def test_single_reader_stays_s1_over_websocket(sd):
    pcm = conv.read_wav(conv.AUDIO_DIR / conv.READERS["lj"][0][0])
    pcm = (np.clip(pcm[:25 * conv.RATE], -1, 1) * 32767).astype("<i2")
    events = []
    with connect(sd.url, ping_interval=None) as ws:
        events.append(json.loads(ws.recv()))
        ws.send(json.dumps({"type": "open", "format": "s16le",
                            "rate": conv.RATE, "diarize": True}))
        events.append(json.loads(ws.recv()))
        assert events[-1]["type"] == "opened", events
        data = pcm.tobytes()
        for i in range(0, len(data), 6400):
            ws.send(data[i:i + 6400])
        ws.send(json.dumps({"type": "end"}))
        while events[-1]["type"] not in ("end", "error"):
            events.append(json.loads(ws.recv()))
    assert events[-1]["type"] == "end", events[-3:]
    segs = [s for e in events if e["type"] == "final" for s in e["segments"]]
    assert len(segs) >= 3, segs
    assert {s.get("speaker") for s in segs} == {"S1"}, segs
    # units: S1 once they hold committed words (before, not yet known)
    assert {u.get("speaker") for u in events
            if u["type"] == "unit" and u["text"]} == {"S1"}
    assert all("speaker" not in u for u in events
               if u["type"] == "unit" and not u["text"])


def test_open_refused_without_speaker_model(make_daemon):
    # a model name, as sottod.conf has it, looked for beside the model
    d = make_daemon(conf="[engine]\nspeaker_model = nonesuch\n").start()
    c = RawClient(d.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "diarize": True}))
    ev = c.event()
    assert ev["type"] == "error" and ev["code"] == "unavailable", ev
    # the loader's reason names every directory it looked in: too long
    # for an event, so it is in the log and the event says what to do
    assert ev["message"] == ("OPEN: speaker labels need the speaker model "
                             "nonesuch, which does not load: run "
                             "'scripts/fetch-model campplus' (sottod's log "
                             "says why)"), ev
    assert re.search(r"speaker labels need the speaker model nonesuch, which "
                     r"does not load: model 'nonesuch' not found in ", d.log())
    c.close()
    # the same OPEN without labels is served
    c = RawClient(d.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le"}))
    assert c.event()["type"] == "opened"
    c.close()
    assert d.stop() == 0, d.log()
