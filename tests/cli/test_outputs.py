"""Outputs are taken before the work and never replace what appeared: report directories,
JSON files, links and inputs, leftovers of killed runs."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from conftest import DATA, composition_grid
from fitrules.cli import main
from helpers import predicted_into, refused, run, snapshot

FORMS = ["--forms", "composition", "--splits", "5"]


@pytest.fixture(autouse=True)
def figures_as_placeholders(monkeypatch):
    """Each report figure written as a few placeholder bytes, not rendered: these tests check
    which files and directories a run takes, keeps and leaves, never a figure's pixels (the
    renders are checked in tests/views and tests/project/test_reports.py), and rendering
    the figures was most of their CPU time."""
    from fitrules.views import figures

    def save(ax, path) -> None:
        for fmt in figures._formats.get():
            Path(path).with_suffix(f".{fmt}").write_bytes(b"placeholder")
        figures.plt.close(ax.figure)

    monkeypatch.setattr(figures, "save", save)


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


SPLITS = ["--splits", "5"]


def _compare_to(data, options, report, json) -> list:
    """The argv of ``fitrules compare`` over ``data`` with ``options``, writing both outputs."""
    return ["compare", "--data", data, *options, "--report", report, "--json", json]


FAST_DESIGN = ["--design-splits", "10", "--resamples", "20"]


@pytest.fixture
def main_csv(tmp_path):
    path = tmp_path / "g.csv"
    path.write_bytes((DATA / "main.csv").read_bytes())
    return path


def test_a_directory_filled_during_the_run_is_kept(grid_csv, tmp_path, capsys, during_build):
    """A report directory the user fills during the run is kept as is; the run exits 2."""
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
    """A report directory swapped in during the run is kept as is; the run exits 2."""
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
    """A second run to the same --report during the first is refused; the first writes it."""
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


@pytest.mark.slow  # repeated runs, 6 s of CPU (a loaded machine): CI's slow step runs it
@pytest.mark.timing
def test_force_never_leaves_the_target_missing(
    grid_csv, tmp_path, capsys, monkeypatch, interruptible
):
    """Without renameat2, an interrupt between the two renames is held back until both ran.

    It relies on SIGINT interrupting the process (``interruptible``: a runner started with
    SIGINT ignored dropped the signal, and the test passed only where an earlier test on its
    worker had installed Python's handler). The signal is raised in this thread, so it is
    pending before the first rename returns, wherever the kernel would send a process signal."""
    from fitrules.base import outputs

    target = tmp_path / "R"
    assert run(["compare", "--data", grid_csv, *FORMS, "--report", target], capsys)[0] == 0
    monkeypatch.setattr(outputs, "_EXCHANGE", None, raising=False)
    real = os.rename

    def rename(src, dst, *a, **k):
        real(src, dst, *a, **k)
        if Path(src) == target:  # the old report has just been moved aside
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(os, "rename", rename)
    code, _, err = run(
        ["compare", "--data", grid_csv, *FORMS, "--report", target, "--force", "--seed", "1"],
        capsys,
    )
    assert code == 130, err
    assert (target / "report.md").exists()  # the new report, complete
    assert '"seed": 1' in (target / "results.json").read_text()
    assert _partials(tmp_path) == []


def test_stale_partials_of_killed_runs_are_cleaned(grid_csv, tmp_path, capsys):
    """Partial files of killed runs are removed; one still locked by a live run is kept."""
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
            _compare_to(grid_csv, FORMS, tmp_path / "R", tmp_path / "r.json"), capsys
        )
    finally:
        os.close(fd)
    assert code == 0, err
    assert not stale_dir.exists() and not stale_file.exists()
    assert live.exists()


def test_a_stale_old_directory_is_not_restored_into_a_fresh_target(grid_csv, tmp_path, capsys):
    """A stale .R.old is left alone, not moved into place as a fresh --report R."""
    # issue 20: a '.R.old' (left by fitrules before 0.2, or by anything else) used to be moved
    # into place at a fresh --report R, and the run refused; it is now left alone
    old = tmp_path / ".R.old"
    old.mkdir()
    (old / "report.md").write_text("the old report")
    code, _, err = run(["compare", "--data", grid_csv, *FORMS, "--report", tmp_path / "R"], capsys)
    assert code == 0, err
    assert (tmp_path / "R" / "report.md").read_text() != "the old report"
    assert (old / "report.md").read_text() == "the old report"


@pytest.mark.timing
def test_sigterm_during_the_build_cleans_up(grid_csv, tmp_path, capsys, during_build):
    """SIGTERM during the report's build exits 143 in one line and leaves no file."""

    class Stop(BaseException):
        pass

    def outer(signum, frame):  # the test's own safety net: never let SIGTERM kill pytest
        raise Stop()

    old = signal.signal(signal.SIGTERM, outer)
    try:
        during_build(lambda: signal.raise_signal(signal.SIGTERM))  # in this thread: now
        before = snapshot(tmp_path)
        code, _, err = run(
            ["compare", "--data", grid_csv, *FORMS, "--report", tmp_path / "R"], capsys
        )
    finally:
        signal.signal(signal.SIGTERM, old)
    assert code == 143 and err.strip() == "fitrules compare: terminated"
    assert snapshot(tmp_path) == before


def test_a_failed_command_removes_the_directories_it_created(grid_csv, tmp_path, capsys):
    """A refused command removes the parent directories it created for its outputs."""
    before = snapshot(tmp_path)
    argv = _compare_to(grid_csv, FORMS, tmp_path / "a" / "b" / "R", tmp_path / "c" / "r.json")
    code, _, err = run([*argv, "--where", "nonsense == 1"], capsys)
    assert code == 2, err
    assert snapshot(tmp_path) == before


def test_json_inside_the_report_or_over_an_input_is_refused(grid_csv, tmp_path, capsys):
    """A --json inside --report, over an input, or a --report holding an input is refused."""
    from helpers import refused

    refused(
        _compare_to(grid_csv, FORMS, tmp_path / "R", tmp_path / "R" / "x.json"),
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


def test_report_placeholder_left_by_a_killed_run_is_taken(grid_csv, tmp_path, capsys,
                                                         monkeypatch):  # fmt: skip
    """A rerun takes the empty report placeholder and clears the ``.partial`` files of a killed run.

    After kill -9 the empty report placeholder blocked a plain rerun, and 0-byte
    ``.partial`` files stayed until ``--force``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "R").mkdir()  # the placeholder of a run killed -9
    (tmp_path / ".R.abcd1234.partial").mkdir()  # and its partial, its lock free
    (tmp_path / ".out.json.abcd1234.partial").write_bytes(b"")
    code, _, err = run(["fit", "--data", grid_csv, "--form", "composition", "--report", "R",
                        "--json", "out.json"], capsys)  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "R" / "report.md").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_report_placeholder_of_a_live_run_is_refused(grid_csv, tmp_path, capsys):
    """A --report placeholder held by a live run is refused as being written by it."""
    from fitrules.base.outputs import ReservedDir

    held = ReservedDir(tmp_path / "R", force=False)
    try:
        argv = ["fit", "--data", grid_csv, "--form", "composition", "--report", tmp_path / "R"]
        refused(argv, capsys, tmp_path, "exists, being written by another fitrules run")
    finally:
        held.release()


def test_unwritable_json_is_refused_before_the_report(grid_csv, tmp_path, capsys):
    """A --json where no file can be created is refused before the report is made."""
    refused(
        _compare_to(grid_csv, SPLITS, tmp_path / "R", "/proc/x.json"),
        capsys,
        tmp_path,
        "--json /proc/x.json: cannot create a file",
    )


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_json_write_failure_after_the_work_removes_the_new_report(
    grid_csv, tmp_path, capsys, monkeypatch
):
    """A disk full while writing --json is refused in one line and removes the new report."""
    from fitrules.base import outputs

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "write", full)
    refused(
        _compare_to(grid_csv, SPLITS, tmp_path / "R", tmp_path / "r.json"),
        capsys,
        tmp_path,
        "r.json: cannot write it \\(No space left on device\\)",
    )


@pytest.mark.parametrize("path, match", [("", "empty path"), ("DIR", "is a directory")])
def test_json_to_an_empty_path_or_a_directory(grid_csv, tmp_path, capsys, path, match):
    """A --json that is an empty path or a directory is refused in one line."""
    (tmp_path / "DIR").mkdir()
    target = str(tmp_path / path) if path else ""
    refused(["validate", grid_csv, "--json", target], capsys, tmp_path, match)


def test_cli_json_through_a_link_is_refused(table, tmp_path, capsys):
    """``compare --json`` to a symbolic link is refused and the file it points at is left as it was.

    Audit case (a regression): ``compare --json race/link.json`` with the link pointing
    at a file outside wrote through the link and replaced that file."""
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    (tmp_path / "race").mkdir()
    os.symlink(outside, tmp_path / "race" / "link.json")
    refused(
        ["compare", "--data", table, "--forms", "composition", "--splits", "5",
         "--json", "race/link.json"],
        capsys, tmp_path, "is a symbolic link",
    )  # fmt: skip
    assert outside.read_text() == "mine\n"


def test_failed_report_leaves_nothing(tmp_path, monkeypatch, synthetic_csv):
    """A report whose figure fails to save leaves no report directory or other file."""
    from fitrules.views import figures

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(figures, "save", boom)
    target = tmp_path / "rep"
    with pytest.raises(RuntimeError):
        main(["compare", "--data", str(synthetic_csv), "--splits", "5", "--report", str(target)])
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [synthetic_csv.name]


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_existing_report_needs_force(tmp_path, synthetic_csv, capsys):
    """An existing report directory is refused unless --force, which replaces it."""
    target = tmp_path / "rep"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    argv = ["compare", "--data", str(synthetic_csv), "--splits", "5", "--report", str(target)]
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err
    assert (target / "keep.txt").read_text() == "mine"
    assert main([*argv, "--force"]) == 0
    assert not (target / "keep.txt").exists() and (target / "report.md").exists()


def test_design_spec_out_may_not_replace_the_grid(main_csv, tmp_path, capsys):
    """design --spec-out naming the grid it reads is refused: it is an input."""
    argv = ["design", "--forms", "composition,additive", "--data", main_csv]
    argv += ["--where", "lr == 3e-4", "--spec-out", main_csv, *FAST_DESIGN]
    refused(argv, capsys, tmp_path, "--spec-out .*g.csv: is an input of this command")


def test_spec_out_and_json_may_not_share_a_path(main_csv, tmp_path, capsys):
    """design --spec-out and --json naming one path are refused in one line."""
    argv = ["design", "--forms", "composition,additive", "--data", main_csv]
    argv += ["--where", "lr == 3e-4", "--spec-out", tmp_path / "x", "--json", tmp_path / "x"]
    refused([*argv, *FAST_DESIGN], capsys, tmp_path, "also the path of")


def test_a_hard_link_to_the_grid_is_an_input(main_csv, tmp_path, capsys):
    """A --json that is a hard link to the grid is refused as an input."""
    os.link(main_csv, tmp_path / "hard.csv")
    refused(["validate", main_csv, "--json", tmp_path / "hard.csv"], capsys, tmp_path, "an input")


def test_a_symlinked_ledger_is_extended_where_it_points(tmp_path, capsys, monkeypatch):
    """predict to a symlinked ledger appends to its target and keeps the link."""
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    shared = tmp_path / "shared" / "ledger.jsonl"
    shared.parent.mkdir()
    predicted_into(capsys, shared, tmp_path / "g.csv")
    (tmp_path / "mine").mkdir()
    link = tmp_path / "mine" / "link.jsonl"
    link.symlink_to(shared)
    code, _, err = run(
        ["predict", "--data", tmp_path / "g.csv", "--form", "additive", "--at", "H=8,keep=0.25",
         "--ledger", link, "--resamples", "20"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert link.is_symlink()
    assert len(shared.read_text().splitlines()) == 2


def test_an_empty_json_path_beside_a_report_is_one_line(grid_csv, tmp_path, capsys):
    """An empty --json= path, alone or beside --report, is refused in one line."""
    # found by the suite's fuzzer: --json= with --report raised AttributeError
    refused(["validate", grid_csv, "--json="], capsys, tmp_path, "empty path")
    refused(["ci", "--data", grid_csv, "--baseline", "H=4,keep=0.5", "--treatment",
             "H=16,keep=0.5", "--resamples", "1000", "--json=", "--report", tmp_path / "R"],
            capsys, tmp_path, "empty path")  # fmt: skip


def test_outputs_are_undone_last_taken_first(grid_csv, tmp_path, capsys, monkeypatch):
    """A refusal after --json and --spec-out were taken removes both and the folders made."""
    # found by the long fuzz run: --json sub/dir/out.json then --spec-out sub/s.toml; the
    # refusal removed the first one's folders before the second's staging file, leaving sub/
    monkeypatch.chdir(tmp_path)
    refused(["design", "--data", grid_csv, "--forms", "composition,additive", *FAST_DESIGN,
             "--json", "sub/dir/out.json", "--spec-out", "sub/s.toml"], capsys, tmp_path,
            "--spec-out")  # fmt: skip
    assert not (tmp_path / "sub").exists()
