"""The tuned GPT grid's report (tools/gpt_report.py): the outer step's tuning, the rand-k line
with intervals over seeds and their coverage, the attack table and the claims it may make."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from tools.gpt_report import (
    Interval,
    attack_table,
    chosen_is_run,
    claims,
    coverage,
    paired,
    randk_line,
    topk_against_randk,
    tuning_choice,
)

KEEPS = (1.0, 0.5, 0.25, 0.125, 0.0625)
SETTINGS = dict(M=4, H=16, masks="independent", aggregator="mean", lr=1e-3, nesterov=True,
                layers=2, width=64, heads=4, context=64, batch=16, steps=512, sampling="iid",
                warmup=32, schedule="cosine", weight_decay=0.1, decay_on="matrices", tied=True)


def _grid(excess, seeds=(0, 1, 2), noise=0.0, outer=(1.0, 0.0), rng=None) -> pd.DataFrame:
    """A gpt_tuned-like table: rand-k keeps, top-k at 1/16 (0.01 lower), sync (0.05 lower)."""
    rng = rng or np.random.default_rng(0)
    rows = []
    for seed in seeds:
        off = 0.01 * seed
        for keep in KEEPS:
            loss = 2.0 + excess(1 / keep) + off + noise * rng.normal()
            rows.append(dict(SETTINGS, algo="diloco", compressor="randk", keep=keep, seed=seed,
                             loss=loss, outer_lr=outer[0], outer_momentum=outer[1]))
        topk = 2.0 + excess(16) - 0.01 + off
        rows.append(dict(SETTINGS, algo="diloco", compressor="topk", keep=0.0625, seed=seed,
                         loss=topk, outer_lr=outer[0], outer_momentum=outer[1]))
        rows.append(dict(SETTINGS, algo="sync", compressor="randk", keep=1.0, seed=seed,
                         loss=1.95 + off, outer_lr=outer[0], outer_momentum=outer[1]))
    return pd.DataFrame(rows)


def test_a_t_interval_over_three_seeds():
    """The interval of 1, 2, 3 is 2 +- t(0.975, 2) / sqrt(3); it decides a sign only when it
    excludes 0, and one value has no interval."""
    iv = Interval.of([1.0, 2.0, 3.0])
    assert iv.mean == 2.0 and iv.high - 2.0 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)
    assert iv.sign() == 0 and Interval.of([1.0, 1.1, 1.2]).sign() == 1
    assert Interval.of([-1.0, -1.1, -1.2]).sign() == -1
    assert math.isnan(Interval.of([1.0]).low) and "no interval" in Interval.of([1.0]).text()


def test_a_linear_excess_has_its_slope_and_r2_one_on_every_seed():
    """An excess of 0.02 per unit of 1 + omega: every seed's slope 0.02, R^2 1; the seed
    offsets cancel in the paired excess."""
    line = randk_line(_grid(lambda x: 0.02 * (x - 1)))
    assert line["slope"].mean == pytest.approx(0.02) and line["slope"].high == pytest.approx(0.02)
    assert line["r2"].mean == pytest.approx(1.0) and line["x"].tolist() == [1, 2, 4, 8, 16]
    assert np.abs(line["excess"] - 0.02 * (line["x"] - 1)).max() < 1e-12


def test_the_slope_interval_covers_on_simulated_grids():
    """The t interval over three seeds covers the true slope about 95% of the time, for no
    slope, a line and a curve (the curve's least-squares slope), noise independent or per
    seed; where there is no slope it excludes 0 (a false positive) about 5% of the time."""
    line = randk_line(_grid(lambda x: 0.003 * (x - 1), noise=0.004))
    rows = coverage(line["x"], line, np.random.default_rng(1), n_sim=4000)
    assert len(rows) == 6 and all(r["grids"] == 4000 for r in rows)
    assert all(0.93 <= r["coverage"] <= 0.97 for r in rows), rows
    null = [r for r in rows if r["truth"] == "no slope"]
    assert len(null) == 2 and all(r["decided"] <= 0.07 for r in null), null  # false positives


def test_paired_differences_and_the_claims_they_decide():
    """Top-k at 1/16 sits 0.01 below rand-k on every seed and sync 0.05 below DiLoCo at keep
    1: both intervals are single points on their side, and the claims read them so. Top-k
    below rand-k's smallest keep is compared with that keep."""
    g = _grid(lambda x: 0.02 * (x - 1))
    at = {"keep": 0.0625}
    topk = paired(g, {"compressor": "topk", **at}, {"compressor": "randk", **at})
    gap = paired(g, {"algo": "diloco", "compressor": "randk", "keep": 1.0}, {"algo": "sync"})
    assert topk.mean == pytest.approx(-0.01) and gap.mean == pytest.approx(0.05)
    assert topk_against_randk(g) == {(0.0625, 0.0625): topk}
    found = {c.text: c for c in claims(randk_line(g), {(0.0625, 0.0625): topk}, gap,
                                      {"coordinated": 8}, 16, [16])}  # fmt: skip
    top = next(c for t, c in found.items() if t.startswith("top-k"))
    sync = next(c for t, c in found.items() if "synchronous" in t)
    assert top.status == "supported" and sync.status == "contradicted"
    lower = g[g["compressor"] == "topk"].assign(keep=1 / 64)
    assert list(topk_against_randk(pd.concat([g, lower]))) == [(1 / 64, 0.0625), (0.0625, 0.0625)]


def test_no_claim_the_grid_cannot_test_is_called_false():
    """On a grid of one H, one model and three seeds, the claims about other H, other sizes,
    per-keep tuning and keeps below 1/16 are "not tested", whatever the data say; a claim is
    contradicted only when the grid tests it, an interval across 0 is undecided, and without
    a slope the line's shape is undecided, however low its R^2."""
    for excess in (lambda x: 0.02 * (x - 1), lambda x: -0.02 * (x - 1), lambda x: 0.0 * x):
        g = _grid(excess, noise=0.01)
        line = randk_line(g)
        found = claims(line, {}, Interval.of([-0.1, 0.1, 0.0]), {"coordinated": None}, 16, [16])
        untested = [c for c in found if not c.tested]
        assert len(untested) == 5 and all(c.status == "not tested" for c in untested)
        assert all(c.tested for c in found if c.status == "contradicted")
        sync = next(c for c in found if "synchronous" in c.text)
        assert sync.status == "undecided"
        if line["slope"].sign() == 0:  # no slope: a line's R^2 cannot judge the shape
            shape = next(c for c in found if "is linear in" in c.text)
            assert shape.status == "undecided" and "no slope" in shape.evidence


def test_the_attack_table_counts_bounded_seeds_per_mode():
    """A run that diverged or sits above ln(V) is not bounded; each mode's first count at
    which a seed breaks is named, and the runs at 0 attackers belong to both modes."""
    rows = []
    for seed in (0, 1, 2):
        rows.append({"attackers": 0, "attack_mode": "coordinated", "seed": seed, "loss": 2.0,
                     "diverged": False})  # fmt: skip
        for k in (4, 8):
            for mode in ("coordinated", "independent"):
                bad = mode == "coordinated" and k == 8 and seed < 2
                rows.append({"attackers": k, "attack_mode": mode, "seed": seed,
                             "loss": np.nan if bad else 2.1, "diverged": bad})  # fmt: skip
    t, broken = attack_table(pd.DataFrame(rows), vocab=37)
    assert broken == {"coordinated": 8, "independent": None}
    eight = t[(t["mode"] == "coordinated") & (t["attackers"] == 8)].iloc[0]
    assert (eight["bounded"], eight["seeds"]) == (1, 3)
    assert len(t[t["attackers"] == 0]) == 2
    high = pd.DataFrame(rows).assign(loss=math.log(37) + 0.1, diverged=False)
    assert attack_table(high, vocab=37)[1] == {"coordinated": 0, "independent": 0}


def test_the_tune_job_chooses_the_outer_step_the_tuning_seeds_favour():
    """The tuning seeds favour outer lr 1 without momentum; the tune job chooses it, and a
    grid run at it is recognised while one run at the old step is not."""
    tuning = []
    for lr, mom, loss in ((0.7, 0.9, 2.6), (1.0, 0.0, 2.4), (0.7, 0.0, 2.5)):
        for seed in (100, 101):
            tuning.append(dict(SETTINGS, algo="diloco", compressor="randk", keep=1.0, seed=seed,
                               loss=loss + 0.001 * seed, outer_lr=lr, outer_momentum=mom))
    tuning = pd.DataFrame(tuning)
    grid = _grid(lambda x: 0.02 * (x - 1), outer=(1.0, 0.0))
    choices = tuning_choice(tuning, grid).choices
    assert choices["chosen_outer_lr"].tolist() == [1.0]
    assert choices["chosen_outer_momentum"].tolist() == [0.0]
    assert chosen_is_run(choices, grid)
    assert not chosen_is_run(choices, _grid(lambda x: 0.02 * (x - 1), outer=(0.7, 0.9)))


def test_the_committed_grid_runs_at_the_outer_step_the_tune_job_chose():
    """On the committed tuning runs and grid, the tune job's choice is the grid's outer step."""
    paths = [ROOT / "data" / f"{n}.csv" for n in ("gpt_tuning", "gpt_tuned")]
    tuning, grid = (pd.read_csv(p) for p in paths)
    assert chosen_is_run(tuning_choice(tuning, grid).choices, grid)


def test_the_committed_gpt_report_is_what_the_grids_give():
    """reports/gpt/README.md is what tools/gpt_report makes from the committed grids now."""
    from tools.gpt_report import report

    committed = ROOT / "reports" / "gpt" / "README.md"
    assert committed.read_text() == report(ROOT)
