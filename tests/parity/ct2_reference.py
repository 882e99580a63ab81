"""CTranslate2 as the reference, in a process of its own (its OpenMP
runtime and libsotto's never share one process, and the reference's
memory is gone before sotto loads its model).

    ct2_reference.py CT2_DIR MEL.npy OUT.npz --prompt ID,ID,... --steps N
        --eot ID [--threads 2]

Writes enc [d][1500] (float32), tokens [N] (greedy, nothing suppressed
but end of text), logits [N][n_vocab] (end of text at -FLT_MAX), and for
a multilingual model lang_codes / lang_probs (detect_language).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("ct2_dir")
    ap.add_argument("mel")
    ap.add_argument("out")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--eot", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import ctranslate2

    t0 = time.perf_counter()
    m = ctranslate2.models.Whisper(a.ct2_dir, device="cpu", compute_type="float32", intra_threads=a.threads)
    mel = np.load(a.mel)
    enc = m.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(mel[None], dtype=np.float32)), to_cpu=True)
    prompt = [int(x) for x in a.prompt.split(",")]
    # CTranslate2 counts max_length over the prompt's length too: 2 x steps
    # is ample, and the count actually returned is checked by the caller.
    r = m.generate(enc, [prompt], beam_size=1, max_length=2 * a.steps, return_logits_vocab=True,
                   suppress_blank=False, suppress_tokens=[a.eot])[0]
    out = {"enc": np.ascontiguousarray(np.array(enc)[0].T),
           "tokens": np.array(r.sequences_ids[0][:a.steps], np.int32),
           "logits": np.array(r.logits[0], np.float32)[:a.steps]}
    if m.is_multilingual:
        pairs = m.detect_language(enc)[0]
        out["lang_codes"] = np.array([t[2:-2] for t, _ in pairs])
        out["lang_probs"] = np.array([p for _, p in pairs], np.float64)
    out["seconds"] = np.array(time.perf_counter() - t0)
    np.savez(a.out, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
