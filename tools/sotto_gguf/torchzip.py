"""Read a PyTorch state dict saved by torch.save() (the zip format) into
numpy arrays, without torch.

The pickle inside the zip is unpickled with a whitelist: only the classes a
plain state dict uses (OrderedDict, tensor rebuilds, storage types) are
allowed, so a file that tries to run code is refused rather than run.
"""

from __future__ import annotations

import collections
import pickle
import zipfile
from pathlib import Path

import numpy as np

from .common import ConvertError

_DTYPES = {
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "DoubleStorage": np.float64,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "BoolStorage": np.bool_,
    "ByteStorage": np.uint8,
}


class _Storage:
    """Stands for torch.XStorage in the pickle: only its name is used."""

    def __init__(self, name: str):
        self.name = name


def _rebuild_tensor(storage, offset, size, stride, *_):  # noqa: ANN001
    if len(size) == 0:
        return storage[offset].copy()
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                           strides=tuple(s * item for s in stride))
    return view.copy()


def load_state_dict(path: Path) -> dict[str, np.ndarray]:
    """{name: array} of a torch.save() zip file. ConvertError when the file
    is not one, or its pickle names anything but a state dict's classes."""
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise ConvertError(f"{path}: not a PyTorch zip checkpoint ({e})") from None
    with z:
        pkls = [n for n in z.namelist() if n.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise ConvertError(f"{path}: not a PyTorch zip checkpoint (no single data.pkl)")
        prefix = pkls[0][: -len("data.pkl")]

        class Unpickler(pickle.Unpickler):
            def find_class(self, mod: str, name: str):  # noqa: ANN201
                if mod == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
                    return _rebuild_tensor
                if mod == "torch._utils" and name == "_rebuild_parameter":
                    return lambda data, requires_grad, hooks: data
                if mod == "torch" and name in _DTYPES:
                    return _Storage(name)
                if mod == "collections" and name == "OrderedDict":
                    return collections.OrderedDict
                raise pickle.UnpicklingError(f"refusing to load {mod}.{name}")

            def persistent_load(self, pid):  # noqa: ANN001, ANN201
                _, storage, key, _location, numel = pid
                raw = z.read(f"{prefix}data/{key}")
                a = np.frombuffer(raw, dtype=_DTYPES[storage.name])
                if a.size < numel:
                    raise ConvertError(f"{path}: storage {key} is truncated")
                return a

        try:
            obj = Unpickler(z.open(pkls[0])).load()
        except (pickle.UnpicklingError, KeyError, ValueError, EOFError) as e:
            raise ConvertError(f"{path}: cannot read its state dict ({e})") from None
    if not isinstance(obj, dict):
        raise ConvertError(f"{path}: holds a {type(obj).__name__}, not a state dict")
    return {k: v for k, v in obj.items() if isinstance(v, np.ndarray)}
