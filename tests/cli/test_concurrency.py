"""Two processes on one file, and signals in the middle of a search: every file left behind is
complete and parseable, or absent (issue 43)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import tomllib

import pandas as pd
import pytest

from conftest import ROOT
from helpers import at_once, slowed
from tools.stop_at_random import STATUS, WORDS, stop_once


def test_concurrent_form_adds_lose_no_form(tmp_path, monkeypatch):
    """Four adds at once, each reading forms.toml slowly: all four forms are in the file after
    (two concurrent `forms add` left one of them out, each saying it was added)."""
    from fitrules.model import forms

    slowed(monkeypatch, forms, "load_forms_file", 0.1)

    def add(i):
        forms.add_form_to_file(f"f{i}(H, omega)", f"L0 + a{i}*omega*(H/16)**b", tmp_path)

    errors = at_once(add, 4)
    assert not errors
    table = tomllib.loads((tmp_path / "forms.toml").read_text())
    assert sorted(table) == ["f0", "f1", "f2", "f3"]


def test_concurrent_form_removes_keep_the_others(tmp_path, monkeypatch):
    """Two removes at once take out exactly the two forms named."""
    from fitrules.model import forms

    for i in range(4):
        forms.add_form_to_file(f"f{i}(H, omega)", f"L0 + a{i}*omega*(H/16)**b", tmp_path)
    slowed(monkeypatch, forms, "load_forms_file", 0.1)
    threads = [threading.Thread(target=forms.remove_form_from_file, args=(f"f{i}", tmp_path))
               for i in (0, 2)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(tomllib.loads((tmp_path / "forms.toml").read_text())) == ["f1", "f3"]


def _search_outputs(folder):
    return {name: folder / name for name in ("s.json", "f.toml", "R")}


@pytest.mark.timing
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_search_leaves_complete_outputs_or_none(tmp_path, sig, code):
    """The signal arrives once the search has printed its plan (its work has begun): the
    command ends with its exit status and one line, and each of --json, --forms-out and
    --report is either absent or complete (parseable JSON, TOML, a report with its page)."""
    out = _search_outputs(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fitrules", "search", "--terms", "2", "--max-constants", "4",
         "--splits", "20", "--inner-splits", "5", "--jobs", "1", "--progress",
         "--json", out["s.json"], "--forms-out", out["f.toml"], "--report", out["R"]],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    seen = ""
    while "fitrules search:" not in seen:  # the plan line: the work starts after it
        ch = proc.stderr.read(1)
        if not ch:
            break
        seen += ch
    assert "fitrules search:" in seen, seen
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    err = (seen + err).strip().splitlines()[-1]
    if proc.returncode == 0:  # finished before the signal landed: the outputs are complete
        pytest.skip("the search finished before the signal")
    assert proc.returncode == code, err
    assert err.endswith("interrupted" if code == 130 else "terminated"), err
    if out["s.json"].exists():
        json.loads(out["s.json"].read_text())
    if out["f.toml"].exists():
        tomllib.loads(out["f.toml"].read_text())
    if out["R"].exists():
        assert (out["R"] / "report.md").exists() or not any(out["R"].iterdir())
    assert not [p for p in tmp_path.rglob("*") if "partial" in p.name]


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.parametrize("target", ["group", "process"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["search", "simulate"])
def test_a_stop_ends_every_worker_at_once(tmp_path, command, sig, target):
    """A two-process search or simulate sent SIGTERM or SIGINT while its workers are busy (to
    its process group, as `timeout` and Ctrl-C do, or to its process) exits within 10 s with
    its status and one line, no process of its group left alive and no partial output.

    Issue 61: searches stopped by `timeout` waited for their workers' chunks, or for ever (a
    worker reading a pipe its stopped parent no longer fed); a simulation waited for its
    runs in flight."""
    stop = stop_once(command, sig, target, tmp_path, delay=0.0, busy=2.0)
    assert not stop.finished_first, stop
    assert stop.seconds is not None and stop.seconds < 10, stop
    assert stop.code == STATUS[sig], stop
    assert stop.last_line == f"fitrules {command}: {WORDS[sig]}", stop
    assert "Traceback" not in stop.stderr, stop.stderr
    assert stop.left == [], stop
    assert stop.partial == [], stop


@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("command", ["search", "simulate"])
def test_the_workers_die_with_a_parent_killed_with_sigkill(tmp_path, command):
    """`kill -9` of a two-process search or simulate, which no handler sees, leaves no worker
    alive within 2 s: each dies with its parent (before, they ran on, and then waited for
    tasks for ever)."""
    stop = stop_once(command, signal.SIGKILL, "process", tmp_path, delay=0.0, busy=2.0,
                     settle=2.0)  # fmt: skip
    assert not stop.finished_first and stop.code == -signal.SIGKILL, stop
    assert stop.left == [], stop


def test_two_simulations_to_one_table_leave_one_complete_table(tmp_path):
    """Two `simulate --out` at once on one CSV: the table holds every run once, with no torn
    line (the second waits for the first, or is refused in one line)."""
    out = tmp_path / "o.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "fitrules", "simulate", "--cell", "H=4,keep=0.5,steps=64",
           "--seeds", "0,1,2", "--out", str(out)]  # fmt: skip
    procs = [subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]  # fmt: skip
    results = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert 0 in codes, results
    for p, (_, err) in zip(procs, results, strict=True):
        if p.returncode != 0:
            assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
    table = pd.read_csv(out)
    assert len(table) == 3 and sorted(table["seed"]) == [0, 1, 2]
