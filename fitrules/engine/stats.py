"""Statistics on paired samples: split-wise comparisons of forms, and paired-seed intervals.

scipy.stats is imported inside the functions that need it: importing it costs about a second,
more than a whole comparison of the default grid, and the split-wise tests need only the t
distribution, which scipy.special gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from fitrules.base.errors import SelectionError, param
from fitrules.base.limits import LEVEL, MAX_CI_RESAMPLES, check_count, check_seed

TIE_TOL = 1e-9  # held-out errors (in their metric's unit) closer than this count as a tie


def c4(n):
    """E[s] / sigma for the sample standard deviation of n normal values (NaN for n < 2).

    ``s / c4(n)`` is an unbiased estimate of sigma: c4(3) = 0.886, c4(11) = 0.975.
    """
    n = np.asarray(n, float)
    with np.errstate(invalid="ignore"):
        lg = special.gammaln(n / 2) - special.gammaln((n - 1) / 2)
        return np.where(n >= 2, np.sqrt(2 / np.maximum(n - 1, 1)) * np.exp(lg), np.nan)


def t_quantile(q: float, df: float) -> float:
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom (``stats.t.ppf``)."""
    return float(special.stdtrit(df, q))


LOG_FLOOR = 1e-12  # held-out errors (in their unit) are floored here before taking logs


def corrected_resampled_t(d: np.ndarray, n_train: int, n_test: int, level: float = LEVEL) -> dict:
    """The corrected resampled t test of Nadeau and Bengio (2003) on paired differences.

    Random splits of one grid share cells, so their differences are correlated and a test
    that treats them as independent (a t or Wilcoxon test over splits) becomes arbitrarily
    confident as the number of splits grows. The correction inflates the variance of the
    mean difference from ``var/J`` to ``var * (1/J + n_test/n_train)``: the second term does
    not shrink with J, so neither does the p-value. Degrees of freedom J - 1.

    Parameters
    ----------
    d : paired differences over J splits.
    n_train, n_test : cells fitted and held out per split.
    level : confidence level of the interval for the mean difference.

    Returns
    -------
    dict with ``n``, ``mean``, ``t``, ``df``, ``p`` (two-sided) and ``ci`` (low, high); the
    statistic, p and interval are None when fewer than two differences or no spread.

    Examples
    --------
    >>> r = corrected_resampled_t(np.array([0.1, 0.3, 0.2, 0.4]), n_train=7, n_test=13)
    >>> round(r["t"], 3)
    1.593
    """
    d = np.asarray(d, float)
    J = len(d)
    out: dict = {
        "n": J,
        "mean": float(d.mean()) if J else None,
        "t": None,
        "df": J - 1,
        "p": None,
        "ci": (None, None),
    }
    if J < 2 or n_train < 1:
        return out
    var = float(d.var(ddof=1))
    if not var > 0:
        return out
    se = math.sqrt(var * (1 / J + n_test / n_train))
    t = float(d.mean()) / se
    q = t_quantile(0.5 + level / 2, J - 1)
    out.update(
        t=t,
        p=float(2 * special.stdtr(J - 1, -abs(t))),
        ci=(float(d.mean()) - q * se, float(d.mean()) + q * se),
    )
    return out


def paired_verdict(
    err_a: np.ndarray,
    err_b: np.ndarray,
    n_train: int | None = None,
    n_test: int | None = None,
    level: float = LEVEL,
) -> dict:
    """Compare two forms' held-out errors on the same random splits.

    The test is the corrected resampled t (:func:`corrected_resampled_t`) on the log ratio
    of the two errors, ``log(err_a / err_b)``: a ratio is what "A predicts better than B"
    means on a relative metric, and the log keeps one runaway split from owning the mean
    and the variance (its calibration on null grids is printed by
    ``benchmarks/bench_calibration.py``). The interval is turned back into a ratio of
    errors (geometric mean over splits). The raw difference in points gets the same
    corrected interval. Counts of splits won, ties and the median difference are
    descriptive: splits are not independent samples.

    Without ``n_train`` and ``n_test`` (structured protocols) no test over splits is made.
    """
    a, b = np.asarray(err_a, float), np.asarray(err_b, float)
    d = a - b
    tie = np.abs(d) <= TIE_TOL
    out: dict = {
        "n": int(len(d)),
        "a_better": int(((d < 0) & ~tie).sum()),
        "b_better": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "median_diff": float(np.median(d)) if len(d) else None,
        "test": None,
        "t": None,
        "df": None,
        "p": None,
        "ratio": None,
        "ratio_ci": (None, None),
        "diff_ci": (None, None),
    }
    if n_train is None or n_test is None or len(d) < 2:
        return out
    with np.errstate(invalid="ignore"):
        logr = np.log(np.maximum(a, LOG_FLOOR)) - np.log(np.maximum(b, LOG_FLOOR))
    if not (np.isfinite(logr).all() and np.isfinite(d).all()):
        out["test"] = "none: a held-out error beyond floating-point range"
        return out
    r = corrected_resampled_t(logr, n_train, n_test, level)
    raw = corrected_resampled_t(d, n_train, n_test, level)
    out.update(
        test="corrected resampled t (Nadeau-Bengio) on log error ratios",
        t=r["t"],
        df=r["df"],
        p=r["p"],
        ratio=float(np.exp(r["mean"])),
        ratio_ci=tuple(None if v is None else float(np.exp(v)) for v in r["ci"]),
        diff_ci=raw["ci"],
    )
    return out


def cells_verdict(err_a: np.ndarray, err_b: np.ndarray, level: float = LEVEL) -> dict:
    """A paired test over held-out cells, for a verdict protocol that leaves one cell out.

    When every verdict split holds out a single cell, a grid of n cells has only n distinct
    splits, and 300 random ones repeat them: the corrected resampled t then treats repeats
    as new evidence (on a 12-cell grid, false positives 0.07 over 100 null grids). Here each
    cell is held out once and the test is the exact two-sided sign-flip of the mean log
    error ratio over the cells (the unit of evidence), with the interval for the ratio from
    inverting it. With fewer than 6 cells no sign pattern can reach p < 0.05, and the result
    says so instead.

    Parameters
    ----------
    err_a, err_b : (n,) each form's held-out error at each cell, from the fit on the others.
    level : level of the ratio's interval.

    Returns
    -------
    dict
        The keys of :func:`paired_verdict` (``p`` None when no test can reject).
    """
    a, b = np.asarray(err_a, float), np.asarray(err_b, float)
    out = paired_verdict(a, b)
    n = len(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        logr = np.log(np.maximum(a, LOG_FLOOR)) - np.log(np.maximum(b, LOG_FLOOR))
    if not np.isfinite(logr).all():
        out["test"] = "none: a held-out error beyond floating-point range"
        return out
    min_p = 2.0 / 2**n if n else 1.0
    if min_p > 1 - level:
        out["test"] = (
            f"none: {n} held-out cells (leave-one-cell-out); no sign-flip over so few can reject "
            f"(smallest attainable p = {min_p:.2g})"
        )
        return out
    p, exact = signflip_p(logr)
    m = float(logr.mean())
    alpha = 1 - level

    def bound(sign: float) -> float:
        # the furthest shift of the mean log ratio the sign-flip test does not reject
        inner, outer = m, m + sign * (np.ptp(logr) + abs(m) + 1e-12)
        for _ in range(60):
            mid = 0.5 * (inner + outer)
            if signflip_p(logr - mid)[0] > alpha:
                inner = mid
            else:
                outer = mid
        return inner

    out.update(
        test=f"{'exact ' if exact else ''}sign-flip over {n} held-out cells on log error "
        f"ratios (leave-one-cell-out: the verdict protocol has only {n} distinct splits)",
        p=float(p),
        ratio=float(np.exp(m)),
        ratio_ci=(float(np.exp(bound(-1.0))), float(np.exp(bound(1.0)))),
        df=None,
        t=None,
    )
    return out


def units_verdict(err_a: np.ndarray, err_b: np.ndarray, alpha: float = 0.05) -> dict:
    """A paired test over the independent units of a structured protocol (held-out groups).

    Exact two-sided sign-flip test of the mean difference over the units; with k units the
    smallest attainable p is 2 / 2**k, so fewer than six units can never reject at 0.05,
    and the result says so instead of printing a p that cannot be small.
    """
    a, b = np.asarray(err_a, float), np.asarray(err_b, float)
    d = a - b
    k = len(d)
    tie = np.abs(d) <= TIE_TOL
    out: dict = {
        "n": int(k),
        "a_better": int(((d < 0) & ~tie).sum()),
        "b_better": int(((d > 0) & ~tie).sum()),
        "ties": int(tie.sum()),
        "median_diff": float(np.median(d)) if k else None,
        "test": None,
        "p": None,
        "min_p": (2.0 / 2**k) if k else None,
        "can_reject": bool(k and 2.0 / 2**k <= alpha),
    }
    if out["can_reject"] and np.any(~tie):
        out["test"] = f"exact sign-flip over {k} held-out groups"
        out["p"] = signflip_p(d)[0]
    return out


def holm(ps: list[float | None]) -> list[float | None]:
    """Holm-adjusted p-values; None stays None.

    The k-th smallest of m p-values is multiplied by m - k + 1, made non-decreasing and
    capped at 1: the arithmetic of statsmodels' ``multipletests(method="holm")``, which a
    test checks this against. It is not called here because it runs ``gc.collect()`` on
    every call (about 0.1 s, more in a notebook with a large heap). The family is the
    p-values given: pass only the comparisons the question is about.
    """
    ok = [i for i, p in enumerate(ps) if p is not None and np.isfinite(p)]
    out: list[float | None] = [None] * len(ps)
    if ok:
        p = np.array([ps[i] for i in ok], float)
        order = np.argsort(p, kind="stable")
        adj = np.minimum(np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)), 1.0)
        for i, a in zip(np.array(ok)[order], adj, strict=True):
            out[int(i)] = float(a)
    return out


# ------------------------------------------------------------------ seeds as shared effects
SEED_EFFECT_ALPHA = 0.01  # a per-seed effect is reported when its F test is below this
# runs x (cells + seeds) of the dense two-way design (8 bytes each, plus an SVD of it):
# above this the per-seed effect is not estimated (compare and validate call it on every
# grid; 4e6 is about 3,000 cells of 3 runs)
ANOVA_MAX_ELEMENTS = 4_000_000


def _crossed_anova(cell: np.ndarray, seed: np.ndarray, y: np.ndarray) -> dict | None:
    """Cells fixed, seeds random, no interaction: y = mu_cell + u_seed + e.

    Henderson's method III (the fitting-constants sums of squares): ``ms_e`` estimates the
    per-run variance with ``df_e`` degrees of freedom; ``ms_seed`` is the seed sum of squares
    adjusted for cells over ``df_seed``, whose expectation is ``var_e + q * var_u``. None
    when no seed appears in two cells (seed and run noise cannot be told apart).
    """
    ci = np.unique(cell, return_inverse=True)[1]
    si = np.unique(seed, return_inverse=True)[1]
    n, C, S = len(y), int(ci.max()) + 1, int(si.max()) + 1
    if n * (C + S) > ANOVA_MAX_ELEMENTS:
        return None  # the dense design would not fit in memory: no estimate, say nothing
    if len(np.unique(ci * S + si)) == S:  # as many (cell, seed) pairs as seeds
        return None  # no seed id in two cells: nothing to estimate (and no SVD to pay for)
    Xc = np.zeros((n, C))
    Xc[np.arange(n), ci] = 1
    Zs = np.zeros((n, S))
    Zs[np.arange(n), si] = 1
    full = np.hstack([Xc, Zs])
    rank = int(np.linalg.matrix_rank(full))
    df_seed, df_e = rank - C, n - rank
    if df_seed < 1 or df_e < 1:
        return None
    counts = Xc.sum(axis=0)
    rss_c = float(((y - (Xc.T @ y / counts)[ci]) ** 2).sum())
    fitted = full @ np.linalg.lstsq(full, y, rcond=None)[0]
    rss_f = float(((y - fitted) ** 2).sum())
    ncs = Xc.T @ Zs  # runs per (cell, seed)
    trace = float(n - ((ncs**2).sum(axis=1) / counts).sum())
    return {
        "ms_seed": max(rss_c - rss_f, 0.0) / df_seed,
        "df_seed": df_seed,
        "ms_e": rss_f / df_e,
        "df_e": df_e,
        "q": trace / df_seed,
        "cell_index": ci,
        "seed_index": si,
        "ncs": ncs,
        "counts": counts,
        "seeds": np.unique(seed),
    }


def seed_effect(runs: pd.DataFrame, cells: list[str], seed_col: str, metric: str) -> dict | None:
    """Is there a per-seed effect shared across cells? Two-way ANOVA, cells x seeds.

    Runs with the same seed id often share more than their id (data order, initialisation),
    so a seed can sit above or below its cells' means everywhere. That matters wherever
    runs at different cells share seed ids: their errors are correlated, and a test that
    treats them as independent is too confident (``fitrules score`` accounts for it).

    Returns
    -------
    dict or None
        ``F``, ``df``, ``p``, ``sd_shared`` (the seed effect's standard deviation),
        ``sd_run`` (per-run noise beyond it), ``seeds`` and the seed furthest from its cells'
        means (``extreme_seed``, ``extreme_offset``), ``shown`` (p below 0.01); None when no
        seed id appears in two cells or there are too few runs.
    """
    if not cells or seed_col not in runs or len(runs) < 4:
        return None
    y = runs[metric].to_numpy(float)
    # one integer per cell, vectorised (a per-row string join cost 0.08 ms a run)
    key = runs.groupby(cells, dropna=False, sort=False).ngroup().to_numpy()
    a = _crossed_anova(key, runs[seed_col].astype(str).to_numpy(), y)
    if a is None or not a["ms_e"] > 0:
        return None
    F = a["ms_seed"] / a["ms_e"]
    p = float(special.fdtrc(a["df_seed"], a["df_e"], F))  # F's survival function
    var_u = max((a["ms_seed"] - a["ms_e"]) / a["q"], 0.0)
    resid = y - (np.bincount(a["cell_index"], y) / a["counts"])[a["cell_index"]]
    offset = np.bincount(a["seed_index"], resid) / np.bincount(a["seed_index"])
    j = int(np.argmax(np.abs(offset)))
    return {
        "F": float(F),
        "df": [int(a["df_seed"]), int(a["df_e"])],
        "p": p,
        "sd_shared": float(math.sqrt(var_u)),
        "sd_run": float(math.sqrt(a["ms_e"])),
        "seeds": len(a["seeds"]),
        "extreme_seed": str(a["seeds"][j]),
        "extreme_offset": float(offset[j]),
        "shown": bool(p < SEED_EFFECT_ALPHA),
    }


def grid_seed_effect(grid, by: Sequence[str] | None = None) -> dict | None:
    """:func:`seed_effect` over ``grid``'s cells (``by``, default its :attr:`cells_by`), from
    its runs with a metric."""
    by = list(grid.cells_by if by is None else by)
    if grid.seed is None or not by or not len(grid.runs):
        return None
    return seed_effect(grid.runs.dropna(subset=[grid.metric]), by, grid.seed, grid.metric)


def contrast_test(
    cell: np.ndarray,
    seed: np.ndarray | None,
    y: np.ndarray,
    weights: dict,
    offset: float = 0.0,
    level: float = LEVEL,
) -> dict:
    """Test ``sum_c w_c * mean_c(y) + offset = 0`` with cells and seeds as the units.

    ``mean_c(y)`` is the mean of the runs at cell c. Runs at different cells that share a
    seed id share that seed's effect, so the contrast's variance has a part from the seeds,
    ``var_u * sum_s (sum_c w_c n_cs / n_c)**2``, that more cells do not shrink, and a part
    from the runs, ``var_e * sum_c w_c**2 / n_c``. Both come from the two-way ANOVA of
    :func:`_crossed_anova`, combined by Banerjee's bound (:func:`_banerjee`). Without shared
    seed ids the runs are independent given their cells and the within-cell variance is used.

    Returns
    -------
    dict with ``estimate``, ``se``, ``df``, ``t``, ``p``, ``ci``, ``units`` (how the variance
    was estimated); ``p`` is None when no variance can be estimated.
    """

    cell = np.asarray(cell)
    labels, ci = np.unique(cell, return_inverse=True)
    counts = np.bincount(ci).astype(float)
    means = np.bincount(ci, y) / counts
    w = np.array([float(weights[c]) for c in labels])
    est = float(w @ means + offset)
    out: dict = {"estimate": est, "se": None, "df": None, "t": None, "p": None,
                 "ci": (None, None), "units": ""}  # fmt: skip
    a = _crossed_anova(cell, np.asarray(seed), y) if seed is not None else None
    parts: list[tuple[float, float]]
    if a is not None:
        per_seed = (w / counts) @ a["ncs"]  # weight each seed carries through the cell means
        cu, ce = float((per_seed**2).sum()), float((w**2 / counts).sum())
        alpha, beta = cu / a["q"], max(ce - cu / a["q"], 0.0)
        parts = [(alpha * a["ms_seed"], float(a["df_seed"])), (beta * a["ms_e"], float(a["df_e"]))]
        var = parts[0][0] + parts[1][0]
        out["units"] = (
            f"cells and {len(a['seeds'])} seed ids shared across them (two-way ANOVA; "
            "Banerjee's bound: each part's t quantile on its own degrees of freedom)"
        )
    else:
        df = float(len(y) - len(labels))
        if df < 1:
            out["units"] = "no test: no cell has two runs, so run noise cannot be estimated"
            return out
        resid = y - means[ci]
        var = float((resid**2).sum() / df) * float((w**2 / counts).sum())
        parts = [(var, df)]
        out["units"] = "cells (no seed id shared across cells: runs independent given cells)"
    if not var > 0:
        out["units"] = "no test: the runs show no spread"
        return out
    se = math.sqrt(var)
    p, df, half = _banerjee(est, parts, level)
    out.update(se=se, df=df, t=est / se, p=p, ci=(est - half, est + half))
    return out


def _banerjee(est: float, parts: list[tuple[float, float]], level: float):
    """p, effective degrees of freedom and half-width of a test of ``est`` whose variance is
    a sum of independent estimated parts ``(variance, degrees of freedom)``.

    The bound rejects where ``|est| > sqrt(sum t_k(alpha)**2 v_k)``, each part with the t
    quantile of its own degrees of freedom (Banerjee, 1960): conservative whatever the true
    ratio of the parts, where Satterthwaite's pooled degrees of freedom are too confident
    when a part rests on 1 or 2 (score with 10 cells x 3 shared seed ids and offsets of mixed
    sign: false positives 0.071 over 1,000 draws). One part: the t test itself. The
    effective degrees of freedom are those whose t quantile gives the same half-width.
    """
    from scipy import optimize
    from scipy import stats as sst

    parts = [(v, max(d, 1.0)) for v, d in parts if v > 0]
    var = sum(v for v, _ in parts)

    def half(alpha: float) -> float:
        return math.sqrt(sum(float(sst.t.isf(alpha / 2, d)) ** 2 * v for v, d in parts))

    h = half(1 - level)
    if len(parts) == 1:
        df = parts[0][1]
        return float(2 * sst.t.sf(abs(est) / math.sqrt(var), df)), float(df), h
    z = abs(est)
    lo = 1e-12  # p below this is reported as this
    if half(lo) <= z:
        p = lo
    elif z == 0:
        p = 1.0
    else:
        p = float(optimize.brentq(lambda a: half(a) - z, lo, 1.0, xtol=1e-14, rtol=1e-10))
    # the t degrees of freedom with the same quantile at this level
    q = h / math.sqrt(var)
    lo_df, hi_df = min(d for _, d in parts), max(d for _, d in parts)
    if float(sst.t.isf((1 - level) / 2, hi_df)) >= q:
        df = hi_df
    elif float(sst.t.isf((1 - level) / 2, lo_df)) <= q:
        df = lo_df
    else:
        df = float(
            optimize.brentq(lambda d: float(sst.t.isf((1 - level) / 2, d)) - q, lo_df, hi_df)
        )
    return p, float(df), h


# ------------------------------------------------------------------ paired-seed intervals
EXACT_SIGNFLIP_MAX_N = 20  # 2**20 sign patterns: exact enumeration stays cheap
# Below this many pairs the BCa interval is not shown: on normal differences its simulated
# coverage at a nominal 0.95 was 0.73 at 3 pairs, 0.80 at 5, 0.92 at 11 (the t interval's:
# 0.95, 0.93, 0.96; benchmarks/bench_calibration.py prints it).
BCA_MIN_PAIRS = 20


def parse_selection(text: str, what: str) -> dict[str, str]:
    """``"algo=diloco,H=16"`` -> {"algo": "diloco", "H": "16"} (values compared later)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SelectionError(f"{what} {text!r}: {part!r} is not of the form COLUMN=VALUE")
        out[key.strip()] = value.strip()
    if not out:
        raise SelectionError(f"{what}: empty selection; give COLUMN=VALUE pairs")
    return out


def label(sel: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sel.items())


def check_ci_options(level: float, n_resamples: int, seed: int) -> None:
    """Refuse paired-interval settings outside what is allowed, before any work."""
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise SelectionError(f"{param('level')} {level}: must be in (0, 1), e.g. 0.95")
    check_count(
        n_resamples, param("resamples"), 1000, MAX_CI_RESAMPLES, "at least 1000 for a BCa interval"
    )
    check_seed(seed, "--seed")


# elements (resamples x pairs) drawn at once by the BCa bootstrap; bounds its memory
BOOTSTRAP_BATCH_ELEMENTS = 2**24


def _match(runs: pd.DataFrame, sel: dict[str, str], what: str) -> pd.Series:
    mask = pd.Series(True, index=runs.index)
    for col, raw in sel.items():
        if col not in runs.columns:
            raise SelectionError(
                f"{what} {label(sel)!r}: the grid has no column {col!r}; "
                f"columns: {', '.join(map(str, runs.columns))}"
            )
        values = runs[col]
        if values.dtype.kind in "biuf" and values.dtype != bool:
            try:
                target = float(raw)
            except ValueError:
                raise SelectionError(
                    f"{what}: {col}={raw!r} is not a number, but {col!r} is numeric"
                ) from None
            hit = np.isclose(values.astype(float), target, rtol=1e-9, atol=0)
        else:
            hit = values.astype(str).str.lower() == raw.lower()
        if not hit.any():
            levels = ", ".join(sorted(map(str, values.unique())))
            raise SelectionError(f"{what}: no runs with {col}={raw} (levels of {col}: {levels})")
        mask &= hit
    if not mask.any():
        raise SelectionError(f"{what} {label(sel)!r}: no run matches all of it")
    return mask


def _by_seed(runs, mask, seed_col, metric, sel, what) -> pd.Series:
    side = runs.loc[mask, [seed_col, metric]]
    dup = side[seed_col].duplicated(keep=False)
    if dup.any():
        seed = side.loc[dup, seed_col].iloc[0]
        raise SelectionError(
            f"{what} {label(sel)!r} has {int((side[seed_col] == seed).sum())} "
            f"runs for seed {seed}; narrow it with more COLUMN=VALUE pairs"
        )
    return side.set_index(seed_col)[metric]


def signflip_p(d: np.ndarray, seed: int = 0) -> tuple[float, bool]:
    """Two-sided sign-flip permutation p of the mean; exact up to 20 pairs."""
    n = len(d)
    obs = abs(d.mean())
    if n <= EXACT_SIGNFLIP_MAX_N:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= obs - 1e-12 * max(1.0, obs))), True
    from scipy import stats

    res = stats.permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        n_resamples=100_000,
        alternative="two-sided",
        random_state=np.random.default_rng(seed),
    )
    return float(res.pvalue), False


@dataclass
class PairedCI:
    """Paired-seed comparison of one treatment against the baseline."""

    treatment: str
    baseline: str
    n: int
    seeds: list
    diffs: list[float]
    mean_diff: float
    pct_of_baseline: float
    sd_diff: float
    level: float
    t_interval: tuple[float, float]
    t_p: float
    bootstrap_interval: tuple[float | None, float | None]
    wilcoxon_p: float | None
    signflip_p: float | None
    signflip_exact: bool
    dropped_seeds: dict[str, list] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    holm_t_p: float | None = None
    holm_wilcoxon_p: float | None = None
    units: str = ""  # the metric's unit, empty when unknown
    tuned: str = ""  # how the arms were tuned, if they were
    metric: str = ""

    @property
    def _unit(self) -> str:
        return f"{self.units} " if self.units else ""

    def sentence(self, lower_is_better: bool = True) -> str:
        core = self._core(lower_is_better)
        return f"{core}; {self.tuned}" if self.tuned else core

    def _core(self, lower_is_better: bool) -> str:
        lo, hi = self.t_interval
        pct = round(100 * self.level)
        interval = f"{pct}% interval {lo:+.4g} to {hi:+.4g}"
        over = f"over {self.n} paired seeds"
        if lo <= 0 <= hi:
            return (
                f"{self.treatment} vs {self.baseline}: mean difference {self.mean_diff:+.4g} "
                f"{self._unit}{over} ({interval}): not distinguishable from zero"
            )
        better = (self.mean_diff < 0) == lower_is_better
        verb = "beat" if better else "was worse than"
        return (
            f"{self.treatment} {verb} {self.baseline} by {abs(self.mean_diff):.4g} "
            f"{self._unit}{over} ({self.pct_of_baseline:+.2f}% of the baseline; {interval})"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _shapiro_p(d: np.ndarray) -> float | None:
    """Shapiro-Wilk p of the differences, or None when they are too close to each other for
    the test (scipy then warns that the data 'has range zero')."""
    import warnings as _warnings

    from scipy import stats

    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        p = float(stats.shapiro(d).pvalue)
    return None if caught or not np.isfinite(p) else p


def paired_ci(
    runs: pd.DataFrame,
    metric: str,
    seed_col: str | None,
    baseline: dict[str, str],
    treatments: list[dict[str, str]],
    level: float = LEVEL,
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: str | None = None,
) -> list[PairedCI]:
    """Pair runs by seed and estimate treatment - baseline for each treatment.

    Raises
    ------
    SelectionError
        For a column the grid lacks, a value not present, several runs for one seed on one
        side, a treatment equal to the baseline, or no seed common to both sides.
    """
    from scipy import stats

    if seed_col is None:
        raise SelectionError("the grid has no 'seed' column: runs cannot be paired by seed")
    check_ci_options(level, n_resamples, seed)
    base_mask = _match(runs, baseline, param("baseline"))
    base = _by_seed(runs, base_mask, seed_col, metric, baseline, "baseline")
    out = []
    for sel in treatments:
        common, dropped, d = _pair_by_seed(runs, sel, baseline, base, base_mask, seed_col, metric)
        n = len(d)
        mean = float(d.mean())
        sd = float(d.std(ddof=1)) if n > 1 else float("nan")
        warnings = []
        if n < 5:
            warnings.append(f"only {n} pairs: intervals rest on very little data")
        t_int, t_p = _t_interval(d, mean, sd, level)
        boot = _bca_interval(d, sd, level, n_resamples, seed, warnings)
        w_p = None
        if np.any(d != 0):
            w_p = float(stats.wilcoxon(d, method="auto").pvalue)
        sf_p, exact = signflip_p(d, seed) if n >= 1 else (None, False)
        warnings += _normality_warnings(d, sd)
        base_mean = float(base.loc[common].mean())
        if base_mean == 0:  # e.g. losses rounded to 0 in a float16 table
            raise SelectionError(
                f"baseline {label(baseline)}: its runs average 0, so a difference cannot be "
                "given relative to it"
            )
        out.append(
            PairedCI(
                label(sel),
                label(baseline),
                n,
                [_plain(s) for s in common],
                d.tolist(),
                mean,
                100 * mean / base_mean,
                sd,
                level,
                (float(t_int[0]), float(t_int[1])),
                t_p,
                boot,
                w_p,
                sf_p,
                exact,
                {k: [_plain(s) for s in v] for k, v in dropped.items()},
                warnings,
                units=unit or "",
                metric=metric,
            )
        )
    if len(out) > 1:
        for key, attr in (("t_p", "holm_t_p"), ("wilcoxon_p", "holm_wilcoxon_p")):
            for r, p in zip(out, holm([getattr(r, key) for r in out]), strict=True):
                setattr(r, attr, p)
    return out


def _pair_by_seed(
    runs: pd.DataFrame,
    sel: dict[str, str],
    baseline: dict[str, str],
    base: pd.Series,
    base_mask: pd.Series,
    seed_col: str,
    metric: str,
) -> tuple[list, dict[str, list], np.ndarray]:
    """The seeds both sides ran, those only one did, and treatment - baseline at each."""
    mask = _match(runs, sel, param("treatment"))
    if (mask == base_mask).all():
        raise SelectionError(
            f"treatment {label(sel)!r} selects the same runs as the baseline {label(baseline)!r}"
        )
    treat = _by_seed(runs, mask, seed_col, metric, sel, "treatment")
    common = sorted(set(base.index) & set(treat.index))
    if len(common) < 2:
        raise SelectionError(
            f"treatment {label(sel)!r} and baseline {label(baseline)!r} share "
            f"{'no seed' if not common else f'only seed {_plain(common[0])}'}; a paired "
            "interval needs at least 2 shared seeds"
        )
    dropped = {
        "baseline_only": sorted(set(base.index) - set(common)),
        "treatment_only": sorted(set(treat.index) - set(common)),
    }
    d = treat.loc[common].to_numpy(float) - base.loc[common].to_numpy(float)
    return common, dropped, d


def _t_interval(
    d: np.ndarray, mean: float, sd: float, level: float
) -> tuple[tuple[float, float], float]:
    """The t interval of the mean difference and the one-sample t test's p."""
    from scipy import stats

    n = len(d)
    if n > 1 and sd > 0:
        tq = stats.t.ppf(0.5 + level / 2, n - 1)
        half = tq * sd / math.sqrt(n)
        # the one-sample t test, written out: scipy's warns about precision when the
        # differences are nearly identical, where t is simply very large
        t_stat = mean / (sd / math.sqrt(n))
        return (mean - half, mean + half), float(2 * stats.t.sf(abs(t_stat), n - 1))
    return (mean, mean) if n > 1 else (float("nan"), float("nan")), float("nan")


def _bca_interval(
    d: np.ndarray, sd: float, level: float, n_resamples: int, seed: int, warnings: list[str]
) -> tuple[float | None, float | None]:
    """The BCa bootstrap interval of the mean difference; none, with a warning, on too few
    pairs."""
    from scipy import stats

    n = len(d)
    if n < BCA_MIN_PAIRS:
        warnings.append(
            f"no BCa bootstrap interval: it needs at least {BCA_MIN_PAIRS} pairs ({n} "
            "here) and undercovers below; the t interval and the exact sign-flip test "
            "are shown"
        )
        return (None, None)
    if not sd > 0:
        return (None, None)
    big = n_resamples * n > BOOTSTRAP_BATCH_ELEMENTS
    res = stats.bootstrap(
        (d,),
        np.mean,
        confidence_level=level,
        n_resamples=n_resamples,
        method="BCa",
        random_state=np.random.default_rng(seed),
        batch=max(1, BOOTSTRAP_BATCH_ELEMENTS // n) if big else None,
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def _normality_warnings(d: np.ndarray, sd: float) -> list[str]:
    """A warning when the differences look non-normal (Shapiro-Wilk), for the t interval."""
    n = len(d)
    sw = _shapiro_p(d) if n >= 3 and sd > 0 else None
    if sw is None or sw >= 0.05:
        return []
    return [
        f"differences look non-normal (Shapiro-Wilk p = {sw:.2g}): read the t "
        "interval with care; the sign-flip p makes no normality assumption"
        + ("; prefer the bootstrap interval" if n >= BCA_MIN_PAIRS else "")
    ]


def sweep_treatments(
    runs: pd.DataFrame, baseline: dict[str, str], column: str
) -> list[dict[str, str]]:
    """Every level of ``column`` except the baseline's, other selected factors fixed."""
    if column not in runs.columns:
        raise SelectionError(f"{param('sweep')} {column}: the grid has no column {column!r}")
    base_rows = (
        runs[_match(runs, {k: v for k, v in baseline.items() if k != column}, param("baseline"))]
        if len(baseline) > 1 or column not in baseline
        else runs
    )
    levels = sorted(base_rows[column].unique().tolist(), key=lambda v: (str(type(v)), v))
    out = []
    for v in levels:
        sel = {**baseline, column: _fmt_level(v)}
        if column in baseline and _same_level(baseline[column], v):
            continue
        out.append(sel)
    if not out:
        raise SelectionError(f"{param('sweep')} {column}: no level other than the baseline's")
    return out


def _fmt_level(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _same_level(raw: str, v) -> bool:
    try:
        return math.isclose(float(raw), float(v), rel_tol=1e-9)
    except (TypeError, ValueError):
        return str(v).lower() == raw.lower()


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v
