"""In-sample information criteria (AIC, AICc, BIC) and R^2 of a fit to cell means."""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit.objective import Objective


def information_criteria(
    y: np.ndarray,
    pred: np.ndarray,
    objective: Objective,
    n_constants: int,
    weights: np.ndarray | None = None,
) -> dict[str, float]:
    """AIC, AICc, BIC and R^2 of a fit to cell means.

    The likelihood is Gaussian in the residuals the objective squares (relative for
    ``rel_ls``, log for ``log_huber``, absolute for ``abs_ls``; times the square roots of
    the weights), with their variance profiled out, as statsmodels' OLS computes it:
    ``llf = -n/2 (log(2 pi) + log(RSS/n) + 1)``, ``AIC = -2 llf + 2k``,
    ``AICc = AIC + 2k(k+1)/(n-k-1)``, ``BIC = -2 llf + k log n``, where ``k`` counts every
    fitted constant (each level of a per-level constant; fixed ones not). ``R^2`` is
    ``1 - sum w (pred - y)^2 / sum w (y - weighted mean)^2`` on the cell means. These are
    in-sample; held-out error, not these, is what ``compare`` ranks.

    Examples
    --------
    >>> y = np.array([1.0, 2.1, 2.9, 4.2])
    >>> ic = information_criteria(y, np.array([1.0, 2.0, 3.0, 4.0]), Objective("abs_ls"), 2)
    >>> round(ic["r2"], 4)
    0.9904
    """
    y = np.asarray(y, float)
    pred = np.asarray(pred, float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, float)
    n, k = len(y), int(n_constants)
    with np.errstate(all="ignore"):
        r = objective.residuals(pred, y) * np.sqrt(w)
        # log(RSS) through the largest residual, so values near 1e-300 or 1e300 do not
        # underflow or overflow on squaring
        top = float(np.max(np.abs(r))) if n else 0.0
        log_rss = 2 * np.log(top) + np.log(((r / top) ** 2).sum()) if top > 0 else -np.inf
        rss = float(np.exp(log_rss))
        llf = -n / 2 * (np.log(2 * np.pi) + log_rss - np.log(n) + 1)
        aic = -2 * llf + 2 * k
        aicc = aic + 2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else np.nan
        bic = -2 * llf + k * np.log(n)
        size = float(np.max(np.abs(y))) if n else 1.0
        size = size if size > 0 and np.isfinite(size) else 1.0
        y, pred = y / size, pred / size  # R^2 does not depend on the unit
        mean = float((w * y).sum() / w.sum())
        # numpy division: a constant grid (or values near 1e-300) gives NaN, not an error
        r2 = 1 - np.divide((w * (pred - y) ** 2).sum(), (w * (y - mean) ** 2).sum())
    if not all(np.isfinite(v) for v in (llf, aic, bic)):
        llf = aic = aicc = bic = np.nan  # an exact fit (RSS 0) has no Gaussian likelihood
    return {
        "n": n,
        "k": k,
        "rss": rss,
        "log_likelihood": float(llf),
        "aic": float(aic),
        "aicc": float(aicc),
        "bic": float(bic),
        "r2": float(r2),
    }
