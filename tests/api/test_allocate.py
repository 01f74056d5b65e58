"""fr.allocate: the loss-optimal split of a budget, against a known truth and a published
allocation, its intervals, its views, and the input it refuses."""

from __future__ import annotations

import json

import pytest
from tables import chinchilla_runs

import fitrules as fr
from fitrules.base.errors import FitrulesError

LAW = "chin(N, D) = E + A/N**alpha + B/D**beta"
# the truth of tables.chinchilla_runs: Hoffmann et al. 2022's constants
TRUE_A = 0.28 / (0.34 + 0.28)


def _true_n(budget: float) -> float:
    G = (0.34 * 406.4 / (0.28 * 410.7)) ** (1 / 0.62)
    return G * (budget / 6) ** TRUE_A


@pytest.fixture(scope="module")
def runs():
    return fr.load_grid(chinchilla_runs(0))


@pytest.fixture(scope="module")
def allocation(runs):
    return fr.allocate(runs, LAW, budgets="1e18:1e22:5")


def test_the_allocation_of_a_known_truth_gives_its_optimum_and_exponent(allocation):
    """On runs of a known law (0.35% noise), N* is the truth's within 10% at every budget, the
    exponent's interval covers beta/(alpha+beta), every interval holds its estimate, and every
    optimum spends its budget (how often the intervals cover: benchmarks/bench_allocate.py)."""
    a = allocation
    assert a.method == "closed form"
    e = a.exponents["N"]
    assert e["low"] < TRUE_A < e["high"]
    assert e["value"] + a.exponents["D"]["value"] == pytest.approx(1.0)
    for r in a.table.to_dict("records"):
        assert r["N"] == pytest.approx(_true_n(r["budget"]), rel=0.1)
        assert r["N_low"] < r["N"] < r["N_high"] and r["D_low"] < r["D"] < r["D_high"]
        assert 6 * r["N"] * r["D"] == pytest.approx(r["budget"])
        assert r["ratio"] == pytest.approx(r["D"] / r["N"])
        assert r["loss_low"] < r["loss"] < r["loss_high"]


def test_budgets_beyond_the_grid_are_named_as_extrapolation(runs):
    """An optimum outside the fitted cells' range says which variable and how far."""
    a = fr.allocate(runs, LAW, budgets=[1e19, 1e25], intervals="none")
    inside, outside = a.table["extrapolation"]
    assert inside == ""
    assert "N" in outside and "x above" in outside
    assert "extrapolation" in str(a)


def test_a_fitted_form_is_allocated_without_refitting(runs):
    """A FittedForm given as the form is used as it is (its constants, its bootstrap)."""
    f = fr.fit(runs, LAW, intervals=True, resamples=40)
    a = fr.allocate(None, f, budgets="1e20", intervals="bootstrap")
    assert a.fit is f and a.draws == 40 and a.failed_draws == 0
    r = a.at(1e20)
    assert r["N_low"] < r["N"] < r["N_high"]
    assert a.exponents["N"]["low"] < a.exponents["N"]["value"] < a.exponents["N"]["high"]
    assert "bootstrap refits" in a.interval_kind


def test_bootstrap_intervals_come_from_refits_of_the_grid(runs):
    """intervals='bootstrap' fits with a bootstrap itself and reads percentiles of its refits."""
    a = fr.allocate(runs, LAW, budgets="1e21", intervals="bootstrap", resamples=30, seed=3)
    assert a.draws == 30 and a.fit.bootstrap is not None
    assert a.table["N_low"].iloc[0] < _true_n(1e21) < a.table["N_high"].iloc[0]


def test_a_form_of_another_shape_is_allocated_numerically(runs):
    """A form with an interaction term has no closed form: the optimum is searched along the
    cost and lies on it."""
    a = fr.allocate(runs, "mix(N, D) = E + A/N**alpha + B/D**beta + c*N/D",
                    budgets="1e19,1e21", bounds=["alpha=0.05..1", "beta=0.05..1"])  # fmt: skip
    assert a.method == "numerical"
    for r in a.table.to_dict("records"):
        assert 6 * r["N"] * r["D"] == pytest.approx(r["budget"], rel=1e-9)
    assert "numerically" in str(a)


def test_the_views_render_the_same_table(allocation, tmp_path):
    """Text, HTML and JSON show the allocation; the JSON holds only finite numbers and the
    frontier is a matplotlib Axes with both variables."""
    a = allocation
    text = str(a)
    for budget in ("1e+18", "1e+22"):
        assert budget in text
    assert "N* ~ C^" in text and "delta method" in text
    assert "<table" in a._repr_html_()
    assert a.to_json(tmp_path / "a.json") is None
    doc = json.loads((tmp_path / "a.json").read_text())
    assert len(doc["allocation"]) == 5
    assert doc["exponents"]["N"]["value"] == pytest.approx(a.exponents["N"]["value"], rel=1e-9)
    assert doc["cost"]["expression"] == "6*N*D"
    ax = a.plot_frontier()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lbl.startswith("N*") for lbl in labels) and any(
        lbl.startswith("D*") for lbl in labels
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(budgets="-1"), "budgets '-1': each budget must be a positive finite number"),
        (dict(budgets=[1e20, 0]), "each budget must be a positive finite number"),
        (dict(budgets="1e24:1e18:3"), "needs LOW < HIGH"),
        (dict(budgets="1e18:1e24:1"), "count of a range"),
        (dict(budgets="lots"), "'lots' is not a number"),
        (dict(cost="6*N*T"), "cost '6\\*N\\*T' names T, which form 'chin' does not read"),
        (dict(cost="N + D"), "is not a product"),
        (dict(intervals="jackknife"), "intervals 'jackknife' is unknown"),
        (dict(form="up(N, D) = E + exp(a)*N**0.1 + B/D**beta"), "does not fall as N grows"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_in_one_line(runs, kwargs, match):
    """Each way to be wrong: a documented FitrulesError whose one line names the value."""
    call = {"form": LAW, "budgets": "1e20"} | kwargs
    with pytest.raises(FitrulesError, match=match) as info:
        fr.allocate(runs, **call)
    assert len(str(info.value).splitlines()) == 1


def test_a_form_reading_a_third_variable_is_refused():
    """The budget is split between the cost's two variables; a third one is refused."""
    g = fr.load_grid(chinchilla_runs(0).assign(U=lambda t: t["N"] / 10))
    with pytest.raises(FitrulesError, match="reads U besides N and D"):
        fr.allocate(g, "three(N, D, U) = E + A/N**alpha + B/D**beta + c*U")


def test_bootstrap_intervals_of_a_fit_without_a_bootstrap_are_refused(runs):
    """A fit made without intervals has no refits to take percentiles of."""
    f = fr.fit(runs, LAW)
    with pytest.raises(FitrulesError, match="needs a fit with a bootstrap"):
        fr.allocate(None, f, intervals="bootstrap")



@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(resamples=50), "resamples would be ignored: the bootstrap's options are used only "
                             "with intervals 'bootstrap'"),
        (dict(seed=3, bootstrap="seeds"), "seed, bootstrap would be ignored"),
        (dict(intervals="none", resamples=50), "resamples would be ignored"),
        (dict(intervals="none", level=0.9), "level 0.9 would be ignored: intervals 'none' makes "
                                            "no intervals"),
    ],
)  # fmt: skip
def test_an_option_allocate_would_not_use_is_refused(runs, kwargs, match):
    """Issue 61: the bootstrap's options beside covariance or no intervals, and the level
    beside none, were accepted and ignored; now refused in one line naming them."""
    with pytest.raises(FitrulesError, match=match) as info:
        fr.allocate(runs, LAW, budgets="1e20", **kwargs)
    assert len(str(info.value).splitlines()) == 1


def test_a_fitted_form_refuses_the_options_of_a_fit_it_does_not_make(runs):
    """A fitted form brings its fit and its bootstrap: fitting and bootstrap options beside it
    were ignored, now refused; the level, which its intervals use, is not."""
    f = fr.fit(runs, LAW, intervals=True, resamples=20)
    for kwargs in (dict(objective="log_huber"), dict(fix={"alpha": 0.3}),
                   dict(intervals="bootstrap", resamples=30)):  # fmt: skip
        with pytest.raises(FitrulesError, match="would be ignored: a fitted form brings its fit"):
            fr.allocate(None, f, budgets="1e20", **kwargs)
    assert fr.allocate(None, f, budgets="1e20", level=0.9).level == 0.9


def test_a_budget_without_an_optimum_is_said_so_and_the_others_stand(runs):
    """A budget beyond the numerical search's reach has a row saying why, nothing printed as
    nan, and the exponents are taken at the budgets that have an optimum."""
    from fuzzing import NONFINITE

    a = fr.allocate(runs, "m(N, D) = E + A/N**alpha + B/D**beta + c*N/D", budgets=[1e19, 1e60],
                    bounds=["alpha=0.05..1", "beta=0.05..1"])  # fmt: skip
    assert a.table["reason"].iloc[0] == "" and "no N and D within" in a.table["reason"].iloc[1]
    assert a.reference_budget == pytest.approx(1e19)
    assert 0.3 < a.exponents["N"]["value"] < 0.7
    text = str(a)
    assert NONFINITE.search(text) is None, text
    assert "1 budget(s) have no optimum" in text


def _flattening_runs(seed: int):
    """60 scattered runs of Hoffmann's law whose D term is a sum of two power laws that
    flattens past the runs (rms misfit of the Chinchilla form about 0.06%), 0.5% noise; and
    the truth's N* at C = 1e22 (the search that benchmarks/bench_intervals.py section 9 uses)."""
    import math

    import numpy as np
    import pandas as pd
    from scipy.optimize import minimize_scalar

    def truth(N, D):
        return 1.69 + 406.4 * N**-0.34 + 20000 * D**-0.5 + 4 * D**-0.08

    rng = np.random.default_rng(seed)
    N = np.exp(rng.uniform(np.log(1e7), np.log(1e9), 60))
    D = np.exp(rng.uniform(np.log(1e9), np.log(1e11), 60))
    y = truth(N, D) * (1 + 0.005 * rng.standard_normal(60))
    r = minimize_scalar(lambda v: float(truth(math.exp(v), 1e22 / (6 * math.exp(v)))),
                        bounds=(math.log(1e5), math.log(1e17)), method="bounded",
                        options={"xatol": 1e-9})  # fmt: skip
    return fr.load_grid(pd.DataFrame({"N": N, "D": D, "loss": y})), math.exp(r.x)


def test_the_family_interval_covers_a_flattening_truth_the_form_alone_misses():
    """On a seeded grid whose law flattens past the runs, the Chinchilla form's interval for
    N* at 10x beyond misses the truth, the interval over the family's forms covers it, and
    the text says so when the forms' answers disagree by more than the form's interval is
    wide (how often each covers, over 100 grids: benchmarks/bench_intervals.py --only
    allocation_misfit)."""
    g, n_true = _flattening_runs(0)
    law = "chin(N, D) = E + A*(N/1e8)**(-alpha) + B*(D/1e10)**(-beta)"
    a = fr.allocate(g, law, budgets=1e22, family="default")
    r = a.at(1e22)
    assert not r["N_low"] <= n_true <= r["N_high"]
    assert r["N_forms_low"] <= n_true <= r["N_forms_high"]
    assert r["N_forms_low"] <= r["N_forms_min"] <= r["N"] <= r["N_forms_max"] <= r["N_forms_high"]
    assert set(a.forms["form"]) >= {"chin (given)", "interaction", "two_power_D", "broken_D"}
    spread, wide = r["N_forms_max"] / r["N_forms_min"], r["N_high"] / r["N_low"]
    said = any("disagree on N* by" in n and "the form, not the noise" in n for n in a.notes)
    assert said == (spread > wide)
    assert any("not told apart by the grid" in n for n in a.notes)
    assert "candidate forms" in str(a) and "forms" in a.to_dict()
    alone = fr.allocate(g, law, budgets=1e22)
    assert alone.forms is None and "forms" not in alone.to_dict()
    assert alone.at(1e22)["N"] == pytest.approx(r["N"], rel=1e-9)


@pytest.mark.parametrize(
    "family, match",
    [("all", "family 'all' is unknown; allowed: none, default"),
     (None, "family None is unknown"), (["default"], "family \\['default'\\] is unknown")],
)  # fmt: skip
def test_an_unknown_family_is_refused(runs, family, match):
    """A family that is not one of the stated ones is refused in one line naming it."""
    with pytest.raises(FitrulesError, match=match) as info:
        fr.allocate(runs, LAW, budgets="1e20", family=family)
    assert len(str(info.value).splitlines()) == 1


def test_a_family_beside_a_fitted_form_is_refused(runs):
    """The family's forms are fitted to the grid, which a fitted form does not bring."""
    f = fr.fit(runs, LAW)
    with pytest.raises(FitrulesError, match="family 'default' fits each candidate form"):
        fr.allocate(None, f, budgets="1e20", family="default")


def test_a_family_without_intervals_spans_the_forms_answers_and_says_so(runs):
    """With intervals 'none' the range over the family's forms is their answers' range, and
    the text says no form's interval is in it (not that the forms gave none)."""
    a = fr.allocate(runs, LAW, budgets="1e20,1e22", intervals="none", family="default")
    kept = a.forms[a.forms["kept"]]
    for r in a.table.to_dict("records"):
        at = kept[kept["budget"] == r["budget"]]["N"]
        assert r["N_forms_low"] == pytest.approx(at.min())
        assert r["N_forms_high"] == pytest.approx(at.max())
    assert any("no intervals asked for: the range over the forms" in n for n in a.notes)
    assert not any("gave no interval" in n for n in a.notes)
