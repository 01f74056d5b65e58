"""Held-out error metrics: the per-cell and per-split statistics every job ranks by."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fitrules.base.error_metrics import DEFAULT_ERROR_METRIC, ERROR_METRICS, ErrorMetric
from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import HELDOUT_WEIGHTS

RELATIVE = ERROR_METRICS[DEFAULT_ERROR_METRIC]

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
    y_true: np.ndarray,
    y_pred: np.ndarray,
    weights: np.ndarray | None = None,
    metric: ErrorMetric = RELATIVE,
) -> dict:
    """Mean and worst error over cells in ``metric`` (by default ``relative``, the absolute
    relative error in percent), and the RMSE; the mean and the RMSE weighted by ``weights``
    (see :func:`box_weights`) when given. The keys carry no unit: ``heldout_error``,
    ``worst_cell``, ``rmse``."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        residual = y_pred - y_true
        per_cell = np.asarray(metric.per_cell(y_true, residual), float)
        diff = np.abs(residual)
        rmse = float(np.sqrt(weighted_mean(diff**2, weights)))
        if not np.isfinite(rmse) and np.isfinite(diff).all():
            # squares of differences near the largest float overflow: scale them first
            top = float(diff.max())
            rmse = top * float(np.sqrt(weighted_mean((diff / top) ** 2, weights)))
        return {
            "heldout_error": metric.scale * weighted_mean(per_cell, weights),
            "worst_cell": float(metric.scale * per_cell.max()),
            "rmse": rmse,
        }


def row_means(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """:func:`weighted_mean` of each row, the same to the bit as each row's own.

    Parameters
    ----------
    values : numpy.ndarray
        One row a set of values (S, m).
    weights : numpy.ndarray or None
        Their weights (S, m); None weighs every value alike.

    Returns
    -------
    numpy.ndarray
        The (weighted) mean of each row (S,): each row's sum runs over its own contiguous
        values, in the order :func:`weighted_mean`'s sum takes them.
    """
    if weights is None:
        return values.mean(axis=1)
    return (weights * values).sum(axis=1) / weights.sum(axis=1)


def heldout_error_rows(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    weights: np.ndarray | None = None,
    metric: ErrorMetric = RELATIVE,
) -> dict[str, np.ndarray]:
    """:func:`heldout_errors` of every row of (S, m) arrays at once, each value the same to
    the bit as the row's own.

    Parameters
    ----------
    y_true : numpy.ndarray
        The held-out cells' values, one row a split (S, m).
    y_pred : numpy.ndarray
        The predictions at the same cells (S, m).
    weights : numpy.ndarray, optional
        Each cell's weight in its row's means (S, m); None weighs every cell alike.
    metric : ErrorMetric, optional
        The per-cell error (default relative, in percent).

    Returns
    -------
    dict
        ``heldout_error``, ``worst_cell`` and ``rmse``, each an array (S,).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        residual = y_pred - y_true
        per_cell = np.asarray(metric.per_cell(y_true, residual), float)
        diff = np.abs(residual)
        out = {
            "heldout_error": metric.scale * row_means(per_cell, weights),
            "worst_cell": metric.scale * per_cell.max(axis=1),
            "rmse": np.sqrt(row_means(diff**2, weights)),
        }
    # squares that overflow though the differences do not: each such row on its own
    for i in np.flatnonzero(~np.isfinite(out["rmse"]) & np.isfinite(diff).all(axis=1)):
        one = heldout_errors(y_true[i], y_pred[i], None if weights is None else weights[i], metric)
        for key, v in one.items():
            out[key][i] = v
    return out


def trim_mean(e: np.ndarray, cut: float) -> float:
    """Mean after cutting ``int(cut * n)`` values from each end (as ``scipy.stats.trim_mean``,
    without importing scipy.stats, which costs a second at start-up)."""
    e = np.sort(np.asarray(e, float))
    k = int(cut * len(e))
    return float(e[k : len(e) - k].mean())


def robust_summary(e: np.ndarray, prefix: str = "", suffix: str = "") -> dict:
    """Median, 10% trimmed mean and 90th percentile of per-split errors, keyed
    ``{prefix}median{suffix}`` and so on."""
    e = np.asarray(e, float)
    keys = [f"{prefix}{k}{suffix}" for k in ("median", "trimmed_mean", "p90")]
    if not len(e):
        return dict.fromkeys(keys, np.nan)
    return dict(
        zip(
            keys,
            (float(np.median(e)), trim_mean(e, TRIM), float(np.percentile(e, 90))),
            strict=True,
        )
    )
