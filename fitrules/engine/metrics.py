"""Held-out error metrics: the per-cell and per-split statistics every job ranks by."""

from __future__ import annotations

import numpy as np

TRIM = 0.10  # fraction cut from each end for the trimmed mean


def heldout_errors(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """Mean and worst absolute relative error over cells (percent), and the RMSE."""
    with np.errstate(over="ignore", invalid="ignore"):
        rel = np.abs(y_pred - y_true) / np.abs(y_true)
        diff = np.abs(y_pred - y_true)
        rmse = float(np.sqrt(np.mean(diff**2)))
        if not np.isfinite(rmse) and np.isfinite(diff).all():
            # squares of differences near the largest float overflow: scale them first
            top = float(diff.max())
            rmse = top * float(np.sqrt(np.mean((diff / top) ** 2)))
        return {
            "heldout_error_pct": float(100 * rel.mean()),
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
