"""Profile-likelihood intervals and linear constraints (fitrules.engine.profile, .constraints)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fitrules.base.errors import FitrulesError, FormError
from fitrules.engine.constraints import parse_constraints
from fitrules.engine.fit import Objective, fit
from fitrules.engine.intervals import jacobian_uncertainty
from fitrules.engine.profile import constrained_fit, profile_intervals
from fitrules.model.forms import Form


def _line(seed: int = 0, n: int = 12):
    rng = np.random.default_rng(seed)
    x = np.linspace(1.0, 10.0, n)
    y = 2.0 + 0.5 * x + 0.3 * rng.standard_normal(n)
    return Form("line", "a + b*x", ("x",)).bind(["x"]), {"x": x}, y


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_profile_interval_of_a_linear_model_is_the_t_interval(level):
    """On a model linear in its constants the profile interval is value +- t(n-p) se."""
    form, X, y = _line()
    A = np.column_stack([np.ones_like(X["x"]), X["x"]])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    dof = len(y) - 2
    cov = resid @ resid / dof * np.linalg.inv(A.T @ A)
    t = stats.t.ppf(0.5 + level / 2, dof)
    p = profile_intervals(form, X, y, {"a": coef[0], "b": coef[1]}, Objective("abs_ls"), level)
    for j, c in enumerate(("a", "b")):
        se = np.sqrt(cov[j, j])
        lo, hi = p.intervals[c]
        assert lo == pytest.approx(coef[j] - t * se, rel=1e-5, abs=1e-6)
        assert hi == pytest.approx(coef[j] + t * se, rel=1e-5, abs=1e-6)
    assert p.dof == dof and not any(p.notes.values())


def test_profile_interval_is_asymmetric_for_an_exponent():
    """For an exponent the profile interval leans, where the Wald interval cannot."""
    rng = np.random.default_rng(3)
    H = np.repeat([1.0, 2.0, 4.0, 8.0, 16.0, 32.0], 2)
    y = (2.0 + 0.3 * H**-0.6) * (1 + 0.01 * rng.standard_normal(len(H)))
    form = Form("pw", "L0 + a*H**(-b)", ("H",)).bind(["H"])
    r = fit(form, {"H": H}, y, Objective())
    p = profile_intervals(form, {"H": H}, y, r.constants, Objective())
    lo, hi = p.intervals["b"]
    v = r.constants["b"]
    assert lo < v < hi
    assert abs((hi - v) - (v - lo)) > 0.05 * (hi - lo)


def test_every_profile_end_raises_the_objective_by_the_threshold():
    """At each end of a closed interval the refit with that constant held has risen by the
    threshold (what defines the interval), the others refitted."""
    rng = np.random.default_rng(5)
    H = np.repeat([1.0, 2.0, 4.0, 8.0, 16.0], 3)
    y = (2.0 + 0.3 * H**-0.5) * (1 + 0.01 * rng.standard_normal(len(H)))
    form = Form("pw", "L0 + a*H**(-b)", ("H",)).bind(["H"])
    obj = Objective()
    r = fit(form, {"H": H}, y, obj)
    p = profile_intervals(form, {"H": H}, y, r.constants, obj)
    assert np.isfinite(p.intervals["b"]).all()
    for c, (lo, hi) in p.intervals.items():
        for end in (e for e in (lo, hi) if np.isfinite(e)):
            held = Form("pw", "L0 + a*H**(-b)", ("H",), fixed={c: end}).bind(["H"])
            q = fit(held, {"H": H}, y, obj).objective
            assert q - p.objective == pytest.approx(p.threshold, rel=2e-3), (c, end)


def test_profile_needs_a_degree_of_freedom():
    """With as many cells as constants there is no residual variance: refused."""
    form, X, y = _line(n=2)
    with pytest.raises(FitrulesError, match="no degree of freedom"):
        profile_intervals(form, X, y, {"a": 1.0, "b": 0.5}, Objective("abs_ls"))


def test_a_violated_constraint_moves_the_fit_onto_it():
    """b <= 0.4 where the data say 0.5: the constrained fit has b = 0.4 and a lower slope's
    best intercept, the least-squares answer with b held there."""
    form, X, y = _line()
    cons = parse_constraints("b <= 0.4", form.constants)
    obj = Objective("abs_ls")
    base = fit(form, X, y, obj)
    r = constrained_fit(form, X, y, base, cons, obj)
    assert r.constants["b"] == pytest.approx(0.4, abs=1e-7)
    assert r.constants["a"] == pytest.approx(np.mean(y - 0.4 * X["x"]), rel=1e-6)
    assert cons.active(np.array([r.constants["a"], r.constants["b"]])) == ["b <= 0.4"]


def test_an_equality_constraint_is_kept_exactly():
    """a + b = 3 holds at the fit, which is the least-squares fit of y - 3 on x - 1."""
    form, X, y = _line()
    cons = parse_constraints(["a + b = 3"], form.constants)
    obj = Objective("abs_ls")
    r = constrained_fit(form, X, y, fit(form, X, y, obj), cons, obj)
    assert r.constants["a"] + r.constants["b"] == pytest.approx(3.0, abs=1e-8)
    u = X["x"] - 1
    b = float(u @ (y - 3) / (u @ u))
    assert r.constants["b"] == pytest.approx(b, rel=1e-6)


def test_a_satisfied_constraint_leaves_the_fit_alone():
    """b > 0 where the fit has b = 0.5: the same fit, constraint inactive."""
    form, X, y = _line()
    obj = Objective("abs_ls")
    base = fit(form, X, y, obj)
    assert constrained_fit(form, X, y, base, parse_constraints("b > 0", form.constants),
                           obj) is base  # fmt: skip


def test_profile_under_a_constraint_stops_at_its_limit():
    """With b <= 0.4 active, b's profile interval ends at 0.4 and says so."""
    form, X, y = _line()
    obj = Objective("abs_ls")
    cons = parse_constraints("b <= 0.4", form.constants)
    r = constrained_fit(form, X, y, fit(form, X, y, obj), cons, obj)
    p = profile_intervals(form, X, y, r.constants, obj, constraints=cons)
    lo, hi = p.intervals["b"]
    assert hi == pytest.approx(0.4, abs=1e-7) and lo < 0.4
    assert "constraints' limit" in p.notes["b"]


@pytest.mark.parametrize(
    "text, match",
    [
        ("b > q", "'q' is not a free constant"),
        ("a*b > 1", "not linear in the constants"),
        ("log(a) = 0", "not linear in the constants"),
        ("x > 1", "'x' is not a free constant"),
        ("a > b > 0", "write one comparison"),
        ("a", "write one comparison"),
        ("1 > 0", "names no constant"),
        ("a.__class__ > 0", "not allowed"),
    ],
)
def test_bad_constraints_are_refused_with_what_is_wrong(text, match):
    """A constraint naming an unknown constant, not linear, or not one comparison."""
    with pytest.raises(FormError, match=match) as err:
        parse_constraints(text, ("a", "b"))
    assert "\n" not in str(err.value)


def test_constraints_parse_to_coefficients():
    """'c >= 0.5*b' is -0.5 b + c >= 0; 'a < 1' turns around to -a >= -1; ';' splits."""
    cons = parse_constraints("c >= 0.5*b; a < 1", ("a", "b", "c"))
    C, d, G, h = cons.matrices()
    assert C.shape == (0, 3)
    np.testing.assert_allclose(G, [[0, -0.5, 1], [-1, 0, 0]])
    np.testing.assert_allclose(h, [0, -1])


def test_wald_and_profile_share_the_standard_error_they_step_by():
    """The profile's recorded standard errors are the Jacobian's (no constraint)."""
    form, X, y = _line()
    obj = Objective("abs_ls")
    r = fit(form, X, y, obj)
    p = profile_intervals(form, X, y, r.constants, obj)
    u = jacobian_uncertainty(form, X, y, r.constants, obj)
    for c in ("a", "b"):
        assert p.wald_se[c] == pytest.approx(u.stderr[c], rel=1e-6)
