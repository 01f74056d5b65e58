"""fr.tune: levels without runs on the tuning seeds are named."""

from __future__ import annotations

import pandas as pd

import fitrules as fr
from conftest import composition_grid


def test_a_level_without_runs_on_the_tuning_seeds_is_named(tmp_path):
    """(Moved from tests/test_round_two_minor.py.)"""
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] - 0.1)
    b = b[b["seed"] != 0]  # lr 1e-3 has no run on seed 0, the tuning seed
    g = fr.load_grid(pd.concat([a, b], ignore_index=True))
    t = fr.tune(g, "lr", tune_seeds=[0])
    assert any("no run on the choosing seeds" in w for w in t.warnings), t.warnings
