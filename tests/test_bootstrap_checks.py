"""A bootstrap that cannot be valid is switched with a note; its memory is estimated first.

From the third hostile audit (issue 31): ``fit --bootstrap seeds`` on a grid of one run per
cell printed zero-width 95% intervals with exit 0 (serious 6), and ``fit --intervals
--resamples 100000`` on 5,000 cells reached 7.6 GiB before "out of memory" (major).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import LimitError
from fitrules.engine.intervals import bootstrap_memory
from helpers import refused, run


@pytest.fixture
def one_run_csv(tmp_path):
    path = tmp_path / "one.csv"
    composition_grid(seeds=1).to_csv(path, index=False)
    return path


def test_seeds_bootstrap_on_one_run_cells_is_never_zero_width(one_run_csv, capsys):
    code, out, err = run(
        ["fit", "--data", one_run_csv, "--form", "composition", "--intervals",
         "--bootstrap", "seeds"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "residuals, not seeds: 20 of 20 cells have a single run" in out
    for lo, hi in re.findall(r"\[([-\d.e+]+), ([-\d.e+]+)\]", out):
        assert float(hi) > float(lo), out


def test_seeds_bootstrap_switch_through_the_api(one_run_csv):
    f = fr.fit(str(one_run_csv), "composition", intervals=True, bootstrap="seeds")
    assert f.bootstrap.kind == "residuals"
    for lo, hi in f.intervals.values():
        assert hi > lo


def test_seeds_bootstrap_with_repeats_stays_seeds(tmp_path):
    path = tmp_path / "three.csv"
    composition_grid(seeds=3).to_csv(path, index=False)
    f = fr.fit(str(path), "composition", intervals=True, bootstrap="seeds")
    assert f.bootstrap.kind == "seeds"


def test_bootstrap_memory_is_checked_before_resampling(tmp_path, capsys):
    """The audit's shape: 5,000 cells, 100,000 resamples: refused at once."""
    rng = np.random.default_rng(0)
    n = 5000
    df = pd.DataFrame({"H": np.arange(n) % 100 + 1.0, "omega": (np.arange(n) // 100) * 1.0,
                       "seed": 0})  # fmt: skip
    df["loss"] = 2.2 + 0.01 * df["omega"] * (df["H"] / 16) ** 0.5 + 1e-3 * rng.standard_normal(n)
    path = tmp_path / "big.csv"
    df.to_csv(path, index=False)
    refused(
        ["fit", "--data", path, "--form", "composition", "--intervals", "--resamples", "100000"],
        capsys, tmp_path, r"bootstrap .*100,000 resamples of 5,000 cells.*--resamples",
    )  # fmt: skip
    with pytest.raises(LimitError, match="lower resamples"):
        fr.fit(str(path), "composition", intervals=True, resamples=100_000)


def test_bootstrap_memory_grows_with_resamples():
    a = bootstrap_memory(3, 5000, 5000, 200, "studentized", True)
    b = bootstrap_memory(3, 5000, 5000, 100_000, "studentized", True)
    assert a < 2**30 < 8 * 2**30 < b
