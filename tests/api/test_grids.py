"""Grids through the Python functions: fr.load_grid on DataFrames, exports and shipped
examples, outcome columns left out."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
from exports import wandb_runs
from tables import two_losses

import fitrules as fr
from conftest import DATA
from fitrules.base.errors import GridError
from helpers import run

SMALL = dict(terms=1, max_constants=3, factors="power", splits=4, inner_splits=4)


def test_load_grid_from_a_dataframe_names_it_and_hashes_its_content(df):
    """A DataFrame grid is labelled DataFrame and hashed by content: a 1e-9 change changes it."""
    a = fr.load_grid(df)
    b = fr.load_grid(df.copy())
    c = fr.load_grid(df.assign(loss=df["loss"] + 1e-9))
    assert a.sha256 == b.sha256 != c.sha256
    assert fr.load_grid("named.csv", frame=df).sha256 == a.sha256  # no longer empty
    with pytest.raises(fr.GridError, match="DataFrame: no column 'nope'"):
        a.cells(["nope"])


def test_duplicate_seed_names_the_cell_and_both_lines(tmp_path):
    """A seed repeated in one cell is refused, by cells() and check_seeds, naming both lines."""
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
    """A JSON-lines table's list, broken JSON or text loss is refused naming its line."""
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
    """fr.load_grid refuses a rename malformed, of no column, repeated, colliding or not text."""
    df = wandb_runs().drop_duplicates()
    with pytest.raises(GridError, match=match):
        fr.load_grid(df, metric="val/loss", rename=rename)


def test_shipped_grids_by_name(capsys):
    """The shipped examples are listed and found by name and kind; validate --data takes a name."""
    assert {"main", "wide", "paired_tuned"} <= set(fr.list_examples())
    assert fr.example_path("main", "spec").name == "main.toml"
    with pytest.raises(GridError, match="kind 'x'"):
        fr.example_path("main", "x")
    code, out, err = run(["validate", "--data", "wide"], capsys)
    assert code == 0 and out.startswith("data/wide.csv: sha256"), err


def test_search_leaves_the_second_loss_out_by_default_and_says_so():
    """fr.search leaves a second loss column out of its variables unless named, and says so."""
    df = two_losses()
    s = fr.search(fr.load_grid(df, metric="loss"), references=[], **SMALL)
    assert s.settings["variables"] == ["N", "M"]
    assert "loss_indist" in s.settings["left_out"]
    assert "left out of the variables as other outcomes of each run: loss_indist" in str(s)
    named = fr.search(
        fr.load_grid(df, metric="loss"), variables=["N", "loss_indist"], references=[], **SMALL
    )
    assert named.settings["variables"] == ["N", "loss_indist"] and not named.settings["left_out"]


def _text_typed(dtype: str = "object"):
    """The committed default grid with its conditions and seeds stored as text, as a Parquet
    file or ``mlflow.search_runs()`` under pandas 3 holds them."""
    t = pd.read_csv(DATA / "main.csv").query("lr == 3e-4").reset_index(drop=True)
    cols = ["H", "keep", "omega", "seed"]
    return t, t.astype({c: str for c in cols}).astype({c: dtype for c in cols})


@pytest.mark.parametrize("dtype", ["object", "string"])
def test_numbers_stored_as_text_are_read_as_numbers_and_said(dtype, tmp_path):
    """Issue 44, item 4: a table whose parameters are text ('20000000') was accepted by
    load_grid and refused by compare ("column 'H' ... is not numeric"); the same table as
    CSV ran. Now every reader takes a column whose every value is a number written as text
    as numbers, says so in one line, and gives the CSV's result."""
    t, text = _text_typed(dtype)
    csv = tmp_path / "g.csv"
    t.to_csv(csv, index=False)
    want = fr.compare(csv, forms=["composition", "additive"], splits=12)
    sources = [text]
    if importlib.util.find_spec("pyarrow") is not None:
        text.to_parquet(tmp_path / "g.parquet")
        sources.append(tmp_path / "g.parquet")
    for source in sources:
        g = fr.load_grid(source)
        assert set(g.numbers_from_text) == {"H", "keep", "omega", "seed"}
        c = fr.compare(g, forms=["composition", "additive"], splits=12)
        assert c.conclusion == want.conclusion
        (line,) = [ln for ln in str(c).splitlines() if ln.startswith("read as numbers: ")]
        assert all(col in line for col in ("H", "keep", "omega", "seed"))
        assert "read as numbers" in str(fr.fit(g, "composition"))


def test_a_text_column_with_one_word_stays_text():
    """A column with any value that is not a number is left as text: a form reading it is
    refused as before, naming the column."""
    t, text = _text_typed()
    text.loc[3, "H"] = "sixteen"
    g = fr.load_grid(text)
    assert "H" not in g.numbers_from_text and "keep" in g.numbers_from_text
    with pytest.raises(GridError, match="column 'H' is read by a form but is not numeric"):
        fr.compare(g, forms=["composition"], splits=5)
