"""Statistics on paired samples: split-wise comparisons of forms, and paired-seed intervals."""

from __future__ import annotations

import numpy as np
from scipy import stats

TIE_TOL = 1e-9  # held-out errors (in percent) closer than this count as a tie


def paired_verdict(err_a: np.ndarray, err_b: np.ndarray) -> dict:
    """Compare two forms' held-out errors on the same splits.

    Returns counts of splits each won (lower error), ties, the median of a - b, and the
    two-sided Wilcoxon signed-rank p-value of the differences (ties dropped; None when no
    split differs).
    """
    a, b = np.asarray(err_a, float), np.asarray(err_b, float)
    d = a - b
    tie = np.abs(d) <= TIE_TOL
    out = {
        "n": int(len(d)),
        "a_better": int(((d < 0) & ~tie).sum()),
        "b_better": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "median_diff_pct": float(np.median(d)) if len(d) else None,
        "mean_diff_pct": float(np.mean(d)) if len(d) else None,
        "wilcoxon_p": None,
    }
    nz = d[~tie]
    if len(nz) >= 1:
        out["wilcoxon_p"] = float(stats.wilcoxon(nz, zero_method="wilcox",
                                                 alternative="two-sided").pvalue)
    return out
