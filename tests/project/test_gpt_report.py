"""The GPT grids' report (tools/gpt_report.py): the line in 1 + omega and the attack table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from tools.gpt_report import attack_table, excess_lines


def _grid(excess) -> pd.DataFrame:
    """A gpt-like table: at each H, loss = 2 + excess(1/keep) + a seed offset."""
    rows = []
    for H in (4, 16):
        for keep in (1.0, 0.5, 0.25, 0.125):
            for seed in (0, 1, 2):
                loss = 2.0 + excess(1 / keep, H) + 0.01 * seed
                rows.append({"algo": "diloco", "H": H, "keep": keep, "seed": seed,
                             "loss": loss, "diverged": False})  # fmt: skip
    rows.append({"algo": "sync", "H": 16, "keep": 1.0, "seed": 0, "loss": 1.9, "diverged": False})
    return pd.DataFrame(rows)


def test_an_excess_linear_in_one_plus_omega_has_r2_one_and_its_slope():
    """A loss that grows by 0.02 per unit of 1 + omega gives R^2 1 and slope 0.02 at each H."""
    lines = excess_lines(_grid(lambda x, H: 0.02 * (x - 1)))
    assert lines["r2"].tolist() == pytest.approx([1.0, 1.0])
    assert lines["slope"].tolist() == pytest.approx([0.02, 0.02])
    assert lines["intercept"].tolist() == pytest.approx([-0.02, -0.02])
    assert lines["rising"].all()


def test_a_curved_excess_falls_short_of_the_bar():
    """An excess that grows with the cube of 1 + omega is not a line: R^2 below 0.95."""
    lines = excess_lines(_grid(lambda x, H: 0.01 * (x - 1) ** 3))
    assert (lines["r2"] < 0.95).all()
    falling = excess_lines(_grid(lambda x, H: -0.01 * (x - 1)))
    assert not falling["rising"].any()


def test_the_seed_offsets_cancel_in_the_excess():
    """The excess is paired by seed: offsets shared by a seed's runs leave no spread."""
    lines = excess_lines(_grid(lambda x, H: 0.02 * (x - 1)))
    sds = [s for pts in lines["points"] for _, _, s, _ in pts]
    assert max(sds) == pytest.approx(0.0, abs=1e-12)


def test_the_attack_table_names_the_first_count_that_breaks():
    """A run that diverged or sits above ln(V) is not bounded; the first such count is named."""
    t = pd.DataFrame({"attackers": [0, 4, 7, 8], "loss": [2.0, 2.1, 2.3, np.nan],
                      "diverged": [False, False, False, True]})  # fmt: skip
    rows, broken = attack_table(t, vocab=37)
    assert rows["bounded"].tolist() == [True, True, True, False]
    assert broken == 8
    high = t.assign(loss=[2.0, 2.1, math.log(37) + 0.1, 2.0], diverged=False)
    assert attack_table(high, vocab=37)[1] == 7
    assert attack_table(t.iloc[:3], vocab=37)[1] is None


def test_the_committed_gpt_report_is_what_the_grids_give():
    """reports/gpt/README.md is what tools/gpt_report makes from the committed grids now."""
    from tools.gpt_report import report

    committed = ROOT / "reports" / "gpt" / "README.md"
    if not committed.exists():
        pytest.skip("no committed gpt report")
    assert committed.read_text() == report(ROOT)
