"""Grids through the Python functions: fr.load_grid on DataFrames, exports and shipped
examples, outcome columns left out."""

from __future__ import annotations

import pytest
from exports import wandb_runs
from tables import two_losses

import fitrules as fr
from fitrules.base.errors import GridError
from helpers import run

SMALL = dict(terms=1, max_constants=3, factors="power", splits=4, inner_splits=4)


def test_load_grid_from_a_dataframe_names_it_and_hashes_its_content(df):
    """(Moved from tests/test_api.py.)"""
    a = fr.load_grid(df)
    b = fr.load_grid(df.copy())
    c = fr.load_grid(df.assign(loss=df["loss"] + 1e-9))
    assert a.sha256 == b.sha256 != c.sha256
    assert fr.load_grid("named.csv", frame=df).sha256 == a.sha256  # no longer empty
    with pytest.raises(fr.GridError, match="DataFrame: no column 'nope'"):
        a.cells(["nope"])


def test_duplicate_seed_names_the_cell_and_both_lines(tmp_path):
    """(Moved from tests/test_exports.py.)"""
    df = wandb_runs().drop_duplicates()
    df.loc[df.index[30], "seed"] = df["seed"].iloc[31]  # a seed typed twice in one cell
    path = tmp_path / "w.csv"
    df.to_csv(path, index=False)
    g = fr.load_grid(path, metric="val/loss", rename="inner_steps=H")
    match = r"seed \d appears more than once in cell H=\d+, compression.keep=[\d.]+ \(line 32 and"
    with pytest.raises(GridError, match=match + r" line 33\)"):
        g.cells(["H", "compression.keep"])
    with pytest.raises(GridError, match=match + r" line 33\)"):  # validate's check
        g.check_seeds()


def test_json_lines_errors_name_the_line(tmp_path):
    """(Moved from tests/test_exports.py.)"""
    path = tmp_path / "runs.jsonl"
    path.write_text('{"loss": 1, "H": 1}\n[1, 2]\n')
    with pytest.raises(GridError, match="line 2 holds a list; each run must be a JSON object"):
        fr.load_grid(path)
    path.write_text('{"loss": 1, "H": 1}\n{"loss": \n')
    with pytest.raises(GridError, match="line 2 is not JSON"):
        fr.load_grid(path)
    path.write_text('{"loss": 1.0, "H": 1}\n\n{"loss": "x", "H": 2}\n')
    with pytest.raises(GridError, match=r"holds text \('x' in line 3\)"):
        fr.load_grid(path)


@pytest.mark.parametrize(
    "rename, match",
    [
        ("inner_steps", "expected OLD=NEW"),
        ("=H", "expected OLD=NEW"),
        ("nope=H", "has no column 'nope'"),
        (["inner_steps=H", "inner_steps=G"], "renamed twice"),
        ("inner_steps=seed", "two columns named 'seed'"),
        (5, "give 'OLD=NEW' texts"),
    ],
)
def test_bad_rename(rename, match):
    """(Moved from tests/test_exports.py.)"""
    df = wandb_runs().drop_duplicates()
    with pytest.raises(GridError, match=match):
        fr.load_grid(df, metric="val/loss", rename=rename)


def test_shipped_grids_by_name(capsys):
    """(Moved from tests/test_notebook_api.py.)"""
    assert {"main", "wide", "paired_tuned"} <= set(fr.list_examples())
    assert fr.example_path("main", "spec").name == "main.toml"
    with pytest.raises(GridError, match="kind 'x'"):
        fr.example_path("main", "x")
    code, out, err = run(["validate", "--data", "wide"], capsys)
    assert code == 0 and out.startswith("data/wide.csv: sha256"), err


def test_search_leaves_the_second_loss_out_by_default_and_says_so():
    """(Moved from tests/test_outcome_columns.py.)"""
    df = two_losses()
    s = fr.search(fr.load_grid(df, metric="loss"), references=[], **SMALL)
    assert s.settings["variables"] == ["N", "M"]
    assert "loss_indist" in s.settings["left_out"]
    assert "left out of the variables as other outcomes of each run: loss_indist" in str(s)
    named = fr.search(
        fr.load_grid(df, metric="loss"), variables=["N", "loss_indist"], references=[], **SMALL
    )
    assert named.settings["variables"] == ["N", "loss_indist"] and not named.settings["left_out"]
