"""Held-out error metrics: the per-cell and per-split statistics every job ranks by."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import HELDOUT_WEIGHTS

TRIM = 0.10  # fraction cut from each end for the trimmed mean


def box_weights(X: Mapping[str, np.ndarray], kind: str = HELDOUT_WEIGHTS[0]) -> np.ndarray:
    """Each cell's weight in a held-out error: its share of the grid's box, or 1 (``equal``).

    The box share is the trapezoid rule's: a cell on the lowest or highest value of a variable
    counts half in that variable, so an edge cell counts half and a corner a quarter (an
    eighth in three variables). A split's weighted mean error then estimates the mean error
    over configurations spread evenly across the grid's range (on the scale its levels are
    spaced in), where an equal mean over-counts the edges: they are a larger share of a
    small grid's cells than of its box, and a form misses most there (issue 42). A variable
    with one value weighs every cell alike.

    Raises
    ------
    FitrulesError
        For a ``kind`` that is neither ``box`` nor ``equal``.
    """
    if kind not in HELDOUT_WEIGHTS:
        raise FitrulesError(
            f"{param('heldout_weights')} {kind!r} is unknown; allowed: {', '.join(HELDOUT_WEIGHTS)}"
        )
    n = len(next(iter(X.values()))) if X else 0
    w = np.ones(n)
    if kind == "equal":
        return w
    for values in X.values():
        v = np.asarray(values)
        if v.dtype.kind not in "iuf" or n == 0:
            continue  # a categorical column has no box
        lo, hi = np.nanmin(v), np.nanmax(v)
        w *= np.where((v == lo) | (v == hi), 0.5, 1.0)
    return w


def weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """``values``' mean, weighted when ``weights`` is given."""
    if weights is None:
        return float(np.mean(values))
    return float(np.sum(weights * values) / np.sum(weights))


def heldout_errors(
    y_true: np.ndarray, y_pred: np.ndarray, weights: np.ndarray | None = None
) -> dict:
    """Mean and worst absolute relative error over cells (percent), and the RMSE; the mean
    and the RMSE weighted by ``weights`` (see :func:`box_weights`) when given."""
    with np.errstate(over="ignore", invalid="ignore"):
        rel = np.abs(y_pred - y_true) / np.abs(y_true)
        diff = np.abs(y_pred - y_true)
        rmse = float(np.sqrt(weighted_mean(diff**2, weights)))
        if not np.isfinite(rmse) and np.isfinite(diff).all():
            # squares of differences near the largest float overflow: scale them first
            top = float(diff.max())
            rmse = top * float(np.sqrt(weighted_mean((diff / top) ** 2, weights)))
        return {
            "heldout_error_pct": 100 * weighted_mean(rel, weights),
            "worst_cell_pct": float(100 * rel.max()),
            "rmse": rmse,
        }


def trim_mean(e: np.ndarray, cut: float) -> float:
    """Mean after cutting ``int(cut * n)`` values from each end (as ``scipy.stats.trim_mean``,
    without importing scipy.stats, which costs a second at start-up)."""
    e = np.sort(np.asarray(e, float))
    k = int(cut * len(e))
    return float(e[k : len(e) - k].mean())


def robust_summary(e: np.ndarray, prefix: str = "") -> dict:
    """Median, 10% trimmed mean, 90th percentile and worst of per-split errors."""
    e = np.asarray(e, float)
    if not len(e):
        return {f"{prefix}{k}": np.nan for k in ("median_pct", "trimmed_mean_pct", "p90_pct")}
    return {
        f"{prefix}median_pct": float(np.median(e)),
        f"{prefix}trimmed_mean_pct": trim_mean(e, TRIM),
        f"{prefix}p90_pct": float(np.percentile(e, 90)),
    }
