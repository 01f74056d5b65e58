import numpy as np
import pandas as pd
import pytest

from conftest import DATA, composition_grid
from fitrules.base.errors import GridError
from fitrules.model.grids import load_grid
from helpers import harness, write_table


def test_cells_are_seed_means_with_counts_and_standard_errors(synthetic_csv):
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
    df = composition_grid().rename(columns={"H": "sync interval"})
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    grid = load_grid(path, derive=["H = `sync interval`"], where=["`sync interval` > 1"])
    assert grid.runs["H"].min() == 4


def test_metric_choice(tmp_path):
    df = composition_grid().rename(columns={"loss": "val_loss"})
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    assert load_grid(path).metric == "val_loss"
    df["other"] = df["val_loss"] * 2
    df.to_csv(path, index=False)
    assert load_grid(path, metric="other").metric == "other"


def _write(tmp_path, mutate):
    df = composition_grid()
    df = mutate(df) if mutate else df
    return write_table(df, tmp_path / "bad.csv")


def _text_metric(df):
    df["loss"] = df["loss"].astype(object)
    df.loc[5, "loss"] = "oops"
    return df


def _neg_keep(df):
    df.loc[3, "keep"] = -0.5
    return harness(df)


def _dup_seed(df):
    return pd.concat([df, df.iloc[[0]]], ignore_index=True)


@pytest.mark.parametrize(
    "mutate, kwargs, match",
    [
        (lambda d: d.drop(columns="loss"), {}, "no metric column"),
        (None, {"metric": "acc"}, "no column 'acc'"),
        (_text_metric, {}, r"holds text \('oops' in line 7\)"),
        (_neg_keep, {}, r"'keep' has -0.5 in line 5; keep must be in \(0, 1\]"),
        (None, {"where": ["lr == 1"]}, "names 'lr', which is not a column"),
        (None, {"where": ["H == 1000"]}, "leaves no rows"),
        (None, {"where": ["H +"]}, "cannot parse"),
        (None, {"derive": ["omega = 1/keep"]}, "already has a column 'omega'"),
        (None, {"derive": ["z = foo(keep)"]}, "not allowed"),
        (None, {"derive": ["no equals"]}, "NAME = EXPRESSION"),
    ],
)
def test_bad_input_is_named(tmp_path, mutate, kwargs, match):
    with pytest.raises(GridError, match=match):
        load_grid(_write(tmp_path, mutate), **kwargs)


def test_duplicate_seed_in_a_cell(tmp_path):
    """A second run of seed 0 in a cell (not an exact copy): the cell and both lines named."""

    def second_run(df):
        return pd.concat([df, df.iloc[[0]].assign(loss=df["loss"].iloc[0] + 0.01)])

    with pytest.raises(GridError, match=r"seed 0 appears more than once in cell H=1, omega=0 "
                                        r"\(line 2 and line 62\)"):  # fmt: skip
        load_grid(_write(tmp_path, second_run)).cells(["H", "omega"])


def test_exact_copy_of_a_run(tmp_path):
    """An exact copy is refused with both lines named and --drop-duplicates offered; with it
    the copy is dropped and counted."""
    path = _write(tmp_path, _dup_seed)
    with pytest.raises(GridError, match="line 62 repeats line 2 in every column.*--drop-dup"):
        load_grid(path)
    grid = load_grid(path, drop_duplicates=True)
    assert grid.duplicates_dropped == 1
    assert len(grid.runs) == len(pd.read_csv(path)) - 1
    assert grid.summary()["duplicates_dropped"] == 1


def test_missing_file(tmp_path):
    with pytest.raises(GridError, match="file not found"):
        load_grid(tmp_path / "nope.csv")


def test_nan_in_a_variable(tmp_path):
    def mutate(df):
        df.loc[4, "H"] = np.nan
        return df

    with pytest.raises(GridError, match="'H' has a missing value in line 6"):
        load_grid(_write(tmp_path, mutate)).cells(["H", "omega"])
    with pytest.raises(GridError, match="'H' has nan in line 6; H must be finite"):
        load_grid(_write(tmp_path, lambda df: harness(mutate(df))))


@pytest.mark.parametrize("name", ["main", "wide", "workers", "variants", "paired", "smoke"])
def test_every_committed_grid_validates(name):
    grid = load_grid(DATA / f"{name}.csv")
    s = grid.summary()
    assert s["runs"] > 0 and s["cells"] > 0
    assert (DATA / f"{name}.manifest.json").exists()
    assert (DATA / "specs" / f"{name}.toml").exists()
