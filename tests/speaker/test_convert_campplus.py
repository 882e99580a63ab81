"""tools/convert_campplus.py: the GGUF it writes from the pinned .pt, and
files it must refuse (a pickle that would run code is never run)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import zipfile

from conftest import PY, REPO

sys.path.insert(0, str(REPO / "tools"))

from sotto_gguf.reader import read_gguf  # noqa: E402

CONVERT = REPO / "tools" / "convert_campplus.py"


def convert(src, out):
    return subprocess.run([PY, str(CONVERT), str(src), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)


def test_metadata_and_tensors(campplus_gguf):
    meta, tensors = read_gguf(campplus_gguf)
    assert meta["general.architecture"] == b"campplus" and meta["general.license"] == b"Apache-2.0"
    assert meta["sotto.source_sha256"] == b"92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"
    assert meta["campplus.embedding_length"] == 192 and meta["campplus.n_mels"] == 80
    assert meta["campplus.block_layers"] == [12, 24, 16]
    assert len(tensors) == 507 and sum(t.size for t in tensors.values()) == 6841568
    assert all(str(t.dtype) == "float32" for t in tensors.values())
    assert tensors["spk.dense.w"].shape == (192, 1024) and tensors["spk.d2.23.lin1.w"].shape == (128, 992)


def test_refuses_a_pickle_that_runs_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (subprocess.call, (["touch", str(tmp_path / "ran")],))

    pt = tmp_path / "evil.pt"
    with zipfile.ZipFile(pt, "w") as z:
        z.writestr("evil/data.pkl", pickle.dumps({"x": Evil()}, protocol=4))
    cp = convert(pt, tmp_path / "out.gguf")
    assert cp.returncode == 1 and "refusing to load subprocess.call" in cp.stderr, cp.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out.gguf").exists()


def test_refuses_other_files(tmp_path):
    txt = tmp_path / "model.pt"
    txt.write_text("not a checkpoint")
    cp = convert(txt, tmp_path / "out.gguf")
    assert cp.returncode == 1 and "not a PyTorch zip checkpoint" in cp.stderr and "Traceback" not in cp.stderr
    empty = tmp_path / "empty.pt"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("m/data.pkl", pickle.dumps({}, protocol=2))
    cp = convert(empty, tmp_path / "out.gguf")
    assert cp.returncode == 1 and "not a CAM++ state dict" in cp.stderr
    cp = convert(tmp_path / "missing.pt", tmp_path / "out.gguf")
    assert cp.returncode == 1 and "no such file" in cp.stderr
