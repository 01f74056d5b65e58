"""Abstention (issue 62): when the runs cannot rank the forms the question needs, the search
returns no pick, says why, and fits the user's own forms on all runs instead.

The search ranks forms by what its splits score. Two things it cannot see, each read from the
design (which cells each split fits and scores) and the grammar alone, never from a held-out
value:

- **A variable no split checks.** A constant tied to a variable is *identified* by a split
  whose fitted cells hold two or more of its values, and *checked* when that split also scores
  a cell at a value of it that at most half of its fitted cells share (a value most fitted
  cells share only tests the constants of the other variables: a cell at it is predicted
  whatever the variable's constants are). A variable that no outer split (which measures the
  procedure) or no final split (which makes the pick from all cells) both identifies and
  checks is one the ranking cannot inform: every candidate's dependence on it, none included,
  is fitted and never scored. On the over-training grid (5 runs, 4 at M = 20 and one at
  M = 320, asked along N) every scored cell is at M = 20: the M = 320 run is fitted whenever
  it is not held out, and alone then, so any form with a constant of M fits it exactly.
- **A size set by the split.** A form with as many constants as the fewest cells a nested
  split fits cannot be ranked and is set aside. When the pick's budget is the largest that
  can be ranked, the grammar holds larger forms, and no outer error chose that size (one
  outer split, so the front cannot be tested, or no smaller budget to compare it with), the
  pick's size is set by how few cells the splits fit, not by the runs: it is not a law. (A
  size that beat smaller ones on the outer errors was chosen by them, as far as it could go;
  the output then says the front was still falling where the budget stopped.)

Either makes the search abstain: :attr:`Search.chosen` is None, the budget table still shows
what the procedure did. Forms the user gave (``--form``, ``references``) are then fitted on
all cells and recommended, with their outer errors where those can be computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fitrules.engine.fit import Objective, fit
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.jobs.search.result import Search
from fitrules.model.compiled import predict
from fitrules.model.forms import Form


def checks(x: np.ndarray, train: np.ndarray, test: np.ndarray) -> bool:
    """Whether one split checks a variable of values ``x`` (cells,): its fitted cells (mask
    ``train``) hold two or more values of it, and it scores (mask ``test``) a cell at a value
    that at most half of its fitted cells share."""
    fitted = x[train]
    if len(np.unique(fitted)) < 2:
        return False
    scored = x[test]
    share = (fitted[None, :] == scored[:, None]).sum(axis=1)
    return bool((2 * share <= len(fitted)).any())


def unchecked_variables(variables: Sequence[str], X: dict, masks: NestedMasks) -> dict[str, str]:
    """Each variable that no outer split, or no final split, checks (:func:`checks`), with its
    values over the cells in words; the others are left out."""
    out = {}
    for v in variables:
        x = np.asarray(X[v])
        for rows, what in ((masks.outer, "outer"), (masks.final, "final")):
            train, test = masks.train[rows], masks.test[rows]
            if not any(checks(x, tr, te) for tr, te in zip(train, test, strict=True)):
                out[v] = f"no {what} split checks it; {_values_text(v, x)}"
                break
    return out


def _values_text(v: str, x: np.ndarray) -> str:
    """A variable's values over the cells and how many cells hold each (the commonest first,
    at most four named)."""
    values, counts = np.unique(x, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    shown = ", ".join(
        f"{v} = {values[i]:g} ({counts[i]} cell{'s' if counts[i] != 1 else ''})"
        for i in order[:4]
    )
    more = f" and {len(values) - 4} more values" if len(values) > 4 else ""
    return f"over the {len(x)} cells {shown}{more}"


def size_set_by_split(s: Search, min_train: int) -> str | None:
    """Why the pick's size is set by the split (None when it is not): its budget is the
    largest a nested split can rank, the grammar holds larger forms, and no outer error chose
    that size (one outer split, or no smaller budget to compare it with)."""
    best, ceiling = int(s.settings["best_budget"]), int(s.grammar.max_constants)
    b = s.budgets
    smaller = b[(b["max_constants"] < best) & (b["outer_splits"] > 0)]
    compared = bool(s.settings.get("front_testable", True)) and len(smaller) > 0
    if best < min_train - 1 or ceiling <= best or compared:
        return None
    return (
        f"not a law: its size is set by the split ({best} constants, the most a form may have "
        f"to be ranked on splits that fit {min_train} cells, and no smaller size it was "
        f"compared with; the grammar holds forms of up to {ceiling})"
    )


def recommend(
    refs: Sequence[Form], X: dict, y: np.ndarray, objective: Objective, s: Search
) -> list[dict]:
    """Each of the user's forms fitted on all cells: its constants, its training error there,
    why its fit is not well posed (empty when it is), and its outer errors from the search's
    reference table (the splits where its fit was valid)."""
    out = []
    for f in refs:
        r = fit(f, X, y, objective)
        row = s.references[s.references["form"] == f.name].iloc[0]
        with np.errstate(all="ignore"):
            miss = np.abs(predict(f, X, r.constants) - y) / np.abs(y)
        out.append(
            dict(
                form=f.name,
                expression=f.expression,
                constants=dict(r.constants),
                reasons=list(r.reasons),
                train_mean_pct=float(100 * np.mean(miss)),
                outer_splits=int(row["outer_splits"]),
                outer_median_pct=float(row["outer_median_pct"]),
            )
        )
    return out


def abstention(
    s: Search,
    variables: Sequence[str],
    X: dict,
    y: np.ndarray,
    masks: NestedMasks,
    objective: Objective,
    refs: Sequence[Form] = (),
) -> dict:
    """Whether the search abstains, why (each variable no split checks; a size set by the
    split), and the user's forms ``refs`` fitted on all cells (:func:`recommend`) when it
    does."""
    unchecked = unchecked_variables(variables, X, masks)
    size = size_set_by_split(s, masks.min_train)
    abstains = bool(unchecked or size)
    fits = recommend(refs, X, y, objective, s) if abstains else []
    good = [r["form"] for r in fits if not r["reasons"]]
    return dict(
        abstains=abstains,
        unchecked=unchecked,
        size=size,
        n_outer=masks.n_outer,
        outer_train_cells=masks.sizes(masks.outer)[0],
        forms=fits,
        recommended=good[0] if good else None,
    )
