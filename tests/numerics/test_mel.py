"""lib/model/mel.c against a numpy re-implementation of openai/whisper's
log-mel.

ref: whisper/audio.py log_mel_spectrogram(): torch.stft(n_fft 400, hop 160,
periodic Hann, center=True, reflect), |X|^2 without the last frame,
filters @ power, log10(max(x, 1e-10)), max(x, max - 8), (x + 4) / 4.

The C side is lib/model/mel.c + lib/kernels/err.c built with
tests/numerics/mel_shim.c into a temporary .so and called through ctypes.  Run with -s to see the
errors.
"""

import ctypes

import numpy as np
import pytest

from conftest import REPO, build_shared, pkg_config

N_FFT = 400
HOP = 160
N_SAMPLES = 480000     # 30 s: transcribe() pads the audio by this much
N_FRAMES = 3000
TOL = 1e-3             # on normalised values


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    out = tmp_path_factory.mktemp("mel") / "libmelshim.so"
    # mel.c shares a call's frames among OpenMP threads, as in libsotto
    build_shared(["lib/model/mel.c", "lib/kernels/err.c",
                  "tests/numerics/mel_shim.c"], out,
                 ["-I", str(REPO / "lib" / "model"),
                  "-I", str(REPO / "lib" / "kernels")] +
                 pkg_config("--cflags", "kissfft-float") + ["-fopenmp"],
                 pkg_config("--libs", "kissfft-float") + ["-lm", "-fopenmp"])
    lib = ctypes.CDLL(str(out))
    f32p = ctypes.POINTER(ctypes.c_float)
    sz = ctypes.c_size_t
    lib.shim_log_mel.argtypes = [f32p, ctypes.c_int, f32p, sz, sz, sz, sz,
                                 f32p, sz, f32p, ctypes.c_char_p]
    lib.shim_log_mel.restype = ctypes.c_int
    lib.shim_normalize.argtypes = [f32p, sz, sz, sz, ctypes.c_float]
    lib.shim_normalize.restype = None
    return lib


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def c_log_mel(lib, filters, pcm, pad=0, first=0, n_frames=None):
    """Raw log10 mel [n_mels][n_frames] from the C code, and its max."""
    total = (len(pcm) + pad) // HOP
    if n_frames is None:
        n_frames = total - first
    out = np.empty((filters.shape[0], n_frames), dtype=np.float32)
    mx = ctypes.c_float()
    err = ctypes.create_string_buffer(256)
    rc = lib.shim_log_mel(_ptr(filters), filters.shape[0], _ptr(pcm),
                          len(pcm), pad, first, n_frames, _ptr(out),
                          n_frames, ctypes.byref(mx), err)
    assert rc == 0, err.value.decode()
    return out, mx.value


def c_normalize(lib, mel, max_value):
    out = np.ascontiguousarray(mel, dtype=np.float32).copy()
    lib.shim_normalize(_ptr(out), out.shape[0], out.shape[1], out.shape[1],
                       max_value)
    return out


def ref_log_mel(filters, pcm, pad=0):
    """openai's recipe in float64 numpy; raw log10 mel [n_mels][frames]."""
    x = np.pad(pcm.astype(np.float64), (0, pad))
    x = np.pad(x, N_FFT // 2, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP]
    frames = frames[:-1]                        # stft[..., :-1]
    mel = np.empty((filters.shape[0], len(frames)))
    for i in range(0, len(frames), 2000):
        spec = np.fft.rfft(frames[i:i + 2000] * window, axis=-1)
        power = spec.real ** 2 + spec.imag ** 2
        mel[:, i:i + 2000] = filters.astype(np.float64) @ power.T
    return np.log10(np.maximum(mel, 1e-10))


def ref_normalize(log_spec, max_value):
    return (np.maximum(log_spec, max_value - 8.0) + 4.0) / 4.0


def test_reference_frame_count(mel_filters):
    """The numpy reference agrees with the (n + pad) // 160 rule."""
    f = mel_filters(80)
    for n in (400, 479, 480, 16000, 16159):
        assert ref_log_mel(f, np.zeros(n, np.float32)).shape[1] == n // HOP


@pytest.mark.parametrize("n_mels", [80, 128])
def test_full_files(shim, mel_filters, audio_files, read_wav, n_mels):
    """Whole files, pad 0, as log_mel_spectrogram(audio)."""
    f = mel_filters(n_mels)
    worst = 0.0
    for path in audio_files:
        pcm = read_wav(path)
        got, gmax = c_log_mel(shim, f, pcm)
        ref = ref_log_mel(f, pcm)
        assert got.shape == ref.shape
        rmax = ref.max()
        err = np.abs(c_normalize(shim, got, gmax) - ref_normalize(ref, rmax))
        live = ref > rmax - 8.0
        raw = np.abs(got - ref)[live].max()
        print("\nmel%d %-45s frames %5d max|err| norm %.2e raw(live) %.2e "
              "max %.6f/%.6f" % (n_mels, path.name, ref.shape[1], err.max(),
                                 raw, gmax, rmax))
        worst = max(worst, err.max())
        assert err.max() < TOL, path.name
    print("\nmel%d full files: worst max|err| %.3e" % (n_mels, worst))


def test_transcribe_windows(shim, mel_filters, audio_files, read_wav):
    """pad 480000, max over everything, 3000-frame windows at offsets."""
    f = mel_filters(80)
    worst = 0.0
    for path in audio_files:
        pcm = read_wav(path)
        _, gmax = c_log_mel(shim, f, pcm, pad=N_SAMPLES)
        ref = ref_log_mel(f, pcm, pad=N_SAMPLES)
        rmax = ref.max()
        refn = ref_normalize(ref, rmax)
        total = ref.shape[1]
        assert total == (len(pcm) + N_SAMPLES) // HOP
        content = total - N_FRAMES
        offsets = sorted({0, 1, 777, content // 2, content,
                          max(0, total - N_FRAMES), total - 1})
        for off in offsets:
            k = min(N_FRAMES, total - off)
            win, _ = c_log_mel(shim, f, pcm, pad=N_SAMPLES, first=off,
                               n_frames=k)
            err = np.abs(c_normalize(shim, win, gmax) - refn[:, off:off + k])
            worst = max(worst, err.max())
            assert err.max() < TOL, "%s at %d" % (path.name, off)
        print("\n%-45s frames %5d windows %s max|err| so far %.2e"
              % (path.name, total, offsets, worst))
    print("\ntranscribe windows: worst max|err| %.3e" % worst)
