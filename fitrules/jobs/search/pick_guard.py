"""The wild-extrapolation guard on the search's pick, run as compare runs it, and the warning
that names it."""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit import Objective, fit_splits
from fitrules.engine.guard import GuardOptions, check_fits
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.jobs.search.result import Search


def guard_pick(
    s: Search, cells, masks: NestedMasks, objective: Objective, guard: GuardOptions, at: list
) -> dict:
    """The wild-extrapolation guard on the search's pick, as compare runs it: its fit on
    each outer training set checked at every cell of the grid, and its fit on all cells at
    the points ``at``. Reads no held-out value: only each fit's training cells and the
    design."""
    form = s.chosen
    out: dict = {"form": None, "expression": None, "outer": [], "outer_splits": 0, "at": []}
    if form is None:
        out["named"] = False
        return out
    out.update(form=form.name, expression=form.expression)
    X, y = cells.X, cells.y
    labels = [cells.label(i) for i in range(len(y))]
    train = masks.train[masks.outer]
    fits = fit_splits(form, X, y, train, objective)
    out["outer_splits"] = len(train)
    for label, g in zip(
        masks.outer_labels,
        check_fits(form, X, y, train, fits, objective, guard, labels),
        strict=True,
    ):
        if g.wild:
            out["outer"].append(f"outer split {label}: {'; '.join(g.reasons)}")
    if at:
        Xa = {v: np.concatenate([X[v], [p[v] for p in at]]) for v in form.bound_variables}
        # never read: the guard and the fit see only the training cells' values
        ya = np.concatenate([y, np.full(len(at), float(np.median(y)))])
        whole = np.concatenate([np.ones(len(y), bool), np.zeros(len(at), bool)])
        # flag words: labels in a report of the command line's --at points
        names = labels + ["--at " + ",".join(f"{k}={v:g}" for k, v in p.items()) for p in at]
        full = fit_splits(form, Xa, ya, whole[None, :], objective)
        g = check_fits(form, Xa, ya, whole[None, :], full, objective, guard, names)[0]
        if g.wild:
            out["at"] = list(g.reasons)
    out["named"] = bool(out["outer"] or out["at"])
    return out


def pick_guard_warning(g: dict) -> str:
    """One line: the pick the guard names, where, and what compare would say."""
    parts = []
    if g["outer"]:
        parts.append(
            f"{len(g['outer'])} of its {g['outer_splits']} fits on the outer training sets"
        )
    if g["at"]:
        # flag words: a report's words for the command line's --at points
        parts.append("its fit on all cells at the --at points (" + "; ".join(g["at"]) + ")")
    return (
        f"the pick {g['form']} ({g['expression']}) is named wild by the extrapolation guard "
        f"(from its training fits alone, as compare names fits): {' and '.join(parts)}; its "
        "predictions beyond the fitted cells run away from the values it was fitted on"
    )
