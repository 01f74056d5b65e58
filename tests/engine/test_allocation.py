"""The optimum of a fitted loss along a cost (fitrules.engine.allocation): the cost's shape,
the closed form against the numerical search, and the propagated uncertainty."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fitrules.base.errors import FitrulesError
from fitrules.engine.allocation import (
    Allocator,
    delta_intervals,
    draw_intervals,
    exponents,
    parse_cost,
    power_laws,
)
from fitrules.model.forms import Form

CHIN = Form("chin", "E + A/N**alpha + B/D**beta", ("N", "D"))
# Hoffmann et al. 2022's published constants (their equation 10), a truth with a known optimum
HOFFMANN = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
WINDOW = ((1e7, 1e10), (1e9, 1e12))


def _closed_form_n(c: dict, budget: float) -> float:
    """N* of Hoffmann et al.'s equation (4) with C = 6*N*D, written out independently."""
    G = (c["alpha"] * c["A"] / (c["beta"] * c["B"])) ** (1 / (c["alpha"] + c["beta"]))
    return G * (budget / 6) ** (c["beta"] / (c["alpha"] + c["beta"]))


@pytest.mark.parametrize(
    "text, k, p, q",
    [("6*N*D", 6, 1, 1), ("N*D", 1, 1, 1), ("2*N**2*D/4", 0.5, 2, 1), ("D*N*6", 6, 1, 1)],
)
def test_a_cost_is_read_as_a_product_of_powers(text, k, p, q):
    """k, p and q of k*N**p*D**q are read off the expression, in any order of its factors."""
    c = parse_cost(text, ("N", "D"), "chin")
    assert (c.k, c.p, c.q) == (pytest.approx(k), pytest.approx(p), pytest.approx(q))
    assert {c.x, c.y} == {"N", "D"}


@pytest.mark.parametrize(
    "text, match",
    [
        ("6*N*T", "names T, which form 'chin' does not read"),
        ("6*N", "names 1 variable"),
        ("N + D", "not a product"),
        ("N/D", "not a product"),
        ("-6*N*D", "not a product"),
        ("6*N*D*(1 + N)", "not a product"),
        ("6*N*D)", "cost"),
    ],
)
def test_a_cost_that_is_not_a_product_of_two_of_the_forms_variables_is_refused(text, match):
    """Each way to be wrong has its one-line message naming the cost."""
    with pytest.raises(FitrulesError, match=match) as info:
        parse_cost(text, ("N", "D"), "chin")
    assert len(str(info.value).splitlines()) == 1


def test_the_closed_form_is_hoffmanns_equation_four():
    """For 6*N*D the closed-form optimum is N* = G (C/6)^(beta/(alpha+beta)), and 6 N* D* = C."""
    alloc = Allocator(CHIN, parse_cost("6*N*D", ("N", "D"), "chin"), WINDOW)
    budgets = np.array([1e18, 5.76e23, 1e26])
    o = alloc.optimum(HOFFMANN, budgets)
    for i, b in enumerate(budgets):
        assert o.x[i] == pytest.approx(_closed_form_n(HOFFMANN, b), rel=1e-12)
        assert 6 * o.x[i] * o.y[i] == pytest.approx(b, rel=1e-12)
    a, b = exponents(alloc, HOFFMANN, 1e21)
    assert a == pytest.approx(0.28 / 0.62) and b == pytest.approx(0.34 / 0.62)


@pytest.mark.parametrize("cost", ["6*N*D", "N**2*D", "3*N*D**0.5"])
def test_the_numerical_search_finds_the_closed_form_optimum(cost):
    """With the closed form switched off, the bounded search along the cost agrees with it to
    1e-6 relative, for costs with other powers too (the general closed form)."""
    c = parse_cost(cost, ("N", "D"), "chin")
    closed = Allocator(CHIN, c, WINDOW)
    numeric = Allocator(CHIN, c, WINDOW, closed=False)
    budgets = np.geomspace(1e18, 1e22, 3)
    a, b = closed.optimum(HOFFMANN, budgets), numeric.optimum(HOFFMANN, budgets)
    assert closed.closed_form(HOFFMANN) is not None and numeric.closed_form(HOFFMANN) is None
    np.testing.assert_allclose(b.x, a.x, rtol=1e-6)
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-12)
    assert exponents(numeric, HOFFMANN, 1e21) == pytest.approx(exponents(closed, HOFFMANN, 1e21),
                                                               rel=1e-4)  # fmt: skip


@pytest.mark.parametrize(
    "expression",
    ["E + A/N**alpha + B/D**beta", "A*N**(-alpha) + E + B*D**-beta", "B/D**beta + A/N**alpha + E"],
)
def test_the_power_law_shape_is_recognised_however_it_is_spelt(expression):
    """The closed form applies to every spelling of E + A*N**-alpha + B*D**-beta."""
    f = Form("f", expression, ("N", "D"))
    laws = power_laws(f, "N", "D")
    assert laws is not None
    E, A, alpha, B, beta = laws.values(f, HOFFMANN, "N", "D")
    assert (E, A, alpha, B, beta) == pytest.approx((1.69, 406.4, 0.34, 410.7, 0.28))


@pytest.mark.parametrize(
    "expression", ["E + A/N**alpha + B/D**beta + c*N/D", "E + A/(N**alpha + B*D**beta)",
                   "E + A*exp(-N/alpha) + B/D**beta"],
)  # fmt: skip
def test_other_forms_are_searched_numerically(expression):
    """A term in both variables, or a term that is not a power law, leaves the closed form."""
    f = Form("f", expression, ("N", "D"))
    consts = HOFFMANN | {"c": 1e-4}
    alloc = Allocator(f, parse_cost("6*N*D", ("N", "D"), "f"), WINDOW)
    assert alloc.closed_form(consts) is None


def test_a_numerical_optimum_satisfies_the_cost_and_is_a_minimum():
    """For a form with an interaction term, the optimum spends the budget and every nearby
    point on the cost has a higher fitted loss."""
    f = Form("f", "E + A/N**alpha + B/D**beta + c*N/D", ("N", "D"))
    consts = HOFFMANN | {"c": 1e-3}
    alloc = Allocator(f, parse_cost("6*N*D", ("N", "D"), "f"), WINDOW)
    o = alloc.optimum(consts, np.array([1e21]))
    x, y = o.x[0], o.y[0]
    assert 6 * x * y == pytest.approx(1e21)
    for step in (0.99, 1.01):
        assert alloc.loss(consts, np.array([x * step]), np.array([1e21 / (6 * x * step)]))[0] > (
            o.loss[0]
        )


def test_a_loss_that_keeps_falling_along_the_cost_has_no_optimum():
    """When the fitted loss falls without limit as N grows (no data term), the search says so
    instead of returning its window's edge (the closed form says the loss does not fall in D)."""
    f = Form("f", "E + A/N**alpha + B*D**0", ("N", "D"))
    cost = parse_cost("6*N*D", ("N", "D"), "f")
    closed = Allocator(f, cost, WINDOW).optimum(HOFFMANN, np.array([1e21]))
    assert math.isnan(closed.x[0]) and "does not fall in both N and D" in closed.reason[0]
    alloc = Allocator(f, cost, WINDOW, closed=False)
    o = alloc.optimum(HOFFMANN, np.array([1e21]))
    assert math.isnan(o.x[0]) and "no optimum" in o.reason[0]


def test_a_form_reading_a_third_variable_is_refused():
    """The cost splits a budget between two variables; a third left free is refused."""
    f = Form("f", "E + A/N**alpha + B/D**beta + c*U", ("N", "D", "U"))
    with pytest.raises(FitrulesError, match="reads U besides N and D"):
        Allocator(f, parse_cost("6*N*D", ("N", "D", "U"), "f"), WINDOW)


@pytest.mark.slow  # 4,000 simulated constants, 4.5 s of CPU (a loaded machine): CI's slow step
def test_the_delta_method_matches_the_spread_of_simulated_constants():
    """The delta-method standard error of log N* equals, to 5%, the sd of log N* over 4,000
    constants drawn from the same covariance (small enough for the linearisation to hold)."""
    alloc = Allocator(CHIN, parse_cost("6*N*D", ("N", "D"), "chin"), WINDOW)
    names = list(HOFFMANN)
    sd = np.array([0.01, 20.0, 0.004, 15.0, 0.003])
    corr = np.eye(5)
    corr[2, 1] = corr[1, 2] = 0.9
    corr[4, 3] = corr[3, 4] = 0.9
    cov = corr * np.outer(sd, sd)
    budgets = np.array([1e22])
    se, _, z = delta_intervals(alloc, HOFFMANN, names, cov, budgets, 1e22, 0.95)
    draws = np.random.default_rng(0).multivariate_normal([HOFFMANN[n] for n in names], cov, 4000)
    logs = [math.log(alloc.optimum(dict(zip(names, d, strict=True)), budgets).x[0]) for d in draws]
    assert se[0, 0] == pytest.approx(np.std(logs), rel=0.05)
    assert z == pytest.approx(1.959964, rel=1e-5)
    lo_hi, e_lo_hi, failed = draw_intervals(alloc, HOFFMANN, names, draws, budgets, 1e22, 0.95)
    assert failed == 0
    assert math.exp(lo_hi[0, 0, 0]) < alloc.optimum(HOFFMANN, budgets).x[0] < math.exp(
        lo_hi[0, 0, 1]
    )
    assert e_lo_hi[0, 0] < 0.28 / 0.62 < e_lo_hi[0, 1]
