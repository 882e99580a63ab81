"""The streaming policy (lib/stream/stream.c, stream-commit.c) end to end:
real tiny.en, real speech, driven through build/tests/stream/stream-driver.

- WER of the concatenated finals within 2 points of `sotto transcribe`
  (greedy, same model) over the set, and per file within 2 points or one
  word;
- the long-form file: finals ~ transcribe's text, nothing repeated or lost
  at slides;
- final ids go up by one, times never go back (nor past the end of the
  audio);
- a final runs from its first word to its last as `sotto transcribe
  --word-timestamps` places them, within 0.3 s;
- latency (audio time when a word became final minus its estimated end),
  p50/p95, in the report section of the output;
- streams stepped together (sotto_stream_step_many, sottod's batching)
  report exactly what each stepped alone reports;
- previews between steps (sotto_stream_preview) leave the finals as they
  are and show words sooner;
- caption units (common/caption.c, as sottod builds them): the closed
  units of every file hold its finals' text once, in order; on the
  long-form file the median unit has 8 words or more; most units end in
  punctuation the model wrote, and the word error rate of the units'
  text with punctuation and case (not normalised) is within 2 points of
  `sotto transcribe`'s (issue 26).

How a stream ends (finish(), silence, noise, long streams) is
test_stream_finish.py's; word timestamps, VAD and a vocabulary are
test_stream_words.py's, test_stream_vad.py's and
test_stream_vocabulary.py's.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import wave
from concurrent.futures import ThreadPoolExecutor

from conftest import (AUDIO_DIR, FINE_STEP_MS, LONG_FORM, MODEL, SOTTO_BIN,
                      STEP_MS, THREADS, _pcm, _raw, final_text, finals,
                      report, run_driver, steps, werlib)


# Measured (tiny.en, bf16/AMX, 2 cores): stream vs transcribe errors
# 6 vs 3 on the 118 s long-form file at the 2 s step of this test, over
# the set 2.06% vs 1.38% (4 vs 3 and 1.61% while the committed text
# before the window was the prompt; then 6 vs 3 and 2.52% at the
# daemon's 1 s step). The bound is the issue's: 2 points, per file too.
WER_POINTS = 0.02


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
