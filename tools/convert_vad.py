#!/usr/bin/env python3
"""Convert Silero VAD (v5/v6, the `silero-vad` package's ONNX file) to
sotto's GGUF (docs/model-format.md, "Silero VAD").

    tools/convert_vad.py silero_vad.onnx -o silero-vad.gguf [--source TEXT]

scripts/fetch-model silero-vad downloads the pinned package and runs this.
Expected failures print one line on stderr and exit with status 1; status 2
is a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sotto_gguf.cli import one_file_main  # noqa: E402


def _writer():  # noqa: ANN202
    from sotto_gguf.vad import write_vad_gguf

    return write_vad_gguf


def main(argv: list[str] | None = None) -> int:
    return one_file_main(argv, prog="convert_vad", doc=__doc__, input_help="a Silero VAD .onnx file",
                         default_name="silero-vad", load_writer=_writer)


if __name__ == "__main__":
    sys.exit(main())
