"""The Search's tables assembled from the kept candidates' nested errors: the budgets and their
front, each outer split's pick, the candidates and the references."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fitrules.engine.grammar import Candidate
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.jobs.search.result import Search
from fitrules.jobs.search.selection import _Nested, _pick_at_budget, _ratio, front_flags
from fitrules.jobs.search.staging import TOO_BIG, _Fitted


def _inner_median(inner: np.ndarray) -> float:
    """Median over outer splits of the median over inner splits (failed fits left out)."""
    per = [float(np.median(r[np.isfinite(r)])) for r in inner if np.isfinite(r).any()]
    return float(np.median(per)) if per else float("nan")


def _assemble(
    grid, grammar, fitted: _Fitted, masks: NestedMasks, refs, ref_scores, rule, n_generated
) -> Search:
    """The search's tables from the kept candidates' nested errors."""
    kept, dropped = fitted.kept, fitted.dropped
    e = _Nested.of(kept, fitted.results, masks)
    budgets = sorted(set(e.k.tolist()))
    rows, budget_rows = [], []
    picks_all = np.zeros(len(kept), int)
    outs_by_budget = []
    for b in budgets:
        b_rows, outs, picked, budget_row = _pick_at_budget(b, e, masks, rule, fitted)
        rows += b_rows
        outs_by_budget.append(outs)
        if b == budgets[-1]:
            for i in picked:
                if i >= 0:
                    picks_all[i] += 1
        budget_rows.append(budget_row)
    budget_df, testable = _budget_table(budget_rows, outs_by_budget, budgets, masks)
    choices = pd.DataFrame(rows)
    choices["form"] = pd.Series(
        [v if isinstance(v, str) else None for v in choices["form"]], dtype=object
    )
    cand_df = _candidate_table(kept, e, picks_all, choices, budgets)
    best = budget_df[budget_df["on_front"]]
    best_b = int(best["max_constants"].iloc[-1]) if len(best) else budgets[-1]
    at_best = choices[choices["budget"] == best_b]["outer_pct"].to_numpy(float)
    ref_df = _reference_table(refs, ref_scores, masks, at_best, best_b)
    reasons: dict[str, int] = {}
    for _, why in dropped:
        key = why.split(" as ")[0].split(" (")[0]
        reasons[key] = reasons.get(key, 0) + 1
    settings: dict = {
        "grammar": grammar.describe(),
        # issue 41: how many forms were too large for the fewest cells a nested split fits
        "too_few_cells": {"min_train": masks.min_train, "set_aside": reasons.get(TOO_BIG, 0)},
        "n_outer": masks.n_outer,
        "n_inner": masks.n_inner,
        "n_final": int(e.final.shape[1]),
        "best_budget": best_b,
        "front_testable": testable,
        "front_at_ceiling": _front_at_ceiling(budget_df, budgets, testable),
        "ceiling": _ceiling(grammar, budgets),
    }
    warnings = []
    if len(kept) and (picks_all == 0).all():
        warnings.append("no outer split could pick a form: every candidate failed there")
    return Search(
        grid.label,
        grammar,
        settings,
        cand_df,
        budget_df,
        choices,
        ref_df,
        reasons,
        pd.DataFrame(
            [(c.form.name, c.form.expression, why) for c, why in dropped],
            columns=["name", "expression", "reason"],
        ),
        n_generated,
        {c.form.name: c.form for c in kept},
        warnings=warnings,
    )


def _front_at_ceiling(budget_df: pd.DataFrame, budgets: list[int], testable: bool) -> bool:
    """Whether the front was still falling where the search stopped: its largest budget
    joined the front by beating a smaller one, so nothing says a larger one would not."""
    if not testable or len(budgets) < 2:
        return False
    on = budget_df["on_front"].to_numpy(bool)
    return bool(on[-1] and on[:-1].any())


def _ceiling(grammar, budgets: list[int]) -> dict:
    """What stopped the budgets: the grammar's limits and the largest budget it reached.

    Below ``max_constants`` the terms or the nonlinear constants ran out first, so those are
    the limits to raise."""
    top = int(budgets[-1]) if budgets else 0
    limits = ["max_constants"] if top >= grammar.max_constants else ["terms", "max_nonlinear"]
    return {
        "largest_budget": top,
        "max_constants": int(grammar.max_constants),
        "terms": int(grammar.terms),
        "max_nonlinear": int(grammar.max_nonlinear),
        "raise": limits,
    }


def _budget_table(
    budget_rows: list[dict], outs_by_budget: list, budgets: list[int], masks: NestedMasks
) -> tuple[pd.DataFrame, bool]:
    """One row per budget, with which are on the front; and whether the front was tested."""
    budget_df = pd.DataFrame(budget_rows)
    for col in ("most_picked", "final_choice"):  # None, not NaN, where nothing was picked
        budget_df[col] = pd.Series(
            [v if isinstance(v, str) else None for v in budget_df[col]], dtype=object
        )
    otr, ote = masks.sizes(masks.outer)
    # the front needs a standard error over outer splits: with one outer split it cannot be
    # tested, and the unrestricted budget (whose pick the inner splits alone made) is reported
    testable = masks.n_outer >= 2
    budget_df["on_front"] = (
        front_flags(np.array(outs_by_budget, float), otr, ote)
        if testable
        else [b == budgets[-1] for b in budgets]
    )
    return budget_df, testable


def _candidate_table(
    kept: list[Candidate], e: _Nested, picks_all: np.ndarray, choices: pd.DataFrame, budgets
) -> pd.DataFrame:
    """One row per kept candidate: its shape, how often it was picked, its outer errors."""
    outer = e.outer
    own = [float(np.median(r[np.isfinite(r)])) if np.isfinite(r).any() else np.nan for r in outer]
    cand_df = pd.DataFrame(
        dict(
            name=e.names,
            expression=[c.form.expression for c in kept],
            key=[c.key for c in kept],
            n_constants=e.k,
            n_nonlinear=[c.n_nonlinear for c in kept],
            n_terms=[c.n_terms for c in kept],
            picked=picks_all,
            outer_valid=np.isfinite(outer).sum(axis=1) if len(kept) else [],
            own_outer_median_pct=own,
        )
    )
    at_top = choices[choices["budget"] == budgets[-1]]
    when = at_top.groupby("form")["outer_pct"].median()
    cand_df["outer_median_when_picked_pct"] = [float(when.get(nm, np.nan)) for nm in e.names]
    return cand_df


def _reference_table(
    refs, ref_scores, masks: NestedMasks, at_best: np.ndarray, best_b: int
) -> pd.DataFrame:
    """One row per reference form: its outer and inner errors beside the search's."""
    from fitrules.engine.metrics import robust_summary

    n_out, n_in = masks.n_outer, masks.n_inner
    ref_rows = []
    for f, sc in zip(refs, ref_scores, strict=True):
        e = sc.error[masks.outer]
        both = np.isfinite(e) & np.isfinite(at_best)
        ref_rows.append(
            dict(
                form=f.name,
                expression=f.expression,
                n_constants=len(f.constants),
                outer_splits=int(np.isfinite(e).sum()),
                **robust_summary(e[np.isfinite(e)], "outer_", "_pct"),
                inner_median_pct=_inner_median(sc.error[masks.inner].reshape(n_out, n_in)),
                search_budget=best_b,
                search_lower=int((at_best[both] < e[both]).sum()),
                paired_splits=int(both.sum()),
                median_ratio=_median_ratio(at_best[both], e[both]),
            )
        )
    ref_df = pd.DataFrame(ref_rows)
    if len(ref_df):  # the same ratio without selection: what the protocol alone gives
        ref_df["outer_over_inner"] = [
            _ratio(a, b)
            for a, b in zip(ref_df["outer_median_pct"], ref_df["inner_median_pct"], strict=True)
        ]
    return ref_df


def _median_ratio(a: np.ndarray, b: np.ndarray) -> float:
    """Median over splits of a / b, where b > 0."""
    ok = b > 0
    return float(np.median(a[ok] / b[ok])) if ok.any() else float("nan")
