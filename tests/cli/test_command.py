"""The fitrules command as a whole: python -m fitrules, argument errors in one line, seeds,
--quiet, the default grid."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers import refused, run

SPLITS = ["--splits", "5"]


def test_python_dash_m_fitrules():
    """python -m fitrules --version runs and prints the program's name and version."""
    res = subprocess.run(
        [sys.executable, "-m", "fitrules", "--version"], capture_output=True, text=True
    )
    assert res.returncode == 0 and res.stdout.startswith("fitrules ")


def test_argument_errors_exit_2_with_one_line(capsys):
    """A value argparse cannot read (--splits many) exits 2 with argparse's one error line."""
    code, _, err = run(["compare", "--splits", "many"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "fitrules compare: error: argument --splits: invalid int value: 'many'"
    ]


def test_default_grid_is_used_without_data(capsys):
    """validate without --data reads the committed grid, data/main.csv."""
    code, out, err = run(["validate"], capsys)
    assert code == 0, err
    assert "data/main.csv" in out and np.isfinite(1.0)


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", *SPLITS, "--seed", "-1"],
        ["fit", "--form", "composition", "--intervals", "--bootstrap-seed", "-1"],
        ["ci", "--baseline", "H=1,keep=1", "--treatment", "H=4,keep=1", "--seed", "-1"],
    ],
)
def test_negative_seeds(grid_csv, tmp_path, capsys, argv):
    """A negative --seed or --bootstrap-seed is refused in one line by compare, fit and ci."""
    refused([*argv, "--data", grid_csv], capsys, tmp_path, "seed must be an integer from 0")


def test_quiet(synthetic_csv, capsys):
    """compare --quiet succeeds and prints nothing on stdout or stderr."""
    code, out, err = run(["compare", "--data", synthetic_csv, "--splits", 5, "--quiet"], capsys)
    assert code == 0 and out == "" and err == ""


@pytest.mark.parametrize(("preset", "seen"), [(None, "1"), ("2", "2")])
def test_one_blas_thread_unless_the_environment_chose(monkeypatch, preset, seen):
    """The command's job runs with one OpenBLAS thread (its products are tiny), unless the
    user's environment set OPENBLAS_NUM_THREADS, which wins."""
    import os

    from fitrules.cli import app, commands

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", preset or "")  # restored after the test
    if preset is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    seen_by_job = []

    def job(args):
        seen_by_job.append(os.environ.get("OPENBLAS_NUM_THREADS"))
        return 0

    monkeypatch.setitem(commands.HANDLERS, "compare", job)
    assert app.main(["compare"]) == 0
    assert seen_by_job == [seen]
