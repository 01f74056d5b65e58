"""Which runs to do next: cells that would tell rival forms apart, or pin one form down.

A verdict between forms is bounded by the cells already in the grid. This module ranks
candidate cells (by default the grid's levels and the geometric midpoints between them, for
every variable the forms read, minus the cells already run) by how well a few seeds there
would separate the forms, and picks a batch under a budget of runs.

Discrimination (two or more forms) follows the T-optimal idea (Atkinson and Fedorov, 1975):
if form T were the truth, how badly would its rival R fit after R is refitted to the grid
plus T's predictions at the new cells? The lack of fit at the new cells, in units of the
combined uncertainty, summed over ordered pairs, is the score. Because the rival is refitted,
a second cell in a region where the rival can bend adds less than the first: the batch is
chosen greedily, each cell given the ones already chosen.

Uncertainty at a cell: each form's prediction from the full-grid fit carries the larger of
(a) the spread of its refits over random splits (robust sd, scaled by n_train / n to the size
of the full grid) and (b) the sd of its seed-bootstrap refits (``sd_param_F``), and (c) the
form's misfit as held-out cells show it (leave-one-cell-out refits, ``sd_misfit_F``; see
:class:`fitrules.engine.intervals.HeldOut`); ``sd_F`` adds (c) to the larger of (a) and (b) in
quadrature: the sd of the prediction for the configuration's mean. No form is exactly true:
a pair's difference is judged against both forms' constants' uncertainty plus the misfit of
the better-fitting of the two (the truth lies about that far from its prediction, which may
put it midway between the two, where no number of runs separates them; the worse form's
misfit is what the runs are to show, not noise). The mean of n new seeds
carries the seed noise, modelled as a constant coefficient of variation pooled over the grid's
cells (a MAD of the runs' deviations, so that a corrupted run does not multiply it; see
:func:`fitrules.engine.intervals.seed_noise`). The seeds a cell needs are those that make the two
forms' difference exceed (z_alpha/2 + z_power) standard errors; where no number of seeds can
(the forms' own uncertainty is larger than the difference), the cell is planned with the
minimum ``seeds``, since more would not reach the power.

With one form and a target cell, cells are ranked by how much n seeds there would shrink the
delta-method variance of the prediction at the target; the batch again greedy.

Only the grid's cells are used: nothing here reads a value the design will later be scored
on (new cells are not in the grid; cells that are, when named, are flagged "in grid").
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from fitrules.base.errors import FitrulesError
from fitrules.base.results import Result
from fitrules.base.util import json_ready
from fitrules.engine.fit import FitResult, Objective, fit_splits
from fitrules.engine.intervals import bootstrap_fit, heldout_fit, robust_cells, seed_noise
from fitrules.engine.stats import c4
from fitrules.jobs.options import DESIGN
from fitrules.model.compiled import CompiledForm, predict
from fitrules.model.forms import Form, format_level
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import RandomSplit

MAX_CANDIDATES = 5000  # candidate cells scored at once (each a refit per ordered pair)


@dataclass
class Design(Result):
    """Candidate cells ranked, and the batch chosen under the budget.

    Attributes
    ----------
    candidates : one row per candidate cell: its variables, ``in_grid``, each form's
        prediction and its sd (``pred_F``, ``sd_F``), the seed sd of one run ``seed_sd``,
        ``separation`` (largest pairwise difference in standard errors at ``seeds``
        seeds), ``seeds_needed`` (at the stated power) and ``score`` (the criterion of a
        batch of this cell alone).
    chosen : the batch, in the order chosen: cell, seeds, runs, the batch's score after
        adding it and the gain.
    commands : the commands that write each form's predictions for the chosen cells to a
        ledger, then run the cells.
    tuning : the :class:`~fitrules.jobs.tune.Tuning` that reduced the grid, or None.
    spec : the batch as a ``fitrules simulate`` spec (TOML), or None (``no_spec_reason``
        says why).
    """

    candidates: pd.DataFrame
    chosen: pd.DataFrame
    forms: list[Form]
    variables: tuple[str, ...]
    settings: dict
    data: dict
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    grid_cells: pd.DataFrame | None = None  # the cells already run, for figures
    tuning: Any = None  # the Tuning that reduced the grid, if any
    spec: str | None = None  # the batch as a simulate spec (TOML)
    no_spec_reason: str | None = None  # why there is none

    def __repr__(self) -> str:
        return (
            f"Design({', '.join(f.name for f in self.forms)}: {len(self.candidates)} "
            f"candidates, {len(self.chosen)} cells chosen)"
        )

    def text(self) -> str:
        from fitrules.views.design import render_design

        return render_design(self)

    def html(self) -> str:
        from fitrules.views.html import design_html

        return design_html(self)

    def plot(self, ax=None, labels=None, units=None):
        """The candidate plane: cells run, candidates by score, the batch chosen; returns the
        matplotlib Axes.

        ``labels`` (``{"N": "parameters"}`` or ``"N=parameters,D=tokens"``) names columns on the
        axes; ``units`` gives columns a unit (``{"loss": "nats"}``)."""
        from fitrules.views.design import design_figure
        from fitrules.views.figures import axis_labels

        with axis_labels(labels, units):
            return design_figure(self, ax=ax)

    def to_dict(self) -> dict:
        return json_ready(
            {
                "data": self.data,
                "settings": self.settings,
                "forms": [f.to_dict() for f in self.forms],
                "variables": list(self.variables),
                "chosen": self.chosen.to_dict("records"),
                "candidates": self.candidates.to_dict("records"),
                "commands": self.commands,
                "notes": self.notes,
            }
        )


# ------------------------------------------------------------------ candidates
def _fmt(v: float) -> str:
    return f"{v:g}"


def _midpoints(levels: np.ndarray) -> list[float]:
    out = []
    for a, b in itertools.pairwise(np.sort(levels)):
        out.append(float(math.sqrt(a * b)) if a > 0 and b > 0 else float((a + b) / 2))
    return out


def _parse_values(text: str, name: str) -> list[float]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            if "/" in part:
                num, den = part.split("/", 1)
                out.append(float(num) / float(den))
            else:
                out.append(float(part))
        except (ValueError, ZeroDivisionError):
            raise FitrulesError(
                f"--candidates: {name}={text!r}: {part!r} is not a number or fraction"
            ) from None
    if not out or not all(np.isfinite(out)):
        raise FitrulesError(f"--candidates: {name}={text!r}: give finite numbers")
    return out


def integer_variables(grid: Grid, variables: tuple[str, ...]) -> set[str]:
    """Variables that take whole numbers: integer columns of the grid, and integer settings
    of the harness (a run cannot be made at H=1.414)."""
    fields = _run_fields()
    return {
        v for v in variables if grid.runs[v].dtype.kind in "iub" or str(fields.get(v, "")) == "int"
    }


def _check_candidate_values(name: str, values: list[float], text: str, integer: bool) -> None:
    """Named candidate values must be runnable: in the variable's domain, whole for a whole
    variable, and within the harness's limits."""
    from fitrules.base.limits import MAX_ABS_VALUE, SIM_INT_LIMITS
    from fitrules.model.grids import DOMAIN

    for v in values:
        if abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(
                f"--candidates: {name}={text!r}: {v:g} is beyond +-{MAX_ABS_VALUE:g}"
            )
        if name in DOMAIN:
            ok = bool(np.asarray(DOMAIN[name][0](pd.Series([v]))).all())
            if not ok:
                raise FitrulesError(f"--candidates: {name}={text!r}: {DOMAIN[name][1]}")
        if integer and not float(v).is_integer():
            raise FitrulesError(
                f"--candidates: {name}={text!r}: {v:g} is not a whole number, and {name} takes "
                "whole numbers (in the grid and in a run)"
            )
        if integer and name in SIM_INT_LIMITS and not v <= SIM_INT_LIMITS[name]:
            raise FitrulesError(
                f"--candidates: {name}={text!r}: {v:g} is above {SIM_INT_LIMITS[name]:,}, the "
                f"largest {name} a run takes"
            )


def _whole_midpoints(levels: np.ndarray) -> list[float]:
    """Midpoints rounded to whole numbers, without the levels themselves."""
    have = set(levels.tolist())
    return sorted({float(round(m)) for m in _midpoints(levels)} - have)


def candidate_cells(
    cells: Cells,
    variables: tuple[str, ...],
    spec: str | None = None,
    integer: set[str] | frozenset[str] = frozenset(),
):
    """The candidate cells, a DataFrame over ``variables`` with an ``in_grid`` column.

    Default: for every variable, the grid's levels and the geometric midpoints between
    neighbouring levels (arithmetic where a level is <= 0; rounded to whole numbers for
    the ``integer`` variables, so that the cells ranked are the cells that will be run);
    their product, minus the cells already in the grid. ``spec`` names values instead,
    e.g. ``"H=2,8,32;keep=1/32"`` (``keep`` is turned into ``omega = 1/keep - 1`` when the
    forms read omega); variables it does not name take the grid's levels. Cells named that
    are in the grid are kept and flagged.

    Raises
    ------
    FitrulesError
        For a malformed ``spec``, a variable named twice or not read by the forms, a value
        outside the variable's domain, a fraction for a whole variable, or too many cells.
    """
    table = cells.table
    named: dict[str, list[float]] = {}
    if spec:
        for chunk in filter(None, (c.strip() for c in spec.split(";"))):
            name, sep, values = chunk.partition("=")
            name = name.strip()
            if not sep:
                raise FitrulesError(f"--candidates {spec!r}: {chunk!r} is not NAME=V1,V2,...")
            vals = _parse_values(values, name)
            if name == "keep" and "omega" in variables and "keep" not in variables:
                if not all(0 < v <= 1 for v in vals):
                    raise FitrulesError(f"--candidates: keep={values!r}: keep must be in (0, 1]")
                name, vals = "omega", [1 / v - 1 for v in vals]
            if name not in variables:
                raise FitrulesError(
                    f"--candidates: {name!r} is not a variable of the forms "
                    f"({', '.join(variables)})"
                )
            if name in named:
                raise FitrulesError(
                    f"--candidates {spec!r}: {name} is named twice; give all its values once, "
                    f"e.g. {name}=2,8"
                )
            _check_candidate_values(name, vals, values, name in integer)
            named[name] = vals
    axes = []
    for v in variables:
        levels = np.unique(table[v].to_numpy(float))
        if v in named:
            axes.append(sorted(set(named[v])))
        elif spec:
            axes.append(levels.tolist())
        elif v in integer:
            axes.append(sorted(set(levels.tolist()) | set(_whole_midpoints(levels))))
        else:
            axes.append(sorted(set(levels.tolist()) | set(_midpoints(levels))))
    grid_keys = {tuple(np.round(r, 12)) for r in table[list(variables)].to_numpy(float)}
    n_rows = math.prod(len(a) for a in axes)
    if n_rows > 50 * MAX_CANDIDATES:  # before the product is made
        raise FitrulesError(
            f"{n_rows:,} candidate cells; at most {MAX_CANDIDATES}: name fewer with --candidates"
        )
    rows = []
    for combo in itertools.product(*axes):
        key = tuple(np.round(np.array(combo, float), 12))
        in_grid = key in grid_keys
        if in_grid and not spec:
            continue
        rows.append({**dict(zip(variables, map(float, combo), strict=True)), "in_grid": in_grid})
    if not rows:
        raise FitrulesError("no candidate cell: every combination is already in the grid")
    if len(rows) > MAX_CANDIDATES:
        raise FitrulesError(
            f"{len(rows)} candidate cells; at most {MAX_CANDIDATES}: name fewer with --candidates"
        )
    return pd.DataFrame(rows)


def cell_label(row, variables) -> str:
    return ", ".join(f"{v}={_fmt(row[v])}" for v in variables)


# ------------------------------------------------------------------ uncertainty
def residual_cv(cells: Cells, forms, full: dict) -> float:
    """Noise of one run when no cell has repeats: the smallest root-mean-square relative
    residual over the forms' full-grid fits (degrees of freedom counted)."""
    out = []
    for f in forms:
        pred = predict(f, cells.X, full[f.name].constants)
        rel = (cells.y - pred) / np.abs(pred)
        dof = len(rel) - len(full[f.name].constants)
        if dof > 0 and np.isfinite(rel).all():
            out.append(float(np.sqrt(np.sum(rel**2) / dof)))
    if not out:
        raise FitrulesError(
            "the grid has no cell with two or more runs and too few cells to estimate the "
            "noise of one run from the fits' residuals"
        )
    return min(out)


def seed_cv(cells: Cells) -> float:
    """Pooled coefficient of variation of one run (unbiased sd / mean) over the grid's cells."""
    t = cells.table
    n = t["n_seeds"].to_numpy(float)
    ok = n >= 2
    if not ok.any():
        raise FitrulesError(
            "the grid has no cell with two or more runs: the seed noise a new run would "
            "carry cannot be estimated"
        )
    with np.errstate(all="ignore"):
        rel = (t["std"].to_numpy(float) / c4(n) / np.abs(t["value"].to_numpy(float)))[ok]
        # pool variances, weighted by degrees of freedom
        cv = float(np.sqrt(np.sum((n[ok] - 1) * rel**2) / np.sum(n[ok] - 1)))
    if not (math.isfinite(cv) and cv > 0):
        # at values near 1e-300 the spread of the runs underflows to 0: no seed count could
        # be planned (a separation over no noise is infinite), so say so instead
        raise FitrulesError(
            "the runs of the grid's cells show no measurable spread (identical values, or "
            "differences below double precision at this scale): the seed noise a new run "
            "would carry cannot be estimated"
        )
    return cv


def _seed_max(grid: Grid) -> int | None:
    """The largest whole seed id run (new runs take ids above it); None without one."""
    if not grid.seed:
        return None
    seeds = pd.to_numeric(grid.runs[grid.seed], errors="coerce").to_numpy(float)
    # a seed column may hold any number (1e308, inf): only whole, finite ids count
    whole = seeds[np.isfinite(seeds) & (np.abs(seeds) < 2**53) & (seeds == np.round(seeds))]
    return int(whole.max()) if len(whole) else None


def _known(form: Form, Xc) -> np.ndarray:
    """Candidates at levels the form has constants for (all, for a form without levels)."""
    known = np.ones(len(next(iter(Xc.values()))), bool)
    for col, levels in (form.levels or {}).items():
        known &= np.isin(Xc[col], levels)
    return known


def _split_sd(form, cells, Xc, splits, seed, objective) -> np.ndarray:
    n = len(cells)
    sp = RandomSplit(splits, 1 / 3, seed)
    sp.check(n)
    masks = sp.masks(n)
    fits = fit_splits(form, cells.X, cells.y, masks, objective)
    preds = []
    known = _known(form, Xc)  # a per-level form predicts NaN at a level it has no constant for
    for r in fits:
        if r.degenerate or not np.isfinite(r.objective):
            continue
        p = predict(form, Xc, r.constants)
        if np.isfinite(p[known]).all():
            preds.append(p)
    if len(preds) < 10:
        return np.full(len(next(iter(Xc.values()))), np.nan)
    P = np.array(preds)
    mad = np.median(np.abs(P - np.median(P, axis=0)), axis=0) * 1.4826
    return mad * math.sqrt(int(masks[0].sum()) / n)


def _boot_sd(grid, form, Xc, resamples, seed, objective) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # on the cells of every form's variables, as the forms are compared there
        # the seed bootstrap (residuals where a cell has one run): the spread of the
        # constants from seed noise; the form's misfit is added on its own (sd_misfit)
        b = bootstrap_fit(grid, form, objective, resamples, seed, kind="auto", variables=tuple(Xc))
        ok = np.isfinite(b.draws).all(axis=1)
        P = np.array(
            [predict(form, Xc, dict(zip(form.constants, d, strict=True))) for d in b.draws[ok]]
        )
    P = P[np.isfinite(P[:, _known(form, Xc)]).all(axis=1)] if len(P) else P
    return P.std(axis=0, ddof=1) if len(P) > 2 else np.full(len(next(iter(Xc.values()))), np.nan)


def _misfit_sd(
    form, cells, full: FitResult, noise, pred: np.ndarray, notes: list, obj
) -> np.ndarray:
    """The form's misfit at each candidate as held-out cells show it (relative, times the
    prediction); zero with a note when too few cells are left to estimate it."""
    try:
        h = heldout_fit(form, cells, full.constants, noise, obj)
        h.check()
    except FitrulesError as err:
        notes.append(f"form {form.name!r}: misfit not estimated ({err}); taken as 0")
        return np.zeros_like(pred)
    return math.sqrt(h.components["misfit_var"]) * np.abs(pred)


# ------------------------------------------------------------------ the criterion
def _pair_refit_gap(rival, cells, Xc, truth_pred, chosen, trial, objective):
    """Refit ``rival`` on the grid plus ``truth_pred`` at ``chosen`` + each ``trial`` cell.

    Returns (len(trial), n_candidates): the rival's refitted prediction minus truth_pred at
    every candidate (only chosen + that trial cell are read by the caller).
    """
    n, k = len(cells), len(truth_pred)
    X = {v: np.concatenate([cells.X[v], Xc[v]]) for v in rival.bound_variables}
    y = np.concatenate([cells.y, truth_pred])
    masks = np.zeros((len(trial), n + k), bool)
    masks[:, :n] = True
    if chosen:
        masks[:, n + np.array(chosen)] = True
    masks[np.arange(len(trial)), n + np.array(trial)] = True
    fits = fit_splits(rival, X, y, masks, objective)
    out = np.full((len(trial), k), np.nan)
    for i, r in enumerate(fits):
        if np.isfinite(r.objective):
            out[i] = predict(rival, Xc, r.constants) - truth_pred
    return out


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
        raise FitrulesError(f"--forms {names!r}: name the forms, e.g. composition,additive")
    lines = {parse_form_line(line).name: line for line in inline}
    extra = [n for n in lines if n not in wanted]
    if extra:
        raise FitrulesError(
            f"--form {lines[extra[0]]!r}: {extra[0]!r} is not named in --forms "
            f"{names!r}; design uses the forms named there (add it: --forms {names},{extra[0]})"
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
        raise FitrulesError("design needs two or more forms to discriminate, or one --target")
    if target is not None and n_forms != 1:
        raise FitrulesError("--target ranks cells for one form: give exactly one form")
    if not 1 <= max_seeds <= 1000:
        raise FitrulesError(f"--max-seeds {max_seeds}: must be between 1 and 1000")
    if not 1 <= seeds <= max_seeds:
        raise FitrulesError(f"--seeds {seeds}: must be between 1 and --max-seeds ({max_seeds})")
    if not seeds <= budget <= MAX_BUDGET:
        raise FitrulesError(
            f"--budget {budget}: must be at least --seeds ({seeds}) runs and at most {MAX_BUDGET:,}"
        )
    if not (0 < alpha < 1 and 0 < power < 1):
        raise FitrulesError("--alpha and --power must be in (0, 1)")
    for name, n, low in (("--design-splits", splits, 10), ("--resamples", resamples, 20)):
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
        resolve_point(target, bound[0], grid.derive, option="--target")
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


@dataclass(frozen=True)
class _Asked:
    """A design's options: what it spends, at what power, how it measures uncertainty."""

    budget: int
    seeds: int
    max_seeds: int
    power: float
    alpha: float
    splits: int
    resamples: int
    seed: int
    target: str | None
    candidates: str | None
    objective: Objective

    def settings(self, cv: float, noise_method: str) -> dict:
        """The settings the design records, with the seed noise it planned against."""
        return {
            "mode": "discriminate" if self.target is None else "target",
            "budget": self.budget,
            "seeds": self.seeds,
            "max_seeds": self.max_seeds,
            "power": self.power,
            "alpha": self.alpha,
            "splits": self.splits,
            "resamples": self.resamples,
            "seed": self.seed,
            "seed_cv": cv,
            "seed_noise": noise_method,
            "candidates": self.candidates or "grid levels and geometric midpoints, minus cells run",
            "target": self.target,
            "objective": self.objective.describe(),
        }


def _full_fits(bound: list[Form], cells: Cells, obj: Objective) -> dict[str, FitResult]:
    """Each form fitted on every cell; one that cannot be fitted is refused."""
    full: dict[str, FitResult] = {}
    for f in bound:
        full[f.name] = fit_splits(f, cells.X, cells.y, np.ones((1, len(cells)), bool), obj)[0]
        if not np.isfinite(full[f.name].objective):
            raise FitrulesError(f"form {f.name!r} cannot be fitted to the grid")
    return full


def _seed_cv(noise, cells: Cells, bound: list[Form], full: dict, notes: list[str]) -> float:
    """The coefficient of variation of one run's seed noise; from the forms' residuals, with
    a note, when no cell has two runs."""
    if not noise.known:  # one run per cell (e.g. the Chinchilla runs): no seed spread to pool
        cv = residual_cv(cells, bound, full)
        notes.append(
            f"no cell has two or more runs: the noise of one run ({100 * cv:.3g}% of the "
            "value) is the smallest RMS relative residual of the forms' fits on all cells, "
            "an upper bound (it carries the form's misfit too)"
        )
        return cv
    if noise.cv == 0:
        raise FitrulesError(
            "every run repeats its cell's mean exactly: the seed noise is 0, and seeds per "
            "cell cannot be planned against it (is the metric a copy of one run per cell?)"
        )
    cv = noise.cv
    typical = float(np.median(np.abs(cells.y)))
    with np.errstate(under="ignore", over="ignore"):
        measurable = math.isfinite(cv) and (cv * typical) ** 2 > 0
    if not measurable:
        # at values near 1e-300 the runs' spread underflows when squared: no seed count
        # could be planned (a separation over no noise is infinite), so say so instead
        raise FitrulesError(
            "the runs of the grid's cells show no measurable spread (identical values, or "
            "differences below double precision at this scale): the seed noise a new run "
            "would carry cannot be estimated"
        )
    return cv


def _add_form_columns(
    cand: pd.DataFrame,
    f: Form,
    grid: Grid,
    cells: Cells,
    Xc: dict,
    full: FitResult,
    noise,
    notes: list[str],
    ask: _Asked,
) -> None:
    """Add the form's prediction at each candidate and the sds of its parts to ``cand``."""
    obj = ask.objective
    pred = predict(f, Xc, full.constants)
    sd_split = _split_sd(f, cells, Xc, ask.splits, ask.seed, obj)
    sd_boot = _boot_sd(grid, f, Xc, ask.resamples, ask.seed, obj)
    cand[f"pred_{f.name}"] = pred
    cand[f"sd_split_{f.name}"] = sd_split
    cand[f"sd_boot_{f.name}"] = sd_boot
    misfit = _misfit_sd(f, cells, full, noise, pred, notes, obj)
    cand[f"sd_misfit_{f.name}"] = misfit
    cand[f"sd_param_{f.name}"] = np.fmax(sd_split, sd_boot)
    # the sd of the form's prediction for the configuration's mean: constants and misfit
    # hypot: the squares of sds in the metric's units overflow at scales near 1e200
    cand[f"sd_{f.name}"] = np.hypot(np.fmax(sd_split, sd_boot), misfit)


def _usable_candidates(
    cand: pd.DataFrame, bound: list[Form], Xc: dict, cv: float, notes: list[str]
) -> pd.DataFrame:
    """The candidates every form predicts, with finite sds and seed noise; a note for each
    kind left out."""
    with warnings.catch_warnings():  # candidates no form predicts (levels) stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_pred = np.nanmean([cand[f"pred_{f.name}"] for f in bound], axis=0)
    cand["seed_sd"] = cv * np.abs(mean_pred)
    usable = np.isfinite(cand[[f"pred_{f.name}" for f in bound]].to_numpy()).all(axis=1)
    usable &= np.isfinite(cand[[f"sd_{f.name}" for f in bound]].to_numpy()).all(axis=1)
    # losses so small that their noise underflows to 0 cannot be planned against
    with np.errstate(under="ignore", over="ignore"):
        usable &= cand["seed_sd"].to_numpy() ** 2 > 0
    unknown = np.zeros(len(cand), bool)
    for f in bound:  # per-level forms predict only at the levels they have constants for
        for col, levels in (f.levels or {}).items():
            unknown |= ~np.isin(Xc[col], levels)
    if (unknown & ~usable).any():
        notes.append(
            f"{int((unknown & ~usable).sum())} candidate cells left out: at a level with no "
            "constant of a per-level form ("
            + "; ".join(
                f"{f.name}: {col} in {', '.join(format_level(v) for v in levels)}"
                for f in bound
                for col, levels in (f.levels or {}).items()
            )
            + ")"
        )
    if (~usable & ~unknown).any():
        notes.append(
            f"{int((~usable & ~unknown).sum())} candidate cells left out: a form's prediction "
            "or its uncertainty there is not finite"
        )
    if not usable.any():
        raise FitrulesError(
            "no candidate cell can be scored: "
            + ("; ".join(notes) or "no candidates")
            + "; give candidates with --candidates"
        )
    cand = cand[usable].reset_index(drop=True)
    if not len(cand):
        raise FitrulesError(
            "no candidate cell is usable: at every one a form's prediction, its uncertainty "
            "or the seed noise is not a finite, nonzero number at this scale of the metric"
        )
    return cand


def _choose_batch(
    ask: _Asked,
    grid: Grid,
    bound: list[Form],
    cells: Cells,
    cand: pd.DataFrame,
    Xc: dict,
    full: dict,
    cv: float,
    settings: dict,
) -> pd.DataFrame:
    """The batch: cells that tell the forms apart, or pin the one form's target down (whose
    point is added to ``settings``)."""
    from fitrules.engine.intervals import resolve_point

    zsum = stats.norm.ppf(1 - ask.alpha / 2) + stats.norm.ppf(ask.power)
    if ask.target is None:
        return _discriminate(
            bound, cells, cand, Xc, ask.budget, ask.seeds, ask.max_seeds, zsum, ask.objective
        )
    _, point = resolve_point(ask.target, bound[0], grid.derive, option="--target")
    settings["target_point"] = point
    return _pin_down(bound[0], cells, cand, Xc, point, full, ask.budget, ask.seeds, cv)


def _design_data(grid: Grid, cells: Cells, variables: tuple[str, ...]) -> dict:
    """What the design was made from: the grid, its cells and the variables' units."""
    return {
        "path": str(grid.path) if grid.path else None,
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


def _discriminate(bound, cells, cand, Xc, budget, seeds, max_seeds, zsum, objective):
    k = len(cand)
    names = [f.name for f in bound]
    pairs = list(itertools.combinations(range(len(bound)), 2))
    # in units of the typical prediction: the criterion is a ratio of squares, which at
    # values of 1e-300 or 1e90 would under- or overflow in the metric's own units
    unit = float(np.nanmedian(np.abs(cand[[f"pred_{n}" for n in names]].to_numpy())))
    unit = unit if math.isfinite(unit) and unit > 0 else 1.0
    param = {f.name: (cand[f"sd_param_{f.name}"].to_numpy() / unit) ** 2 for f in bound}
    misfit = {f.name: (cand[f"sd_misfit_{f.name}"].to_numpy() / unit) ** 2 for f in bound}

    def model_var(a: str, b: str) -> np.ndarray:
        # both forms' constants, and the misfit of the better-fitting one: the truth lies
        # about that far from its prediction, which can put it near the midpoint of the two
        # predictions where no number of runs tells them apart. The worse form's misfit is
        # the signal the runs are there to show, not noise.
        return param[a] + param[b] + np.minimum(misfit[a], misfit[b])

    seed_var = (cand["seed_sd"].to_numpy() / unit) ** 2
    # separation of each pair at `seeds` seeds, and the seeds each pair needs
    sep = np.zeros(k)
    need = np.full(k, np.inf)
    for i, j in pairs:
        a, b = names[i], names[j]
        delta = np.abs(cand[f"pred_{a}"].to_numpy() - cand[f"pred_{b}"].to_numpy()) / unit
        model = model_var(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):  # no noise at all: infinite
            sep = np.maximum(sep, delta / np.sqrt(model + seed_var / seeds))
        room = (delta / zsum) ** 2 - model
        with np.errstate(divide="ignore", over="ignore"):  # beyond any count: never
            n_ij = np.where(room > 0, np.ceil(seed_var / np.maximum(room, 1e-300)), np.inf)
        need = np.minimum(need, n_ij)
    cand["separation"] = sep
    cand["seeds_needed"] = need
    # where no number of seeds reaches the power (the forms' own uncertainty, misfit
    # included, exceeds their difference), more seeds would not help: plan the minimum
    n_cell = np.clip(np.where(np.isfinite(need), need, seeds), seeds, max_seeds).astype(int)
    cand["seeds_planned"] = n_cell
    preds = {f.name: cand[f"pred_{f.name}"].to_numpy() for f in bound}

    def score(chosen: list[int], trial: list[int]) -> np.ndarray:
        """Batch criterion of chosen + each trial cell, summed over ordered pairs."""
        total = np.zeros(len(trial))
        for i, j in pairs:
            for t, r in ((i, j), (j, i)):
                gap = (
                    _pair_refit_gap(bound[r], cells, Xc, preds[names[t]], chosen, trial, objective)
                    / unit
                )
                with np.errstate(divide="ignore"):  # no noise at all: an infinite weight
                    w = 1 / (model_var(names[t], names[r]) + seed_var / n_cell)
                for row, x in enumerate(trial):
                    idx = [*chosen, x]
                    with np.errstate(invalid="ignore"):  # 0 gap x infinite weight
                        total[row] += np.nansum(gap[row, idx] ** 2 * w[idx])
        return total

    first = score([], list(range(k)))
    cand["score"] = first
    chosen: list[int] = []
    rows: list[dict] = []
    spent, current = 0, 0.0
    while True:
        left = [x for x in range(k) if x not in chosen and spent + n_cell[x] <= budget]
        if not left:
            break
        # the first step scores the same batches as the ranking above: reuse it
        s = first[left] if not chosen else score(chosen, left)
        best = int(np.argmax(s))
        gain = float(s[best] - current)
        if not np.isfinite(s[best]) or gain <= 1e-12 * max(1.0, current):
            break
        x = left[best]
        chosen.append(x)
        spent += int(n_cell[x])
        current = float(s[best])
        rows.append(_chosen_row(cand, x, len(rows) + 1, int(n_cell[x]), current, gain))
    return pd.DataFrame(rows)


def _chosen_row(cand, x, order, n, total, gain) -> dict:
    out = {"order": order, "candidate": int(x), "seeds": n, "runs": n}
    out.update({v: float(val) for v, val in cand.iloc[x].items() if v not in out})
    out["batch_score"] = total
    out["gain"] = gain
    return out


def _pin_down(form, cells, cand, Xc, point, full, budget, seeds, cv) -> pd.DataFrame:
    """Greedy reduction of the delta-method variance of the prediction at ``point``."""
    cf = CompiledForm(form)
    theta = np.array([full[form.name].constants[c] for c in cf.s.constants], float)
    pred = cf.predict(cells.X, theta)
    J = cf.jacobian(cells.X, theta)  # (n, p)
    resid = pred - cells.y
    n, p = J.shape
    # information of the grid: each cell mean weighted by its variance (seed noise of its
    # runs plus the form's misfit, estimated from the residuals)
    with np.errstate(over="ignore", invalid="ignore"):
        misfit = max(float(np.sum(resid**2) / max(n - p, 1)), 0.0)
        seed_var_grid = (cv * cells.y) ** 2 / cells.table["n_seeds"].to_numpy(float)
        w = 1 / (seed_var_grid + misfit)
        info = (J * w[:, None]).T @ J
    g_t = cf.jacobian({v: np.array([point[v]]) for v in form.bound_variables}, theta)[0]
    Gc = cf.jacobian(Xc, theta)  # (k, p)
    pc = cf.predict(Xc, theta)
    with np.errstate(over="ignore", invalid="ignore"):
        var_new = (cv * pc) ** 2 / seeds + misfit
    if not (math.isfinite(misfit) and np.isfinite(info).all() and np.isfinite(var_new).all()):
        raise FitrulesError(
            f"form {form.name!r}: the variances of its predictions overflow at this scale of "
            "the metric (or its fit misses the grid by that much); rescale the metric"
        )

    def target_var(information):
        return float(g_t @ np.linalg.pinv(information, hermitian=True) @ g_t)

    v0 = target_var(info)
    cand["score"] = [
        v0 - target_var(info + np.outer(Gc[i], Gc[i]) / var_new[i]) for i in range(len(cand))
    ]
    cand["target_sd_now"] = math.sqrt(max(v0, 0.0))
    rows: list[dict] = []
    chosen: list[int] = []
    spent, current = 0, v0
    while spent + seeds <= budget:
        left = [i for i in range(len(cand)) if i not in chosen]
        if not left:
            break
        vs = [target_var(info + np.outer(Gc[i], Gc[i]) / var_new[i]) for i in left]
        best = int(np.argmin(vs))
        gain = current - vs[best]
        if gain <= 1e-12 * max(v0, 1e-300):
            break
        x = left[best]
        info = info + np.outer(Gc[x], Gc[x]) / var_new[x]
        chosen.append(x)
        spent += seeds
        current = vs[best]
        row = _chosen_row(cand, x, len(rows) + 1, seeds, current, gain)
        row["target_sd_after"] = math.sqrt(max(current, 0.0))
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ the loop's commands
def _run_fields() -> dict:
    from fitrules.sim.spec import CONFIG_FIELDS

    return dict(CONFIG_FIELDS)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    return repr(v)


def run_cells(d: Design) -> list[dict] | None:
    """The chosen cells as harness settings (``omega`` becomes ``keep``), or None when a
    variable is not a setting of ``fitrules simulate``."""
    fields = _run_fields()
    out = []
    for r in d.chosen.to_dict("records"):
        cell = {}
        for v in d.variables:
            if v in fields:
                cell[v] = int(round(r[v])) if str(fields[v]) == "int" else float(r[v])
            elif v == "omega":
                cell["keep"] = 1 / (1 + r[v])
            else:
                return None
        out.append(cell)
    return out


def no_spec_reason(d: Design, grid: Grid, tuned: dict[str, list] | None = None) -> str | None:
    """Why :func:`batch_spec` gives no spec for this batch, or None when it gives one."""
    fields = _run_fields()
    if not len(d.chosen):
        return "no cell was chosen"
    if run_cells(d) is None:
        other = [v for v in d.variables if v not in fields and v != "omega"]
        verb = "is" if len(other) == 1 else "are"
        return f"{', '.join(other)} {verb} not a setting of the harness"
    needed = set(fields) - {"seed"} - set(tuned or {})
    lacking = sorted(needed - set(grid.runs.columns))
    if lacking:
        return (
            f"the grid was not written by fitrules simulate (it has no column "
            f"{', '.join(map(repr, lacking[:3]))}{', ...' if len(lacking) > 3 else ''})"
        )
    varying = set(d.variables) | {"keep"} | set(tuned or {})
    for c in fields:
        if c != "seed" and c not in varying and grid.runs[c].nunique() != 1:
            return f"the setting {c!r} varies in the grid and no form reads it"
    return None


def batch_spec(d: Design, grid: Grid, tuned: dict[str, list] | None = None) -> str | None:
    """A ``fitrules simulate`` spec for the chosen cells: the grid's fixed settings, one block
    per cell with its own fresh seeds (above every seed in the grid), and for a tuned grid
    every level of the tuned factors. None when the grid was not made by the harness (see
    :func:`no_spec_reason`)."""
    cells = run_cells(d)
    if cells is None or no_spec_reason(d, grid, tuned) is not None:
        return None
    fields = _run_fields()
    varying = set(d.variables) | {"keep"} | set(tuned or {})
    fixed = {}
    for c in fields:
        if c == "seed" or c in varying:
            continue
        v = grid.runs[c].unique()[0]
        fixed[c] = v.item() if hasattr(v, "item") else v
    first = int(d.data["seed_max"] or -1) + 1
    forms = ", ".join(f.name for f in d.forms)
    lines = [
        'name = "design"',
        f'description = "cells chosen by fitrules design for {forms}"',
        "",
        "[fixed]",
        *[f"{k} = {_toml_value(v)}" for k, v in fixed.items()],
    ]
    if not tuned:
        # A seed id carries an effect into every cell it runs at (the default grid: F(2, 38)
        # = 49 for seed across cells). Fresh ids at each cell make that effect noise that
        # averages over cells; shared ids move every new cell mean together, and score's
        # test then has little power (benchmarks/bench_calibration.py). Tuning chooses on
        # named seeds within each cell, so a tuned spec keeps one set of ids.
        lines[1:1] = ["# fresh seed ids at every cell: a seed's effect averages out over them"]
    for cell, r in zip(cells, d.chosen.to_dict("records"), strict=True):
        seeds = list(range(first, first + int(r["seeds"])))
        if not tuned:
            first += int(r["seeds"])
        lines += ["", "[[block]]", f"seeds = {seeds}", "[block.fixed]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in cell.items()]
        if tuned:
            lines.append("[block.factors]")
            lines += [f"{k} = {[float(x) for x in vs]!r}" for k, vs in tuned.items()]
    return "\n".join(lines) + "\n"


def _constant_options(f: Form) -> list[str]:
    """The --fix, --bound, --by and --shared options that remake ``f``'s constants."""
    out = [f"--fix={k}={float(v)!r}" for k, v in f.fixed.items()]
    out += [f"--bound={k}={float(lo)!r}..{float(hi)!r}" for k, (lo, hi) in f.bounds.items()]
    if f.by is not None:
        out += [f"--by={f.by}", f"--shared={','.join(f.shared or ())}"]
    return out


def loop_commands(
    d: Design,
    data_args: list[str],
    ledger: str,
    spec_path: str | None,
    runs_path: str,
) -> list[str]:
    """predict (each form, each chosen cell) -> simulate -> score, as command lines."""
    import shlex

    cells = run_cells(d)
    out = []
    for i, r in enumerate(d.chosen.to_dict("records")):
        if cells is not None:
            at = ",".join(f"{k}={v!r}" for k, v in cells[i].items())
        else:
            at = ",".join(f"{v}={r[v]!r}" for v in d.variables)
        for f in d.forms:
            head = f"{f.name}({', '.join(f.variables)})" if f.variables else f.name
            form = f.name if f.source == "built-in" else f"{head} = {f.expression}"
            out.append(
                shlex.join(
                    [
                        "fitrules",
                        "predict",
                        *data_args,
                        "--form",
                        form,
                        *_constant_options(f),
                        "--at",
                        at,
                        "--runs",
                        str(int(r["seeds"])),
                        "--ledger",
                        ledger,
                    ]
                )
            )
    if spec_path is not None:
        out.append(
            shlex.join(["fitrules", "simulate", spec_path, "--out", runs_path, "--jobs", "2"])
        )
    else:
        out.append(
            f"# run the chosen cells with {d.settings.get('seeds')} or more seeds each "
            f"and collect the results in {runs_path}"
        )
    tune = []
    for i, a in enumerate(data_args):
        if a in ("--tune", "--tune-seeds"):
            tune += [a, data_args[i + 1]]
    out.append(shlex.join(["fitrules", "score", "--ledger", ledger, "--data", runs_path, *tune]))
    return out
