"""Issue 12, items 2 and 8: outputs are taken before the work and never replace what appeared.

A report directory is created empty before the fit (create-or-fail), filled in a locked
partial sibling and moved onto its placeholder in one rename; ``--force`` swaps atomically;
partials of killed runs are cleaned; SIGTERM cleans up like Ctrl-C.
"""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from conftest import composition_grid
from helpers import run, snapshot

FORMS = ["--forms", "composition", "--splits", "5"]


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "g.csv"
    composition_grid().to_csv(path, index=False)
    return path


@pytest.fixture
def during_build(monkeypatch):
    """Run a callback the first time a report figure is saved, i.e. mid-build."""
    from fitrules.views import figures

    calls = {"n": 0}
    real = figures.save

    def install(callback):
        def save(*a, **k):
            calls["n"] += 1
            if calls["n"] == 1:
                callback()
            return real(*a, **k)

        monkeypatch.setattr(figures, "save", save)

    return install


def _partials(root: Path) -> list[str]:
    return sorted(p for p in snapshot(root) if "partial" in p or p.endswith(".old"))


# ------------------------------------------------------------------ 2. never replaced
def test_a_directory_filled_during_the_run_is_kept(grid_csv, tmp_path, capsys, during_build):
    target = tmp_path / "R"

    def user_writes_notes():
        target.mkdir(exist_ok=True)
        (target / "notes.txt").write_text("mine")

    during_build(user_writes_notes)
    code, out, err = run(["compare", "--data", grid_csv, *FORMS, "--report", target], capsys)
    assert code == 2, err
    assert (target / "notes.txt").read_text() == "mine"
    assert not (target / "report.md").exists()
    assert "files were put into it during the run" in err and "report written" not in out
    assert _partials(tmp_path) == []


def test_a_directory_swapped_in_during_the_run_is_kept(grid_csv, tmp_path, capsys, during_build):
    target = tmp_path / "R"

    def user_replaces_it():
        if target.exists():
            target.rmdir()  # the empty placeholder
        target.mkdir()
        (target / "notes.txt").write_text("mine")

    during_build(user_replaces_it)
    code, _, err = run(["compare", "--data", grid_csv, *FORMS, "--report", target], capsys)
    assert code == 2, err
    assert sorted(os.listdir(target)) == ["notes.txt"]


def test_a_second_run_is_refused_at_once(grid_csv, tmp_path, capsys, during_build):
    from fitrules.cli import main

    target = tmp_path / "R"
    inner = {}

    def second_run():
        inner["code"] = main(["compare", "--data", str(grid_csv), *FORMS, "--report", str(target)])

    during_build(second_run)
    code, out, err = run(["compare", "--data", grid_csv, *FORMS, "--report", target], capsys)
    assert inner["code"] == 2
    assert code == 0, err
    assert err.count("exists") == 1 and out.count("report written") == 1
    assert (target / "report.md").exists()


def test_force_never_leaves_the_target_missing(grid_csv, tmp_path, capsys, monkeypatch):
    """Without renameat2, an interrupt between the two renames is held back until both ran."""
    from fitrules.base import outputs

    target = tmp_path / "R"
    assert run(["compare", "--data", grid_csv, *FORMS, "--report", target], capsys)[0] == 0
    monkeypatch.setattr(outputs, "_EXCHANGE", None, raising=False)
    real = os.rename

    def rename(src, dst, *a, **k):
        real(src, dst, *a, **k)
        if Path(src) == target:  # the old report has just been moved aside
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "rename", rename)
    code, _, err = run(
        ["compare", "--data", grid_csv, *FORMS, "--report", target, "--force", "--seed", "1"],
        capsys,
    )
    assert code == 130, err
    assert (target / "report.md").exists()  # the new report, complete
    assert '"seed": 1' in (target / "results.json").read_text()
    assert _partials(tmp_path) == []


def test_exchange_swaps_two_directories(tmp_path):
    from fitrules.base.outputs import exchange

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    exchange(a, b)
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


# ------------------------------------------------------------------ 8. leftovers
def test_stale_partials_of_killed_runs_are_cleaned(grid_csv, tmp_path, capsys):
    stale_dir = tmp_path / ".R.k1ll3d00.partial"
    stale_dir.mkdir()
    (stale_dir / "report.md").write_text("half")
    stale_file = tmp_path / ".r.json.k1ll3d00.partial"
    stale_file.write_text("{")
    live = tmp_path / ".R.l1ve0000.partial"  # another run is still writing this one
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code, _, err = run(
            [
                "compare",
                "--data",
                grid_csv,
                *FORMS,
                "--report",
                tmp_path / "R",
                "--json",
                tmp_path / "r.json",
            ],
            capsys,
        )
    finally:
        os.close(fd)
    assert code == 0, err
    assert not stale_dir.exists() and not stale_file.exists()
    assert live.exists()


def test_a_stale_old_directory_is_not_restored_into_a_fresh_target(grid_csv, tmp_path, capsys):
    # issue 20: a '.R.old' (left by fitrules before 0.2, or by anything else) used to be moved
    # into place at a fresh --report R, and the run refused; it is now left alone
    old = tmp_path / ".R.old"
    old.mkdir()
    (old / "report.md").write_text("the old report")
    code, _, err = run(["compare", "--data", grid_csv, *FORMS, "--report", tmp_path / "R"], capsys)
    assert code == 0, err
    assert (tmp_path / "R" / "report.md").read_text() != "the old report"
    assert (old / "report.md").read_text() == "the old report"


def test_sigterm_during_the_build_cleans_up(grid_csv, tmp_path, capsys, during_build):
    class Stop(BaseException):
        pass

    def outer(signum, frame):  # the test's own safety net: never let SIGTERM kill pytest
        raise Stop()

    old = signal.signal(signal.SIGTERM, outer)
    try:
        during_build(lambda: os.kill(os.getpid(), signal.SIGTERM))
        before = snapshot(tmp_path)
        code, _, err = run(
            ["compare", "--data", grid_csv, *FORMS, "--report", tmp_path / "R"], capsys
        )
    finally:
        signal.signal(signal.SIGTERM, old)
    assert code == 143 and err.strip() == "fitrules compare: terminated"
    assert snapshot(tmp_path) == before


def test_a_failed_command_removes_the_directories_it_created(grid_csv, tmp_path, capsys):
    before = snapshot(tmp_path)
    code, _, err = run(
        [
            "compare",
            "--data",
            grid_csv,
            *FORMS,
            "--report",
            tmp_path / "a" / "b" / "R",
            "--json",
            tmp_path / "c" / "r.json",
            "--where",
            "nonsense == 1",
        ],
        capsys,
    )
    assert code == 2, err
    assert snapshot(tmp_path) == before


def test_json_inside_the_report_or_over_an_input_is_refused(grid_csv, tmp_path, capsys):
    from helpers import refused

    refused(
        [
            "compare",
            "--data",
            grid_csv,
            *FORMS,
            "--report",
            tmp_path / "R",
            "--json",
            tmp_path / "R" / "x.json",
        ],
        capsys,
        tmp_path,
        "inside --report",
    )
    refused(["validate", grid_csv, "--json", grid_csv], capsys, tmp_path, "is an input")
    refused(
        ["fit", "--data", grid_csv, "--form", "composition", "--report", tmp_path, "--force"],
        capsys,
        tmp_path,
        "holds g.csv, an input|holds the working directory",
    )


def test_json_to_a_fifo_is_refused(grid_csv, tmp_path, capsys):
    """A device, pipe or socket is never replaced by a file. (A FIFO in the test's own
    directory stands in for a device such as /dev/null: a regression must not be able to
    replace a real one.)"""
    from helpers import refused

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused(["validate", grid_csv, "--json", fifo], capsys, tmp_path, "not a regular file")
    assert fifo.is_fifo()
