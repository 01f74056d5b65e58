"""Verdicts that can answer (issue 18): a powered verdict protocol named apart from the
descriptive one, families for Holm, the per-seed effect, score's test under shared seeds, the
refusal of fitted runs by identity, and the guard on additive's runaway splits.

Calibration (false positives, power) is measured by benchmarks/bench_calibration.py; these
tests pin each piece on the committed grids and on cases with known answers.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fitrules.base.errors import FormError, SplitError
from fitrules.engine.stats import contrast_test, grid_seed_effect, holm, seed_effect
from fitrules.jobs.compare import compare, family, parse_pairs, verdict_splitter
from fitrules.jobs.ledger import compare_scored
from fitrules.model.forms import select_forms
from fitrules.model.grids import default_grid, load_grid
from fitrules.model.splits import RandomSplit
from helpers import refused, run

FIVE = ["composition", "additive", "free_omega", "omega_only", "log_additive"]


@pytest.fixture(scope="module")
def grid():
    path, where = default_grid()
    return load_grid(path, where=where)


@pytest.fixture(scope="module")
def five(grid):
    return compare(grid, select_forms(FIVE), RandomSplit(300, 1 / 3, 0))


# ------------------------------------------------------------------ the verdict protocol
def test_both_protocols_are_named_in_the_json(five):
    doc = five.to_dict()
    s = doc["settings"]
    assert s["descriptive_protocol"]["train_frac"] == pytest.approx(1 / 3)
    assert s["verdict_protocol"]["train_frac"] == pytest.approx(0.9)
    assert s["verdict_protocol"]["n_train"] == 18 and s["verdict_protocol"]["n_splits"] == 300
    assert s["comparisons"] == 10 and s["family"] == "all pairs"
    v = pd.DataFrame(doc["verdict_results"])
    assert len(v) == 300 * 5 and (v["n_train"] == 18).all() and (v["n_test"] == 2).all()
    # descriptive counts still come from the thirds
    r = doc["paired"][0]
    assert r["n"] + 0 <= 300 and r["verdict_n"] <= 300


def test_verdicts_on_the_default_grid(five):
    """Before: every one of the ten pairs 'not distinguishable' (p 0.31 to 0.91)."""
    p = five.paired.set_index(["a", "b"])
    for rival in ("omega_only", "additive"):
        row = p.loc[("composition", rival)]
        assert row["p_holm"] < 0.01 and row["ratio"] < 1, (rival, row["p_holm"])
    row = p.loc[("composition", "log_additive")]
    assert 0.01 < row["p"] < 0.05 and row["p_holm"] > 0.05
    # the descriptive counts are unchanged: omega_only vs log_additive 29 / 271 of 300
    row = p.loc[("omega_only", "log_additive")]
    assert (row["a_better"], row["b_better"], row["n"]) == (29, 271, 300)


def test_a_descriptive_protocol_at_the_verdict_fraction_is_its_own(grid):
    sp = RandomSplit(40, 0.9, 0)
    assert verdict_splitter(sp, 20, 0.9) is None
    cmp = compare(grid, select_forms(["composition", "omega_only"]), sp)
    assert cmp.verdict_results is cmp.results
    assert "the descriptive splits themselves" in str(cmp)
    # a grid too small for a larger training set keeps its own splits too
    assert verdict_splitter(RandomSplit(10, 1 / 3, 0), 2, 0.9) is None
    assert verdict_splitter(RandomSplit(10, 1 / 3, 0), 20, 0.9).n_train(20) == 18


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, True])
def test_verdict_train_frac_is_checked(bad):
    with pytest.raises(SplitError, match="verdict-train-frac"):
        verdict_splitter(RandomSplit(10, 1 / 3, 0), 20, bad)


# ------------------------------------------------------------------ families
def test_against_shrinks_the_family(grid, capsys):
    code, out, err = run(
        ["compare", "--splits", "300", "--forms", ",".join(FIVE), "--against", "composition",
         "--json", "-", "-q"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["comparisons"] == 4 and doc["settings"]["family"] == "named pairs"
    rows = {(r["a"], r["b"]): r for r in doc["paired"]}
    assert set(rows) == {("composition", n) for n in FIVE[1:]}
    # against log_additive: Holm over 4 instead of 10 lets p = 0.016 through
    assert rows[("composition", "log_additive")]["p_holm"] < 0.05


def test_text_says_how_many_comparisons(capsys):
    code, out, _ = run(
        ["compare", "--splits", "20", "--pairs", "composition:additive,omega_only:composition"],
        capsys,
    )
    assert code == 0
    assert "Holm across 2 comparisons (named pairs)" in out
    assert "verdict protocol, 20 random splits, 18 of 20 cells fitted" in out
    assert "splits (descriptive protocol): 20 random, 7 of 20 cells fitted" in out


def test_family_parsing():
    names = ["a", "b", "c"]
    assert family(names) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert parse_pairs("a:b, b:a ,c:a", None, names) == [("a", "b"), ("c", "a")]
    assert parse_pairs(None, "b", names) == [("b", "a"), ("b", "c")]
    assert parse_pairs(None, None, names) is None
    for text, against, match in [
        ("a:x", None, "no form 'x'"),
        ("a:a", None, "itself"),
        ("a-b", None, "not of the form A:B"),
        (",", None, "no pair"),
        ("a:b", "a", "give one"),
        (None, "x", "--against 'x'"),
    ]:
        with pytest.raises(FormError, match=match):
            parse_pairs(text, against, names)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--pairs", "composition:nope"], "no form 'nope'"),
        (["--against", "nope"], "--against 'nope'"),
        (["--pairs", "composition:additive", "--against", "composition"], "give one"),
        (["--verdict-train-frac", "1.2"], "verdict-train-frac"),
    ],
)
def test_bad_families_are_refused(args, match, tmp_path, capsys):
    refused(
        ["compare", "--splits", "10", *args, "--json", tmp_path / "o.json"],
        capsys,
        tmp_path,
        match,
    )


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, None, 0.03, 0.5, 0.004]
    ok = [p for p in ps if p is not None]
    expect = iter(multipletests(ok, method="holm")[1])
    assert [None if p is None else pytest.approx(next(expect)) for p in ps] == holm(ps)


# ------------------------------------------------------------------ seeds as shared effects
def test_seed_effect_on_the_default_grid(grid, capsys):
    """Seed-2 runs sit 0.0128 below their cell means in every cell: F(2, 38) = 49."""
    e = grid_seed_effect(grid)
    assert e["df"] == [2, 38] and e["F"] == pytest.approx(49.1, abs=0.1)
    assert e["extreme_seed"] == "2" and e["extreme_offset"] == pytest.approx(-0.0128, abs=2e-4)
    assert e["sd_shared"] == pytest.approx(0.011, abs=5e-4)
    assert e["sd_run"] == pytest.approx(0.0071, abs=2e-4)
    # the same F as statsmodels' two-way ANOVA (cells as a factor, then seed)
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    runs = grid.runs.assign(cell=grid.runs["H"].astype(str) + "|" + grid.runs["omega"].astype(str))
    table = anova_lm(smf.ols("loss ~ C(cell) + C(seed)", data=runs).fit(), typ=2)
    assert e["F"] == pytest.approx(table.loc["C(seed)", "F"], rel=1e-9)
    for cmd in (["validate"], ["compare", "--splits", "10", "--forms", "composition"]):
        code, out, _ = run(cmd, capsys)
        assert code == 0 and "per-seed effect shared across cells: seed 2 sits -0.01285" in out


def test_no_seed_effect_is_reported_where_there_is_none():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        [{"x": x, "seed": s, "loss": 2 + 0.1 * x + 0.01 * rng.standard_normal()}
         for x in range(8) for s in range(3)]
    )  # fmt: skip
    e = seed_effect(df, ["x"], "seed", "loss")
    assert e is not None and not e["shown"] and e["p"] > 0.01
    # seeds never shared across cells: nothing to measure
    df["seed"] = np.arange(len(df))
    assert seed_effect(df, ["x"], "seed", "loss") is None


def test_contrast_on_the_mean_direction_is_a_t_test_over_seeds():
    """Balanced cells x shared seeds, equal weights: the grand mean's only honest unit is the
    seed, so the test is the one-sample t test of the seed means (S - 1 df)."""
    rng = np.random.default_rng(1)
    C, S = 6, 4
    u = 0.01 * rng.standard_normal(S)
    y = np.array([[2 + u[s] + 0.003 * rng.standard_normal() for s in range(S)] for _ in range(C)])
    cell = np.repeat(np.arange(C), S)
    seed = np.tile(np.arange(S), C).astype(str)
    r = contrast_test(cell, seed, y.ravel(), {c: 1 / C for c in range(C)}, offset=-2.0)
    ref = stats.ttest_1samp(y.mean(axis=0) - 2.0, 0)
    assert r["df"] == pytest.approx(S - 1)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-9)


def test_contrast_without_shared_seeds_uses_runs_within_cells():
    rng = np.random.default_rng(2)
    cell = np.repeat(np.arange(5), 3)
    y = 2 + 0.01 * rng.standard_normal(15)
    w = {c: (1.0 if c == 0 else -0.25) for c in range(5)}
    r = contrast_test(cell, np.arange(15).astype(str), y, w)
    means = np.array([y[cell == c].mean() for c in range(5)])
    s2 = sum(((y[cell == c] - means[c]) ** 2).sum() for c in range(5)) / 10
    se = np.sqrt(s2 * sum(v**2 / 3 for v in w.values()))
    assert r["df"] == 10 and r["se"] == pytest.approx(se)
    assert "runs independent given cells" in r["units"]


def _scores(values, seeds, pa, pb):
    rows = []
    for c, (v, s) in enumerate(zip(values, seeds, strict=True)):
        for form, p in (("a", pa[c]), ("b", pb[c])):
            rows.append({"form": form, "point": {"x": float(c)}, "status": "scored",
                         "prediction": p, "values": list(v), "seeds": s})  # fmt: skip
    return pd.DataFrame(rows)


def test_score_does_not_take_a_shared_seed_offset_for_evidence():
    """Three seed ids shared by 20 new cells, their effects averaging -0.0063: every cell mean
    moves toward the form below the truth. The old t test over runs (as independent) called
    that a verdict; with the seeds as units, three seeds carry little evidence."""
    rng = np.random.default_rng(3)
    truth = 2.2 + 0.05 * rng.standard_normal(20)
    offset = np.array([-0.021, -0.004, 0.006])
    values = [t + offset + 0.002 * rng.standard_normal(3) for t in truth]
    seeds = [["3", "4", "5"]] * 20
    df = _scores(values, seeds, truth - 0.01, truth + 0.01)  # equally far: a null
    row = compare_scored(df).iloc[0]
    d = np.concatenate([(v - (t - 0.01)) ** 2 - (v - (t + 0.01)) ** 2
                        for v, t in zip(values, truth, strict=True)])  # fmt: skip
    assert stats.ttest_1samp(d, 0).pvalue < 0.01  # the old test
    assert row["p"] > 0.2 and "seed ids shared" in row["units"]
    # with fresh seed ids at each cell, the same values are independent runs
    fresh = [[str(3 + 3 * c + i) for i in range(3)] for c in range(20)]
    row = compare_scored(_scores(values, fresh, truth - 0.01, truth + 0.01)).iloc[0]
    assert "runs independent given cells" in row["units"]


# ------------------------------------------------------------------ score: runs it was fitted on
def test_score_refuses_a_shuffled_copy_of_the_fitted_runs(tmp_path, capsys):
    """Before: a row-shuffled copy of main.csv has another sha256 and was scored as new."""
    src = default_grid()[0]
    df = pd.read_csv(src)
    shuffled = tmp_path / "shuffled.csv"
    df.sample(frac=1, random_state=1).to_csv(shuffled, index=False)
    ledger = tmp_path / "l.jsonl"
    base = ["--where", "lr == 3e-4", "--ledger", ledger, "--resamples", "20"]
    assert run(["predict", "--data", src, "--form", "composition", "--at", "H=16,keep=0.25",
                *base], capsys)[0] == 0  # fmt: skip
    rec = json.loads(ledger.read_text().splitlines()[0])
    assert rec["data"]["fitted_runs"] == {"by": "seed", "seeds": ["0", "1", "2"]}
    code, out, err = run(["score", "--ledger", ledger, "--data", shuffled, "--where",
                          "lr == 3e-4", "--json", tmp_path / "s.json"], capsys)  # fmt: skip
    assert code == 0, err
    (row,) = json.loads((tmp_path / "s.json").read_text())["scores"]
    assert row["status"] == "fitted on this data: not a test" and row["fitted_on_this_data"]
    # new seeds at the same cell are scored, the fitted ones left out and counted
    cell = df[(df["H"] == 16) & (df["keep"] == 0.25) & (df["lr"] == 3e-4)]
    more = pd.concat([df, cell.assign(seed=cell["seed"] + 10, loss=cell["loss"] + 0.001)])
    more.to_csv(tmp_path / "more.csv", index=False)
    argv = ["score", "--ledger", ledger, "--data", tmp_path / "more.csv", "--where",
            "lr == 3e-4", "--json", tmp_path / "t.json"]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    (row,) = json.loads((tmp_path / "t.json").read_text())["scores"]
    assert row["status"] == "scored" and row["runs"] == 3 and row["fitted_runs_left_out"] == 3
    assert row["observed"] == pytest.approx(cell["loss"].mean() + 0.001)
    assert "3 fitted run(s) left out" in out


# ------------------------------------------------------------------ the guard
@pytest.mark.parametrize("seed, splits", [(2, [0]), (3, [91, 240]), (10, [138])])
def test_guard_names_additives_runaway_splits(grid, seed, splits):
    """Runaways (held-out error over 10x the form's median) the span and uncertainty rules
    missed: errors 25, 55, 20 and 41%."""
    res = compare(grid, select_forms(["additive"]), RandomSplit(300, 1 / 3, seed)).results
    med = res.loc[res["used"], "heldout_error_pct"].median()
    for s in splits:
        row = res.iloc[s]
        assert row["heldout_error_pct"] > 10 * med
        assert row["wild"] and row["excursion_pct"] > 10, row["guard_reasons"]
        assert any("cells not fitted lie" in g for g in row["guard_reasons"])
    tame = res[res["used"] & (res["heldout_error_pct"] <= 10 * med)]
    assert tame["wild"].mean() <= 0.05


def test_seed_effect_is_not_estimated_where_its_dense_design_would_not_fit():
    """compare and validate call it on every grid: 6,000 cells x 3 seeds would build an
    18,000 x 6,003 design and its SVD."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": np.repeat(np.arange(6000), 3), "seed": np.tile([0, 1, 2], 6000),
                       "loss": 2 + 0.01 * rng.standard_normal(18000)})  # fmt: skip
    assert seed_effect(df, ["x"], "seed", "loss") is None
    assert seed_effect(df[df["x"] < 100], ["x"], "seed", "loss") is not None
