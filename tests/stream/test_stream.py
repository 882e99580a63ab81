"""The streaming policy (lib/stream/stream.c, stream-commit.c) end to end:
real tiny.en, real speech, driven through build/tests/stream/stream-driver.

- WER of the concatenated finals within 2 points of `sotto transcribe`
  (greedy, same model) over the set, and per file within 2 points or one
  word;
- the long-form file: finals ~ transcribe's text, nothing repeated or lost
  at slides;
- finish() commits the tail, decoded as transcribe decodes it, or, when
  the audio since the last step is silence that began before that step's
  end, the last step's hypothesis without another decode; silence
  yields no text and skips the encoder; speech followed by room noise
  yields the speech once;
- a window cut inside the last committed word does not make what is left
  of it, as Whisper hears it again, a final of its own (four readers and
  silence, after two lead-ins that did);
- final ids go up by one, times never go back;
- latency (audio time when a word became final minus its estimated end),
  p50/p95, in the report section of the output;
- streams stepped together (sotto_stream_step_many, sottod's batching)
  report exactly what each stepped alone reports;
- caption units (common/caption.c, as sottod builds them): the closed
  units of every file hold its finals' text once, in order; on the
  long-form file the median unit has 8 words or more; most units end in
  punctuation the model wrote, and the word error rate of the units'
  text with punctuation and case (not normalised) is within 2 points of
  `sotto transcribe`'s (issue 26).
"""

from __future__ import annotations

import json
import re
import statistics
import struct
import subprocess
import wave
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (AUDIO_DIR, FINE_STEP_MS, MODEL, SOTTO_BIN, STEP_MS,
                      THREADS, report, run_driver, werlib)


# Measured (tiny.en, bf16/AMX, 2 cores): stream vs transcribe errors
# 6 vs 3 on the 118 s long-form file at the 2 s step of this test, over
# the set 2.06% vs 1.38% (4 vs 3 and 1.61% while the committed text
# before the window was the prompt; then 6 vs 3 and 2.52% at the
# daemon's 1 s step). The bound is the issue's: 2 points, per file too.
WER_POINTS = 0.02


def finals(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "final"]


def final_text(events: list[dict]) -> str:
    return "".join(e["text"] for e in finals(events))


def steps(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "step"]


def word_latencies(events: list[dict]) -> list[float]:
    """Per word: audio time of its final minus its end, the end placed
    by characters between the final's start and end."""
    out = []
    for f in finals(events):
        text = f["text"]
        words = text.split()
        pos = 0
        for w in words:
            pos = text.index(w, pos) + len(w)
            end = f["start"] + (f["end"] - f["start"]) * pos / max(len(text), 1)
            out.append(f["audio_time"] - end)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def test_wer_vs_transcribe(runs, manifest):
    tr, st = runs["transcribe"], runs["stream"]
    w = max(len(f) for f in manifest)
    report(f"WER (tiny.en greedy; stream step {STEP_MS} ms vs sotto transcribe;"
           " errors/words)")
    report(f"{'file':<{w}}  words  {'transcribe':>10}  {'stream':>10}")
    te = se = tn = 0
    bad = []
    for f, ref in manifest.items():
        e_t, n = werlib.counts(ref, tr[f])
        e_s, _ = werlib.counts(ref, final_text(st[f]))
        te, se, tn = te + e_t, se + e_s, tn + n
        report(f"{f:<{w}}  {n:5d}  {e_t:10d}  {e_s:10d}")
        # Short files: one word is 15-30 points, so allow one.
        if n and (e_s - e_t) / n > WER_POINTS and e_s - e_t > 1:
            bad.append(f"{f}: stream {final_text(st[f])!r} vs transcribe "
                       f"{tr[f]!r}")
    report(f"{'WER':<{w}}  {tn:5d}  {te / tn:10.4f}  {se / tn:10.4f}")
    assert se / tn <= te / tn + WER_POINTS, \
        f"stream WER {se / tn:.4f} vs {te / tn:.4f}"
    assert not bad, "\n".join(bad)


def units(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "unit"]


SENTENCE_END = re.compile("[.?!\u2026][\"')\\]\u201d\u2019]*$")
CLAUSE_END = re.compile("[,;:][\"')\\]\u201d\u2019]*$")


def raw_counts(ref: str, hyp: str) -> tuple[int, int]:
    """(errors, reference words) with words as written: punctuation and
    case count."""
    import jiwer

    r = " ".join(ref.split())
    o = jiwer.process_words(r, " ".join(hyp.split()) or "-")
    return o.substitutions + o.deletions + o.insertions, len(r.split())


LONG_FORM = "LJ001-0001_to_LJ001-0017_longform.wav"


def long_form_units(runs, manifest) -> dict:
    """The long-form file's closed units and their figures, reported."""
    us = units(runs["stream"][LONG_FORM])
    ends = [u["text"].strip() for u in us]
    f = {"ends": ends,
         "words": statistics.median(len(u["text"].split()) for u in us),
         "sentence": sum(bool(SENTENCE_END.search(t)) for t in ends) / len(us),
         "clause": sum(bool(CLAUSE_END.search(t)) for t in ends) / len(us)}
    ref = manifest[LONG_FORM]
    e_s, n = raw_counts(ref, " ".join(ends))
    e_t, _ = raw_counts(ref, runs["transcribe"][LONG_FORM])
    f["wer"], f["wer_transcribe"] = e_s / n, e_t / n
    report(f"long-form caption units (step {STEP_MS} ms): {len(us)}, median "
           f"{f['words']} words, {f['sentence']:.0%} end a sentence, "
           f"{f['clause']:.0%} a clause; WER with punctuation and case "
           f"{f['wer']:.4f} vs transcribe {f['wer_transcribe']:.4f}")
    return f


def test_caption_units(runs, manifest):
    for f, ev in runs["stream"].items():
        us = units(ev)
        assert "".join(u["text"] for u in us) == final_text(ev), f
        assert [u["id"] for u in us] == list(range(len(us))), f
    f = long_form_units(runs, manifest)
    assert f["words"] >= 8, f["ends"]


def test_caption_units_punctuation(runs, manifest):
    f = long_form_units(runs, manifest)
    # LJ Speech's sentences run to 30 words: a unit of two caption lines
    # ends one at best every other time, the others end at a comma
    assert f["sentence"] + f["clause"] > 0.5, f["ends"]
    assert f["wer"] <= f["wer_transcribe"] + WER_POINTS, f["ends"]


def test_longform_nothing_lost_or_repeated(runs):
    name = "LJ001-0001_to_LJ001-0017_longform.wav"
    tr = werlib.normalise(runs["transcribe"][name])
    ev = runs["stream"][name]
    got = werlib.normalise(final_text(ev))
    import jiwer

    o = jiwer.process_words(tr, got)
    n = len(tr.split())
    report(f"long-form vs transcribe: {n} words, {o.substitutions} sub, "
           f"{o.deletions} del, {o.insertions} ins; {len(finals(ev))} finals")
    assert o.deletions <= 0.01 * n + 1, "words lost at slides"
    assert o.insertions <= 0.01 * n + 1, "words repeated at slides"
    assert (o.substitutions + o.deletions + o.insertions) / n <= 0.05
    # No final begins with the words the one before it ended with.
    fs = [werlib.normalise(f["text"]).split() for f in finals(ev)]
    for a, b in zip(fs, fs[1:]):
        k = min(len(a), len(b), 3)
        assert k < 3 or a[-k:] != b[:k], f"repeated at a seam: {a} | {b}"


# Four readers, 0.8 s apart, and silence after them (the browser test's
# audio): streamed after a lead-in of 0.13 s or 1 s, the window slid to
# a cut inside the last committed word, "sufficient", and the finish
# decoded "efficient I said." (or "Fish and I said.") again as a final
# of its own: the page showed the last sentence's end twice.
READERS = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav",
           "2830-3980-0043.wav", "8455-210777-0068.wav"]


def test_cut_word_not_final_twice(manifest):
    gap = [0] * int(0.8 * 16000)
    speech = []
    for name in READERS:
        speech += _pcm(name) + gap
    ref = werlib.normalise(" ".join(manifest[n] for n in READERS))
    leads = (0.13, 1.0)
    with ThreadPoolExecutor(2) as ex:
        evs = list(ex.map(lambda lead: run_driver(
            "-", FINE_STEP_MS, stdin=_raw([0] * int(lead * 16000) + speech +
                                          [0] * 32000)), leads))
    import jiwer

    for lead, ev in zip(leads, evs):
        got = werlib.normalise(final_text(ev))
        o = jiwer.process_words(ref, got)
        assert got.endswith("your power is sufficient i said"), \
            (lead, final_text(ev))
        assert o.insertions == 0, (lead, final_text(ev))


def wav_seconds(path) -> float:
    with wave.open(str(path)) as w:
        return w.getnframes() / w.getframerate()


def test_ids_and_times(runs):
    for name, ev in list(runs["stream"].items()) + [("jfk@1s", runs["jfk_fine"])]:
        fs = finals(ev)
        # no time after the end of the audio (lib/stream/stream-commit.c clamps)
        duration = wav_seconds(AUDIO_DIR / name.replace("jfk@1s", "jfk.wav"))
        for e in ev:
            if e["type"] in ("partial", "final"):
                assert e["end"] <= duration + 1e-6, f"{name}: {e}"
        for a, b in zip(fs, fs[1:]):
            assert b["id"] == a["id"] + 1, name
            assert b["start"] >= a["start"] - 1e-6, name
        for f in fs:
            assert f["end"] >= f["start"], name
            assert f["audio_time"] >= f["start"], name
        assert ev[-1]["type"] == "step" and ev[-1]["finish"] == 1, name
        last_partial = [e for e in ev if e["type"] == "partial"][-1]
        assert last_partial["text"] == "", f"{name}: finish left a partial"


def test_finish_commits_tail(runs):
    for ev in (runs["stream"]["jfk.wav"], runs["jfk_fine"]):
        text = werlib.normalise(final_text(ev))
        assert text.endswith("your country"), text


def test_finish_decodes_unforced():
    """At 1 s steps "...rather selfish is" is final before the end; with
    it forced, the last decode heard "to be old-sposed". finish() decodes
    the rest as transcribe does: "to be ill-disposed"."""
    ev = run_driver(AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0890.wav",
                    FINE_STEP_MS)
    text = werlib.normalise(final_text(ev))
    assert text.endswith("is to be ill disposed"), text


def _pcm(name: str) -> list[int]:
    import wave

    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (16000, 1, 2), name
        raw = w.readframes(w.getnframes())
    return list(struct.unpack(f"<{len(raw) // 2}h", raw))


def test_noise_after_speech():
    """Speech, then 20 s of the same recording's room tone and clicks
    (above the energy gate): the speech is final once, and nothing else.
    Once the window slides past the speech, Whisper has only the prompt
    and the noise ("This is a long stop." again, "Bop, bop, bop, ...")."""
    pcm = _pcm("mfa_longstop.wav")
    tail = pcm[int(2.2 * 16000):]
    ev = run_driver("-", FINE_STEP_MS, stdin=_raw(pcm + tail * 8))
    text = werlib.normalise(final_text(ev))
    assert text == "this is a long stop", final_text(ev)


def test_latency_report(runs):
    ev = runs["jfk_fine"]
    lat = word_latencies(ev)
    comp = [s["compute_ms"] for s in steps(ev) if not s["finish"]]
    report(f"jfk.wav step {FINE_STEP_MS} ms: final latency (audio time) p50 "
           f"{pct(lat, .5):.2f} s p95 {pct(lat, .95):.2f} s over {len(lat)} "
           f"words; step compute p50 {statistics.median(comp):.0f} ms p95 "
           f"{pct(comp, .95):.0f} ms")
    all_lat, all_comp = [], []
    for e in runs["stream"].values():
        all_lat += word_latencies(e)
        all_comp += [s["compute_ms"] for s in steps(e) if not s["finish"]]
    report(f"all files step {STEP_MS} ms: final latency p50 "
           f"{pct(all_lat, .5):.2f} s p95 {pct(all_lat, .95):.2f} s over "
           f"{len(all_lat)} words (finish() commits included); step compute "
           f"p50 {statistics.median(all_comp):.0f} ms p95 "
           f"{pct(all_comp, .95):.0f} ms")
    assert lat and pct(lat, .5) < 4.0


def _raw(samples) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


def _finish_vs_steps(ev: list[dict]) -> tuple[float, float]:
    """The finish's compute time and the median of the steps before it."""
    st = steps(ev)
    assert st[-1]["finish"] == 1, st[-1]
    return st[-1]["compute_ms"], statistics.median(
        e["compute_ms"] for e in st[:-1])


def test_finish_silent_tail_no_decode():
    """jfk.wav and then 1.6 s of silence, 1 s steps: the last step (at
    12 s) read the end of the speech and 1 s of silence; what came after
    it is silent, so finish() commits that step's hypothesis without an
    encoder pass (a voice command's transcript at audio-stop). Cut in
    its last word instead, the tail has speech and finish() decodes it:
    the control that the timing tells the two apart."""
    pcm = _pcm("jfk.wav")
    ev = run_driver("-", FINE_STEP_MS,
                    stdin=_raw(pcm + [0] * int(1.6 * 16000)))
    text = werlib.normalise(final_text(ev))
    assert text.endswith("for your country"), final_text(ev)
    finish, step = _finish_vs_steps(ev)
    assert finish < 0.25 * step, (finish, step)

    ev = run_driver("-", FINE_STEP_MS, stdin=_raw(pcm[:int(10.4 * 16000)]))
    finish, step = _finish_vs_steps(ev)
    assert finish > 0.5 * step, (finish, step)


@pytest.mark.parametrize("kind", ["zeros", "hiss-70dB"])
def test_silence_no_text(kind):
    import random

    n = 10 * 16000
    if kind == "zeros":
        pcm = [0] * n
    else:
        rnd = random.Random(1)
        amp = 32768 * 10 ** (-70 / 20)
        pcm = [int(rnd.gauss(0, amp)) for _ in range(n)]
    ev = run_driver("-", FINE_STEP_MS, stdin=_raw(pcm))
    assert final_text(ev).strip() == ""
    assert all(e["text"] == "" for e in ev if e["type"] == "partial")
    comp = [s["compute_ms"] for s in steps(ev)]
    report(f"silence ({kind}, 10 s): {len(comp)} steps, max step "
           f"{max(comp):.1f} ms (energy gate)")
    assert max(comp) < 50, "silent steps should skip the encoder"


def test_step_many_same_as_alone():
    """Four streams in lockstep: stepped as one batch (-B) with word
    timestamps (-w, as sottod steps them) and one at a time (-S) without,
    every event equal but the words: batching and aligning change nothing
    else. The decoder time of both is reported."""
    # Four lengths (6.0, 3.6, 3.0, 2.8 s), so streams leave the batch at
    # different rounds; 15 s of audio in all (jfk and 0870 made it 41 s of
    # test on AVX-512 and longer on AVX2 without reaching another state).
    files = [AUDIO_DIR / f for f in (
        "sense_and_sensibility_01_austen_64kb-0920.wav", "mfa_thoughts.wav",
        "sense_and_sensibility_01_austen_64kb-0880.wav", "goforward.wav")]
    # the two at once, a core each (the times reported are each one's own
    # compute thread's)
    with ThreadPoolExecutor(2) as pool:
        batch = pool.submit(run_driver, files, FINE_STEP_MS, None, ("-B", "-w"))
        alone = run_driver(files, FINE_STEP_MS, extra=("-S",))
        batch = batch.result()
    assert all(e.get("words") for e in finals(batch)), "finals without words"

    def events(evs, i):
        return [{k: v for k, v in e.items()
                 if k not in ("compute_ms", "stream", "words")}
                for e in evs if e["stream"] == i]

    for i, f in enumerate(files):
        assert finals(events(alone, i)), f"{f.name}: no finals"
        assert events(batch, i) == events(alone, i), f"{f.name} differs when batched"

    def step_s(evs):
        # each stream of a round reports the round's time
        total, last = 0.0, None
        for e in steps(evs):
            if e["finish"]:
                last = None
            elif e["compute_ms"] != last:
                total += e["compute_ms"]
                last = e["compute_ms"]
        return total / 1e3

    report(f"4 streams in lockstep, {FINE_STEP_MS} ms steps: all steps took "
           f"{step_s(batch):.2f} s batched, {step_s(alone):.2f} s one at a "
           f"time; same events")


def _reel(first: str, n: int) -> tuple[bytes, str]:
    """n speech files in manifest order (looped) from first, each with
    0.5 s of silence after it, as bench/daemon's soak sends them: raw
    s16le, and the last file's reference."""
    refs = werlib.load_manifest(AUDIO_DIR)
    names = list(refs)
    at, pcm = names.index(first), []
    for i in range(at, at + n):
        pcm += _pcm(names[i % len(names)]) + [0] * 8000
    return _raw(pcm), refs[names[(at + n - 1) % len(names)]]


LONG_FORM = "LJ001-0001_to_LJ001-0017_longform.wav"


# Four soak sessions that lost their end (bench/daemon --only soak),
# stepped after uneven 1-8 s of audio as sottod steps an overloaded stream
# (stream-driver -j): (first file, files, -j seed, whether every file
# after the long-form one is checked or only the last). All four are
# soaks, 3-4 minutes of audio each: `bench/soaks` runs them (pytest -m
# soak). The suite keeps the long-form file's slides (test_longform_*,
# on the whole-set run) and a long reel's end (test_finish_after_long_stream).
SOAKS = [
    # 2830-3980-0043.wav and the 18 files after it in manifest order (202
    # s, the 118 s long-form file sixth from the end), -j 3: after a slide
    # inside the long-form file's one long segment the decoder, forced to
    # continue it, gave no timestamps and stopped at its last words each
    # step while the window grew over the next 15 s of speech; the forced
    # slide placed that text's end at the window's end and cut past the
    # speech ("...and they followed them" / "." instead of jfk.wav and the
    # short files). Every file after the long-form one must be final.
    pytest.param("2830-3980-0043.wav", 19, "3", True, id="slide-in-long-form",
                 marks=pytest.mark.soak),
    # 0880 and the 22 files after it (230 s), -j 6: the last decode at
    # finish, 1 s after a step whose hypothesis was "I have a thousand
    # thoughts about that thing. This is a long stop.", gave no text at
    # all. The last file's words must be final.
    pytest.param("sense_and_sensibility_01_austen_64kb-0880.wav", 23, "6",
                 False, id="empty-last-decode", marks=pytest.mark.soak),
    # jfk.wav and the 25 files after it (246 s), -j 14: the last window
    # opened with "amiable" forced where the audio says "...ble himself",
    # and the forced last decode gave only "." before falsetto.wav. The
    # last file's words must be final.
    pytest.param("jfk.wav", 26, "14", False, id="forced-prefix-26",
                 marks=pytest.mark.soak),
    # jfk.wav and the 27 files after it (256 s, the fourth soak's
    # session), -j 14: the same window, "amiable" forced; the forced last
    # decode gave "and I'm not a good boy." and closed it 10 s before the
    # end of the speech (falsetto.wav, whisper.wav, mfa_thoughts.wav),
    # while the unforced one transcribed all three. The last file's words
    # must be final.
    pytest.param("jfk.wav", 28, "14", False, id="forced-prefix-28",
                 marks=pytest.mark.soak),
]


@pytest.mark.parametrize(("first", "n", "seed", "after_long_form"), SOAKS)
def test_soak_session_uneven_steps(first: str, n: int, seed: str,
                                   after_long_form: bool):
    """A soak session that lost its end, replayed through the driver at
    the same uneven steps: what it ends with is final."""
    refs = werlib.load_manifest(AUDIO_DIR)
    names = list(refs)
    at = names.index(first)
    order = [names[(at + i) % len(names)] for i in range(n)]
    end = (order[order.index(LONG_FORM) + 1:] if after_long_form
           else order[-1:])
    ev = run_driver("-", 1000, stdin=_reel(first, n)[0], extra=("-j", seed))
    words = [werlib.normalise(refs[name]).split() for name in end]
    hyp = werlib.normalise(final_text(ev)).split()
    tail = hyp[-(sum(map(len, words)) + 10):]
    for name, w in zip(end, words):
        found = sum(1 for x in w if x in tail)
        assert found >= 0.8 * len(w), (first, n, seed, name, w, tail)
    report(f"soak session from {first}, {n} files, -j {seed}: "
           f"{', '.join(end)} final")


@pytest.mark.parametrize("files", [
    15, pytest.param(23, marks=pytest.mark.soak)])  # bench/soaks
def test_finish_after_long_stream(files):
    """Streams of 3-4 min that end in a short file (two of the soak's
    sessions that lost their end, bench/daemon --only soak), stepped
    each 5 s as sottod steps an overloaded stream: the last file's words
    are final. With the long prompt the last decode ended the text early
    ("Experience proves this." and the end of text, with 17 s of speech
    after it; "I have a thousand thoughts about that thing." and nothing
    of "This is a long stop.") and finish() dropped the rest."""
    pcm, ref = _reel("sense_and_sensibility_01_austen_64kb-0880.wav", files)
    ev = run_driver("-", 5000, stdin=pcm)
    last_words = werlib.normalise(ref).split()
    tail = werlib.normalise(final_text(ev)).split()[-len(last_words):]
    found = sum(1 for w in last_words if w in tail)
    assert found >= 0.8 * len(last_words), (last_words, tail)


def _norm(w: str) -> str:
    return "".join(c for c in w.lower() if c.isalnum())


def test_final_times_hold_their_words(tmp_path):
    """A final runs from its first word to its last, as `sotto transcribe
    --word-timestamps` places those words, within 0.3 s (or inside the
    word, or across a pause between it and the word beside it), and ends
    after it starts: 1 s of silence, jfk, 40 s of silence, jfk. (Taken from
    Whisper's segment timestamps and estimated inside them, the first cue
    was 0.00-0.46 for a word at 1.02-1.70, one was 4.43-4.43, and after
    the long silence 'And so' began a second early.)"""
    import difflib

    rate = 16000
    jfk = _pcm("jfk.wav")
    samples = [0] * rate + jfk + [0] * (40 * rate) + jfk
    wav = tmp_path / "gaps.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(_raw(samples))
    # the two at once, a core each
    with ThreadPoolExecutor(2) as pool:
        stream = pool.submit(run_driver, wav, FINE_STEP_MS)
        cp = subprocess.run([str(SOTTO_BIN), "transcribe", "-m", str(MODEL),
                             "-t", THREADS, "--word-timestamps", "-f", "json",
                             "-q", str(wav)], capture_output=True, text=True,
                            timeout=600, stdin=subprocess.DEVNULL)
        events = stream.result()
    assert cp.returncode == 0, cp.stderr
    ref = [w for s in json.loads(cp.stdout)["segments"] for w in s["words"]]
    got = []     # (final index, word)
    fs = finals(events)
    for i, f in enumerate(fs):
        assert f["end"] > f["start"], f
        got += [(i, w) for w in f["text"].split()]
    sm = difflib.SequenceMatcher(a=[_norm(w) for _, w in got],
                                 b=[_norm(w["word"]) for w in ref],
                                 autojunk=False)
    where = {}   # got index -> ref index
    for a, b, n in sm.get_matching_blocks():
        for k in range(n):
            where[a + k] = b + k

    def near(t: float, r: int, edge: str) -> bool:
        # Within 0.3 s of the word's edge or inside the word; or, where
        # transcribe's words meet with no gap (it gave a pause to one of
        # them), anywhere in that pair: the stream may give the pause to
        # the other (fp32 here: transcribe's "ask" 54.28-55.86 after
        # "Americans,", the stream's final starting at 55.0; int8 on AVX2:
        # "you." 59.26-59.90 and "Ask" 59.90-60.66, the stream's final
        # ending at 60.28 and the next one starting there with "Ask"). A
        # final a word off, or reaching into a silence, still fails.
        w = ref[r]
        if abs(t - w[edge]) <= 0.3 or w["start"] <= t <= w["end"]:
            return True
        o = r - 1 if edge == "start" else r + 1
        if not 0 <= o < len(ref):
            return False
        a, b = (ref[o], w) if edge == "start" else (w, ref[o])
        return b["start"] - a["end"] <= 0.02 and a["start"] <= t <= b["end"]

    checked = 0
    for i, f in enumerate(fs):
        idx = [k for k, (fi, _) in enumerate(got) if fi == i]
        if idx[0] in where:
            assert near(f["start"], where[idx[0]], "start"), \
                (f, ref[where[idx[0]]])
            checked += 1
        if idx[-1] in where:
            assert near(f["end"], where[idx[-1]], "end"), \
                (f, ref[where[idx[-1]]])
            checked += 1
    assert checked >= len(fs), (checked, len(fs))
    report(f"final times vs transcribe's words (silence, jfk, 40 s, jfk): "
           f"{len(fs)} finals, {checked} ends within 0.3 s of their words "
           f"or across a pause between two words")


def test_preview_keeps_finals_shows_words_sooner(runs):
    """sotto_stream_preview() (stream-driver -P): the window decoded
    between steps for its partial alone. The finals are exactly those of
    the same stream without previews (runs' jfk_fine: a preview commits
    nothing and moves nothing a step depends on), and the previews show
    words the last step had not. sottod previews its only live stream
    when it has nothing else to do (tests/daemon/test_idle_steps.py)."""
    def finals(events):
        return [(e["id"], e["start"], e["end"], e["text"])
                for e in events if e["type"] == "final"]

    plain = runs["jfk_fine"]
    seen = run_driver(AUDIO_DIR / "jfk.wav", FINE_STEP_MS, extra=("-P", "500"))
    assert finals(plain), "no finals at all"
    assert finals(seen) == finals(plain)

    previews = [e for e in seen if e["type"] == "preview"]
    n_steps = len([e for e in seen if e["type"] == "step"
                   and not e["finish"]])
    # 11 s at 1 s steps, a preview 500 ms after each step
    assert len(previews) >= 0.8 * n_steps, (len(previews), n_steps)
    # Each preview against the partial of the step before it: most show
    # more than that step did (a preview that only repeated the last
    # partial would fail here).
    last, newer, spoken = "", 0, 0
    for e in seen:
        if e["type"] == "partial":
            last = e["text"]
        elif e["type"] == "preview":
            spoken += e["text"].strip() != ""
            newer += e["text"] != last
    report(f"previews (jfk.wav, 1 s steps, -P 500): {len(previews)} "
           f"between {n_steps} steps, {spoken} with words, {newer} unlike "
           f"the step's partial before; finals unchanged")
    assert spoken >= 0.8 * len(previews), (spoken, len(previews))
    assert newer >= 0.5 * len(previews), (newer, len(previews))
