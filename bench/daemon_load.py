"""sottod under load: `bench/daemon --only streams,idle,rss` (the default run).

streams: the largest number of concurrent live streams held with partial
   latency p95 within --p95-limit; idle: the CPU of an idle microphone;
   rss: resident memory over one long stream. bench/daemon.py's docstring
   says how each is measured.

Like bench/daemon_service.py, the module takes the helpers of
bench/daemon.py (`h`) rather than importing it, since that file runs as
__main__; `b` is its Bench (options, models, the speech reel, results).
"""

from __future__ import annotations

import time
from pathlib import Path


# --- 1. concurrent live streams --------------------------------------------------

def streams(b, h, model: str) -> None:
    a = b.a
    h.log(f"{model}: live streams, {a.stream_seconds:.0f} s of speech each")
    wavs = []
    for i in range(a.max_streams):
        wavs.append(h.write_wav(b.tmp / f"stream-{i}.wav",
                                h.looped(b.reel, i * 37.0, a.stream_seconds)))
    d = b.daemon(model, f"streams-{model}")
    rows = b.results["streams"][model] = []
    try:
        n = 1
        while n <= a.max_streams:
            row = None
            for attempt in range(2):
                other0, waited = h.wait_quiet(a.max_other, a.wait, d.proc.pid)
                row = stream_run(b, h, d, wavs[:n])
                row.update(other_before=other0, waited_s=waited, attempt=attempt + 1)
                h.log(f"{model} N={n}: first partial {h.f2(row['first_partial'])} s, "
                      f"partial p50/p95 {h.f2(row['partial_p50'])}/{h.f2(row['partial_p95'])} s, "
                      f"final p50/p95 {h.f2(row['final_p50'])}/{h.f2(row['final_p95'])} s, max lag "
                      f"{h.f2(row['max_lag'])} s, sottod {row['sottod_pct']:.0f}%, other "
                      f"{row['other']:.2f} cores: {'held' if row['held'] else 'NOT held'}")
                # A run that held in spite of other work stands (the
                # latencies are then pessimistic); one that failed is
                # only conclusive on a quiet machine.
                if row["held"] or row["other"] <= a.max_other or attempt:
                    break
                h.log(f"other load {row['other']:.2f} cores during the run: running N={n} again")
                row["superseded"] = True
                rows.append(row)
            rows.append(row)
            if not row["held"]:
                break
            n += 1
    finally:
        rss = h.proc_mem_kb(d.proc.pid)["VmRSS"] / 1024
        d.stop()
    b.results["streams"][model + ":rss_after_mb"] = rss

def stream_run(b, h, d, wavs: list[Path]) -> dict:
    a = b.a
    n = len(wavs)
    poll = h.StatusPoller(d.socket)
    w = h.Window(d.proc.pid)
    poll.start()
    streams = []
    for i, wav in enumerate(wavs):
        if i and a.stagger:
            time.sleep(a.step_ms / 1000.0 / n)
        streams.append(h.conftest.Stream(d.socket, wav))
    for s in streams:
        s.wait(timeout=a.stream_seconds * 3 + 180)
    w.end()
    samples = poll.stop()
    part, fin, firsts, drains, errs = [], [], [], [], []
    for s, wav in zip(streams, wavs):
        ok, why = h.stream_ok(s)
        if not ok:
            errs.append(why)
            continue
        p, f = h.latencies(s)
        part += p
        fin += f
        firsts += first_partial(s, h, wav)
        t_open = next(t for t, e in s.lines if e["type"] == "opened")
        t_end = next(t for t, e in s.lines if e["type"] == "end")
        drains.append(t_end - t_open - a.stream_seconds)
    lags = [e.get("lag_s", 0.0) for _, e in samples]
    rtfs = [e.get("rtf", 0.0) for _, e in samples if e.get("sessions")]
    row = dict(streams=n, partials=len(part), finals=len(fin),
               partial_p50=h.pct(part, 50), partial_p95=h.pct(part, 95),
               final_p50=h.pct(fin, 50), final_p95=h.pct(fin, 95),
               first_partial=h.pct(firsts, 50) if firsts else float("nan"),
               max_lag=max(lags) if lags else float("nan"),
               rtf=h.pct(rtfs, 50) if rtfs else float("nan"),
               drain_max=max(drains) if drains else float("nan"),
               sottod_pct=w.sottod_pct, other=w.other, load0=w.load0, load1=w.load1,
               wall=w.wall, errors=errs)
    row["held"] = (not errs and bool(part) and row["partial_p95"] <= a.p95_limit
                   and row["max_lag"] <= a.max_lag)
    return row

ONSET_DBFS = -40.0     # first sound: a 10 ms block this loud (speech; the reel has no noise floor)


def onset(h, wav: Path) -> float:
    """Seconds into wav of its first 10 ms block at ONSET_DBFS or louder."""
    import array
    pcm = array.array("h", h.read_pcm(wav))
    block = h.RATE // 100
    floor = (32768.0 * 10 ** (ONSET_DBFS / 20)) ** 2
    for i in range(0, len(pcm) - block + 1, block):
        if sum(x * x for x in pcm[i:i + block]) / block >= floor:
            return i / h.RATE
    return float("nan")


def first_partial(s, h, wav: Path) -> list[float]:
    """Seconds from the first sound of the stream (onset) to its first
    partial with text: arrival - arrival of `opened` - onset. Empty for a
    stream without one. (A partial's `start` is Whisper's, often 0.0
    before the speech begins, so it is not used.)"""
    t0 = next(t for t, e in s.lines if e["type"] == "opened")
    for t, e in s.lines:
        if e["type"] == "partial" and e["text"].strip():
            return [t - t0 - onset(h, wav)]
    return []

# --- 2. idle microphone ---------------------------------------------------------

def idle(b, h, model: str) -> None:
    a = b.a
    h.log(f"{model}: idle microphone, {a.idle_seconds:.0f} s per measurement")
    if not b.plugin.is_file():
        raise SystemExit(f"bench/daemon: {b.plugin} missing (meson compile -C {a.build_dir})")
    rows = b.results["idle"][model] = []

    # The microphone off: the floor of an idle sottod.
    d = b.daemon(model, f"idle-off-{model}")
    try:
        time.sleep(3)
        other0, _ = h.wait_quiet(a.max_other, a.wait, d.proc.pid)
        w = h.Window(d.proc.pid)
        time.sleep(a.idle_seconds)
        w.end()
        rows.append(dict(case="microphone off, no client", pct=w.sottod_pct, wall=w.wall,
                         other=w.other, load0=w.load0, events="", rss_mb=h.proc_mem_kb(d.proc.pid)["VmRSS"] / 1024))
    finally:
        d.stop()

    # The microphone on, a quiet floor, no listener, then one listener;
    # once per [engine] vad of --idle-vad.
    total = 30 + 2 * a.idle_seconds + 2 * a.wait + 60
    raw = b.tmp / "floor.raw"
    raw.write_bytes(h.noise_floor(total, a.idle_dbfs))
    for vad in a.idle_vad:
        idle_mic(b, h, model, raw, vad, rows)

def idle_mic(b, h, model: str, raw: Path, vad: str, rows: list) -> None:
    a = b.a
    rc = b.tmp / "asoundrc"
    origin = b.tmp / f"origin-{model}"
    origin.unlink(missing_ok=True)
    rc.write_text(f'pcm_type.sottofake {{\n\tlib "{b.plugin.resolve()}"\n}}\n'
                  f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n\torigin "{origin}"\n}}\n')
    env = {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{rc}"}
    d = b.daemon(model, f"idle-mic-{model}-vad-{vad}", env=env,
                 conf=f"[engine]\nvad = {vad}\n"
                 "[mic]\nenabled = yes\ndevice = sottomic\nrate = 16000\nchannels = 1\n")
    try:
        st = h.conftest.RawClient(d.socket)
        st.hello()
        deadline = time.monotonic() + 30
        mic = None
        while time.monotonic() < deadline:
            st.send(h.conftest.frame(h.conftest.MSG_STATUS))
            mic = st.event()["mic"]
            if mic == "capturing":
                break
            time.sleep(0.5)
        st.close()
        if mic != "capturing":
            raise SystemExit(f"bench/daemon: the microphone is {mic!r}, not capturing:\n{d.log()}")
        time.sleep(5)
        other0, _ = h.wait_quiet(a.max_other, a.wait, d.proc.pid)
        w = h.Window(d.proc.pid)
        time.sleep(a.idle_seconds)
        w.end()
        rows.append(dict(case=f"microphone on (vad = {vad}), no listener", pct=w.sottod_pct, wall=w.wall,
                         other=w.other, load0=w.load0, events="",
                         rss_mb=h.proc_mem_kb(d.proc.pid)["VmRSS"] / 1024))
        listener = h.Listen(d.socket)
        time.sleep(3)
        w = h.Window(d.proc.pid)
        time.sleep(a.idle_seconds)
        w.end()
        rss = h.proc_mem_kb(d.proc.pid)["VmRSS"] / 1024
    finally:
        d.stop()
    listener.wait(60)
    kinds: dict[str, int] = {}
    for _, e in listener.lines:
        kinds[e["type"]] = kinds.get(e["type"], 0) + 1
    text = listener.text().strip()
    rows.append(dict(case=f"microphone on (vad = {vad}), 1 listener", pct=w.sottod_pct, wall=w.wall,
                     other=w.other,
                     load0=w.load0, rss_mb=rss,
                     events=", ".join(f"{v} {k}" for k, v in kinds.items()) + (f"; text {text[:40]!r}"
                                                                               if text else "; no text")))

# --- 3. resident memory over a long stream --------------------------------------

def rss(b, h) -> None:
    a = b.a
    model = a.rss_model
    mode = "fast" if a.fast else "live"
    h.log(f"{model}: resident memory over {a.minutes:g} min of speech ({mode})")
    wav = h.write_wav(b.tmp / "long.wav", h.looped(b.reel, 0.0, a.minutes * 60))
    d = b.daemon(model, f"rss-{model}")
    try:
        time.sleep(2)
        other0, waited = h.wait_quiet(a.max_other, a.wait, d.proc.pid)
        before = h.proc_mem_kb(d.proc.pid)
        w = h.Window(d.proc.pid)
        s = h.conftest.Stream(d.socket, *(["--fast"] if a.fast else []), wav)
        t0 = time.monotonic()
        samples = []

        def sample():
            m = h.proc_mem_kb(d.proc.pid)
            ends = [e["end"] if "end" in e else e["segments"][-1]["end"]
                    for _, e in s.lines[-50:] if e.get("type") in ("partial", "final")
                    and (e.get("type") == "final" or e.get("text", "").strip())]
            samples.append(dict(wall_min=(time.monotonic() - t0) / 60,
                                audio_min=(max(ends) / 60 if ends else 0.0),
                                cpu_s=h.proc_cpu_s(d.proc.pid),
                                **{k: v / 1024 for k, v in m.items() if k != "Threads"},
                                threads=m.get("Threads")))

        sample()
        while s.proc.poll() is None:
            nxt = t0 + len(samples) * a.rss_interval
            while s.proc.poll() is None and time.monotonic() < nxt:
                time.sleep(min(1.0, max(0.0, nxt - time.monotonic())))
            if s.proc.poll() is None:
                sample()
        s.wait(120)
        w.end()
        after = h.proc_mem_kb(d.proc.pid)
        ok, why = h.stream_ok(s)
    finally:
        d.stop()
    if not ok:
        raise SystemExit(f"bench/daemon: the long stream failed: {why}")
    if not a.fast:
        for x in samples:
            x["audio_min"] = x["wall_min"]  # paced as live: stream time is wall time
    words = len(s.text().split())
    # Slopes: after the first --warmup minutes of audio (the first steps
    # allocate the engine's buffers), and over the second half.
    warm = [x for x in samples if x["audio_min"] >= a.warmup] or samples[-1:]
    pts = [(x["audio_min"], x["VmRSS"]) for x in warm]
    half = [p for p in pts if p[0] >= samples[-1]["audio_min"] / 2]
    b.results["rss"] = dict(
        model=model, mode=mode, minutes=a.minutes, interval=a.rss_interval, samples=samples,
        before_mb=before["VmRSS"] / 1024, after_mb=after["VmRSS"] / 1024, hwm_mb=after["VmHWM"] / 1024,
        start_mb=samples[0]["VmRSS"], end_mb=samples[-1]["VmRSS"],
        max_mb=max(x["VmRSS"] for x in samples),
        anon_start_mb=samples[0]["RssAnon"], anon_end_mb=samples[-1]["RssAnon"],
        anon_max_mb=max(x["RssAnon"] for x in samples),
        slope=h.slope_per_10min(pts), slope_half=h.slope_per_10min(half),
        slope_anon=h.slope_per_10min([(x["audio_min"], x["RssAnon"]) for x in warm]),
        warm_mb=warm[0]["VmRSS"], warm_anon_mb=warm[0]["RssAnon"], warm_at=warm[0]["audio_min"],
        warmup=a.warmup,
        wall_min=w.wall / 60, sottod_pct=w.sottod_pct, other=w.other, load0=w.load0, load1=w.load1,
        finals=len(s.events("final")), words=words, other_before=other0, waited_s=waited)


# --- the report ----------------------------------------------------------------------

def load_report(b, h) -> list[str]:
    """The streams, idle and rss parts of the report (what ran of them)."""
    a = b.a
    R = b.results
    f2 = h.f2
    L: list[str] = []
    if "streams" in a.only:
        L.append(f"**Live streams.** Each stream: `sotto stream --format jsonl` of {a.stream_seconds:g} s "
                 f"of the speech files looped (each stream from another point of the "
                 f"{b.reel_s:.0f} s reel), paced as live"
                 f"{', started step/N apart' if a.stagger else ', all started at once'}. Latency = "
                 f"arrival - arrival of `opened` - the event's `end` (tests/daemon). Held: every stream "
                 f"complete, partial p95 <= {a.p95_limit:g} s and status `lag_s` <= {a.max_lag:g} s "
                 f"throughout.")
        L.append("")
        L.append(f"First partial = its arrival - arrival of `opened` - the first sound of the "
                 f"stream (its first 10 ms at {ONSET_DBFS:g} dBFS or louder), the median over the streams.")
        L.append("")
        L.append("| model | streams | first partial s | partials | partial p50 s | partial p95 s | finals | "
                 "final p50 s | final p95 s | max lag s | end after audio s | sottod CPU % | other cores | held |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        summary = []
        for model in a.models:
            rows = R["streams"].get(model) or []
            for r in rows:
                held = "yes" if r["held"] else "**no**" + (f" ({r['errors'][0]})" if r["errors"] else "")
                if r.get("superseded"):
                    held += ", disturbed: run again"
                elif r["attempt"] > 1:
                    held += " (2nd try)"
                L.append(f"| {model} | {r['streams']} | {f2(r['first_partial'])} | "
                         f"{r['partials']} | {f2(r['partial_p50'])} | "
                         f"{f2(r['partial_p95'])} | {r['finals']} | {f2(r['final_p50'])} | "
                         f"{f2(r['final_p95'])} | {f2(r['max_lag'])} | {f2(r['drain_max'])} | "
                         f"{r['sottod_pct']:.0f} | {r['other']:.2f} | {held} |")
            rows = [r for r in rows if not r.get("superseded")]
            held = [r["streams"] for r in rows if r["held"]]
            best = max(held) if held else 0
            cap = "" if rows and not rows[-1]["held"] else f" (the sweep stopped at --max-streams {a.max_streams})"
            summary.append(f"{model} **{best}**{cap}")
        L.append("")
        L.append(f"Sustained with partial p95 <= {a.p95_limit:g} s: {', '.join(summary)}.")
        L.append("")
    if "idle" in a.only:
        L.append(f"**Idle microphone.** sottod with `[mic] enabled = yes` on sottofake "
                 f"(tests/daemon/pcm-sottofake.c: a capture device paced by the clock) playing white "
                 f"noise at {a.idle_dbfs:g} dBFS RMS (the energy gate is at -50); CPU time of sottod "
                 f"(utime + stime, all threads, /proc/PID/stat) over {a.idle_seconds:g} s.")
        L.append("")
        L.append("| model | case | sottod CPU, % of one core | CPU s per minute | VmRSS MB | "
                 "what the listener got | other cores |")
        L.append("|---|---|---:|---:|---:|---|---:|")
        for model in a.idle_models:
            for r in R["idle"].get(model) or []:
                L.append(f"| {model} | {r['case']} | {r['pct']:.2f} | {r['pct'] * 0.6:.3f} | "
                         f"{r['rss_mb']:.0f} | {r['events']} | {r['other']:.2f} |")
        L.append("")
    x = R.get("rss")
    if "rss" in a.only and x:
        how = ("as fast as sottod takes it (`--fast`)" if x["mode"] == "fast" else "paced as live")
        L.append(f"**Resident memory.** {x['model']}: one `sotto stream` of {x['minutes']:g} min of the "
                 f"speech files looped, {how}, in {x['wall_min']:.1f} min of wall time ({x['finals']} finals, "
                 f"{x['words']} words; sottod used {x['sottod_pct']:.0f}% of a core, other work "
                 f"{x['other']:.2f} cores). VmRSS and RssAnon of sottod every {x['interval']:g} s; slopes "
                 f"are least squares over the samples against minutes of audio streamed.")
        L.append("")
        L.append("| | VmRSS MB | RssAnon MB |")
        L.append("|---|---:|---:|")
        L.append(f"| idle, model loaded, before the stream | {x['before_mb']:.1f} | |")
        L.append(f"| start of the stream | {x['start_mb']:.1f} | {x['anon_start_mb']:.1f} |")
        L.append(f"| after {x['warm_at']:.1f} min of audio (first sample past --warmup {x['warmup']:g}) | "
                 f"{x['warm_mb']:.1f} | {x['warm_anon_mb']:.1f} |")
        L.append(f"| end of the stream | {x['end_mb']:.1f} | {x['anon_end_mb']:.1f} |")
        L.append(f"| max | {x['max_mb']:.1f} | {x['anon_max_mb']:.1f} |")
        L.append(f"| after the stream ended | {x['after_mb']:.1f} | |")
        L.append(f"| slope, MB per 10 min of audio, from {x['warm_at']:.1f} min on | {f2(x['slope'])} | "
                 f"{f2(x['slope_anon'])} |")
        L.append(f"| slope, MB per 10 min of audio, second half | {f2(x['slope_half'])} | |")
        L.append("")
        step = max(1, round(len(x["samples"]) / 12))
        series = x["samples"][::step]
        if series[-1] is not x["samples"][-1]:
            series.append(x["samples"][-1])
        L.append(("Samples" if step == 1 else f"One sample in {step}") + ": " + ", ".join(
            f"{s['audio_min']:.1f} min {s['VmRSS']:.1f}" for s in series) + " (audio minutes, VmRSS MB).")
        L.append("")
    return L
