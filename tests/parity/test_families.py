"""Every Whisper release, proven without its weights: a random model of its
dimensions (conftest.py) against CTranslate2 running the same weights, on
real speech (jfk.wav).

Per release (the test ids name it):
- test_input_routes: the Hugging Face directory and the whisper.cpp file
  (exported from the GGUF) convert to the same GGUF as the CTranslate2
  directory, bit for bit.
- test_tokenizer: the GGUF's vocabulary, special ids, languages and
  suppress lists are those of openai's own tokenizer for the release's
  vocabulary size (large-v3's 100th language shifts every id after it),
  and sotto's SOT sequences are openai's.
- test_log_mel: sotto's front end with the model's filter bank (80 or 128
  bins) against openai's recipe and mel_filters.npz.
- test_encoder: the encoder output on the reference log-mel.
- test_decoder: the first-token logits and 64 greedy steps with
  CTranslate2's tokens forced as the prefix at each step.
- test_language: language probabilities (multilingual releases).

Bounds (fp32 is the reference's own arithmetic up to summation order;
bf16 rounds every product's inputs to 8 significant bits, u = 2^-9):
- encoder fp32: max abs error ENC_FP32_TOL; bf16: max abs error <= 16 u
  max|ref|, RMS error <= 4 u RMS(ref) (as tests/numerics/test_encoder.py).
- logits fp32: max abs error LOGIT_FP32_TOL on every step; the argmax is
  the reference's at every step where its top two differ by more than
  1e-3. bf16: the argmax is the reference's wherever its top two differ by
  more than BF16_GAP, and the logit of the reference's choice is within
  BF16_LOGIT_REL of the logits' standard deviation. sotto's bf16 head
  computes only the top 64 of its 4-bit estimates exactly (docs/
  architecture.md), so other logits are off by up to about a third of a
  standard deviation here: random weights give no gap between the few
  likely tokens and the rest, and a reference top-8 token can fall out of
  the estimates' top 64 (the report shows the top-8 error).
- language probabilities: max abs error 1e-5 (fp32), LANG_BF16_TOL (bf16;
  detection recomputes every language's logit exactly).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import N_STEPS, PY, TOOLS, convert, openai_languages, openai_suppress, openai_tokenizer, run
from sotto_gguf.gguf_raw import GgufRaw  # noqa: E402

pytestmark = pytest.mark.parity

BF16_U = 2.0 ** -9
ENC_FP32_TOL = 1e-3
LOGIT_FP32_TOL = 1e-3
FP32_GAP = 1e-3
BF16_GAP = 0.05
BF16_LOGIT_REL = 0.05
LANG_BF16_TOL = 1e-3


def gguf_parts(path):
    """(metadata {key: raw bytes} without sotto.source, that source,
    tensors [(name, type, shape, data bytes)]): a byte-level view of a
    GGUF (sotto_gguf/gguf_raw.py: gguf.GGUFReader took 3 s of a family's 7-20 s
    here, for each of three files)."""
    g = GgufRaw(path)
    md = {k: v for k, v in g.raw.items() if k != "sotto.source"}
    return md, g.value("sotto.source"), [(name, t, dims, g.tensor_bytes(i))
                                          for i, (name, t, dims, _) in enumerate(g.tensors)]


def test_input_routes(family, tmp_path, report):
    """HF directory and whisper.cpp file -> the same GGUF as the CT2 one:
    the same metadata (but sotto.source) and tensors, bit for bit."""
    t0 = time.perf_counter()
    hf = tmp_path / "hf.gguf"
    # the HF route beside the whisper.cpp one: a process on each core
    with ThreadPoolExecutor(1) as pool:
        hf_done = pool.submit(convert, family.hf, hf, family.names[0])
        ggml = tmp_path / "ggml.bin"
        cp = run([PY, TOOLS / "export_ggml.py", family.gguf, "-o", ggml])
        assert cp.returncode == 0, cp.stderr
        back = tmp_path / "ggml.gguf"
        convert(ggml, back, family.names[0])
        ggml.unlink()
        hf_done.result()
    ma, sa, ta = gguf_parts(family.gguf)
    assert sa == b"ct2"
    for other, source in ((hf, b"hf"), (back, b"ggml")):
        mb, sb, tb = gguf_parts(other)
        assert sb == source
        assert ma.keys() == mb.keys() and [k for k in ma if ma[k] != mb[k]] == [], f"{source} metadata differs"
        assert [x[:3] for x in ta] == [x[:3] for x in tb], f"{source} tensor list differs"
        for (name, _, _, a), (_, _, _, b) in zip(ta, tb):
            assert a == b, (source, name)
        del mb, tb
    report(f"{family.id} ({family.depth}): random {family.timings['random']:.1f} s, "
           f"written {family.timings['write']:.1f} s, converted {family.timings['convert']:.1f} s; "
           f"HF and ggml routes identical ({time.perf_counter() - t0:.1f} s)")


def test_tokenizer(family, sotto, openai_whisper):
    md = GgufRaw(family.gguf).metadata()
    tok = family.tok
    hp = family.hp
    multi = hp.n_vocab >= 51865
    assert md["whisper.tokenizer.tokens"] == family.tokens
    assert md["whisper.tokenizer.n_bpe"] == tok.eot
    ids = {"eot": tok.eot, "sot": tok.sot, "translate": tok.translate, "transcribe": tok.transcribe,
           "sot_lm": tok.sot_lm, "sot_prev": tok.sot_prev, "no_speech": tok.no_speech,
           "no_timestamps": tok.no_timestamps, "timestamp_begin": tok.timestamp_begin}
    assert {k: md[f"whisper.token.{k}"] for k in ids} == ids
    assert md["whisper.suppress_tokens"] == openai_suppress(tok)
    assert md["whisper.suppress_begin"] == [220, tok.eot]
    codes = openai_languages(openai_whisper, hp.n_vocab)
    assert [tok.sot + 1 + i for i in range(len(codes))] == sorted(tok.all_language_tokens)[:len(codes)]
    assert [c.decode() for c in md["whisper.languages"]] == codes
    assert sotto.languages() == codes
    assert sotto.info.multilingual == multi
    assert sotto.sot_sequence("en") == list(tok.sot_sequence)
    assert sotto.sot_sequence("en", notimestamps=True) == list(tok.sot_sequence_including_notimestamps)
    if multi:
        last = codes[-1]  # "yue" in large-v3's vocabulary, "su" before it
        ref = openai_tokenizer(openai_whisper, hp.n_vocab, language=last, task="translate")
        assert sotto.sot_sequence(last, translate=True, notimestamps=True) == \
            list(ref.sot_sequence_including_notimestamps)
    else:
        with pytest.raises(RuntimeError, match="English-only"):
            sotto.sot_sequence("de")


def test_log_mel(family, sotto, ref_mel, pcm30, report):
    got = sotto.log_mel(pcm30, 3000)
    ref = ref_mel[family.hp.n_mels]
    err = float(np.abs(got - ref).max())
    report(f"{family.id} {sotto_prec(sotto)}: log-mel {family.hp.n_mels} bins max|err| {err:.2e}")
    assert err < 1e-3


def sotto_prec(s) -> str:
    return "fp32" if s.info.precision == 1 else "bf16"


def test_encoder(family, sotto, reference, ref_mel, report):
    t0 = time.perf_counter()
    got = sotto.encode(ref_mel[family.hp.n_mels])
    dt = time.perf_counter() - t0
    ref = reference.enc
    assert got.shape == ref.shape and np.isfinite(got).all()
    assert ref.std() > 0.1
    err = np.abs(got - ref)
    rms_err, scale, rms_ref = float(np.sqrt((err ** 2).mean())), float(np.abs(ref).max()), float(np.sqrt((ref ** 2).mean()))
    prec = sotto_prec(sotto)
    report(f"{family.id} ({family.depth}) {prec}: encoder max|err| {err.max():.2e} ({err.max() / scale:.2%} of "
           f"max|ref| {scale:.2f}), rms err {rms_err:.2e} ({rms_err / rms_ref:.2%} of rms ref); "
           f"sotto {dt:.2f} s, CTranslate2 reference {reference.seconds:.1f} s in all")
    if prec == "fp32":
        assert err.max() < ENC_FP32_TOL
    else:
        assert err.max() > 1e-4, "bf16 output as exact as fp32?"
        assert err.max() <= 16 * BF16_U * scale
        assert rms_err <= 4 * BF16_U * rms_ref


def test_decoder(family, sotto, reference, ref_mel, report):
    sotto.encode(ref_mel[family.hp.n_mels])
    eot = family.tok.eot
    toks = reference.prompt + reference.tokens[:N_STEPS - 1]
    got = sotto.decode_logits(toks, len(reference.prompt))
    ref = reference.logits.copy()
    assert got.shape == ref.shape and np.isfinite(got).all()
    got[:, eot] = ref[:, eot] = 0.0  # the reference suppressed it to run all 64 steps
    top2 = np.sort(ref, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    spread = float(ref.std())
    err = np.abs(got - ref)
    got[:, eot] = -np.inf
    same = got.argmax(axis=1) == np.asarray(reference.tokens)
    prec = sotto_prec(sotto)
    top8 = np.argsort(ref, axis=1)[:, -8:]
    err8 = np.take_along_axis(err, top8, axis=1)
    report(f"{family.id} ({family.depth}) {prec}: logits max|err| first token {err[0].max():.2e}, "
           f"64 steps {err.max():.2e}, top-8 {err8.max():.2e} (logit std {spread:.2f}); "
           f"argmax = reference at {same.sum()}/{N_STEPS} steps; smallest top-2 gap {gap.min():.2e}")
    if prec == "fp32":
        assert err.max() < LOGIT_FP32_TOL
        bad = np.flatnonzero(~same & (gap > FP32_GAP))
    else:
        chosen = err[np.arange(N_STEPS), np.asarray(reference.tokens)]
        assert chosen.max() <= BF16_LOGIT_REL * spread, f"logit of the reference's token off by {chosen.max():.3f}"
        bad = np.flatnonzero(~same & (gap > BF16_GAP))
    assert bad.size == 0, f"argmax differs at steps {bad.tolist()} (gaps {gap[bad].tolist()})"


def test_language(family, sotto, reference, ref_mel, report):
    """sotto_detect_language (what transcribe and streams use) against
    CTranslate2's detect_language: every language's probability."""
    if reference.lang_probs is None:
        assert not sotto.info.multilingual and not sotto.languages()
        return
    sotto.encode(ref_mel[family.hp.n_mels])
    codes = sotto.languages()
    best, p = sotto.detect_language()
    assert set(reference.lang_probs) == set(codes)
    ref = np.array([reference.lang_probs[c] for c in codes])
    err = float(np.abs(p - ref).max())
    prec = sotto_prec(sotto)
    report(f"{family.id} {prec}: {len(codes)} language probabilities max|err| {err:.2e} "
           f"(largest {ref.max():.3f}, {codes[int(ref.argmax())]})")
    assert abs(p.sum() - 1.0) < 1e-4
    top2 = np.sort(ref)[-2:]
    if top2[1] - top2[0] > 1e-3:
        assert best == int(ref.argmax())
    assert err < (1e-5 if prec == "fp32" else LANG_BF16_TOL)
