"""A GGUF file as it is on disk: reader.read_gguf (the ggml exporter) and
the tests that compare what the converters write (tests/parity/
test_families.py, tests/tools/test_convert.py).

gguf.GGUFReader makes numpy views of every part of every field: on a
Whisper vocabulary (51,864 token strings and their scores) it takes about
3 s a file (of export_ggml's 3.3 s for tiny.en), most of a parity
family's input-route test. This reads the same header with struct, in
tens of milliseconds, and keeps each value's bytes as they are in the
file, so comparing two files compares what they say, bit for bit.
tests/tools/test_convert.py still reads a file with gguf.GGUFReader too,
so the two readers check each other.

    g = GgufRaw(path)
    g.raw["whisper.n_vocab"]        # the value's type and bytes, as on disk
    g.value("whisper.n_vocab")      # as sotto_gguf.reader.read_gguf gives it
    g.tensors                       # [(name, ggml type, dims, offset)]
    g.tensor_bytes(i)               # tensor i's data (to the next tensor)
    g.tensor_array(i)               # as a numpy array (F32 and F16)
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

import numpy as np

# GGUF value types (gguf.GGUFValueType) of a fixed size: numpy dtype
FIXED = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?",
         10: "<u8", 11: "<i8", 12: "<f8"}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32
# ggml tensor types sotto writes: numpy dtype
TENSOR_DTYPES = {0: "<f4", 1: "<f2"}


class GgufRaw:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            try:  # mapped, not read: a large-v3 file is 3 GB
                self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                raise ValueError(f"{path}: not a GGUF file (it is empty)") from None
        d = self.data
        if d[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (no GGUF magic at its start)")
        self.version, n_tensors, n_kv = struct.unpack_from("<IQQ", d, 4)
        at = 24
        self.raw: dict[str, bytes] = {}   # key -> type and value bytes
        self._at: dict[str, tuple[int, int]] = {}   # key -> (type, value offset)
        for _ in range(n_kv):
            key, at = self._string(at)
            (t,) = struct.unpack_from("<I", d, at)
            end = self._skip(t, at + 4)
            k = key.decode()
            self.raw[k] = d[at:end]
            self._at[k] = (t, at + 4)
            at = end
        self.tensors: list[tuple[str, int, tuple[int, ...], int]] = []
        for _ in range(n_tensors):
            name, at = self._string(at)
            (nd,) = struct.unpack_from("<I", d, at)
            dims = struct.unpack_from(f"<{nd}Q", d, at + 4)
            t, off = struct.unpack_from("<IQ", d, at + 4 + 8 * nd)
            at += 4 + 8 * nd + 12
            self.tensors.append((name.decode(), t, tuple(dims), off))
        align = self.value("general.alignment") if "general.alignment" in self.raw else DEFAULT_ALIGNMENT
        self.data_start = -(-at // align) * align

    def _string(self, at: int) -> tuple[bytes, int]:
        (n,) = struct.unpack_from("<Q", self.data, at)
        return self.data[at + 8:at + 8 + n], at + 8 + n

    def _skip(self, t: int, at: int) -> int:
        """The offset after a value of type t at `at`."""
        if t in FIXED:
            return at + np.dtype(FIXED[t]).itemsize
        if t == STRING:
            return self._string(at)[1]
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", self.data, at)
            at += 12
            if et in FIXED:
                return at + n * np.dtype(FIXED[et]).itemsize
            for _ in range(n):
                at = self._skip(et, at)
            return at
        raise ValueError(f"{self.path}: unknown GGUF value type {t} at {at}")

    def _value(self, t: int, at: int):
        d = self.data
        if t in FIXED:
            return np.frombuffer(d, FIXED[t], 1, at)[0].item()
        if t == STRING:
            return self._string(at)[0]
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", d, at)
            at += 12
            if et in FIXED:
                return np.frombuffer(d, FIXED[et], n, at).tolist()
            out = []
            for _ in range(n):
                out.append(self._value(et, at))
                at = self._skip(et, at)
            return out
        raise ValueError(f"{self.path}: unknown GGUF value type {t} at {at}")

    def value(self, key: str):
        """The value as sotto_gguf.reader.read_gguf gives it: int, float,
        bool, bytes, or a list of them."""
        return self._value(*self._at[key])

    def metadata(self) -> dict:
        """Every key's value (read_gguf's metadata dict)."""
        return {k: self.value(k) for k in self.raw}

    def tensor_bytes(self, i: int) -> memoryview:
        """Tensor i's data, up to the tensor after it in the file (its
        alignment padding included) or the end of the file."""
        off = self.tensors[i][3]
        after = [o for *_, o in self.tensors if o > off]
        end = self.data_start + min(after) if after else len(self.data)
        return memoryview(self.data)[self.data_start + off:end]

    def tensor_array(self, i: int) -> np.ndarray:
        """Tensor i in row-major (numpy) order: dims reversed, as
        gguf.GGUFReader gives it; a view of the file's bytes."""
        name, t, dims, off = self.tensors[i]
        if t not in TENSOR_DTYPES:
            raise ValueError(f"{self.path}: tensor {name} has ggml type {t} "
                             "(sotto writes F32 and F16 only)")
        n = int(np.prod(dims)) if dims else 1
        start = self.data_start + off
        if start + n * np.dtype(TENSOR_DTYPES[t]).itemsize > len(self.data):
            raise ValueError(f"{self.path}: tensor {name} runs past the end "
                             "of the file (truncated?)")
        return np.frombuffer(self.data, TENSOR_DTYPES[t], n, start).reshape(
            tuple(reversed(dims)))
