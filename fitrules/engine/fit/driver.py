"""The fit of a form on each split: the grid, the search, Levenberg-Marquardt and the
diagnostics chained, in the values' own units; and refits from known constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import check_memory
from fitrules.engine.fit.diagnose import _diagnose
from fitrules.engine.fit.lm import _lm
from fitrules.engine.fit.memory import fit_memory
from fitrules.engine.fit.objective import Objective
from fitrules.engine.fit.options import FitOptions, FitResult
from fitrules.engine.fit.projection import GRID_CELLS, _grid_cells, _GridPieces, _profile
from fitrules.engine.fit.search import (
    _floors,
    _huber_rescore,
    _log_axes,
    _push_to_bounds,
    _refine,
    _starts,
    _theta_grid,
)
from fitrules.engine.fit.weights import _root_weights, _with_weights
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form


def fit_splits(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    masks: np.ndarray,
    objective: Objective | None = None,
    options: FitOptions | None = None,
    on_progress: Callable[[int], None] | None = None,
    weights: np.ndarray | None = None,
) -> list[FitResult]:
    """Fit ``form`` on the training cells of each split.

    Parameters
    ----------
    form : a form bound to the grid (its variables known).
    X : variable name -> values over all cells, each shape (n,).
    y : cell means, shape (n,); must be > 0 for the relative and log objectives.
    masks : (S, n) boolean; row s marks the training cells of split s.
    objective, options : training objective and search settings.
    on_progress : called with the number of splits finished after each batch.
    weights : per cell, the weight of its squared residual (see :func:`cell_weights`);
        ``None`` counts every cell once.

    Returns
    -------
    One :class:`FitResult` per split, in order.

    Examples
    --------
    >>> import numpy as np
    >>> from fitrules.model.forms import Form
    >>> x = np.arange(1.0, 9.0)
    >>> r = fit(Form("f", "L0 + a*x**b", ("x",)), {"x": x}, 2 + 0.5 * x**0.7)
    >>> round(r.constants["b"], 6)
    0.7
    """
    objective = objective or Objective()
    options = options or FitOptions()
    cf = CompiledForm(form)
    masks = np.atleast_2d(np.asarray(masks, bool))
    y = np.asarray(y, float)
    X = _with_weights(X, weights, objective, len(y))
    if objective.kind != "abs_ls" and (y <= 0).any():
        raise FitrulesError(
            f"objective {objective.kind} needs a positive metric; "
            f"found {y.min():g} (use {param('objective')} abs_ls)"
        )
    check_memory(
        fit_memory(
            form,
            len(y),
            len(masks),
            options,
            int(masks.sum(axis=1).max(initial=0)),
            objective.kind,
        ),
        f"fitting form {form.name!r} on {len(masks):,} splits of {len(y):,} cells",
        "use fewer splits, cells or constants",
    )
    # Fitted in units of a power of two near the values' scale when that is extreme (and
    # the form allows it): relative objectives do not depend on the scale, and the sums of
    # squares stay finite. Within 2**-16..2**16 nothing is rescaled.
    scale = value_scale(cf, y)
    y = y / scale
    thetas = _theta_grid(cf.s, options)
    # Each distinct training set is fitted once: random splits repeat (the verdict's 300
    # splits of 18 of 20 cells hold about 143 distinct ones), and a repeat's fit is the same.
    # A batch's starts are shared out by the number of splits asked, as before.
    distinct, which = _distinct_rows(masks)
    batch = min(len(masks), options.chunk_splits)
    results: list[FitResult] = []
    # floating-point overflow and 0/0 are expected at grid points far from a fit; every
    # value is checked for finiteness where it is used, so numpy's warnings are only noise
    with np.errstate(all="ignore"):
        pieces = _GridPieces(cf, X, y, objective, thetas, _grid_cells(cf, X, len(y)))
        # batches of splits bound the memory of the shared-grid arrays (grid x splits x k x k)
        for a in range(0, len(distinct), options.chunk_splits):
            chunk = distinct[a : a + options.chunk_splits]
            results += _fit_chunk(cf, X, y, chunk, objective, options, thetas, pieces, batch)
            if on_progress:
                on_progress(int(((which >= a) & (which < a + len(chunk))).sum()))
    if scale != 1.0:
        lin = set(cf.s.linear)
        factor = scale**2 if objective.kind == "abs_ls" else 1.0
        for r in results:
            r.constants = {c: v * scale if c in lin else v for c, v in r.constants.items()}
            r.objective *= factor
    out, seen = [], set()
    for i in which.tolist():
        r = results[i]
        if i in seen:  # a repeat gets its own copy: callers may change a result
            r = replace(r, constants=dict(r.constants), reasons=list(r.reasons))
        out.append(r)
        seen.add(i)
    return out


def _distinct_rows(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``masks`` in order of first appearance, and for each row of
    ``masks`` the index of its distinct row."""
    if len(masks) < 2:
        return masks, np.arange(len(masks))
    _, first, inverse = np.unique(masks, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return masks[first[order]], rank[np.ravel(inverse)]


SCALE_FREE_RANGE = 16  # values whose median magnitude is within 2**+-16 are fitted as they are


def value_scale(cf: CompiledForm, y: np.ndarray) -> float:
    """A power of two near the median magnitude of ``y``, or 1.

    Not 1 only when that magnitude is outside 2**-16..2**16 and every term of the form has a
    linear constant (so fitting y / scale gives the same fit with those constants divided
    by scale). A power of two makes the division exact.
    """
    s = cf.s
    if not s.linear or not (s.offset.op == "num" and s.offset.value == 0):
        return 1.0
    mags = np.abs(y[np.isfinite(y) & (y != 0)])
    if not len(mags):
        return 1.0
    e = int(np.round(np.log2(np.median(mags))))
    if abs(e) <= SCALE_FREE_RANGE:
        return 1.0
    scale = float(2.0**e)
    with np.errstate(all="ignore"):
        scaled = mags / scale
    # values spread over more than the double range (1e-300 next to 1e90) have no common
    # unit: leave them as they are, and let the fit's own checks flag what fails
    return scale if np.isfinite(scaled).all() and (scaled > 0).all() else 1.0


POLISH_SPLITS = 8  # fits of this few splits (a fit on all cells) are polished to 1e-14


def _polish(cf: CompiledForm, X, y, masks, objective, options, params, val):
    """Levenberg-Marquardt from each split's best point until a step gains less than
    1e-14 (relative): the search stops at 1e-9, which leaves the last digits of a single
    fit's objective to the optimiser (8e-9 above scipy's on some corpus cases)."""
    ok = np.flatnonzero(np.isfinite(val) & np.isfinite(params).all(axis=1))
    if not len(ok):
        return params, val
    x, v, _ = _lm(cf, X, y, masks[ok], objective, params[ok], options, tol=1e-14)
    better = v < val[ok]
    params, val = params.copy(), val.copy()
    params[ok[better]], val[ok[better]] = x[better], v[better]
    return params, val


def _fit_chunk(cf: CompiledForm, X, y, masks, objective, options, thetas, pieces, batch=None):
    """Fit one batch of splits; see :func:`fit_splits`. ``batch``: the number of splits
    asked that the batch stands for (its starts and polish are shared out by it)."""
    form = cf.form
    S = len(masks)
    n_asked = S if batch is None else batch
    on_grid = masks if pieces.sub is None else masks[:, pieces.sub]
    # the many splits of a comparison: the grid only ranks their starts (a fit of few
    # splits, whose constants are quoted, and a form with no nonlinear constant, which the
    # grid fits outright, keep the refined solve)
    q = len(cf.non_idx)
    values, c = _profile(pieces, on_grid, rank_only=q > 0 and n_asked > POLISH_SPLITS)
    if objective.kind == "log_huber" and len(thetas) > 1:
        values = _huber_rescore(pieces, pieces.y, on_grid, objective, values, c)
    rows, gidx = [], []
    n_train = int(masks.sum(axis=1).max(initial=1))
    extra = min(options.start_budget // max(n_asked, 1), options.start_cells // max(n_train, 1))
    n_starts = max(options.n_starts, extra)
    for si, picked in enumerate(_starts(values, thetas, cf.s, n_starts)):
        rows += [si] * len(picked)
        gidx += picked
    rows_a, gidx_a = np.array(rows, int), np.array(gidx, int)
    x = np.full((len(rows), cf.p), np.nan)
    val = values[gidx_a, rows_a] if len(rows) else np.zeros(0)
    moving = np.zeros(len(rows), bool)
    if len(rows):
        x[:, cf.lin_idx] = c[gidx_a, rows_a] / pieces.norm[gidx_a, 0, :]
        x[:, cf.non_idx] = thetas[gidx_a]
        if objective.kind == "log_huber" or (q and n_train > GRID_CELLS):
            # no exact projection for Huber, and over many cells a few Gauss-Newton steps
            # cost less than the ~20 rounds of the local grid: Levenberg-Marquardt on all
            # constants, from the grid's starts
            x, val, converged = _lm(
                cf, X, y, masks[rows_a], objective, x, options, groups=rows_a
            )
            moving = ~converged
        elif q:
            k = len(thetas) ** (1 / q)
            step = (np.array(cf.s.start_hi) - np.array(cf.s.start_lo)) / max(1.0, k - 1)
            logs, floors = _log_axes(cf.s), _floors(cf.s)
            if logs.any() or floors.any():  # one grid step around each start, in log units
                with np.errstate(all="ignore"):
                    ratio = (np.array(cf.s.start_hi) / np.array(cf.s.start_lo)) ** (
                        1 / max(1.0, k - 1)
                    )
                    signed = (np.array(cf.s.start_hi) / np.where(floors > 0, floors, 1.0)) ** (
                        1 / max(1.0, k // 2 - 1)
                    )
                step = np.where(logs, thetas[gidx_a] * (ratio - 1), step)
                step = np.where(floors > 0, np.abs(thetas[gidx_a]) * (signed - 1), step)
            # a fit on all cells (few splits) keeps the plain search: its constants are the
            # ones quoted, and on a flat ridge (a rank-deficient law) the plain path goes
            # further; the many splits of a comparison take the model-guided one
            guided = n_asked > POLISH_SPLITS
            theta, lin, val, moving = _refine(
                cf, X, y, masks[rows_a], objective, thetas[gidx_a], step, options, guided
            )
            x[:, cf.non_idx], x[:, cf.lin_idx] = theta, lin
    converged = ~moving
    if objective.kind != "log_huber" and moving.any():
        # rows whose window kept moving (an optimum off the grid, a constant running away):
        # Levenberg-Marquardt on all constants, from where the search stopped
        mv = np.flatnonzero(moving)
        start = x[mv].copy()
        xt, vt, ct = _lm(
            cf, X, y, masks[rows_a[mv]], objective, x[mv], options, groups=rows_a[mv]
        )
        gained = vt < val[mv] * (1 - 1e-9)
        x[mv[gained]], val[mv[gained]] = xt[gained], vt[gained]
        converged[mv] = ct & gained
        # Neither the search nor Levenberg-Marquardt could go on: the row sits on a flat ridge
        # where its window stopped, which is an artefact, not a fitted value. If the objective
        # is no worse at the bound the constants were heading for, the infimum lies there
        # (reported as "at its bound"); otherwise the row stays "did not converge".
        ridge = mv[~gained]
        if len(ridge):
            x[ridge], val[ridge], converged[ridge] = _push_to_bounds(
                cf,
                X,
                y,
                masks[rows_a[ridge]],
                objective,
                thetas[gidx_a[ridge]],
                start[~gained],
                val[ridge],
            )
    params = np.full((S, cf.p), np.nan)
    best_val = np.full(S, np.inf)
    best_conv = np.zeros(S, bool)
    for t, si in enumerate(rows):
        if val[t] < best_val[si]:
            params[si], best_val[si], best_conv[si] = x[t], val[t], converged[t]
    if n_asked <= POLISH_SPLITS:
        params, best_val = _polish(cf, X, y, masks, objective, options, params, best_val)
    diagnostics = _diagnose(cf, X, y, masks, params, objective, best_conv)
    return [
        FitResult(
            form.name,
            dict(zip(cf.s.constants, params[si].tolist(), strict=True)),
            float(best_val[si]),
            int(masks[si].sum()),
            bool(best_conv[si]),
            cond,
            reasons,
        )
        for si, (cond, reasons) in enumerate(diagnostics)
    ]


def fit(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    objective: Objective | None = None,
    options: FitOptions | None = None,
    weights: np.ndarray | None = None,
    candidates: Sequence[dict[str, float]] = (),
) -> FitResult:
    """Fit ``form`` on all cells (see :func:`fit_splits`), never worse than any of
    ``candidates`` there.

    ``candidates`` are constants found elsewhere (the fits of the splits of the same
    cells): each is scored on all cells, and when one scores below the fit, the best few
    are polished by Levenberg-Marquardt and the best result is taken. So the fit on all
    cells is never worse than a split's fit evaluated on the same cells.
    """
    objective = objective or Objective()
    options = options or FitOptions()
    all_cells = np.ones((1, len(y)), bool)
    (best,) = fit_splits(form, X, y, all_cells, objective, options, weights=weights)
    if not candidates:
        return best
    cf = CompiledForm(form)
    rows = [
        [c.get(k, np.nan) for k in cf.s.constants]
        for c in candidates
        if all(np.isfinite(c.get(k, np.nan)) for k in cf.s.constants)
    ]
    if not rows:
        return best
    P = np.array(rows, float)
    Xw = _with_weights(X, weights, objective, len(y))
    y = np.asarray(y, float)
    with np.errstate(all="ignore"):
        pred = cf.predict(Xw, P)
        r = objective.residuals(pred, y) * _root_weights(Xw)
        vals = objective.value(r, axis=1)
    vals = np.where(np.isfinite(r).all(axis=1), vals, np.inf)
    if not (vals.min(initial=np.inf) < best.objective):
        return best
    top = P[np.argsort(vals, kind="stable")[: min(8, len(P))]]
    scale = value_scale(cf, y)
    lin = [cf.s.constants.index(c) for c in cf.s.linear]
    top[:, lin] /= scale
    with np.errstate(all="ignore"):
        x, v, conv = _lm(
            cf,
            Xw,
            y / scale,
            np.ones((len(top), len(y)), bool),
            objective,
            top,
            options,
            tol=1e-14,
        )
    i = int(np.argmin(v))
    unit = scale**2 if objective.kind == "abs_ls" else 1.0  # the objective in y's units
    if not v[i] * unit < best.objective:
        return best
    params = x[i : i + 1].copy()
    masks = np.ones((1, len(y)), bool)
    with np.errstate(all="ignore"):
        ((cond, reasons),) = _diagnose(cf, Xw, y / scale, masks, params, objective, conv[i : i + 1])
    params[:, lin] *= scale
    value = float(v[i]) * unit
    return FitResult(
        form.name,
        dict(zip(cf.s.constants, params[0].tolist(), strict=True)),
        value,
        len(y),
        bool(conv[i]),
        cond,
        reasons,
    )


def refit(
    form: Form,
    X: dict[str, np.ndarray],
    Y: np.ndarray,
    start: dict[str, float],
    objective: Objective | None = None,
    options: FitOptions | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Refit ``form`` to many target vectors at once, each from the constants ``start``.

    For bootstrap replicates of a fit: each row of ``Y`` (B, n) is a resampled version of the
    data the fit at ``start`` was made on, so its optimum lies near ``start`` and a local
    Levenberg-Marquardt (Jacobi-scaled, all rows at once) finds it, where a global search
    per replicate would cost a search each.

    Returns
    -------
    params : (B, p) constants in the order of ``form.constants``.
    objective : (B,) training objective of each refit.
    converged : (B,) whether each refit converged (a row that did not is not a refit).
    """
    objective = objective or Objective()
    options = options or FitOptions()
    cf = CompiledForm(form)
    Y = np.atleast_2d(np.asarray(Y, float))
    X = _with_weights(X, weights, objective, Y.shape[1])
    # the same units as fit_splits: extreme scales are fitted in a power of two near them
    scale = value_scale(cf, Y.ravel())
    lin = [cf.s.constants.index(c) for c in cf.s.linear]
    x0 = np.tile([start[c] for c in cf.s.constants], (len(Y), 1)).astype(float)
    x0[:, lin] /= scale
    masks = np.ones(Y.shape, bool)
    with np.errstate(all="ignore"):  # non-finite values are checked where they are used
        params, value, converged = _lm(cf, X, Y / scale, masks, objective, x0, options, scaled=True)
    params[:, lin] *= scale
    if objective.kind == "abs_ls":
        value = value * scale**2
    return params, value, converged
