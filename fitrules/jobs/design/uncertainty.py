"""Each form's uncertainty at the candidates (random-split refits, seed bootstrap, held-out
misfit) and the seed noise of one run, which together set what a few seeds can tell apart."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, param
from fitrules.engine.fit import FitResult, Objective, fit_splits
from fitrules.engine.intervals import bootstrap_fit, heldout_fit
from fitrules.engine.stats import c4
from fitrules.jobs.design.result import _Asked
from fitrules.model.compiled import predict
from fitrules.model.forms import Form, format_level
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import RandomSplit


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
        _no_spread()
    return cv


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
        _no_spread()
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
            + f"; give candidates with {param('candidates')}"
        )
    cand = cand[usable].reset_index(drop=True)
    if not len(cand):
        raise FitrulesError(
            "no candidate cell is usable: at every one a form's prediction, its uncertainty "
            "or the seed noise is not a finite, nonzero number at this scale of the metric"
        )
    return cand


def _no_spread() -> None:
    """Refuse runs whose spread cannot be measured: no seed count could be planned."""
    raise FitrulesError(
        "the runs of the grid's cells show no measurable spread (identical values, or "
        "differences below double precision at this scale): the seed noise a new run "
        "would carry cannot be estimated"
    )
