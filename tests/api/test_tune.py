"""fr.tune: levels without runs on the tuning seeds are named."""

from __future__ import annotations

import pandas as pd

import fitrules as fr
from conftest import DATA, composition_grid


def test_a_level_without_runs_on_the_tuning_seeds_is_named(tmp_path):
    """fr.tune warns about a level (lr 1e-3) with no run on the tuning seeds."""
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] - 0.1)
    b = b[b["seed"] != 0]  # lr 1e-3 has no run on seed 0, the tuning seed
    g = fr.load_grid(pd.concat([a, b], ignore_index=True))
    t = fr.tune(g, "lr", tune_seeds=[0])
    assert any("no run on the choosing seeds" in w for w in t.warnings), t.warnings


def test_a_two_level_sweep_says_widen_the_sweep_once_per_edge():
    """Issue 44, item 7: over a 2-level sweep every choice is at an edge, and fr.tune printed
    20+ 'widen the sweep' lines, one per configuration; more than 3 for one edge are now one
    line naming the level, how many choices and the first few configurations."""
    t = pd.read_csv(DATA / "tuned.csv")
    tu = fr.tune(t[t["lr"].isin([3e-4, 1e-3])], "lr")
    lines = [w for w in tu.warnings if "widen the sweep" in w]
    assert len(lines) == 2, lines
    assert any(w.startswith("best lr is the smallest tried (0.0003) in ") for w in lines)
    assert any(w.startswith("best lr is the largest tried (0.001) in ") for w in lines)
    assert all("choices over the 20 configurations" in w and "more)" in w for w in lines)
    # a wide sweep keeps its few edge lines as they were
    few = fr.tune(t, "lr").warnings
    assert all("choices over the" not in w for w in few)
