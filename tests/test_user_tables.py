"""A user's own results table, taken as it comes: per-run columns, a seed column of another
name, columns the harness gives a meaning to but this table does not."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import composition_grid
from fitrules.base.errors import GridError
from fitrules.model import expr as ex
from fitrules.model.grids import load_grid, where_suggestion
from helpers import run

IGNORED = "ignored per-run columns (no form reads them; they label runs, not cells): "


def user_table(seeds: int = 3) -> pd.DataFrame:
    """A composition grid as an ML researcher's logger would write it."""
    df = composition_grid(seeds=seeds).rename(columns={"seed": "run_seed"})
    n = len(df)
    df["run_name"] = [f"sweep-{i:03d}" for i in range(n)]
    df["timestamp"] = pd.date_range("2026-01-01", periods=n, freq="17min").astype(str)
    df["path"] = [f"runs/sweep-{i:03d}/final.pt" for i in range(n)]
    df["M"] = 0.07  # a model size in billions, not the harness's number of workers
    df["spec"] = "my sweep"  # names the harness uses, without the harness's manifest
    df["spec_sha256"] = "x"
    return df


@pytest.fixture
def user_csv(tmp_path):
    path = tmp_path / "my runs.csv"
    user_table().to_csv(path, index=False)
    return path


def test_every_command_runs_on_a_users_table(user_csv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = ["--data", user_csv, "--seed-col", "run_seed"]
    ignored = IGNORED + "run_name, timestamp, path"
    code, out, err = run(["validate", *data], capsys)
    assert code == 0, err
    assert "seed column: run_seed" in out and "M=0.07" in out
    assert (
        "per-run columns (a different label in every run; ignored): run_name, timestamp, path"
        in out
    )
    forms = ["--forms", "composition,additive"]
    code, out, err = run(["compare", *data, *forms, "--splits", 20, "--json", "c.json"], capsys)
    assert code == 0, err
    assert ignored in out
    saved = json.loads((tmp_path / "c.json").read_text())["data"]
    assert saved["ignored_columns"] == ["run_name", "timestamp", "path"]
    assert saved["seed_column"] == "run_seed" and saved["filtered_out"] == 0
    code, out, err = run(["fit", *data, "--form", "composition"], capsys)
    assert code == 0, err
    assert ignored in out
    code, out, err = run(
        ["design", *data, *forms, "--budget", 6, "--design-splits", 20, "--resamples", 20],
        capsys,
    )
    assert code == 0, err
    assert ignored in out and "--seed-col run_seed" in out  # the loop's commands carry it
    ledger = tmp_path / "l.jsonl"
    for at in ("H=16,keep=0.25", "H=4,keep=0.5"):
        predict = ["predict", *data, "--form", "composition", "--at", at, "--ledger", ledger]
        code, out, err = run([*predict, "--resamples", 20], capsys)
        assert code == 0, err
        assert ignored in out
    code, out, err = run(["score", *data, "--ledger", ledger], capsys)
    assert code == 0, err
    assert ignored in out and "fitted on this data: not a test" in out


def test_harness_checks_fire_only_on_harness_tables(tmp_path):
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
    df = user_table()
    df["n_params"] = np.where(df["H"] > 4, 1e9, 1e8)
    grid = load_grid(df, seed_col="run_seed")
    assert "n_params" in grid.varying_factors
    assert "n_params" in grid.summary()["levels"]


def test_seed_column_by_name(user_csv):
    grid = load_grid(user_csv, seed_col="run_seed")
    assert grid.seed == "run_seed"
    # a column that looks like the seed is never pooled or filtered: --seed-col is named
    # (issue 32; it was taken for runs that are repeats)
    with pytest.raises(GridError, match="'run_seed' looks like each run's seed.*--seed-col"):
        load_grid(user_csv)
    with pytest.raises(GridError, match="no column 'rs' for --seed-col; columns: H, keep"):
        load_grid(user_csv, seed_col="rs")
    df = user_table()
    # the same seed twice in one cell, with another loss (an exact copy is refused when read)
    df = pd.concat([df, df.iloc[[0]].assign(loss=df["loss"].iloc[0] + 0.1)], ignore_index=True)
    with pytest.raises(GridError, match="seed 0 appears more than once"):
        load_grid(df, seed_col="run_seed").cells(["H", "omega"])


def test_a_factor_like_column_is_pooled_and_reported(tmp_path, capsys):
    a, b = user_table(), user_table()
    a["opt name"], b["opt name"] = "adam", "lion"
    b["run_name"] = b["run_name"] + "-b"
    path = tmp_path / "two.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    grid = load_grid(path, seed_col="run_seed")
    cols = grid.run_columns(["H", "omega"])
    assert cols["pooled"] == {"opt name": ["adam", "lion"]}
    assert "keep" not in cols["pooled"]  # a function of omega: never varies within a cell
    code, out, err = run(
        ["fit", "--data", path, "--seed-col", "run_seed", "--form", "composition"], capsys
    )
    assert code == 0, err
    (note,) = [line for line in out.splitlines() if "looks like a factor" in line]
    assert "'opt name' varies within cells" in note and "each cell pools its levels" in note
    # the suggested filter is a valid expression (the name has a space: backticks)
    suggestion = note.split('filter with where "')[1].split('"')[0]
    assert suggestion == "`opt name` == 'adam'"
    code, out, err = run(["validate", path, "--seed-col", "run_seed", "--where", suggestion],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "filtered out by --where: 60; runs kept: 60" in out


@pytest.mark.parametrize(
    "column, value", [("model name", "m0"), ("lr", 3e-4), ("H", 16), ("x-y", "a")]
)
def test_where_suggestions_parse(column, value):
    text = where_suggestion(column, value)
    node = ex.parse(text, logical=True, what="where")
    assert ex.names(node) == [column]


def test_rows_filtered_out_are_counted_in_text_and_json(user_csv, tmp_path, capsys):
    j = tmp_path / "f.json"
    code, out, err = run(
        ["fit", "--data", user_csv, "--seed-col", "run_seed", "--where", "H > 1",
         "--form", "composition", "--json", j], capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(j.read_text())["data"]["filtered_out"] == 15
    code, out, err = run(
        ["fit", "--data", user_csv, "--seed-col", "run_seed", "--where", "H > 1",
         "--form", "composition"], capsys)  # fmt: skip
    assert "filtered out by where: 15 rows" in out
