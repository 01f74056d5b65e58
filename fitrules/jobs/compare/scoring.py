"""Running the splits: each form fitted on every descriptive split, the held-out cells scored
(per cell and per split), with the noise floor and the seed folds of the cells-and-seeds
protocol."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fitrules.base.error_metrics import ErrorMetric
from fitrules.base.errors import SplitError, param
from fitrules.base.limits import SEED_PROTOCOLS
from fitrules.engine.fit import FitOptions, Objective, fit, fit_splits
from fitrules.engine.guard import GuardOptions, check_fits
from fitrules.engine.intervals import jacobian_uncertainty
from fitrules.engine.metrics import (
    RELATIVE,
    box_weights,
    heldout_error_rows,
    row_means,
    weighted_mean,
)
from fitrules.engine.stats import c4
from fitrules.model.compiled import CompiledForm, trained_levels
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import RandomSplit


def noise_floor(
    cells: Cells,
    masks: np.ndarray,
    weights: np.ndarray | None = None,
    metric: ErrorMetric = RELATIVE,
) -> tuple[list[float | None], int]:
    """Per split, the held-out error of a predictor that knew every cell's true mean.

    Such a predictor still misses each cell's seed mean by its sampling error, whose
    expected absolute size is ``sigma / sqrt(n) * sqrt(2/pi)``. sigma is estimated by
    ``s / c4(n)``: the sample standard deviation of n seeds is biased low (E[s] = 0.886 sigma
    at n = 3), ``c4`` removes that bias for normal seed noise. The floor is the mean over the
    held-out cells of that miss in ``metric`` (by default relative to the cell value, in
    percent). Cells with one seed have no
    estimate and are left out (and counted). ``weights``: each cell's weight in the mean, as
    in the held-out error (:func:`fitrules.engine.metrics.box_weights`).
    """
    t = cells.table
    n = t["n_seeds"].to_numpy(float)
    sigma = t["std"].to_numpy(float) / c4(n)
    miss = sigma / np.sqrt(n) * np.sqrt(2 / np.pi)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_cell = np.asarray(metric.per_cell(t["value"].to_numpy(float), miss), float)
    known = np.isfinite(per_cell)
    out: list[float | None] = []
    for mask in masks:
        test = ~mask & known
        out.append(
            metric.scale * weighted_mean(per_cell[test], None if weights is None else weights[test])
            if test.any()
            else None
        )
    return out, int((~known).sum())


def _heldout_weights(cells: Cells, kind: str) -> np.ndarray:
    """Each cell's weight in a held-out error; under transfer, the box is the scored grid's."""
    X = {v: np.asarray(a) for v, a in cells.X.items()}
    if "_source" not in cells.table:
        return box_weights(X, kind)
    scored = (cells.table["_source"] == "test").to_numpy()
    w = np.ones(len(cells))
    w[scored] = box_weights({v: a[scored] for v, a in X.items()}, kind)
    return w


def _descriptive_splits(splitter, cells: Cells, bound: list[Form]) -> tuple[np.ndarray, list]:
    """The splits' training masks and labels; a form with more constants than a split fits
    is refused."""
    n = len(cells)
    random = isinstance(splitter, RandomSplit)
    if random:
        splitter.check(n)
    masks = splitter.masks_for(cells.table)
    labels = splitter.labels(cells.table)
    n_train = int(masks.sum(axis=1).min())
    for f in bound:
        p = len(f.constants)
        if n_train < p:
            if random and p >= n:
                raise SplitError(
                    f"form {f.name!r} has {p} constants but the grid has only {n} cells, and "
                    f"each split must hold at least one out; drop the form or use a grid "
                    f"with more than {p} cells"
                )
            if random:
                need = math.ceil(1000 * (p - 0.5) / n) / 1000  # n_train rounds frac * n
                raise SplitError(
                    f"form {f.name!r} has {p} constants but each split fits only "
                    f"{n_train} of {n} cells; raise {param('train_frac')} so that at least {p} "
                    f"cells are fitted ({param('train_frac')} {need:g} or more) or drop the form"
                )
            raise SplitError(
                f"form {f.name!r} has {p} constants but {labels[0]!r} fits only "
                f"{n_train} cells; drop the form or choose another {param('split')}"
            )
    return masks, labels


@dataclass(frozen=True)
class _Fitting:
    """What every fit of one comparison shares: the cells' arrays, objective, options, guard."""

    X: dict
    y: np.ndarray
    objective: Objective
    options: FitOptions | None
    guard: GuardOptions
    on_progress: Callable[[int], None] | None
    keep_degenerate: bool
    heldout: np.ndarray | None = None  # each cell's weight in a held-out error (box_weights)
    metric: ErrorMetric = RELATIVE  # what a held-out cell's error is


def _score_forms(
    bound: list[Form],
    cells: Cells,
    masks: np.ndarray,
    labels: list,
    floor: list,
    held: dict | None,
    fitting: _Fitting,
) -> tuple[pd.DataFrame, dict, dict, dict]:
    """Fit each form on every split and score the held-out cells; fit it on all cells too.

    Returns the (split, form) rows, the full fits, their uncertainty and, per form, each
    used split's error at each cell it held out.
    """
    X, y, objective, options = fitting.X, fitting.y, fitting.objective, fitting.options
    n = len(cells)
    cell_labels = [cells.label(i) for i in range(n)]
    rows: list[dict] = []
    full = {}
    unc = {}
    # per form, each used split's error at each cell it held out (NaN elsewhere)
    at_cell = {f.name: np.full((len(masks), n), np.nan) for f in bound}
    for f in bound:
        first = len(rows)
        fits = _fit_descriptive(f, masks, held, fitting)
        guarded = check_fits(f, X, y, masks, fits, objective, fitting.guard, cell_labels)
        rows += _split_rows(f, masks, labels, floor, fits, guarded, held, at_cell[f.name], fitting)
        if held is not None:
            _rescale_rows(rows[first:], at_cell[f.name], held["excess"])
        # never worse on all cells than a split's fit there (the splits explore other basins)
        full[f.name] = fit(f, X, y, objective, options, candidates=[r.constants for r in fits])
        unc[f.name] = jacobian_uncertainty(f, X, y, full[f.name].constants, objective)
    results = pd.DataFrame(rows).drop(columns=["_mse"], errors="ignore")
    usable = results["heldout_error"].notna()
    if not fitting.keep_degenerate:
        usable &= ~results["degenerate"]
    results["used"] = usable
    return results, full, unc, at_cell


def _fit_descriptive(f: Form, masks: np.ndarray, held: dict | None, fitting: _Fitting) -> list:
    """One form's fits on the descriptive splits."""
    X, objective, options = fitting.X, fitting.objective, fitting.options
    if held is None:
        return fit_splits(f, X, fitting.y, masks, objective, options, fitting.on_progress)
    # split s fitted on the runs outside its seed fold, scored on the fold's
    fits = [None] * len(masks)
    F = len(held["folds"])
    for k, fold in enumerate(held["folds"]):
        idx = np.arange(k, len(masks), F)
        yk = fold["y_fit"]
        fk = fit_splits(f, X, yk, masks[idx], objective, options)
        for i, r in zip(idx, fk, strict=True):
            fits[i] = r
    if fitting.on_progress is not None:
        fitting.on_progress(len(masks))
    return fits


PREDICTION_ELEMENTS = 1 << 20  # splits x cells predicted at once


def predictions(f: Form, X: dict, fits: list):
    """Each fit's predictions at every cell, one row a fit, made a block of fits at a time by
    the form's generated code (NaN for a fit with no finite objective)."""
    cf = CompiledForm(f)
    n = len(next(iter(X.values())))
    step = max(1, PREDICTION_ELEMENTS // max(n, 1))
    for a in range(0, len(fits), step):
        P = np.array(
            [[r.constants.get(c, np.nan) for c in cf.s.constants] for r in fits[a : a + step]],
            float,
        ).reshape(-1, cf.p)
        P[[not np.isfinite(r.objective) for r in fits[a : a + step]]] = np.nan
        with np.errstate(all="ignore"):
            yield from cf.predict(X, P)


def prediction_table(f: Form, X: dict, fits: list) -> np.ndarray:
    """Every fit's predictions at every cell, one row a fit (S, n); see :func:`predictions`.

    Parameters
    ----------
    f : Form
        The bound form.
    X : dict
        The cells' values of its variables, each (n,).
    fits : list
        Its fits (each a ``FitResult``).

    Returns
    -------
    numpy.ndarray
        The predictions, NaN in the row of a fit with no finite objective.
    """
    n = len(next(iter(X.values())))
    return np.array(list(predictions(f, X, fits)), float).reshape(len(fits), n)


def _unfitted_table(f: Form, X, masks: np.ndarray) -> np.ndarray:
    """Per split and cell (S, n): a held-out cell whose level of a per-level column has no
    training cell."""
    out = np.zeros(masks.shape, bool)
    for col in f.levels or {}:
        # per split, which of the column's values its training cells hold; a held-out
        # cell is unfitted where its value is not among them (every split at once)
        values, at = np.unique(X[col], return_inverse=True)
        out |= ~trained_levels(X[col], masks, values)[:, at] & ~masks
    return out


def heldout_table(Y, P, masks, weights=None, metric: ErrorMetric = RELATIVE, mse=False) -> dict:
    """Each split's held-out errors, the splits that hold out as many cells scored together.

    Parameters
    ----------
    Y : numpy.ndarray
        The values each split is scored against, at every cell (S, n) (or (n,), shared).
    P : numpy.ndarray
        Each split's predictions at every cell (S, n).
    masks : numpy.ndarray
        The splits' training cells (S, n); the others are held out.
    weights : numpy.ndarray, optional
        Each cell's weight in a held-out error (n,) (:func:`box_weights`).
    metric : ErrorMetric, optional
        The per-cell error.
    mse : bool, optional
        Also ``_mse``, the mean squared relative error (the cells-and-seeds protocol's).

    Returns
    -------
    dict
        ``heldout_error``, ``worst_cell``, ``rmse`` (and ``_mse``), each (S,): as
        :func:`heldout_errors` gives them for the split's held-out cells, to the bit; NaN
        for a split with a prediction there that is not finite.
    """
    test = ~masks
    keys = ("heldout_error", "worst_cell", "rmse") + (("_mse",) if mse else ())
    out = {k: np.full(len(masks), np.nan) for k in keys}
    Y = np.broadcast_to(Y, masks.shape)
    counts, finite = test.sum(axis=1), (np.isfinite(P) | masks).all(axis=1)
    for m in np.unique(counts[finite]).tolist():
        idx = np.flatnonzero(finite & (counts == m))
        t = test[idx]
        y, p = Y[idx][t].reshape(-1, m), P[idx][t].reshape(-1, m)
        w = None if weights is None else np.broadcast_to(weights, t.shape)[t].reshape(-1, m)
        e = heldout_error_rows(y, p, w, metric)
        if mse:
            with np.errstate(all="ignore"):
                e["_mse"] = row_means(((p - y) / y) ** 2, w)
        for k in keys:
            out[k][idx] = e[k]
    return out


def _split_values(y: np.ndarray, held: dict | None, S: int) -> np.ndarray:
    """The values each split is scored against: the cells' (n,), or under cells-and-seeds
    its seed fold's (S, n)."""
    if held is None:
        return y
    folds = held["folds"]
    return np.array([folds[s % len(folds)]["y_test"] for s in range(S)], float)


ERROR_KEYS = ("heldout_error", "worst_cell", "rmse")


def _split_rows(f, masks, labels, floor, fits, guarded, held, at_cell, fitting: _Fitting):
    """The (split, form) rows of one form: held-out errors, the fits' diagnostics, the
    guard's verdicts; each used split's error at each cell it held out goes to ``at_cell``."""
    X, metric = fitting.X, fitting.metric
    Y = _split_values(fitting.y, held, len(masks))
    unfitted = _unfitted_table(f, X, masks)
    # a level with no training cell has no fitted constant: no prediction there
    P = np.where(unfitted, np.nan, prediction_table(f, X, fits))
    errs = heldout_table(Y, P, masks, fitting.heldout, metric, mse=held is not None)
    ok = np.isfinite(np.stack([errs[k] for k in ERROR_KEYS])).all(axis=0)
    used = ok & np.array([fitting.keep_degenerate or not r.reasons for r in fits], bool)
    with np.errstate(all="ignore"):
        cells = metric.cells(np.broadcast_to(Y, masks.shape)[used], P[used])
    at_cell[used] = np.where(masks[used], np.nan, cells)
    # per split, as Python values read once (the rows are 1,800 dicts at 300 splits)
    per = {k: v.tolist() for k, v in errs.items()}
    n_train = masks.sum(axis=1).tolist()
    some_unfitted = unfitted.any(axis=1).tolist()
    ok = ok.tolist()
    return [
        _split_row(
            f, s, labels[s], floor[s], masks, n_train[s], r, g, held, per, ok[s], some_unfitted[s]
        )
        for s, (r, g) in enumerate(zip(fits, guarded, strict=True))
    ]


def _split_row(f, s, label, floor, masks, n_train, r, g, held, errs, ok, unfitted) -> dict:
    """One (split, form) row: held-out errors (``errs``: :func:`heldout_table`'s as lists,
    ``ok`` where every one is finite), the fit's diagnostics, the guard's verdict;
    ``unfitted``: whether a held-out cell's level has no training cell."""
    split_reasons = list(r.reasons)
    if not ok:
        # a prediction that is not finite, or so large that its error overflows
        if not unfitted:  # else the split already names the unfitted level
            split_reasons.append("prediction is not finite on held-out cells")
    e = {k: errs[k][s] if ok else np.nan for k in ERROR_KEYS}
    return {
        "split": s,
        "split_label": label,
        "form": f.name,
        **e,
        "noise_floor": floor,
        "train_objective": r.objective,
        "cond": r.cond,
        "n_train": n_train,
        "n_test": masks.shape[1] - n_train,
        "train_cells": np.flatnonzero(masks[s]).tolist(),
        "degenerate": bool(split_reasons),
        "reasons": split_reasons,
        "wild": g.wild,
        "span_ratio": g.span_ratio,
        "max_rel_se": g.max_rel_se,
        "excursion_pct": g.excursion_pct,
        "guard_reasons": list(g.reasons),
        "constants": r.constants,
        **({} if held is None else {"_mse": errs["_mse"][s] if ok else np.nan}),
    }


def _held_seeds(grid: Grid, cells: Cells, seeds: str, splitter) -> tuple[dict | None, str]:
    """The seed folds of the cells-and-seeds protocol (None for cells), and its name."""
    from fitrules.engine.intervals import NO_SHARED_IDS, no_offset_reason, seed_offset
    from fitrules.model.splits import SeedHoldout, seed_folds

    if seeds not in SEED_PROTOCOLS:
        raise SplitError(
            f"{param('seeds')} {seeds!r} is unknown; allowed: {', '.join(SEED_PROTOCOLS)}"
        )
    cells_name = "cells: every run of the training and held-out cells"
    if seeds == "cells":
        return None, cells_name
    off = seed_offset(grid, cells)
    if off is None:
        why = no_offset_reason(grid, cells)
        tail = ": nothing to hold out" if why == NO_SHARED_IDS else ""
        return None, f"{cells_name} ({why}{tail})"
    held = seed_folds(grid, cells, off, SeedHoldout(seed=getattr(splitter, "seed", 0)))
    if held is None:
        return None, cells_name + " (seed ids could not be held out: a cell lacks runs at them)"
    n_folds, t, k = len(held["folds"]), held["t"], held["k"]
    return held, (
        f"cells and seeds: {n_folds} folds of {t} of {len(off.seeds)} seed ids, split s "
        f"fitted on the runs outside fold s mod {n_folds} and scored on the fold's; errors "
        f"rescaled to the mean of {k} new runs at fresh seed ids"
    )


def _rescale_rows(rows: list[dict], at_cell: np.ndarray, excess: float) -> None:
    """Take the expected excess off one form's held-out errors, by one factor from their
    pooled mean square (:meth:`fitrules.model.splits.SeedHoldout.rescale`)."""
    from fitrules.model.splits import SeedHoldout

    mse = np.array([r.get("_mse", np.nan) for r in rows], float)
    if not np.isfinite(mse).any():
        return
    factor = float(SeedHoldout.rescale(float(np.nanmean(mse)), excess))
    for r in rows:
        for key in ("heldout_error", "worst_cell", "rmse"):
            r[key] = r[key] * factor
    at_cell *= factor
