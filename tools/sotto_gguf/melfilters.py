"""Whisper's mel filter bank, computed instead of shipped.

openai/whisper's assets/mel_filters.npz was saved from
librosa.filters.mel(sr=16000, n_fft=400, n_mels=N): Slaney's mel scale
(linear below 1 kHz, logarithmic above) with Slaney's area normalisation
(each triangle scaled by 2 / its width in Hz). This is an independent numpy
implementation of that definition, so converters need neither librosa nor
the openai package; tests check it against the npz.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400

_F_SP = 200.0 / 3  # Hz per mel in the linear part
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP  # 15
_LOGSTEP = np.log(6.4) / 27.0


def hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney mel scale (librosa htk=False)."""
    f = np.asarray(f, dtype=np.float64)
    lin = f / _F_SP
    log = _MIN_LOG_MEL + np.log(np.maximum(f, _MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP
    return np.where(f >= _MIN_LOG_HZ, log, lin)


def mel_to_hz(m: np.ndarray) -> np.ndarray:
    """Inverse of hz_to_mel."""
    m = np.asarray(m, dtype=np.float64)
    lin = _F_SP * m
    log = _MIN_LOG_HZ * np.exp(_LOGSTEP * (m - _MIN_LOG_MEL))
    return np.where(m >= _MIN_LOG_MEL, log, lin)


def mel_filters(n_mels: int, sr: int = SAMPLE_RATE, n_fft: int = N_FFT) -> np.ndarray:
    """[n_mels][n_fft//2 + 1] float32 triangular filters, Slaney-normalised.

    Filter i rises from mel point i to i+1 and falls to i+2 (n_mels + 2
    points equally spaced in mel between 0 Hz and sr/2); each row is then
    scaled by 2 / (f[i+2] - f[i]) so every filter has the same area.
    Rows are computed in float64 and stored as float32 before the
    normalisation, as librosa does, to match its rounding.
    """
    n_bins = n_fft // 2 + 1
    fft_hz = np.arange(n_bins, dtype=np.float64) * (sr / n_fft)
    mel_pts = np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2)
    hz_pts = mel_to_hz(mel_pts)
    widths = np.diff(hz_pts)
    ramps = hz_pts[:, None] - fft_hz[None, :]
    weights = np.zeros((n_mels, n_bins), dtype=np.float32)
    for i in range(n_mels):
        rising = -ramps[i] / widths[i]
        falling = ramps[i + 2] / widths[i + 1]
        weights[i] = np.maximum(0.0, np.minimum(rising, falling))
    enorm = 2.0 / (hz_pts[2 : n_mels + 2] - hz_pts[:n_mels])
    weights *= enorm[:, None]
    return weights
