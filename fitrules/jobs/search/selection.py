"""The selection rules: the candidate each outer split (and all cells) picks from its inner
errors at a budget, and which budgets are on the front."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fitrules.engine.grammar import Candidate
from fitrules.jobs.options import SEARCH
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.jobs.search.scoring import Scored
from fitrules.jobs.search.staging import _Fitted


def select(
    inner: np.ndarray,
    n_constants: np.ndarray,
    eligible: np.ndarray,
    n_train: int,
    n_test: int,
    rule: str = SEARCH.rule,
) -> tuple[int, float]:
    """The index picked from ``inner`` (candidates x inner splits, percent, NaN = failed)
    among ``eligible`` candidates, and its median inner error; (-1, nan) if none can be."""
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(np.where(np.isfinite(inner), inner, np.inf))
    L = np.where(np.isnan(L), np.inf, L)
    score = np.median(L, axis=1)
    score = np.where(eligible, score, np.inf)
    if not np.isfinite(score).any():
        return -1, float("nan")
    best = int(np.argmin(score))
    if rule == "best":
        return best, float(np.exp(score[best]))
    both = np.isfinite(L) & np.isfinite(L[best])
    J = both.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(both, L - L[best], 0.0)
        mean = d.sum(axis=1) / J
        var = ((d - mean[:, None]) ** 2 * both).sum(axis=1) / (J - 1)
        se = np.sqrt(var * (1 / J + n_test / n_train))
    within = np.isfinite(score) & (J >= 2) & (mean <= np.nan_to_num(se, nan=0.0))
    within[best] = True
    pool = np.flatnonzero(within)
    order = np.lexsort((score[pool], n_constants[pool]))
    pick = int(pool[order[0]])
    return pick, float(np.exp(score[pick]))


def front_flags(outer: np.ndarray, n_train: int, n_test: int) -> list[bool]:
    """Which budgets are on the front, from their outer errors (budgets x outer splits, in
    increasing budget; NaN where a split picked nothing).

    The first budget with an outer error is on it; a larger budget joins only when its outer
    errors are lower than those of the last budget on the front by more than one standard
    error: the mean paired log ratio over the outer splits both have, with the variance
    corrected for the overlap of random splits (1/J + n_test/n_train, Nadeau and Bengio).
    """
    flags: list[bool] = []
    last = -1
    for b, row in enumerate(outer):
        if last < 0:
            flags.append(bool(np.isfinite(row).any()))
            last = b if flags[-1] else -1
            continue
        both = np.isfinite(row) & np.isfinite(outer[last]) & (row > 0) & (outer[last] > 0)
        d = np.log(row[both]) - np.log(outer[last][both])
        J = len(d)
        if J < 2:
            flags.append(False)
            continue
        se = math.sqrt(float(np.var(d, ddof=1)) * (1 / J + n_test / max(n_train, 1)))
        flags.append(bool(d.mean() + se < 0))
        if flags[-1]:
            last = b
    return flags


@dataclass(frozen=True)
class _Nested:
    """The kept candidates' errors by kind of nested row, and the sizes the rule reads."""

    outer: np.ndarray  # (C, outer splits)
    inner: np.ndarray  # (C, outer splits, inner splits)
    final: np.ndarray  # (C, final splits)
    whole_ok: np.ndarray  # (C,): the fit on all cells did not fail
    k: np.ndarray  # (C,): constants
    names: list[str]
    tr: np.ndarray  # (outer, inner): cells each inner split fits
    te: np.ndarray  # (outer, inner): cells each inner split holds out
    ftr: int  # cells each final split fits
    fte: int  # cells each final split holds out

    @classmethod
    def of(cls, kept: list[Candidate], results: list[Scored], masks: NestedMasks) -> _Nested:
        """Split each candidate's errors by kind of row."""
        n_out, n_in = masks.n_outer, masks.n_inner
        err = np.array([r.error for r in results])  # (C, rows)
        ftr, fte = masks.sizes(masks.final)
        return cls(
            err[:, masks.outer],
            err[:, masks.inner].reshape(len(kept), n_out, n_in),
            err[:, masks.final],
            np.array([r.valid[masks.whole] for r in results], bool),
            np.array([c.n_constants for c in kept]),
            [c.form.name for c in kept],
            masks.train[masks.inner].reshape(n_out, n_in, -1).sum(axis=2),
            masks.test[masks.inner].reshape(n_out, n_in, -1).sum(axis=2),
            ftr,
            fte,
        )


def _pick_at_budget(
    b: int, e: _Nested, masks: NestedMasks, rule: str, fitted: _Fitted
) -> tuple[list[dict], list[float], list[int], dict]:
    """At most ``b`` constants: each outer split's pick (its rows, outer errors and picks)
    and the budget's row, with the choice from all cells."""
    from fitrules.engine.metrics import robust_summary

    allowed = e.k <= b
    rows, outs, ins, picked = [], [], [], []
    for o in range(masks.n_outer):
        eligible = allowed & np.isfinite(e.outer[:, o])
        if fitted.allowed_outer is not None:  # a staged search: what this split's screen kept
            eligible &= fitted.allowed_outer[:, o]
        tr, te = int(e.tr[o].min()), int(e.te[o].min())
        i, score = select(e.inner[:, o, :], e.k, eligible, tr, te, rule)
        e_out = float(e.outer[i, o]) if i >= 0 else float("nan")
        rows.append(
            dict(
                budget=b,
                outer_split=masks.outer_labels[o],
                form=e.names[i] if i >= 0 else None,
                inner_pct=score,
                outer_pct=e_out,
            )
        )
        outs.append(e_out)
        ins.append(score)
        picked.append(i)
    # from all cells: a candidate whose fit on every cell fails cannot be picked
    final_ok = allowed & e.whole_ok
    if fitted.allowed_final is not None:
        final_ok &= fitted.allowed_final
    fi, fscore = select(e.final, e.k, final_ok, e.ftr, e.fte, rule)
    valid = np.isfinite(outs)
    o_arr = np.asarray(outs)[valid]
    i_arr = np.asarray(ins)[valid]
    counts = pd.Series([e.names[i] for i in picked if i >= 0]).value_counts()
    n_out = masks.n_outer
    row = dict(
        max_constants=b,
        n_candidates=int(allowed.sum()),
        outer_splits=int(valid.sum()),
        **robust_summary(o_arr, "outer_", "_pct"),
        inner_median_pct=float(np.median(i_arr)) if len(i_arr) else np.nan,
        optimism=_ratio(np.median(o_arr), np.median(i_arr)) if len(i_arr) else np.nan,
        most_picked=str(counts.index[0]) if len(counts) else None,
        most_picked_share=float(counts.iloc[0] / n_out) if len(counts) else 0.0,
        distinct_picks=int(len(counts)),
        final_choice=e.names[fi] if fi >= 0 else None,
        final_inner_pct=fscore,
        final_choice_share=float(sum(i == fi for i in picked) / n_out) if fi >= 0 else 0.0,
    )
    return rows, outs, picked, row


def _ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 (a grid with no noise: every error 0)."""
    return float(a / b) if b > 0 else float("nan")
