"""Speaker labels for whole files on sottod's API doors (daemon/core/
worker-file.c, daemon/http, daemon/deepgram/deepgram-file.c, docs/http.md):
OpenAI's response_format=diarized_json through the openai SDK, and
Deepgram's pre-recorded POST /v1/listen?diarize=true through deepgram-sdk,
against a real sottod with the real tiny.en, CAM++ and Silero VAD models.

The audio is a conversation assembled from real readers of ../shared/audio
(tests/e2e/conversation.py): three speakers, eight turns of 2-7 s, 37 s.
What is measured: the share of segments (OpenAI's have no words) or words
(Deepgram's) whose label is their speaker's under the best one-to-one
mapping of labels to speakers, at least RIGHT_MIN; three labels found; a
single reader is one speaker; each SDK parses the reply into its own model;
a speaker model that cannot load is an error in each API's shape; a
Deepgram client that goes away has its job canceled; and the same paths
under ASan/UBSan (build-asan/).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import openai
import pytest
from deepgram import DeepgramClient
from deepgram.core.api_error import ApiError
from deepgram.environment import DeepgramClientEnvironment
from openai.types.audio import TranscriptionDiarized

import conversation as conv
from conftest import REPO, Daemon, report

# Measured on the conversation below: 9 of 9 segments and 100% of words
# right (tiny.en, CAM++); the bound leaves room for another machine's
# numerics (turns of 2.3 s are the hardest pieces).
RIGHT_MIN = 0.85
ORDER = ["lj", "austen", "jfk", "lj", "austen", "jfk", "lj", "austen"]
SPEAKER_MODEL = REPO / "models" / "campplus.gguf"


@pytest.fixture(scope="module")
def audio(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("speakers-audio")
    three, one = d / "three.wav", d / "one.wav"
    return {"three": (three, conv.assemble(ORDER, three)),
            "one": (one, conv.assemble(["austen"] * 3, one))}


def _start(tmp_path_factory, model, speaker_model) -> Daemon:
    d = Daemon(tmp_path_factory.mktemp("sottod-speakers"), model,
               conf=f"[engine]\nspeaker_model = {speaker_model}\n",
               argv=["--http", "127.0.0.1:0"]).start()
    d.base = f"127.0.0.1:{d.listen_port()}"
    return d


@pytest.fixture(scope="module")
def sd(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    """A sottod with the speaker model, one a module: the live speaker
    tests (test_deepgram_speakers.py, test_realtime_speakers.py) import
    it too."""
    assert SPEAKER_MODEL.is_file(), "run scripts/fetch-model campplus"
    d = _start(tmp_path_factory, tiny_model, SPEAKER_MODEL)
    yield d
    rc = d.stop()
    assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


def oai(d) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{d.base}/v1", api_key="none",
                         max_retries=0, timeout=300)


def dgc(d) -> DeepgramClient:
    env = DeepgramClientEnvironment(base=f"http://{d.base}",
                                    production=f"ws://{d.base}",
                                    agent=f"ws://{d.base}",
                                    agent_rest=f"http://{d.base}")
    return DeepgramClient(api_key="none", environment=env)


def diarized(d, path: Path, **kw) -> TranscriptionDiarized:
    with open(path, "rb") as f:
        return oai(d).audio.transcriptions.create(
            model="gpt-4o-transcribe-diarize", file=f,
            response_format="diarized_json", **kw)


def best_share(items: list, label, truth) -> tuple[float, dict]:
    """The share of items whose label(item) is truth(item) under the best
    one-to-one mapping of labels to speakers, and that mapping."""
    labels = sorted({label(x) for x in items})
    speakers = sorted({truth(x) for x in items})
    slots = speakers + [None] * max(0, len(labels) - len(speakers))
    best, best_map = -1, {}
    for perm in itertools.permutations(slots, len(labels)):
        m = dict(zip(labels, perm))
        right = sum(m[label(x)] == truth(x) for x in items)
        if right > best:
            best, best_map = right, m
    return best / max(1, len(items)), best_map


def seg_truth(turns):
    return lambda s: conv.truth_of({"start": s.start, "end": s.end}, turns)


def test_openai_diarized_json(sd, audio):
    path, turns = audio["three"]
    r = diarized(sd, path)
    assert isinstance(r, TranscriptionDiarized)
    assert r.task == "transcribe" and r.usage.type == "duration"
    assert abs(r.duration - turns[-1].end) < 1.0
    assert len(r.segments) >= len(turns) - 1
    for i, s in enumerate(r.segments):
        assert s.type == "transcript.text.segment" and s.id == f"seg_{i}"
        assert s.text == s.text.strip() and s.text
        assert 0 <= s.start < s.end <= r.duration + 0.01
    # labels A, B, C in order of first appearance
    first = list(dict.fromkeys(s.speaker for s in r.segments))
    assert first == ["A", "B", "C"], first
    share, m = best_share(r.segments, lambda s: s.speaker, seg_truth(turns))
    report(f"diarized_json: {share:.0%} of {len(r.segments)} segments "
           f"right on a 3-speaker conversation of {r.duration:.0f} s ({m})")
    assert share >= RIGHT_MIN, [(s.speaker, s.start, s.text)
                                for s in r.segments]
    assert " ".join(s.text for s in r.segments).split() == r.text.split()


def test_openai_single_reader_is_one_speaker(sd, audio):
    r = diarized(sd, audio["one"][0])
    assert r.segments and {s.speaker for s in r.segments} == {"A"}


def test_openai_stream_and_known_names(sd, audio):
    """stream=True: each labelled segment as a delta (with its segment_id)
    and a transcript.text.segment, then done; known_speaker_names[] name
    the speakers in order of first appearance, letters after them."""
    path, turns = audio["three"]
    with open(path, "rb") as f:
        events = list(oai(sd).audio.transcriptions.create(
            model="gpt-4o-transcribe-diarize", file=f, stream=True,
            response_format="diarized_json",
            known_speaker_names=["host", "guest"]))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done"
    segs = [e for e in events if e.type == "transcript.text.segment"]
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert kinds[:-1] == ["transcript.text.delta",
                          "transcript.text.segment"] * len(segs)
    assert [d.segment_id for d in deltas] == [s.id for s in segs]
    assert [d.delta for d in deltas] == [s.text for s in segs]
    assert list(dict.fromkeys(s.speaker for s in segs)) == \
        ["host", "guest", "C"]
    share, _ = best_share(segs, lambda s: s.speaker, seg_truth(turns))
    assert share >= RIGHT_MIN
    assert " ".join(s.text for s in segs).split() == events[-1].text.split()


def test_openai_refuses_what_it_cannot_do(sd, audio):
    path = audio["one"][0]
    with pytest.raises(openai.BadRequestError) as e:
        diarized(sd, path, known_speaker_names=["agent"],
                 known_speaker_references=["data:audio/wav;base64,UklGRg=="])
    assert e.value.body["param"] == "known_speaker_references[]"
    assert "does not match voices" in e.value.body["message"]
    with open(path, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        oai(sd).audio.translations.create(model="whisper-1", file=f,
                                          response_format="diarized_json")
    assert e.value.body["param"] == "response_format"


def dg_words(r) -> list:
    return r.results.channels[0].alternatives[0].words


def test_deepgram_diarize(sd, audio):
    path, turns = audio["three"]
    r = dgc(sd).listen.v1.media.transcribe_file(
        request=path.read_bytes(), model="nova-3", diarize=True,
        utterances=True, paragraphs=True)
    words = dg_words(r)
    assert words and all(isinstance(w.speaker, int) for w in words)
    assert list(dict.fromkeys(w.speaker for w in words)) == [0, 1, 2]
    share, m = best_share(words, lambda w: w.speaker, lambda w: conv.truth_of(
        {"start": w.start, "end": w.end}, turns))
    report(f"Deepgram diarize=true: {share:.0%} of {len(words)} words right "
           f"on a 3-speaker conversation ({m})")
    assert share >= RIGHT_MIN
    assert abs(r.metadata.duration - turns[-1].end) < 1.0
    # utterances: one speaker each, their words the alternative's
    utts = r.results.utterances
    assert [w.word for u in utts for w in u.words] == [w.word for w in words]
    for u in utts:
        assert {w.speaker for w in u.words} == {u.speaker}
    # paragraphs: one a turn of a speaker, "Speaker N:" in the transcript
    paras = r.results.channels[0].alternatives[0].paragraphs
    assert sum(p.num_words for p in paras.paragraphs) == len(words)
    assert [p.speaker for p in paras.paragraphs] == \
        [k for k, _ in itertools.groupby(u.speaker for u in utts)]
    shown = [int(x.split()[1].rstrip(":")) for x in
             paras.transcript.strip().split("\n\n")]
    assert shown == [p.speaker for p in paras.paragraphs]
    assert all(a.speaker != b.speaker for a, b in
               zip(paras.paragraphs, paras.paragraphs[1:]))


def test_deepgram_single_reader_and_without_diarize(sd, audio):
    body = audio["one"][0].read_bytes()
    r = dgc(sd).listen.v1.media.transcribe_file(request=body, diarize=True)
    assert dg_words(r) and {w.speaker for w in dg_words(r)} == {0}
    r = dgc(sd).listen.v1.media.transcribe_file(request=body)
    assert dg_words(r) and all(w.speaker is None for w in dg_words(r))
    assert r.results.utterances is None


def test_missing_speaker_model_is_an_error_in_each_shape(
        sottod_bin, sotto_bin, tiny_model, tmp_path_factory, audio):
    missing = tmp_path_factory.mktemp("nomodel") / "none.gguf"
    d = _start(tmp_path_factory, tiny_model, missing)
    try:
        path = audio["one"][0]
        with pytest.raises(openai.InternalServerError) as e:
            diarized(d, path)
        assert e.value.status_code == 503
        err = e.value.body
        assert err["type"] == "server_error"
        assert err["code"] == "speaker_model_unavailable"
        assert "none.gguf" in err["message"]
        assert "fetch-model campplus" in err["message"]
        with pytest.raises(ApiError) as e:
            dgc(d).listen.v1.media.transcribe_file(
                request=path.read_bytes(), diarize=True)
        assert e.value.status_code == 503
        assert e.value.body["err_code"] == "SERVICE_UNAVAILABLE"
        assert "fetch-model campplus" in e.value.body["err_msg"]
        assert e.value.body["request_id"]
        # the transcript without labels is still served
        r = dgc(d).listen.v1.media.transcribe_file(request=path.read_bytes())
        assert dg_words(r)
    finally:
        assert d.stop() == 0


def _sessions(d) -> float:
    body = subprocess.run(["curl", "-sS", f"http://{d.base}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"^sottod_sessions (\S+)$", body, re.M)
    assert m, body
    return float(m.group(1))


def long_twice(tmp_path: Path) -> Path:
    """The long-form file twice (236 s): a file whose decoding outlasts a
    client that gives up after a second or two, on any machine."""
    out = tmp_path / "long2.wav"
    pcm = conv.read_wav(conv.AUDIO_DIR / "LJ001-0001_to_LJ001-0017_longform.wav")
    conv.write_wav(out, np.concatenate([pcm, pcm]))
    return out


def test_deepgram_disconnect_cancels(sd, tmp_path):
    """curl gives up after 2 s on Deepgram's POST of a 236 s file with
    diarize=true: the job is canceled at its next window, its session gone
    within seconds."""
    long2 = long_twice(tmp_path)
    cp = subprocess.run(["curl", "-sS", "--max-time", "2", "--data-binary",
                         f"@{long2}", "-H", "Content-Type: audio/wav",
                         f"http://{sd.base}/v1/listen?diarize=true"],
                        capture_output=True, timeout=60)
    assert cp.returncode == 28, cp     # curl: operation timed out
    t0 = time.monotonic()
    while _sessions(sd) > 0:
        assert time.monotonic() - t0 < 8, \
            f"the file still decodes 8 s after its client went away:\n" \
            f"{sd.log()}"
        time.sleep(0.1)
    assert "deepgram: the client went away" in sd.log()
    assert "canceled: the client went away" in sd.log()

ASAN_SOTTOD = REPO / "build-asan" / "daemon" / "sottod"
SAN_ENV = {
    "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "LSAN_OPTIONS": f"suppressions={REPO / 'tests' / 'lsan.supp'}",
}


def test_sanitized_labels(tiny_model, tmp_path):
    """The labelling paths under ASan/UBSan (build-asan/): diarized_json
    with a name, Deepgram's POST with diarize, utterances and paragraphs,
    one whose client goes away, the refusals, and a second daemon whose
    speaker model does not load. A short two-reader conversation and
    beam 1: the sanitized engine is slow, the daemon's code is checked."""
    if not (ASAN_SOTTOD.is_file() and os.access(ASAN_SOTTOD, os.X_OK)):
        pytest.fail(f"{ASAN_SOTTOD} is missing: build it with "
                    "scripts/setup --asan")
    wav = tmp_path / "two.wav"
    conv.assemble(conv.SHORT, wav)
    long2 = long_twice(tmp_path)
    for model in (SPEAKER_MODEL, tmp_path / "none.gguf"):
        d = Daemon(tmp_path / model.stem, tiny_model, env=SAN_ENV,
                   binary=ASAN_SOTTOD, argv=["--http", "127.0.0.1:0"],
                   conf=f"[engine]\nspeaker_model = {model}\n"
                   "[http]\nbeam_size = 1\n")
        d.start(timeout=180)
        d.base = f"127.0.0.1:{d.listen_port()}"
        ok = model == SPEAKER_MODEL
        try:
            if ok:
                r = diarized(d, wav, known_speaker_names=["a" * 63])
                assert len({s.speaker for s in r.segments}) >= 2, r
                r = dgc(d).listen.v1.media.transcribe_file(
                    request=wav.read_bytes(), diarize=True, utterances=True,
                    paragraphs=True)
                assert len({w.speaker for w in dg_words(r)}) >= 2
                # a client gone mid-file: its connection freed, job canceled
                # (the 10.5 s conversation took under 1 s even with ASan on
                # a 2-core AMX Xeon)
                cp = subprocess.run(
                    ["curl", "-sS", "--max-time", "1", "--data-binary",
                     f"@{long2}", f"http://{d.base}/v1/listen?diarize=true"],
                    capture_output=True, timeout=60)
                assert cp.returncode == 28, cp
                t0 = time.monotonic()
                while _sessions(d) > 0:
                    assert time.monotonic() - t0 < 60, d.log()
                    time.sleep(0.2)
                assert "deepgram: the client went away" in d.log()
            else:
                with pytest.raises(openai.InternalServerError):
                    diarized(d, wav)
                with pytest.raises(ApiError) as e:
                    dgc(d).listen.v1.media.transcribe_file(
                        request=wav.read_bytes(), diarize=True)
                assert e.value.status_code == 503
            with pytest.raises(openai.BadRequestError):
                diarized(d, wav, known_speaker_references=["x"])
            with pytest.raises(openai.BadRequestError):
                diarized(d, wav, known_speaker_names=["n"] * 9)
            for body, status in ((b"", 400),
                                 (b"not audio", 400 if ok else 503)):
                with pytest.raises(ApiError) as e:
                    dgc(d).listen.v1.media.transcribe_file(request=body,
                                                           diarize=True)
                assert e.value.status_code == status, e.value.body
            req = urllib.request.Request(
                f"http://{d.base}/v1/listen?diarize=true", method="POST",
                data=b'{"url": "https://example.com/a.wav"}',
                headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=60)
            assert e.value.code == 400
            assert "URL" in json.loads(e.value.read())["err_msg"]
        finally:
            assert d.stop() == 0, d.log()
