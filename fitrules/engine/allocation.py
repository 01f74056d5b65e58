"""The loss-optimal split of a budget between two variables of a fitted form.

A cost names two of the form's variables as a product of powers, ``k * x**p * y**q`` (the
training compute of a language model, ``6*N*D``). For a budget C the allocation is the pair
(x, y) on ``cost = C`` where the fitted loss is lowest.

- **Closed form**, when the fitted form is ``E + A*x**-alpha + B*y**-beta`` (recognised from
  its terms, however it is spelt): ``x* = G * (C/k)**a`` with ``a = beta/(q*alpha + p*beta)``
  and ``G = (alpha*A*q / (beta*B*p))**(q/(q*alpha + p*beta))``; for ``6*N*D`` these are the
  exponents of Hoffmann et al. 2022 (a = beta/(alpha+beta)).
- **Numerically** otherwise: along the constraint, on a log scale, a scan of
  :data:`SCAN_POINTS` points over the grid's range widened :data:`WINDOW` times each side,
  then a bounded Brent refinement; an optimum at the window's edge is no optimum.

Uncertainty is propagated from the fit's constants: by the delta method on the logarithm of
each optimum with the fit's Jacobian covariance (:func:`delta_intervals`), or as percentiles
of the allocations of the fit's bootstrap refits (:func:`draw_intervals`). Both carry the
constants' uncertainty only, as if the form were exactly true.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import FitrulesError, FormError
from fitrules.model import expr as ex
from fitrules.model.compiled import predict
from fitrules.model.forms import Form

WINDOW = 1e6  # the numerical search reaches this factor beyond the grid's range, each side
SCAN_POINTS = 801  # points of the scan along the constraint before refinement
_CHECK_POINTS = ((1e3, 1e-2), (1e9, 1e12), (0.5, 7.0), (3e-4, 2e5))


@dataclass(frozen=True)
class Cost:
    """A cost ``k * x**p * y**q`` of two variables: the constraint ``cost = budget``."""

    text: str
    x: str
    y: str
    k: float
    p: float
    q: float

    def y_at(self, budget, x):
        """The y that spends ``budget`` with x."""
        return (np.asarray(budget, float) / (self.k * np.asarray(x, float) ** self.p)) ** (
            1 / self.q
        )

    def of(self, x, y):
        return self.k * np.asarray(x, float) ** self.p * np.asarray(y, float) ** self.q

    def to_dict(self) -> dict:
        return {"expression": self.text, "variables": [self.x, self.y], "k": self.k,
                "powers": {self.x: self.p, self.y: self.q}}  # fmt: skip


def parse_cost(text, variables: tuple[str, ...], form_name: str) -> Cost:
    """``text`` as a :class:`Cost` of two of ``variables`` (the form's).

    Raises
    ------
    FitrulesError
        When the text is not an expression, names other than two of the form's variables,
        or is not a product ``k * x**p * y**q`` with k, p, q > 0.
    """
    if not isinstance(text, str):
        raise FitrulesError(f"cost {text!r}: give an expression such as '6*N*D'")
    node = ex.parse(text, what=f"cost {text!r}")
    names = list(dict.fromkeys(ex.names(node)))
    unknown = [n for n in names if n not in variables]
    if unknown:
        raise FormError(
            f"cost {text!r} names {', '.join(unknown)}, which form {form_name!r} does not read "
            f"(it reads {', '.join(variables)}); a cost names two of the form's variables"
        )
    if len(names) != 2:
        raise FitrulesError(
            f"cost {text!r} names {len(names)} variable(s) ({', '.join(names) or 'none'}); it "
            "must name exactly two of the form's variables, e.g. '6*N*D'"
        )
    x, y = names

    def log_cost(a: float, b: float) -> float:
        with np.errstate(all="ignore"):
            v = float(ex.evaluate(node, {x: np.float64(a), y: np.float64(b)}))
        return math.log(v) if v > 0 and math.isfinite(v) else math.nan

    e = math.e
    c0 = log_cost(1.0, 1.0)
    p, q = log_cost(e, 1.0) - c0, log_cost(1.0, e) - c0
    shape = f"cost {text!r} is not a product k*{x}**p*{y}**q with k, p, q > 0"
    if not all(math.isfinite(v) for v in (c0, p, q)) or p <= 0 or q <= 0:
        raise FitrulesError(shape)
    for a, b in _CHECK_POINTS:
        want = c0 + p * math.log(a) + q * math.log(b)
        got = log_cost(a, b)
        if not math.isfinite(got) or abs(got - want) > 1e-9 * max(1.0, abs(want)):
            raise FitrulesError(shape)
    return Cost(text, x, y, math.exp(c0), p, q)


@dataclass(frozen=True)
class PowerLaws:
    """``E + A*x**-alpha + B*y**-beta``: the constants as functions of the form's."""

    x_term: ex.Node
    y_term: ex.Node
    rest: ex.Node | None

    def values(self, form: Form, constants: dict, x: str, y: str) -> tuple[float, ...] | None:
        """(E, A, alpha, B, beta) at ``constants``; None when a term is not a power law."""
        env = {k: np.float64(v) for k, v in constants.items()} | dict(form.fixed)
        out = []
        for term, var in ((self.x_term, x), (self.y_term, y)):
            law = _power_law(term, var, env)
            if law is None:
                return None
            out += law
        E = 0.0
        if self.rest is not None:
            with np.errstate(all="ignore"):
                E = float(ex.evaluate(self.rest, env))
        return (E, *out)


def _power_law(term: ex.Node, var: str, env: dict) -> list[float] | None:
    """[A, alpha] when ``term`` is ``A * var**-alpha`` at these constants, else None."""
    pts = np.array([1.0, math.e, 1e-3, 1e4, 7.5e9])
    with np.errstate(all="ignore"):
        v = np.broadcast_to(ex.evaluate(term, env | {var: pts}), pts.shape).astype(float)
    if not (np.isfinite(v).all() and (v != 0).all() and (np.sign(v) == np.sign(v[0])).all()):
        return None
    A = float(v[0])
    slope = math.log(v[1] / v[0])
    want = np.log(abs(A)) + slope * np.log(pts)
    if not np.allclose(np.log(np.abs(v)), want, rtol=0, atol=1e-9 * max(1.0, np.abs(want).max())):
        return None
    return [A, -slope]


def power_laws(form: Form, x: str, y: str) -> PowerLaws | None:
    """The form's terms as ``E + (term in x) + (term in y)`` when they split that way (each
    term is then checked to be a power law at given constants), else None."""
    x_terms, y_terms, rest = [], [], []
    for sign, node in ex.terms(form.tree):
        used = set(ex.names(node)) & {x, y}
        node = node if sign > 0 else ex.neg(node)
        if used == {x}:
            x_terms.append(node)
        elif used == {y}:
            y_terms.append(node)
        elif not used:
            rest.append(node)
        else:  # a term in both variables: not this shape
            return None
    if len(x_terms) != 1 or len(y_terms) != 1:
        return None
    total = None
    for node in rest:
        total = node if total is None else ex.add(total, node)
    return PowerLaws(x_terms[0], y_terms[0], total)


@dataclass
class Optimum:
    """The optimum of one set of constants at each budget: (b,) arrays, NaN where there is
    none (``reason`` says why)."""

    x: np.ndarray
    y: np.ndarray
    loss: np.ndarray
    reason: list[str]


class Allocator:
    """The optimum of a form's fitted loss along a cost, for any constants.

    ``window`` is ((x_low, x_high), (y_low, y_high)), the grid's range of each variable: the
    numerical search reaches :data:`WINDOW` times beyond it.
    """

    def __init__(self, form: Form, cost: Cost, window, closed: bool = True):
        extra = [v for v in form.bound_variables if v not in (cost.x, cost.y)]
        if extra:
            raise FormError(
                f"form {form.name!r} reads {', '.join(extra)} besides {cost.x} and {cost.y}; "
                "allocate splits a budget between the two variables the cost names, so the "
                "form must read those two only"
            )
        self.form, self.cost = form, cost
        self.window = window
        self.laws = power_laws(form, cost.x, cost.y) if closed else None

    def closed_form(self, constants: dict) -> tuple[float, ...] | None:
        """(E, A, alpha, B, beta) when the closed form applies at these constants."""
        if self.laws is None:
            return None
        return self.laws.values(self.form, constants, self.cost.x, self.cost.y)

    def loss(self, constants: dict, x, y) -> np.ndarray:
        X = {self.cost.x: np.asarray(x, float).ravel(), self.cost.y: np.asarray(y, float).ravel()}
        with np.errstate(all="ignore"):
            return predict(self.form, X, constants).reshape(np.shape(x))

    def optimum(self, constants: dict, budgets: np.ndarray) -> Optimum:
        budgets = np.asarray(budgets, float)
        law = self.closed_form(constants)
        if law is not None:
            return self._closed(law, constants, budgets)
        return self._numerical(constants, budgets)

    def _closed(self, law, constants, budgets) -> Optimum:
        E, A, alpha, B, beta = law
        c = self.cost
        n = len(budgets)
        if not (A > 0 and alpha > 0 and B > 0 and beta > 0):
            why = (f"the fitted loss does not fall in both {c.x} and {c.y} (A={A:.4g}, "
                   f"alpha={alpha:.4g}, B={B:.4g}, beta={beta:.4g})")  # fmt: skip
            nan = np.full(n, np.nan)
            return Optimum(nan, nan.copy(), nan.copy(), [why] * n)
        s = c.q * alpha + c.p * beta
        # alpha*A*x**-alpha = (beta*p/q)*B*y**-beta on the constraint
        G = (alpha * A * c.q / (beta * B * c.p)) ** (c.q / s)
        with np.errstate(all="ignore"):
            x = G * (budgets / c.k) ** (beta / s)
            y = c.y_at(budgets, x)
            loss = self.loss(constants, x, y)
        return Optimum(x, y, loss, [""] * n)

    def _numerical(self, constants, budgets) -> Optimum:
        from scipy.optimize import minimize_scalar

        c = self.cost
        (x_lo, x_hi), (y_lo, y_hi) = self.window
        lc = np.log(budgets / c.k)
        # u = log x; y from the constraint must stay in its widened range too
        u_lo = np.maximum(math.log(x_lo / WINDOW), (lc - c.q * math.log(y_hi * WINDOW)) / c.p)
        u_hi = np.minimum(math.log(x_hi * WINDOW), (lc - c.q * math.log(y_lo / WINDOW)) / c.p)
        n = len(budgets)
        xs, ys, ls, why = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), [""] * n
        t = np.linspace(0.0, 1.0, SCAN_POINTS)
        for i in range(n):
            if not u_hi[i] > u_lo[i]:
                why[i] = (f"the budget leaves no {c.x} and {c.y} within {WINDOW:g} times the "
                          "grid's range")  # fmt: skip
                continue
            u = u_lo[i] + t * (u_hi[i] - u_lo[i])

            def f(v, i=i):
                x = np.exp(v)
                return self.loss(constants, x, c.y_at(budgets[i], x))

            vals = f(u)
            if not np.isfinite(vals).any():
                why[i] = "the fitted loss is not finite anywhere along the cost"
                continue
            j = int(np.nanargmin(vals))
            if j in (0, SCAN_POINTS - 1):
                side = "smallest" if (j == 0) else "largest"
                why[i] = (f"no optimum: the fitted loss falls to the {side} {c.x} the search "
                          f"reaches ({WINDOW:g} times beyond the grid's range)")  # fmt: skip
                continue
            r = minimize_scalar(lambda v, f=f: float(f(np.array([v]))[0]),
                                bounds=(u[j - 1], u[j + 1]), method="bounded",
                                options={"xatol": 1e-11})  # fmt: skip
            ustar = float(r.x) if r.fun <= vals[j] else float(u[j])
            xs[i] = math.exp(ustar)
            ys[i] = float(c.y_at(budgets[i], xs[i]))
            ls[i] = float(f(np.array([ustar]))[0])
        return Optimum(xs, ys, ls, why)

    def falls(self, constants: dict, x: np.ndarray, y: np.ndarray) -> str:
        """Empty when the fitted loss falls in both variables at every point (x, y); else a
        sentence naming the first variable and point where it does not."""
        h = 1e-4
        base = self.loss(constants, x, y)
        for name, dx, dy in ((self.cost.x, math.exp(h), 1.0), (self.cost.y, 1.0, math.exp(h))):
            up = self.loss(constants, x * dx, y * dy)
            bad = ~(up < base)
            if bad.any():
                k = int(np.argmax(bad))
                return (f"the fitted loss does not fall as {name} grows at {self.cost.x}="
                        f"{x[k]:.4g}, {self.cost.y}={y[k]:.4g}")  # fmt: skip
        return ""


def exponents(alloc: Allocator, constants: dict, budget: float) -> tuple[float, float]:
    """d log x* / d log C and d log y* / d log C at ``budget`` (exact for the closed form)."""
    law = alloc.closed_form(constants)
    c = alloc.cost
    if law is not None:
        _, _, alpha, _, beta = law
        s = c.q * alpha + c.p * beta
        return beta / s, alpha / s
    h = 0.05
    o = alloc.optimum(constants, np.array([budget * math.exp(-h), budget * math.exp(h)]))
    with np.errstate(all="ignore"):
        return (float(np.diff(np.log(o.x))[0] / (2 * h)), float(np.diff(np.log(o.y))[0] / (2 * h)))


def summary_values(alloc: Allocator, constants: dict, budgets: np.ndarray, ref: float):
    """(b, 4) log x*, log y*, log(y*/x*), loss at each budget, and the 2 exponents at ``ref``:
    the quantities whose uncertainty is propagated."""
    o = alloc.optimum(constants, budgets)
    with np.errstate(all="ignore"):
        rows = np.column_stack([np.log(o.x), np.log(o.y), np.log(o.y / o.x), o.loss])
    return rows, np.array(exponents(alloc, constants, ref))


def delta_intervals(alloc, constants: dict, names, cov: np.ndarray, budgets, ref, level):
    """Standard errors of :func:`summary_values` by the delta method (central differences
    of the optimum in each constant), and the normal quantile of ``level``: (b, 4) and (2,)
    standard errors, z."""
    from scipy.stats import norm

    rows0, exp0 = summary_values(alloc, constants, budgets, ref)
    grads_r, grads_e = [], []
    for name in names:
        v = constants[name]
        h = 1e-5 * max(abs(v), 1e-6)
        up, dn = dict(constants), dict(constants)
        up[name], dn[name] = v + h, v - h
        r1, e1 = summary_values(alloc, up, budgets, ref)
        r2, e2 = summary_values(alloc, dn, budgets, ref)
        grads_r.append((r1 - r2) / (2 * h))
        grads_e.append((e1 - e2) / (2 * h))
    Gr = np.stack(grads_r, axis=-1)  # (b, 4, p)
    Ge = np.stack(grads_e, axis=-1)  # (2, p)
    with np.errstate(all="ignore"):
        se_r = np.sqrt(np.maximum(np.einsum("bkp,pq,bkq->bk", Gr, cov, Gr), 0.0))
        se_e = np.sqrt(np.maximum(np.einsum("kp,pq,kq->k", Ge, cov, Ge), 0.0))
    se_r[~np.isfinite(rows0)] = np.nan
    return se_r, se_e, float(norm.ppf(0.5 + level / 2))


def draw_intervals(alloc, constants: dict, names, draws: np.ndarray, budgets, ref, level):
    """Percentile intervals of :func:`summary_values` over constant draws (each row of
    ``draws`` the constants ``names``): (b, 4, 2), (2, 2), and the draws that gave no
    allocation."""
    a = (1 - level) / 2
    rows, exps, failed = [], [], 0
    for d in draws:
        if not np.isfinite(d).all():
            failed += 1
            continue
        c = dict(constants) | {n: float(v) for n, v in zip(names, d, strict=True)}
        r, e = summary_values(alloc, c, budgets, ref)
        if not (np.isfinite(r).all() and np.isfinite(e).all()):
            failed += 1
            continue
        rows.append(r)
        exps.append(e)
    if not rows:
        nan = np.full((len(budgets), 4, 2), np.nan)
        return nan, np.full((2, 2), np.nan), failed
    R, X = np.stack(rows), np.stack(exps)
    return (np.moveaxis(np.quantile(R, [a, 1 - a], axis=0), 0, -1),
            np.moveaxis(np.quantile(X, [a, 1 - a], axis=0), 0, -1), failed)  # fmt: skip
