"""Tuning as a reduction of a grid (fitrules.jobs.tune): honest selection, edges, cross-fitting,
divergence, bad input, the committed tuned grids."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from tables import LRS, as_grid, bowl, lr_frame

from conftest import DATA
from fitrules.base.errors import GridError
from fitrules.jobs.tune import TunedGrid, tune
from fitrules.model.grids import Grid, load_grid

H_EFFECT = {1: 0.0, 4: 0.01, 16: 0.02, 64: 0.04}  # a configuration effect, the same at every lr


def _frame(**kw) -> pd.DataFrame:
    return lr_frame(lambda h, lr, s: 2.0, **kw)


BAD = {
    "not-a-column": ((), ["nope"], None, r"no column 'nope' to tune; columns: H, lr, seed"),
    "one-level": (("lr == 1e-3",), ["lr"], None, r"'lr' has one level \(0\.001\): nothing to"),
    "unknown-tune-seed": ((), ["lr"], [0, 99], r"seed 99 in tune_seeds is not in the grid; seeds"),
    "no-evaluation-seed": ((), ["lr"], range(6), r"no evaluation seed left: tune_seeds \(0, 1, 2"),
    "one-seed-cross-fit": (
        ("H < 64 or seed == 0",),
        ["lr"],
        None,
        r"cross-fitting needs at least 2 seeds per configuration; 1 seed \(0\) at H=64",
    ),
    "config-without-tune-seed": (
        ("H < 64 or seed > 3",),
        ["lr"],
        [0, 1],
        r"no tuning seed at H=64 \(its seeds: 4, 5\)",
    ),
    "config-without-evaluation-seed": (
        ("H < 64 or seed < 2",),
        ["lr"],
        [0, 1],
        r"no evaluation seed left at H=64: all its seeds \(0, 1\) are tune seeds",
    ),
    "metric": ((), ["loss"], None, r"cannot tune 'loss', it is the metric"),
}


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_same_seed_selection_is_optimistic_and_tune_is_not():
    """The best lr scored on its own seeds is biased low; cross-fit and tune seeds are not."""
    # Every lr is equally good in truth: loss = 2 + H effect + N(0, 0.01), independent per run.
    # Choosing the best of 5 lrs and reporting its mean on the same 6 seeds is biased low by
    # about E[min of 5 standard normals] * 0.01/sqrt(6) = -1.16 * 0.0041 = -0.0047 nats.
    draws, sd = 200, 0.01
    design = lr_frame(lambda h, lr, s: 0.0)
    truth = np.array([2 + H_EFFECT[h] for h in sorted(H_EFFECT)])
    err: dict[str, list[float]] = {"same seeds": [], "cross-fit": [], "tune seeds": []}
    for draw in range(draws):
        rng = np.random.default_rng(draw)
        noise = sd * rng.standard_normal(len(design))
        grid = as_grid(design.assign(loss=2 + design["H"].map(H_EFFECT) + noise))
        cross = tune(grid, ["lr"])
        held = tune(grid, ["lr"], tune_seeds=[0, 1, 2])
        err["same seeds"].append(float(np.mean(cross.flattery["same_seeds"] - truth)))
        err["cross-fit"].append(float(np.mean(cross.flattery["honest"] - truth)))
        err["tune seeds"].append(float(np.mean(held.flattery["honest"] - truth)))
    stats = {k: (np.mean(v), np.std(v, ddof=1) / np.sqrt(draws)) for k, v in err.items()}
    print(f"\nwinner's curse, {draws} draws, 5 lrs x 4 configurations x 6 seeds, sd {sd}:")
    for k, (m, se) in stats.items():
        print(f"  {k:>10}: mean error {m:+.5f} nats (s.e. {se:.5f}, {m / se:+.1f} s.e.)")
    m, se = stats["same seeds"]
    assert m < -4 * se
    assert -0.006 < m < -0.0035  # near the analytic -0.0047
    for k in ("cross-fit", "tune seeds"):
        m, se = stats[k]
        assert abs(m) < 3 * se, k


def test_winner_at_edge_is_flagged_and_interior_winner_is_not():
    """A best lr at the sweep's largest or smallest value is warned of; an interior one is not."""
    # H=64's best lr lies beyond the sweep (0.1), H=1's inside it (1e-3).
    grid = as_grid(lr_frame(bowl({1: 1e-3, 64: 1e-1}), H=(1, 64)))
    t = tune(grid, ["lr"])
    assert t.warnings == ["best lr is the largest tried (0.01) at H=64: widen the sweep"]
    c = t.choices.set_index(["H", "fold"])
    assert c.loc[(64, "A->B"), "at_edge"] and c.loc[(64, "A->B"), "edge"] == "highest"
    assert not c.loc[(1, "A->B"), "at_edge"] and c.loc[(1, "A->B"), "edge"] == ""
    assert set(c.loc[1, "chosen_lr"]) == {1e-3}
    low = tune(as_grid(lr_frame(bowl({1: 1e-6, 64: 1e-3}), H=(1, 64))), ["lr"], [0, 1])
    assert low.warnings == ["best lr is the smallest tried (0.0001) at H=1: widen the sweep"]


def test_warnings_name_the_configuration_without_derived_columns():
    """Edge warnings name the configuration by its own columns, not the derived omega."""
    frame = pd.concat([lr_frame(bowl({1: 1e-3, 64: 1e-1}), H=(1, 64), keep=k) for k in (1.0, 0.25)])
    grid = load_grid("synthetic.csv", frame=frame, derive=["omega = 1/keep - 1"])
    t = tune(grid, ["lr"])
    assert t.configuration == ("H", "keep", "omega")
    assert t.warnings == [
        "best lr is the largest tried (0.01) at H=64, keep=0.25: widen the sweep",
        "best lr is the largest tried (0.01) at H=64, keep=1: widen the sweep",
    ]


def test_two_factors_are_tuned_jointly_and_edges_named_per_factor():
    """lr and wd are chosen together, and the edge warning names the factor at its edge."""

    def loss(h, lr, s, wd):
        return 2 + 0.05 * (np.log10(lr) + 3) ** 2 + (0.0 if wd == 0.1 else 0.02)

    frame = pd.concat(
        [lr_frame(lambda h, lr, s, wd=wd: loss(h, lr, s, wd), H=(1, 4), wd=wd) for wd in (0, 0.1)]
    )
    t = tune(as_grid(frame), ["lr", "wd"], tune_seeds=[0, 1, 2])
    assert list(t.choices["chosen_lr"]) == [1e-3, 1e-3]
    assert list(t.choices["chosen_wd"]) == [0.1, 0.1]
    assert list(t.choices["edge"]) == ["wd highest", "wd highest"]
    assert {"tuned_lr", "tuned_wd"} <= set(t.runs.columns) and "lr" not in t.runs.columns
    assert len(t.curves) == 2 * len(LRS) * 2
    assert t.warnings == [
        "best wd is the largest tried (0.1) at H=1: widen the sweep",
        "best wd is the largest tried (0.1) at H=4: widen the sweep",
    ]


def test_cross_fit_rows_were_chosen_without_their_seed():
    """Under cross-fitting each run's lr was chosen on the other half's seeds, never its own."""
    seeds = (3, 5, 8, 11, 20, 21, 40)  # odd count, gaps: halves go by sorted position
    rng = np.random.default_rng(7)
    frame = lr_frame(lambda h, lr, s: 2 + 0.01 * rng.standard_normal(), seeds=seeds)
    t = tune(as_grid(frame), ["lr"])
    assert len(t.runs) == 4 * len(seeds)  # one row per (configuration, seed), none lost
    halves = {"A->B": (3, 8, 20, 40), "B->A": (5, 11, 21)}
    for fold, choose in halves.items():
        rows = t.choices[t.choices["fold"] == fold]
        assert all(tuple(r) == choose for r in rows["choosing_seeds"])
    for _, run in t.runs.iterrows():
        c = t.choices[t.choices["H"] == run["H"]]
        fold = c[[run["seed"] in e for e in c["evaluated_seeds"]]]
        assert len(fold) == 1
        assert run["seed"] not in fold["choosing_seeds"].iloc[0]
        assert run["tuned_lr"] == fold["chosen_lr"].iloc[0]
    # all lrs equal in truth, so some folds disagree; the tuned grid still reduces to cells
    assert not t.flattery["folds_agree"].all()
    assert isinstance(t.grid, TunedGrid) and isinstance(t.grid, Grid)
    assert "tuned_lr" not in t.grid.factors
    cells = t.grid.cells(["H"]).table
    assert list(cells["n_seeds"]) == [len(seeds)] * 4
    assert t.grid.name == "synthetic (lr tuned, cross-fit)"
    d = json.loads(json.dumps(t.to_dict(), allow_nan=False))
    assert d["scheme"] == "cross-fit" and d["halves"]["A"] == [3, 8, 20, 40]


def test_level_that_diverged_on_a_choosing_seed_does_not_win():
    """An lr that diverged on a choosing seed is not chosen; a missing run is left out, counted."""
    # lr 0.01 is best by far, but diverged on seed 0.
    frame = lr_frame(lambda h, lr, s: 1.9 if lr == 1e-2 else 2 + 0.05 * np.log10(lr / 1e-3) ** 2)
    bad = (frame["lr"] == 1e-2) & (frame["seed"] == 0)
    frame.loc[bad, "loss"] = np.nan
    frame.loc[bad, "diverged"] = True
    grid = as_grid(frame)
    t = tune(grid, ["lr"], tune_seeds=[0, 1])
    assert set(t.choices["chosen_lr"]) == {1e-3}
    assert np.isinf(t.curves.loc[t.curves["lr"] == 1e-2, "criterion_tune"]).all()
    assert set(t.curves.loc[t.curves["lr"] == 1e-2, "n_diverged"]) == {1}
    # Cross-fit: half A (0, 2, 4) holds seed 0 and cannot choose 0.01; half B (1, 3, 5) does,
    # and its choice is measured on A's seeds, where seed 0's run is missing: left out, counted.
    x = tune(grid, ["lr"])
    c = x.choices.set_index(["H", "fold"])
    assert set(c.xs("A->B", level="fold")["chosen_lr"]) == {1e-3}
    assert set(c.xs("B->A", level="fold")["chosen_lr"]) == {1e-2}
    assert set(c.xs("B->A", level="fold")["n_left_out"]) == {1}
    assert len(x.runs) == 4 * 6 - 4 and len(x.grid.excluded) == 4
    assert set(x.grid.excluded["tuned_lr"]) == {1e-2}
    assert sum("left out" in w for w in x.warnings) == 4


def test_when_every_level_diverged_the_smallest_is_taken_and_said():
    """When every level diverged on a choosing seed the smallest lr is taken, with a warning."""
    frame = lr_frame(lambda h, lr, s: 2.0, H=(1, 4))
    frame.loc[(frame["seed"] == 0) & (frame["H"] == 1), "diverged"] = True
    t = tune(as_grid(frame), ["lr"], tune_seeds=[0])
    assert t.choices["chosen_lr"].tolist() == [1e-4, 1e-4]
    assert t.choices["criterion"].tolist() == [np.inf, 2.0]
    # H=4 is flat: the tie goes to the smallest lr, an honest edge; H=1 chose by default
    assert t.warnings[1:] == ["best lr is the smallest tried (0.0001) at H=4: widen the sweep"]
    assert t.warnings[0] == (
        "every level diverged on a choosing seed at H=1 (tune seeds); "
        "the smallest (lr=0.0001) was taken"
    )


@pytest.mark.parametrize(
    ("frame", "where", "factors", "tune_seeds", "match"),
    [(_frame(), *v) for v in BAD.values()]
    + [
        (_frame().drop(columns="seed"), (), ["lr"], None, r"no seed column"),
        (
            # a second run of seed 0 in one cell (an exact copy is refused when read)
            pd.concat([_frame(), _frame().head(1).assign(loss=2.5)], ignore_index=True),
            (),
            ["lr"],
            None,
            r"seed 0 appears more than once at H=1, lr=0.0001",
        ),
    ],
    ids=[*BAD, "no-seed-column", "duplicate-run"],
)
def test_bad_input(frame, where, factors, tune_seeds, match):
    """Each bad tuning request is refused with a message naming what is wrong."""
    with pytest.raises(GridError, match=match):
        tune(as_grid(frame, where), factors, tune_seeds)


def test_paired_tuned_grid_with_three_tune_seeds():
    """With seeds 0-2 spent on tuning, each algo is evaluated on the other 11 seeds."""
    grid = load_grid(DATA / "paired_tuned.csv")
    t = tune(grid, ["lr"], tune_seeds=[0, 1, 2])
    cols = ["algo", "H", "chosen_lr", "criterion", "at_edge", "n_evaluated"]
    print("\n" + t.choices[cols].to_string(index=False))
    print(t.flattery[["algo", "H", "honest", "same_seeds", "optimism"]].to_string(index=False))
    assert list(t.choices["n_evaluated"]) == [11, 11]
    assert all(e == tuple(range(3, 14)) for e in t.choices["evaluated_seeds"])
    assert t.runs.groupby("algo").size().to_dict() == {"diloco": 11, "sync": 11}
    assert list(t.grid.cells(["H"]).table["n_seeds"]) == [11, 11]
    assert t.describe()["evaluation_seeds"] == list(range(3, 14))


def test_committed_tuned_grid_brackets_every_configurations_best():
    """Every (H, keep) of data/tuned.csv has at least three lrs, and no fold's choice lies at
    the edge of the sweep (the first sweep's edge at H=64, keep=1/16 was widened)."""
    t = tune(load_grid(DATA / "tuned.csv"), ["lr"])
    assert len(t.flattery) == 20 and t.scheme == "cross-fit"
    assert t.choices["tried_lr"].map(len).min() >= 3
    assert not t.choices["at_edge"].any(), t.choices[t.choices["at_edge"]]
    assert not any("widen the sweep" in w for w in t.warnings)
