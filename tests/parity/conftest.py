"""Fixtures of the family parity tests (test_families.py).

For every release in tools/families.json: a random model of its
dimensions (fixed seed, std 0.02) written as a CTranslate2 directory and a
Hugging Face directory, its tokenizer from openai's own tokenizer.py and
tiktoken files (the pinned openai-whisper sdist), converted with
tools/convert.py; CTranslate2 (float32) runs the same weights as the
reference.

Releases with the same dimensions share one model, and the test ids name
all of them (large-v1+large-v2). In CI the releases deeper than
CI_FULL_LAYERS run with CI_AUDIO_LAYERS encoder and at most
CI_TEXT_LAYERS decoder layers (real widths, heads, mel bins and
vocabulary; the decoder depths that tell releases apart, 4 for turbo and
distil-small.en and 2 for the other distil ones, stay real);
SOTTO_PARITY_FULL=1 runs every release at its full depth.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
sys.path.insert(0, str(TOOLS))

import cpu  # noqa: E402
from sotto_gguf import families, randmodel  # noqa: E402
from sotto_gguf.common import Hparams  # noqa: E402
from sotto_gguf.openai_sdist import OPENAI_SDIST  # noqa: E402

# libsotto runs inside pytest here (and CTranslate2 beside it): threads
# that spin while waiting made a reduced large-v3's encoder 8x slower on a
# busy 2-core machine (17 s against 2.2 s). Set before either OpenMP
# runtime starts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
PY = os.environ.get("SOTTO_PYTHON") or sys.executable
from audio import AUDIO_DIR  # noqa: E402
WAV = AUDIO_DIR / "jfk.wav"
SEED = 20251117
FULL = os.environ.get("SOTTO_PARITY_FULL") == "1"
CI_FULL_LAYERS = 6
CI_AUDIO_LAYERS = 2
CI_TEXT_LAYERS = 3
N_STEPS = 64
THREADS = 2


def _groups() -> list[list[str]]:
    """Family names grouped by identical dimensions, in the file's order."""
    by_hp: dict[tuple, list[str]] = {}
    for name, f in families.load().items():
        by_hp.setdefault(tuple(vars(f.hparams).items()), []).append(name)
    return list(by_hp.values())


GROUPS = _groups()


def group_id(names: list[str]) -> str:
    return "+".join(names)


def test_hparams(hp: Hparams) -> Hparams:
    """The depth a release runs at here."""
    if FULL or max(hp.n_audio_layer, hp.n_text_layer) <= CI_FULL_LAYERS:
        return hp
    return families.reduced(hp, CI_AUDIO_LAYERS, CI_TEXT_LAYERS)


# --- report -------------------------------------------------------------------------

class _Report:
    def __init__(self):
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter):
        if self.lines:
            terminalreporter.section("sotto family parity report")
            for ln in self.lines:
                terminalreporter.write_line(ln)


@pytest.fixture(scope="session")
def report(request):
    pm = request.config.pluginmanager
    rep = pm.get_plugin("sotto-parity-report")
    if rep is None:
        rep = _Report()
        pm.register(rep, "sotto-parity-report")

    def add(line: str) -> None:
        rep.lines.append(line)
        print("\n" + line)
    return add


# --- openai's tokenizer and assets -------------------------------------------------------

def cache_root() -> Path:
    if os.environ.get("SOTTO_CACHE"):
        return Path(os.environ["SOTTO_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sotto"


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _openai_sdist() -> Path:
    spec = OPENAI_SDIST
    dest = cache_root() / "wheels"
    for c in (dest / spec["filename"], cache_root() / "dl" / spec["filename"]):
        if c.is_file() and _sha256(c) == spec["sha256"]:
            return c
    dest.mkdir(parents=True, exist_ok=True)
    cp = subprocess.run([PY, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "--quiet", "-d", str(dest),
                         spec["requirement"]], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    p = dest / spec["filename"]
    if cp.returncode != 0 or not p.is_file():
        pytest.fail(f"pip download {spec['requirement']} failed:\n{cp.stderr[-2000:]}")
    if _sha256(p) != spec["sha256"]:
        pytest.fail(f"{p} does not match its pinned sha256")
    return p


@pytest.fixture(scope="session")
def openai_whisper(tmp_path_factory):
    """openai/whisper's tokenizer.py (it needs only tiktoken) with its
    assets, imported from the pinned sdist: module `whisper_tokenizer`,
    plus the path of mel_filters.npz."""
    out = tmp_path_factory.mktemp("openai-whisper")
    prefix = "openai_whisper-20250625/whisper/"
    with tarfile.open(_openai_sdist()) as t:
        for name in ("tokenizer.py", "assets/mel_filters.npz", "assets/gpt2.tiktoken", "assets/multilingual.tiktoken"):
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(t.extractfile(prefix + name).read())
    spec = importlib.util.spec_from_file_location("whisper_tokenizer", out / "tokenizer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.MEL_FILTERS = out / "assets" / "mel_filters.npz"
    return mod


def openai_tokenizer(ow, n_vocab: int, language: str | None = "en", task: str = "transcribe"):
    """openai's Tokenizer for a vocabulary of n_vocab ids (whisper/model.py:
    multilingual iff n_vocab >= 51865, num_languages = n_vocab - 51765 -
    multilingual)."""
    multi = n_vocab >= 51865
    return ow.get_tokenizer(multi, num_languages=n_vocab - 51765 - int(multi), language=language if multi else None,
                            task=task if multi else None)


def openai_languages(ow, n_vocab: int) -> list[str]:
    """Language codes in token order (sot + 1 + i), as openai appends them."""
    if n_vocab < 51865:
        return []
    return list(ow.LANGUAGES)[:n_vocab - 51766]


def openai_suppress(tok) -> list[int]:
    """decoding.py _get_suppress_tokens for suppress_tokens="-1"."""
    s = set(tok.non_speech_tokens)
    s |= {tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_speech}
    return sorted(s)


# --- audio and the reference log-mel ---------------------------------------------------------

def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000), path
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


@pytest.fixture(scope="session")
def pcm30() -> np.ndarray:
    """jfk.wav padded with zeros to 30 s (pad_or_trim)."""
    if not WAV.is_file():
        pytest.fail(f"{WAV} is missing (set SOTTO_AUDIO_DIR)")
    pcm = read_wav(WAV)[:480000]
    return np.ascontiguousarray(np.pad(pcm, (0, 480000 - len(pcm))))


def reference_log_mel(filters: np.ndarray, pcm: np.ndarray) -> np.ndarray:
    """whisper/audio.py log_mel_spectrogram in float64 numpy: STFT (n_fft
    400, hop 160, periodic Hann, centred with reflection, last frame
    dropped), filters @ |X|^2, log10 clamped at 1e-10 and at max - 8,
    (x + 4) / 4. Returns float32 [n_mels][3000]."""
    x = np.pad(pcm.astype(np.float64), 200, mode="reflect")
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)
    frames = np.lib.stride_tricks.sliding_window_view(x, 400)[::160][:-1]
    spec = np.fft.rfft(frames * window, axis=-1)
    mel = filters.astype(np.float64) @ (spec.real ** 2 + spec.imag ** 2).T
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)
    return np.ascontiguousarray((log + 4.0) / 4.0, dtype=np.float32)


@pytest.fixture(scope="session")
def ref_mel(openai_whisper, pcm30):
    """The reference log-mel per mel-bin count, from openai's filter bank."""
    with np.load(openai_whisper.MEL_FILTERS) as f:
        return {n: reference_log_mel(f[f"mel_{n}"], pcm30) for n in (80, 128)}


# --- the random models ----------------------------------------------------------------------

def run(cmd: list) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=1800, env=dict(os.environ, SOTTO_PYTHON=PY))


def convert(src: Path, out: Path, name: str) -> None:
    cp = run([PY, TOOLS / "convert.py", src, "-o", out, "--name", name])
    assert cp.returncode == 0, cp.stderr


@dataclass
class Family:
    """One group of releases: its random model in every input format."""

    names: list[str]
    hp: Hparams  # what runs here (reduced in CI)
    full: Hparams  # the release's own dimensions
    tok: object  # openai's Tokenizer (en, transcribe)
    tokens: list[bytes]
    ct2: Path
    hf: Path
    gguf: Path  # converted from ct2
    timings: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return group_id(self.names)

    @property
    def depth(self) -> str:
        return (f"{self.hp.n_audio_layer}/{self.hp.n_text_layer} layers"
                + ("" if self.hp == self.full else f" of {self.full.n_audio_layer}/{self.full.n_text_layer}"))


def build_family(names: list[str], ow, root: Path) -> Family:
    full = families.get(names[0]).hparams
    hp = test_hparams(full)
    tok = openai_tokenizer(ow, hp.n_vocab)
    enc = tok.encoding
    assert enc.n_vocab == hp.n_vocab, (enc.n_vocab, hp.n_vocab)
    tokens = [enc.decode_single_token_bytes(i) for i in range(hp.n_vocab)]
    n_bpe = tok.eot
    strings = randmodel.gpt2_strings(tokens, n_bpe)
    suppress = openai_suppress(tok)
    langs = sorted(tok.all_language_tokens) if hp.n_vocab >= 51865 else []
    t0 = time.perf_counter()
    tensors = randmodel.random_tensors(hp, SEED)
    t1 = time.perf_counter()
    ct2, hf = root / "ct2", root / "hf"
    randmodel.write_ct2(ct2, hp, tensors, strings, {"suppress_ids": suppress, "suppress_ids_begin": [220, tok.eot],
                                                     **({"lang_ids": langs} if langs else {})})
    special = {"eot": tok.eot, "sot": tok.sot}
    gen = {"suppress_tokens": suppress, "begin_suppress_tokens": [220, tok.eot], "decoder_start_token_id": tok.sot,
           "no_timestamps_token_id": tok.no_timestamps, "is_multilingual": bool(langs)}
    if langs:
        gen["lang_to_id"] = {f"<|{c}|>": i for c, i in zip(openai_languages(ow, hp.n_vocab), langs)}
        gen["task_to_id"] = {"transcribe": tok.transcribe, "translate": tok.translate}
    randmodel.write_hf(hf, hp, tensors, strings, n_bpe, special, gen)
    del tensors
    t2 = time.perf_counter()
    gguf = root / "ct2.gguf"
    convert(ct2, gguf, names[0])
    t3 = time.perf_counter()
    return Family(names, hp, full, tok, tokens, ct2, hf, gguf,
                  {"random": t1 - t0, "write": t2 - t1, "convert": t3 - t2})


@pytest.fixture(scope="module", params=GROUPS, ids=[group_id(g) for g in GROUPS])
def family(request, openai_whisper, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param[0])
    fam = build_family(request.param, openai_whisper, root)
    yield fam
    shutil.rmtree(root, ignore_errors=True)


# --- the reference: CTranslate2 --------------------------------------------------------------

@dataclass
class Reference:
    prompt: list[int]
    enc: np.ndarray  # [d][1500]
    tokens: list[int]  # N_STEPS greedy tokens (end of text suppressed)
    logits: np.ndarray  # [N_STEPS][n_vocab], end of text at -FLT_MAX
    lang_probs: dict[str, float] | None
    seconds: float


@pytest.fixture(scope="module")
def reference(family, ref_mel, tmp_path_factory) -> Reference:
    """CTranslate2 float32 on the same weights and the same log-mel
    (ct2_reference.py, in a process of its own): encoder output, 64 greedy
    tokens after the SOT sequence (en, transcribe, no timestamps) with the
    logits of each step (nothing suppressed but end of text, so that all
    64 steps happen), and the language probabilities."""
    d = tmp_path_factory.mktemp("ref")
    np.save(d / "mel.npy", ref_mel[family.hp.n_mels])
    prompt = list(family.tok.sot_sequence_including_notimestamps)
    cp = run([PY, Path(__file__).with_name("ct2_reference.py"), family.ct2, d / "mel.npy", d / "ref.npz",
              "--prompt", ",".join(map(str, prompt)), "--steps", N_STEPS, "--eot", family.tok.eot,
              "--threads", THREADS])
    assert cp.returncode == 0, cp.stderr[-3000:]
    with np.load(d / "ref.npz") as z:
        r = {k: z[k] for k in z.files}
    shutil.rmtree(d, ignore_errors=True)
    tokens, logits = [int(t) for t in r["tokens"]], r["logits"]
    assert len(tokens) == N_STEPS and logits.shape == (N_STEPS, family.hp.n_vocab), (len(tokens), logits.shape)
    probs = dict(zip(r["lang_codes"].tolist(), r["lang_probs"].tolist())) if "lang_codes" in r else None
    return Reference(prompt, r["enc"], tokens, logits, probs, float(r["seconds"]))


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def precision(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def sotto(family, precision):
    """parity_sotto.Sotto: the family's GGUF loaded in one precision (bf16
    skipped where libsotto, in this process, refuses it)."""
    from parity_sotto import Sotto

    if precision == "bf16" and not cpu.bf16():
        pytest.skip(cpu.no("AVX512-BF16", "the same test's fp32 case checks this family "
                           "on the fp32 path sotto runs here"))
    s = Sotto(family.gguf, precision, THREADS)
    assert s.info.precision == (1 if precision == "fp32" else 2)
    yield s
    s.close()
