"""Columns that look like another outcome of each run are not design columns.

Issue 29: on an over-training table with outcome columns ``loss`` and ``loss_indist`` the
search read ``N, M, loss_indist`` by default and ``validate`` counted cells over the second
loss column. Both now leave such a column out and say so; naming it still reads it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import fitrules as fr
from fitrules.model.grids import load_grid
from tests.helpers import run

SMALL = dict(terms=1, max_constants=3, factors="power", splits=4, inner_splits=4)


def _two_losses(seeds: int = 1) -> pd.DataFrame:
    """An N x M grid (4 x 4) with the metric ``loss`` and a second, correlated outcome."""
    rng = np.random.default_rng(29)
    rows = []
    for N in (1e7, 3e7, 1e8, 3e8):
        for M in (5, 10, 20, 40):
            for s in range(seeds):
                loss = 2 + 40 * N**-0.25 + 3 * (M * N) ** -0.1 + 0.005 * rng.standard_normal()
                rows.append(
                    {
                        "N": N,
                        "M": M,
                        "seed": s,
                        "loss": loss,
                        "loss_indist": 0.9 * loss + 0.01 * rng.standard_normal(),
                    }
                )
    df = pd.DataFrame(rows)
    return df if seeds > 1 else df.drop(columns="seed")


def test_second_loss_column_is_left_out_of_cells_and_named():
    g = load_grid("two.csv", frame=_two_losses(), metric="loss")
    assert "loss_indist" in g.outcome_like
    summary = g.summary()
    assert summary["cells"] == 16
    assert "loss_indist" not in summary["cells_by"]


def test_validate_says_what_it_left_out(tmp_path, capsys):
    path = tmp_path / "two.csv"
    _two_losses().to_csv(path, index=False)
    code, out, err = run(["validate", path, "--metric", "loss"], capsys)
    assert code == 0, err
    assert "cells: 16 " in out
    line = next(x for x in out.splitlines() if x.startswith("left out as other outcomes"))
    assert "loss_indist (named like the metric 'loss')" in line


def test_per_run_measurement_in_a_seeded_grid_is_an_outcome():
    df = _two_losses(seeds=3).drop(columns="loss_indist")
    df["wall"] = np.random.default_rng(1).uniform(100, 200, len(df))  # a value per run
    g = load_grid("seeded.csv", frame=df, metric="loss")
    assert "wall" in g.outcome_like and g.summary()["cells"] == 16


def test_continuous_design_without_seeds_is_kept():
    """A compute budget with a value per run is a design column when nothing repeats."""
    df = _two_losses().drop(columns="loss_indist")
    df["C"] = 6 * df["N"] * df["M"] * df["N"] / 20 * (1 + np.arange(len(df)) * 1e-6)
    g = load_grid("budget.csv", frame=df, metric="loss")
    assert "C" not in g.outcome_like and "C" in g.continuous


def test_search_leaves_the_second_loss_out_by_default_and_says_so():
    df = _two_losses()
    s = fr.search(fr.load_grid(df, metric="loss"), references=[], **SMALL)
    assert s.settings["variables"] == ["N", "M"]
    assert "loss_indist" in s.settings["left_out"]
    assert "left out of the variables as other outcomes of each run: loss_indist" in str(s)
    named = fr.search(
        fr.load_grid(df, metric="loss"), variables=["N", "loss_indist"], references=[], **SMALL
    )
    assert named.settings["variables"] == ["N", "loss_indist"] and not named.settings["left_out"]
