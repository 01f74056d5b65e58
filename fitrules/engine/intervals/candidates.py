"""Form uncertainty: which of several candidate forms a grid cannot tell apart, and the span
of their answers.

Each candidate is fitted to the same cells with the same objective; a candidate is told
apart from the best-fitting one (the lowest residual sum of squares) when an F test of the
two sums rejects it: ``F = ((RSS_k - RSS_b) / max(p_b - p_k, 1)) / (RSS_b / (n - p_b))``
against ``F(max(p_b - p_k, 1), n - p_b)`` at ``1 - level``. The test is exact for nested
Gaussian forms (most of a family is: a form with a term more holds the form without it) and
an approximation otherwise. The forms not told apart are the answers the grid allows; the
interval over forms is the union of their intervals, so that it covers whichever of them is
right as often as that one's own interval does.
"""

from __future__ import annotations

import math

import numpy as np


def not_told_apart(rss, constants, n: int, level: float) -> np.ndarray:
    """Per candidate, whether the grid keeps it beside the best-fitting one.

    Parameters
    ----------
    rss : array of float
        Each candidate's residual sum of squares in its objective's residuals (NaN: no fit).
    constants : array of int
        Each candidate's number of fitted constants.
    n : int
        The cells fitted.
    level : float
        One minus the test's size.

    Returns
    -------
    ndarray of bool
        True where the candidate is not rejected (the best one always).

    Examples
    --------
    >>> not_told_apart([1.0, 1.01, 3.0], [5, 7, 5], 60, 0.95).tolist()
    [True, True, False]
    """
    from scipy.stats import f as f_dist

    rss = np.asarray(rss, float)
    p = np.asarray(constants, int)
    ok = np.isfinite(rss)
    keep = np.zeros(len(rss), bool)
    if not ok.any():
        return keep
    b = int(np.nanargmin(np.where(ok, rss, np.nan)))
    df2 = n - int(p[b])
    for k in np.flatnonzero(ok):
        if k == b or df2 <= 0 or rss[b] <= 0:
            keep[k] = k == b or rss[k] <= rss[b]
            continue
        df1 = max(int(p[b]) - int(p[k]), 1)
        F = max(rss[k] - rss[b], 0.0) / df1 / (rss[b] / df2)
        keep[k] = f_dist.sf(F, df1, df2) > 1 - level
    return keep


def span(lows, centres, highs, keep) -> tuple[float, float, float, float]:
    """The interval over the kept candidates (the union of their intervals; a kept
    candidate without an interval contributes its answer) and the range of their answers:
    (low, high, lowest answer, highest answer); NaN when no candidate is kept.

    Examples
    --------
    >>> span([1.0, 2.0], [1.5, 2.5], [2.0, 3.0], [True, True])
    (1.0, 3.0, 1.5, 2.5)
    """
    keep = np.asarray(keep, bool) & np.isfinite(np.asarray(centres, float))
    if not keep.any():
        return (math.nan,) * 4
    c = np.asarray(centres, float)[keep]
    lo = np.asarray(lows, float)[keep]
    hi = np.asarray(highs, float)[keep]
    lo = np.where(np.isfinite(lo), lo, c)
    hi = np.where(np.isfinite(hi), hi, c)
    return (float(min(lo.min(), c.min())), float(max(hi.max(), c.max())), float(c.min()),
            float(c.max()))  # fmt: skip
