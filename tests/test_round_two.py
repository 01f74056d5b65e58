"""Issue 20: the nine serious defects found in the new commands, each reproduced first.

1 outputs replacing inputs, 2 score pooling other setups and metrics, 3 the metric read
through a derivation, 4 transfer across metrics, 5 a pandas index dropped, 6 near-identical
float levels pooled, 7 design ranking cells it will not run, 8 the memory estimate,
9 symlinked ledgers and forms files. The minor ones are in test_round_two_minor.py.
"""

from __future__ import annotations

import json
import os
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, composition_grid
from helpers import refused, run

FAST_DESIGN = ["--design-splits", "10", "--resamples", "20"]


@pytest.fixture
def main_csv(tmp_path):
    path = tmp_path / "g.csv"
    path.write_bytes((DATA / "main.csv").read_bytes())
    return path


# ------------------------------------------------------------------ 1. outputs are never inputs
def test_design_spec_out_may_not_replace_the_grid(main_csv, tmp_path, capsys):
    argv = ["design", "--forms", "composition,additive", "--data", main_csv]
    argv += ["--where", "lr == 3e-4", "--spec-out", main_csv, *FAST_DESIGN]
    refused(argv, capsys, tmp_path, "--spec-out .*g.csv: is an input of this command")


def test_spec_out_and_json_may_not_share_a_path(main_csv, tmp_path, capsys):
    argv = ["design", "--forms", "composition,additive", "--data", main_csv]
    argv += ["--where", "lr == 3e-4", "--spec-out", tmp_path / "x", "--json", tmp_path / "x"]
    refused([*argv, *FAST_DESIGN], capsys, tmp_path, "also the path of")


def test_a_hard_link_to_the_grid_is_an_input(main_csv, tmp_path, capsys):
    os.link(main_csv, tmp_path / "hard.csv")
    refused(["validate", main_csv, "--json", tmp_path / "hard.csv"], capsys, tmp_path, "an input")


# ------------------------------------------------------------------ 2. score matches setups
def _predict(tmp_path, capsys, ledger, data, *extra):
    code, out, err = run(
        ["predict", "--data", data, "--form", "composition", "--at", "H=8,keep=0.25",
         "--ledger", ledger, "--resamples", "20", *extra],
        capsys,
    )  # fmt: skip
    assert code == 0, err


def _new_runs(rows) -> pd.DataFrame:
    base = {"H": 8, "keep": 0.25, "omega": 3.0, "diverged": False}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_score_does_not_pool_runs_of_another_setup(tmp_path, capsys):
    grid = composition_grid().assign(width=256, algo="diloco")
    grid.to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    _predict(tmp_path, capsys, ledger, tmp_path / "g.csv")
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
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    _predict(tmp_path, capsys, ledger, tmp_path / "g.csv")
    rows = [{"seed": s, "width": w, "loss": 2.3} for s in range(3) for w in (256, 1024)]
    _new_runs(rows).to_csv(tmp_path / "new.csv", index=False)
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv"], capsys, tmp_path,
            "differ in 'width' \\(1024, 256\\)")  # fmt: skip


def test_score_does_not_score_another_metric(tmp_path, capsys):
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    ledger = tmp_path / "l.jsonl"
    _predict(tmp_path, capsys, ledger, tmp_path / "g.csv")
    new = _new_runs([{"seed": s, "val_loss": 2.3, "train_loss": 2.2} for s in range(3)])
    new.to_csv(tmp_path / "new.csv", index=False)
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv"], capsys, tmp_path,
            "predict 'loss', but the metric of .* is 'val_loss'")  # fmt: skip
    refused(["score", "--ledger", ledger, "--data", tmp_path / "new.csv", "--metric",
             "train_loss"], capsys, tmp_path, "is 'train_loss'")  # fmt: skip


# ------------------------------------------------------------------ 3. no metric via --derive
@pytest.mark.parametrize(
    "derive, form",
    [
        ("loss2 = loss*2", "x = L0 + a*loss2"),
        ("t2 = train_loss + 0", "x = L0 + a*t2"),
        ("s2 = seed + 1", "x = L0 + a*s2"),
        ("z = loss*2", "x(H, w) = L0 + a*w*H"),  # a chain: w reads z, which reads loss
    ],
)
def test_a_form_may_not_read_the_metric_through_a_derivation(tmp_path, capsys, derive, form):
    data = tmp_path / "g.csv"
    composition_grid().assign(train_loss=2.0).to_csv(data, index=False)
    argv = ["compare", "--data", data, "--splits", "5", "--derive", derive, "--form", form]
    if derive.startswith("z"):
        argv += ["--derive", "w = z/2"]
    refused(argv, capsys, tmp_path, "is derived from '(loss|train_loss|seed)'")


# ------------------------------------------------------------------ 4. transfer and metrics
def test_transfer_refuses_grids_of_different_metrics(tmp_path, capsys):
    composition_grid().to_csv(tmp_path / "a.csv", index=False)
    composition_grid(rng_seed=1).rename(columns={"loss": "val_loss"}).to_csv(
        tmp_path / "b.csv", index=False
    )
    refused(
        ["compare", "--split", "transfer", "--fit-data", tmp_path / "a.csv", "--test-data",
         tmp_path / "b.csv", "--forms", "composition"],
        capsys, tmp_path, "fitted on 'loss' but .* scored on 'val_loss'",
    )  # fmt: skip


# ------------------------------------------------------------------ 5. an index is a column
def _two_lrs() -> pd.DataFrame:
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] + 0.5)
    return pd.concat([a, b], ignore_index=True)


def test_a_named_index_is_a_column_through_the_api():
    from fitrules.model.grids import load_grid

    g = load_grid(_two_lrs().set_index("lr"))
    assert "lr" in g.columns
    # a column, so not dropped silently: it is a factor no form reads, pooled and said so
    # (issue 21), or refused where pooling would put one seed twice in a level
    assert "lr" in g.run_columns(["H", "omega"])["pooled"]


def test_a_parquet_index_is_a_column(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    _two_lrs().set_index("lr").to_parquet(tmp_path / "g.parquet")
    code, out, err = run(["fit", "--data", tmp_path / "g.parquet", "--form", "composition"],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "'lr' varies within cells and looks like a factor" in out


# ------------------------------------------------------------------ 6. rounding twins
def test_levels_that_differ_by_rounding_are_reported(tmp_path, capsys):
    df = _two_lrs()
    df["lr"] = df["lr"] * (1 + 1e-9 * np.arange(len(df)))
    df.to_csv(tmp_path / "g.csv", index=False)
    line = refused(["fit", "--data", tmp_path / "g.csv", "--form", "composition"], capsys,
                   tmp_path, "differ only by rounding")  # fmt: skip
    assert "differ in 'lr'" in line


# ------------------------------------------------------------------ 7. design runs what it ranks
def test_design_ranks_whole_cells_only(tmp_path, capsys):
    d = pd.read_csv(DATA / "main.csv")
    d = d[d["lr"] == 3e-4]
    d = d.assign(H=d["H"].map({1: 1, 4: 2, 16: 4, 64: 8}))
    d.to_csv(tmp_path / "g.csv", index=False)
    code, out, err = run(
        ["design", "--forms", "composition,additive", "--data", tmp_path / "g.csv",
         "--json", "-", "--spec-out", tmp_path / "s.toml", *FAST_DESIGN],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    res = json.loads(out)
    hs = {c["H"] for c in res["candidates"]}
    assert all(float(h).is_integer() for h in hs), hs
    grid_cells = {(h, o) for h, o in zip(d["H"], d["omega"], strict=True)}
    for c in res["chosen"]:
        assert (c["H"], c["omega"]) not in grid_cells  # not a cell the grid already has
    spec = (tmp_path / "s.toml").read_text()
    for c in res["chosen"]:
        assert f"H = {int(c['H'])}" in spec


@pytest.mark.parametrize(
    "cand, match",
    [
        ("H=0.5,1.5,2.5", "H must be finite and >= 1|not a whole number"),
        ("H=1.5", "not a whole number"),
        ("H=0.5", "H must be finite and >= 1"),
        ("H=-4", "H must be finite and >= 1"),
        ("H=1e308", "beyond"),
        ("H=2e6", "largest H a run takes"),
        ("omega=-1", "omega must be finite and >= 0"),
        ("H=2;H=8", "named twice"),
    ],
)
def test_design_refuses_candidates_it_cannot_run(tmp_path, capsys, cand, match):
    refused(["design", "--forms", "composition,additive", "--candidates", cand, *FAST_DESIGN],
            capsys, tmp_path, match)  # fmt: skip


# ------------------------------------------------------------------ 8. memory estimates hold
def test_fit_memory_counts_the_diagnostics():
    """The full SVD of the diagnostics took splits x n_train^2; the estimate must hold."""
    from fitrules.engine.fit import FitOptions, fit_memory, fit_splits
    from fitrules.model.forms import Form

    rng = np.random.default_rng(0)
    n, S = 1500, 16
    x = rng.uniform(1, 10, n)
    y = 2 + 0.5 * x + 0.01 * rng.standard_normal(n)
    form = Form("lin", "L0 + a*x", ("x",))
    masks = np.zeros((S, n), bool)
    for s in range(S):
        masks[s, rng.permutation(n)[: n // 3]] = True
    est = fit_memory(form, n, S, FitOptions())
    tracemalloc.start()
    fit_splits(form, {"x": x}, y, masks)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= 1.5 * est, (peak, est)


# ------------------------------------------------------------------ 9. links are followed
def test_a_symlinked_ledger_is_extended_where_it_points(tmp_path, capsys, monkeypatch):
    composition_grid().to_csv(tmp_path / "g.csv", index=False)
    shared = tmp_path / "shared" / "ledger.jsonl"
    shared.parent.mkdir()
    _predict(tmp_path, capsys, shared, tmp_path / "g.csv")
    (tmp_path / "mine").mkdir()
    link = tmp_path / "mine" / "link.jsonl"
    link.symlink_to(shared)
    code, _, err = run(
        ["predict", "--data", tmp_path / "g.csv", "--form", "additive", "--at", "H=8,keep=0.25",
         "--ledger", link, "--resamples", "20"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert link.is_symlink()
    assert len(shared.read_text().splitlines()) == 2


def test_a_symlinked_forms_file_stays_a_link(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shared = tmp_path / "team.toml"
    shared.write_text('mine = "L0 + a*omega"\n')
    (tmp_path / "forms.toml").symlink_to(shared)
    code, _, err = run(["forms", "add", "other", "L0 + b*H"], capsys)
    assert code == 0, err
    assert (tmp_path / "forms.toml").is_symlink()
    assert "other" in shared.read_text()
