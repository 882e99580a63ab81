#!/usr/bin/env python3
"""faster-whisper worker for bench/run (one process per measurement).

    fw.py micro CT2_DIR --compute-type int8|float32 --audio WAV [--runs N]
        load time, encoder time of one 30 s window, and the time per
        cached decoder token for 1 and 5 beams; prints one JSON object.
    fw.py fixed CT2_DIR --compute-type T --raw RAW [--tokens N]
        the fixed-token file (docs/benchmarks.md): the log-mel of the
        whole file (16 kHz s16le mono), then per 30 s window the encoder
        and N tokens greedily with every token but the text ones
        suppressed (CTranslate2's generate()); prints one JSON object.
    fw.py transcribe CT2_DIR --compute-type T FILE... [--language en] [--vad]
        greedy transcription (beam_size=1, faster-whisper's defaults
        otherwise: temperature fallback, conditioning on earlier text,
        timestamps, no VAD unless --vad: vad_filter=True with its default
        VadOptions); prints one JSON object per file.

Always cpu_threads=2 unless --threads says otherwise, num_workers=1.

Per-token decode is measured on CTranslate2's own generate() over a real
encoder output, with the end-of-text token suppressed so that every call
decodes exactly max_length tokens: (t(L2) - t(L1)) / (L2 - L1) is the cost
of one cached-token step (no prompt, no encoder, no Python per-call
overhead in it). With 5 beams the same difference gives the cost of one
step of all 5 beams.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

T_START = time.perf_counter()  # the fixed-token file's wall time counts the imports too

def load(args):
    from faster_whisper import WhisperModel

    t0 = time.perf_counter()
    m = WhisperModel(args.ct2_dir, device="cpu", compute_type=args.compute_type,
                     cpu_threads=args.threads, num_workers=1)
    return m, time.perf_counter() - t0


def micro(args) -> dict:
    import ctranslate2
    import numpy as np
    from faster_whisper.audio import decode_audio

    model, load_s = load(args)
    audio = decode_audio(args.audio, sampling_rate=16000)[: 30 * 16000]
    audio = np.pad(audio, (0, 30 * 16000 - len(audio)))
    feats = model.feature_extractor(audio)[:, :3000]
    enc_t = []
    for i in range(args.runs + 1):
        t0 = time.perf_counter()
        enc = model.encode(feats)
        dt = time.perf_counter() - t0
        if i:
            enc_t.append(dt)
    tok = model.hf_tokenizer
    sot = tok.token_to_id("<|startoftranscript|>")
    eot = tok.token_to_id("<|endoftext|>")
    nots = tok.token_to_id("<|notimestamps|>")
    prompt = [sot]
    if model.model.is_multilingual:
        prompt += [tok.token_to_id("<|en|>"), tok.token_to_id("<|transcribe|>")]
    prompt.append(nots)
    assert isinstance(enc, ctranslate2.StorageView)

    def gen(length: int, beams: int) -> tuple[float, int]:
        t0 = time.perf_counter()
        r = model.model.generate(enc, [prompt], beam_size=beams, max_length=length,
                                 suppress_tokens=[eot], suppress_blank=False,
                                 return_scores=False)
        return time.perf_counter() - t0, len(r[0].sequences_ids[0])

    # CTranslate2 4.x generates max_length / 2 tokens for Whisper here; the
    # token counts actually returned are used, not the lengths asked for.
    l1, l2 = 16, 16 + 2 * args.tokens
    out = {"load_s": load_s, "encoder_s": statistics.median(enc_t)}
    for beams, key in ((1, "step1_ms"), (5, "step5_ms")):
        gen(l1, beams)  # warm-up
        a = [gen(l1, beams) for _ in range(args.runs)]
        b = [gen(l2, beams) for _ in range(args.runs)]
        na, nb = a[0][1], b[0][1]
        if nb <= na or any(x[1] != na for x in a) or any(x[1] != nb for x in b):
            raise SystemExit(f"fw.py: token counts {na} / {nb}: end of text not suppressed?")
        ta = statistics.median(x[0] for x in a)
        tb = statistics.median(x[0] for x in b)
        out[key] = (tb - ta) / (nb - na) * 1e3
        out[key.replace("_ms", "_tokens")] = [na, nb]
    return out


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1.0


def fixed(args, t_start: float) -> dict:
    import numpy as np

    model, load_s = load(args)
    audio = np.fromfile(args.raw, dtype="<i2").astype(np.float32) / 32768.0
    windows = -(-len(audio) // 480000)
    t0 = time.perf_counter()
    feats = model.feature_extractor(audio, padding=480000)  # openai pads 30 s of zeros
    mel_s = time.perf_counter() - t0
    tok = model.hf_tokenizer
    eot = tok.token_to_id("<|endoftext|>")
    prompt = [tok.token_to_id("<|startoftranscript|>")]
    if model.model.is_multilingual:
        prompt += [tok.token_to_id("<|en|>"), tok.token_to_id("<|transcribe|>")]
    prompt.append(tok.token_to_id("<|notimestamps|>"))
    not_text = list(range(eot, tok.get_vocab_size()))
    enc_s = dec_s = 0.0
    for w in range(windows):
        x = feats[:, w * 3000:(w + 1) * 3000]
        x = np.ascontiguousarray(np.pad(x, ((0, 0), (0, 3000 - x.shape[1]))))
        t0 = time.perf_counter()
        enc = model.encode(x)
        enc_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        # CTranslate2 4.x returns max_length / 2 tokens here (see micro)
        r = model.model.generate(enc, [prompt], beam_size=1, max_length=2 * args.tokens,
                                 suppress_tokens=not_text, suppress_blank=False, return_scores=False)
        dec_s += time.perf_counter() - t0
        got = len(r[0].sequences_ids[0])
        if got != args.tokens:
            raise SystemExit(f"fw.py: {got} tokens decoded, not {args.tokens}")
    return {"load_s": load_s, "mel_s": mel_s, "windows": windows, "tokens_per_window": args.tokens,
            "encoder_s": enc_s, "decode_s": dec_s, "wall_s": time.perf_counter() - t_start,
            "peak_rss_mb": peak_rss_mb()}


def transcribe(args) -> None:
    model, load_s = load(args)
    print(json.dumps({"load_s": load_s}), flush=True)
    for f in args.files:
        segs, info = model.transcribe(f, beam_size=1, language=args.language,
                                      vad_filter=args.vad)
        segs = list(segs)
        text = "".join(s.text for s in segs)
        print(json.dumps({"file": f, "text": text, "duration_after_vad": info.duration_after_vad,
                          "segments": [[s.start, s.end] for s in segs]}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["micro", "fixed", "transcribe"])
    ap.add_argument("ct2_dir")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--compute-type", default="int8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--audio")
    ap.add_argument("--raw", help="fixed: 16 kHz s16le mono samples")
    ap.add_argument("--language", default="en")
    ap.add_argument("--vad", action="store_true", help="transcribe: vad_filter=True")
    args = ap.parse_intermixed_args()
    if args.mode == "micro":
        if not args.audio:
            ap.error("micro needs --audio")
        print(json.dumps(micro(args)))
    elif args.mode == "fixed":
        if not args.raw:
            ap.error("fixed needs --raw")
        print(json.dumps(fixed(args, T_START)))
    else:
        transcribe(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
