"""fitrules simulate on the command line: specs and cells refused in one line, progress,
resuming, finished grids left alone, Ctrl-C on a cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import fitrules as fr
from conftest import DATA, ROOT
from fitrules.cli import main
from helpers import refused, run, write_file

TINY = "steps=2,width=4,embed=2,context=2,batch=2,eval_windows=8,M=1"


def test_without_dask_the_scheduler_is_one_line_with_the_install_command(
    tmp_path, capsys, monkeypatch
):
    """--scheduler without dask installed is refused in one line giving the pip install command."""
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    out = tmp_path / "s.csv"
    spec = str(DATA / "specs" / "smoke.toml")
    assert main(["simulate", spec, "--out", str(out), "--scheduler", "local:2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "fitrules[distributed]"' in err[0]
    assert not out.exists()


def test_without_torch_a_gpt_spec_is_one_line_with_the_install_command(
    tmp_path, capsys, monkeypatch
):
    """A gpt spec or cell without PyTorch installed is refused in one line giving the pip
    install command, of an extra that exists, before any run: nothing is written."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("torch") for d in extras["optional-dependencies"]["gpt"])
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    out = tmp_path / "g.csv"
    spec = write_file(tmp_path / "g.toml", 'model = "gpt"\n[fixed]\nsteps = 2\n')
    for argv in ([str(spec)], ["--cell", "model=gpt,steps=2"]):
        assert main(["simulate", *argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ['fitrules simulate: error: model = "gpt" needs PyTorch: '
                       'pip install "fitrules[gpt]"']  # fmt: skip
        assert not out.exists()


def test_negative_simulate_seed_leaves_no_file(tmp_path, capsys):
    """simulate --seeds -1 is refused in one line and writes no table."""
    refused(
        ["simulate", "--cell", "H=1,steps=2", "--seeds", "-1", "--out", tmp_path / "n.csv"],
        capsys,
        tmp_path,
        "seeds=",
    )


@pytest.mark.parametrize(
    "spec, match",
    [
        ("fixed = 3\n", r"\[fixed\] must be a table"),
        ("block = 3\n", "array of tables"),
        ("[block]\nH = 1\n", "array of tables"),
        ("seeds = [0, 0]\n", "lists a seed twice"),
        ("seeds = [-1]\n", "seeds="),
        ("[fixed]\nlr = nan\n", "lr=nan: must be a finite number"),
        ("[fixed]\nH = 1e400\n", "H=inf must be of type int"),
        ("[[block]]\nfactors = 3\n", r"\[factors\] must be a table"),
    ],
)
def test_specs_with_wrong_types(tmp_path, capsys, spec, match):
    """A spec with tables, seeds or values of the wrong type or value is refused in one line."""
    path = write_file(tmp_path / "s.toml", spec)
    refused(["simulate", path, "--out", tmp_path / "o.csv"], capsys, tmp_path, match)


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--seeds", "0,0"], "lists a seed twice"),
        (["--seeds", ""], "seeds="),
        (["--seeds", "0", "--cell", "H=1,lr=nan"], "lr=nan: must be a finite number"),
        # hostile review: a trailing comma and fullwidth digits were read as if right
        (["--seeds", "0,1,2,", "--cell", TINY], r"--seeds '0,1,2,': an empty seed between"),
        (["--seeds", "0,,1", "--cell", TINY], r"--seeds '0,,1': an empty seed between"),
        (["--seeds", "\uff11", "--cell", TINY], r"expected integers \(0-9\) separated by commas"),
        (["--cell", f"H=\uff11\uff16,{TINY}"], r"--cell: H='１６' is not a valid int"),
        (["--cell", f"lr=\uff10.1,{TINY}"], r"--cell: lr='０.1' is not a valid float"),
    ],
)
def test_simulate_nonsense(tmp_path, capsys, extra, match):
    """Refused in one line, nothing written."""
    argv = ["simulate", "--out", tmp_path / "o.csv", *extra]
    if "--cell" not in extra:
        argv += ["--cell", "H=1,steps=2"]
    refused(argv, capsys, tmp_path, match)


def test_simulate_empty_cell(tmp_path, capsys):
    """simulate --cell ',,,' is refused: it names no setting."""
    refused(
        ["simulate", "--cell", ",,,", "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        "names no setting",
    )


def test_a_blank_file_left_by_the_old_empty_seeds_bug_does_not_poison_the_path(tmp_path, capsys):
    """A blank file at --out is taken over: the run writes a table of one row."""
    out = write_file(tmp_path / "o.csv", "\n")
    tiny = "H=1,steps=2,width=4,embed=2,context=2,batch=2,eval_windows=8,M=1"
    code, _, err = run(["simulate", "--cell", tiny, "--out", out], capsys)
    assert code == 0, err
    assert len(pd.read_csv(out)) == 1


def test_resume_after_a_cut_off_last_row(tmp_path, capsys):
    """A rerun after a row cut off mid-write completes the table as a full run wrote it."""
    out = tmp_path / "o.csv"
    tiny = "H=1,steps=2,width=4,embed=2,context=2,batch=2,eval_windows=8,M=1"
    argv = ["simulate", "--cell", tiny, "--seeds", "0,1,2", "--out", out]
    assert run(argv, capsys)[0] == 0
    full = pd.read_csv(out)
    text = out.read_text()
    out.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 20])  # a run killed mid-row
    code, _, err = run(argv, capsys)
    assert code == 0, err
    again = pd.read_csv(out)
    assert len(again) == 3
    pd.testing.assert_frame_equal(
        again.drop(columns="wall_s"), full.drop(columns="wall_s"), check_dtype=False
    )


def test_simulate_out_that_is_not_a_file_name(tmp_path, capsys, monkeypatch):
    """simulate --out '' is refused, asking for a CSV file name."""
    monkeypatch.chdir(tmp_path)
    refused(["simulate", "--cell", "H=1", "--out", ""], capsys, tmp_path, "give a CSV file name")


@pytest.mark.parametrize(
    "link, target, match",
    [
        ("s.csv", "../elsewhere.csv", r"--out out/s.csv: is a symbolic link \(to \.\./elsewhere"),
        ("s.csv", "s-real.csv", r"--out out/s.csv: is a symbolic link"),
        ("s.manifest.json", "../m.json", r"its manifest out/s.manifest.json: is a symbolic link"),
    ],
)
def test_simulate_out_through_a_symbolic_link_is_refused_before_any_run(
    tmp_path, capsys, monkeypatch, link, target, match
):
    """Through a dangling link every run was appended to the file outside, and only the final
    rewrite refused the link, leaving that file (hostile review): now refused before any run,
    as every other output is (fitrules.base.outputs.StagedFile), with nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / link).symlink_to(target)
    refused(["simulate", "--cell", TINY, "--out", "out/s.csv"], capsys, tmp_path, match)
    assert not (tmp_path / "elsewhere.csv").exists() and not (tmp_path / "m.json").exists()


def test_the_cli_runs_a_committed_quadratic_spec_by_name(tmp_path, capsys):
    """simulate quadratic runs the committed quadratic spec by name, one row per seed."""
    out = tmp_path / "q.csv"
    cell = "H=4,keep=0.25,rounds=100,burn_in=10,dim=100"
    assert main(["simulate", "quadratic", "--cell", cell, "--seeds", "0,1", "--out", str(out),
                 "--quiet"]) == 0  # fmt: skip
    table = pd.read_csv(out)
    assert len(table) == 2 and (table["model"] == "quadratic").all() and (table["M"] == 32).all()


def test_simulate_leaves_a_finished_grid_untouched(tmp_path, capsys):
    """simulate on a finished grid leaves the table and its manifest byte for byte as they were.

    `make grids` right after a clone reran finished grids and rewrote their manifests."""
    for name in ("smoke.csv", "smoke.manifest.json"):
        shutil.copy2(DATA / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert run(["simulate", DATA / "specs" / "smoke.toml", "--out", tmp_path / "smoke.csv"],
               capsys)[0] == 0  # fmt: skip
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_simulate_reports_progress_when_stderr_is_not_a_terminal(tmp_path, capsys):
    """simulate prints its run count progress though stderr is not a terminal."""
    spec = DATA / "specs" / "smoke.toml"
    code, out, err = run(["simulate", spec, "--cell", "H=4,keep=0.5", "--out",
                          tmp_path / "x.csv"], capsys)  # fmt: skip
    assert code == 0 and "2 of 2 runs done" in err  # the smoke spec's seeds 0 and 1


@pytest.mark.timing
@pytest.mark.slow
def test_ctrl_c_on_a_local_cluster_is_one_line(tmp_path):
    """Ctrl-C reaches the whole process group: the cluster's nannies and workers printed 63
    lines with 4 KeyboardInterrupt tracebacks. Now the command's one line, runs kept."""
    import signal
    import time

    pytest.importorskip("distributed")
    out = tmp_path / "o.csv"
    spec = Path(fr.__file__).resolve().parents[1] / "data" / "specs" / "smoke.toml"
    if not spec.exists():
        pytest.skip("needs the checkout's smoke spec")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fitrules", "simulate", str(spec), "--out", str(out),
         "--scheduler", "local:2"],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(spec.parents[2])},
        # a terminal's command takes Ctrl-C; pytest may have inherited SIGINT ignored, and a
        # child inherits an ignored signal, so the test gives the command the terminal's default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    t0 = time.monotonic()
    while time.monotonic() - t0 < 180:
        if out.exists() and len(out.read_text().splitlines()) >= 3:  # header and two runs
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["fitrules simulate: interrupted"], err
    table = pd.read_csv(out)
    assert len(table) >= 2 and not table.duplicated().any()


def test_bad_spec_on_cli_exits_2_and_writes_nothing(tmp_path, capsys):
    """A spec with keep = -0.5 exits 2 in one line naming it and writes no table."""
    spec = tmp_path / "bad.toml"
    spec.write_text("[fixed]\nkeep = -0.5\n")
    out = tmp_path / "out.csv"
    assert main(["simulate", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "keep=-0.5" in err[0]
    assert not out.exists()
