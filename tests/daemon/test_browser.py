"""The live captions page (daemon/http/web/index.html) in a real Chromium:
Debian's chromium and chromium-driver driven by selenium (PyPI), headless,
against a real sottod with the real tiny.en model.

- Own microphone: Chromium's fake capture device plays real speech from
  ../shared/audio (--use-file-for-fake-audio-capture); the page captures
  it with getUserMedia + its AudioWorklet and streams it over /ws. Partials
  must appear, and the finals must match `sotto transcribe` of the same
  audio within the streaming WER bound of tests/daemon/test_daemon.py
  (or a few words: see WORD_SLACK).
  "The same audio" is what the page sent, recorded as it goes out: Chromium
  resamples the file to its audio rate and, on a loaded machine, its
  real-time audio path can drop a few hundred milliseconds, which is no
  fault of the page or sottod. That what the page sent is the file's
  speech, converted right, is checked on its own against the file.
  With "label speakers" on: every caption has a speaker label, and the
  .txt download heads each turn with it.
- Shared microphone: sottod captures a fake ALSA device (sottofake, as in
  test_mic.py); the page follows the mic session and must show the finals
  `sotto listen` shows. With [mic] diarize: two readers, two labels, as
  `sotto listen` has them, each in its colour.

SOTTO_SCREENSHOT=PATH saves the page in the first test there, once 20 s
of speech are captioned and a partial shows (scripts/screenshot makes
docs/live-captions.png this way).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
import urllib.request
import wave
from pathlib import Path

import pytest

from conftest import (AUDIO_DIR, BUILD, SOTTO, fetch_model, percentile,
                      report, werlib)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# test_daemon.py: streamed finals within 2 points of `sotto transcribe`
# (over its 436 words). Here 2 points were 2.5 of 126 words (the
# twelve files this test streamed before), less than one word the
# streaming decoder is torn on: for "ill-disposed"
# tiny.en says "old-asposed" at some steps and not at others on the same
# audio (stream-driver on one run's recorded audio: 500 ms steps commit
# it, 1000 ms steps do not), 2 word errors, and the prompt carries it to
# the word's second occurrence: 4 errors. 8 whole-suite runs gave the
# page 0.79% (5 runs), 2.38%, 3.97% and 4.76%, `sotto transcribe` of what
# it sent 0.79-1.59%. So the bound is 2 points or WORD_SLACK words,
# whichever is more: one such word twice and one more.
WER_SLACK = 0.02
WORD_SLACK = 5
# Own microphone: these, 0.8 s apart after 1 s of silence (41 s, 87
# words; the page's microphone is real time, so every second of audio is
# a second of the suite).
# Four speakers, 23 s of speech (seven files, 35 s, made the test a minute
# long on AVX2 without another state: the page's partials, finals, gaps).
SPEECH = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav",
          "2830-3980-0043.wav", "8455-210777-0068.wav"]
GAP_S = 0.8
# What the page sent: half-second windows of the file's speech (resampled
# by sox to the page's rate, as Chromium did) found in it at this SNR or
# better. On a
# busy machine Chromium's capture inserts 10 ms of silence here and there
# (its real-time thread missed a turn), which spoils the windows it falls
# in; a page that converted or cut the audio wrongly matches none.
FIDELITY_SNR_DB = 30
FIDELITY_WINDOWS = 0.5
# Records the binary messages the page sends (test instrumentation).
RECORD_JS = """
window.recorded = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  if (data instanceof ArrayBuffer) recorded.push(data.slice(0));
  return send.call(this, data);
};
"""
RECORDED_JS = """
let n = 0;
for (const b of recorded) n += b.byteLength;
const all = new Uint8Array(n);
let o = 0, out = "";
for (const b of recorded) { all.set(new Uint8Array(b), o); o += b.byteLength; }
for (let i = 0; i < all.length; i += 8192)
  out += String.fromCharCode.apply(null, all.subarray(i, i + 8192));
return btoa(out);
"""
RATE = 16000
PLUGIN = (BUILD / "tests" / "daemon" /
          "libasound_module_pcm_sottofake.so").resolve()


def http_port(d) -> int:
    # The line may reach the log after the Unix socket answers (busy machine).
    deadline = time.monotonic() + 60
    m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
    while not m and time.monotonic() < deadline:
        time.sleep(0.1)
        m = re.search(r"http: listening on [^ ]*:(\d+)", d.log())
    assert m, f"no http listening line in the log:\n{d.log()}"
    return int(m.group(1))


def samples(name: str) -> bytes:
    with wave.open(str(AUDIO_DIR / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == \
            (RATE, 1, 2), f"{name}: not 16 kHz mono s16"
        return w.readframes(w.getnframes())


def joined(names: list[str], gap_s: float, lead_s: float = 0) -> bytes:
    gap = b"\x00\x00" * int(RATE * gap_s)
    return b"\x00\x00" * int(RATE * lead_s) + gap.join(
        samples(n) for n in names) + gap


def write_wav(path: Path, pcm: bytes, rate: int = RATE) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return path


def read_wav(path: Path):
    import numpy as np
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()),
                             np.int16).astype(np.float64)


def fidelity(original: Path, sent: Path, rate: int,
             tmp: Path) -> tuple[float, float]:
    """(share of the original's half-second windows of speech found in
    what was sent at FIDELITY_SNR_DB or better, their median SNR). The
    original is resampled to the sent audio's rate, where Chromium's delay
    is a whole number of samples. Each window is looked for within 3 s of
    its place, so a stretch dropped or inserted costs only the windows it
    touches."""
    import numpy as np
    up = tmp / "original-resampled.wav"
    subprocess.run(["sox", str(original), "-r", str(rate), str(up)],
                   check=True, timeout=60)
    a, b = read_wav(up), read_wav(sent)
    win, reach = rate // 2, 3 * rate
    snrs = []
    for at in range(0, len(a) - win, win):
        seg = a[at:at + win]
        if np.abs(seg).max() < 1000:
            continue        # silence: nothing to find
        lo, hi = max(0, at - reach), min(len(b), at + win + reach)
        if hi - lo < win:
            snrs.append(0.0)
            continue
        region = b[lo:hi]
        n = 1 << (len(region) + win).bit_length()
        c = np.fft.irfft(np.fft.rfft(region, n) *
                         np.conj(np.fft.rfft(seg, n)), n)
        got = b[lo + int(np.argmax(c[:len(region) - win + 1])):][:win]
        gain = np.dot(seg, got) / max(np.dot(got, got), 1.0)
        err = seg - gain * got
        snrs.append(10 * np.log10(np.dot(seg, seg) /
                                  max(np.dot(err, err), 1e-9)))
    good = sum(x >= FIDELITY_SNR_DB for x in snrs)
    return good / max(len(snrs), 1), float(np.median(snrs))


def browser(fake_audio: Path | None = None):
    """Headless Chromium; its microphone plays fake_audio once."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: scripts/setup installs the "
                        "chromium and chromium-driver packages")
    os.environ["SE_OFFLINE"] = "true"   # no Selenium Manager downloads
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", "--window-size=1100,640",
              "--use-fake-ui-for-media-stream",
              "--use-fake-device-for-media-stream",
              "--autoplay-policy=no-user-gesture-required"):
        o.add_argument(a)
    if fake_audio is not None:
        o.add_argument(f"--use-file-for-fake-audio-capture={fake_audio}"
                       "%noloop")
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)


def page_state(drv) -> dict:
    return drv.execute_script("""
        const p = document.getElementById("partial");
        return {
          state: document.body.dataset.state,
          error: document.getElementById("error").textContent,
          partials: Number(p.dataset.count),
          partial: p.textContent,
          finals: [...document.querySelectorAll("#finals .final")]
            .map((f) => f.textContent),
          speakers: [...document.querySelectorAll("#finals .final")]
            .map((f) => [f.dataset.speaker || "", f.style.color]),
          turns: [...document.querySelectorAll("#finals .who")]
            .map((f) => f.textContent),
          sent_s: sotto.rate ? sotto.sent / sotto.rate : 0,
        };""")


def wait_state(drv, want: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = page_state(drv)
        if st["state"] == want:
            return st
        assert st["state"] != "error" and not st["error"], st
        time.sleep(0.2)
    pytest.fail(f"the page did not get to {want!r} in {timeout} s: "
                f"{page_state(drv)}")


def console_errors(drv) -> list[str]:
    return [e["message"] for e in drv.get_log("browser")
            if e["level"] == "SEVERE"]


def transcribe(path: Path, model: Path) -> str:
    cp = subprocess.run([str(SOTTO), "transcribe", "-m", str(model), "-t",
                         "2", "-q", "--beam-size", "1", "-f", "json",
                         str(path)], capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)["text"]


@pytest.fixture
def http_daemon(make_daemon):
    def make(**kw):
        # One compute thread: the other core is Chromium's, whose audio
        # capture runs in real time.
        d = make_daemon(argv=["--http", "127.0.0.1:0", "-t", "1"],
                        **kw).start()
        d.page = f"http://127.0.0.1:{http_port(d)}/"
        return d
    return make


def test_browser_own_microphone(http_daemon, manifest, tiny_model, tmp_path):
    wav = write_wav(tmp_path / "speech.wav", joined(SPEECH, GAP_S, 1.0))
    duration = os.path.getsize(wav) / 2 / RATE
    ref = " ".join(manifest[n] for n in SPEECH)
    d = http_daemon(conf=f"[engine]\nspeaker_model = "
                    f"{fetch_model('campplus')}\n")
    drv = browser(wav)
    try:
        drv.get(d.page)
        assert drv.title.startswith("sotto")
        drv.execute_script(RECORD_JS)
        drv.find_element("id", "diarize").click()
        drv.find_element("id", "start").click()
        wait_state(drv, "streaming", 30)
        # Until the fake microphone has played the whole file.
        deadline = time.monotonic() + duration + 60
        saw_partial = False
        shot = os.environ.get("SOTTO_SCREENSHOT")
        while time.monotonic() < deadline:
            st = page_state(drv)
            assert st["state"] == "streaming" and not st["error"], st
            saw_partial |= bool(st["partial"])
            if shot and st["partial"] and st["sent_s"] > 20:
                drv.save_screenshot(shot)
                shot = None
            if st["sent_s"] >= duration + 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the page sent {st['sent_s']:.1f} s of "
                        f"{duration:.1f} s")
        drv.find_element("id", "stop").click()
        st = wait_state(drv, "ended", 60)
        delays = drv.execute_script("return sotto.delays")
        vtt = drv.execute_script("return transcriptVTT()")
        txt = drv.execute_script("return transcriptText()")
        n_segments = drv.execute_script("return sotto.finals.length")
        rate = drv.execute_script("return sotto.rate")
        import base64
        sent = write_wav(tmp_path / "sent.wav", base64.b64decode(
            drv.execute_script(RECORDED_JS)), rate)
        errors = console_errors(drv)
    finally:
        drv.quit()
    assert d.stop() == 0, d.log()

    assert not errors, errors
    assert st["partials"] > 5 and saw_partial, st
    text = " ".join(st["finals"])
    got_e, n = werlib.counts(ref, text)
    sent_text = transcribe(sent, tiny_model)
    ref_e, _ = werlib.counts(ref, sent_text)
    file_e, _ = werlib.counts(ref, transcribe(wav, tiny_model))
    share, snr = fidelity(wav, sent, rate, tmp_path)
    report(f"browser, own microphone ({duration:.0f} s, {n} words, "
           f"{st['partials']} partials, sent at {rate} Hz): WER "
           f"{got_e / n:.2%} vs sotto transcribe {ref_e / n:.2%} of what "
           f"the page sent ({file_e / n:.2%} of the file); {share:.0%} of "
           f"its speech found in what was sent, median SNR {snr:.0f} dB; "
           f"caption delay p50 {percentile(delays, 50):.2f} s p95 "
           f"{percentile(delays, 95):.2f} s")
    assert share >= FIDELITY_WINDOWS, (share, snr)
    # the cues' times tell a final heard twice from a word misheard
    assert got_e <= ref_e + max(WER_SLACK * n, WORD_SLACK), \
        f"page: {text}\nsotto transcribe: {sent_text}\nreference: " \
        f"{ref}\ncues:\n{vtt}"

    # The downloads hold the same finals.
    assert vtt.startswith("WEBVTT\n\n")
    assert vtt.count(" --> ") == n_segments > 0
    # with speaker labels: every caption has one, each turn is headed by
    # it (in the page, the .txt and the .vtt)
    labels = [who for who, _ in st["speakers"]]
    assert all(re.fullmatch(r"S\d+", w) for w in labels), st["speakers"]
    changes = [k for k, _ in itertools.groupby(labels)]
    assert st["turns"] == [f"{w}:" for w in changes], (st["turns"], labels)
    assert changes[0] == "S1" and len(set(labels)) >= 2, labels
    assert vtt.count("<v S") == n_segments, vtt
    assert re.sub(r"S\d+: ", "", " ".join(txt.split())) == \
        " ".join(text.split()), txt
    assert len(re.findall(r"S\d+: ", txt)) == len(changes), txt


def test_browser_follows_mic_session(http_daemon, tmp_path):
    """The page shows what `sotto listen --since -1` shows of sottod's own
    microphone (a fake ALSA device playing speech after a pause, so that
    the page is following when it starts)."""
    if not PLUGIN.is_file():
        pytest.fail(f"{PLUGIN} is missing: meson compile -C {BUILD}")
    names = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0920.wav"]
    raw = tmp_path / "mic.raw"
    raw.write_bytes(joined(names, 1.0, lead_s=8) + b"\x00\x00" * RATE * 60)
    rc = tmp_path / "asoundrc"
    rc.write_text(f'pcm_type.sottofake {{\n\tlib "{PLUGIN}"\n}}\n'
                  f'pcm.sottomic {{\n\ttype sottofake\n\tfile "{raw}"\n'
                  f'\torigin "{tmp_path / "origin"}"\n}}\n')
    d = http_daemon(env={"ALSA_CONFIG_PATH":
                         f"/usr/share/alsa/alsa.conf:{rc}"},
                    conf="[mic]\nenabled = yes\ndevice = sottomic\n"
                    "rate = 16000\nchannels = 1\ndiarize = yes\n"
                    f"[engine]\nspeaker_model = {fetch_model('campplus')}\n")
    drv = browser()
    listen = None
    try:
        drv.get(d.page + "#source=mic")
        drv.find_element("id", "start").click()
        listen = subprocess.Popen([str(SOTTO), "listen", "-s", d.socket,
                                   "-f", "jsonl", "--since", "-1"],
                                  stdout=subprocess.PIPE, text=True)
        wait_state(drv, "following", 30)
        deadline = time.monotonic() + 90
        saw_partial = False
        while time.monotonic() < deadline:
            st = page_state(drv)
            assert st["state"] == "following", st
            saw_partial |= bool(st["partial"])
            if "respectable" in " ".join(st["finals"]).lower():
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the page did not show the second file: {st}")
        # /metrics counts the microphone's live session
        body = urllib.request.urlopen(d.page + "metrics", timeout=10).read()
        assert re.search(rb"^sottod_sessions 1$", body, re.M), body
        assert re.search(rb"^sottod_mic_state 1$", body, re.M), body
        assert re.search(rb'^sottod_sessions_opened_total\{door="mic"\} 1$',
                         body, re.M), body
        time.sleep(1)
        st = page_state(drv)
        drv.find_element("id", "stop").click()
        wait_state(drv, "closed", 10)
        errors = console_errors(drv)
    finally:
        drv.quit()
        if listen is not None:
            listen.terminate()
    out, _ = listen.communicate(timeout=10)
    # With no client left, SIGTERM waits only for the microphone's last
    # step (it waited for the 60 s drain limit before session.c said a
    # shared session's end to the drain).
    t0 = time.monotonic()
    assert d.stop() == 0, d.log()
    assert time.monotonic() - t0 < 20, d.log()
    assert not errors, errors
    assert saw_partial and st["partials"] > 0, st
    # the page shows the caption units `sotto listen` gets, each closed
    # unit a caption
    closed = [e for e in map(json.loads, out.splitlines())
              if e["type"] == "unit" and e["closed"] and e["text"].strip()]
    finals = [e["text"].strip() for e in closed]
    assert st["finals"] == finals[:len(st["finals"])], (st["finals"], finals)
    text = " ".join(st["finals"]).lower()
    assert "fellow americans" in text and "respectable" in text, text
    # [mic] diarize: the two readers are S1 and S2, for every listener
    # alike, and the page shows each in its own colour
    labels = [who for who, _ in st["speakers"]]
    assert labels == [e["speaker"] for e in closed][:len(labels)], \
        (labels, closed)
    spoke = {who: f for who, f in zip(labels, st["finals"])}
    assert "americans" in " ".join(f for f, who in zip(st["finals"], labels)
                                   if who == "S1").lower(), spoke
    assert "respectable" in " ".join(f for f, who in zip(st["finals"], labels)
                                     if who == "S2").lower(), spoke
    colours = dict(st["speakers"])
    assert set(colours) == {"S1", "S2"} and colours["S1"] != colours["S2"], \
        st["speakers"]
    report(f"browser, sottod's microphone: {len(st['finals'])} caption units as "
           f"`sotto listen` shows them, {st['partials']} partials")


def test_browser_shows_sottod_error(http_daemon):
    """Following the microphone of a sottod whose [mic] is off: sottod
    sends an error event (unavailable), then closes the WebSocket with
    1008; the page shows sottod's message, not the close code."""
    d = http_daemon()
    drv = browser()
    try:
        drv.get(d.page + "#source=mic")
        drv.find_element("id", "start").click()
        deadline = time.monotonic() + 20
        while (st := page_state(drv))["state"] != "error":
            assert time.monotonic() < deadline, st
            time.sleep(0.1)
        time.sleep(0.5)         # the close comes after the error event
        st = page_state(drv)
    finally:
        drv.quit()
    assert st["error"].startswith("sottod: unavailable: "), st
    assert "1008" not in st["error"], st
    assert d.stop() == 0, d.log()
