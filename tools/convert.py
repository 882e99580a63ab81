#!/usr/bin/env python3
"""Convert a Whisper model to sotto's GGUF (docs/model-format.md).

    tools/convert.py INPUT -o OUT.gguf [--name NAME]

INPUT is one of:
  * a faster-whisper / CTranslate2 directory (model.bin, vocabulary.{json,txt},
    config.json),
  * a Hugging Face openai/whisper-* directory (config.json, *.safetensors,
    tokenizer.json or vocab.json + added_tokens.json),
  * a whisper.cpp ggml-*.bin file.

Expected failures (missing files, wrong or truncated formats) print one line
on stderr and exit with status 1; status 2 is a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.common import ConvertError, WhisperModel, progress  # noqa: E402

GGML_MAGIC = 0x67676D6C


def detect(path: Path) -> str:
    """Which reader handles INPUT: 'ct2', 'hf' or 'ggml'."""
    if not path.exists():
        raise ConvertError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "model.bin").is_file():
            return "ct2"
        if any(path.glob("*.safetensors")):
            return "hf"
        raise ConvertError(f"{path}: neither a CTranslate2 directory (model.bin) nor a Hugging Face directory (*.safetensors)")
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise ConvertError(f"{path}: {e.strerror}") from None
    if len(head) == 4 and int.from_bytes(head, "little") == GGML_MAGIC:
        return "ggml"
    if path.name == "model.bin":
        return "ct2-file"
    raise ConvertError(f"{path}: not a whisper.cpp ggml file (bad magic) and not a model directory")


def load(path: Path) -> WhisperModel:
    kind = detect(path)
    if kind in ("ct2", "ct2-file"):
        from sotto_gguf import ct2

        return ct2.load(path if kind == "ct2" else path.parent)
    if kind == "hf":
        from sotto_gguf import hf

        return hf.load(path)
    from sotto_gguf import ggml

    return ggml.load(path)


def default_name(path: Path) -> str:
    """ggml-tiny.en.bin -> tiny.en; a directory -> its name."""
    p = path.resolve()
    if p.is_file() and p.name == "model.bin":
        p = p.parent
    n = p.name
    if p.is_file():
        n = n.removesuffix(".bin").removeprefix("ggml-")
    for prefix in ("faster-whisper-", "whisper-"):
        n = n.removeprefix(prefix)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", type=Path, help="CTranslate2 dir, Hugging Face dir or ggml .bin")
    ap.add_argument("-o", "--output", type=Path, required=True, help="output .gguf")
    ap.add_argument("--name", help="general.name (default: from the input's name)")
    args = ap.parse_args(argv)
    try:
        from sotto_gguf.build import write_gguf

        model = load(args.input)
        write_gguf(model, args.output, args.name or default_name(args.input))
    except ConvertError as e:
        print(f"convert: error: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        print("convert: error: out of memory", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"convert: error: missing Python package ({e}); pip install -r tools/requirements.txt", file=sys.stderr)
        return 1
    progress(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
