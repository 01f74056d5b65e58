"""Intervals and held-out errors that know the grid's seed ids are shared across cells
(issue 28): a seed effect shared by every cell moves level constants and the configuration's
mean, not the exponent."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fitrules import api
from fitrules.engine.intervals import seed_offset
from fitrules.model.grids import load_grid

H_LEVELS = (1.0, 4.0, 16.0, 64.0)

OMEGA_LEVELS = (0.0, 1.0, 3.0, 7.0, 15.0)

L0, A, B = 2.1477, 0.009778, 0.5412


def truth(H, om):
    return L0 + A * om * (H / 16) ** B


def grid(rng, shared=0.00506, run=0.00323, fresh=False, groups=None, corrupt=False):
    u = shared * rng.standard_normal(200)
    rows = []
    for M in groups or [None]:
        for c, (H, om) in enumerate((h, o) for h in H_LEVELS for o in OMEGA_LEVELS):
            for s in range(3):
                sid = 3 * c + s if fresh else s  # fresh: every cell its own seed ids
                mu = truth(H, om) * (1.0 if M is None else 1 + 0.02 * (M - 1))
                row = {"H": H, "omega": om, "keep": 1 / (1 + om), "seed": sid,
                       "loss": mu * (1 + u[sid] + run * rng.standard_normal())}  # fmt: skip
                if M is not None:
                    row["M"] = M
                rows.append(row)
    df = pd.DataFrame(rows)
    if corrupt:
        df.loc[7, "loss"] *= 1.3
    return load_grid("grid.csv", frame=df)


@pytest.mark.slow  # a coverage simulation, 13 s of CPU (a loaded machine): CI's slow step runs it
def test_the_interval_for_new_seed_ids_covers_the_configurations_mean():
    """With a shared seed effect the interval covers the mean over new seed ids in 85% of grids."""
    rng = np.random.default_rng(10)
    hits, old = [], []
    for _ in range(30):  # one point a grid: the offset is one draw per grid
        f = api.fit(grid(rng), "composition", predict=["H=8,keep=0.25"], resamples=20)
        for p in f.predictions:
            mu = truth(p["point"]["H"], p["point"]["omega"])
            hits.append(p["interval"][0] <= mu <= p["interval"][1])
            old.append(p["interval_grid_seeds"][0] <= mu <= p["interval_grid_seeds"][1])
    assert np.mean(hits) >= 0.85, np.mean(hits)  # 200 grids: 0.975 (bench_intervals)
    assert np.mean(old) < 0.6  # the old interval, for the mean at the grid's seed ids


def test_intervals_name_the_mean_they_cover():
    """Each interval names the mean it covers; the new-seed one contains the grid-seed one."""
    f = api.fit(grid(np.random.default_rng(1)), "composition", predict="H=8,keep=0.25", runs=3,
                resamples=20)  # fmt: skip
    (p,) = f.predictions
    assert p["interval_kind"].endswith("the configuration's mean over new seed ids")
    assert p["interval_grid_seeds_kind"].endswith("the configuration's mean at the grid's seed ids")
    assert p["interval_runs_kind"].endswith("the mean of 3 new runs at fresh seed ids")
    assert "at the grid's seed ids" in p["interval_runs_grid_seeds_kind"]
    lo, hi = p["interval"]
    glo, ghi = p["interval_grid_seeds"]
    assert lo < glo < ghi < hi
    assert "over new seed ids" in str(f)
    assert f.to_dict()["prediction_intervals"]["seed_offset"]["seed_ids"] == 3


def test_fresh_seed_ids_per_cell_change_nothing():
    """With fresh seed ids in every cell there is no offset and both intervals are the same."""
    g = grid(np.random.default_rng(2), fresh=True)
    assert seed_offset(g, g.cells(("H", "omega"))) is None
    f = api.fit(g, "composition", predict="H=8,keep=0.25", intervals=True, resamples=20)
    (p,) = f.predictions
    assert p["interval"] == p["interval_grid_seeds"]
    assert f.intervals == f.intervals_grid_seeds


def test_the_offset_moves_level_constants_not_the_exponent():
    """The seed offset widens L0's interval by its share of the variance and leaves b alone."""
    f = api.fit(grid(np.random.default_rng(3)), "composition", intervals=True, resamples=20)
    sd = f.seed_offset_sd
    # a common relative shift scales L0 and a (they absorb it), not b
    assert sd["L0"] / f.constants["L0"] == pytest.approx(np.sqrt(f.seed_offset.var / 3), rel=1e-3)
    assert sd["b"] < 1e-6 * abs(f.constants["b"]) + 1e-9
    lo, hi = f.intervals["L0"]
    glo, ghi = f.intervals_grid_seeds["L0"]
    assert lo < glo and hi > ghi


def test_grouped_intercepts_carry_the_offset():
    """Every group's intercept carries the seed offset's share of uncertainty."""
    g = grid(np.random.default_rng(4), groups=[1, 2])
    f = api.fit(g, "composition", by="M", intervals=True, resamples=20)
    for c in ("L0[M=1]", "L0[M=2]"):
        assert f.seed_offset_sd[c] > 0.5 * np.sqrt(f.seed_offset.var / 3) * f.constants[c]


def test_a_corrupted_run_is_not_a_seed_effect():
    """One run scaled by 1.3 barely raises the seed offset's variance over a clean grid's."""
    rng = np.random.default_rng(5)
    clean = grid(rng, shared=0.0, run=0.006)
    rng = np.random.default_rng(5)
    bad = grid(rng, shared=0.0, run=0.006, corrupt=True)
    a = seed_offset(clean, clean.cells(("H", "omega")))
    b = seed_offset(bad, bad.cells(("H", "omega")))
    assert b.var < 3 * a.var + 1e-6  # unclipped, one run x 1.3 made it ~100x
