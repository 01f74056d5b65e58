"""One form scored on the nested masks: fitted on each training mask, its held-out error on
the cells that mask leaves out (a degenerate fit, or one the guard names wild, fails)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fitrules.engine.fit import FitOptions, Objective, fit_splits
from fitrules.engine.guard import GuardOptions, check_fits, turns_back
from fitrules.jobs.search.protocol import NestedMasks
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form
from fitrules.model.splits import SeedHoldout

# a coarser starting grid, one start and a resolution of 1e-3 of each exponent's range (compare:
# 1e-6): the search fits thousands of forms; fit and compare refit the forms it returns
SEARCH_FIT_OPTIONS = FitOptions(grid_points=(41, 17, 9), n_starts=1, resolution=1e-3)


@dataclass
class Scored:
    """One form's errors on every row of a :class:`NestedMasks` (percent; NaN = failed)."""

    error: np.ndarray  # (rows,)
    valid: np.ndarray  # (rows,) bool: neither degenerate nor named wild
    seconds: float = 0.0
    mse: np.ndarray | None = None  # (rows,) mean squared relative error of the test cells


def score_form(
    form: Form,
    X,
    y,
    masks: NestedMasks,
    objective: Objective,
    options: FitOptions,
    guard: GuardOptions,
    rows: slice | np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    turn: str | None = None,
    weights: np.ndarray | None = None,
    batch: np.ndarray | None = None,
) -> Scored:
    """Fit ``form`` on every training mask (or ``rows`` of them) and score its test cells.

    ``y_test`` (cells,): the values the test cells are scored against (default ``y``, the
    values fitted). ``turn``: the column a question extrapolates along; a fit that turns
    back past its training levels there (:func:`fitrules.engine.guard.turns_back`) fails,
    as a fit the guard names wild does. ``weights`` (cells,): each held-out cell's weight in
    a split's error (:func:`fitrules.engine.metrics.box_weights`; default each once).
    ``batch`` (rows,): the training set sizes of the rows a call without pruning would fit;
    each size's fits are padded to as many rows (repeats, fitted once), so that a row's fit
    gets the starts it would get there (:class:`fitrules.engine.fit.FitOptions`)."""
    t0 = time.perf_counter()
    train = masks.train if rows is None else masks.train[rows]
    test = masks.test if rows is None else masks.test[rows]
    # rows fitting the same number of cells are fitted together: the local search then works
    # on those cells only (fit._refine), which the mixed sizes of nested masks would prevent
    counts = train.sum(axis=1)
    fits: list = [None] * len(train)
    for size in np.unique(counts):
        rows_k = np.flatnonzero(counts == size)
        fit_masks = train[rows_k]
        extra = 0 if batch is None else int((batch == size).sum()) - len(rows_k)
        if extra > 0:
            fit_masks = np.vstack([fit_masks, np.repeat(fit_masks[:1], extra, axis=0)])
        got = fit_splits(form, X, y, fit_masks, objective, options)[: len(rows_k)]
        for r, f in zip(rows_k, got, strict=True):
            fits[r] = f
    guarded = check_fits(form, X, y, train, fits, objective, guard)
    cf = CompiledForm(form)
    params = np.array([[r.constants[c] for c in cf.s.constants] for r in fits], float)
    ok = np.isfinite(params).all(axis=1)
    target = y if y_test is None else y_test
    with np.errstate(all="ignore"):
        pred = cf.predict(X, np.where(ok[:, None], params, 0.0))
        rel = np.abs(pred - target) / np.abs(target)
        w = np.where(test, 1.0 if weights is None else weights, 0.0)
        held = np.maximum(w.sum(axis=1), 1e-300)
        err = 100 * np.where(test, w * rel, 0.0).sum(axis=1) / held
        mse = np.where(test, w * rel**2, 0.0).sum(axis=1) / held
    valid = (
        ok
        & np.isfinite(err)
        & np.array([not r.degenerate and not g.wild for r, g in zip(fits, guarded, strict=True)])
    )
    if turn is not None:
        valid &= ~turns_back(cf, X, y, train, test, params, turn)
    return Scored(
        np.where(valid, err, np.nan), valid, time.perf_counter() - t0, np.where(valid, mse, np.nan)
    )


def _score(
    form: Form,
    s: dict,
    stop: int | None = None,
    only: np.ndarray | None = None,
    alive: np.ndarray | None = None,
) -> Scored:
    """Score ``form`` on every row of the nested masks (or the first ``stop``, or the rows
    ``only`` marks; the others are NaN). ``alive`` (rows,): of those, the rows fitted (a row
    whose training fit is hopeless, :mod:`~fitrules.jobs.search.hopeless`, is NaN), each
    fitted as in the call without it (``batch`` of :func:`score_form`).

    Under the cells-and-seeds protocol (``s["seeds"]``) outer split o is fitted on the runs
    at every seed id but fold ``o mod folds``'s, and its test cells scored on that fold's
    runs; each outer error is then rescaled by one factor that takes the expected excess off
    the mean square pooled over the outer splits
    (:meth:`fitrules.model.splits.SeedHoldout.rescale`). The inner rows, like the final
    ones, read every run of their cells, all of them outer training cells: the choice in an
    outer split reads as many runs per cell as the choice from all cells does."""
    masks = s["masks"]
    args = (s["objective"], s["options"], s["guard"])
    held = s.get("seeds")
    kw = dict(turn=s.get("turn"), weights=s.get("heldout"))
    n_all = len(masks.train)
    want = np.zeros(n_all, bool)
    want[: n_all if stop is None else stop] = True
    if only is not None:
        want &= only
    fit = want if alive is None else want & alive
    sizes = masks.train.sum(axis=1)
    err, valid, mse = np.full(n_all, np.nan), np.zeros(n_all, bool), np.full(n_all, np.nan)
    seconds = 0.0

    def run(base: np.ndarray, y, y_test=None) -> None:
        nonlocal seconds
        rows = base[fit[base]]
        if not len(rows):
            return
        if alive is None and len(rows) == n_all:
            sc = score_form(form, s["X"], y, masks, *args, **kw)
        else:
            sc = score_form(form, s["X"], y, masks, *args, rows=rows, y_test=y_test,
                            batch=None if alive is None else sizes[base], **kw)  # fmt: skip
        err[rows], valid[rows], mse[rows] = sc.error, sc.valid, sc.mse
        seconds += sc.seconds

    if held is None:
        run(np.flatnonzero(want), s["y"])
        return Scored(err, valid, seconds, mse)
    n_out = masks.n_outer
    for k, fold in enumerate(held["folds"]):
        rows = np.arange(k, n_out, len(held["folds"]))
        run(rows[want[rows]], fold["y_fit"], fold["y_test"])
    on = np.isfinite(mse[:n_out])
    if on.any():  # one factor: a split's few held-out cells are too noisy to correct alone
        err[:n_out] *= SeedHoldout.rescale(float(np.mean(mse[:n_out][on])), held["excess"])
    # inner rows read every id's runs, of outer training cells only (the held-out fold's effect
    # is there a common offset a form's linear constants absorb): ranking on 2 of 3 runs a
    # cell picked worse forms than the final choice does, and so quoted too high (issue 28)
    run(np.flatnonzero(want[n_out:]) + n_out, s["y"])
    mse[n_out:] = np.nan
    return Scored(err, valid, seconds, mse)
