"""Read a sotto GGUF back into plain Python values (for the ggml exporter
and the tests). Token strings come back as bytes, since they are raw BPE
bytes and not always valid UTF-8."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import ConvertError


def read_gguf(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, tensors): metadata maps key -> int | bytes | list;
    tensors map name -> numpy array in row-major (numpy) order."""
    import gguf

    try:
        r = gguf.GGUFReader(str(path))
    except (OSError, ValueError) as e:
        raise ConvertError(f"{path}: not a readable GGUF file ({e})") from None
    T = gguf.GGUFValueType
    md: dict = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        t = f.types[0]
        if t == T.ARRAY:
            if len(f.types) < 2:  # empty array: the reader records no element type
                md[key] = []
            elif f.types[1] == T.STRING:
                md[key] = [bytes(f.parts[i]) for i in f.data]
            else:
                md[key] = [f.parts[i][0].item() for i in f.data]
        elif t == T.STRING:
            md[key] = bytes(f.parts[f.data[0]])
        else:
            md[key] = f.parts[f.data[0]][0].item()
    tensors = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))
        tensors[t.name] = np.array(t.data).reshape(shape)
    return md, tensors
