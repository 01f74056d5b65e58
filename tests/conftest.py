"""Shared fixtures: synthetic grids made from known rules with seeded noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
EXTERNAL = ROOT.parent / "shared" / "external"

H_LEVELS = (1, 4, 16, 64)
KEEP_LEVELS = (1.0, 0.5, 0.25, 0.125, 0.0625)
TRUTH = {"L0": 2.2, "a": 0.012, "b": 0.5}


def composition_grid(
    noise: float = 0.002, seeds: int = 3, rng_seed: int = 0, h_levels=H_LEVELS, truth=TRUTH
) -> pd.DataFrame:
    """Runs of L0 + a*omega*(H/16)**b plus seeded Gaussian noise (sd ``noise``) per run."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for H in h_levels:
        for keep in KEEP_LEVELS:
            omega = 1 / keep - 1
            mean = truth["L0"] + truth["a"] * omega * (H / 16) ** truth["b"]
            for s in range(seeds):
                rows.append(
                    {
                        "H": H,
                        "keep": keep,
                        "omega": omega,
                        "seed": s,
                        "loss": mean + noise * rng.standard_normal(),
                        "diverged": False,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def synthetic_csv(tmp_path) -> Path:
    path = tmp_path / "grid.csv"
    composition_grid().to_csv(path, index=False)
    return path
