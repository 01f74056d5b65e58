"""Profile-likelihood intervals of a fit's constants, and fits under linear constraints.

**Profile intervals.** For each constant ``c`` the other constants are refitted with ``c``
held at a value, on a path of values outward from the fit (warm-started, one side then the
other), and the interval is where the objective ``Q(c)`` (its minimum over the others) has
risen from the fit's ``Q`` by the threshold

- least squares (``rel_ls``, ``abs_ls``, weighted or not): ``s^2 F(1, n - p; level)`` =
  ``s^2 t^2``, ``s^2 = Q / (n - p)``: the likelihood ratio with the residual variance
  estimated, calibrated by F on ``n - p`` degrees of freedom for small grids (Bates and
  Watts, Nonlinear Regression Analysis, 1988, section 6.1). For a model linear in its
  constants this is exactly the t interval ``value +- t se``;
- ``log_huber``: ``t^2 m s^2 / 2`` with ``s^2`` Huber's sandwich factor (the standard
  errors' scale, see :mod:`fitrules.engine.intervals`) and ``m`` the share of residuals
  within delta: near the fit the objective rises as ``m/2`` times the squared Jacobian
  distance, so this is the Wald interval's ``t se`` read off the objective instead (the
  drop-in-dispersion test of an M-estimate, Ronchetti, 1982), which reduces to the line
  above where no residual is clipped (``Q`` there is half a sum of squares).

The interval need not be symmetric and follows the objective where the Jacobian's quadratic
picture (the Wald interval ``value +- t se``) is poor: exponents, and floors near the data.
What it assumes of the noise is what the Jacobian standard errors assume: the cells'
residuals are independent with one variance, the scatter about the form (seed noise and
misfit together). A seed offset shared across cells is not in that scatter; the fit job
widens these intervals by it as it widens the bootstrap's (see
:attr:`fitrules.jobs.fit.FittedForm.intervals`). A side along which the objective does not
rise enough before a constant's bound is open up to the bound, and one along which it does
not rise within 128 standard errors is open (infinite), each with a note.

**Constraints.** Linear constraints between constants
(:mod:`fitrules.engine.constraints`) are enforced by the optimiser: the global fit is made
without them, and when it breaks one (or an equality is given), the constrained optimum is
found by SLSQP from it, with the constants' bounds. Profile intervals under constraints
refit each point under them too, and stop where the constraints allow no further value.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import LEVEL
from fitrules.engine.constraints import Constraints
from fitrules.engine.fit import FitResult, Objective
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form

PROFILE_KIND = "profile likelihood"
STEPS = (0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128)  # in standard errors


@dataclass
class ProfileFit:
    """Profile-likelihood intervals of a fit's constants.

    Attributes
    ----------
    intervals : per constant, (low, high); an open side is the bound or +-inf (``notes``).
    notes : per constant, why a side is open or where it stopped (empty when both closed).
    level, dof : the level and the degrees of freedom of the t (F) calibration.
    threshold : the rise of the objective that bounds the interval.
    objective : the objective at the fit.
    refits : conditional refits made.
    wald_se : the Jacobian standard error each path was stepped by.
    calibration : how the threshold was set, in words.
    better : a conditional refit below the fit's objective, when one was found (the fit
        was then not the optimum), else None.
    """

    constants: tuple[str, ...]
    intervals: dict[str, tuple[float, float]]
    notes: dict[str, str]
    level: float
    dof: int
    threshold: float
    objective: float
    refits: int
    wald_se: dict[str, float]
    calibration: str
    better: float | None = None
    constrained: list[str] = field(default_factory=list)

    @property
    def interval_kind(self) -> str:
        return PROFILE_KIND

    def describe(self) -> str:
        return (
            "each constant held on a path of values, the others refitted "
            f"({self.refits} refits); the interval is where the objective rises by "
            f"{self.threshold:.3g} ({self.calibration}); it assumes independent cell "
            "residuals with one variance (seed noise and misfit), as the standard errors do"
            + (f"; under the constraints {', '.join(self.constrained)}" if self.constrained
               else "")
            + (f"; a refit reached objective {self.better:.6g}, below the fit's "
               f"{self.objective:.6g}: the fit is not the optimum" if self.better is not None
               else "")
        )  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "kind": PROFILE_KIND,
            "method": self.describe(),
            "level": self.level,
            "dof": self.dof,
            "threshold": self.threshold,
            "calibration": self.calibration,
            "refits": self.refits,
            "constants": {k: list(v) for k, v in self.intervals.items()},
            "notes": {k: v for k, v in self.notes.items() if v},
        }


class _Problem:
    """The training objective of one form on one set of cells, as a function of all its
    constants, and local minimisation of it with some constants held."""

    def __init__(self, form: Form, X, y, objective: Objective, weights=None,
                 constraints: Constraints | None = None) -> None:  # fmt: skip
        self.cf = CompiledForm(form)
        self.X, self.y, self.obj = X, np.asarray(y, float), objective
        self.root = 1.0 if weights is None else np.sqrt(np.asarray(weights, float))
        self.lower = np.array(self.cf.s.lower, float)
        self.upper = np.array(self.cf.s.upper, float)
        self.cons = constraints if constraints else None
        self.calls = 0

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            pred = self.cf.predict(self.X, theta)
            return self.obj.residuals(pred, self.y) * self.root

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            pred = self.cf.predict(self.X, theta)
            J = self.cf.jacobian(self.X, theta) * self.obj.dres_dpred(pred, self.y)[:, None]
            return J * np.reshape(self.root, (-1, 1)) if np.ndim(self.root) else J

    def value(self, theta: np.ndarray) -> float:
        r = self.residuals(theta)
        return float(self.obj.value(r)) if np.isfinite(r).all() else math.inf

    def solve(self, start: np.ndarray, fixed: dict[int, float] | None = None):
        """Minimise from ``start`` with the constants ``fixed`` held: (theta, Q, ok)."""
        self.calls += 1
        fixed = fixed or {}
        theta = np.array(start, float)
        for j, v in fixed.items():
            theta[j] = v
        if self.cons is not None:
            return self._slsqp(theta, fixed)
        free = [j for j in range(len(theta)) if j not in fixed]
        if not free:
            q = self.value(theta)
            return theta, q, math.isfinite(q)
        return self._least_squares(theta, free)

    def _least_squares(self, theta: np.ndarray, free: list[int]):
        from scipy.optimize import least_squares

        lo, hi = self.lower[free], self.upper[free]
        x0 = np.clip(theta[free], lo, hi)
        # trf needs a strictly feasible start
        span = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
        x0 = np.clip(x0, lo + 1e-10 * span, hi - 1e-10 * span)

        def put(z):
            t = theta.copy()
            t[free] = z
            return t

        def fun(z):
            r = self.residuals(put(z))
            return np.where(np.isfinite(r), r, 1e150)

        def jac(z):
            J = self.jacobian(put(z))[:, free]
            return np.where(np.isfinite(J), J, 0.0)

        if not np.isfinite(self.residuals(put(x0))).all():
            return put(x0), math.inf, False
        huber = self.obj.kind == "log_huber"
        bounded = bool(np.isfinite(lo).any() or np.isfinite(hi).any())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a failed refit is reported, not warned of
                res = least_squares(
                    fun, x0, jac=jac, bounds=(lo, hi) if bounded else (-np.inf, np.inf),
                    method="trf" if bounded or huber else "lm", x_scale="jac",
                    loss="huber" if huber else "linear",
                    f_scale=self.obj.delta if huber else 1.0,
                    ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=400,
                )  # fmt: skip
        except (ValueError, np.linalg.LinAlgError):
            return put(x0), math.inf, False
        t = put(res.x)
        q = self.value(t)
        return t, q, bool(math.isfinite(q) and res.status > 0)

    def _slsqp(self, theta: np.ndarray, fixed: dict[int, float]):
        from scipy.optimize import Bounds, minimize

        p = len(theta)
        C, d, G, h = self.cons.matrices()
        rows = [np.eye(p)[j] for j in fixed]
        if rows:
            C, d = np.vstack([C, rows]), np.concatenate([d, list(fixed.values())])
        sc = np.maximum(np.abs(theta), 1e-3)  # variables of one size for SLSQP
        q0 = self.value(theta)
        ref = q0 if math.isfinite(q0) and q0 > 0 else 1.0
        huber = self.obj.kind == "log_huber"

        def f(u):
            q = self.value(u * sc)
            return q / ref if math.isfinite(q) else 1e150

        def grad(u):
            t = u * sc
            r, J = self.residuals(t), self.jacobian(t)
            g = J.T @ (np.clip(r, -self.obj.delta, self.obj.delta) if huber else 2 * r)
            g = np.where(np.isfinite(g), g, 0.0)
            return g * sc / ref

        cons = []
        if len(C):
            cons.append({"type": "eq", "fun": lambda u: C @ (u * sc) - d,
                         "jac": lambda u: C * sc})  # fmt: skip
        if len(G):
            cons.append({"type": "ineq", "fun": lambda u: G @ (u * sc) - h,
                         "jac": lambda u: G * sc})  # fmt: skip
        lo, hi = self.lower / sc, self.upper / sc
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = minimize(f, theta / sc, jac=grad, method="SLSQP", constraints=cons,
                           bounds=Bounds(lo, hi),
                           options={"ftol": 1e-15, "maxiter": 1000})  # fmt: skip
        t = res.x * sc
        for j, v in fixed.items():
            t[j] = v
        q = self.value(t)
        feasible = not self.cons.violated(t) and all(
            abs(t[j] - v) <= 1e-9 * max(1.0, abs(v)) for j, v in fixed.items()
        )
        return t, q, bool(math.isfinite(q) and feasible and res.status in (0, 8, 9))

    def feasible_range(self, j: int) -> tuple[float, float]:
        """The smallest and largest value of constant ``j`` the bounds and constraints allow."""
        lo, hi = float(self.lower[j]), float(self.upper[j])
        if self.cons is None:
            return lo, hi
        from scipy.optimize import linprog

        C, d, G, h = self.cons.matrices()
        p = len(self.lower)
        out = []
        for sign in (1.0, -1.0):
            res = linprog(sign * np.eye(p)[j], A_ub=-G if len(G) else None,
                          b_ub=-h if len(G) else None, A_eq=C if len(C) else None,
                          b_eq=d if len(C) else None,
                          bounds=list(zip(self.lower, self.upper, strict=True)),
                          method="highs")  # fmt: skip
            out.append(sign * res.fun if res.status == 0 else (-math.inf if sign > 0 else math.inf))
        return max(lo, out[0]), min(hi, out[1])


def _t_quantile(level: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, dof))


def _active_rank(problem: _Problem, theta: np.ndarray) -> tuple[int, np.ndarray]:
    """Rank of the constraints active at ``theta``, and a basis of their null space."""
    p = len(theta)
    if problem.cons is None:
        return 0, np.eye(p)
    rows = [np.array(c.coef) for c in problem.cons.items if c.active(theta)]
    if not rows:
        return 0, np.eye(p)
    A = np.array(rows)
    _, sv, vt = np.linalg.svd(A)
    k = int((sv > 1e-10 * sv.max()).sum())
    return k, vt[k:].T


def wald_covariance(problem: _Problem, theta: np.ndarray, dof: int) -> tuple[np.ndarray, float]:
    """``s^2 N (N'J'JN)^-1 N'`` at ``theta``, N a basis of the directions the active
    constraints leave free (the identity without constraints), and ``s^2``; NaN where J is
    rank-deficient or no degree of freedom is left."""
    r, J = problem.residuals(theta), problem.jacobian(theta)
    _, N = _active_rank(problem, theta)
    p = len(theta)
    if N.shape[1] == 0:
        return np.zeros((p, p)), math.nan
    nan = np.full((p, p), np.nan)
    if dof <= 0 or not (np.isfinite(r).all() and np.isfinite(J).all()):
        return nan, math.nan
    s2 = float((r**2).sum() / dof)
    if problem.obj.kind == "log_huber":
        from fitrules.engine.intervals import _huber_scale2

        s2 = _huber_scale2(r, problem.obj.delta, len(r), N.shape[1])
    JN = J @ N
    scale = np.max(np.abs(JN), axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    A = JN / scale
    sv = np.linalg.svd(A, compute_uv=False)
    if not sv.size or sv.min() <= 1e-12 * sv.max():
        return nan, s2
    inv = np.linalg.inv(A.T @ A) / np.outer(scale, scale)
    return s2 * N @ inv @ N.T, s2


def wald_stderr(problem: _Problem, theta: np.ndarray, dof: int) -> np.ndarray:
    """The square roots of :func:`wald_covariance`'s diagonal."""
    cov, _ = wald_covariance(problem, theta, dof)
    return np.sqrt(np.maximum(np.diagonal(cov), 0.0))


def constrained_uncertainty(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    constants: dict[str, float],
    objective: Objective,
    weights: np.ndarray | None,
    constraints: Constraints,
):
    """The Jacobian standard errors of a fit under constraints: the covariance restricted to
    the directions the active constraints leave free, on n - (p - active) degrees of
    freedom (a :class:`~fitrules.engine.intervals.JacobianUncertainty`)."""
    from fitrules.engine.intervals import JacobianUncertainty

    problem = _Problem(form, X, y, objective, weights, constraints)
    names = problem.cf.s.constants
    theta = np.array([constants[c] for c in names], float)
    k, N = _active_rank(problem, theta)
    dof = len(problem.y) - (len(names) - k)
    cov, s2 = wald_covariance(problem, theta, dof)
    active = constraints.active(theta)
    note = f"under the constraints active at the fit: {', '.join(active)}" if active else ""
    if dof <= 0:
        note = f"no degree of freedom left ({len(problem.y)} cells, {len(names) - k} free)"
    elif not np.isfinite(cov).all():
        note = "Jacobian is rank-deficient at the fit" + (f" ({note})" if note else "")
    return JacobianUncertainty(
        tuple(names), cov, math.sqrt(s2) if math.isfinite(s2) else math.nan, dof,
        N.shape[1], note,
    )  # fmt: skip


def _threshold(problem: _Problem, theta: np.ndarray, q: float, dof: int, level: float):
    t = _t_quantile(level, dof)
    if problem.obj.kind != "log_huber":
        return (
            t * t * q / dof,
            f"s^2 t^2 = s^2 F(1, {dof}), t the two-sided {level:g} quantile of t on {dof} dof",
        )
    from fitrules.engine.intervals import _huber_scale2

    r = problem.residuals(theta)
    n, d = len(r), problem.obj.delta
    s2 = _huber_scale2(r, d, n, n - dof)  # the sandwich factor of the standard errors
    inside = np.abs(r) <= d
    if inside.sum() >= 10:
        m = float(inside.mean())
    else:  # too few inside to count: a normal bulk, as the sandwich factor takes it
        from scipy import stats

        sigma = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        m = float(2 * stats.norm.cdf(d / sigma) - 1) if sigma > 0 else 1.0
    m = m if m > 0 else 1.0
    return (
        0.5 * t * t * m * s2,
        f"t^2 m s^2 / 2, s^2 Huber's sandwich factor of the standard errors, m = {m:.3g} the "
        f"share of residuals within delta, t on {dof} dof",
    )


def profile_intervals(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    constants: dict[str, float],
    objective: Objective | None = None,
    level: float = LEVEL,
    weights: np.ndarray | None = None,
    constraints: Constraints | None = None,
) -> ProfileFit:
    """Profile-likelihood interval of each constant of a fit (see the module docstring).

    Parameters
    ----------
    form : a bound form; X, y : the cells it was fitted on; constants : the fit.
    objective : the training objective; weights : the cells' weights, if any.
    level : the level of the intervals.
    constraints : linear constraints the fit was made under (each refit keeps them).

    Raises
    ------
    FitrulesError
        For a level outside (0, 1) or no degree of freedom left (cells <= free constants).

    Examples
    --------
    >>> import numpy as np
    >>> from fitrules.model.forms import Form
    >>> x = np.arange(1.0, 9.0)
    >>> y = 2 + 0.5 * x + np.array([0.01, -0.02, 0.0, 0.02, -0.01, 0.01, -0.02, 0.01])
    >>> f = Form("line", "a + b*x", ("x",)).bind(["x"])
    >>> p = profile_intervals(f, {"x": x}, y, {"a": 2.0014, "b": 0.4997}, Objective("abs_ls"))
    >>> lo, hi = p.intervals["b"]; bool(lo < 0.5 < hi)
    True
    """
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"{param('level')} {level}: must be in (0, 1), e.g. 0.95")
    obj = objective or Objective()
    problem = _Problem(form, X, y, obj, weights, constraints)
    names = problem.cf.s.constants
    theta0 = np.array([constants[c] for c in names], float)
    q_fit = problem.value(theta0)
    k, _ = _active_rank(problem, theta0)
    n, p = len(problem.y), len(names)
    dof = n - (p - k)
    if dof < 1:
        raise FitrulesError(
            f"form {form.name!r}: {n} cells for {p - k} free constants leave no degree of "
            "freedom for profile intervals"
        )
    if not math.isfinite(q_fit):
        raise FitrulesError(f"form {form.name!r}: the fit's objective is not finite")
    polished, q_pol, ok = problem.solve(theta0)
    q_hat = min(q_fit, q_pol) if ok else q_fit
    theta_hat = polished if ok and q_pol < q_fit else theta0
    delta, calibration = _threshold(problem, theta_hat, q_hat, dof, level)
    se = wald_stderr(problem, theta_hat, dof)
    state = {"best": q_hat}
    intervals, notes = {}, {}
    for j, c in enumerate(names):
        lo_ok, hi_ok = problem.feasible_range(j)
        if hi_ok - lo_ok <= 1e-12 * max(1.0, abs(theta0[j])):
            intervals[c] = (float(theta0[j]), float(theta0[j]))
            notes[c] = "held by the constraints"
            continue
        h = se[j] if math.isfinite(se[j]) and se[j] > 0 else 0.1 * max(abs(theta0[j]), 1e-3)
        ends, why = [], []
        for side in (-1.0, 1.0):
            edge = lo_ok if side < 0 else hi_ok
            end, note = _walk(problem, theta_hat, j, side, h, edge, q_hat, delta, state)
            ends.append(end)
            why.append(note)
        intervals[c] = (float(ends[0]), float(ends[1]))
        notes[c] = "; ".join(w for w in why if w)
    better = state["best"] if state["best"] < q_hat * (1 - 1e-6) - 1e-300 else None
    return ProfileFit(
        tuple(names), intervals, notes, float(level), dof, float(delta), float(q_hat),
        problem.calls, {c: float(v) for c, v in zip(names, se, strict=True)}, calibration,
        better, [] if constraints is None else [c.text for c in constraints.items],
    )  # fmt: skip


def _walk(problem: _Problem, theta: np.ndarray, j: int, side: float, h: float, edge: float,
          q_hat: float, delta: float, state: dict) -> tuple[float, str]:  # fmt: skip
    """One side of constant ``j``'s profile: where the objective's rise crosses ``delta``."""
    from scipy.optimize import brentq

    name = problem.cf.s.constants[j]
    where = "low" if side < 0 else "high"
    v0 = float(theta[j])
    prev_v, prev_t = v0, theta.copy()
    warm = {"t": theta.copy()}

    def rise(v: float) -> float:
        t, q, ok = problem.solve(warm["t"], {j: v})
        if not ok:
            raise _NoFit
        warm["t"] = t
        state["best"] = min(state["best"], q)
        return q - q_hat - delta

    for m in STEPS:
        v = v0 + side * m * h
        at_edge = (v <= edge) if side < 0 else (v >= edge)
        if at_edge:
            v = edge
        if not math.isfinite(v):
            break
        warm["t"] = prev_t
        try:
            g = rise(v)
        except _NoFit:
            return side * math.inf, f"{where} side open: no fit with {name} = {v:.6g}"
        if g >= 0:
            warm["t"] = prev_t
            try:
                return float(brentq(rise, prev_v, v, xtol=1e-4 * h, rtol=1e-10, maxiter=40)), ""
            except (_NoFit, ValueError):
                return v, f"{where} end at the last refit ({name} = {v:.6g})"
        if at_edge:
            bounded = edge in (problem.lower[j], problem.upper[j])
            bound = "its bound" if bounded else "the constraints' limit"
            return v, f"{where} side reaches {bound} ({name} = {v:.6g}) before the threshold"
        prev_v, prev_t = v, warm["t"].copy()
    return side * math.inf, (
        f"{where} side open: the objective rises less than the threshold within "
        f"{STEPS[-1]} standard errors"
    )


class _NoFit(Exception):
    """A conditional refit failed."""


def constrained_fit(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    base: FitResult,
    constraints: Constraints,
    objective: Objective | None = None,
    weights: np.ndarray | None = None,
) -> FitResult:
    """The fit ``base`` (made without constraints) moved onto the constraints, if it breaks
    one or an equality is given: the constrained optimum by SLSQP from it.

    Raises
    ------
    FitrulesError
        When no constants satisfying the constraints give a finite objective (e.g.
        constraints that contradict each other or the bounds).
    """
    if not constraints:
        return base
    obj = objective or Objective()
    problem = _Problem(form, X, y, obj, weights, constraints)
    names = problem.cf.s.constants
    theta0 = np.array([base.constants[c] for c in names], float)
    equal = any(c.op == "=" for c in constraints.items)
    if not equal and not constraints.violated(theta0):
        return base
    lo, hi = zip(*(problem.feasible_range(j) for j in range(len(names))), strict=True)
    if any(a > b for a, b in zip(lo, hi, strict=True)):
        raise FitrulesError(
            f"form {form.name!r}: no constants satisfy the constraints "
            f"{'; '.join(c.text for c in constraints.items)} within their bounds"
        )
    start = np.clip(theta0, lo, hi)
    theta, q, ok = problem.solve(start)
    if not (ok or (math.isfinite(q) and not constraints.violated(theta))):
        raise FitrulesError(
            f"form {form.name!r}: no fit satisfies the constraints "
            f"{'; '.join(c.text for c in constraints.items)} (the optimiser found none from "
            "the unconstrained fit)"
        )
    return FitResult(
        base.form, {c: float(v) for c, v in zip(names, theta, strict=True)}, float(q),
        base.n_train, bool(ok), base.cond, list(base.reasons),
    )  # fmt: skip
