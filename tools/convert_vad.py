#!/usr/bin/env python3
"""Convert Silero VAD (v5/v6, the `silero-vad` package's ONNX file) to
sotto's GGUF (docs/model-format.md, "Silero VAD").

    tools/convert_vad.py silero_vad.onnx -o silero-vad.gguf [--source TEXT]

scripts/fetch-model silero-vad downloads the pinned package and runs this.
Expected failures print one line on stderr and exit with status 1; status 2
is a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.common import ConvertError, progress  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", type=Path, help="a Silero VAD .onnx file")
    ap.add_argument("-o", "--output", type=Path, required=True, help="output .gguf")
    ap.add_argument("--name", default="silero-vad", help="general.name [silero-vad]")
    ap.add_argument("--source", help="sotto.source: where the file came from [its name]")
    args = ap.parse_args(argv)
    try:
        from sotto_gguf.vad import write_vad_gguf

        if not args.input.is_file():
            raise ConvertError(f"{args.input}: no such file")
        write_vad_gguf(args.input, args.output, args.name, args.source)
    except ConvertError as e:
        print(f"convert_vad: error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"convert_vad: error: missing Python package ({e}); pip install -r tools/requirements.txt",
              file=sys.stderr)
        return 1
    progress(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
