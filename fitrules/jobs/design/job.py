"""design(): the forms and options checked, candidates ranked by what their runs would show,
a batch chosen under the budget, into a :class:`~fitrules.jobs.design.result.Design`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, param
from fitrules.engine.fit import Objective
from fitrules.engine.intervals import robust_cells, seed_noise
from fitrules.jobs.design.candidates import candidate_cells, integer_variables
from fitrules.jobs.design.criterion import _choose_batch
from fitrules.jobs.design.result import Design, _Asked
from fitrules.jobs.design.uncertainty import (
    _add_form_columns,
    _full_fits,
    _seed_cv,
    _usable_candidates,
)
from fitrules.jobs.options import DESIGN
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid


def design_forms(names: str, inline: list[str]) -> list[Form]:
    """The forms ``--forms A,B`` names, in that order; an inline ``--form "NAME = EXPR"``
    defines one of them and must be named there.

    Raises
    ------
    FitrulesError
        For an inline form that ``--forms`` does not name, or a name that is no form.
    """
    from fitrules.model.forms import parse_form_line, select_forms

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        raise FitrulesError(
            f"{param('forms')} {names!r}: name the forms, e.g. composition,additive"
        )
    lines = {parse_form_line(line).name: line for line in inline}
    extra = [n for n in lines if n not in wanted]
    if extra:
        raise FitrulesError(
            # flag words: Python reads --form as `forms` (param('form') would say form)
            f"--form {lines[extra[0]]!r}: {extra[0]!r} is not named in {param('forms')} "
            f"{names!r}; design uses the forms named there (add it: {param('forms')} "
            f"{names},{extra[0]})"
        )
    forms = select_forms([n for n in wanted if n not in lines], list(lines.values()))
    return sorted(forms, key=lambda f: wanted.index(f.name))


MAX_BUDGET = 10_000  # runs one design may plan
MAX_DESIGN_REFITS = 2_000  # random-split refits or bootstrap resamples per form


def check_design_options(
    n_forms: int,
    budget: int,
    seeds: int,
    max_seeds: int,
    power: float,
    alpha: float,
    splits: int,
    resamples: int,
    target: str | None,
) -> None:
    """Refuse design settings outside what is allowed, before any work (one line each)."""
    if target is None and n_forms < 2:
        raise FitrulesError(
            f"design needs two or more forms to discriminate, or one {param('target')}"
        )
    if target is not None and n_forms != 1:
        raise FitrulesError(f"{param('target')} ranks cells for one form: give exactly one form")
    if not 1 <= max_seeds <= 1000:
        raise FitrulesError(f"{param('max_seeds')} {max_seeds}: must be between 1 and 1000")
    if not 1 <= seeds <= max_seeds:
        raise FitrulesError(
            f"{param('seeds')} {seeds}: must be between 1 and {param('max_seeds')} ({max_seeds})"
        )
    if not seeds <= budget <= MAX_BUDGET:
        raise FitrulesError(
            f"{param('budget')} {budget}: must be at least {param('seeds')} ({seeds}) runs and at "
            f"most {MAX_BUDGET:,}"
        )
    if not (0 < alpha < 1 and 0 < power < 1):
        raise FitrulesError(f"{param('alpha')} and {param('power')} must be in (0, 1)")
    for name, n, low in ((param("splits"), splits, 10), (param("resamples"), resamples, 20)):
        if not low <= n <= MAX_DESIGN_REFITS:
            raise FitrulesError(f"{name} {n}: must be between {low} and {MAX_DESIGN_REFITS:,}")


def design(
    grid: Grid,
    forms: list[Form],
    candidates: str | None = None,
    budget: int = DESIGN.budget,
    seeds: int = DESIGN.seeds,
    max_seeds: int = DESIGN.max_seeds,
    power: float = DESIGN.power,
    alpha: float = DESIGN.alpha,
    splits: int = DESIGN.splits,
    resamples: int = DESIGN.resamples,
    seed: int = DESIGN.seed,
    target: str | None = None,
    objective: str = DESIGN.objective,
    delta: float = DESIGN.delta,
) -> Design:
    """Rank candidate cells and choose a batch of runs under ``budget``.

    Parameters
    ----------
    grid : the checked results table (tuned or not).
    forms : two or more rival forms; or one form together with ``target``.
    candidates : cells to consider (see :func:`candidate_cells`); default the grid's levels
        and midpoints, minus the cells already run.
    budget : runs to spend (cells x seeds).
    seeds : seeds per cell at least (and the seeds at which separations are quoted).
    max_seeds : seeds per cell at most.
    power, alpha : the power at which a cell's difference should be detected, and the
        two-sided level; they set the seeds a cell needs.
    splits, resamples, seed : random splits and seed-bootstrap resamples that measure each
        form's uncertainty, and their seed.
    target : one form only: the cell whose prediction the batch should pin down, e.g.
        ``"H=256,omega=63"``.
    objective, delta : the training objective of every fit the design makes (``log_huber``
        also makes the forms' misfit a robust spread of the held-out residuals).

    Raises
    ------
    FitrulesError
        For too few forms, a target with several forms, a bad candidate or target, or a
        budget smaller than one cell's seeds.
    """
    from fitrules.engine.intervals import resolve_point

    check_design_options(
        len(forms), budget, seeds, max_seeds, power, alpha, splits, resamples, target
    )
    bound = [f.bind(grid.columns, grid.runs) for f in forms]
    variables = tuple(dict.fromkeys(v for f in bound for v in f.bound_variables))
    ask = _Asked(
        budget, seeds, max_seeds, power, alpha, splits, resamples, seed, target, candidates,
        Objective(objective, delta),
    )  # fmt: skip
    obj = ask.objective
    cells = grid.cells(variables, positive=obj.kind != "abs_ls")
    if target is not None:  # a bad target is refused before the work
        resolve_point(target, bound[0], grid.derive, option=param("target"))
    cand = candidate_cells(cells, variables, candidates, integer_variables(grid, variables))
    Xc = {v: cand[v].to_numpy(float) for v in variables}
    noise = seed_noise(grid, variables, obj)
    # under log_huber a cell is the biweight location of its runs, not their mean (see
    # robust_cells): one corrupted run would otherwise move its cell and, with it, every
    # spread below (random splits, held-out misfit), which are measured on the cells
    cells = robust_cells(grid, variables, obj, noise)
    full = _full_fits(bound, cells, obj)
    notes: list[str] = []
    cv = _seed_cv(noise, cells, bound, full, notes)
    for f in bound:
        _add_form_columns(cand, f, grid, cells, Xc, full[f.name], noise, notes, ask)
    cand = _usable_candidates(cand, bound, Xc, cv, notes)
    Xc = {v: cand[v].to_numpy(float) for v in variables}
    settings = ask.settings(cv, noise.method)
    chosen = _choose_batch(ask, grid, bound, cells, cand, Xc, full, cv, settings)
    return Design(
        cand,
        chosen,
        bound,
        variables,
        settings,
        _design_data(grid, cells, variables),
        notes=notes,
        grid_cells=cells.table[list(variables)].copy(),
    )


def _design_data(grid: Grid, cells: Cells, variables: tuple[str, ...]) -> dict:
    """What the design was made from: the grid, its cells and the variables' units."""
    return {
        "path": grid.label,  # the file, or "DataFrame": as compare and fit record it
        "sha256": grid.sha256,
        "where": list(grid.where),
        "derive": list(grid.derive),
        "runs": int(len(grid.runs)),
        "cells": int(len(cells)),
        "metric": grid.metric,
        "seed_max": _seed_max(grid),
        "excluded": grid.summary()["excluded"],
        **grid.handling(variables),
        "units": {v: grid.units[v] for v in variables if v in grid.units},
    }


def _seed_max(grid: Grid) -> int | None:
    """The largest whole seed id run (new runs take ids above it); None without one."""
    if not grid.seed:
        return None
    seeds = pd.to_numeric(grid.runs[grid.seed], errors="coerce").to_numpy(float)
    # a seed column may hold any number (1e308, inf): only whole, finite ids count
    whole = seeds[np.isfinite(seeds) & (np.abs(seeds) < 2**53) & (seeds == np.round(seeds))]
    return int(whole.max()) if len(whole) else None
