"""fitrules fit: constants, predictions and intervals printed, weights and objectives refused
where they cannot apply, nothing printed as inf."""

from __future__ import annotations

import json
import re

import pytest

import fitrules as fr
from conftest import DATA, composition_grid
from fitrules.cli import main
from fuzzing import NONFINITE
from helpers import refused, run


def test_unidentified_constants_and_their_prediction_print_no_inf(capsys):
    """Constants the cells do not identify print their intervals as unbounded, never as inf."""
    code, out, err = run(["fit", "--form=free_omega", "--objective=log_huber", "--by=keep",
                          "--predict=H=1,keep=0.125", "--resamples=20"], capsys)  # fmt: skip
    assert code == 0, err
    assert NONFINITE.search(out) is None, out
    assert "interval unbounded (not identified by these cells)" in out
    assert "over new seed ids unbounded" in out


def test_inverse_variance_refusal_shows_a_plain_nan(tmp_path, capsys):
    """Inverse-variance weights on one run per cell are refused naming a standard error of nan.

    The refusal printed ``np.float64(nan)``."""
    path = tmp_path / "one.csv"
    composition_grid(seeds=1).to_csv(path, index=False)
    line = refused(["fit", "--data", path, "--form", "composition", "--weights",
                    "inverse-variance"], capsys, tmp_path, "standard error nan")  # fmt: skip
    assert "np.float64" not in line


def test_log_huber_takes_cells_only(grid_csv, tmp_path, capsys):
    """``--weights runs`` with ``--objective log_huber`` is refused: log_huber weighs cells once.

    ``--weights runs --objective log_huber`` was accepted though the README says
    log_huber takes cells only."""
    argv = ["fit", "--data", grid_csv, "--form", "composition", "--weights", "runs",
            "--objective", "log_huber"]  # fmt: skip
    refused(argv, capsys, tmp_path, r"--weights runs: .*log_huber weighs every cell once")


@pytest.mark.parametrize("rows", [1, 2])
def test_fit_on_fewer_cells_than_constants_is_refused(tmp_path, capsys, rows):
    """``fit`` on fewer cells than the form has constants is refused, naming both counts.

    ``fit`` on a 1- or 2-row table exited 0."""
    path = tmp_path / "few.csv"
    composition_grid(seeds=1).head(rows).to_csv(path, index=False)
    refused(["fit", "--data", path, "--form", "composition"], capsys, tmp_path,
            f"has 3 constants but .* has {rows} cell")  # fmt: skip


def test_seeds_bootstrap_on_one_run_cells_is_never_zero_width(one_run_csv, capsys):
    """--bootstrap seeds on one run per cell resamples residuals; no interval is 0 wide."""
    code, out, err = run(
        ["fit", "--data", one_run_csv, "--form", "composition", "--intervals",
         "--bootstrap", "seeds"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "residuals, not seeds: 20 of 20 cells have a single run" in out
    for lo, hi in re.findall(r"\[([-\d.e+]+), ([-\d.e+]+)\]", out):
        assert float(hi) > float(lo), out


def test_fit_prints_constants(synthetic_csv, capsys):
    """fit prints the fitted constants and its diagnostics."""
    code, out, err = run(["fit", "--data", synthetic_csv, "--form", "composition"], capsys)
    assert code == 0, err
    assert "L0" in out and "diagnostics: none" in out


def test_fit_names_the_standard_error_and_the_interval_apart(capsys):
    """Issue 42, item 6: `L0 = 2.14773  ± 0.00602  [2.11608, 2.17937]` put a standard error
    beside an interval 5.3 standard errors wide, read as its half width; each number is
    now named, with the interval's level."""
    argv = ["fit", "--form", "composition", "--intervals", "--resamples", "40"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "±" not in out.split("standard errors:")[0].split("constants (")[1].split("\n", 1)[1]
    g = fr.load_example("main", where="lr == 3e-4")
    f = fr.fit(g, "composition", intervals=True, resamples=40)
    for c in f.constants:
        lo, hi = f.intervals[c]
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(f"{c} "))
        assert f"se {f.stderr[c]:.3g}" in line and f"95% interval [{lo:.6g}, {hi:.6g}]" in line
    assert "95% interval, which is not value ± se" in out
    code, out, err = run(["fit", "--form", "composition"], capsys)
    assert (
        "constants (value and standard error se):" in out
        and "interval" not in out.split("standard errors:")[0]
    )


@pytest.mark.parametrize(
    "argv, match",
    [
        (["fit", "--form", "composition", "--shared", "b"], "--shared needs --by"),
        (["fit", "--form", "composition", "--fix", "b"], "NAME=VALUE"),
        (["fit", "--form", "composition", "--bound", "b=3..1"], "LOW < HIGH"),
        (["fit", "--form", "composition", "--by", "nope"], "'nope' is not a column"),
        (
            [
                "fit",
                "--form",
                "composition",
                "--weights",
                "inverse-variance",
                "--objective",
                "log_huber",
            ],
            "log_huber weighs every cell once",
        ),  # fmt: skip
        (
            [
                "predict",
                "--form",
                "composition_per_h",
                "--at",
                "H=8,keep=0.5",
                "--ledger",
                "l.jsonl",
                "--resamples",
                "20",
            ],
            "none for H=8",
        ),  # fmt: skip
    ],
)
def test_bad_options_give_one_line(argv, match, capsys, tmp_path, monkeypatch):
    """Bad --shared, --fix, --bound, --by or weights, or a level with no constant: one line."""
    from fitrules.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err
    assert not (tmp_path / "l.jsonl").exists()


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--predict", "H=abc"], "not of the form NAME=NUMBER"),
        (["--intervals", "--level", "2"], r"--level 2.0: must be in \(0, 1\)"),
        (["--predict", "H=8"], "does not give omega"),
        (["--predict", "H=8,keep=0.5", "--resamples", "5"], "--resamples 5"),
    ],
)
def test_fit_with_a_bad_option_writes_no_report(grid_csv, tmp_path, capsys, extra, match):
    """fit with a bad --predict, --level or --resamples is refused and writes no report."""
    refused(
        ["fit", "--data", grid_csv, "--form", "composition", "--report", tmp_path / "R", *extra],
        capsys,
        tmp_path,
        match,
    )


@pytest.mark.parametrize(
    "point, match",
    [
        ("H=-1,omega=3", "H must be finite and >= 1"),
        ("H=8,omega=-5", "omega must be finite and >= 0"),
        ("H=inf,omega=1", "H=inf is not finite"),
        ("H=8,omega=1,zz=1", "'zz' is not a variable of form 'composition'"),
        ("H=8,keep=0.25,omega=7", "omega=7 contradicts 'omega = 1/keep - 1'"),
    ],
)
def test_prediction_points_are_checked(grid_csv, tmp_path, capsys, point, match):
    """A --predict point out of range, infinite, off the form or self-contradictory is refused."""
    argv = ["fit", "--data", grid_csv, "--form", "composition", "--predict", point]
    refused([*argv, "--resamples", "20"], capsys, tmp_path, match)


def test_a_consistent_keep_and_omega_are_accepted(grid_csv, capsys):
    """A --predict point giving both keep and the omega it implies is accepted and printed."""
    point = "H=8,keep=0.25,omega=3"
    argv = ["fit", "--data", grid_csv, "--form", "composition", "--predict", point]
    code, out, err = run([*argv, "--resamples", "20"], capsys)
    assert code == 0, err
    assert "prediction at H=8, keep=0.25, omega=3" in out


def test_an_infinite_condition_number_is_said_in_words(grid_csv, capsys):
    """A singular Jacobian's condition number is printed in words, never as inf."""
    code, out, err = run(
        ["fit", "--data", grid_csv, "--where", "keep == 1", "--form", "composition"], capsys
    )
    assert code == 0, err
    assert "condition number infinite (singular Jacobian)" in out
    assert not re.search(r"\binf\b", out)


def test_json_names_each_interval_kind(synthetic_csv, capsys):
    """fit --json names the kind of each prediction interval and of the bootstrap."""
    code = main(["fit", "--data", str(synthetic_csv), "--form", "composition",
                 "--predict", "H=8,keep=0.25", "--runs", "4", "--resamples", "20",
                 "--json", "-"])  # fmt: skip
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["predictions"][0]
    assert p["interval_kind"] == "held-out misfit: the configuration's mean over new seed ids"
    assert p["interval_runs_kind"] == "held-out misfit: the mean of 4 new runs at fresh seed ids"
    assert p["interval_grid_seeds_kind"] == (
        "held-out misfit: the configuration's mean at the grid's seed ids"
    )
    assert p["constants_interval_kind"].startswith("studentized bootstrap: the constants only")
    assert doc["bootstrap"]["kind"] == "studentized"
    assert doc["bootstrap"]["interval"] == "symmetric bootstrap-t"
    assert p["runs"] == 4 and len(p["interval_runs"]) == 2
    assert doc["prediction_intervals"]["kind"] == "held-out misfit"
    assert doc["prediction_intervals"]["refits"] == 20


def test_the_command_line_keeps_its_flags(capsys):
    """fit --predict without omega or keep is refused naming the --predict flag."""
    code, _, err = run(["fit", "--form", "composition", "--predict", "H=8"], capsys)
    assert code == 2 and "error: --predict 'H=8' does not give omega" in err


def test_fit_says_which_data_and_filter_and_predict_prints_a_point(tmp_path, capsys):
    """fit first names its data and filter; predict prints the point in words, not as a dict."""
    code, out, err = run(["fit", "--form", "composition"], capsys)
    assert code == 0 and out.startswith("data: data/main.csv") and "where lr == 3e-4" in out
    ledger = tmp_path / "p.jsonl"
    code, out, err = run(["predict", "--data", DATA / "smoke.csv", "--form", "composition",
                          "--at", "H=8,keep=0.25", "--ledger", ledger, "--resamples", 30],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "at H=8, keep=0.25 (" in out and "{" not in out


def test_a_grid_of_zeros_has_no_relative_training_error(grid_csv, tmp_path, capsys):
    """A fit to losses all 0 says the relative error is not defined instead of printing nan."""
    # found by the long fuzz run: float16 Parquet turned 1e-30 losses into 0; abs_ls fitted
    # them and printed 'mean nan%'
    composition_grid().assign(loss=0.0).to_csv(grid_csv, index=False)
    code, out, err = run(["fit", "--data", grid_csv, "--form", "composition", "--objective",
                          "abs_ls"], capsys)  # fmt: skip
    assert code == 0, err
    assert "nan" not in out and "relative error not defined" in out
