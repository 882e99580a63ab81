"""The command line the one-file converters share (tools/convert_vad.py,
tools/convert_campplus.py): one input file, -o, --name, --source; expected
failures one line on stderr and status 1, usage errors status 2
(argparse's)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .common import ConvertError, progress

# write(src: Path, out: Path, name: str, source: str | None): what a
# converter module exports.
Writer = Callable[..., None]


def one_file_main(argv: list[str] | None, *, prog: str, doc: str, input_help: str, default_name: str,
                  load_writer: Callable[[], Writer]) -> int:
    """Parse argv and convert. load_writer imports the converter module and
    returns its write function; it runs inside the error handling so that a
    package the converter needs and does not find is told, not a traceback.
    prog prefixes the error lines; doc's first paragraph is --help's."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("input", type=Path, help=input_help)
    ap.add_argument("-o", "--output", type=Path, required=True, help="output .gguf")
    ap.add_argument("--name", default=default_name, help=f"general.name [{default_name}]")
    ap.add_argument("--source", help="sotto.source: where the file came from [its name]")
    args = ap.parse_args(argv)
    try:
        write = load_writer()
        if not args.input.is_file():
            raise ConvertError(f"{args.input}: no such file")
        write(args.input, args.output, args.name, args.source)
    except ConvertError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"{prog}: error: missing Python package ({e}); pip install -r tools/requirements.txt",
              file=sys.stderr)
        return 1
    progress(f"wrote {args.output}")
    return 0
