#!/usr/bin/env python3
"""Speaker labels: `sotto transcribe --diarize` next to a reference pipeline
(resemblyzer's VoiceEncoder + scikit-learn's AgglomerativeClustering) on
conversations of 2 to 4 speakers, scored with pyannote.metrics; driven by
bench/diarize.

    bench/diarize              14 conversations (18 min of audio), CPU best of 3 (~17 min)
    bench/diarize --quick      2 conversations, 1 run, no docs (~1 min)

Conversations (tests/e2e/conversation.py assembles them): turns of 2-20 s
of real readers (../shared/audio: LJ Speech, a LibriVox reader of the
Debian package pocketsphinx-testdata, JFK, the Montreal Forced Aligner
speaker, LibriSpeech readers with one short clip each) and of flite's
voices slt, rms, awb and kal16 reading LJ Speech's text, each once with
silences of 0.2-0.8 s between turns and once with some turns starting
0.2-0.5 s before the previous one ends (the two mixed).

sotto: `sotto transcribe -m tiny.en --diarize -f json -t 1` (speakers
estimated) and with `--speakers N`. Reference: the same words (sotto's
tiny.en word timestamps, so only the labelling differs) labelled by
diarize_ref.py, with a distance threshold set as sotto's was (between
same-reader and different-reader cosines of the real readers' windows)
and with N given. Scores: the diarization error rate (pyannote.metrics,
0.25 s collar each side) of each system's words as speech turns, and the
share of words given their speaker (conversation.score: the best
one-to-one mapping; words whose middle is in an overlap are left out).
CPU: `-t 1`, best of --runs, with `--diarize` against `--word-timestamps`
alone (both label the same words); the reference's labelling CPU on one
torch thread over the same transcription's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import conversation as conv  # noqa: E402
import diarize_ref as ref  # noqa: E402
from bench import cache_root, git_describe  # noqa: E402
from build import ensure_built  # noqa: E402
from machine import cpu_model, loadavg, machine_busy_s  # noqa: E402
from wer import AUDIO_DIR, load_manifest  # noqa: E402

DOCS = REPO / "docs" / "benchmarks.md"
MARK = "<!-- bench/diarize inserts runs below this line -->"
FLITE = ["slt", "rms", "awb", "kal16"]
# readers of ../shared/audio beyond conversation.READERS (normal voice only)
MORE_READERS = {"mfa": ["mfa_thoughts.wav", "mfa_longstop.wav"]}
CLEAN_GAPS = (0.4, 0.2, 0.8, 0.3, 0.6)
OVERLAP_GAPS = (-0.3, 0.4, -0.5, 0.2, -0.2, 0.6)
# who speaks in turn, and the shortest turn of each in turn (s)
CONVERSATIONS = {
    "real-2": (["lj", "austen"] * 5, (2.0,)),
    "real-3": (["lj", "austen", "jfk", "lj", "austen", "jfk", "lj", "jfk", "austen", "lj"], (2.0, 4.0)),
    # the Montreal Forced Aligner speaker has 2.2 s of speech: one turn
    "real-4": (["lj", "austen", "jfk", "mfa", "lj", "austen", "jfk", "lj", "austen", "lj"], (2.0, 8.0, 2.0, 4.0)),
    "flite-2": (["slt", "rms"] * 5, (2.0, 8.0, 4.0, 14.0)),
    "flite-3": (["slt", "rms", "awb", "rms", "slt", "awb", "slt", "rms", "awb", "slt"], (2.0, 6.0, 3.0, 12.0)),
    "flite-4": (["slt", "rms", "awb", "kal16", "slt", "awb", "rms", "kal16", "slt", "rms", "awb", "kal16"],
                (2.0, 6.0, 3.0, 10.0)),
    "mixed-4": (["lj", "slt", "austen", "rms", "lj", "rms", "slt", "austen", "lj", "slt", "rms", "lj"],
                (2.0, 5.0, 3.0, 9.0)),
}
QUICK = ["real-2"]


def log(msg: str) -> None:
    print(f"[bench/diarize {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    d = cache_root() / "bench" / "diarize"
    d.mkdir(parents=True, exist_ok=True)
    return d


def flite_speech(texts: list[str], out: Path) -> dict[str, list]:
    """Each flite voice reading all of texts, as phrases, each voice
    starting a quarter further on (two voices seldom say the same thing
    in a conversation)."""
    speech = {}
    for k, voice in enumerate(FLITE):
        phrases = []
        start = k * len(texts) // len(FLITE)
        for i in [*range(start, len(texts)), *range(start)]:
            wav = out / f"{voice}-{i}.wav"
            if not wav.exists():
                cp = subprocess.run(["flite", "-voice", voice, "-t", texts[i], "-o", str(wav)],
                                    capture_output=True, text=True)
                if cp.returncode != 0:
                    raise SystemExit(f"bench/diarize: flite -voice {voice} failed: {cp.stderr.strip()} "
                                     "(apt-get install flite)")
            phrases += conv.phrases(conv.read_wav(wav), 0.2, 0.01)
        speech[voice] = phrases
    return speech


def sentences() -> list[str]:
    """LJ Speech's text of the long-form file, a sentence or clause each."""
    text = load_manifest()["LJ001-0001_to_LJ001-0017_longform.wav"]
    parts, cur = [], ""
    for piece in text.replace(";", ",").split(", "):
        cur = f"{cur}, {piece}" if cur else piece
        if len(cur) > 60 or cur.endswith("."):
            parts.append(cur)
            cur = ""
    return parts + ([cur] if cur else [])


def run_cpu(cmd: list[str]) -> tuple[float, str]:
    """cmd's CPU seconds (user + system, its children's included) and stdout."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, cwd=REPO)
        _, status, ru = os.wait4(p.pid, 0)
        fo.seek(0)
        fe.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"bench/diarize: {shlex.join(cmd)} failed:\n{fe.read()[-3000:]}")
        return ru.ru_utime + ru.ru_stime, fo.read()


class Bench:
    def __init__(self, a):
        self.a = a
        self.rows: list[dict] = []
        self.commands: dict[str, str] = {}

    def setup(self):
        a = self.a
        build = Path(a.build_dir)
        ensure_built(build, ["client/sotto:executable"], not a.no_build)
        self.sotto = build / "client" / "sotto"
        models = REPO / "models"
        self.model = models / f"{a.model}.gguf"
        for m in (self.model, models / "campplus.gguf", models / "silero-vad.gguf"):
            if not m.is_file():
                raise SystemExit(f"bench/diarize: {m} is missing (scripts/fetch-model {m.stem})")
        d = cache_dir()
        (d / "flite").mkdir(exist_ok=True)
        self.speech = flite_speech(sentences(), d / "flite")
        for r, files in MORE_READERS.items():
            self.speech[r] = [p for f in files for p in conv.phrases(conv.read_wav(AUDIO_DIR / f), 0.2, 0.01)]
        self.ref = ref.Reference()
        self.calib = self.ref.calibrate({r: conv.speech_of(r) for r in ("lj", "austen", "jfk")})
        log(f"reference threshold: cosine distance {self.calib['threshold']:.3f} ({self.calib})")

    def conversations(self):
        """(name, wav, turns, overlapped) of each conversation asked for."""
        d = cache_dir()
        names = QUICK if self.a.quick else list(CONVERSATIONS)
        for name in names:
            order, mins = CONVERSATIONS[name]
            for overlap in (False, True):
                wav = d / f"{name}{'-overlap' if overlap else ''}.wav"
                turns = conv.assemble(order, wav, min_turn_s=mins,
                                      gaps_s=OVERLAP_GAPS if overlap else CLEAN_GAPS, speech=self.speech)
                yield name, wav, turns, overlap

    def sotto_cmd(self, wav: Path, *extra) -> list[str]:
        # the speaker and VAD models are found in ./models by name (cwd: REPO)
        return [str(self.sotto), "transcribe", "-m", str(self.model), "-t", "1", "-f", "json", "-q", *extra,
                str(wav)]

    def measure(self, name: str, wav: Path, turns: list, overlap: bool) -> dict:
        a = self.a
        n = len({t.speaker for t in turns})
        cpu = {"diarize": [], "words": []}
        out = None
        for _ in range(a.runs):
            for kind, flag in (("diarize", "--diarize"), ("words", "--word-timestamps")):
                c, o = run_cpu(self.sotto_cmd(wav, flag))
                cpu[kind].append(c)
                if kind == "diarize":
                    out = json.loads(o.splitlines()[0])
        _, o = run_cpu(self.sotto_cmd(wav, "--diarize", "--speakers", str(n)))
        out_n = json.loads(o.splitlines()[0])
        self.commands.setdefault("sotto", shlex.join(self.sotto_cmd(Path("CONVERSATION.wav"), "--diarize")))
        pcm = conv.read_wav(wav)
        duration = len(pcm) / conv.RATE
        words = conv.words_of(out)
        ref_labels, ref_cpu = self.ref.label(pcm, words, self.calib["threshold"])
        ref_labels_n, _ = self.ref.label(pcm, words, self.calib["threshold"], speakers=n)
        row = {"name": name + (" overlap" if overlap else ""), "speakers": n, "turns": len(turns),
               "duration": duration, "overlap_s": conv.overlap_s(turns), "words": len(words),
               "cpu_diarize": min(cpu["diarize"]), "cpu_words": min(cpu["words"]), "cpu_ref": ref_cpu}
        for key, labels in (("sotto", [w["speaker"] for w in words]),
                            ("sotto_n", [w["speaker"] for w in conv.words_of(out_n)]),
                            ("ref", ref_labels), ("ref_n", ref_labels_n)):
            ws = words if key != "sotto_n" else conv.words_of(out_n)
            row[key] = score(ws, labels, turns, duration)
        log(f"{row['name']}: {duration:.0f} s, {len(words)} words; "
            + "; ".join(f"{k} DER {row[k]['der']:.1%} right {row[k]['right']:.1%} found {row[k]['found']}"
                        for k in ("sotto", "sotto_n", "ref", "ref_n")))
        return row

    def go(self):
        self.load_before = loadavg()
        busy0, t0 = machine_busy_s(), time.monotonic()
        for name, wav, turns, overlap in self.conversations():
            self.rows.append(self.measure(name, wav, turns, overlap))
        self.load_after = loadavg()
        self.machine_cores = (machine_busy_s() - busy0) / (time.monotonic() - t0)


def score(words: list[dict], labels: list[str], turns: list, duration: float) -> dict:
    """DER of the labelled words as turns, the share of words (outside
    overlaps) right under the best mapping, and the speakers found."""
    d = ref.der(turns, ref.turns_of_words(words, labels), duration)
    kept = [dict(w, speaker=lab) for w, lab in zip(words, labels) if not conv.in_overlap(w, turns)]
    right, _ = conv.score({"segments": [{"words": kept}]}, turns)
    return d | {"right": right, "found": len(set(labels)), "scored_words": len(kept)}


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def total(rows: list[dict], key: str) -> dict:
    """DER over the rows' audio together, and the share of all their words right."""
    t = sum(r[key]["total"] for r in rows)
    err = sum(r[key]["missed"] + r[key]["false_alarm"] + r[key]["confusion"] for r in rows)
    w = sum(r[key]["scored_words"] for r in rows)
    right = sum(r[key]["right"] * r[key]["scored_words"] for r in rows)
    return {"der": err / t, "right": right / w, "confusion": sum(r[key]["confusion"] for r in rows) / t}


def report(b: Bench, started: dt.datetime) -> str:
    from importlib.metadata import version

    a, rows, c = b.a, b.rows, b.calib
    L = [f"### {started:%Y-%m-%d %H:%M} UTC: speaker labels, {a.model}, {len(rows)} conversations", ""]
    L.append(f"`{shlex.join(['bench/diarize', *sys.argv[1:]])}` on {git_describe()}, {cpu_model()}, one thread; "
             f"load average {b.load_before:.2f} before, {b.load_after:.2f} after (the whole machine used "
             f"{b.machine_cores:.2f} of its {os.cpu_count()} cores meanwhile); resemblyzer "
             f"{version('resemblyzer')}, torch {version('torch')}, scikit-learn {version('scikit-learn')}, "
             f"pyannote.metrics {version('pyannote.metrics')} (DiarizationErrorRate(collar={ref.COLLAR}), "
             f"i.e. 0.25 s each side). The reference's threshold: cosine distance {c['threshold']:.3f}, "
             f"between its same-reader 1st percentile {c['same_p1']:.3f} and different-reader highest "
             f"{c['diff_max']:.3f} cosine on the windows of LJ, the Sense and Sensibility reader and JFK.")
    L += ["", "Speakers estimated (sotto: `--diarize`; reference: distance threshold). DER % (its confusion "
          "part), words right %, speakers found:", "",
          "| conversation | speakers | audio s | overlap s | words | sotto DER | sotto words | sotto found | "
          "reference DER | reference words | reference found |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s, f = r["sotto"], r["ref"]
        L.append(f"| {r['name']} | {r['speakers']} | {r['duration']:.1f} | {r['overlap_s']:.1f} | {r['words']} | "
                 f"{pct(s['der'])} ({pct(s['confusion'] / s['total'])}) | {pct(s['right'])} | {s['found']} | "
                 f"{pct(f['der'])} ({pct(f['confusion'] / f['total'])}) | {pct(f['right'])} | {f['found']} |")
    L += ["", "Number of speakers given (sotto `--speakers N`, the reference `n_clusters=N`):", "",
          "| conversation | sotto DER | sotto words | reference DER | reference words |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        s, f = r["sotto_n"], r["ref_n"]
        L.append(f"| {r['name']} | {pct(s['der'])} ({pct(s['confusion'] / s['total'])}) | {pct(s['right'])} | "
                 f"{pct(f['der'])} ({pct(f['confusion'] / f['total'])}) | {pct(f['right'])} |")
    L += ["", "All together (DER over all their audio, words right over all their words):", "",
          "| conversations | sotto DER | sotto words | sotto N given: DER | words | reference DER | reference words "
          "| reference N given: DER | words |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for what, sel in (("clean", [r for r in rows if not r["overlap_s"]]),
                      ("with overlaps", [r for r in rows if r["overlap_s"]])):
        if sel:
            t = {k: total(sel, k) for k in ("sotto", "sotto_n", "ref", "ref_n")}
            L.append(f"| {what} ({len(sel)}) | " + " | ".join(f"{pct(t[k]['der'])} | {pct(t[k]['right'])}"
                                                            for k in ("sotto", "sotto_n", "ref", "ref_n")) + " |")
    audio = sum(r["duration"] for r in rows)
    words_cpu = sum(r["cpu_words"] for r in rows)
    dia_cpu = sum(r["cpu_diarize"] for r in rows) - words_cpu
    ref_cpu = sum(r["cpu_ref"] for r in rows)
    L += ["", f"CPU, one thread, best of {a.runs} per conversation, summed over the {audio:.0f} s of audio: "
          f"transcription with `--word-timestamps` {words_cpu:.2f} s; sotto's labelling (`--diarize` less that) "
          f"{dia_cpu:.2f} s, {pct(dia_cpu / words_cpu)} of the transcription's ({1000 * dia_cpu / audio:.1f} ms "
          f"per second of audio); the reference's labelling (embedding + clustering, one torch thread, one run) "
          f"{ref_cpu:.2f} s, {pct(ref_cpu / words_cpu)} ({1000 * ref_cpu / audio:.1f} ms per second), and "
          f"{b.ref.load_cpu_s:.2f} s once to load its model.", "", "```", f"# sotto", b.commands["sotto"], "```", ""]
    return "\n".join(L)


def insert_docs(section: str) -> None:
    text = DOCS.read_text()
    if MARK not in text:
        raise SystemExit(f"bench/diarize: {DOCS} has no line {MARK!r} (in its \"## Speaker labels\" section)")
    head, tail = text.split(MARK, 1)
    DOCS.write_text(head + MARK + "\n\n" + section.strip("\n") + "\n\n" + tail.lstrip("\n"))


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/diarize", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"only {', '.join(QUICK)} (clean and with overlaps), 1 run, no docs: checks the harness")
    ap.add_argument("--model", default="tiny.en", help="Whisper model in models/ [tiny.en]")
    ap.add_argument("--runs", type=int, default=3, help="CPU time: best of this many runs of each [3]")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"), help="meson release build [build-bench]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction, default=None,
                    help="insert the report into docs/benchmarks.md [yes, no with --quick]")
    a = ap.parse_args()
    if a.quick:
        a.runs = 1
    docs = a.docs if a.docs is not None else not a.quick
    started = dt.datetime.now(dt.timezone.utc)
    b = Bench(a)
    b.setup()
    b.go()
    section = report(b, started)
    print(section)
    out = cache_dir() / f"results-{started:%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps({"argv": sys.argv, "rows": b.rows, "calibration": b.calib}, indent=1))
    log(f"figures in {out}")
    if docs:
        insert_docs(section)
        log(f"inserted into {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
