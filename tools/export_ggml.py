#!/usr/bin/env python3
"""Export a sotto GGUF model as a whisper.cpp ggml-*.bin (f16).

    tools/export_ggml.py IN.gguf -o ggml-NAME.bin

Used to benchmark whisper.cpp on exactly the weights sotto runs, and by the
converter round-trip test (gguf -> ggml -> gguf must be lossless).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.common import HPARAM_KEYS, ConvertError, Hparams, from_sotto_tensors, progress  # noqa: E402


def export(src: Path, dst: Path) -> None:
    from sotto_gguf import ggml
    from sotto_gguf.reader import read_gguf

    if not src.is_file():
        raise ConvertError(f"{src}: no such file")
    progress(f"reading {src}")
    md, tensors = read_gguf(src)
    if md.get("general.architecture") != b"whisper" or "sotto.format_version" not in md:
        raise ConvertError(f"{src}: not a sotto whisper GGUF")
    try:
        hp = Hparams(**{k: int(md[f"whisper.{k}"]) for k in HPARAM_KEYS})
    except KeyError as e:
        raise ConvertError(f"{src}: missing key {e}") from None
    if "mel.filters" not in tensors:
        raise ConvertError(f"{src}: no mel.filters tensor")
    tmp = dst.with_name(dst.name + ".tmp")
    progress(f"writing {dst}")
    try:
        ggml.write(
            tmp,
            hp,
            tensors["mel.filters"],
            md["whisper.tokenizer.tokens"],
            int(md["whisper.tokenizer.n_bpe"]),
            from_sotto_tensors(tensors),
        )
        os.replace(tmp, dst)
    except KeyError as e:
        raise ConvertError(f"{src}: missing {e}") from None
    except OSError as e:
        raise ConvertError(f"cannot write {dst}: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Export a sotto GGUF as a whisper.cpp ggml .bin (f16).")
    ap.add_argument("input", type=Path, help="sotto .gguf")
    ap.add_argument("-o", "--output", type=Path, required=True, help="output ggml-NAME.bin")
    args = ap.parse_args(argv)
    try:
        export(args.input, args.output)
    except ConvertError as e:
        print(f"export_ggml: error: {e}", file=sys.stderr)
        return 1
    progress(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
