"""The search's inputs: the search asked for, and the variables, cells, points and references
it reads, each bad one refused before the plan is shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, param
from fitrules.engine.fit import FitOptions, Objective
from fitrules.engine.grammar import Grammar
from fitrules.engine.guard import GuardOptions
from fitrules.jobs.options import SEARCH
from fitrules.jobs.search.protocol import _check_inner_splits
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid

DEFAULT_REFERENCES = ("composition", "log_additive")


def default_variables(grid: Grid) -> list[str]:
    """The grid's varying numeric factors and continuous columns; of columns that map one to
    one onto each other (keep and omega = 1/keep - 1) only the last is kept (derived columns
    come last); a tuned grid's record of its choices (``tuned_lr``) and columns that look
    like another outcome (:attr:`fitrules.model.grids.Grid.outcome_like`) are left out."""
    # a tuned grid's tuned_FACTOR columns record the choice of the tuning, not the design
    tuned = {f"tuned_{f}" for f in getattr(grid, "tuned", ())}
    cols = [
        c
        for c in [*grid.varying_factors, *grid.continuous]
        if c not in tuned
        if pd.api.types.is_numeric_dtype(grid.runs[c])
        and not pd.api.types.is_bool_dtype(grid.runs[c])
    ]
    keep: list[str] = []
    for c in reversed(cols):
        if not any(_one_to_one(grid.runs[c], grid.runs[k]) for k in keep):
            keep.append(c)
    return [c for c in cols if c in keep]


def _one_to_one(a: pd.Series, b: pd.Series) -> bool:
    pairs = pd.DataFrame({"a": a.to_numpy(), "b": b.to_numpy()}).drop_duplicates()
    return bool(pairs["a"].is_unique and pairs["b"].is_unique)


@dataclass(frozen=True)
class _SearchSpec:
    """The search asked for, its defaults filled in: what it searches, and how."""

    grid: Grid
    grammar: Grammar
    outer: Any
    objective: Objective
    guard: GuardOptions
    options: FitOptions
    inner_splits: int
    inner_train_frac: float
    seed: int
    rule: str
    heldout: np.ndarray | None = None  # each cell's weight in a held-out error
    heldout_weights: str = SEARCH.heldout_weights


def _checked_inputs(
    spec: _SearchSpec, at: Sequence[dict[str, float]], references: Sequence[Form]
) -> tuple[list[str], Cells, dict[str, int], list[Form]]:
    """The variables searched, the cells, each per-level column's levels and the bound
    references; every bad option refused before the plan is shown."""
    grid, grammar = spec.grid, spec.grammar
    variables = _search_variables(grammar, grid)
    _check_points(at, variables)
    level_cols = _level_columns(grammar, grid)
    cell_vars = list(dict.fromkeys(variables + level_cols))
    cells = _search_cells(grid, cell_vars, spec.objective)
    counts = {col: int(cells.table[col].nunique()) for col in level_cols}
    _check_inner_splits(spec.outer, cells.table, spec.inner_splits, spec.inner_train_frac)
    refs = [f.bind(grid.columns, grid.runs) for f in references]
    for f in refs:  # refused before the plan is shown, as every bad option is
        missing = [v for v in f.bound_variables if v not in cell_vars]
        if missing:
            raise FitrulesError(
                f"reference form {f.name!r} reads {missing}, which the search does not; add "
                f"them to {param('variables')} or leave the form out of {param('reference')}"
            )
    return variables, cells, counts, refs


def _search_variables(grammar: Grammar, grid: Grid) -> list[str]:
    """The variables searched over: each a column of the grid with more than one value."""
    variables = list(grammar.variables or default_variables(grid))
    if not variables:
        raise FitrulesError(
            f"{grid.label}: no varying numeric column to search over; name them with "
            f"{param('variables')}"
        )
    for v in variables:
        if v not in grid.columns:
            raise FitrulesError(
                f"{param('variables')}: {v!r} is not a column of {grid.label}; columns: "
                f"{', '.join(map(str, grid.columns))}"
            )
    for v in variables:
        values = grid.runs[v].dropna().unique()
        if len(values) < 2:  # else every run falls in one cell, refused as repeated seeds
            raise FitrulesError(
                f"{param('variables')}: {v!r} has one value over {grid.label} "
                f"({', '.join(map(str, values[:1])) or 'none'}); a search needs columns that vary"
            )
    return variables


def _check_points(at: Sequence[dict[str, float]], variables: list[str]) -> None:
    """Refuse an ``at`` point that does not give exactly the variables of the search."""
    for point in at:  # refused before the plan is shown, as every bad option is
        missing = [v for v in variables if v not in point]
        extra = [k for k in point if k not in variables]
        if missing or extra:
            shown = ",".join(f"{k}={v:g}" for k, v in point.items())
            raise FitrulesError(
                # flag words: Python reads --at as `predict` (param('at') would say at)
                f"--at {shown!r}: "
                + (f"gives no value of {', '.join(missing)}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"{', '.join(extra)} is not a variable of the search" if extra else "")
                + f"; a point gives every variable of the search: {', '.join(variables)}"
            )


def _level_columns(grammar: Grammar, grid: Grid) -> list[str]:
    """The grammar's per-level columns; each must leave room for a term in a form."""
    level_cols = list(grammar.levels)
    for col in level_cols:
        if col not in grid.columns:
            raise FitrulesError(f"grammar levels: {col!r} is not a column of {grid.label}")
        k = int(grid.runs[col].nunique())
        if k + 1 > grammar.max_constants:  # L0[COL] and one term: more than any form may have
            raise FitrulesError(
                f"grammar levels: {col!r} has {k:,} levels, so L0[{col}] is {k:,} constants and "
                f"no form with it fits {param('max_constants')} {grammar.max_constants}; raise "
                f"{param('max_constants')} or leave the column out of {param('levels')}"
            )
    return level_cols


def _search_cells(grid: Grid, cell_vars: list[str], objective: Objective) -> Cells:
    """The cells searched on; a cell of value 0 is refused (errors are relative to it)."""
    # as fit and design read them: under log_huber a cell of 3 or more runs is the biweight
    # location of its runs (one corrupted run does not move it), otherwise the mean
    from fitrules.engine.intervals import robust_cells

    cells = robust_cells(grid, cell_vars, objective)
    y = cells.y
    if (y == 0).any():  # reachable with abs_ls, which allows values <= 0
        i = int(np.flatnonzero(y == 0)[0])
        raise FitrulesError(
            f"{grid.label}: the cell {cells.label(i)} has value 0; the search scores held-out "
            "error relative to each cell's value, so it needs no zero (drop it with "
            f"{param('where')})"
        )
    return cells
