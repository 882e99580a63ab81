#!/usr/bin/env python3
"""sotto vs whisper.cpp vs faster-whisper on this machine; driven by bench/run.

See docs/benchmarks.md for what each number measures. Every tool runs with
2 threads, one process per measurement, interleaved (all tools once, then
all tools again, ...), and the tables show medians over the repetitions.
With --random the models are releases of tools/families.json with random
weights (bench/randomweights.py): their timing, not their text, is measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/audio.py: where the speech set is
from audio import AUDIO_DIR  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import cpu  # noqa: E402
import fixedfile  # noqa: E402
import randomweights  # noqa: E402
import whispercpp  # noqa: E402
from machine import cpu_flags, cpu_model, loadavg, machine_busy_s  # noqa: E402
from build import ensure_built  # noqa: E402
from toolset import (FILE_TOOLS, FW_RUN, LABEL, MICRO_TOOLS, PEERS, RANDOM_TOOLS, SOTTO_RUN,  # noqa: E402
                     SOTTO_TOOLS, runs_here, tool_env)

THREADS = 2
DOCS = REPO / "docs" / "benchmarks.md"
RUNS_MARK = "<!-- bench/run appends runs below this line -->"


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    if os.environ.get("SOTTO_CACHE"):
        return Path(os.environ["SOTTO_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sotto"


def encoder_gflop(model: str) -> float | None:
    """Multiply-adds x2 of one 30 s encoder pass (convs, projections, MLP, attention)."""
    hp = randomweights.dims(model)
    if hp is None:
        return None
    d, n, mels = hp.n_audio_state, hp.n_audio_layer, hp.n_mels
    t = 1500
    conv = 2 * 3000 * mels * d * 3 + 2 * t * d * d * 3
    layer = 2 * t * d * d * 4 + 2 * t * d * 4 * d * 2 + 2 * 2 * t * t * d
    return (conv + n * layer) / 1e9


def run_rss(cmd: list[str], timeout: float = 1800, extra_env=None) -> tuple[float, int, str, str, int, float]:
    """Run cmd with stdout/stderr to temp files; (wall s, peak RSS KiB, out,
    err, rc, the cores the rest of the machine used meanwhile)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), **(extra_env or {}))
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        busy0 = machine_busy_s()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, env=env)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                raise SystemExit(f"bench: timed out after {timeout} s: {shlex.join(cmd)}")
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        other = max(0.0, machine_busy_s() - busy0 - ru.ru_utime - ru.ru_stime) / wall
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return wall, ru.ru_maxrss, fo.read(), fe.read(), p.returncode, other


def check(cmd, rc, err):
    if rc != 0:
        sys.stderr.write(err[-4000:])
        raise SystemExit(f"bench: exit status {rc}: {shlex.join(map(str, cmd))}")


WCPP_TIMING = re.compile(r"whisper_print_timings:\s+(\w+) time =\s*([\d.]+) ms(?: /\s*(\d+) runs \(\s*([\d.]+) ms per run\))?")


def wcpp_timings(err: str) -> dict:
    out = {}
    for m in WCPP_TIMING.finditer(err):
        name, total, runs, per = m.groups()
        out[name] = {"total_ms": float(total), "runs": int(runs) if runs else None,
                     "per_run_ms": float(per) if per else None}
    return out


class Bench:
    def __init__(self, args, python: str):
        self.args = args
        self.python = python
        self.cache = cache_root() / "bench"
        self.cache.mkdir(parents=True, exist_ok=True)
        self.audio = Path(args.audio).resolve()
        self.results: dict = {}  # model -> tool -> metric -> [samples]
        self.commands: dict = {}
        self.sotto_kernel = None  # "amx" or "avx512-bf16", from sotto-bench
        self.others: list[float] = []  # cores other work used during each measurement

    # -- setup ---------------------------------------------------------------

    def setup(self):
        a = self.args
        build = Path(a.build_dir)
        targets = ["bench/sotto-bench", "client/sotto:executable"]
        ensure_built(build, targets, not a.no_build)
        self.bins = {t: (build / "bench" / "sotto-bench", build / "client" / "sotto") for t in SOTTO_TOOLS}
        if "sotto-avx2" in a.micro_tools + a.file_tools:
            # a build without the AVX-512 clones (meson -Dmax_isa=avx2)
            avx2 = Path(a.avx2_build_dir or str(build) + "-avx2")
            ensure_built(avx2, targets, not a.no_build, ["-Dmax_isa=avx2"])
            self.bins["sotto-avx2"] = (avx2 / "bench" / "sotto-bench", avx2 / "client" / "sotto")
        for b in {b for pair in self.bins.values() for b in pair}:
            if not b.is_file():
                raise SystemExit(f"bench: {b} missing (meson compile -C {b.parent.parent})")
        self.wcpp = None
        if any(t.startswith("whispercpp") for t in a.micro_tools):
            self.wcpp = whispercpp.build(self.cache, self.python, a.whispercpp, os.cpu_count() or 2)
        self.models = {}
        env = dict(os.environ, SOTTO_PYTHON=self.python)
        for name in a.models:
            if a.random:
                gguf, ct2 = randomweights.make(name, self.cache, self.python).values()
                ggml = self.cache / "random" / name / f"ggml-{name}.bin"
            else:
                gguf = Path(subprocess.run([str(REPO / "scripts" / "fetch-model"), name], env=env, check=True,
                                           capture_output=True, text=True).stdout.strip())
                ct2 = Path(subprocess.run([str(REPO / "scripts" / "fetch-model"), name, "--source-dir"],
                                          env=env, check=True, capture_output=True, text=True).stdout.strip())
                ggml = self.cache / "models" / f"ggml-{name}.bin"
            if self.wcpp is None:
                self.models[name] = {"gguf": gguf, "ct2": ct2, "ggml": None}
                continue
            if not ggml.is_file() or ggml.stat().st_mtime < gguf.stat().st_mtime:
                ggml.parent.mkdir(parents=True, exist_ok=True)
                log(f"exporting {gguf.name} for whisper.cpp")
                subprocess.run([self.python, str(REPO / "tools" / "export_ggml.py"), str(gguf), "-o", str(ggml)],
                               check=True, capture_output=True)
            self.models[name] = {"gguf": gguf, "ct2": ct2, "ggml": ggml}
        man = self.audio / "manifest.tsv"
        from wer import load_manifest

        self.refs = load_manifest(self.audio)
        durs = {}
        with man.open() as f:
            cols = f.readline().rstrip("\n").split("\t")
            for line in f:
                row = dict(zip(cols, line.rstrip("\n").split("\t")))
                durs[row["file"]] = float(row["duration_seconds"])
        self.short = [str(self.audio / f) for f, d in durs.items() if d <= 30]
        self.long = [str(self.audio / f) for f, d in durs.items() if d > 30]
        # start-up to first result: one process, one short file (jfk.wav when there)
        self.first = [next((f for f in self.short if Path(f).name == "jfk.wav"), self.short[0] if self.short else "")]
        self.durs = {"short": sum(d for d in durs.values() if d <= 30),
                     "long": sum(d for d in durs.values() if d > 30)}
        if not self.short or not self.long:
            raise SystemExit(f"bench: {man}: need files under and over 30 s")
        self.raw = fixedfile.make_raw(Path(self.long[0]), a.fixed_seconds, self.cache / "audio")

    # -- measurements ----------------------------------------------------------

    def run(self, cmd, extra_env=None):
        """run_rss after waiting (--max-other) for a quieter machine; the
        other cores during the run go to self.others."""
        a = self.args
        if a.max_other is not None:
            t0 = time.monotonic()
            while True:
                b0 = machine_busy_s()
                time.sleep(10)
                other = (machine_busy_s() - b0) / 10
                if other <= a.max_other or time.monotonic() - t0 >= a.wait:
                    break
                log(f"other processes use {other:.2f} cores (load average {loadavg():.2f}); waiting")
        wall, rss, out, err, rc, other = run_rss(cmd, extra_env=extra_env)
        self.others.append(other)
        return wall, rss, out, err, rc

    def add(self, model, tool, key, value):
        if value is None:
            return
        self.results.setdefault(model, {}).setdefault(tool, {}).setdefault(key, []).append(value)

    def note_cmd(self, kind, tool, cmd):
        env = " ".join(f"{k}={v}" for k, v in tool_env(tool).items())
        self.commands.setdefault(f"{kind} {tool}", (env + " " if env else "") + shlex.join(map(str, cmd)))

    def micro(self, model, tool):
        m = self.models[model]
        a = self.args
        if tool.startswith("sotto"):
            prec, env = SOTTO_RUN[tool]
            cmd = [str(self.bins[tool][0]), str(m["gguf"]), "--precision", prec,
                   "--threads", str(THREADS), "--runs", str(a.inner_runs)]
            wall, rss, out, err, rc = self.run(cmd, extra_env=env)
            check(cmd, rc, err)
            r = json.loads(out.strip().splitlines()[-1])
            vals = {k: r[k] for k in ("load_s", "encoder_s", "step1_ms", "step5_ms")}
            for k, key in (("matmul_ceiling_tflops", "ceiling_tflops"),
                           ("matmul_onednn_tflops", "onednn_tflops"), ("matmul_kernel_tflops", "kernel_tflops")):
                if r.get(k):
                    vals[key] = r[k]
            if r.get("kernel"):  # null where no bf16 ceiling was measured
                self.sotto_kernel = r["kernel"]
        elif tool.startswith("whispercpp"):
            cmd = [str(self.wcpp["bin_dir"] / "whisper-bench"), "-m", str(m["ggml"]), "-t", str(THREADS),
                   "-fa" if tool == "whispercpp" else "-nfa"]
            wall, rss, out, err, rc = self.run(cmd)
            check(cmd, rc, err)
            t = wcpp_timings(err)
            vals = {"load_s": t["load"]["total_ms"] / 1e3, "encoder_s": t["encode"]["per_run_ms"] / 1e3,
                    "step1_ms": t["decode"]["per_run_ms"], "step5_ms": t["batchd"]["per_run_ms"]}
        else:
            cmd = [self.python, str(REPO / "bench" / "fw.py"), "micro", str(m["ct2"]),
                   "--compute-type", FW_RUN[tool][0],
                   "--threads", str(THREADS), "--runs", str(a.inner_runs), "--tokens", str(a.tokens),
                   "--audio", self.long[0]]
            wall, rss, out, err, rc = self.run(cmd, extra_env=tool_env(tool))
            check(cmd, rc, err)
            r = json.loads(out.strip().splitlines()[-1])
            vals = {k: r[k] for k in ("load_s", "encoder_s", "step1_ms", "step5_ms")}
        self.note_cmd("micro", tool, cmd)
        for k, v in vals.items():
            self.add(model, tool, k, v)
        log(f"  {model} {tool}: enc {vals['encoder_s']*1e3:.0f} ms, step {vals['step1_ms']:.2f} ms "
            f"({wall:.1f} s)")

    def fixed(self, model, tool):
        """The fixed-token file (fixedfile.py): one process, own timings."""
        m = self.models[model]
        a = self.args
        env = tool_env(tool)
        if tool.startswith("sotto"):
            cmd = [str(self.bins[tool][0]), str(m["gguf"]), "--precision", SOTTO_RUN[tool][0],
                   "--threads", str(THREADS), "--file", str(self.raw), "--tokens", str(a.fixed_tokens)]
        elif tool.startswith("whispercpp"):
            cmd = [str(self.wcpp["bin_dir"] / "whispercpp-file"), str(m["ggml"]), str(self.raw),
                   str(a.fixed_tokens), str(THREADS)] + (["nfa"] if tool == "whispercpp-nofa" else [])
        else:
            cmd = [self.python, str(REPO / "bench" / "fw.py"), "fixed", str(m["ct2"]),
                   "--compute-type", FW_RUN[tool][0], "--threads", str(THREADS),
                   "--raw", str(self.raw), "--tokens", str(a.fixed_tokens)]
        wall, rss, out, err, rc = self.run(cmd, extra_env=env)
        check(cmd, rc, err)
        r = json.loads(out.strip().splitlines()[-1])
        self.note_cmd("fixed", tool, cmd)
        vals = fixedfile.metrics(r, wall, self.others[-1])
        for k, v in vals.items():
            self.add(model, tool, k, v)
        log(f"  {model} {tool} fixed-token file: {wall:.1f} s, enc {vals['fixed_enc_s']:.2f} s / window, "
            f"{vals['fixed_tok_ms']:.2f} ms / token, {vals['fixed_rss_mb']:.0f} MB, "
            f"other {self.others[-1]:.2f} cores")

    def transcribe(self, model, tool, which):
        m = self.models[model]
        files = {"short": self.short, "long": self.long, "first": self.first}[which]
        texts = {}
        extra = {}
        if tool.startswith("sotto"):
            prec, env = SOTTO_RUN[tool]
            cmd = [str(self.bins[tool][1]), "transcribe", "-m", str(m["gguf"]), "--precision", prec,
                   "-t", str(THREADS), "--beam-size", "1", "-l", "en", "-f", "json", "-q", *files]
            wall, rss, out, err, rc = self.run(cmd, extra_env=env)
            check(cmd, rc, err)
            for line in out.splitlines():
                if line.strip():
                    o = json.loads(line)
                    texts[Path(o["file"]).name] = o["text"]
        elif tool == "whispercpp":
            with tempfile.TemporaryDirectory() as td:
                cmd = [str(self.wcpp["bin_dir"] / "whisper-cli"), "-m", str(m["ggml"]), "-t", str(THREADS),
                       "-bs", "1", "-l", "en", "-otxt"]
                for i, f in enumerate(files):
                    cmd += ["-of", f"{td}/{i}"]
                cmd += files
                wall, rss, out, err, rc = self.run(cmd)
                check(cmd, rc, err)
                for i, f in enumerate(files):
                    texts[Path(f).name] = " ".join(Path(f"{td}/{i}.txt").read_text().split())
                cmd = [c if not c.startswith(td) else "OUT/" + c[len(td) + 1:] for c in cmd]
                if len(files) > 2:  # -of OUT/0 ... -of OUT/N-1, one per input
                    i = cmd.index("-of")
                    cmd = cmd[:i + 2] + ["...", "-of", f"OUT/{len(files) - 1}"] + cmd[i + 2 * len(files):]
            t = wcpp_timings(err)
            if which == "long" and "encode" in t:
                extra = {"cli_encode_ms": t["encode"]["per_run_ms"], "cli_decode_ms": t["decode"]["per_run_ms"]}
        else:
            cmd = [self.python, str(REPO / "bench" / "fw.py"), "transcribe", str(m["ct2"]),
                   "--compute-type", FW_RUN[tool][0], "--threads", str(THREADS),
                   "--language", "en", *files]
            wall, rss, out, err, rc = self.run(cmd, extra_env=tool_env(tool))
            check(cmd, rc, err)
            for line in out.splitlines():
                o = json.loads(line)
                if "file" in o:
                    texts[Path(o["file"]).name] = o["text"]
        short_cmd = [c if not c.startswith(str(self.audio)) else "AUDIO/" + Path(c).name for c in map(str, cmd)]
        self.note_cmd(which, tool, short_cmd[: len(short_cmd) - len(files)] + ["AUDIO/*.wav" if which == "short"
                                                                              else "AUDIO/" + Path(files[0]).name])
        missing = [Path(f).name for f in files if Path(f).name not in texts]
        if missing:
            raise SystemExit(f"bench: {tool} gave no text for {missing}")
        self.add(model, tool, f"{which}_wall_s", wall)
        self.add(model, tool, f"{which}_rss_mb", rss / 1024)
        for k, v in extra.items():
            self.add(model, tool, k, v)
        from wer import counts

        e = n = 0
        for f in files:
            de, dn = counts(self.refs[Path(f).name], texts[Path(f).name])
            e += de
            n += dn
        self.add(model, tool, f"{which}_wer", e / n if n else 0.0)
        self.results[model][tool].setdefault(f"{which}_texts", texts)
        log(f"  {model} {tool} {which}: {wall:.2f} s, {rss/1024:.0f} MB, WER {e/n:.3f}")

    def go(self):
        a = self.args
        self.load_before = os.getloadavg()
        self.t_start = time.time()
        for r in range(a.runs):
            for model in a.models:
                log(f"run {r + 1}/{a.runs}, {model}")
                for tool in a.micro_tools:
                    self.micro(model, tool)
                for tool in a.micro_tools:
                    self.fixed(model, tool)
                if not a.random:  # random weights: their text means nothing
                    for which in ("first", "short", "long"):
                        for tool in a.file_tools:
                            self.transcribe(model, tool, which)
                self.save()  # what is measured so far survives an interrupted run
        self.elapsed = time.time() - self.t_start
        self.load_after = os.getloadavg()

    def save(self):
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps({"argv": sys.argv, "results": self.results, "commands": self.commands,
                                        "others": self.others,
                                        "whispercpp": {k: str(v) for k, v in (self.wcpp or {}).items()}},
                                       indent=1, default=str))

    # -- report ----------------------------------------------------------------

    def med(self, model, tool, key):
        v = self.results.get(model, {}).get(tool, {}).get(key)
        return statistics.median(v) if v else None

    def columns(self) -> list[tuple[str, str, str]]:
        """The main table's columns: (header, metric, format)."""
        return [("load s", "load_s", "{:.2f}"),
                (f"first result s ({Path(self.first[0]).name}, from process start)", "first_wall_s", "{:.2f}"),
                ("encoder s / 30 s window", "encoder_s", "{:.3f}"), ("encoder GFLOP/s", "gflops", ""),
                ("decode ms / token", "step1_ms", "{:.2f}"), ("ms / step, 5 beams", "step5_ms", "{:.2f}"),
                (f"{len(self.short)} short files: wall s", "short_wall_s", "{:.2f}"),
                ("long-form file: wall s", "long_wall_s", "{:.2f}"),
                ("peak RSS MB (long-form)", "long_rss_mb", "{:.0f}"),
                ("WER short", "short_wer", "{:.1%}"), ("WER long", "long_wer", "{:.1%}")]

    def report(self) -> str:
        a = self.args
        L = []
        now = dt.datetime.now().astimezone()
        L.append(f"## {now:%Y-%m-%d %H:%M %Z}: {', '.join(a.models)}, "
                 f"{a.runs} run{'s' if a.runs > 1 else ''}{' (--quick)' if a.quick else ''}\n")
        la, lb = self.load_before, self.load_after
        L.append(f"Machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {THREADS} threads per tool. "
                 f"Load average before / after: {la[0]:.2f} / {lb[0]:.2f} "
                 f"(1 min){' -- the machine was busy, treat these numbers as rough' if max(la[0], lb[0]) > 0.5 else ''}. "
                 f"Wall time of the whole run: {self.elapsed / 60:.1f} min. Other work during the "
                 f"measurements (cores, from /proc/stat minus the measured process): median "
                 f"{statistics.median(self.others):.2f}, max {max(self.others):.2f}"
                 f"{f' (each waited for at most {a.max_other:g})' if a.max_other is not None else ''}.\n")
        if a.random:
            L.append(f"Random weights (seed {randomweights.SEED}, std 0.02) of each release's dimensions "
                     f"(tools/families.json): times and memory only, no text.\n")
        for model in a.models:
            gf = encoder_gflop(model)
            L.append(f"### {model}\n")
            cols = [(c, k, f) for c, k, f in self.columns() if k == "gflops" or any(
                self.med(model, t, k) is not None for t in MICRO_TOOLS)]
            L.append("| tool | " + " | ".join(c for c, _, _ in cols) + " |")
            L.append("|---|" + "---:|" * len(cols))
            for tool in MICRO_TOOLS:
                if tool not in self.results.get(model, {}):
                    continue
                enc = self.med(model, tool, "encoder_s")
                cells = [(f"{gf / enc:.0f}" if gf and enc else "") if k == "gflops" else
                         (f.format(self.med(model, tool, k)) if self.med(model, tool, k) is not None else "")
                         for _, k, f in cols]
                L.append(f"| {LABEL[tool]} | " + " | ".join(cells) + " |")
            L.append("")
            # Ratios: the peer's median over sotto's (>1: sotto is faster / smaller).
            names = {"first_wall_s": "first result", "encoder_s": "encoder", "step1_ms": "decode / token",
                     "step5_ms": "5-beam step", "short_wall_s": "short files wall",
                     "long_wall_s": "long-form wall", "long_rss_mb": "peak RSS"}
            ratio_keys = [k for k in names if any(self.med(model, t, k) is not None for t in MICRO_TOOLS)]
            rows = []
            for mine in SOTTO_TOOLS:
                if mine not in self.results.get(model, {}):
                    continue
                for peer in PEERS:
                    if peer not in self.results.get(model, {}):
                        continue
                    cells = []
                    for k in ratio_keys:
                        x, y = self.med(model, mine, k), self.med(model, peer, k)
                        cells.append(f"{y / x:.2f}x" if x and y else "")
                    rows.append(f"| {LABEL[mine]} vs {LABEL[peer]} | " + " | ".join(cells) + " |")
            if rows:
                L.append("Ratios, peer / sotto (above 1: sotto is faster or smaller):\n")
                L.append("| | " + " | ".join(names[k] for k in ratio_keys) + " |")
                L.append("|---|" + "---:|" * len(ratio_keys))
                L += rows
                L.append("")
            L += fixedfile.table(lambda t, k: self.med(model, t, k), MICRO_TOOLS, LABEL, SOTTO_TOOLS, PEERS,
                                 a.fixed_seconds, a.fixed_tokens)
            ceil, enc = self.med(model, "sotto-bf16", "ceiling_tflops"), self.med(model, "sotto-bf16", "encoder_s")
            if ceil and enc and gf:
                od, ax = self.med(model, "sotto-bf16", "onednn_tflops"), self.med(model, "sotto-bf16", "kernel_tflops")
                kern = self.sotto_kernel or "window"
                parts = ", ".join(x for x in (f"oneDNN token-major {od:.2f}" if od else "",
                                              f"sotto's {kern} kernel {ax:.2f}" if ax else "") if x)
                L.append(f"bf16 matmul ceiling in this run (encoder-shaped products, best of "
                         f"[3d x d], [4d x d], [d x 4d] by 1500: {parts}): {ceil:.2f} TFLOP/s; the bf16 encoder "
                         f"achieved {gf / enc / 1e3:.2f} TFLOP/s ({gf / enc / 1e3 / ceil:.0%} of it).\n")
            cli = [(t, self.med(model, t, "cli_encode_ms"), self.med(model, t, "cli_decode_ms"))
                   for t in ("whispercpp",) if self.med(model, t, "cli_encode_ms")]
            for t, e, d in cli:
                L.append(f"whisper-cli's own timings on the long-form file (cross-check, includes its first, "
                         f"cold window): encode {e:.0f} ms / window, decode {d:.2f} ms / token.\n")
        L.append("Versions and settings:\n")
        L.append(f"- sotto {git_describe()}, build {self.args.build_dir} ({meson_buildtype(self.args.build_dir)}), "
                 f"{cc_version()}")
        avx2 = self.bins["sotto-avx2"][0].parent.parent
        if avx2 != Path(self.args.build_dir):
            L.append(f"- sotto-avx2: build {avx2} (meson -Dmax_isa=avx2: no AVX-512 clones of the element-wise "
                     f"loops, oneDNN and the hand kernels held to AVX2)")
        if self.wcpp:
            L.append(f"- {self.wcpp['source']}; cmake {self.wcpp['cmake']}; whisper-bench, whisper-cli and "
                     f"bench/whispercpp-file.c")
        L.append(f"- faster-whisper {pkg_version('faster-whisper')}, ctranslate2 {pkg_version('ctranslate2')} "
                 f"(Python {platform.python_version()})")
        L.append(f"- audio: {len(self.short)} files under 30 s ({self.durs['short']:.1f} s in all) and "
                 f"{Path(self.long[0]).name} ({self.durs['long']:.1f} s) from {self.audio}")
        L.append(f"- CPU flags: `{cpu_flags()}`\n")
        L.append("Commands (one process each; AUDIO = the audio directory):\n")
        L.append("```")
        L.append(f"bench/run {' '.join(sys.argv[1:])}")
        for k, v in self.commands.items():
            L.append(f"# {k}\n{v}")
        L.append("```\n")
        return "\n".join(L)


def git_describe() -> str:
    r = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def meson_buildtype(build) -> str:
    r = subprocess.run(["meson", "introspect", str(build), "--buildoptions"], capture_output=True, text=True)
    try:
        opts = {o["name"]: o["value"] for o in json.loads(r.stdout)}
        return f"buildtype {opts.get('buildtype')}, -O{opts.get('optimization')}"
    except (ValueError, KeyError):
        return "buildtype unknown"


def cc_version() -> str:
    r = subprocess.run(["cc", "--version"], capture_output=True, text=True)
    return r.stdout.splitlines()[0] if r.stdout else "cc unknown"


def pkg_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def append_docs(section: str) -> None:
    text = DOCS.read_text() if DOCS.is_file() else ""
    if RUNS_MARK not in text:
        text = text.rstrip("\n") + ("\n\n" if text else "") + RUNS_MARK + "\n"
    head, tail = text.split(RUNS_MARK, 1)
    # Newest run first, right under the marker.
    DOCS.write_text(head + RUNS_MARK + "\n\n" + section.rstrip("\n") + "\n" + tail)


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="tiny.en only, 1 run, 1 inner run, no no-flash-attn whisper.cpp; for checking the harness")
    ap.add_argument("--models", help="comma-separated model names [tiny.en,base]")
    ap.add_argument("--runs", type=int, help="interleaved repetitions; medians over them [3]")
    ap.add_argument("--inner-runs", type=int, help="timed repetitions inside one micro-benchmark process [3]")
    ap.add_argument("--tokens", type=int, default=64, help="decoded tokens for faster-whisper's per-token time")
    ap.add_argument("--tools", help=f"comma-separated subset of {','.join(MICRO_TOOLS)}")
    ap.add_argument("--whispercpp", metavar="DIR",
                    help="build whisper.cpp from this source checkout instead of the PyPI sdist")
    ap.add_argument("--audio", default=str(AUDIO_DIR),
                    help="directory with manifest.tsv and the wav files [SOTTO_AUDIO_DIR, else ../shared/audio]")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"),
                    help="meson build directory, set up as a release build if missing [build-bench: "
                         "its own, so that a debug or sanitizer build/ cannot skew the numbers]")
    ap.add_argument("--avx2-build-dir",
                    help="the build sotto-avx2 runs, set up with -Dmax_isa=avx2 (no AVX-512) if missing "
                         "[the --build-dir with -avx2 after it]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction,
                    help="append the report to docs/benchmarks.md [yes, except with --quick]")
    ap.add_argument("--json", metavar="FILE", help="also write every sample here")
    ap.add_argument("--random", action="store_true",
                    help="the models are releases of tools/families.json with random weights (made and cached "
                         "by bench/randomweights.py): micro-benchmarks and the fixed-token file only "
                         "[models large-v3-turbo,distil-large-v3; tools " + ",".join(RANDOM_TOOLS) + "]")
    ap.add_argument("--fixed-seconds", type=float, default=60.0,
                    help="length of the fixed-token file, from the long-form file's start [60]")
    ap.add_argument("--fixed-tokens", type=int, default=100,
                    help="tokens decoded per 30 s window of the fixed-token file [100]")
    ap.add_argument("--max-other", type=float, metavar="CORES",
                    help="before each measurement wait (10 s samples, at most --wait) until the rest of the "
                         "machine uses at most this many cores [no waiting]")
    ap.add_argument("--wait", type=float, default=600, help="longest wait for --max-other, seconds [600]")
    a = ap.parse_args()
    default_models = "large-v3-turbo,distil-large-v3" if a.random else "tiny.en" if a.quick else "tiny.en,base"
    a.models = (a.models or default_models).split(",")
    a.runs = a.runs or (1 if a.quick else 3)
    a.inner_runs = a.inner_runs or (1 if a.quick else 3)
    default_tools = RANDOM_TOOLS if a.random else MICRO_TOOLS
    tools = a.tools.split(",") if a.tools else [t for t in default_tools
                                                if not (a.quick and t == "whispercpp-nofa")]
    bad = [t for t in tools if t not in MICRO_TOOLS]
    if bad:
        ap.error(f"unknown tools {bad}")
    absent = [t for t in tools if not runs_here(t)]
    if absent and a.tools:
        ap.error(f"{','.join(absent)}: this CPU runs {cpu.describe()}; sotto refuses "
                 f"{' and '.join(SOTTO_RUN[t][0] for t in absent)} here")
    if absent:
        # the CPU's own precision in their place (--random lists no fp32)
        tools = [t for t in tools if t not in absent]
        if "sotto-fp32" not in tools:
            tools.insert(0, "sotto-fp32")
        log(f"this CPU runs {cpu.describe()}: not {', '.join(absent)}")
    a.micro_tools = [t for t in MICRO_TOOLS if t in tools]
    a.file_tools = [t for t in FILE_TOOLS if t in tools]
    if a.docs is None:
        a.docs = not a.quick
    python = sys.executable
    try:
        import faster_whisper  # noqa: F401
        import jiwer  # noqa: F401
        import whisper_normalizer  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"bench: {e}; install the test requirements: {python} -m pip install -r "
                         f"requirements-test.txt")
    b = Bench(a, python)
    b.out = Path(a.json) if a.json else b.cache / "results" / f"{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    b.setup()
    b.go()
    section = b.report()
    print(section)
    b.save()
    log(f"samples in {b.out}")
    if a.docs:
        append_docs(section)
        log(f"appended to {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
