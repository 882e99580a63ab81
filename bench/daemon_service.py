"""sottod as a service that runs for months: `bench/daemon --only bursts,soak`.

bursts: sottod (tiny.en, max_sessions 64) gets one short session, then
   --bursts bursts of --burst-sessions sessions at once (each a short speech
   file sent as fast as sottod takes it, then END; tests/daemon/bursts.py).
   After each, once every session has ended, sottod's least VmRSS over
   --burst-idle seconds: memory must return to within 10% of the idle
   VmRSS after the first session (issue 13 item 1).

soak: sottod (tiny.en) for --soak-minutes with --soak-streams live streams
   (`sotto stream -f jsonl -` fed real speech on standard input, paced as
   live, the speech files looped; each stream a run of sessions of about
   --soak-session-minutes, so sessions also open and close) and
   --soak-pollers status pollers (a STATUS every second each, on their own
   connections). Reports VmRSS over time and its slope, finals lost,
   error events, and partial latency p95 per stretch of time.

   What "lost" means: every session must end with `end`, its final ids
   must run 0, 1, 2... with no gap, and its finals must cover the audio
   sent to its end: at least half of the reference words of the last
   file the session sent must be among its last final words (a final
   that never came, or audio dropped at the end, misses them). The word
   error rate of each session's finals against the reference transcripts
   of the files it sent is reported too (deletions would show audio
   dropped inside a session). With more live streams than the
   compute thread steps at 1 s (tiny.en: 6 on 2 cores), the others are
   stepped in larger steps (up to 8 s): their partials come later and
   fewer, but nothing is lost.

The module takes the helpers of bench/daemon.py (`h`) rather than
importing it, since that file runs as __main__.
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from pathlib import Path


# --- bursts -------------------------------------------------------------------------

def bursts(b, h) -> None:
    import bursts as lib  # tests/daemon/bursts.py

    a = b.a
    h.log(f"tiny.en: {a.bursts} bursts of {a.burst_sessions} short sessions")
    pcms = lib.short_pcm(Path(a.audio))
    conf = (f"max_sessions = {max(64, a.burst_sessions)}\n"
            f"max_connections_per_uid = {max(128, 2 * a.burst_sessions)}\n")
    d = b.daemon("tiny.en", "bursts", conf=conf)
    rows = []
    try:
        pid = d.proc.pid
        loaded = lib.rss_mb(pid)
        bad, wall = lib.burst(d.socket, pcms, 1)
        first = lib.idle_rss(pid, timeout=a.burst_idle)
        rows.append(dict(burst=0, sessions=1, wall=wall, failed=bad, idle=first,
                         anon=lib.rss_mb(pid)["RssAnon"]))
        for i in range(a.bursts):
            w = h.Window(pid)
            bad, wall = lib.burst(d.socket, pcms, a.burst_sessions)
            w.end()
            hwm = h.proc_mem_kb(pid)["VmHWM"] / 1024
            idle = lib.idle_rss(pid, timeout=a.burst_idle)
            rows.append(dict(burst=i + 1, sessions=a.burst_sessions, wall=wall, failed=bad,
                             idle=idle, anon=lib.rss_mb(pid)["RssAnon"], hwm=hwm,
                             other=w.other, sottod_pct=w.sottod_pct))
            h.log(f"burst {i + 1}: {a.burst_sessions} sessions in {wall:.1f} s, "
                  f"{len(bad)} failed, idle VmRSS {idle:.0f} MB ({idle / first:.2f}x)")
    finally:
        d.stop()
    b.results["bursts"] = dict(loaded=loaded["VmRSS"], rows=rows, first=first)


def bursts_report(b, h) -> list[str]:
    x = b.results.get("bursts")
    if not x:
        return []
    a = b.a
    first = x["first"]
    worst = max(r["idle"] for r in x["rows"][1:]) if len(x["rows"]) > 1 else first
    L = [f"**Bursts of sessions.** tiny.en, `max_sessions = {max(64, a.burst_sessions)}`: one "
         f"session, then {a.bursts} bursts of {a.burst_sessions} sessions at once, each a short "
         f"speech file (2-4 s) sent as fast as sottod takes it, then END "
         f"(tests/daemon/bursts.py). Idle VmRSS: the least over {a.burst_idle:g} s once every "
         f"session of the burst has ended. Idle with the model loaded, before any session: "
         f"{x['loaded']:.0f} MB.", "",
         "| after | sessions | wall s | failed | idle VmRSS MB | idle RssAnon MB | x after 1st | "
         "VmHWM MB | other cores |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in x["rows"]:
        what = "the first session" if r["burst"] == 0 else f"burst {r['burst']}"
        L.append(f"| {what} | {r['sessions']} | {r['wall']:.1f} | {len(r['failed'])} | "
                 f"{r['idle']:.0f} | {r['anon']:.0f} | {r['idle'] / first:.2f} | "
                 f"{h.f2(r.get('hwm'), 0)} | {h.f2(r.get('other'))} |")
    L += ["", f"Largest idle VmRSS after a burst: {worst / first:.2f}x the idle VmRSS after the "
          f"first session ({'within' if worst <= 1.10 * first else '**not within**'} 10%).", ""]
    return L


# --- soak ---------------------------------------------------------------------------

class Reel:
    """The speech files in manifest order, each with 0.5 s of silence after."""

    def __init__(self, audio: Path, h):
        import wer

        refs = wer.load_manifest(audio)
        self.files = [(n, h.read_pcm(audio / n) + bytes(h.RATE // 2 * 2), refs[n]) for n in refs]


class SoakSession:
    """One `sotto stream -` session fed from the reel, paced as live."""

    def __init__(self, sock: str, sotto: Path, t0: float):
        self.cmd = [str(sotto), "stream", "-s", sock, "-f", "jsonl", "-"]
        self.t0 = t0
        self.lines: list[tuple[float, dict]] = []
        self.files: list[tuple[str, float, float, str]] = []  # name, start, seconds, ref
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.sent = 0  # bytes

    def _read(self) -> None:
        import json

        for line in self.proc.stdout:
            t = time.monotonic()
            try:
                self.lines.append((t, json.loads(line)))
            except ValueError:
                self.lines.append((t, {"type": "<not json>", "line": line[:200]}))

    def send_file(self, name: str, pcm: bytes, ref: str, rate: int) -> bool:
        """Write pcm in 100 ms pieces at the pace of live audio (writes block
        while sottod holds the stream back). False if the client is gone."""
        self.files.append((name, self.sent / 2 / rate, len(pcm) / 2 / rate, ref))
        chunk = rate // 10 * 2
        for i in range(0, len(pcm), chunk):
            due = self.t_audio0 + (self.sent / 2 / rate)
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                self.proc.stdin.write(pcm[i:i + chunk])
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return False
            self.sent += len(pcm[i:i + chunk])
        return True

    def finish(self, timeout: float) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.rc = self.proc.wait()
        self.reader.join(10)
        self.stderr = self.proc.stderr.read().decode(errors="replace")

    def events(self, kind: str) -> list[dict]:
        return [e for _, e in self.lines if e.get("type") == kind]


def soak_stream(i: int, b, h, reel: Reel, t_end: float, out: list) -> None:
    """Stream i: sessions back to back until t_end, from its own point of the reel."""
    a = b.a
    rng = random.Random(i)
    at = (i * 5) % len(reel.files)
    def fits(i: int) -> bool:
        return time.monotonic() + len(reel.files[i][1]) / 2 / h.RATE <= t_end

    while True:
        # the next file that ends before t_end (the long-form one may not)
        for _ in range(len(reel.files)):
            if fits(at):
                break
            at = (at + 1) % len(reel.files)
        if not fits(at):
            return
        s = SoakSession(b.sock, h.conftest.SOTTO, b.t0)
        s.t_audio0 = time.monotonic()
        target = a.soak_session_minutes * 60 * rng.uniform(0.6, 1.4)
        ok = True
        while ok and fits(at):
            name, pcm, ref = reel.files[at]
            at = (at + 1) % len(reel.files)
            ok = s.send_file(name, pcm, ref, h.RATE)
            if time.monotonic() - s.t_audio0 >= target:
                break
        s.finish(timeout=180)
        out.append(s)


def soak(b, h) -> None:
    a = b.a
    minutes = a.soak_minutes
    h.log(f"tiny.en: soak of {minutes:g} min, {a.soak_streams} live streams, "
          f"{a.soak_pollers} status pollers")
    reel = Reel(Path(a.audio), h)
    conf = (f"max_sessions = {a.soak_streams + 8}\n"
            f"max_connections_per_uid = {2 * (a.soak_streams + a.soak_pollers)}\n")
    d = b.daemon("tiny.en", "soak", conf=conf)
    b.sock = d.socket
    sessions: list[SoakSession] = []
    samples = []
    try:
        import bursts as lib  # tests/daemon/bursts.py

        pid = d.proc.pid
        bad, _ = lib.burst(d.socket, lib.short_pcm(Path(a.audio)), 1)
        b.idle_before = lib.idle_rss(pid, timeout=3)
        other0, waited = h.wait_quiet(a.max_other, a.wait, pid)
        pollers = [h.StatusPoller(d.socket) for _ in range(a.soak_pollers)]
        for p in pollers:
            p.start()
        b.t0 = time.monotonic()
        t_end = b.t0 + minutes * 60
        w = h.Window(pid)
        threads = []
        for i in range(a.soak_streams):
            t = threading.Thread(target=soak_stream, args=(i, b, h, reel, t_end, sessions),
                                 daemon=True)
            t.start()
            threads.append(t)
            time.sleep(a.step_ms / 1000.0 / a.soak_streams)
        while any(t.is_alive() for t in threads):
            m = h.proc_mem_kb(pid)
            last = pollers[0].samples[-1][1] if pollers and pollers[0].samples else {}
            samples.append(dict(min=(time.monotonic() - b.t0) / 60, VmRSS=m["VmRSS"] / 1024,
                                RssAnon=m["RssAnon"] / 1024, sessions=last.get("sessions", 0)))
            for t in threads:
                t.join(timeout=a.rss_interval / len(threads))
        w.end()
        polls = [p.stop() for p in pollers]
        alive = d.alive()
        b.idle_after = lib.idle_rss(pid, timeout=5) if alive else float("nan")
    finally:
        d.stop()
    b.results["soak"] = soak_analyse(b, h, sessions, samples, polls, w, alive,
                                     other0, waited)


def slope_10(rows: list[tuple]) -> float:
    """Least squares slope of VmRSS over minutes, per 10 minutes."""
    mt = sum(r[2] for r in rows) / len(rows)
    my = sum(r[3] for r in rows) / len(rows)
    sxx = sum((r[2] - mt) ** 2 for r in rows)
    return 10 * sum((r[2] - mt) * (r[3] - my) for r in rows) / sxx if sxx else float("nan")


def fit_rss(samples: list[dict]) -> tuple[float, float]:
    """Least squares VmRSS = a + b * sessions + c * minutes: (10 c, b), the
    growth per 10 minutes with the sessions open at each sample accounted
    for (each holds its engine state), and the MB per open session."""
    rows = [(1.0, float(x["sessions"]), x["min"], x["VmRSS"]) for x in samples]
    if len(rows) < 4:
        return float("nan"), float("nan")
    if len({r[1] for r in rows}) < 2:  # the same sessions throughout: time alone
        return slope_10(rows), float("nan")
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * r[3] for r in rows) for i in range(3)]
    for i in range(3):  # Gauss-Jordan on the 3x3 normal equations
        piv = max(range(i, 3), key=lambda k: abs(m[k][i]))
        if abs(m[piv][i]) < 1e-12:
            return float("nan"), float("nan")
        m[i], m[piv], v[i], v[piv] = m[piv], m[i], v[piv], v[i]
        for k in range(3):
            if k != i:
                f = m[k][i] / m[i][i]
                m[k] = [a - f * c for a, c in zip(m[k], m[i])]
                v[k] -= f * v[i]
    return 10 * v[2] / m[2][2], v[1] / m[1][1]


def session_facts(s: SoakSession, h) -> dict:
    """Loss, errors and words of one soak session."""
    import jiwer
    import wer

    t_open = next((t for t, e in s.lines if e.get("type") == "opened"), None)
    ids = [e["id"] for e in s.events("final")]
    segs = [g for e in s.events("final") for g in e["segments"]]
    speech_end = s.files[-1][1] + s.files[-1][2] - 0.5 if s.files else 0.0
    last_end = max((g["end"] for g in segs), default=0.0)
    ref = wer.normalise(" ".join(f[3] for f in s.files))
    hyp = wer.normalise("".join(g["text"] for g in segs))
    o = jiwer.process_words(ref, hyp) if ref and hyp else None
    # the last file's words among the last words of the finals
    last = wer.normalise(s.files[-1][3]).split() if s.files else []
    tail_hyp = " ".join(hyp.split()[-(len(last) + 3):])
    recall = (jiwer.process_words(" ".join(last), tail_hyp).hits / len(last)
              if last and tail_hyp else float(not last))
    partials = []
    if t_open is not None:
        partials = [(t - s.t0, t - t_open - e["end"]) for t, e in s.lines
                    if e.get("type") == "partial" and e["text"].strip()]
    return dict(rc=s.rc, ended=bool(s.events("end")), errors=s.events("error"),
                gaps=(ids != list(range(len(ids)))), finals=len(ids),
                audio_s=s.sent / 2 / h.RATE, uncovered=max(0.0, speech_end - last_end),
                last_file=s.files[-1][0] if s.files else "", last_recall=recall,
                last_start=s.files[-1][1] if s.files else 0.0,
                tail=[(g["start"], g["end"], g["text"]) for g in segs[-4:]],
                lost_tail=recall < 0.5, words=len(ref.split()),
                errs=(o.substitutions + o.deletions + o.insertions) if o else len(ref.split()),
                deletions=o.deletions if o else len(ref.split()), partials=partials,
                stderr=s.stderr.strip()[-200:] if s.rc else "")


def soak_analyse(b, h, sessions, samples, polls, w, alive, other0, waited) -> dict:
    a = b.a
    facts = [session_facts(s, h) for s in sessions]
    slot = a.soak_slot
    n_slots = max(1, int(a.soak_minutes / slot + 0.999))
    lat = [[] for _ in range(n_slots)]
    for f in facts:
        for t, x in f["partials"]:
            lat[min(n_slots - 1, int(t / 60 / slot))].append(x)
    lag = [[] for _ in range(n_slots)]
    for p in polls:
        for t, e in p:
            if e.get("type") == "status":
                lag[min(n_slots - 1, int((t - b.t0) / 60 / slot))].append(e.get("lag_s", 0.0))
    # from the warm-up on, up to the end (not the last sessions' wind-down)
    warm = [x for x in samples if min(a.warmup, a.soak_minutes / 4) <= x["min"] <= a.soak_minutes]
    poll_errors = sum(1 for p in polls for _, e in p if e.get("type") != "status")
    lags = [e.get("lag_s", 0.0) for p in polls for _, e in p if e.get("type") == "status"]
    return dict(
        minutes=a.soak_minutes, wall_min=w.wall / 60, sottod_pct=w.sottod_pct, other=w.other,
        load0=w.load0, load1=w.load1, other_before=other0, waited_s=waited, alive=alive,
        sessions=len(facts), audio_h=sum(f["audio_s"] for f in facts) / 3600,
        finals=sum(f["finals"] for f in facts),
        not_ended=sum(1 for f in facts if not f["ended"]),
        gaps=sum(1 for f in facts if f["gaps"]),
        lost_tail=sum(1 for f in facts if f["lost_tail"]),
        max_uncovered=max((f["uncovered"] for f in facts), default=float("nan")),
        min_recall=min((f["last_recall"] for f in facts), default=float("nan")),
        idle_before=b.idle_before, idle_after=b.idle_after,
        bad_exit=[f["stderr"] or f"exit {f['rc']}" for f in facts if f["rc"] != 0],
        error_events=sum(len(f["errors"]) for f in facts) + poll_errors,
        words=sum(f["words"] for f in facts), word_errors=sum(f["errs"] for f in facts),
        deletions=sum(f["deletions"] for f in facts),
        p95=[(i * slot, len(x), h.pct(x, 50), h.pct(x, 95), max(lag[i], default=float("nan")))
             for i, x in enumerate(lat)],
        max_lag=max(lags) if lags else float("nan"), polls=sum(len(p) for p in polls),
        rss=samples, slope=h.slope_per_10min([(x["min"], x["VmRSS"]) for x in warm]),
        fit=fit_rss(warm),
        slope_anon=h.slope_per_10min([(x["min"], x["RssAnon"]) for x in warm]),
        per_session=[{k: v for k, v in f.items() if k != "partials"} | {"partials": len(f["partials"])}
                     for f in facts])


def soak_report(b, h) -> list[str]:
    x = b.results.get("soak")
    if not x:
        return []
    a = b.a
    lost = x["not_ended"] + x["gaps"] + x["lost_tail"]
    L = [f"**Soak.** tiny.en, {x['minutes']:g} min ({x['wall_min']:.1f} min of wall time): "
         f"{a.soak_streams} live streams (`sotto stream -f jsonl -`, real speech on standard input "
         f"paced as live, the speech files looped, sessions of about {a.soak_session_minutes:g} "
         f"min back to back) and {a.soak_pollers} status pollers (a STATUS a second each). "
         f"sottod used {x['sottod_pct']:.0f}% of a core; other work {x['other']:.2f} cores "
         f"(load average {x['load0']:.2f} -> {x['load1']:.2f}). sottod "
         f"{'ran throughout' if x['alive'] else '**died**'}.", "",
         "| | |", "|---|---:|",
         f"| sessions, audio | {x['sessions']}, {x['audio_h']:.2f} h |",
         f"| finals received | {x['finals']} |",
         f"| **finals lost**: sessions without `end` + with a gap in final ids + whose finals "
         f"miss the last file's words (fewer than half of them among the last words) | "
         f"**{lost}** ({x['not_ended']} + {x['gaps']} + {x['lost_tail']}) |",
         f"| least share of the last file's words in a session's last finals | "
         f"{h.f2(x['min_recall'])} |",
         f"| largest stretch from the last final's end to the end of the last file | "
         f"{h.f2(x['max_uncovered'])} s |",
         f"| idle VmRSS before (after one session) -> after the soak | "
         f"{h.f2(x['idle_before'], 0)} -> {h.f2(x['idle_after'], 0)} MB |",
         f"| **error events** (streams and pollers) | **{x['error_events']}** |",
         f"| clients that exited non-zero | {len(x['bad_exit'])} |",
         f"| word error rate of the finals (deletions) | "
         f"{100 * x['word_errors'] / max(1, x['words']):.1f}% "
         f"({100 * x['deletions'] / max(1, x['words']):.1f}%) of {x['words']} words |",
         f"| status answers, largest lag_s | {x['polls']}, {h.f2(x['max_lag'])} s |",
         f"| VmRSS slope after {min(a.warmup, a.soak_minutes / 4):g} min, MB per 10 min | "
         f"{h.f2(x['slope'])} (RssAnon {h.f2(x['slope_anon'])}) |",
         f"| the same with the sessions open accounted for (VmRSS = a + b sessions + c t), "
         f"MB per 10 min; b | {h.f2(x['fit'][0])}; "
         f"{h.f2(x['fit'][1], 1) or 'n/a (the same number throughout)'} MB per session |", ""]
    L.append(f"Over time, per {a.soak_slot:g} min: partials with text (latency = arrival - "
             "arrival of `opened` - the partial's end) and the largest status `lag_s`.")
    L.append("")
    L.append("| minutes | partials | partial p50 s | partial p95 s | max lag s |")
    L.append("|---|---:|---:|---:|---:|")
    for t, n, p50, p95, lg in x["p95"]:
        L.append(f"| {t:g}-{t + a.soak_slot:g} | {n} | {h.f2(p50)} | {h.f2(p95)} | {h.f2(lg)} |")
    step = max(1, round(len(x["rss"]) / 12))
    L.append("")
    L.append("VmRSS: " + ", ".join(f"{s['min']:.0f} min {s['VmRSS']:.0f}" for s in x["rss"][::step])
             + " (minutes, MB).")
    if x["bad_exit"]:
        L.append("")
        L.append(f"Clients that failed: {'; '.join(x['bad_exit'][:3])}")
    L.append("")
    return L
