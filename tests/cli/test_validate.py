"""fitrules validate: what it says of a grid, its levels and what it left out."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
from tables import chinchilla_like, two_losses

from conftest import DATA
from fuzzing import NONFINITE
from helpers import run


def test_validate_names_a_missing_level(tmp_path, capsys):
    """validate lists a missing value of omega as a level "missing", never as nan."""
    rows = [{"H": h, "omega": o, "seed": s, "loss": 2 + 0.01 * h + 0.001 * s}
            for h in (1, 4) for o in (1.0, 3.0, np.nan) for s in (0, 1)]  # fmt: skip
    path = tmp_path / "g.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, out, err = run(["validate", path], capsys)
    assert code == 0, err
    assert "omega (3): 1, 3, missing" in out
    assert NONFINITE.search(out) is None, out


def test_validate_summary(synthetic_csv, capsys):
    """validate prints the number of cells and each variable's levels."""
    code, out, _ = run(["validate", synthetic_csv], capsys)
    assert code == 0
    assert "cells: 20" in out and "H (4): 1, 4, 16, 64" in out


def test_validate_says_what_it_left_out(tmp_path, capsys):
    """validate names the other outcome columns it left out, such as one named like the metric."""
    path = tmp_path / "two.csv"
    two_losses().to_csv(path, index=False)
    code, out, err = run(["validate", path, "--metric", "loss"], capsys)
    assert code == 0, err
    assert "cells: 16 " in out
    line = next(x for x in out.splitlines() if x.startswith("left out as other outcomes"))
    assert "loss_indist (named like the metric 'loss')" in line


def test_validate_refuses_a_path_and_data_together(synthetic_csv, capsys):
    """validate given both a path and --data is refused: give the grid once."""
    code, _, err = run(["validate", synthetic_csv, "--data", DATA / "main.csv"], capsys)
    assert code == 2 and "give the grid once" in err


def test_validate_on_a_grid_of_one_run_per_cell(tmp_path, capsys):
    """On one run per cell validate says no seed column, lists labels once, counts as compare."""
    csv = tmp_path / "chin.csv"
    chinchilla_like().to_csv(csv, index=False)
    derive = ["--derive", "N = `Model Size`", "--derive", "D = `Training FLOP`/(6*N)"]
    code, out, err = run(["validate", csv, *derive], capsys)
    assert code == 0, err
    assert "seed column: None" not in out and "seed column: none" in out
    # a text column with a different value in every run labels runs: listed once, not as
    # a factor of 40 levels
    (labels,) = [line for line in out.splitlines() if line.startswith("per-run columns")]
    assert labels.endswith(": color") and "#" not in out
    assert re.search(r"Model Size \(1\d levels\): [\d.e+]+ to [\d.e+]+", out)
    # validate counts the same cells as compare
    cells = int(re.search(r"cells: (\d+)", out).group(1))
    j = tmp_path / "c.json"
    form = "chin(N, D) = E + A/N**alpha + B/D**beta"
    assert run(["compare", "--data", csv, *derive, "--form", form, "--splits", 5,
                "--train-frac", "0.5", "--json", j], capsys)[0] == 0  # fmt: skip
    assert cells == json.loads(j.read_text())["data"]["cells"] == 40
