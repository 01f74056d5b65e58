"""fr.fit: per-level constants, groups, fixed, tied and bounded constants, weights, information
criteria, bootstraps and the points a prediction may take."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares
from tables import chinchilla_like, grouped_table, unequal_runs

import fitrules as fr
from conftest import EXTERNAL, composition_grid
from fitrules.base.errors import FitrulesError, FormError

COMP_H = "comp_h = L0[H] + a*omega*(H/16)**b"


def _kaplan_table(seed=0, nc=8.8e13):
    rng = np.random.default_rng(seed)
    rows = []
    for n in np.geomspace(1e7, 1e10, 12):
        for s in range(2):
            value = (nc / n) ** 0.076
            rows.append({"N": n, "seed": s, "loss": value * (1 + 2e-4 * rng.normal())})
    return pd.DataFrame(rows)


def test_per_level_intercepts_fit_the_default_grid_to_the_issue_numbers():
    """L0[H] fits the default grid to 0.376% (composition 0.642%), its intercepts rising with H."""
    # measured on main at a3516a9: composition 0.642%, L0[H] + a*omega*(H/16)**b 0.376%
    per_h = fr.fit(None, COMP_H)
    plain = fr.fit(None, "composition")
    assert per_h.train_error["heldout_error_pct"] == pytest.approx(0.376, abs=0.0015)
    assert plain.train_error["heldout_error_pct"] == pytest.approx(0.642, abs=0.0015)
    assert list(per_h.constants) == ["L0[H=1]", "L0[H=4]", "L0[H=16]", "L0[H=64]", "a", "b"]
    # the intercepts rise with H, as the observed loss at omega = 0 does (2.14 to 2.196)
    l0 = [per_h.constants[f"L0[H={h}]"] for h in (1, 4, 16, 64)]
    assert l0 == sorted(l0) and l0[-1] - l0[0] > 0.04
    assert per_h.reasons == []


def test_predict_refuses_a_level_with_no_constant():
    """A per-level fit predicts at a fitted H and refuses H=8, listing the levels it has."""
    f = fr.fit(None, COMP_H)
    assert np.isfinite(f.predict("H=16,keep=0.25")["prediction"])
    with pytest.raises(FormError, match=r"none for H=8; .* 1, 4, 16, 64"):
        f.predict("H=8,keep=0.25")


@pytest.mark.parametrize(
    "text, match",
    [
        ("x = L0[H] + L0*omega", "always written with it"),
        ("x = L0[H] + a*omega + L0[omega]", "always written with it"),
        ("x = L0[zz] + a*omega", "'zz' to be a column"),
    ],
)
def test_bad_per_level_forms_are_refused(text, match):
    """A per-level constant written also bare, or indexed by a non-column, is refused."""
    with pytest.raises(FormError, match=match):
        fr.fit(None, text)


def test_grouped_fit_recovers_per_group_scales_and_the_shared_exponent():
    """by='M' recovers each group's E and A and the shared alpha, shared by default."""
    df, E, A, alpha = grouped_table()
    f = fr.fit(df, "g = E + A*N**(-alpha)", by="M", shared="alpha")
    k = f.constants
    assert k["alpha"] == pytest.approx(alpha, rel=2e-3)
    for m in E:
        assert k[f"E[M={m}]"] == pytest.approx(E[m], rel=1e-3)
        assert k[f"A[M={m}]"] == pytest.approx(A[m], rel=5e-3)
    assert len(k) == 9 and f.information["k"] == 9
    # the default shares the nonlinear constants: the same fit
    assert fr.fit(df, "g = E + A*N**(-alpha)", by="M").constants == pytest.approx(k)


def test_grouped_fit_matches_a_joint_scipy_fit():
    """A grouped fit's constants match scipy's joint relative least squares to 1e-5."""
    df, E, A, alpha = grouped_table(seed=1)
    f = fr.fit(df, "g = E + A*N**(-alpha)", by="M")
    cells = df.groupby(["N", "M"], as_index=False)["loss"].mean()
    groups = sorted(E)

    def residuals(p):
        e, a = dict(zip(groups, p[:4], strict=True)), dict(zip(groups, p[4:8], strict=True))
        pred = cells["M"].map(e) + cells["M"].map(a) * cells["N"] ** -p[8]
        return (pred - cells["loss"]) / cells["loss"]  # relative least squares

    start = np.r_[np.full(4, 2.0), np.full(4, 1.0), 0.5]
    sp = least_squares(residuals, start, xtol=1e-14, ftol=1e-14, gtol=1e-14).x
    mine = [f.constants[f"E[M={m}]"] for m in groups]
    mine += [f.constants[f"A[M={m}]"] for m in groups] + [f.constants["alpha"]]
    np.testing.assert_allclose(mine, sp, rtol=1e-5)


def test_group_options_are_checked():
    """fr.fit refuses by= not a column, an unknown shared constant, shared without by, by unread."""
    df, *_ = grouped_table()
    with pytest.raises(FormError, match="not a column"):
        fr.fit(df, "g = E + A*N**(-alpha)", by="Q")
    with pytest.raises(FormError, match="shared constant 'zz'"):
        fr.fit(df, "g = E + A*N**(-alpha)", by="M", shared="zz")
    with pytest.raises(FormError, match="shared needs by"):  # API terms: no flags
        fr.fit(df, "g = E + A*N**(-alpha)", shared="alpha")
    with pytest.raises(FormError, match="does not read"):
        fr.fit(df, "g = E + A*M**(-alpha) + 0*N", by="M")


def test_kaplan_fits_with_a_widened_bound():
    """(Nc/N)**alphaN recovers Nc = 8.8e13 and alphaN = 0.076 given a bound for Nc."""
    df = _kaplan_table()
    f = fr.fit(df, "kaplan = (Nc/N)**alphaN", bounds=["Nc=1e10..1e16"])
    assert f.constants["Nc"] == pytest.approx(8.8e13, rel=0.1)
    assert f.constants["alphaN"] == pytest.approx(0.076, rel=0.01)
    assert f.reasons == []


def test_kaplan_fits_as_written_with_a_default_range_from_n():
    """Issue 27: Nc ~ 8.8e13 used to stop at the default bound 10 of every nonlinear
    constant; a constant that scales N now gets a range from N's values."""
    c = fr.compare(_kaplan_table(), ["kaplan = (Nc/N)**alphaN"], splits=20)
    assert not c.results["degenerate"].any()
    f = c.full_fits["kaplan"]
    assert f.constants["Nc"] == pytest.approx(8.8e13, rel=0.1)
    notes = c.forms[0].constant_notes
    assert "default ranges from the grid's values" in notes
    assert "Nc in [10, 1e+16] (scale of N)" in notes


def test_a_scale_beyond_its_default_range_says_how_to_give_it():
    """Nc = 1e30, beyond its default range: every split is degenerate and names --bound 'Nc=...'."""
    # Nc = 1e30 lies beyond N's range times 1e6: the fit stops at the default bound and
    # says which option widens it
    c = fr.compare(_kaplan_table(nc=1e30), ["kaplan = (Nc/N)**alphaN"], splits=20)
    assert c.results["degenerate"].all()
    hint = "--bound 'Nc=LOW..HIGH'"
    assert all(any(hint in r for r in rs) for rs in c.results["reasons"])
    assert "Nc is at its default bound" in str(c)
    assert "its range as scale of N" in c.results["reasons"][0][0]


def test_a_constant_at_its_bound_says_which_option_widens_it():
    """A constant stopped at its bound (b=0..0.3) is reported with the --bound that widens it."""
    f = fr.fit(None, "composition", bounds=["b=0..0.3"])  # b is about 0.54 unbounded
    assert f.constants["b"] == pytest.approx(0.3)
    assert any("b is at its bound 0.3" in r and "--bound 'b=LOW..HIGH'" in r for r in f.reasons)


def test_a_fixed_constant_is_the_same_as_writing_its_value():
    """fix={'b': 0.5} fits as the form with 0.5 written in, and the JSON records the fixed value."""
    fixed = fr.fit(None, "k = L0 + a*omega*(H/16)**b", fix={"b": 0.5})
    written = fr.fit(None, "k = L0 + a*omega*(H/16)**0.5")
    assert set(fixed.constants) == {"L0", "a"}
    assert fixed.constants == pytest.approx(written.constants, rel=1e-9)
    assert fixed.to_dict()["form"]["fixed"] == {"b": 0.5}


def test_a_tie_is_one_name_written_twice():
    """A constant written in two terms (b in x**b and z**b) is one constant, recovered at 0.6."""
    rng = np.random.default_rng(3)
    rows = [
        {"x": x, "z": z, "seed": 0, "loss": 1 + 2 * x**0.6 + 3 * z**0.6 + 1e-6 * rng.normal()}
        for x in (1, 2, 4, 8)
        for z in (1, 3, 9)
    ]
    f = fr.fit(pd.DataFrame(rows), "t = L0 + a*x**b + c*z**b")
    assert f.constants["b"] == pytest.approx(0.6, rel=1e-4)


def test_forms_toml_takes_fixed_and_bounds(tmp_path, monkeypatch):
    """forms.toml entries may give bounds and fixed constants, and fits use them."""
    (tmp_path / "forms.toml").write_text(
        '[kap]\nexpr = "(Nc/N)**alphaN"\nbounds = { Nc = [1e10, 1e16] }\n'
        '[fx]\nexpr = "L0 + a*omega*(H/16)**b"\nfixed = { b = 0.5 }\n'
    )
    monkeypatch.chdir(tmp_path)
    assert fr.fit(_kaplan_table(), "kap").constants["Nc"] == pytest.approx(8.8e13, rel=0.1)
    assert set(fr.fit(None, "fx").constants) == {"L0", "a"}


def test_fix_or_bound_of_no_constant_is_refused():
    """fix of no constant or of a column, by on a per-level form, a linear bound: all refused."""
    with pytest.raises(FormError, match="^fix 'zz': no form has a constant"):
        fr.fit(None, "composition", fix={"zz": 1.0})
    with pytest.raises(FormError, match="cannot fix 'H', a column"):
        fr.fit(None, "k = L0 + a*omega*(H/16)**b", fix={"H": 16})
    with pytest.raises(FormError, match="already has per-level constants"):
        fr.fit(None, "composition_per_h", by="keep")
    with pytest.raises(FormError, match="enters linearly"):
        fr.fit(None, "composition", bounds={"L0": (0, 1)})


@pytest.mark.parametrize("objective", ["abs_ls", "rel_ls"])
def test_run_weights_reproduce_a_run_level_least_squares_fit(objective):
    """weights='runs' gives scipy's least squares over the runs, not the equal-cell fit."""
    df = unequal_runs()
    f = fr.fit(df, "w = L0 + a*x**b", weights="runs", objective=objective)
    means = df.groupby("x")["loss"].transform("mean")  # each run's cell mean

    def residuals(p):
        r = p[0] + p[1] * df["x"] ** p[2] - df["loss"]
        return r if objective == "abs_ls" else r / means  # relative to the cell mean

    sp = least_squares(residuals, [1.0, 1.0, 1.0], xtol=1e-14, ftol=1e-14, gtol=1e-14).x
    # the fitter stops refining an exponent at 1e-6 of its starting range (6e-6 for b)
    np.testing.assert_allclose([f.constants[c] for c in ("L0", "a", "b")], sp, rtol=1e-4)
    # and it is not the equal-cell fit
    cells = fr.fit(df, "w = L0 + a*x**b", objective=objective)
    assert abs(cells.constants["b"] - f.constants["b"]) > 1e-2
    assert f.to_dict()["weights"] == "runs" and "weights runs" in str(f)


def test_inverse_variance_weights_need_a_spread_in_every_cell():
    """Inverse-variance weights need a spread in every cell, and then match scipy's chi fit."""
    with pytest.raises(FitrulesError, match="needs a standard error in every cell"):
        fr.fit(unequal_runs(), "w = L0 + a*x**b", weights="inverse-variance")
    df = unequal_runs()
    df = df[df.groupby("x")["seed"].transform("count") > 1]
    f = fr.fit(df, "w = L0 + a*x**b", weights="inverse-variance", objective="abs_ls")
    sem = df.groupby("x")["loss"].sem().to_numpy()
    mean = df.groupby("x")["loss"].mean().to_numpy()
    x = np.sort(df["x"].unique())

    def residuals(p):
        return (p[0] + p[1] * x ** p[2] - mean) / sem  # chi

    sp = least_squares(residuals, [1.0, 1.0, 1.0], xtol=1e-14, ftol=1e-14, gtol=1e-14).x
    np.testing.assert_allclose([f.constants[c] for c in ("L0", "a", "b")], sp, rtol=1e-4)


def test_weighted_fits_get_bootstrap_intervals():
    """A run-weighted fit gets studentized (auto: residuals) bootstrap intervals and predictions."""
    df = unequal_runs()
    f = fr.fit(df, "w = L0 + a*x**b", weights="runs", intervals=True, resamples=50)
    lo, hi = f.intervals["b"]
    assert lo < f.constants["b"] < hi
    assert f.bootstrap.kind == "studentized"  # the default: residuals, weighted
    assert np.isfinite(f.predict("x=10")["interval"]).all()
    f = fr.fit(df, "w = L0 + a*x**b", weights="runs", intervals=True, resamples=50,
               bootstrap="auto")  # fmt: skip
    assert f.bootstrap.kind == "residuals"  # a cell has a single run
    assert np.isfinite(f.predict("x=10")["interval"]).all()


def test_information_criteria_match_statsmodels_ols():
    """A linear fit's log-likelihood, AIC, AICc, BIC and R^2 match statsmodels' OLS."""
    sm = pytest.importorskip("statsmodels.api")
    from statsmodels.tools.eval_measures import aicc

    rng = np.random.default_rng(5)
    x = np.linspace(0, 10, 15)
    y = 3 + 0.7 * x + rng.normal(0, 0.4, len(x))
    df = pd.DataFrame({"x": x, "seed": 0, "loss": y})
    f = fr.fit(df, "lin = L0 + a*x", objective="abs_ls")
    ols = sm.OLS(y, sm.add_constant(x)).fit()
    ic = f.information
    assert ic["log_likelihood"] == pytest.approx(ols.llf, rel=1e-9)
    assert ic["aic"] == pytest.approx(ols.aic, rel=1e-9)
    assert ic["bic"] == pytest.approx(ols.bic, rel=1e-9)
    assert ic["r2"] == pytest.approx(ols.rsquared, rel=1e-9)
    assert ic["aicc"] == pytest.approx(aicc(ols.llf, len(x), 2), rel=1e-9)
    text = str(f)
    assert f"AIC {ols.aic:.4g}" in text and "what compare ranks" in text
    assert f.to_dict()["information_criteria"]["k"] == 2
    assert "AICc" in f._repr_html_()


def test_one_run_per_cell_gets_a_residual_bootstrap_and_nonzero_intervals():
    """With one run per cell the bootstrap resamples residuals and every interval has a width.

    With one run per cell the seed bootstrap cannot move anything: intervals had zero width
    ("E = 1.81722 [1.81722, 1.81722]")."""
    rng = np.random.default_rng(3)
    N = 10 ** rng.uniform(7.5, 10, 60)
    D = 10 ** rng.uniform(9, 11.5, 60)
    loss = (1.8 + 480 / N**0.35 + 2000 / D**0.37) * np.exp(0.01 * rng.standard_normal(60))
    g = fr.load_grid(pd.DataFrame({"N": N, "D": D, "loss": loss}))
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50)  # fmt: skip
    assert f.bootstrap.kind == "studentized"  # the default resamples residuals
    for c, (lo, hi) in f.intervals.items():
        assert hi - lo > 0, c
        assert f.stderr[c] > 0
    assert abs(f.correlation.loc["B", "beta"]) > 0.9
    assert "studentized bootstrap" in str(f) and "bootstrap-t" in str(f)
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50, bootstrap="auto")  # fmt: skip
    assert f.bootstrap.kind == "residuals" and "single run" in f.bootstrap.reason
    assert all(hi - lo > 0 for lo, hi in f.intervals.values())
    assert "residuals bootstrap" in str(f)


def test_shared_naming_every_constant_says_so():
    """fr.fit refuses a shared= naming every constant, saying so.

    It was refused with an unrelated "declared variable(s)" message."""
    df = composition_grid()
    df["M"] = (df["keep"] < 0.3).astype(int) + 1
    with pytest.raises(FormError, match="shared names every constant"):
        fr.fit(fr.load_grid(df), "composition", by="M", shared="L0,a,b")


def test_seeds_bootstrap_switch_through_the_api(one_run_csv):
    """bootstrap='seeds' on one run per cell switches to residuals, with nonzero intervals."""
    f = fr.fit(str(one_run_csv), "composition", intervals=True, bootstrap="seeds")
    assert f.bootstrap.kind == "residuals"
    for lo, hi in f.intervals.values():
        assert hi > lo


def test_seeds_bootstrap_with_repeats_stays_seeds(tmp_path):
    """bootstrap='seeds' on a grid with 3 seeds per cell stays a seeds bootstrap."""
    path = tmp_path / "three.csv"
    composition_grid(seeds=3).to_csv(path, index=False)
    f = fr.fit(str(path), "composition", intervals=True, bootstrap="seeds")
    assert f.bootstrap.kind == "seeds"


@pytest.mark.parametrize("runs", [0, -1, 2.5, True])
def test_bad_runs_through_the_api(runs):
    """fr.fit and FittedForm.predict refuse runs that is not a positive integer, naming runs."""
    g = fr.load_grid(composition_grid())
    # the Python API speaks in its own terms: the parameter, not the flag
    with pytest.raises(FitrulesError, match="^runs "):
        fr.fit(g, "composition", predict="H=8,keep=0.25", runs=runs, resamples=20)
    f = fr.fit(g, "composition", predict="H=8,keep=0.25", resamples=20)
    with pytest.raises(FitrulesError, match="^runs "):
        f.predict("H=8,keep=0.25", runs=runs)


def test_a_prediction_outside_the_domain_is_refused():
    """A prediction at N=-1, where the form has no finite value, is refused naming the point."""
    g = fr.load_grid(chinchilla_like(40), derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"])
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta")
    with pytest.raises(FitrulesError, match=r"no finite prediction at N=-1, D=1e\+12"):
        f.predict(N=-1, D=1e12)
    assert f.predict(N=1e9, D=1e12)["prediction"] > 0


@pytest.mark.skipif(
    not (EXTERNAL / "chinchilla_epoch_svg_extracted.csv").exists(),
    reason="shared/external data not present",
)
@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_chinchilla_fit_has_jacobian_errors_like_lmfit_and_residuals_against_n_and_d(tmp_path):
    """Epoch's Chinchilla fit has lmfit's B-beta correlation; its report plots residuals on N, D."""
    import fitrules as fr

    g = fr.load_grid(
        EXTERNAL / "chinchilla_epoch_svg_extracted.csv",
        derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"],
        where="loss < 3.42",  # Epoch's 240 runs: the 5 highest losses dropped
    )
    f = fr.fit(g, "chinchilla(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50)  # fmt: skip
    assert f.correlation.loc["B", "beta"] == pytest.approx(0.9993, abs=5e-4)  # lmfit's value
    assert all(hi > lo for lo, hi in f.intervals.values())
    names = {p.name for p in f.report(tmp_path / "rep").iterdir()}
    assert {"residuals_vs_N.png", "residuals_vs_D.png"} <= names


def test_one_seed_id_in_every_cell_is_said_so_not_called_unshared():
    """Issue 42: with one seed id in every cell (a sweep run with one seed) the output said
    "no seed id is shared across cells", the opposite of the truth."""
    g = fr.load_grid(composition_grid(seeds=1))
    f = fr.fit(g, "composition", intervals=True)
    text = str(f) + f.heldout.describe()
    assert "every run has seed id 0: one id in every cell" in text
    assert "cannot be told from the intercept" in text
    assert "no seed id shared across cells" not in text
    assert "no seed id is shared across cells" not in text
    c = fr.compare(g, forms=["composition"], splits=5, seeds="cells-and-seeds")
    assert "every run has seed id 0" in c.settings["descriptive_protocol"]["held_out"]
    s = fr.search(g, references=[], terms=1, max_constants=3, factors="linear,log", splits=3,
                  inner_splits=2)  # fmt: skip
    assert "every run has seed id 0" in s.settings["outer_error"]


def test_a_table_without_a_seed_column_is_said_so():
    """Issue 42: with no seed column at all the same "no seed id is shared" was printed."""
    g = fr.load_grid(composition_grid(seeds=1).drop(columns=["seed"]))
    f = fr.fit(g, "composition", intervals=True)
    text = str(f) + f.heldout.describe()
    assert "the table names no seed column" in text and "--seed-col COL" in text
    assert "no seed id is shared across cells" not in text
    # fresh ids per cell are what "not shared" means, and keep the old sentence
    fresh = composition_grid(seeds=1).assign(seed=lambda t: range(len(t)))
    h = fr.fit(fr.load_grid(fresh), "composition", intervals=True).heldout
    assert "no seed id is shared across cells, so the mean over new seed ids" in h.describe()


def test_two_seed_ids_say_the_offset_dominates_and_what_a_third_would_do():
    """Issue 42, item 4: with 2 seed ids the seed offset's term is a t interval on 1 degree of
    freedom (quantile 12.7), most of the width, and nothing said so; the prediction now says
    what share it is and how much narrower one more seed id would make it."""
    t = composition_grid(seeds=2, noise=0.001)
    t["loss"] = t["loss"] * (1 + np.where(t["seed"] == 0, 0.008, -0.006))
    f = fr.fit(fr.load_grid(t), "composition", intervals=True, resamples=20)
    p = f.predict(H=8, keep=0.25)
    few = p["few_seed_ids"]
    assert few["seed_ids"] == 2 and few["quantile"] == pytest.approx(12.706, abs=1e-3)
    assert few["share_of_width"] > 0.5
    assert few["term_narrower"] == pytest.approx(12.706 / 4.303, rel=1e-3)
    assert 1 < few["interval_narrower"] <= few["term_narrower"]
    assert "with 2 seed ids the seed offset's term (t quantile 12.7)" in str(p)
    assert "one more seed id would make that term about 3x narrower" in str(p)
    # three ids of the same kind: no sentence about more ids
    t3 = composition_grid(seeds=5, noise=0.001)
    t3["loss"] = t3["loss"] * (1 + 0.004 * np.sin(t3["seed"] + 1))
    f3 = fr.fit(fr.load_grid(t3), "composition", intervals=True, resamples=20)
    p3 = f3.predict(H=8, keep=0.25)
    assert p3["few_seed_ids"] is None and "one more seed id" not in str(p3)


def test_one_seed_id_gives_no_interval_over_new_seed_ids(tmp_path):
    """Issue 42, item 3: with one seed id in every cell the interval for a configuration's
    mean over new seed ids covered it 0.55 of the time (8 H x 3 keep, 100 grids; 0.83
    before the run noise was read from the residuals): its effect cannot be measured from
    such a grid, so no number is given, the kind says why, the interval at the grid's seed
    id stays, and a ledger refuses the prediction."""
    g = fr.load_grid(composition_grid(seeds=1))
    f = fr.fit(g, "composition", intervals=True, resamples=20)
    p = f.predict(H=8, keep=0.25, runs=3)
    assert p["interval"] is None and p["interval_runs"] is None
    assert p["interval_kind"].startswith("held-out misfit: not covered: one seed id")
    lo, hi = p["interval_grid_seeds"]
    assert lo < p["prediction"] < hi
    assert "no interval for the configuration's mean over new seed ids: one seed id" in str(p)
    assert "each constant's value at the grid's seed ids" in f.intervals_covers
    with pytest.raises(FitrulesError, match="no interval for new runs to be scored against"):
        fr.predict(g, "composition", "H=8,keep=0.25", ledger=tmp_path / "l.jsonl",
                   resamples=20)  # fmt: skip
    assert not (tmp_path / "l.jsonl").exists()


@pytest.mark.parametrize("name", sorted(fr.BUILTIN_FORMS))
def test_a_saved_fit_loads_and_predicts_identically(name, tmp_path):
    """Issue 44, item 2: to_json() wrote a fit and nothing read it. fr.load_fit reads the
    file (or its text), checks the data is the same, refits with the recorded arguments and
    predicts identically, for every built-in form."""
    g = fr.load_example(
        "quadratic" if name.startswith("theory") else "main",
        **({} if name.startswith("theory") else {"where": "lr == 3e-4"}),
    )
    try:
        f = fr.fit(g, name)
    except FitrulesError:
        pytest.skip(f"{name} does not fit this grid")
    path = tmp_path / "fit.json"
    f.to_json(path)
    for h in (fr.load_fit(path), fr.load_fit(path.read_text())):
        assert h.constants == f.constants
        point = {v: float(x[0]) for v, x in f.cells.X.items() if v in f.form.bound_variables}
        assert h.predict(point)["prediction"] == f.predict(point)["prediction"]


def test_a_saved_fit_with_intervals_gives_the_same_intervals(tmp_path):
    """The bootstrap's kind, resamples, seed and level are recorded: the loaded fit's
    intervals and prediction intervals are the saved fit's."""
    g = fr.load_example("main", where="lr == 3e-4")
    f = fr.fit(g, "composition", intervals=True, resamples=30, seed=7)
    f.to_json(tmp_path / "f.json")
    h = fr.load_fit(tmp_path / "f.json")
    assert h.intervals == f.intervals
    assert h.predict(H=8, keep=0.25, runs=3) == f.predict(H=8, keep=0.25, runs=3)


def test_a_saved_fit_refuses_changed_data_in_one_line(tmp_path):
    """Data given to check a saved fit that is not the bytes the fit was made from is
    refused with one line naming the file; a fit of a DataFrame saved without its cells needs
    data= (with them it travels alone); a file that is not a saved fit is refused."""
    import json

    t = composition_grid()
    csv = tmp_path / "g.csv"
    t.to_csv(csv, index=False)
    f = fr.fit(csv, "composition")
    f.to_json(tmp_path / "f.json")
    t.loc[0, "loss"] += 0.01
    t.to_csv(csv, index=False)
    with pytest.raises(FitrulesError) as err:
        fr.load_fit(tmp_path / "f.json", data=csv)
    msg = str(err.value)
    assert "\n" not in msg and "g.csv: not the data" in msg and "sha256" in msg
    assert fr.load_fit(tmp_path / "f.json").constants == f.constants  # no data read
    mem = fr.fit(composition_grid(), "composition")
    with pytest.raises(FitrulesError, match="a table in memory; give it again with data="):
        fr.load_fit(json.dumps(mem.to_dict(cells=False)))
    assert fr.load_fit(mem.to_json(), data=composition_grid()).constants == mem.constants
    (tmp_path / "c.json").write_text(fr.compare(splits=3, forms=["composition"]).to_json())
    with pytest.raises(FitrulesError, match="not a fit saved by FittedForm.to_json"):
        fr.load_fit(tmp_path / "c.json")
    with pytest.raises(FitrulesError, match="no such file"):
        fr.load_fit(tmp_path / "none.json")


def test_a_bare_predict_says_what_the_ledger_route_says():
    """Issue 64 item 4 (issue 66): a bare f.predict on a fit without intervals printed only
    a standard error while the ledger gave an interval and "beyond"; now every route gives the
    same interval and extrapolation words."""
    g = fr.load_grid(composition_grid(seeds=3))
    bare = fr.fit(g, "composition").predict(H=256, keep=0.25)
    asked = fr.fit(g, "composition", intervals=True).predict(H=256, keep=0.25)
    assert bare["interval"] == asked["interval"] and bare["interval"] is not None
    assert bare["extrapolation"] == asked["extrapolation"] == {"H": pytest.approx(4.0)}
    assert "beyond" in str(bare)


def test_a_bare_predict_beyond_a_scattered_grid_prints_its_interval_and_how_far():
    """Issue 64 item 4 as the issue drew it: a bare f.predict beyond the largest N and D of
    Chinchilla-shaped runs printed only "1.9734 (standard error 0.0072)"; the printed line
    now carries the 95% interval and each variable's ratio beyond the fitted cells."""
    rng = np.random.default_rng(0)
    N, D = np.exp(rng.uniform(np.log(1e7), np.log(1e9), (2, 60)) + [[0], [np.log(100)]])
    y = (1.69 + 406.4 * N**-0.34 + 410.7 * D**-0.28) * (1 + 0.005 * rng.standard_normal(60))
    g = fr.load_grid("s.csv", frame=pd.DataFrame({"N": N, "D": D, "loss": y}))
    f = fr.fit(g, "chin(N, D) = E + A*(N/1e8)**(-alpha) + B*(D/1e10)**(-beta)")
    p = f.predict(N=4 * N.max(), D=5 * D.max())
    lo, hi = p["interval"]
    assert lo < p["prediction"] < hi
    text = str(p)
    assert f"95% interval for the configuration's mean over new seed ids {lo:.5g} to {hi:.5g}" \
        in text
    assert "outside the fitted cells: N 4x beyond, D 5x beyond" in text
    inside = str(f.predict(N=1e8, D=1e10))
    assert "95% interval" in inside and "beyond" not in inside


@pytest.mark.parametrize("intervals, kind", [
    (True, "studentized bootstrap, symmetric bootstrap-t"), ("profile", "profile likelihood")])
def test_the_constants_table_names_its_interval_method(intervals, kind):
    """Issue 66: f.table's low and high did not say which intervals they were; now each row
    names the method."""
    g = fr.load_example("main", where="lr == 3e-4")
    t = fr.fit(g, "composition", intervals=intervals, resamples=20).table
    assert set(t["interval"]) == {kind}
