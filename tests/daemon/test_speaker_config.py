"""sottod's [engine] speaker_model: speaker labels are optional, so a
missing speaker model does not stop sottod; --check-config loads it when
the config file names it, and says how to fetch it."""

from __future__ import annotations

import re
import subprocess

from conftest import REPO, SOTTOD


def check_config(conf, *args):
    return subprocess.run([str(SOTTOD), "-f", str(conf), "--check-config", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def test_check_config_loads_a_named_speaker_model(make_daemon, tmp_path):
    d = make_daemon(conf=f"[engine]\nspeaker_model = {tmp_path / 'none.gguf'}\n")
    cp = check_config(d.conf, "-m", str(d.model))
    assert cp.returncode != 0
    assert re.search(rf"{re.escape(str(d.conf))}:\d+: speaker_model: speaker labels need the "
                     r"speaker model .*none\.gguf, which does not load: .*"
                     r"run 'scripts/fetch-model campplus'", cp.stderr), cp.stderr
    good = make_daemon(conf=f"[engine]\nspeaker_model = {REPO / 'models' / 'campplus.gguf'}\n")
    cp = check_config(good.conf, "-m", str(good.model))
    assert cp.returncode == 0, cp.stderr


def test_missing_speaker_model_does_not_stop_sottod(make_daemon, tmp_path):
    d = make_daemon(conf=f"[engine]\nspeaker_model = {tmp_path / 'none.gguf'}\n").start()
    assert d.stop() == 0
