"""openai/whisper's log-mel and AudioEncoder in float64 numpy (reference only).

ref: whisper/audio.py pad_or_trim + log_mel_spectrogram, whisper/model.py
sinusoids, AudioEncoder, ResidualAttentionBlock, MultiHeadAttention
(qkv_attention: q and k each scaled by dh^-0.25), LayerNorm eps 1e-5,
nn.GELU() (exact, erf).

Weights come from a sotto GGUF (docs/model-format.md): F16 matrices and
F32 vectors are widened to float64; activations are channels-first [C][S]
like the GGUF's layout, so a matrix W [Cout][Cin] applies as W @ x.
"""

import math

import numpy as np

from test_mel import N_FRAMES, N_SAMPLES, ref_log_mel, ref_normalize

LN_EPS = 1e-5
_erf = np.frompyfunc(math.erf, 1, 1)


def load_weights(path):
    """(hparams, tensors as float64) of the encoder in a sotto GGUF."""
    import gguf

    r = gguf.GGUFReader(str(path))
    hp = {}
    for key in ("n_mels", "n_audio_ctx", "n_audio_state", "n_audio_head",
                "n_audio_layer"):
        f = r.fields["whisper." + key]
        hp[key] = int(f.parts[f.data[0]][0])
    w = {}
    for t in r.tensors:
        if t.name.startswith("enc.") or t.name == "mel.filters":
            shape = tuple(int(x) for x in reversed(t.shape))
            w[t.name] = np.array(t.data, dtype=np.float64).reshape(shape)
    return hp, w


def log_mel(filters, audio):
    """log_mel_spectrogram(pad_or_trim(audio)): normalised [n_mels][3000]."""
    audio = np.asarray(audio, dtype=np.float32)[:N_SAMPLES]
    audio = np.pad(audio, (0, N_SAMPLES - len(audio)))
    raw = ref_log_mel(filters, audio)
    assert raw.shape[1] == N_FRAMES
    return ref_normalize(raw, raw.max())


def sinusoids(length, channels, max_timescale=10000):
    """openai's positional table, [length][channels] (float64 here)."""
    assert channels % 2 == 0
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x, w, b):
    """LayerNorm over channels of x [C][S]."""
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * w[:, None] + b[:, None]


def conv3(x, w, b, stride):
    """Conv1d k3 p1: w is tap-major [3][Cout][Cin], tap k reads x[t*s+k-1]."""
    n_out = (x.shape[1] + 2 - 3) // stride + 1
    xp = np.pad(x, ((0, 0), (1, 1)))
    y = b[:, None] + sum(w[k] @ xp[:, k:k + stride * (n_out - 1) + 1:stride]
                         for k in range(3))
    return y


def attention(x, w, p, n_head):
    d, s = x.shape
    dh = d // n_head
    scale = dh ** -0.25
    q = w[p + "q.w"] @ x + w[p + "q.b"][:, None]
    k = w[p + "k.w"] @ x
    v = w[p + "v.w"] @ x + w[p + "v.b"][:, None]
    out = np.empty_like(q)
    for h in range(n_head):
        hs = slice(h * dh, (h + 1) * dh)
        qk = (q[hs].T * scale) @ (k[hs] * scale)          # [Sq][Sk]
        qk -= qk.max(axis=1, keepdims=True)
        pr = np.exp(qk)
        pr /= pr.sum(axis=1, keepdims=True)
        out[hs] = v[hs] @ pr.T                            # [dh][Sq]
    return w[p + "o.w"] @ out + w[p + "o.b"][:, None]


def block(w, i, x, n_head):
    """ResidualAttentionBlock i (pre-LN, no cross-attention)."""
    p = "enc.%d." % i
    x = x + attention(layer_norm(x, w[p + "attn_ln.w"], w[p + "attn_ln.b"]),
                      w, p + "attn.", n_head)
    h = layer_norm(x, w[p + "mlp_ln.w"], w[p + "mlp_ln.b"])
    h = gelu(w[p + "mlp.fc1.w"] @ h + w[p + "mlp.fc1.b"][:, None])
    return x + w[p + "mlp.fc2.w"] @ h + w[p + "mlp.fc2.b"][:, None]


def stem(w, mel):
    """gelu(conv1), gelu(conv2 stride 2), + positions: [d][1500]."""
    x = gelu(conv3(mel, w["enc.conv1.w"], w["enc.conv1.b"], 1))
    x = gelu(conv3(x, w["enc.conv2.w"], w["enc.conv2.b"], 2))
    return x + w["enc.pos"]


def encode(hp, w, mel, stages=None):
    """AudioEncoder on mel [n_mels][3000] -> [d][1500] (channels-first).

    If stages is a dict it receives the input of every block
    ("block0" is the stem's output) and "final"."""
    x = stem(w, np.asarray(mel, dtype=np.float64))
    for i in range(hp["n_audio_layer"]):
        if stages is not None:
            stages["block%d" % i] = x
        x = block(w, i, x, hp["n_audio_head"])
    out = layer_norm(x, w["enc.ln_post.w"], w["enc.ln_post.b"])
    if stages is not None:
        stages["final"] = out
    return out
