import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fitrules.base.errors import SelectionError
from fitrules.cli import main
from fitrules.engine.stats import (
    BCA_MIN_PAIRS,
    paired_ci,
    parse_selection,
    signflip_p,
    sweep_treatments,
)

BASE = [2.00, 2.10, 2.05, 1.95, 2.02]
TREAT = [1.98, 2.07, 2.06, 1.90, 2.00]


def _runs(base=BASE, treat=TREAT, seeds=None):
    seeds = seeds or list(range(len(base)))
    rows = [
        {"algo": "sync", "H": 1, "seed": s, "loss": v} for s, v in zip(seeds, base, strict=True)
    ]
    rows += [
        {"algo": "diloco", "H": 16, "seed": s, "loss": v} for s, v in zip(seeds, treat, strict=True)
    ]
    return pd.DataFrame(rows)


def test_hand_checked_five_pairs():
    (r,) = paired_ci(_runs(), "loss", "seed", {"algo": "sync"}, [{"algo": "diloco"}])
    # d = [-0.02, -0.03, +0.01, -0.05, -0.02]: mean -0.022, variance 0.00188/4
    assert r.n == 5
    assert r.mean_diff == pytest.approx(-0.022)
    assert r.sd_diff == pytest.approx(np.sqrt(0.00047))
    half = 2.7764451051977987 * np.sqrt(0.00047) / np.sqrt(5)
    assert r.t_interval == pytest.approx((-0.022 - half, -0.022 + half))
    # sign flips: |sum| >= 0.11 for 4 of the 32 sign patterns
    assert r.signflip_p == pytest.approx(4 / 32) and r.signflip_exact
    assert r.pct_of_baseline == pytest.approx(100 * -0.022 / np.mean(BASE))
    assert "not distinguishable from zero" in r.sentence()
    assert not any("pairs:" in w for w in r.warnings)  # 5 pairs: no small-n warning


def test_matches_scipy_and_statsmodels_on_fixed_data():
    rng = np.random.default_rng(7)
    base = 2.2 + 0.01 * rng.standard_normal(11)
    treat = base - 0.012 + 0.006 * rng.standard_normal(11)
    runs = _runs(base, treat)
    (r,) = paired_ci(
        runs,
        "loss",
        "seed",
        {"algo": "sync"},
        [{"algo": "diloco"}],
        level=0.9,
        n_resamples=10_000,
        seed=3,
    )
    d = treat - base
    lo, hi = stats.t.interval(0.9, 10, loc=d.mean(), scale=stats.sem(d))
    assert r.t_interval == pytest.approx((lo, hi), rel=1e-12)
    assert r.t_p == pytest.approx(stats.ttest_rel(treat, base).pvalue, rel=1e-12)
    assert r.wilcoxon_p == pytest.approx(stats.wilcoxon(treat, base).pvalue, rel=1e-12)
    # 11 pairs: below BCA_MIN_PAIRS no BCa interval, and a note says why
    assert r.bootstrap_interval == (None, None)
    assert any("no BCa bootstrap interval" in w for w in r.warnings)
    perm = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=2**11, alternative="two-sided"
    )
    assert r.signflip_p == pytest.approx(perm.pvalue, rel=1e-9)
    assert r.sentence().startswith("algo=diloco beat algo=sync by")


def test_holm_over_several_treatments():
    rows = []
    rng = np.random.default_rng(0)
    for s in range(8):
        for H, shift in ((1, 0.0), (4, -0.01), (16, -0.002), (64, 0.02)):
            rows.append({"H": H, "seed": s, "loss": 2.2 + shift + 0.005 * rng.standard_normal()})
    runs = pd.DataFrame(rows)
    sels = sweep_treatments(runs, {"H": "1"}, "H")
    assert [s["H"] for s in sels] == ["4", "16", "64"]
    res = paired_ci(runs, "loss", "seed", {"H": "1"}, sels)
    raw = [r.t_p for r in res]
    assert [r.holm_t_p for r in res] == pytest.approx(list(multipletests(raw, method="holm")[1]))


def test_unpaired_seeds_are_dropped_and_listed():
    runs = _runs(BASE, TREAT)
    runs = runs[~((runs.algo == "diloco") & (runs.seed == 4))]
    (r,) = paired_ci(runs, "loss", "seed", {"algo": "sync"}, [{"algo": "diloco"}])
    assert r.n == 4 and r.dropped_seeds == {"baseline_only": [4], "treatment_only": []}
    assert any("only 4 pairs" in w for w in r.warnings)


def test_signflip_exact_enumeration_small():
    p, exact = signflip_p(np.array([1.0, 2.0, 3.0]))
    assert exact and p == pytest.approx(2 / 8)


@pytest.mark.parametrize(
    "baseline, treatment, match",
    [
        ("lr=1", "algo=diloco", "no column 'lr'"),
        ("algo=sync", "algo=adam", "no runs with algo=adam"),
        ("algo=sync", "algo=sync", "same runs as the baseline"),
        ("algo=sync", "H", "not of the form COLUMN=VALUE"),
    ],
)
def test_bad_selections(baseline, treatment, match):
    with pytest.raises(SelectionError, match=match):
        paired_ci(
            _runs(),
            "loss",
            "seed",
            parse_selection(baseline, "--baseline"),
            [parse_selection(treatment, "--treatment")],
        )


def test_no_common_seed_and_duplicate_seed():
    runs = _runs(BASE, TREAT)
    runs.loc[runs.algo == "diloco", "seed"] += 100
    with pytest.raises(SelectionError, match="share no seed"):
        paired_ci(runs, "loss", "seed", {"algo": "sync"}, [{"algo": "diloco"}])
    runs = pd.concat([_runs(), _runs().assign(H=4)])
    with pytest.raises(SelectionError, match="runs for seed 0"):
        paired_ci(runs, "loss", "seed", {"algo": "sync"}, [{"algo": "diloco", "H": "16"}])


@pytest.mark.parametrize(
    "args, match",
    [
        (["--baseline", "zz=1", "--treatment", "algo=diloco"], "no column 'zz'"),
        (["--baseline", "algo=sync", "--treatment", "algo=nope"], "no runs with algo=nope"),
        (["--baseline", "algo=sync", "--treatment", "algo=sync"], "same runs"),
    ],
)
def test_cli_bad_selection_exit_2(tmp_path, capsys, args, match):
    path = tmp_path / "p.csv"
    _runs().to_csv(path, index=False)
    out = tmp_path / "o.json"
    assert main(["ci", "--data", str(path), "--json", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
    assert not out.exists()


def test_cli_no_common_seed_exit_2(tmp_path, capsys):
    runs = _runs()
    runs.loc[runs.algo == "diloco", "seed"] += 100
    path = tmp_path / "p.csv"
    runs.to_csv(path, index=False)
    code = main(
        ["ci", "--data", str(path), "--baseline", "algo=sync", "--treatment", "algo=diloco"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "share no seed" in err[0]


def test_cli_report(tmp_path, capsys):
    path = tmp_path / "p.csv"
    _runs().to_csv(path, index=False)
    rep = tmp_path / "rep"
    args = [
        "ci",
        "--data",
        str(path),
        "--baseline",
        "algo=sync",
        "--treatment",
        "algo=diloco",
        "--report",
        str(rep),
    ]
    assert main([*args, "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "algo=diloco vs algo=sync" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["results"][0]["n"] == 5
    assert (rep / "report.md").exists() and (rep / "differences_1.png").stat().st_size > 5000
    assert main(args) == 2  # the report exists: refused without --force


@pytest.mark.parametrize("n", [3, 11, 19])
def test_no_bca_interval_below_the_minimum_number_of_pairs(n):
    rng = np.random.default_rng(n)
    base = 2.2 + 0.01 * rng.standard_normal(n)
    (r,) = paired_ci(
        _runs(base, base - 0.01 + 0.005 * rng.standard_normal(n)),
        "loss",
        "seed",
        {"algo": "sync"},
        [{"algo": "diloco"}],
    )
    assert r.bootstrap_interval == (None, None)
    assert any(f"at least {BCA_MIN_PAIRS} pairs ({n} here)" in w for w in r.warnings)
    assert all(np.isfinite(r.t_interval)) and r.signflip_exact


def test_bca_interval_matches_scipy_from_the_minimum_number_of_pairs():
    rng = np.random.default_rng(5)
    n = BCA_MIN_PAIRS + 4
    base = 2.2 + 0.01 * rng.standard_normal(n)
    treat = base - 0.012 + 0.006 * rng.standard_normal(n)
    (r,) = paired_ci(
        _runs(base, treat),
        "loss",
        "seed",
        {"algo": "sync"},
        [{"algo": "diloco"}],
        level=0.9,
        n_resamples=10_000,
        seed=3,
    )
    boot = stats.bootstrap(
        (treat - base,),
        np.mean,
        confidence_level=0.9,
        n_resamples=10_000,
        method="BCa",
        random_state=np.random.default_rng(3),
    )
    assert r.bootstrap_interval == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high), rel=1e-12
    )
