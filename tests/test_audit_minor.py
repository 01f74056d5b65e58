"""The minor items of the third hostile audit (issue 31), each fixed: a message that misled
or an input accepted silently. The rest of that audit's cases are in test_search_limits,
test_outputs_inputs, test_names, test_input_files, test_bootstrap_checks and
test_api_arguments.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError, FormError
from helpers import refused, run


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "grid.csv"
    composition_grid().to_csv(path, index=False)
    return path


def test_inverse_variance_refusal_shows_a_plain_nan(tmp_path, capsys):
    """The refusal printed ``np.float64(nan)``."""
    path = tmp_path / "one.csv"
    composition_grid(seeds=1).to_csv(path, index=False)
    line = refused(["fit", "--data", path, "--form", "composition", "--weights",
                    "inverse-variance"], capsys, tmp_path, "standard error nan")  # fmt: skip
    assert "np.float64" not in line


def test_shared_naming_every_constant_says_so():
    """It was refused with an unrelated "declared variable(s)" message."""
    df = composition_grid()
    df["M"] = (df["keep"] < 0.3).astype(int) + 1
    with pytest.raises(FormError, match="shared names every constant"):
        fr.fit(fr.load_grid(df), "composition", by="M", shared="L0,a,b")


def test_log_huber_takes_cells_only(grid_csv, tmp_path, capsys):
    """``--weights runs --objective log_huber`` was accepted though the README says
    log_huber takes cells only."""
    argv = ["fit", "--data", grid_csv, "--form", "composition", "--weights", "runs",
            "--objective", "log_huber"]  # fmt: skip
    refused(argv, capsys, tmp_path, r"--weights runs: .*log_huber weighs every cell once")


@pytest.mark.parametrize("rows", [1, 2])
def test_fit_on_fewer_cells_than_constants_is_refused(tmp_path, capsys, rows):
    """``fit`` on a 1- or 2-row table exited 0."""
    path = tmp_path / "few.csv"
    composition_grid(seeds=1).head(rows).to_csv(path, index=False)
    refused(["fit", "--data", path, "--form", "composition"], capsys, tmp_path,
            f"has 3 constants but .* has {rows} cell")  # fmt: skip


def test_search_variable_with_one_value(tmp_path, capsys):
    """``search --variables width`` (one value) was refused as a duplicate seed."""
    path = tmp_path / "w.csv"
    composition_grid().assign(width=64).to_csv(path, index=False)
    refused(["search", "--data", path, "--variables", "width"], capsys, tmp_path,
            "'width' has one value .*64.*columns that vary")  # fmt: skip


def test_levels_with_more_levels_than_the_budget(tmp_path, capsys):
    """``--levels G`` with 500 levels ran without saying no such form fits the budget."""
    df = pd.DataFrame({"H": [1.0, 4.0, 16.0, 64.0] * 125, "G": range(500), "seed": 0})
    df["loss"] = 2 + 0.01 * df["H"]
    path = tmp_path / "lev.csv"
    df.to_csv(path, index=False)
    refused(["search", "--data", path, "--variables", "H", "--levels", "G"], capsys, tmp_path,
            "'G' has 500 levels.*--max-constants 4")  # fmt: skip


def test_design_takes_form_options():
    """``fr.design`` had no ``by=`` though the README says design takes it."""
    import inspect

    params = inspect.signature(fr.design).parameters
    assert {"fix", "bounds", "by", "shared"} <= set(params)
    with pytest.raises(FitrulesError, match="fix 5"):
        fr.design(composition_grid(), forms=["composition", "additive"], fix=5)


def test_report_placeholder_left_by_a_killed_run_is_taken(grid_csv, tmp_path, capsys,
                                                         monkeypatch):  # fmt: skip
    """After kill -9 the empty report placeholder blocked a plain rerun, and 0-byte
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
    from fitrules.base.outputs import ReservedDir

    held = ReservedDir(tmp_path / "R", force=False)
    try:
        argv = ["fit", "--data", grid_csv, "--form", "composition", "--report", tmp_path / "R"]
        refused(argv, capsys, tmp_path, "exists, being written by another fitrules run")
    finally:
        held.release()
