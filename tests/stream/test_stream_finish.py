"""How a stream ends (lib/stream/stream.c, stream-commit.c), end to end:
real tiny.en, real speech, driven through build/tests/stream/stream-driver.

- finish() commits the tail, decoded as transcribe decodes it, or, when
  the audio since the last step is silence that began before that step's
  end, the last step's hypothesis without another decode; silence
  yields no text and skips the encoder; speech followed by room noise
  yields the speech once;
- a window cut inside the last committed word does not make what is left
  of it, as Whisper hears it again, a final of its own (four readers and
  silence, after two lead-ins that did);
- a stream of minutes stepped each 5 s, or at uneven 1-8 s steps as
  sottod steps an overloaded stream (soak sessions that lost their end,
  replayed; `pytest -m soak`), ends with its last words final.

The checks of the whole-set run (WER, ids and times, latency, caption
units) are test_stream.py's.
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (AUDIO_DIR, FINE_STEP_MS, LONG_FORM, _pcm, _raw,
                      final_text, report, run_driver, steps, werlib)


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


# Four soak sessions that lost their end (bench/daemon --only soak),
# stepped after uneven 1-8 s of audio as sottod steps an overloaded stream
# (stream-driver -j): (first file, files, -j seed, whether every file
# after the long-form one is checked or only the last). All four are
# soaks, 3-4 minutes of audio each: `bench/soaks` runs them (pytest -m
# soak). The suite keeps the long-form file's slides (test_longform_* of
# test_stream.py, on the whole-set run) and a long reel's end
# (test_finish_after_long_stream).
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
