"""Read a sotto GGUF back into plain Python values (for the ggml exporter
and the tests). Token strings come back as bytes, since they are raw BPE
bytes and not always valid UTF-8. gguf_raw.py parses the file: the gguf
package's GGUFReader took 2.9 of export_ggml's 3.3 s on tiny.en, building
numpy views of each of the vocabulary's 51,864 strings."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .common import ConvertError
from .gguf_raw import GgufRaw


def read_gguf(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, tensors): metadata maps key -> int | float | bytes |
    list; tensors map name -> numpy array in row-major (numpy) order,
    views of the mapped file."""
    try:
        g = GgufRaw(path)
        md = g.metadata()
        tensors = {t[0]: g.tensor_array(i) for i, t in enumerate(g.tensors)}
    except OSError as e:
        raise ConvertError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:  # GgufRaw's own, which name the file
        raise ConvertError(f"{e}") from None
    except (struct.error, KeyError):
        raise ConvertError(f"{path}: not a readable GGUF file (it ends inside "
                           "its header: truncated?)") from None
    return md, tensors
