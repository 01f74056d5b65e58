"""A growing budget: whether the search goes on to forms of one more constant, and the steps'
candidates merged as one search's."""

from __future__ import annotations

import numpy as np

from fitrules.base.errors import LimitError
from fitrules.engine.grammar import Grammar
from fitrules.jobs.search.inputs import _SearchSpec
from fitrules.jobs.search.plan import Plan, _shrink_options, check_plan
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.jobs.search.selection import _Nested, _pick_at_budget, front_flags
from fitrules.jobs.search.staging import _Fitted


def _step_row(k: int, proposed: int, part: _Fitted) -> dict:
    return dict(max_constants=k, proposed=proposed, kept=len(part.kept))


def _growth_stop(
    fitted: _Fitted, masks: NestedMasks, rule: str, budget: int, grammar: Grammar
) -> str | None:
    """Why the budget stops growing at ``budget`` constants, or None to go on: it goes on
    while its largest budget beat the one before it on the front by more than a standard
    error over the outer splits (:func:`front_flags`; a first step of one budget has none to
    beat), to ``grammar.max_constants``."""
    ceiling = f"the ceiling, max_constants {grammar.max_constants}"
    if masks.n_outer < 2:
        if budget >= grammar.max_constants:
            return ceiling
        return (
            f"with {masks.n_outer} outer split the front cannot be tested, so the budget stays "
            f"at first_constants {budget} (raise it to search more constants)"
        )
    e = _Nested.of(fitted.kept, fitted.results, masks)
    if not len(e.k) or int(e.k.max()) < budget:
        return f"no candidate of {budget} constants was kept to fit"
    # a reference of more constants than the step reached waits for its budget
    budgets = sorted(b for b in set(e.k.tolist()) if b <= budget)
    outs = [_pick_at_budget(b, e, masks, rule, fitted)[1] for b in budgets]
    otr, ote = masks.sizes(masks.outer)
    on = front_flags(np.array(outs, float), otr, ote)
    if on[-1] and (len(on) == 1 or any(on[:-1])):  # one budget: nothing yet to beat
        return ceiling if budget >= grammar.max_constants else None
    before = [b for b, f in zip(budgets[:-1], on[:-1], strict=True) if f]
    than = f"{before[-1]} constants" if before else "a smaller budget"
    return (
        f"{budget} constants did not beat {than} by more than a standard error over the "
        "outer splits"
    )


def _step_refusal(
    plan: Plan, k: int, spec: _SearchSpec, variables, jobs: int, yes: bool, scheduler
) -> str | None:
    """Why the next budget, ``k`` constants, is not searched (None: it is): the grammar has
    no such form, none fits on the fewest cells a nested mask fits, or it is beyond the
    limits a search is held to (:func:`check_plan`)."""
    g = spec.grammar
    if not plan.n_generated:
        return (
            f"the grammar has no form of {k} constants (terms {g.terms}, max_nonlinear "
            f"{g.max_nonlinear})"
        )
    if not plan.n_candidates:
        return (
            f"forms of {k} constants need more cells than the {plan.min_train} the smallest "
            "nested split fits"
        )
    shrink = _shrink_options(g, spec.outer, spec.inner_splits, variables)
    try:
        check_plan(plan, jobs, yes, shrink, scheduler)
    except LimitError as err:
        return f"the next budget, {k} constants, is beyond the limits: {err}"
    return None


def _merged(a: _Fitted, b: _Fitted, n_outer: int) -> _Fitted:
    """Two steps' candidates as one search's: a step searched in full lets every outer
    split and the final choice pick its candidates."""
    if a.allowed_outer is None and b.allowed_outer is None:
        outer = final = None
    else:

        def rows(f: _Fitted):
            if f.allowed_outer is not None:
                return f.allowed_outer, f.allowed_final
            return np.ones((len(f.kept), n_outer), bool), np.ones(len(f.kept), bool)

        (oa, fa), (ob, fb) = rows(a), rows(b)
        outer, final = np.concatenate([oa, ob]), np.concatenate([fa, fb])
    note = None
    if a.screen_note or b.screen_note:
        notes = [n for n in (a.screen_note, b.screen_note) if n]
        note = dict(notes[0])
        note["screened"] = sum(n["screened"] for n in notes)
        note["validated"] = sum(n["validated"] for n in notes)
    return _Fitted(
        a.kept + b.kept, a.results + b.results, a.dropped + b.dropped, outer, final, note,
        a.counted + b.counted, (a.rows[0] + b.rows[0], a.rows[1] + b.rows[1]),
    )  # fmt: skip
