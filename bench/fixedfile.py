"""The fixed-token file of bench/run (docs/benchmarks.md).

A file end to end whose work does not depend on what the model says, so
that models with random weights (bench/randomweights.py) are measured as
real ones: the first --fixed-seconds (60) of the long-form file as raw
16 kHz s16le samples; each tool, in one process, loads the model, takes
the log-mel of the whole file, then for each 30 s window runs the encoder,
the SOT sequence (English, transcribe, no timestamps) and exactly
--fixed-tokens (100) greedy tokens over the text tokens only (end of
text and every special or timestamp token suppressed). The drivers:
`sotto-bench --file`, bench/whispercpp-file.c (whisper.h's
whisper_encode / whisper_decode), `fw.py fixed` (CTranslate2's encode and
generate). Each reports its own load, log-mel, encoder and decoder time
and its peak RSS (VmHWM, read by the process itself).
"""

from __future__ import annotations

import wave
from pathlib import Path


def make_raw(wav: Path, seconds: float, out_dir: Path) -> Path:
    """The first `seconds` of a 16 kHz mono 16-bit WAV as raw samples."""
    out = out_dir / f"{wav.stem}-{seconds:g}s.s16"
    if out.is_file():
        return out
    with wave.open(str(wav), "rb") as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, 16000):
            raise SystemExit(f"bench: {wav}: the fixed-token file needs 16 kHz mono 16-bit PCM")
        n = int(seconds * 16000)
        if w.getnframes() < n:
            raise SystemExit(f"bench: {wav} is shorter than --fixed-seconds {seconds:g}")
        data = w.readframes(n)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.rename(out)
    return out


def metrics(r: dict, wall: float, other: float) -> dict:
    """A driver's JSON as the report's metrics (fixed_*)."""
    n = r["windows"] * r["tokens_per_window"]
    return {"fixed_wall_s": wall, "fixed_load_s": r["load_s"], "fixed_mel_s": r["mel_s"],
            "fixed_enc_s": r["encoder_s"] / r["windows"], "fixed_tok_ms": r["decode_s"] / n * 1e3,
            "fixed_rss_mb": r["peak_rss_mb"], "fixed_other": other}


COLUMNS = [("wall s (process)", "fixed_wall_s", "{:.2f}"), ("load s", "fixed_load_s", "{:.2f}"),
           ("log-mel s", "fixed_mel_s", "{:.3f}"), ("encoder s / window", "fixed_enc_s", "{:.3f}"),
           ("decode ms / token", "fixed_tok_ms", "{:.2f}"), ("peak RSS MB", "fixed_rss_mb", "{:.0f}"),
           ("other cores", "fixed_other", "{:.2f}")]


def table(med, tools: list[str], label: dict, mine: tuple, peers: tuple, seconds: float,
          tokens: int) -> list[str]:
    """Markdown lines: medians per tool, then peer / sotto ratios."""
    rows = [t for t in tools if med(t, "fixed_wall_s") is not None]
    if not rows:
        return []
    L = [f"Fixed-token file ({seconds:g} s, {tokens} tokens per 30 s window, medians; the tool's own "
         f"timings, the wall time of its process; other cores: what the rest of the machine used during "
         f"the run):\n",
         "| tool | " + " | ".join(c[0] for c in COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for t in rows:
        cells = [(f.format(med(t, k)) if med(t, k) is not None else "") for _, k, f in COLUMNS]
        L.append(f"| {label[t]} | " + " | ".join(cells) + " |")
    L.append("")
    keys = [c for c in COLUMNS if c[1] in ("fixed_wall_s", "fixed_enc_s", "fixed_tok_ms", "fixed_rss_mb")]
    pairs = [(s, p) for s in mine if s in rows for p in peers if p in rows]
    if not pairs:
        return L
    L.append("Ratios, peer / sotto (above 1: sotto is faster or smaller):\n")
    L.append("| | " + " | ".join(c[0] for c in keys) + " |")
    L.append("|---|" + "---:|" * len(keys))
    for s, p in pairs:
        L.append(f"| {label[s]} vs {label[p]} | " + " | ".join(
            f"{med(p, k) / med(s, k):.2f}x" if med(p, k) and med(s, k) else "" for _, k, _ in keys) + " |")
    L.append("")
    return L
