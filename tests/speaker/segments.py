"""The speech the CAM++ parity tests embed: pieces of ../shared/audio
(manifest.tsv says who speaks), each with its speaker. Shared by the tests
and bench/campplus_torch.py, which computed tests/speaker/torch_reference.json
from exactly these samples."""

from __future__ import annotations

import hashlib
import wave
from pathlib import Path

import numpy as np

SR = 16000

# (name, file, start s, length s or None for the rest, speaker); "odd"
# voices (falsetto, whispering) are the MFA speaker but are left out of the
# same/different speaker check.
SEGMENTS = [
    ("jfk", "jfk.wav", 0.0, None, "JFK"),
    ("jfk-a", "jfk.wav", 0.0, 5.5, "JFK"),
    ("jfk-b", "jfk.wav", 5.5, None, "JFK"),
    ("lj-0", "LJ001-0001_to_LJ001-0017_longform.wav", 0.0, 10.0, "LJ"),
    ("lj-40", "LJ001-0001_to_LJ001-0017_longform.wav", 40.0, 10.0, "LJ"),
    ("lj-80", "LJ001-0001_to_LJ001-0017_longform.wav", 80.0, 3.0, "LJ"),
    ("lj-all", "LJ001-0001_to_LJ001-0017_longform.wav", 0.0, None, "LJ"),
    ("sas-0870", "sense_and_sensibility_01_austen_64kb-0870.wav", 0.0, None, "SAS"),
    ("sas-0880", "sense_and_sensibility_01_austen_64kb-0880.wav", 0.0, None, "SAS"),
    ("sas-0890", "sense_and_sensibility_01_austen_64kb-0890.wav", 0.0, None, "SAS"),
    ("sas-0920", "sense_and_sensibility_01_austen_64kb-0920.wav", 0.0, None, "SAS"),
    ("sas-0930", "sense_and_sensibility_01_austen_64kb-0930.wav", 0.0, None, "SAS"),
    ("ls-2830", "2830-3980-0043.wav", 0.0, None, "LS2830"),
    ("ls-4507", "4507-16021-0012.wav", 0.0, None, "LS4507"),
    ("ls-8455", "8455-210777-0068.wav", 0.0, None, "LS8455"),
    ("goforward", "goforward.wav", 0.0, None, "GOFORWARD"),
    ("mfa-thoughts", "mfa_thoughts.wav", 0.0, None, "MFA"),
    ("mfa-longstop", "mfa_longstop.wav", 0.0, None, "MFA"),
    ("mfa-falsetto", "falsetto.wav", 0.0, None, "MFA odd"),
    ("mfa-whisper", "whisper.wav", 0.0, None, "MFA odd"),
]


def read_wav(path: Path) -> np.ndarray:
    """16 kHz mono s16 WAV as float32 in [-1, 1)."""
    with wave.open(str(path)) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1 or w.getframerate() != SR:
            raise ValueError(f"{path}: expected 16 kHz mono s16 WAV")
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0


def segment(audio_dir: Path, seg: tuple) -> np.ndarray:
    _name, f, start, length, _spk = seg
    x = read_wav(audio_dir / f)
    a = int(round(start * SR))
    return x[a:] if length is None else x[a:a + int(round(length * SR))]


def samples_sha256(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x, np.float32).tobytes()).hexdigest()
