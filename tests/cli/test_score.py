"""fitrules score: the runs of the record's setup and metric only, intervals that covered,
the data it was fitted on named."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import DATA, composition_grid
from fitrules.cli import main
from fitrules.model.grids import default_grid
from helpers import predicted_into, refused, run


def _new_runs(rows) -> pd.DataFrame:
    base = {"H": 8, "keep": 0.25, "omega": 3.0, "diverged": False}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_score_says_when_the_data_is_the_fitted_data(tmp_path, capsys):
    """score on the data the prediction was fitted on says it is not a test, in text and JSON."""
    ledger = tmp_path / "l.jsonl"
    data = DATA / "smoke.csv"
    args = ["--data", data, "--form", "composition", "--ledger", ledger, "--resamples", "20"]
    assert run(["predict", *args, "--at", "H=4,keep=0.25"], capsys)[0] == 0
    code, out, err = run(
        ["score", "--ledger", ledger, "--data", data, "--json", tmp_path / "s.json"], capsys
    )
    assert code == 0, err
    (row,) = json.loads((tmp_path / "s.json").read_text())["scores"]
    assert row["fitted_on_this_data"] is True
    assert row["status"] == "fitted on this data: not a test"
    assert "not a test" in out


def test_score_counts_the_intervals_that_covered_the_new_means(synthetic_csv, tmp_path, capsys):
    """score counts the recorded intervals that covered the new means, naming their kind."""
    ledger = tmp_path / "l.jsonl"
    for at in ("H=8,keep=0.25", "H=32,keep=0.5"):
        assert main(["predict", "--data", str(synthetic_csv), "--form", "composition",
                     "--at", at, "--runs", "3", "--ledger", str(ledger),
                     "--resamples", "20"]) == 0  # fmt: skip
    new = composition_grid(h_levels=(8, 32), rng_seed=5)
    new_csv = tmp_path / "new.csv"
    new.to_csv(new_csv, index=False)
    capsys.readouterr()
    assert main(["score", "--ledger", str(ledger), "--data", str(new_csv), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = [r for r in doc["coverage"] if r["form"] == "all"]
    assert row["interval_kind"] == "held-out misfit: the mean of 3 new runs at fresh seed ids"
    assert row["scored"] == 2 and 0 <= row["covered"] <= 2
    assert {r["interval_kind"] for r in doc["scores"]} == {row["interval_kind"]}
    assert main(["score", "--ledger", str(ledger), "--data", str(new_csv)]) == 0
    kind = "held-out misfit: the mean of 3 new runs at fresh seed ids"
    assert f"recorded intervals ({kind}) that covered" in (capsys.readouterr().out)


def test_score_does_not_pool_runs_of_another_setup(tmp_path, capsys):
    """score uses only new runs whose setup matches the fitted grid's (width, algo)."""
    grid = composition_grid().assign(width=256, algo="diloco")
    grid.to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    predicted_into(capsys, ledger, tmp_path / "g.csv")
    rows = [
        {"seed": s, "width": w, "algo": a, "loss": 2.3 + (w == 1024) + (a == "sync")}
        for s in range(3)
        for w in (256, 1024)
        for a in ("diloco", "sync")
    ]
    _new_runs(rows).to_csv(tmp_path / "new.csv", index=False)
    code, out, err = run(["score", "--ledger", ledger, "--data", tmp_path / "new.csv",
                          "--json", "-"], capsys)  # fmt: skip
    assert code == 0, err
    score = json.loads(out)["scores"][0]
    assert score["runs"] == 3  # width 256, diloco only
    assert score["observed"] == pytest.approx(2.3)


def test_score_refuses_mixed_setups_an_old_record_did_not_name(tmp_path, capsys):
    """New runs mixing setups that the record does not name are refused, naming the column."""
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    predicted_into(capsys, ledger, tmp_path / "g.csv")
    rows = [{"seed": s, "width": w, "loss": 2.3} for s in range(3) for w in (256, 1024)]
    _new_runs(rows).to_csv(tmp_path / "new.csv", index=False)
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv"], capsys, tmp_path,
            "differ in 'width' \\(1024, 256\\)")  # fmt: skip


def test_score_does_not_score_another_metric(tmp_path, capsys):
    """New runs whose metric is not the predicted one are refused, with or without --metric."""
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    predicted_into(capsys, ledger, tmp_path / "g.csv")
    new = _new_runs([{"seed": s, "val_loss": 2.3, "train_loss": 2.2} for s in range(3)])
    new.to_csv(tmp_path / "new.csv", index=False)
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv"], capsys, tmp_path,
            "predict 'loss', but the metric of .* is 'val_loss'")  # fmt: skip
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv", "--metric",
             "train_loss"], capsys, tmp_path, "is 'train_loss'")  # fmt: skip


def test_score_refuses_a_shuffled_copy_of_the_fitted_runs(tmp_path, capsys):
    """A shuffled copy of the fitted runs is no test to score; new seeds are, the fitted left out.

    Before: a row-shuffled copy of main.csv has another sha256 and was scored as new."""
    src = default_grid()[0]
    df = pd.read_csv(src)
    shuffled = tmp_path / "shuffled.csv"
    df.sample(frac=1, random_state=1).to_csv(shuffled, index=False)
    ledger = tmp_path / "l.jsonl"
    base = ["--where", "lr == 3e-4", "--ledger", ledger, "--resamples", "20"]
    assert run(["predict", "--data", src, "--form", "composition", "--at", "H=16,keep=0.25",
                *base], capsys)[0] == 0  # fmt: skip
    rec = json.loads(ledger.read_text().splitlines()[0])
    assert rec["data"]["fitted_runs"] == {"by": "seed", "seeds": ["0", "1", "2"]}
    code, out, err = run(["score", "--ledger", ledger, "--data", shuffled, "--where",
                          "lr == 3e-4", "--json", tmp_path / "s.json"], capsys)  # fmt: skip
    assert code == 0, err
    (row,) = json.loads((tmp_path / "s.json").read_text())["scores"]
    assert row["status"] == "fitted on this data: not a test" and row["fitted_on_this_data"]
    # new seeds at the same cell are scored, the fitted ones left out and counted
    cell = df[(df["H"] == 16) & (df["keep"] == 0.25) & (df["lr"] == 3e-4)]
    more = pd.concat([df, cell.assign(seed=cell["seed"] + 10, loss=cell["loss"] + 0.001)])
    more.to_csv(tmp_path / "more.csv", index=False)
    argv = ["score", "--ledger", ledger, "--data", tmp_path / "more.csv", "--where",
            "lr == 3e-4", "--json", tmp_path / "t.json"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    (row,) = json.loads((tmp_path / "t.json").read_text())["scores"]
    assert row["status"] == "scored" and row["runs"] == 3 and row["fitted_runs_left_out"] == 3
    assert row["observed"] == pytest.approx(cell["loss"].mean() + 0.001)
    assert "3 fitted run(s) left out" in out
