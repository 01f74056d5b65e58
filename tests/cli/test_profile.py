"""fitrules fit --intervals profile and --constraint: printed, named, refused in one line."""

from __future__ import annotations

import json

import pytest

from helpers import refused, run


def test_cli_profile_intervals_are_named_and_kept_in_the_json(one_run_csv, capsys):
    """--intervals profile prints the profile intervals and their method; --json has them."""
    code, out, err = run(["fit", "--data", one_run_csv, "--form", "composition",
                          "--intervals", "profile"], capsys)  # fmt: skip
    assert code == 0, err
    assert "intervals: 95% profile likelihood" in out
    code, out, err = run(["fit", "--data", one_run_csv, "--form", "composition",
                          "--intervals", "profile", "--json", "-"], capsys)  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["profile"]["constants"]) == {"L0", "a", "b"}


def test_cli_intervals_without_a_method_is_the_bootstrap(one_run_csv, capsys):
    """A bare --intervals before another option keeps its old meaning."""
    code, out, err = run(["fit", "--data", one_run_csv, "--intervals", "--form", "composition",
                          "--resamples", "20"], capsys)  # fmt: skip
    assert code == 0, err
    assert "bootstrap" in out and "profile likelihood" not in out


def test_cli_constraint_is_enforced_and_reported(one_run_csv, capsys):
    """--constraint 'b <= 0.3' holds at the fit and is reported as active."""
    code, out, err = run(["fit", "--data", one_run_csv, "--form", "composition",
                          "--constraint", "b <= 0.3", "--json", "-"], capsys)  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["constants"]["b"] == pytest.approx(0.3, abs=1e-6)
    assert doc["constraints"]["active"] == ["b <= 0.3"]


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--constraint", "b > q"], r"--constraint 'b > q'.*'q' is not a free constant"),
        (["--constraint", "a*b >= 1"], "not linear in the constants"),
        (["--constraint", "b"], "write one comparison"),
        (["--constraint", "b > 0", "--intervals"], "--intervals bootstrap with --constraint"),
        (["--intervals", "wald"], "invalid choice: 'wald'"),
    ],
)
def test_cli_bad_constraints_are_refused_in_one_line(one_run_csv, tmp_path, capsys, extra, match):
    """An unknown constant, a nonlinear constraint, a bootstrap with constraints, an
    unknown interval method: one line, nothing written."""
    refused(["fit", "--data", one_run_csv, "--form", "composition", *extra], capsys, tmp_path,
            match)  # fmt: skip
