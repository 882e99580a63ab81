"""Random-weight models for bench/run --random.

A release whose weights no reachable registry carries (large-v3-turbo,
distil-large-v3, ...) is benchmarked on a model of its exact dimensions
with random weights: the time of every product, attention and token does
not depend on the values. tools/random_model.py writes it as a
CTranslate2 directory (faster-whisper's input; seed 0, std 0.02), with
openai's tokenizer vocabulary from the pinned openai-whisper sdist, and
tools/convert.py turns that into sotto's GGUF; bench.py exports the GGUF
for whisper.cpp as it does for real models. All three tools run the same
weights. Everything is cached under CACHE/random/NAME/.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
sys.path.insert(0, str(TOOLS))

from sotto_gguf import families, openai_sdist  # noqa: E402
from sotto_gguf.common import ConvertError  # noqa: E402

SEED = 0


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def names() -> list[str]:
    return list(families.load())


def dims(name: str):
    """The release's Hparams (tools/families.json), or None."""
    fams = families.load()
    return fams[name].hparams if name in fams else None


def _run(cmd: list, what: str) -> None:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"bench: {what} failed:\n{r.stderr[-3000:]}")


def tiktoken(cache: Path, python: str, multilingual: bool) -> Path:
    """openai's vocabulary file for the release, from the pinned sdist."""
    name = "multilingual.tiktoken" if multilingual else "gpt2.tiktoken"
    out = cache / "random" / name
    if not out.is_file():
        try:
            data = openai_sdist.asset(openai_sdist.tarball(cache.parent, python), name)
        except ConvertError as e:
            raise SystemExit(f"bench: {e}")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_bytes(data)
        tmp.rename(out)
    return out


def make(name: str, cache: Path, python: str) -> dict:
    """{gguf, ct2} of release NAME with random weights, made if missing."""
    hp = dims(name)
    if hp is None:
        raise SystemExit(f"bench: --random: {name} is not a release of tools/families.json "
                         f"({', '.join(names())})")
    d = cache / "random" / name
    ct2 = d / "ct2"
    gguf = d / f"{name}.gguf"
    if not (ct2 / "model.bin").is_file():
        vocab = tiktoken(cache, python, hp.n_vocab >= 51865)
        tmp = d / "ct2.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        log(f"writing a random {name} (seed {SEED}) for faster-whisper")
        _run([python, TOOLS / "random_model.py", name, "-o", tmp, "--tiktoken", vocab, "--seed", SEED],
             f"tools/random_model.py {name}")
        shutil.rmtree(ct2, ignore_errors=True)
        tmp.rename(ct2)
    if not gguf.is_file() or gguf.stat().st_mtime < (ct2 / "model.bin").stat().st_mtime:
        log(f"converting the random {name} for sotto")
        _run([python, TOOLS / "convert.py", ct2, "-o", gguf, "--name", name], f"tools/convert.py {name}")
    return {"gguf": gguf, "ct2": ct2}
