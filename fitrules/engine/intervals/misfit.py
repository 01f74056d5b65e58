"""The local misfit: the lean of a full fit's residuals about a point, and the misfit it
leaves unexplained.
"""

from __future__ import annotations

import math

import numpy as np

from fitrules.engine.intervals.design import LOCAL_BANDWIDTH


def local_roughness_var(r: np.ndarray, W: np.ndarray) -> float:
    """One run's noise variance read from residuals ``r`` at cells without repeats: each
    residual's miss from its neighbours' weighted mean (``W``, each cell given no weight of
    its own), squared over its expectation under pure noise, averaged; NaN when no miss is
    finite (see ``HeldOut.roughness_var``)."""
    w = W.sum(axis=1)
    with np.errstate(all="ignore"):
        d2 = (r - W @ r / w) ** 2 / (1 + (W**2).sum(axis=1) / w**2)
    d2 = d2[np.isfinite(d2)]
    return float(np.mean(d2)) if len(d2) else math.nan


def local_lean(W: np.ndarray, r: np.ndarray, own: np.ndarray, pos: np.ndarray, cells: np.ndarray):
    """The misfit's local lean at each point: (low, high, seed-noise variance).

    The residuals ``r`` at the cells weighted by ``W`` about each point, and beyond the
    cells their local linear trend (:func:`local_trend`); ``own`` is each cell's seed-noise
    variance, ``pos`` the points' and ``cells`` the cells' design positions."""
    w = W.sum(axis=1)
    held, var = W @ r / w, (W**2 @ own) / w**2
    trend, trend_var = local_trend(pos, cells, r, own)
    return np.fmin(held, trend), np.fmax(held, trend), np.fmax(var, trend_var)


def local_trend(pos: np.ndarray, cells: np.ndarray, r: np.ndarray, own: np.ndarray):
    """The residuals' local linear trend about the nearest edge of the cells, continued
    to each point beyond them, and its noise variance (NaN inside the cells' range).
    Twice the lean's bandwidth, since a slope needs cells on more than one level."""
    lo, hi = cells.min(axis=0), cells.max(axis=0)
    out, var = np.full(len(pos), np.nan), np.full(len(pos), np.nan)
    for j in np.flatnonzero(((pos < lo) | (pos > hi)).any(axis=1)):
        edge = np.clip(pos[j], lo, hi)
        d2 = ((cells - edge) ** 2).sum(axis=1)
        w = np.exp(-0.5 * (d2 - d2.min()) / (2 * LOCAL_BANDWIDTH) ** 2)
        A = np.column_stack([np.ones(len(cells)), cells - edge])
        ell = np.concatenate([[1.0], pos[j] - edge]) @ np.linalg.pinv(A.T @ (A * w[:, None]))
        ell = (A * w[:, None]) @ ell
        out[j], var[j] = ell @ r, ell**2 @ own
    return out, var


def neighbour_excess(r: np.ndarray, own: np.ndarray, Wc: np.ndarray) -> np.ndarray:
    """Per cell, the squared miss of its residual predicted by its neighbours' lean (``Wc``,
    each cell given no weight of its own), less the seed noise both carry."""
    wc = Wc.sum(axis=1)
    return (r - Wc @ r / wc) ** 2 - own - (Wc**2 @ own) / wc**2


def local_misfit_var(W: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """The cells' :func:`neighbour_excess` averaged with the weights ``W`` about each point
    (never below 0): the local misfit the lean leaves unexplained."""
    return np.maximum(W @ excess / W.sum(axis=1), 0.0)
