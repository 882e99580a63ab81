"""Word timestamps: `sotto transcribe --word-timestamps` against
faster-whisper's word_timestamps=True on the same CTranslate2 weights and
the same audio (refs.py), with the real tiny.en model.

The reference aligns each window's text by the cross-attention of the
model's alignment heads and dynamic time warping (CTranslate2's align()),
then cuts words and merges punctuation as openai/whisper does; word
timestamps also move segment times and the seek. The bounds are the
issue's: the same words, median |start/end difference| per word under
40 ms, none over 200 ms.
"""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from conftest import (AUDIO_DIR, MANIFEST_FILES, _sotto_set, report, run_sotto,
                      squash, word_diff)
import cpu
import refs as refslib

BEAM = 5        # the CLI's default
MEDIAN_MAX = 0.040
WORD_MAX = 0.200


@pytest.fixture(scope="session")
def ref_words(audio_files) -> dict[str, dict]:
    return {p.name: refslib.reference(p, "tiny.en", BEAM, words=True)
            for p in audio_files}


def _sotto_words(sotto_bin, model, audio_files, precision: str) -> dict[str, dict]:
    return _sotto_set(sotto_bin, model, audio_files, "--precision", precision,
                      "--beam-size", str(BEAM), "--word-timestamps")


@pytest.fixture(scope="session")
def sotto_words_fp32(sotto_bin, tiny_model, audio_files):
    return _sotto_words(sotto_bin, tiny_model, audio_files, "fp32")


@pytest.fixture(scope="session")
def sotto_words_bf16(sotto_bin, tiny_model, audio_files):
    # not the long-form file: its bf16 text is not the reference's, so
    # its words cannot be compared (and it is most of the time)
    return _sotto_words(sotto_bin, tiny_model,
                        [p for p in audio_files if "longform" not in p.name],
                        "bf16")


def _words(obj: dict) -> list[dict]:
    for s in obj["segments"]:
        if "words" not in s:
            pytest.fail(f"segment without 'words': {s}")
    return [w for s in obj["segments"] for w in s["words"]]


def _diffs(ref: dict, got: dict) -> tuple[list[float], float]:
    """|start| and |end| differences of every word, and the largest
    probability difference; fails unless the words are the same."""
    rw, gw = _words(ref), _words(got)
    if [w["word"] for w in rw] != [w["word"] for w in gw]:
        pytest.fail("words differ from faster-whisper:\n" + word_diff(
            " ".join(w["word"] for w in rw), " ".join(w["word"] for w in gw)))
    d = [abs(a[k] - b[k]) for a, b in zip(rw, gw) for k in ("start", "end")]
    dp = max((abs(a["probability"] - b["probability"]) for a, b in zip(rw, gw)),
             default=0.0)
    return d, dp


def _figures(name: str, diffs: list[float]) -> str:
    s = sorted(diffs)
    return (f"{name}: {len(s) // 2} words, |start/end - faster-whisper| median "
            f"{statistics.median(s) * 1000:.1f} ms, p90 "
            f"{s[int(0.9 * (len(s) - 1))] * 1000:.0f} ms, max {s[-1] * 1000:.0f} ms, "
            f"over 200 ms: {sum(x > WORD_MAX for x in s)}")


@pytest.mark.parametrize("name", MANIFEST_FILES)
def test_words_fp32(name, ref_words, sotto_words_fp32):
    """fp32: the same words, segments and times as faster-whisper."""
    ref, got = ref_words[name], sotto_words_fp32[name]
    assert squash(got["text"]) == squash(ref["text"]), word_diff(ref["text"], got["text"])
    d, dp = _diffs(ref, got)
    assert max(d, default=0.0) <= WORD_MAX, _figures(name, d)
    assert dp < 0.01, f"{name}: word probability off by {dp:.4f}"
    # segment times follow their words in both
    for a, b in zip(ref["segments"], got["segments"]):
        assert abs(a["start"] - b["start"]) <= WORD_MAX and \
            abs(a["end"] - b["end"]) <= WORD_MAX, (a, b)


def test_words_fp32_figures(manifest, ref_words, sotto_words_fp32):
    """Over every word of the set: median under 40 ms, none over 200 ms."""
    all_d = []
    for name in manifest:
        ref, got = ref_words[name], sotto_words_fp32[name]
        if squash(got["text"]) == squash(ref["text"]):
            all_d += _diffs(ref, got)[0]
    assert all_d, "no file had the reference's text"
    report("word timestamps fp32 " + _figures("all files", all_d))
    assert statistics.median(all_d) < MEDIAN_MAX
    assert max(all_d) <= WORD_MAX


def test_words_bf16(manifest, ref_words, request):
    """bf16 (the default where the CPU has it): on the files whose text is
    the reference's, the same bounds (its text may differ elsewhere, as
    tests/e2e/test_transcribe.py::test_bf16 allows)."""
    if not cpu.bf16():
        pytest.skip(cpu.no("AVX512-BF16 (sotto refuses bf16 and runs fp32)",
                           "test_words_fp32 and test_words_fp32_figures hold the same bounds "
                           "on the fp32 path it runs"))
    got_all = request.getfixturevalue("sotto_words_bf16")
    all_d, same = [], []
    for name in manifest:
        if name not in got_all:
            continue
        ref, got = ref_words[name], got_all[name]
        if squash(got["text"]) != squash(ref["text"]):
            continue
        same.append(name)
        all_d += _diffs(ref, got)[0]
    report(f"word timestamps bf16 ({len(same)} of {len(got_all)} files with "
           "the reference's text) " + _figures("files", all_d))
    assert len(same) >= len(got_all) // 2, same
    assert statistics.median(all_d) < MEDIAN_MAX
    assert max(all_d) <= WORD_MAX


def test_no_words_without_flag(sotto_bin, tiny_model):
    """Without --word-timestamps the JSON has no words and the segment
    times are the timestamp tokens' (multiples of 20 ms)."""
    cp = run_sotto(["-m", tiny_model, "-f", "json", "-q", "--beam-size", "1",
                    AUDIO_DIR / "jfk.wav"])
    assert cp.returncode == 0, cp.stderr
    obj = json.loads(cp.stdout)
    assert obj["segments"] and all("words" not in s for s in obj["segments"])


@pytest.fixture(scope="session")
def speech_with_silence(tmp_path_factory):
    """3 s of silence, jfk, 8 s of silence, a LibriSpeech sentence."""
    d = tmp_path_factory.mktemp("vadwords")
    padded, out = d / "jfk-pad.wav", d / "silences.wav"
    subprocess.run(["sox", AUDIO_DIR / "jfk.wav", padded, "pad", "3", "8"],
                   check=True, stdin=subprocess.DEVNULL)
    subprocess.run(["sox", padded, AUDIO_DIR / "8455-210777-0068.wav", out],
                   check=True, stdin=subprocess.DEVNULL)
    return out


def test_words_with_vad(speech_with_silence, tiny_model):
    """--vad --word-timestamps: the words are timed in the whole file, not
    in the speech joined end to end (faster-whisper's
    restore_speech_timestamps: a word moves with the region of its
    middle), and each segment spans its words; the same words as
    faster-whisper's vad_filter=True, word_timestamps=True. Their times
    also carry the two VADs' region edges (a few tens of ms apart), so
    only the median is held to the bound here; test_words_fp32 holds
    every word."""
    cp = run_sotto(["-m", tiny_model, "-q", "-f", "json", "--precision", "fp32",
                    "--beam-size", str(BEAM), "--vad", "--word-timestamps",
                    speech_with_silence])
    assert cp.returncode == 0, cp.stderr
    got = json.loads(cp.stdout)
    for s in got["segments"]:
        assert s["words"] and s["start"] == s["words"][0]["start"] and \
            s["end"] == s["words"][-1]["end"], s
    last = got["segments"][-1]["words"]
    assert last[0]["start"] > 3 + 11 + 8 - 0.5, last   # after the second silence
    m = refslib._model("tiny.en")
    opts = refslib.options(BEAM)
    opts.update(word_timestamps=True, vad_filter=True)
    segs, _ = m.transcribe(refslib.read_wav(speech_with_silence), **opts)
    ref = {"segments": [{"words": [{"word": w.word, "start": w.start, "end": w.end,
                                    "probability": w.probability} for w in s.words]}
                        for s in segs]}
    d, _ = _diffs(ref, got)
    report("word timestamps with --vad " + _figures("jfk + silences", d))
    assert statistics.median(d) < MEDIAN_MAX
