"""sottod's HTTP front door (daemon/http, daemon/net/httpd.c, docs/http.md), driven by the
official openai Python SDK and by curl against a real sottod with the real
tiny.en (and base, for translations) model and the files of ../shared/audio.

Every transcript is compared with `sotto transcribe` on the same file and
model: the HTTP API must give the same text, segments and subtitles.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import openai
import pytest

import cpu
from conftest import (AUDIO_DIR, MSG_AUDIO, MSG_END, MSG_OPEN, REPO, SOTTO,
                      Daemon, RawClient, Stream, frame, jframe, report)

JFK = AUDIO_DIR / "jfk.wav"
GO = AUDIO_DIR / "goforward.wav"
LONG = AUDIO_DIR / "LJ001-0001_to_LJ001-0017_longform.wav"
TOKEN = "sotto-test-token-0123456789"


def http_port(d) -> int:
    # The line may reach the log after the Unix socket answers (busy machine).
    deadline = time.monotonic() + 60
    m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
    while not m and time.monotonic() < deadline:
        time.sleep(0.1)
        m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
    assert m, f"no http listening line in the log:\n{d.log()}"
    return int(m.group(1))


def curl(url: str, *args: str, timeout: float = 120) -> tuple[int, dict, bytes]:
    """(status, headers with lower-case names, body) of one curl run."""
    cp = subprocess.run(["curl", "-sS", "-D", "-", "--max-time",
                         str(timeout), *args, url],
                        capture_output=True, timeout=timeout + 10)
    assert cp.returncode == 0, f"curl {url} failed: {cp.stderr.decode()}"
    out = cp.stdout
    while True:
        head, _, out = out.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 100"):
            break
    lines = head.decode().split("\r\n")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, out


def error_body(body: bytes) -> dict:
    """The OpenAI-style error object of a reply."""
    o = json.loads(body)
    assert set(o) == {"error"}, o
    e = o["error"]
    assert isinstance(e["message"], str) and e["message"], e
    assert isinstance(e["type"], str) and e["type"], e
    return e


def sox(*args) -> None:
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup installs it)")
    subprocess.run(["sox", *map(str, args)], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


def transcribe(path: Path, model: Path, fmt: str, *args: str) -> str:
    """`sotto transcribe` of path, as text in fmt."""
    cp = subprocess.run([str(SOTTO), "transcribe", "-q", "-m", str(model),
                         "-t", "2", "-f", fmt, *args, str(path)],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def client(d, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=d.base + "/v1", api_key=kw.pop(
        "api_key", "unused"), max_retries=0, timeout=300, **kw)


def sdk(d, path: Path, fmt: str, **kw):
    with open(path, "rb") as f:
        return client(d).audio.transcriptions.create(
            file=f, model="whisper-1", response_format=fmt, **kw)


class Daemons:
    """Daemons of this module, stopped (and checked) at its end."""

    def __init__(self, tmp_path_factory, model: Path):
        self.tmp, self.model, self.made = tmp_path_factory, model, []

    def start(self, conf: str = "", argv=("--http", "127.0.0.1:0"),
              model: Path | None = None, wrapper=None) -> Daemon:
        d = Daemon(self.tmp.mktemp("sottod-http"), model or self.model,
                   conf=conf, argv=list(argv), wrapper=wrapper)
        self.made.append(d)
        d.start()
        d.base = f"http://127.0.0.1:{http_port(d)}"
        return d

    def stop_all(self) -> None:
        for d in self.made:
            if d.alive():
                rc = d.stop()
                assert rc == 0, f"sottod exited {rc}:\n{d.log()}"


@pytest.fixture(scope="module")
def daemons(sottod_bin, sotto_bin, tiny_model, tmp_path_factory):
    ds = Daemons(tmp_path_factory, tiny_model)
    yield ds
    ds.stop_all()


@pytest.fixture(scope="module")
def hd(daemons):
    """A daemon with HTTP on an ephemeral loopback port."""
    return daemons.start()


@pytest.fixture(scope="module")
def jfk_ref(tiny_model) -> dict:
    return json.loads(transcribe(JFK, tiny_model, "json"))


# --- the openai SDK, every response_format ----------------------------------------

def test_sdk_json_and_text(hd, jfk_ref):
    r = sdk(hd, JFK, "json")
    assert isinstance(r, openai.types.audio.Transcription)
    assert r.text == jfk_ref["text"].strip()
    assert r.usage.type == "duration" and r.usage.seconds == 11
    t = sdk(hd, JFK, "text")
    assert t == jfk_ref["text"].strip() + "\n"
    report(f"http json (openai SDK): {r.text!r}")


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_sdk_subtitles(hd, tiny_model, fmt):
    assert sdk(hd, JFK, fmt) == transcribe(JFK, tiny_model, fmt)


def test_sdk_verbose_json(hd, jfk_ref):
    r = sdk(hd, JFK, "verbose_json", timestamp_granularities=["segment"])
    assert isinstance(r, openai.types.audio.TranscriptionVerbose)
    assert r.text == jfk_ref["text"].strip()
    # OpenAI's verbose_json names the language; sotto's JSON has the code
    assert r.language == "english" and jfk_ref["language"] == "en"
    assert r.duration == pytest.approx(11.0)
    want = jfk_ref["segments"]
    assert [(s.id, s.start, s.end, s.text, s.tokens) for s in r.segments] \
        == [(s["id"], s["start"], s["end"], s["text"], s["tokens"])
            for s in want]
    for got, w in zip(r.segments, want):
        assert got.avg_logprob == pytest.approx(w["avg_logprob"])
        assert got.no_speech_prob == pytest.approx(w["no_speech_prob"])
        assert got.temperature == w["temperature"]


def test_sdk_rates_channels_formats(hd, tiny_model, tmp_path):
    """FLAC at 44.1 kHz stereo, Ogg Vorbis at 8 kHz x3, and a 16 kHz
    WAV with a prompt and a temperature: as `sotto transcribe`."""
    flac, ogg = tmp_path / "jfk.flac", tmp_path / "jfk.ogg"
    sox(JFK, "-r", "44100", "-c", "2", flac)
    sox(JFK, "-r", "8000", "-c", "3", ogg)
    for path in (flac, ogg):
        want = json.loads(transcribe(path, tiny_model, "json"))["text"]
        assert sdk(hd, path, "json").text == want.strip(), path.name
    sense = AUDIO_DIR / "sense_and_sensibility_01_austen_64kb-0870.wav"
    want = transcribe(sense, tiny_model, "srt", "--prompt", "Dashwood.",
                      "--temperature", "0.2")
    assert sdk(hd, sense, "srt", prompt="Dashwood.", temperature=0.2) == want


def test_translations_base(daemons, tmp_path):
    """base (multilingual) translating: the same as --task translate."""
    base = _fetch_base()
    d = daemons.start(model=base)
    want = json.loads(transcribe(JFK, base, "json", "--task", "translate"))
    with open(JFK, "rb") as f:
        r = client(d).audio.translations.create(file=f, model="whisper-1",
                                                response_format="json")
    assert r.text == want["text"].strip()
    with open(JFK, "rb") as f:
        v = client(d).audio.translations.create(
            file=f, model="whisper-1", response_format="verbose_json")
    assert v.text == r.text and want["language"] == "en"
    assert v.language == "english"      # OpenAI's verbose_json: the name
    report(f"http translation (base): {r.text!r}")
    assert d.stop() == 0


def _fetch_base() -> Path:
    import os
    env = dict(os.environ)
    venv = REPO / ".venv" / "bin" / "python"
    if venv.exists():
        env.setdefault("SOTTO_PYTHON", str(venv))
    cp = subprocess.run([str(REPO / "scripts" / "fetch-model"), "base"],
                        cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=1800)
    lines = [ln for ln in cp.stdout.splitlines() if ln.strip()]
    assert cp.returncode == 0 and lines, cp.stderr[-3000:]
    return Path(lines[-1].strip())


def test_translation_needs_multilingual(hd):
    with open(JFK, "rb") as f, pytest.raises(openai.BadRequestError) as e:
        client(hd).audio.translations.create(file=f, model="whisper-1")
    assert "English-only" in e.value.body["message"]


# --- curl: health, models, metrics, errors --------------------------------------------

def test_health_models_metrics(hd):
    status, headers, body = curl(hd.base + "/health")
    assert status == 200 and headers["content-type"] == "application/json"
    o = json.loads(body)
    assert o["status"] == "ok" and o["model"] == "tiny.en", o
    status, _, body = curl(hd.base + "/v1/models")
    assert status == 200
    models = json.loads(body)
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["tiny.en"]
    assert client(hd).models.retrieve("tiny.en").id == "tiny.en"
    # the names transcriptions take for the loaded model
    for alias in ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"):
        assert client(hd).models.retrieve(alias).id == alias
    with pytest.raises(openai.NotFoundError) as e:
        client(hd).models.retrieve("gpt-9")
    assert e.value.body["code"] == "model_not_found"
    assert e.value.body["param"] == "model"
    status, headers, body = curl(
        hd.base + "/v1/audio/transcriptions", "-F", f"file=@{JFK}")
    assert status == 200, body
    status, headers, body = curl(hd.base + "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    m = {}
    for ln in body.decode().splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.rsplit(" ", 1)
            m[k] = float(v)
    for k in ("sottod_sessions", "sottod_queue_depth", "sottod_lag_seconds",
              "sottod_real_time_factor"):
        assert k in m, k
    assert m["sottod_up"] == 1 and m["sottod_sessions"] == 0
    assert m["sottod_files_total"] >= 1
    assert m["sottod_audio_received_seconds_total"] >= 11
    assert m["sottod_audio_decoded_seconds_total"] >= 11
    assert m['sottod_http_responses_total{code="2xx"}'] >= 3
    assert m['sottod_info{version="%s",model="tiny.en"}' % m_version(body)] == 1


def metrics(d) -> dict[str, float]:
    status, _, body = curl(d.base + "/metrics")
    assert status == 200
    m = {}
    for ln in body.decode().splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.rsplit(" ", 1)
            m[k] = float(v)
    return m


def test_metrics_counters(hd):
    """What operators asked for beside the gauges: error events by code,
    sessions by door, reloads, the microphone (off here), skipped audio,
    and a histogram of the streams' step compute time."""
    import signal
    import wave
    before = metrics(hd)
    c = RawClient(hd.socket)
    c.hello()
    c.send(frame(0x42))                     # no such frame type
    ev = c.events_until("error")[-1]
    assert ev["code"] == "bad_frame", ev
    c.close()
    with wave.open(str(GO), "rb") as w:
        pcm = w.readframes(w.getnframes())
    c = RawClient(hd.socket)
    c.hello()
    c.send(jframe(MSG_OPEN, {"format": "s16le", "rate": 16000,
                             "channels": 1}))
    c.events_until("opened")
    for i in range(0, len(pcm), 32000):
        c.send(frame(MSG_AUDIO, pcm[i:i + 32000]))
    c.send(frame(MSG_END))
    c.events_until("end")
    c.close()
    hd.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "change(s) applied" not in hd.log():
        assert time.monotonic() < deadline, hd.log()
        time.sleep(0.05)
    m = metrics(hd)
    key = 'sottod_errors_total{code="bad_frame"}'
    assert m[key] == before.get(key, 0) + 1, m
    assert m['sottod_errors_total{code="too_fast"}'] >= 0
    key = 'sottod_sessions_opened_total{door="socket"}'
    assert m[key] >= before.get(key, 0) + 1, m
    assert m["sottod_reloads_total"] >= 1
    assert m["sottod_mic_state"] == -1
    assert m["sottod_mic_xruns_total"] == 0
    assert m["sottod_overload_seconds_total"] == 0
    n = m["sottod_step_seconds_count"]
    assert n >= before.get("sottod_step_seconds_count", 0) + 1, m
    buckets = [(k, v) for k, v in m.items()
               if k.startswith("sottod_step_seconds_bucket")]
    assert len(buckets) == 9 and buckets[-1] == (
        'sottod_step_seconds_bucket{le="+Inf"}', n), buckets
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert m["sottod_step_seconds_sum"] > 0


def m_version(body: bytes) -> str:
    return re.search(rb'sottod_info\{version="([^"]*)"', body).group(1).decode()


def bad_request(d, *args: str) -> dict:
    status, headers, body = curl(d.base + "/v1/audio/transcriptions", *args)
    assert status == 400, body
    assert headers["content-type"] == "application/json"
    return error_body(body)


def test_bad_requests(hd, tmp_path):
    """Each error names its field in param (null when it is the form as a
    whole), as OpenAI's do."""
    ct = "Content-Type: multipart/form-data; boundary=xyz"
    e = bad_request(hd, "-H", ct, "--data-binary",
                    "--xyz\r\nContent-Disposition: form-data; name=file\r\n"
                    "\r\nRIFF")
    assert "no closing delimiter" in e["message"] and e["param"] is None, e
    e = bad_request(hd, "-H", ct, "--data-binary", "not multipart at all")
    assert "no delimiter line" in e["message"], e
    e = bad_request(hd, "-H", "Content-Type: application/json",
                    "--data-binary", "{}")
    assert "multipart/form-data" in e["message"], e
    e = bad_request(hd, "-F", "model=whisper-1")
    assert "no file" in e["message"] and e["param"] == "file", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F", "response_format=xml")
    assert "response_format" in e["message"], e
    assert e["param"] == "response_format", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F", "temperature=2")
    assert "temperature" in e["message"] and e["param"] == "temperature", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F", "language=de")
    assert "English-only" in e["message"] and e["param"] == "language", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F", "language=de-DE")
    assert "English-only" in e["message"] and e["param"] == "language", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F",
                    "timestamp_granularities[]=character", "-F",
                    "response_format=verbose_json")
    assert "not segment or word" in e["message"], e
    assert e["param"] == "timestamp_granularities[]", e
    e = bad_request(hd, "-F", f"file=@{JFK}", "-F",
                    "timestamp_granularities[]=word")
    assert "needs response_format verbose_json" in e["message"], e
    assert e["param"] == "timestamp_granularities[]", e
    junk = tmp_path / "junk.wav"
    junk.write_bytes(bytes(range(256)) * 64)
    e = bad_request(hd, "-F", f"file=@{junk}")
    assert e["code"] == "invalid_audio" and "not an audio file" \
        in e["message"], e
    assert e["param"] == "file", e
    flac, cut = tmp_path / "jfk.flac", tmp_path / "cut.flac"
    sox(JFK, flac)
    cut.write_bytes(flac.read_bytes()[:flac.stat().st_size // 2])
    e = bad_request(hd, "-F", f"file=@{cut}")
    assert "damaged" in e["message"] and "read error after" \
        in e["message"], e
    status, headers, body = curl(hd.base + "/v1/audio/transcriptions")
    assert status == 405 and headers["allow"] == "POST"
    assert error_body(body)["code"] == "method_not_allowed"
    status, _, body = curl(hd.base + "/nope")
    assert status == 404 and error_body(body)["code"] == "not_found"
    with pytest.raises(openai.BadRequestError):
        sdk(hd, junk, "json")
    assert curl(hd.base + "/health")[0] == 200


def test_language_tags(hd, jfk_ref):
    """BCP 47 tags by their primary subtag, in any case, as Wyoming takes
    them: en-US, en_GB and EN are en."""
    for tag in ("en-US", "en_GB", "EN"):
        assert sdk(hd, JFK, "json", language=tag).text == \
            jfk_ref["text"].strip(), tag


def test_verbose_json_milliseconds(hd):
    """verbose_json's times are written rounded to milliseconds, not as
    json-c's 17 significant digits (0.76000000000000001)."""
    status, _, body = curl(hd.base + "/v1/audio/transcriptions",
                           "-F", f"file=@{JFK}", "-F",
                           "response_format=verbose_json", "-F",
                           "timestamp_granularities[]=word", "-F",
                           "timestamp_granularities[]=segment")
    assert status == 200, body
    times = re.findall(rb'"(?:start|end|duration)":(-?[0-9.eE+-]+)', body)
    assert len(times) > 40, body[:400]
    long = [t for t in times if re.fullmatch(rb"-?\d+(\.\d{1,3})?", t) is None]
    assert not long, long[:5]
    o = json.loads(body)
    assert o["duration"] == 11.0 and o["words"][0]["word"] == "And", o


def test_request_too_large(daemons):
    d = daemons.start(conf="[http]\nmax_request_bytes = 64K\n")
    status, headers, body = curl(d.base + "/v1/audio/transcriptions",
                                 "-F", f"file=@{JFK}")
    assert status == 413 and headers["content-type"] == "application/json"
    assert error_body(body)["code"] == "request_too_large"
    # the openai SDK (no Expect: 100-continue) gets the 413 too
    with pytest.raises(openai.APIStatusError) as e:
        sdk(d, JFK, "json")
    assert e.value.status_code == 413
    assert e.value.body["code"] == "request_too_large"
    small = AUDIO_DIR / "2830-3980-0043.wav"
    assert small.stat().st_size < 64 * 1024
    assert sdk(d, small, "text").strip()
    assert d.stop() == 0


def raw(d, data: bytes, half_close: bool = True) -> bytes:
    """Send data on one connection, half-close (a request that reaches a
    transcription is then canceled: the client counts as gone), read to
    the end."""
    import socket
    port = int(d.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def raw_error(reply: bytes, status: int) -> dict:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), reply
    assert b"Content-Type: application/json" in head, reply
    return error_body(body)


def test_malformed_http(hd):
    """What evhttp refuses itself also gets a JSON error; garbage and
    hostile forms never hurt the daemon. (Pipelined requests on a
    half-closed connection are not checked: evhttp may drop the second
    when it sees the end of input first.)"""
    e = raw_error(raw(hd, b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n"),
                  400)
    assert e["code"] == "bad_request"
    e = raw_error(raw(hd, b"GET /health HTTP/1.1\r\nX: " + b"a" * 20000 +
                      b"\r\n\r\n"), 400)
    assert e["code"] == "bad_request"
    e = raw_error(raw(hd, b"POST /v1/audio/transcriptions HTTP/1.1\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"), 413)
    assert e["code"] == "request_too_large"
    import random
    rng = random.Random(14)
    corpus = Path(__file__).parents[1] / "fuzz" / "corpus" / "multipart"
    for seed in sorted(corpus.iterdir()):
        ct, _, body = seed.read_bytes().partition(b"\n")
        for _ in range(5):
            b = bytearray(body)
            for _ in range(rng.randrange(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            reply = raw(hd, b"POST /v1/audio/transcriptions HTTP/1.1\r\n"
                        b"Connection: close\r\nContent-Type: " + ct +
                        b"\r\nContent-Length: " + str(len(b)).encode() +
                        b"\r\n\r\n" + bytes(b), half_close=False)
            assert reply.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 200 ")), \
                reply
    for _ in range(50):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
        raw(hd, junk)
    assert curl(hd.base + "/health")[0] == 200


def test_token(daemons, sottod_bin, tmp_path):
    d = daemons.start(conf=f"[http]\ntoken = {TOKEN}\n")
    url = d.base + "/v1/models"
    status, headers, body = curl(url)
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert error_body(body)["code"] == "invalid_api_key"
    status, _, body = curl(url, "-H", "Authorization: Bearer wrong")
    assert status == 401
    assert curl(url, "-H", f"Authorization: Bearer {TOKEN}")[0] == 200
    assert curl(d.base + "/health")[0] == 200
    assert curl(d.base + "/metrics")[0] == 401
    with pytest.raises(openai.AuthenticationError):
        sdk(d, JFK, "json")
    with open(JFK, "rb") as f:
        r = client(d, api_key=TOKEN).audio.transcriptions.create(
            file=f, model="whisper-1")
    assert r.text.startswith("And so")
    assert d.stop() == 0
    # a listener on all addresses needs the token
    cp = subprocess.run([str(sottod_bin), "--http", "0.0.0.0:0", "-s",
                         str(tmp_path / "s.sock"), "-m", str(d.model)],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    assert "is not a loopback address: set [http] token" in cp.stderr


def metric(d, name: str) -> float:
    status, _, body = curl(d.base + "/metrics")
    assert status == 200
    m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    return float(m.group(1))


def _repeat_wav(src: Path, times: int, dst: Path) -> Path:
    import wave
    with wave.open(str(src), "rb") as r:
        params, frames = r.getparams(), r.readframes(r.getnframes())
    with wave.open(str(dst), "wb") as w:
        w.setparams(params)
        for _ in range(times):
            w.writeframes(frames)
    return dst


def test_file_beside_stream_busy_drain(daemons, tmp_path):
    """A 472 s file (the 118 s one four times: on a quiet machine the 118 s
    file alone is done before a 2.8 s live stream, which proves nothing;
    twice, 236 s, where sotto runs fp32, which takes twice as long or
    more, tests/cpu.py) and a live stream share the compute thread: the
    stream keeps up (the file yields between its windows). max_sessions =
    2: a third request gets 429. SIGTERM then lets the file finish and
    answer, and sottod exits 0."""
    d = daemons.start(conf="[server]\nmax_sessions = 2\n"
                           "shutdown_grace_seconds = 300\n")
    copies = 4 if cpu.bf16() else 2
    long4 = _repeat_wav(LONG, copies, tmp_path / "long4.wav")
    result = {}

    def upload():
        try:
            result["r"] = sdk(d, long4, "json")
        except Exception as e:  # noqa: BLE001 - reported below
            result["e"] = e
        result["t"] = time.monotonic()

    t = threading.Thread(target=upload)
    t.start()
    deadline = time.monotonic() + 30
    while metric(d, "sottod_sessions") < 1:
        assert time.monotonic() < deadline, d.log()
        time.sleep(0.05)
    s = Stream(d.socket, GO)            # paced as live: 2.8 s
    while metric(d, "sottod_sessions") < 2:
        assert time.monotonic() < deadline + 30, d.log()
        time.sleep(0.02)
    status, headers, body = curl(d.base + "/v1/audio/transcriptions",
                                 "-F", f"file=@{JFK}")
    assert status == 429 and headers["retry-after"] == "1"
    assert error_body(body)["code"] == "busy"
    s.check()
    t_end = max(t for t, e in s.lines if e.get("type") == "end")
    late = t_end - s.t_start - 2.8
    assert "forward" in s.text().lower(), s.text()
    # without the file's yields the stream's steps would wait for all of it
    assert "t" not in result, f"the stream ended {late:.1f} s after its " \
        "audio, after the file was done: it waited for the whole file"
    assert late < 10.0, f"the stream ended {late:.1f} s after its audio"
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    t.join(300)
    assert "e" not in result, result
    assert result["r"].text.startswith("Printing, in the only sense")
    rc = d.proc.wait(60)
    assert rc == 0, d.log()
    report(f"http: a live stream beside a {118 * copies} s file ended {late:.1f} s "
           f"after its audio; SIGTERM during the file: answered and "
           f"sottod exited 0 {time.monotonic() - t0:.1f} s later")
