"""An independent reference optimum: scipy's least_squares from many random starts.

Shares nothing with fitrules' fitting but the data: the expression is compiled with Python
over numpy, the starts are drawn inside the bounds (log-uniform over a positive range of more
than three decades, uniform otherwise), and each start is finished by ``least_squares``
(trust-region reflective, which keeps the constants inside their bounds). Used by
``bench_fit_corpus.py`` and ``bench_published.py``; not shipped.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

_NUMPY = {"log": np.log, "exp": np.exp, "sqrt": np.sqrt, "np": np}


@dataclass
class Reference:
    constants: dict[str, float]
    objective: float
    seconds: float
    n_starts: int


def _compile(expression: str, variables, constants):
    text = re.sub(r"`([^`]*)`", lambda m: "_v_" + re.sub(r"\W", "_", m.group(1)), expression)
    args = [("_v_" + re.sub(r"\W", "_", v)) if not v.isidentifier() else v for v in variables]
    code = compile(text, "<form>", "eval")

    def f(theta, X):
        env = dict(_NUMPY)
        env.update(dict(zip(args, (X[v] for v in variables), strict=True)))
        env.update(dict(zip(constants, theta, strict=True)))
        with np.errstate(all="ignore"):
            return np.broadcast_to(eval(code, {"__builtins__": {}}, env), X[variables[0]].shape)

    return f


def residual_fn(kind: str, delta: float = 1e-3):
    if kind == "abs_ls":
        return lambda p, y: p - y, "linear"
    if kind == "rel_ls":
        return lambda p, y: (p - y) / y, "linear"
    # log_huber: scipy's huber loss on log residuals, f_scale = delta (rho = delta^2 * huber)
    return lambda p, y: np.log(np.maximum(p, 1e-300)) - np.log(y), "huber"


def objective_value(kind: str, r: np.ndarray, delta: float = 1e-3) -> float:
    if kind == "log_huber":
        a = np.abs(r)
        return float(np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta)).sum())
    return float((r * r).sum())


class Problem:
    """One fitting problem as a scipy user writes it: the residuals in numpy, the bounds, and
    how a random start is drawn and finished by ``least_squares`` (see :func:`multistart`)."""

    def __init__(self, expression, variables, constants, X, y, kind="rel_ls", bounds=None,
                 delta=1e-3, start_box=None):  # fmt: skip
        bounds = bounds or {}
        self.start_box = start_box or {}
        self.constants, self.X, self.y, self.kind, self.delta = constants, X, y, kind, delta
        self.f = _compile(expression, variables, constants)
        self.res, self.loss = residual_fn(kind, delta)
        self.lo = np.array([bounds.get(c, (-np.inf, np.inf))[0] for c in constants], float)
        self.hi = np.array([bounds.get(c, (-np.inf, np.inf))[1] for c in constants], float)

    def fun(self, theta):
        r = self.res(self.f(theta, self.X), self.y)
        return np.where(np.isfinite(r), r, 1e10)

    def value(self, theta) -> float:
        """The objective at ``theta`` (inf where a residual is not finite)."""
        r = self.res(self.f(np.asarray(theta, float), self.X), self.y)
        return objective_value(self.kind, r, self.delta) if np.isfinite(r).all() else np.inf

    def draw(self, rng) -> np.ndarray:
        """A random start inside the starting box: log-uniform over a positive range of more
        than three decades, uniform otherwise; an unbounded side of the box is 3 (or -3)."""
        lo, hi = self.lo, self.hi
        x0 = np.empty(len(self.constants))
        for j, c in enumerate(self.constants):
            a, b = self.start_box.get(c, (lo[j], hi[j]))
            a = a if np.isfinite(a) else -3.0
            b = b if np.isfinite(b) else 3.0
            if a > 0 and b / a >= 1e3:
                x0[j] = np.exp(rng.uniform(np.log(a), np.log(b)))
            else:
                x0[j] = rng.uniform(a, b)
        return np.clip(
            x0,
            np.where(np.isfinite(lo), lo + 1e-12 * (1 + abs(lo)), lo),
            np.where(np.isfinite(hi), hi - 1e-12 * (1 + abs(hi)), hi),
        )

    def start(self, rng) -> tuple[float, np.ndarray | None]:
        """One random start finished by ``least_squares``: its objective and constants
        (inf and None when scipy fails or ends at a non-finite residual)."""
        x0 = self.draw(rng)
        try:
            out = least_squares(self.fun, x0, bounds=(self.lo, self.hi), method="trf",
                                loss=self.loss, f_scale=self.delta, x_scale="jac",
                                max_nfev=2000)  # fmt: skip
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            return np.inf, None
        val = self.value(out.x)
        return (val, out.x.copy()) if np.isfinite(val) else (np.inf, None)


def multistart(
    expression: str,
    variables,
    constants,
    X: dict,
    y: np.ndarray,
    kind: str = "rel_ls",
    bounds: dict | None = None,
    n_starts: int = 200,
    seed: int = 0,
    delta: float = 1e-3,
    start_box: dict | None = None,
) -> Reference:
    """Best of ``n_starts`` bounded least_squares runs.

    ``bounds`` per constant (lo, hi); constants without bounds are free. ``start_box`` per
    constant, the range starts are drawn from (default: its bounds where finite, else
    [-3, 3] for an unbounded constant, the convention of most published fits' code).
    """
    problem = Problem(expression, variables, constants, X, y, kind, bounds, delta, start_box)
    rng = np.random.default_rng(seed)
    best = (np.inf, None)
    t0 = time.perf_counter()
    for _ in range(n_starts):
        val, x = problem.start(rng)
        if val < best[0]:
            best = (val, x)
    seconds = time.perf_counter() - t0
    consts = {} if best[1] is None else dict(zip(constants, best[1].tolist(), strict=True))
    return Reference(consts, best[0], seconds, n_starts)


def lmfit_start(problem: Problem, rng) -> tuple[float, np.ndarray | None]:
    """One random start (drawn as :meth:`Problem.start` draws it) finished by lmfit: its
    default Levenberg-Marquardt (MINPACK's ``leastsq``, bounds by lmfit's transformation), or
    for log-Huber, which ``leastsq`` cannot take, its ``least_squares`` with scipy's Huber loss."""
    import lmfit

    x0 = problem.draw(rng)
    params = lmfit.Parameters()
    names = [f"c{j}" for j in range(len(x0))]
    for name, v, lo, hi in zip(names, x0, problem.lo, problem.hi, strict=True):
        params.add(name, value=float(v), min=float(lo), max=float(hi))

    def fun(p):
        return problem.fun(np.array([p[n].value for n in names]))

    huber = problem.loss == "huber"
    kws = {"loss": "huber", "f_scale": problem.delta, "x_scale": "jac"} if huber else {}
    try:
        out = lmfit.minimize(fun, params, method="least_squares" if huber else "leastsq", **kws)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError):
        return np.inf, None
    x = np.array([out.params[n].value for n in names])
    val = problem.value(x)
    return (val, x) if np.isfinite(val) else (np.inf, None)


SURE = 0.999  # restarts until this sure of reaching the best known objective at least once
HIT = 1e-6  # a start reaches the optimum when within this relative distance of the best known


def trials(problem: Problem, n: int, seed: int = 0, finish=None) -> tuple[np.ndarray, float]:
    """The objectives of ``n`` single random starts (seeded) and their CPU seconds
    (``time.process_time``). ``finish``: :meth:`Problem.start` (scipy ``least_squares``)
    unless given (:func:`lmfit_start`)."""
    finish = finish or Problem.start
    rng = np.random.default_rng(seed)
    vals = np.empty(n)
    t0 = time.process_time()
    for i in range(n):
        vals[i] = finish(problem, rng)[0]
    return vals, time.process_time() - t0


def restart_until_sure(problem: Problem, vals: np.ndarray, trials_cpu: float, best: float,
                       seed: int = 0, repeat: int = 1, finish=None) -> dict:  # fmt: skip
    """The fair baseline of one problem: a careful user restarting until 99.9% sure.

    ``vals``: the objectives of single random starts (:func:`trials`); p is the share of them
    within 1e-6 relative of ``best`` (the best objective known, by any method). Then
    k = ceil(log(0.001) / log(1 - p)) starts (1 when p = 1) are run from a fresh seed and
    their CPU (``time.process_time``, the smallest of ``repeat`` runs) is the baseline's.
    When no trial reaches ``best`` (p = 0), k is None and the trials' CPU stands for the
    baseline's: a lower bound. Returned: p, k, the baseline's CPU and best objective, and the
    trials' CPU.
    """
    finish = finish or Problem.start
    p = float((vals <= best + HIT * abs(best)).mean())
    k = None if p == 0 else 1 if p == 1 else int(np.ceil(np.log(1 - SURE) / np.log(1 - p)))
    out = {"p": p, "k": k, "cpu": trials_cpu, "objective": float(vals.min()),
           "trials_cpu": trials_cpu}  # fmt: skip
    if k is None:
        return out
    cpu, got = np.inf, np.inf
    for _ in range(repeat):
        rng = np.random.default_rng(seed + 1)
        t0 = time.process_time()
        got = min(finish(problem, rng)[0] for _ in range(k))
        cpu = min(cpu, time.process_time() - t0)
    return {**out, "cpu": cpu, "objective": float(got)}
