"""The reference speaker labeller and the DER scorer of bench/diarize, both
written by others: resemblyzer's GE2E VoiceEncoder over its own sliding
windows, clustered by scikit-learn's AgglomerativeClustering, labels the
words sotto transcribed; pyannote.metrics scores the diarization error
rate. They need bench/requirements-diarize.txt (torch among them), which
the tests do not install: this module is imported only by bench/diarize.
"""

from __future__ import annotations

import time

import numpy as np

RATE = 16000
# resemblyzer's partial utterances are 1.6 s (160 mel frames of 10 ms);
# WINDOWS_PER_S of them start each second, as its diarization demo slides
# them (it uses 16; 4 keeps a 1 min conversation at a few hundred).
WINDOWS_PER_S = 4
# a window is clustered when words cover at least this share of it: a
# window of silence or of a turn's edge embeds noise, not a voice
MIN_SPEECH_SHARE = 0.5
# DER's forgiveness collar. pyannote.metrics' DiarizationErrorRate(collar=)
# is the whole width centred on each reference boundary ("collar: duration
# (in seconds) of collars removed from evaluation around boundaries of
# reference segments", one half each side), so the usual 0.25 s each side
# is collar=0.5.
COLLAR = 0.5
# a word's span joins the previous one of the same label across a pause
# this short, when the words become the hypothesis' speech turns
JOIN_S = 0.5


class Reference:
    """resemblyzer + AgglomerativeClustering on one thread."""

    def __init__(self):
        import torch
        from resemblyzer import VoiceEncoder

        torch.set_num_threads(1)
        t0 = time.process_time()
        self.encoder = VoiceEncoder("cpu", verbose=False)
        self.load_cpu_s = time.process_time() - t0

    def windows(self, pcm: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float]]]:
        """The partial embeddings of pcm (L2-normalised) and their spans in s."""
        _, partials, slices = self.encoder.embed_utterance(
            pcm, return_partials=True, rate=WINDOWS_PER_S, min_coverage=0.5)
        spans = [(s.start / RATE, min(s.stop, len(pcm)) / RATE) for s in slices]
        return np.asarray(partials), spans

    def calibrate(self, readers: dict[str, list[np.ndarray]]) -> dict:
        """The clustering threshold, set as sotto's was: between the
        same-reader cosines (1st percentile) and the different-reader ones
        (highest) of windows of single readers' recordings."""
        embs = {r: np.concatenate([self.windows(p)[0] for p in phrases if len(p) >= 1.6 * RATE])
                for r, phrases in readers.items()}
        same, diff = [], []
        names = list(embs)
        for i, a in enumerate(names):
            c = embs[a] @ embs[a].T
            same.append(c[np.triu_indices(len(c), 1)])
            for b in names[i + 1:]:
                diff.append((embs[a] @ embs[b].T).ravel())
        same_p1 = float(np.percentile(np.concatenate(same), 1))
        diff_max = float(np.concatenate(diff).max())
        return {"same_p1": same_p1, "diff_max": diff_max,
                "threshold": 1.0 - (same_p1 + diff_max) / 2,
                "windows": {r: len(e) for r, e in embs.items()}}

    def label(self, pcm: np.ndarray, words: list[dict], threshold: float,
              speakers: int | None = None) -> tuple[list[str], float]:
        """A label for each word (the cluster of the kept window whose centre
        is nearest the word's middle) and the CPU seconds it took: clusters
        cut at cosine distance threshold, or speakers of them when given."""
        from sklearn.cluster import AgglomerativeClustering

        t0 = time.process_time()
        emb, spans = self.windows(pcm)
        keep = [i for i, (a, b) in enumerate(spans)
                if speech_share(words, a, b) >= MIN_SPEECH_SHARE]
        if len(keep) < 2:
            keep = list(range(len(spans)))
        if speakers:
            ac = AgglomerativeClustering(n_clusters=min(speakers, len(keep)),
                                         metric="cosine", linkage="average")
        else:
            ac = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold,
                                         metric="cosine", linkage="average")
        cluster = ac.fit_predict(emb[keep])
        centres = np.array([(spans[i][0] + spans[i][1]) / 2 for i in keep])
        out = []
        for w in words:
            mid = (w["start"] + w["end"]) / 2
            out.append(f"C{cluster[int(np.argmin(np.abs(centres - mid)))]}")
        return out, time.process_time() - t0


def speech_share(words: list[dict], a: float, b: float) -> float:
    """The share of [a, b] that words cover."""
    covered = sum(max(0.0, min(b, w["end"]) - max(a, w["start"])) for w in words)
    return covered / (b - a) if b > a else 0.0


def turns_of_words(words: list[dict], labels: list[str]) -> list[tuple[float, float, str]]:
    """The words as speech turns: consecutive words of one label joined
    across pauses under JOIN_S."""
    out: list[list] = []
    for w, lab in zip(words, labels):
        if out and out[-1][2] == lab and w["start"] - out[-1][1] < JOIN_S:
            out[-1][1] = max(out[-1][1], w["end"])
        else:
            out.append([w["start"], w["end"], lab])
    return [tuple(t) for t in out if t[1] > t[0]]


def der(truth: list, hyp: list[tuple[float, float, str]], duration: float) -> dict:
    """pyannote.metrics' diarization error rate of hyp (start, end, label)
    against truth (conversation.Turn), with a 0.25 s collar each side, and
    its parts in seconds."""
    from pyannote.core import Annotation, Segment, Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate

    ref, h = Annotation(), Annotation()
    for i, t in enumerate(truth):
        ref[Segment(t.start, t.end), i] = t.speaker
    for i, (a, b, lab) in enumerate(hyp):
        h[Segment(a, b), i] = lab
    metric = DiarizationErrorRate(collar=COLLAR, skip_overlap=False)
    d = metric(ref, h, uem=Timeline([Segment(0, duration)]), detailed=True)
    return {"der": d["diarization error rate"], "total": d["total"],
            "missed": d["missed detection"], "false_alarm": d["false alarm"],
            "confusion": d["confusion"]}
