#!/usr/bin/env python3
"""Write a Whisper release with random weights, for benchmarks and tests.

    tools/random_model.py FAMILY -o DIR --tiktoken FILE [--format ct2|hf]
                          [--seed N] [--audio-layers N] [--text-layers N]

FAMILY is a name of tools/families.json (large-v3-turbo, distil-large-v3,
...). DIR becomes a faster-whisper / CTranslate2 directory (default) or a
Hugging Face directory, which tools/convert.py turns into a GGUF. FILE is
openai's tiktoken vocabulary for the release (multilingual.tiktoken, or
gpt2.tiktoken for the .en ones; both ship in the openai-whisper sdist): the
special tokens are appended to it the way openai's tokenizer does.
--audio-layers / --text-layers cap the depth (real widths, heads, mel bins
and vocabulary). Timing does not depend on the weights' values, so a
random model benchmarks a release whose weights are not at hand.
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.common import ConvertError, progress  # noqa: E402


def bpe_from_tiktoken(path: Path) -> list[bytes]:
    """Token bytes in rank order from a tiktoken file (base64 token, rank)."""
    try:
        lines = [ln.split() for ln in path.read_bytes().splitlines() if ln]
        toks = [base64.b64decode(t) for t, _ in lines]
        ranks = [int(r) for _, r in lines]
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: not a tiktoken file ({e})") from None
    if ranks != list(range(len(ranks))):
        raise ConvertError(f"{path}: ranks are not 0..{len(ranks) - 1} in order")
    return toks


def build(family: str, out: Path, tiktoken: Path, fmt: str, seed: int, audio_layers: int | None,
          text_layers: int | None) -> None:
    from sotto_gguf import families, randmodel
    from sotto_gguf.tokenizer import find_specials, special_token_strings, suppress_tokens

    hp = families.reduced(families.get(family).hparams, audio_layers, text_layers)
    specials = special_token_strings(hp.n_vocab)
    bpe = bpe_from_tiktoken(tiktoken)
    if len(bpe) != specials[0][0]:
        raise ConvertError(f"{tiktoken} has {len(bpe)} tokens; {family} needs {specials[0][0]} "
                           f"({'multilingual' if hp.n_vocab >= 51865 else 'gpt2'}.tiktoken)")
    tokens = bpe + [s for _, s in specials]
    sp = find_specials(tokens, hp.n_vocab)
    suppress = suppress_tokens(tokens, sp)
    strings = randmodel.gpt2_strings(tokens, sp.n_bpe)
    eot, sot = sp.ids["eot"], sp.ids["sot"]
    progress(f"random {family}: {hp.n_audio_layer}/{hp.n_text_layer} layers, seed {seed}")
    tensors = randmodel.random_tensors(hp, seed)
    langs = list(range(sot + 1, sot + 1 + len(sp.languages)))
    if fmt == "ct2":
        cfg = {"suppress_ids": suppress, "suppress_ids_begin": [220, eot], **({"lang_ids": langs} if langs else {})}
        randmodel.write_ct2(out, hp, tensors, strings, cfg, sp.n_bpe)
    else:
        gen = {"suppress_tokens": suppress, "begin_suppress_tokens": [220, eot], "decoder_start_token_id": sot,
               "no_timestamps_token_id": sp.ids["no_timestamps"], "is_multilingual": bool(langs)}
        randmodel.write_hf(out, hp, tensors, strings, sp.n_bpe, {"eot": eot, "sot": sot}, gen)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family", help="a name of tools/families.json")
    ap.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    ap.add_argument("--tiktoken", type=Path, required=True, help="multilingual.tiktoken or gpt2.tiktoken")
    ap.add_argument("--format", choices=["ct2", "hf"], default="ct2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--audio-layers", type=int, help="at most this many encoder layers")
    ap.add_argument("--text-layers", type=int, help="at most this many decoder layers")
    a = ap.parse_args(argv)
    try:
        build(a.family, a.output, a.tiktoken, a.format, a.seed, a.audio_layers, a.text_layers)
    except ConvertError as e:
        print(f"random_model: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"random_model: error: {e}", file=sys.stderr)
        return 1
    progress(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
