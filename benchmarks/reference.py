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
    bounds = bounds or {}
    start_box = start_box or {}
    f = _compile(expression, variables, constants)
    res, loss = residual_fn(kind, delta)
    lo = np.array([bounds.get(c, (-np.inf, np.inf))[0] for c in constants], float)
    hi = np.array([bounds.get(c, (-np.inf, np.inf))[1] for c in constants], float)
    rng = np.random.default_rng(seed)
    best = (np.inf, None)
    t0 = time.perf_counter()

    def fun(theta):
        r = res(f(theta, X), y)
        return np.where(np.isfinite(r), r, 1e10)

    for _ in range(n_starts):
        x0 = np.empty(len(constants))
        for j, c in enumerate(constants):
            a, b = start_box.get(c, (lo[j], hi[j]))
            a = a if np.isfinite(a) else -3.0
            b = b if np.isfinite(b) else 3.0
            if a > 0 and b / a >= 1e3:
                x0[j] = np.exp(rng.uniform(np.log(a), np.log(b)))
            else:
                x0[j] = rng.uniform(a, b)
        x0 = np.clip(
            x0,
            np.where(np.isfinite(lo), lo + 1e-12 * (1 + abs(lo)), lo),
            np.where(np.isfinite(hi), hi - 1e-12 * (1 + abs(hi)), hi),
        )
        try:
            out = least_squares(
                fun,
                x0,
                bounds=(lo, hi),
                method="trf",
                loss=loss,
                f_scale=delta,
                x_scale="jac",
                max_nfev=2000,
            )
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            continue
        r = res(f(out.x, X), y)
        if not np.isfinite(r).all():
            continue
        val = objective_value(kind, r, delta)
        if val < best[0]:
            best = (val, out.x.copy())
    seconds = time.perf_counter() - t0
    consts = {} if best[1] is None else dict(zip(constants, best[1].tolist(), strict=True))
    return Reference(consts, best[0], seconds, n_starts)
