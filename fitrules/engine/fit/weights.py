"""Cell weights: how much each cell's squared residual counts, and how they ride with X."""

from __future__ import annotations

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import WEIGHTS
from fitrules.engine.fit.objective import Objective

WEIGHT_KEY = "\x00weights"  # cell weights ride along with the variables (never a name: NUL)


def _weights(objective: Objective, y: np.ndarray, X=None) -> np.ndarray:
    # log-Huber is profiled with relative least squares: log(p/y) ~ (p - y)/y near the fit
    base = np.ones_like(y) if objective.kind == "abs_ls" else 1.0 / y
    return base * _root_weights(X)


def _root_weights(X) -> np.ndarray | float:
    """Square roots of the cell weights carried in ``X`` (1 when cells count equally)."""
    if X is None or WEIGHT_KEY not in X:
        return 1.0
    return np.sqrt(X[WEIGHT_KEY])


def _with_weights(X, weights, objective: Objective, n: int) -> dict:
    if weights is None:
        return X
    w = np.asarray(weights, float)
    if w.shape != (n,) or not (np.isfinite(w).all() and (w > 0).all()):
        raise FitrulesError(f"cell weights must be {n} finite positive numbers")
    if objective.kind == "log_huber" and not np.all(w == w[0]):
        raise FitrulesError(
            "weights other than cells apply to least-squares objectives (rel_ls, abs_ls); "
            "log_huber weighs every cell once"
        )
    return {**X, WEIGHT_KEY: w}


def cell_weights(kind: str, table, objective: Objective | None = None) -> np.ndarray | None:
    """Per-cell weights of the squared residuals for ``--weights``.

    ``cells``: every cell once (``None``). ``runs``: each cell by its number of runs, so
    that a fit to cell means is the least-squares fit to the runs (with residuals relative
    to the cell mean for ``rel_ls``). ``inverse-variance``: each cell by one over the
    squared standard error of its mean (on the objective's scale), so the objective is a
    chi-square; it needs at least two runs in every cell.

    Raises
    ------
    FitrulesError
        For an unknown kind, or inverse-variance weights where a cell has one run or no
        spread.
    """
    if kind not in WEIGHTS:
        raise FitrulesError(
            f"{param('weights')} {kind!r} is unknown; allowed: {', '.join(WEIGHTS)}"
        )
    if kind == "cells":
        return None
    if objective is not None and objective.kind == "log_huber":
        raise FitrulesError(
            f"{param('weights')} {kind}: weights other than cells apply to least-squares "
            "objectives "
            f"(rel_ls, abs_ls); log_huber weighs every cell once (use {param('weights')} cells)"
        )
    n = table["n_seeds"].to_numpy(float)
    if kind == "runs":
        return n / n.mean()
    sem = table["sem"].to_numpy(float)
    bad = ~(np.isfinite(sem) & (sem > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = table.iloc[i]
        raise FitrulesError(
            f"{param('weights')} inverse-variance needs a standard error in every cell; the cell "
            f"at row {i} ({int(row['n_seeds'])} run(s), standard error "
            f"{float(row['sem']):g}) has none (it needs at least 2 runs that differ); use "
            f"{param('weights')} runs or cells"
        )
    y = table["value"].to_numpy(float)
    scale = 1.0 if (objective is not None and objective.kind == "abs_ls") else 1.0 / y
    w = 1.0 / (sem * scale) ** 2
    return w / w.mean()
