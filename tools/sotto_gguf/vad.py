"""Silero VAD (v5/v6 network, 16 kHz) from its ONNX export to sotto's GGUF
(docs/model-format.md, "Silero VAD").

The ONNX files of the `silero-vad` package hold the weights either as
initializers (silero_vad_16k_op15.onnx: `model.stft.forward_basis_buffer`,
...) or as Constant nodes inside the If branches that pick the sampling rate
(silero_vad.onnx: `If_0_then_branch__Inline_0__stft.forward_basis_buffer`
for 16 kHz, the `else` branch for 8 kHz). Both are read the same way: every
tensor of the graph and its subgraphs, grouped by the prefix before the
PyTorch name, and the group whose STFT basis is the 16 kHz one (258 x 256)
is taken. Only the `onnx` package is needed (no torch, no onnxruntime).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import ALIGNMENT, FORMAT_VERSION, ConvertError, atomic_output, finish_gguf, progress, sha256_file

SAMPLE_RATE = 16000
CHUNK = 512  # samples per probability
CONTEXT = 64  # samples of the previous chunk put before each one
N_FFT = 256
HOP = 128
HIDDEN = 128

BASIS = "stft.forward_basis_buffer"
# PyTorch name -> (GGUF name, shape as stored in the GGUF)
TENSORS = {
    BASIS: ("vad.stft.basis", (2 * (N_FFT // 2 + 1), N_FFT)),
    "encoder.0.reparam_conv.weight": ("vad.enc.0.w", (128, N_FFT // 2 + 1, 3)),
    "encoder.0.reparam_conv.bias": ("vad.enc.0.b", (128,)),
    "encoder.1.reparam_conv.weight": ("vad.enc.1.w", (64, 128, 3)),
    "encoder.1.reparam_conv.bias": ("vad.enc.1.b", (64,)),
    "encoder.2.reparam_conv.weight": ("vad.enc.2.w", (64, 64, 3)),
    "encoder.2.reparam_conv.bias": ("vad.enc.2.b", (64,)),
    "encoder.3.reparam_conv.weight": ("vad.enc.3.w", (HIDDEN, 64, 3)),
    "encoder.3.reparam_conv.bias": ("vad.enc.3.b", (HIDDEN,)),
    "decoder.rnn.weight_ih": ("vad.lstm.w_ih", (4 * HIDDEN, HIDDEN)),
    "decoder.rnn.weight_hh": ("vad.lstm.w_hh", (4 * HIDDEN, HIDDEN)),
    "decoder.rnn.bias_ih": ("vad.lstm.b_ih", (4 * HIDDEN,)),
    "decoder.rnn.bias_hh": ("vad.lstm.b_hh", (4 * HIDDEN,)),
    "decoder.decoder.2.weight": ("vad.head.w", (HIDDEN,)),
    "decoder.decoder.2.bias": ("vad.head.b", (1,)),
}


def _graph_tensors(path: Path) -> dict[str, np.ndarray]:
    """Every initializer and Constant tensor of the model and its
    subgraphs, by name."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        raise ConvertError(f"missing Python package ({e}); pip install -r tools/requirements.txt") from None
    try:
        model = onnx.load(str(path))
    except Exception as e:  # onnx raises DecodeError, OSError, ...
        raise ConvertError(f"{path}: not a readable ONNX file ({e})") from None
    out: dict[str, np.ndarray] = {}

    def walk(g) -> None:  # noqa: ANN001
        for t in g.initializer:
            out[t.name] = numpy_helper.to_array(t)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.TENSOR and n.op_type == "Constant":
                    out[n.output[0]] = numpy_helper.to_array(a.t)

    walk(model.graph)
    return out


def read_onnx(path: Path) -> dict[str, np.ndarray]:
    """The 16 kHz network's tensors, {GGUF name: float32 array} in the
    GGUF's shapes. ConvertError when the file is not a Silero VAD v5/v6."""
    found = _graph_tensors(path)
    prefixes = [k[: -len(BASIS)] for k, v in found.items()
                if k.endswith(BASIS) and v.shape == (2 * (N_FFT // 2 + 1), 1, N_FFT)]
    if len(prefixes) != 1:
        raise ConvertError(f"{path}: expected one 16 kHz Silero VAD STFT basis (258 x 1 x 256), "
                           f"found {len(prefixes)}: not a Silero VAD v5/v6 ONNX file")
    pre = prefixes[0]
    out = {}
    for src, (dst, shape) in TENSORS.items():
        a = found.get(pre + src)
        if a is None:
            raise ConvertError(f"{path}: no tensor {pre + src}")
        if a.dtype != np.float32 or a.size != int(np.prod(shape)):
            raise ConvertError(f"{path}: {src} is {a.dtype} {list(a.shape)}, expected float32 {list(shape)}")
        a = np.ascontiguousarray(a.reshape(shape))
        if not np.isfinite(a).all():
            raise ConvertError(f"{path}: {src} holds values that are not finite")
        out[dst] = a
    return out


def write_vad_gguf(src: Path, out: Path, name: str = "silero-vad", source: str | None = None) -> None:
    """Convert src (a Silero VAD ONNX file) to out, replacing it whole or
    not at all (atomic_output)."""
    import gguf

    tensors = read_onnx(src)
    with atomic_output(out) as tmp:
        progress(f"writing {out} ({len(tensors)} tensors, alignment {ALIGNMENT})")
        w = gguf.GGUFWriter(str(tmp), "silero-vad")
        w.add_custom_alignment(ALIGNMENT)
        w.add_key_value("general.name", name, gguf.GGUFValueType.STRING)
        w.add_uint32("sotto.format_version", FORMAT_VERSION)
        w.add_key_value("sotto.source", source or src.name, gguf.GGUFValueType.STRING)
        w.add_key_value("sotto.source_sha256", sha256_file(src), gguf.GGUFValueType.STRING)
        for k, v in (("sample_rate", SAMPLE_RATE), ("chunk", CHUNK), ("context", CONTEXT),
                     ("n_fft", N_FFT), ("hop", HOP), ("hidden", HIDDEN)):
            w.add_uint32(f"silero.{k}", v)
        for tname, a in tensors.items():
            w.add_tensor(tname, a)
        finish_gguf(w)
