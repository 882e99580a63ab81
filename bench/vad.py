#!/usr/bin/env python3
"""Voice activity detection: `sotto transcribe --vad` against faster-whisper's
vad_filter=True, with and without, on the same audio; driven by bench/vad.

Two sets: the manifest's files of ../shared/audio (mostly speech), and one
long file built from them with sox, every file followed by a long pause
(digital silence and quiet pink noise in turn). For each set and each of
sotto (default precision), sotto --vad, faster-whisper int8 and
faster-whisper int8 vad_filter=True: wall time of one process (median of
--runs interleaved runs), speed against real time and WER (no peak RSS:
the harness has onnxruntime loaded, and a child's ru_maxrss starts from
its parent's). Also
the VAD alone on the long file: libsotto's sotto_vad_probs() against
faster-whisper's get_speech_timestamps() (its own ONNX model in
onnxruntime, one thread each), and how much audio each kept.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from bench import (DOCS, RUNS_MARK, THREADS, cache_root, check, cpu_model, git_describe,  # noqa: E402
                   log, pkg_version, run_rss)
from build import ensure_built  # noqa: E402

TOOLS = ["sotto", "sotto-vad", "fw-int8", "fw-int8-vad"]
LABEL = {"sotto": "sotto", "sotto-vad": "sotto --vad", "fw-int8": "faster-whisper int8",
         "fw-int8-vad": "faster-whisper int8, vad_filter=True"}
PAUSES = [20, 45, 30]  # seconds after each file, in turn


def sox(*args) -> None:
    cp = subprocess.run(["sox", *map(str, args)], capture_output=True, text=True)
    if cp.returncode != 0:
        raise SystemExit(f"bench: sox {' '.join(map(str, args))}: {cp.stderr}")


def build_paused(audio: Path, files: list[str], out: Path) -> float:
    """Every file, then a pause (silence, then pink noise at about -50 dBFS,
    in turn); returns the seconds of pause."""
    parts, total = [], 0.0
    tmp = out.parent / "pauses"
    tmp.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        parts.append(audio / f)
        sec = PAUSES[i % len(PAUSES)]
        p = tmp / f"{i}.wav"
        if i % 2:
            sox("-n", "-r", 16000, "-c", 1, "-b", 16, p, "synth", sec, "pinknoise", "vol", 0.003)
        else:
            sox("-n", "-r", 16000, "-c", 1, "-b", 16, p, "trim", 0, sec)
        parts.append(p)
        total += sec
    sox(*parts, out)
    return total


class VadBench:
    def __init__(self, a, python: str):
        self.a = a
        self.python = python
        self.samples: dict = {}  # (set, tool) -> {"wall": [], "rss": [], "texts": {}}
        self.commands: dict = {}

    def setup(self):
        a = self.a
        build = Path(a.build_dir)
        ensure_built(build, ["client/sotto:executable", "lib/sotto"], not a.no_build)
        self.sotto = build / "client" / "sotto"
        self.lib = next((p.resolve() for p in (build / "lib" / "libsotto.so", build / "lib" / "libsotto.so.0")
                         if p.exists()), build / "lib" / "libsotto.so")
        env = dict(os.environ, SOTTO_PYTHON=self.python)

        def fetch(*args):
            return Path(subprocess.run([str(REPO / "scripts" / "fetch-model"), *args], env=env, check=True,
                                       capture_output=True, text=True).stdout.strip())
        self.gguf = fetch(a.model)
        self.ct2 = fetch(a.model, "--source-dir")
        self.vad = fetch("silero-vad")
        from wer import load_manifest

        self.audio = Path(a.audio).resolve()
        self.refs = load_manifest(self.audio)
        self.files = list(self.refs)
        d = cache_root() / "bench" / "vad"
        d.mkdir(parents=True, exist_ok=True)
        self.paused = d / "paused.wav"
        self.pause_s = build_paused(self.audio, self.files, self.paused)
        self.sets = {"files": [str(self.audio / f) for f in self.files], "paused": [str(self.paused)]}
        self.dur = {"files": sum(self.duration(p) for p in self.sets["files"]),
                    "paused": self.duration(str(self.paused))}

    @staticmethod
    def duration(path: str) -> float:
        import wave

        with wave.open(path) as w:
            return w.getnframes() / w.getframerate()

    def run(self, which: str, tool: str):
        files = self.sets[which]
        if tool.startswith("sotto"):
            cmd = [str(self.sotto), "transcribe", "-m", str(self.gguf), "-t", str(THREADS), "--beam-size", "1",
                   "-l", "en", "-f", "json", "-q", *(["--vad", "--vad-model", str(self.vad)] if tool == "sotto-vad"
                                                     else []), *files]
        else:
            cmd = [self.python, str(REPO / "bench" / "fw.py"), "transcribe", str(self.ct2), "--compute-type", "int8",
                   "--threads", str(THREADS), *(["--vad"] if tool.endswith("-vad") else []), *files]
        wall, rss, out, err, rc, other = run_rss(cmd, timeout=1800)
        check(cmd, rc, err)
        texts = {}
        for line in out.splitlines():
            o = json.loads(line)
            if "file" in o:
                texts[Path(o["file"]).name] = o["text"]
        s = self.samples.setdefault((which, tool), {"wall": [], "rss": [], "other": [], "texts": {}})
        s["wall"].append(wall)
        s["rss"].append(rss / 1024)
        s["other"].append(other)
        s["texts"] = texts
        shown = cmd if len(files) < 3 else cmd[: len(cmd) - len(files)] + [files[0], "...", files[-1]]
        self.commands.setdefault(f"{which} {tool}", shlex.join(shown))
        log(f"  {which} {tool}: {wall:.1f} s (other work: {other:.2f} cores)")

    def vad_alone(self) -> dict:
        """The VAD over the long file: libsotto against faster-whisper."""
        import numpy as np
        from faster_whisper import vad as fwvad

        from refs import read_wav

        x = read_wav(self.paused)
        so = ctypes.CDLL(str(self.lib))
        vp = ctypes.c_void_p
        f32p = ctypes.POINTER(ctypes.c_float)
        so.sotto_vad_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), ctypes.c_char_p]
        so.sotto_vad_state_new.argtypes, so.sotto_vad_state_new.restype = [vp], vp
        so.sotto_vad_state_free.argtypes = [vp]
        so.sotto_vad_probs.argtypes = [vp, f32p, ctypes.c_size_t, f32p]
        so.sotto_vad_probs.restype = ctypes.c_size_t
        v, err = vp(), ctypes.create_string_buffer(256)
        if so.sotto_vad_load(str(self.vad).encode(), ctypes.byref(v), err) != 0:
            raise SystemExit(f"bench: {err.value.decode()}")
        probs = np.zeros(len(x) // 512 + 1, np.float32)
        t_sotto, t_fw = [], []
        fwvad.get_speech_timestamps(x[: 16000])  # loads its model
        for _ in range(self.a.runs):
            st = so.sotto_vad_state_new(v)
            t0 = time.perf_counter()
            so.sotto_vad_probs(st, x.ctypes.data_as(f32p), len(x), probs.ctypes.data_as(f32p))
            t_sotto.append(time.perf_counter() - t0)
            so.sotto_vad_state_free(st)
            t0 = time.perf_counter()
            fw_regions = fwvad.get_speech_timestamps(x)
            t_fw.append(time.perf_counter() - t0)
        return {"sotto_s": statistics.median(t_sotto), "fw_s": statistics.median(t_fw),
                "fw_kept_s": sum(r["end"] - r["start"] for r in fw_regions) / 16000, "fw_regions": len(fw_regions)}

    def go(self):
        self.load_before = os.getloadavg()
        self.vad_res = self.vad_alone() | {"vad_path": str(self.vad)}
        for r in range(self.a.runs):
            log(f"run {r + 1}/{self.a.runs}")
            for which in self.sets:
                for tool in TOOLS:
                    self.run(which, tool)
        self.load_after = os.getloadavg()

    def wer(self, which: str, tool: str) -> float:
        from wer import counts

        texts = self.samples[(which, tool)]["texts"]
        if which == "files":
            pairs = [(self.refs[f], texts.get(f, "")) for f in self.files]
        else:
            pairs = [(" ".join(self.refs[f] for f in self.files), texts.get(self.paused.name, ""))]
        e = n = 0
        for ref, hyp in pairs:
            de, dn = counts(ref, hyp)
            e, n = e + de, n + dn
        return e / n

    def report(self) -> str:
        a = self.a
        now = dt.datetime.now(dt.timezone.utc)
        L = [f"### {now:%Y-%m-%d %H:%M} UTC: voice activity detection, {a.model}, {a.runs} runs", ""]
        L.append(f"`{shlex.join(['bench/vad', *sys.argv[1:]])}` on {git_describe()}, {cpu_model()}, {THREADS} threads; "
                 f"load average {self.load_before[0]:.2f} before, {self.load_after[0]:.2f} after; "
                 f"faster-whisper {pkg_version('faster-whisper')}, ctranslate2 {pkg_version('ctranslate2')}, "
                 f"onnxruntime {pkg_version('onnxruntime')}.")
        L.append("")
        names = {"files": f"the {len(self.files)} files of ../shared/audio ({self.dur['files']:.0f} s, "
                          "one process)",
                 "paused": f"one file of them with pauses ({self.dur['paused']:.0f} s: {self.pause_s:.0f} s of "
                           "silence and quiet pink noise between the files)"}
        for which in self.sets:
            L += [f"{names[which]}:", "",
                  "| tool | wall s | x real time | vs. without VAD | WER | other cores |",
                  "|---|---:|---:|---:|---:|---:|"]
            for tool in TOOLS:
                s = self.samples[(which, tool)]
                w = statistics.median(s["wall"])
                base = statistics.median(self.samples[(which, tool.removesuffix("-vad"))]["wall"])
                L.append(f"| {LABEL[tool]} | {w:.2f} | {self.dur[which] / w:.1f} | "
                         f"{'' if tool == tool.removesuffix('-vad') else f'{base / w:.2f}x faster'} | "
                         f"{100 * self.wer(which, tool):.2f}% | "
                         f"{statistics.median(s['other']):.2f} |")
            sv = statistics.median(self.samples[(which, "sotto-vad")]["wall"])
            fv = statistics.median(self.samples[(which, "fw-int8-vad")]["wall"])
            L += ["", f"sotto --vad is {fv / sv:.2f}x faster than faster-whisper int8 with vad_filter=True.", ""]
        v = self.vad_res
        hours = self.dur["paused"] / 3600
        L += [f"The VAD alone on the {self.dur['paused']:.0f} s file, one thread: libsotto "
              f"`sotto_vad_probs()` {v['sotto_s']:.2f} s ({v['sotto_s'] / hours:.1f} s per hour of audio), "
              f"faster-whisper `get_speech_timestamps()` (its own silero_vad_v6.onnx in onnxruntime) "
              f"{v['fw_s']:.2f} s ({v['fw_s'] / hours:.1f} s per hour); faster-whisper kept "
              f"{v['fw_kept_s']:.1f} s in {v['fw_regions']} regions.", "", "```"]
        for k, c in self.commands.items():
            L += [f"# {k}", c]
        L += ["```", ""]
        return "\n".join(L)


def insert_docs(section: str) -> None:
    """Newest first under the VAD marker (made before bench/run's if missing)."""
    mark = "<!-- bench/vad inserts runs below this line -->"
    text = DOCS.read_text()
    if mark not in text:
        head, tail = text.split(RUNS_MARK, 1)
        text = head.rstrip("\n") + "\n\n" + mark + "\n\n" + RUNS_MARK + tail
    head, tail = text.split(mark, 1)
    DOCS.write_text(head + mark + "\n\n" + section.rstrip("\n") + "\n" + tail)


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/vad", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny.en", help="Whisper model [tiny.en]")
    ap.add_argument("--runs", type=int, default=3, help="interleaved repetitions; medians over them [3]")
    ap.add_argument("--audio", default=str(AUDIO_DIR),
                    help="directory with manifest.tsv and the wav files [SOTTO_AUDIO_DIR, else ../shared/audio]")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"), help="meson release build [build-bench]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction, default=True,
                    help="insert the report into docs/benchmarks.md [yes]")
    a = ap.parse_args()
    b = VadBench(a, sys.executable)
    b.setup()
    b.go()
    section = b.report()
    print(section)
    out = cache_root() / "bench" / "results" / f"vad-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv, "samples": {f"{k[0]} {k[1]}": v for k, v in b.samples.items()},
                               "vad": b.vad_res, "commands": b.commands}, indent=1, default=str))
    log(f"samples in {out}")
    if a.docs:
        insert_docs(section)
        log(f"inserted into {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
