"""Grids and loading (fitrules.model.grids): cells from runs, what is excluded and counted,
derived columns and filters, bad tables named, users' tables, outcome columns, indexes,
units, the committed grids."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest
from tables import two_losses, user_table

from conftest import DATA, KEEP_LEVELS, ROOT, composition_grid
from fitrules.base.errors import GridError
from fitrules.model import expr as ex
from fitrules.model.grids import load_grid, where_suggestion
from helpers import bad_table, harness, negative_keep, text_metric


def _dup_seed(df):
    return pd.concat([df, df.iloc[[0]]], ignore_index=True)


def _two_lrs() -> pd.DataFrame:
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] + 0.5)
    return pd.concat([a, b], ignore_index=True)


def test_cells_are_seed_means_with_counts_and_standard_errors(synthetic_csv):
    """A cell holds its seeds' mean, their count and the standard error of the mean."""
    grid = load_grid(synthetic_csv)
    cells = grid.cells(["H", "omega"])
    assert len(cells) == 20
    raw = pd.read_csv(synthetic_csv)
    one = raw[(raw.H == 4) & (raw.keep == 0.25)]["loss"]
    row = cells.table[(cells.table.H == 4) & (cells.table.omega == 3.0)].iloc[0]
    assert row["value"] == pytest.approx(one.mean())
    assert row["n_seeds"] == 3
    assert row["sem"] == pytest.approx(one.std(ddof=1) / np.sqrt(3))


def test_diverged_and_nonfinite_rows_are_excluded_and_counted(tmp_path):
    """Diverged runs and nan or inf metrics are left out and counted by reason."""
    df = composition_grid()
    df.loc[0, "diverged"] = True
    df.loc[1, "loss"] = np.nan
    df.loc[2, "loss"] = np.inf
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    grid = load_grid(path)
    assert grid.summary()["excluded"] == {"diverged": 1, "non-finite metric": 2}
    assert len(grid.runs) == len(df) - 3


def test_derive_and_where(tmp_path):
    """A derived column is added, a two-level lr is pooled and named, and where filters rows."""
    df = composition_grid().drop(columns="omega")
    df["lr"] = 3e-4
    df2 = df.copy()
    df2["lr"] = 1e-3
    path = tmp_path / "g.csv"
    pd.concat([df, df2]).to_csv(path, index=False)
    # lr looks like a factor (2 levels, each in every cell): pooled, and said so
    mixed = load_grid(path, derive=["omega = 1/keep - 1"])
    assert mixed.run_columns(["H", "omega"])["pooled"] == {"lr": [0.0003, 0.001]}
    assert (mixed.cells(["H", "omega"]).table["n_seeds"] == 6).all()
    grid = load_grid(path, where=["lr == 3e-4"], derive=["omega = 1/keep - 1"])
    assert grid.filtered_out == len(df2)
    assert sorted(grid.runs["omega"].unique()) == [0, 1, 3, 7, 15]


def test_backtick_names(tmp_path):
    """A column name with a space is read in backquotes by derive and where."""
    df = composition_grid().rename(columns={"H": "sync interval"})
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    grid = load_grid(path, derive=["H = `sync interval`"], where=["`sync interval` > 1"])
    assert grid.runs["H"].min() == 4


def test_metric_choice(tmp_path):
    """A lone loss-like column is the metric; another column can be named instead."""
    df = composition_grid().rename(columns={"loss": "val_loss"})
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    assert load_grid(path).metric == "val_loss"
    df["other"] = df["val_loss"] * 2
    df.to_csv(path, index=False)
    assert load_grid(path, metric="other").metric == "other"


@pytest.mark.parametrize(
    "mutate, kwargs, match",
    [
        (lambda d: d.drop(columns="loss"), {}, "no metric column"),
        (None, {"metric": "acc"}, "no column 'acc'"),
        (text_metric(5, "oops"), {}, r"holds text \('oops' in line 7\)"),
        (negative_keep(3, -0.5), {}, r"'keep' has -0.5 in line 5; keep must be in \(0, 1\]"),
        (None, {"where": ["lr == 1"]}, "names 'lr', which is not a column"),
        (None, {"where": ["H == 1000"]}, "leaves no rows"),
        (None, {"where": ["H +"]}, "cannot parse"),
        (None, {"derive": ["omega = 1/keep"]}, "already has a column 'omega'"),
        (None, {"derive": ["z = foo(keep)"]}, "not allowed"),
        (None, {"derive": ["no equals"]}, "NAME = EXPRESSION"),
    ],
)
def test_bad_input_is_named(tmp_path, mutate, kwargs, match):
    """A missing or textual metric, a bad keep, where or derive is refused naming the problem."""
    with pytest.raises(GridError, match=match):
        load_grid(bad_table(tmp_path, mutate), **kwargs)


def test_duplicate_seed_in_a_cell(tmp_path):
    """A second run of seed 0 in a cell (not an exact copy): the cell and both lines named."""

    def second_run(df):
        return pd.concat([df, df.iloc[[0]].assign(loss=df["loss"].iloc[0] + 0.01)])

    with pytest.raises(GridError, match=r"seed 0 appears more than once in cell H=1, omega=0 "
                                        r"\(line 2 and line 62\)"):  # fmt: skip
        load_grid(bad_table(tmp_path, second_run)).cells(["H", "omega"])


def test_exact_copy_of_a_run(tmp_path):
    """An exact copy is refused with both lines named and --drop-duplicates offered; with it
    the copy is dropped and counted."""
    path = bad_table(tmp_path, _dup_seed)
    with pytest.raises(GridError, match="line 62 repeats line 2 in every column.*drop_dup"):
        load_grid(path)
    grid = load_grid(path, drop_duplicates=True)
    assert grid.duplicates_dropped == 1
    assert len(grid.runs) == len(pd.read_csv(path)) - 1
    assert grid.summary()["duplicates_dropped"] == 1


def test_missing_file(tmp_path):
    """A grid file that does not exist is refused as not found."""
    with pytest.raises(GridError, match="file not found"):
        load_grid(tmp_path / "nope.csv")


def test_nan_in_a_variable(tmp_path):
    """A missing value in a variable is refused naming the column and line."""

    def mutate(df):
        df.loc[4, "H"] = np.nan
        return df

    with pytest.raises(GridError, match="'H' has a missing value in line 6"):
        load_grid(bad_table(tmp_path, mutate)).cells(["H", "omega"])
    with pytest.raises(GridError, match="'H' has nan in line 6; H must be finite"):
        load_grid(bad_table(tmp_path, lambda df: harness(mutate(df))))


@pytest.mark.parametrize("name", ["main", "wide", "workers", "variants", "paired", "smoke"])
def test_every_committed_grid_validates(name):
    """Every committed grid loads with runs and cells, beside its manifest and spec."""
    grid = load_grid(DATA / f"{name}.csv")
    s = grid.summary()
    assert s["runs"] > 0 and s["cells"] > 0
    assert (DATA / f"{name}.manifest.json").exists()
    assert (DATA / "specs" / f"{name}.toml").exists()


def test_second_loss_column_is_left_out_of_cells_and_named():
    """A second loss column is named outcome-like and does not split the cells."""
    g = load_grid("two.csv", frame=two_losses(), metric="loss")
    assert "loss_indist" in g.outcome_like
    summary = g.summary()
    assert summary["cells"] == 16
    assert "loss_indist" not in summary["cells_by"]


def test_per_run_measurement_in_a_seeded_grid_is_an_outcome():
    """A column with a value per run in a seeded grid is an outcome, not a factor."""
    df = two_losses(seeds=3).drop(columns="loss_indist")
    df["wall"] = np.random.default_rng(1).uniform(100, 200, len(df))  # a value per run
    g = load_grid("seeded.csv", frame=df, metric="loss")
    assert "wall" in g.outcome_like and g.summary()["cells"] == 16


def test_continuous_design_without_seeds_is_kept():
    """A compute budget with a value per run is a design column when nothing repeats."""
    df = two_losses().drop(columns="loss_indist")
    df["C"] = 6 * df["N"] * df["M"] * df["N"] / 20 * (1 + np.arange(len(df)) * 1e-6)
    g = load_grid("budget.csv", frame=df, metric="loss")
    assert "C" not in g.outcome_like and "C" in g.continuous


def test_harness_checks_fire_only_on_harness_tables(tmp_path):
    """A keep of 1.5 passes in a user's table but is refused beside a harness manifest."""
    df = user_table()
    df.loc[0, "keep"] = 1.5  # not a keep fraction here; no form reads it
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    grid = load_grid(path, seed_col="run_seed")
    assert not grid.harness and "n_params" not in grid.non_factors
    # the same table with the manifest the harness writes beside its tables
    (tmp_path / "t.manifest.json").write_text('{"spec_sha256": "x"}')
    with pytest.raises(GridError, match="'keep' has 1.5 in line 2; keep must be in"):
        load_grid(path, seed_col="run_seed")


def test_n_params_is_a_factor_of_a_users_table():
    """In a user's table n_params is a varying factor with its levels listed."""
    df = user_table()
    df["n_params"] = np.where(df["H"] > 4, 1e9, 1e8)
    grid = load_grid(df, seed_col="run_seed")
    assert "n_params" in grid.varying_factors
    assert "n_params" in grid.summary()["levels"]


def test_seed_column_by_name(user_csv):
    """The seed column is named with --seed-col; a seed-like column or a wrong name is refused."""
    grid = load_grid(user_csv, seed_col="run_seed")
    assert grid.seed == "run_seed"
    # a column that looks like the seed is never pooled or filtered: --seed-col is named
    # (issue 32; it was taken for runs that are repeats)
    with pytest.raises(GridError, match="'run_seed' looks like each run's seed.*--seed-col"):
        load_grid(user_csv)
    with pytest.raises(GridError, match="no column 'rs' for seed_col; columns: H, keep"):
        load_grid(user_csv, seed_col="rs")
    df = user_table()
    # the same seed twice in one cell, with another loss (an exact copy is refused when read)
    df = pd.concat([df, df.iloc[[0]].assign(loss=df["loss"].iloc[0] + 0.1)], ignore_index=True)
    with pytest.raises(GridError, match="seed 0 appears more than once"):
        load_grid(df, seed_col="run_seed").cells(["H", "omega"])


@pytest.mark.parametrize(
    "column, value", [("model name", "m0"), ("lr", 3e-4), ("H", 16), ("x-y", "a")]
)
def test_where_suggestions_parse(column, value):
    """A suggested where clause parses and names just its column, however the name is spelt."""
    text = where_suggestion(column, value)
    node = ex.parse(text, logical=True, what="where")
    assert ex.names(node) == [column]


def test_parquet_needs_an_extra_that_exists(tmp_path, monkeypatch):
    """Without a parquet engine the error names the fitrules[parquet] extra, which exists."""
    from fitrules.base.errors import GridError
    from fitrules.model.grids import load_grid

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("pyarrow") for d in extras["parquet"])

    def no_engine(*a, **k):
        raise ImportError("Unable to find a usable engine")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    (tmp_path / "g.parquet").write_bytes(b"PAR1")
    with pytest.raises(GridError, match=r"fitrules\[parquet\]"):
        load_grid(tmp_path / "g.parquet")


def test_a_named_index_is_a_column_through_the_api():
    """A frame's named index is read as a column, and pooled as a factor no form reads."""
    from fitrules.model.grids import load_grid

    g = load_grid(_two_lrs().set_index("lr"))
    assert "lr" in g.columns
    # a column, so not dropped silently: it is a factor no form reads, pooled and said so
    # (issue 21), or refused where pooling would put one seed twice in a level
    assert "lr" in g.run_columns(["H", "omega"])["pooled"]


def test_keep_levels_fixture_matches_main_grid():
    """The fixture's keep levels are those of the committed main grid."""
    assert sorted(pd.read_csv(DATA / "main.csv")["keep"].unique()) == sorted(KEEP_LEVELS)


def test_a_grids_summary_is_made_once_and_handed_out_as_a_copy(monkeypatch):
    """Grid.summary reads the runs once per grid; changing what it returned changes nothing."""
    from fitrules.model import grid_class

    grid = load_grid(DATA / "main.csv", where="lr == 3e-4")
    calls = []
    per_run = grid_class.per_run_columns
    monkeypatch.setattr(grid_class, "per_run_columns", lambda *a: calls.append(1) or per_run(*a))
    first = grid.summary()
    levels = list(first["levels"]["H"])
    first["levels"]["H"].append(-1)
    assert grid.summary()["levels"]["H"] == levels
    assert len(calls) == 1
