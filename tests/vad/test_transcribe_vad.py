"""`sotto transcribe --vad` against faster-whisper's vad_filter=True.

faster-whisper runs the same tiny.en weights (tests/e2e/refs.py: float32,
openai's options) with its VAD model swapped for the silero-vad package's
own ONNX file in onnxruntime (the one sotto's GGUF is converted from;
faster-whisper 1.2.1 ships different v6 weights), so both find the same
speech regions: the transcript must then be the same tokens, with the same
times in the original audio. Non-speech (sox synth: noise, tones, clicks,
a chord, a tune) gives no words at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AUDIO_DIR, REPO, OrtVad, read_wav

sys.path.insert(0, str(REPO / "tests" / "e2e"))
import refs  # noqa: E402

SOTTO = REPO / "build" / "client" / "sotto"
PAUSED = [("jfk.wav", 14), ("8455-210777-0068.wav", 25), ("2830-3980-0043.wav", 3),
          ("sense_and_sensibility_01_austen_64kb-0870.wav", 18), ("mfa_thoughts.wav", 0)]


def sox(*args) -> None:
    cp = subprocess.run(["sox", *map(str, args)], capture_output=True, text=True)
    if cp.returncode != 0:
        pytest.fail(f"sox {' '.join(map(str, args))}: {cp.stderr}")


@pytest.fixture(scope="module")
def paused_wav(tmp_path_factory) -> Path:
    """Speech with long pauses (digital silence and quiet pink noise)."""
    d = tmp_path_factory.mktemp("paused")
    parts = []
    for i, (name, pause) in enumerate(PAUSED):
        parts.append(AUDIO_DIR / name)
        if pause:
            p = d / f"pause{i}.wav"
            if i % 2:
                sox("-n", "-r", 16000, "-c", 1, "-b", 16, p, "synth", pause, "pinknoise", "vol", 0.003)
            else:
                sox("-n", "-r", 16000, "-c", 1, "-b", 16, p, "trim", 0, pause)
            parts.append(p)
    out = d / "paused.wav"
    sox(*parts, out)
    return out


def sotto_json(path: Path, *extra) -> dict:
    cp = subprocess.run([str(SOTTO), "transcribe", "-m", "tiny.en", "-f", "json", "-q", "-t", "2",
                         "--precision", "fp32", "--beam-size", "1", "-l", "en", *map(str, extra), str(path)],
                        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def fw_vad(path: Path, onnx: Path, monkeypatch) -> dict:
    from faster_whisper import vad as fwvad

    ort = OrtVad(onnx)
    monkeypatch.setattr(fwvad, "get_vad_model", lambda: ort.probs)
    m = refs._model("tiny.en")
    opts = refs.options(1)
    opts["vad_filter"] = True
    segs, info = m.transcribe(read_wav(path), **opts)
    eot = m.hf_tokenizer.token_to_id("<|endoftext|>")
    segs = list(segs)
    return {"segments": [{"start": s.start, "end": s.end, "tokens": [t for t in s.tokens if t < eot]}
                         for s in segs],
            "text": "".join(s.text for s in segs), "after_vad": info.duration_after_vad}


def test_same_transcript_and_times_as_faster_whisper(paused_wav, vad_onnx, vad_gguf, monkeypatch):
    got = sotto_json(paused_wav, "--vad")
    want = fw_vad(paused_wav, vad_onnx, monkeypatch)
    eot = 50256
    toks = [[t for t in s["tokens"] if t < eot] for s in got["segments"]]
    print(f"{paused_wav.name}: {got['duration']:.1f} s, {want['after_vad']:.1f} s after VAD, "
          f"{len(toks)} segments")
    assert [t for s in toks for t in s] == [t for s in want["segments"] for t in s["tokens"]]
    assert len(got["segments"]) == len(want["segments"])
    for g, w in zip(got["segments"], want["segments"]):
        assert abs(g["start"] - w["start"]) < 0.011 and abs(g["end"] - w["end"]) < 0.011, (g, w)
    # the times are the original audio's: each segment starts in a file's
    # speech, none in the middle of a pause, and the last file is reached
    at, speech = 0.0, []
    for name, pause in PAUSED:
        dur = len(read_wav(AUDIO_DIR / name)) / 16000
        speech.append((at, at + dur))
        at += dur + pause
    for s in got["segments"]:
        assert any(a - 0.5 <= s["start"] <= b for a, b in speech), (s["start"], speech)
    assert got["segments"][-1]["end"] > speech[-1][0]


def test_vad_keeps_speech_as_without(vad_gguf):
    """On speech without pauses --vad changes nothing a listener would see."""
    path = AUDIO_DIR / "jfk.wav"
    a, b = sotto_json(path), sotto_json(path, "--vad")
    assert a["text"] == b["text"]


def synth(d: Path) -> dict[str, Path]:
    """Non-speech, 8 s each, with sox."""
    out = {}
    r = ("-r", 16000, "-c", 1, "-b", 16)
    for kind in ("whitenoise", "pinknoise", "brownnoise"):
        out[kind] = d / f"{kind}.wav"
        sox("-n", *r, out[kind], "synth", 8, kind, "vol", 0.5)
    out["tone"] = d / "tone.wav"
    sox("-n", *r, out["tone"], "synth", 8, "sine", 440, "vol", 0.5)
    out["chord"] = d / "chord.wav"
    sox("-n", "-r", 16000, "-b", 16, out["chord"], "synth", 8, "sine", 261.63, "sine", 329.63,
        "sine", 392.0, "remix", "-", "vol", 0.5)
    click = d / "click.wav"
    sox("-n", *r, click, "synth", 0.004, "square", 1000, "pad", 0, 0.246)
    out["clicks"] = d / "clicks.wav"
    sox(click, out["clicks"], "repeat", 31)
    notes = []
    for i, semis in enumerate([0, 4, 7, 12, 7, 4, 0, -5, 0, 4, 7, 4, 0, 7, 12, 0]):
        n = d / f"note{i}.wav"
        sox("-n", *r, n, "synth", 0.5, "pluck", f"%{semis}", "fade", 0, 0.5, 0.1)
        notes.append(n)
    out["tune"] = d / "tune.wav"
    sox(*notes, out["tune"])
    return out


def test_non_speech_gives_no_words(tmp_path, vad_gguf):
    files = synth(tmp_path)
    cp = subprocess.run([str(SOTTO), "transcribe", "-m", "tiny.en", "-f", "json", "-q", "-t", "2", "--vad",
                         *map(str, files.values())], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    got = {Path(o["file"]).stem: o for o in map(json.loads, cp.stdout.splitlines())}
    assert sorted(got) == sorted(files)
    for name, o in got.items():
        assert o["segments"] == [] and o["text"].strip() == "", f"{name}: {o['text']!r}"
        assert o["duration"] > 7.9


def test_bad_vad_model_is_refused(tmp_path):
    cp = subprocess.run([str(SOTTO), "transcribe", "--vad-model", str(tmp_path / "none.gguf"),
                         str(AUDIO_DIR / "jfk.wav")], cwd=REPO, capture_output=True, text=True)
    assert cp.returncode == 3 and "none.gguf" in cp.stderr
    cp = subprocess.run([str(SOTTO), "transcribe", "--vad", "--vad-min-silence-ms", "-3",
                         str(AUDIO_DIR / "jfk.wav")], cwd=REPO, capture_output=True, text=True)
    assert cp.returncode == 2 and "bad VAD option value '-3'" in cp.stderr
