"""Leave-one-cell-out refits of a form, and its refits without each edge: what a
:class:`~fitrules.engine.intervals.prediction.HeldOut` reads its intervals from.
"""

from __future__ import annotations

import math

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import LEVEL
from fitrules.engine.fit import FitOptions, Objective, fit_splits
from fitrules.engine.intervals.design import _axis
from fitrules.engine.intervals.jacobian import jacobian_uncertainty
from fitrules.engine.intervals.noise import SeedNoise
from fitrules.engine.intervals.offset import NO_SHARED_IDS, SeedOffset, offset_response
from fitrules.engine.intervals.prediction import HeldOut
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form
from fitrules.model.grids import Cells


def heldout_fit(
    form: Form,
    cells: Cells,
    constants: dict[str, float],
    noise: SeedNoise,
    objective: Objective | None = None,
    level: float = LEVEL,
    options: FitOptions | None = None,
    offset: SeedOffset | None = None,
    offset_note: str = NO_SHARED_IDS,
) -> HeldOut:
    """Refit ``form`` once per cell with that cell left out, and keep the held-out residuals.

    Parameters
    ----------
    form : a bound form; cells : the cells it was fitted on; constants : that fit.
    noise : the seed noise of one run (see :func:`seed_noise`).
    objective : the training objective (``abs_ls`` makes the residuals absolute).
    level : level of the intervals.
    offset : the grid's seed offset (:func:`seed_offset`; None: no seed id shared across
        cells, and the intervals for a mean over new seed ids add nothing for it).
    offset_note : with no offset, why (:func:`no_offset_reason`), for the text.

    Returns
    -------
    HeldOut

    Examples
    --------
    >>> h = heldout_fit(form, cells, fit.constants, seed_noise(grid, form.bound_variables))
    ... # doctest: +SKIP
    >>> h.predict_at({"H": 8, "omega": 3}, runs=3)["interval_runs"]  # doctest: +SKIP
    """
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"{param('level')} {level}: must be in (0, 1), e.g. 0.95")
    obj = objective or Objective()
    n = len(cells)
    p = len(form.constants)
    if n < p + 2:
        raise FitrulesError(
            f"form {form.name!r}: {n} cells for {p} constants; an interval with the form's "
            f"misfit needs at least {p + 2} cells to leave one out"
        )
    X, y = cells.X, cells.y
    masks = ~np.eye(n, dtype=bool)
    fits = fit_splits(form, X, y, masks, obj, options)
    draws = np.full((n, p), np.nan)
    resid = np.full(n, np.nan)
    relative = obj.kind != "abs_ls"
    for i, r in enumerate(fits):
        if not np.isfinite(r.objective):
            continue
        theta = np.array([r.constants[c] for c in form.constants], float)
        Xi = {v: X[v][i : i + 1] for v in form.bound_variables}
        with np.errstate(all="ignore"):
            pi = float(CompiledForm(form).predict(Xi, theta[None, :])[0, 0])
            e = (y[i] - pi) / (abs(pi) if relative else 1.0)
        if np.isfinite(e) and np.isfinite(theta).all():
            draws[i], resid[i] = theta, e
    n_runs = cells.table["n_seeds"].to_numpy(float)
    robust = obj.kind == "log_huber"
    edges = _edge_residuals(form, X, y, obj, options, relative)
    response = None
    if offset is not None:
        response = offset_response(form, X, y, constants, obj, offset.shares, offset.relative)
    return HeldOut(
        form, dict(constants), X, y, n_runs, draws, resid, noise, relative, float(level), robust,
        offset, response, offset_note, edges,
    )  # fmt: skip


def _edge_residuals(form: Form, X, y, obj, options, relative: bool) -> dict:
    """Per variable with three or more levels, each edge's cells predicted by the form
    fitted without them: {variable: ((residuals, cell indices) at the low edge, the same at
    the high edge)}, NaN residuals where the refit failed. The edge is the extreme level
    (a factorial variable) or the as many most extreme cells as a factorial design's level
    would hold (a scattered one); an edge whose removal leaves fewer
    cells than the form's constants plus 1 is not refitted (NaN), nor is a variable that
    indexes per-level or per-group constants. Each edge also carries the refit's own
    prediction variance at its cells (delta method), which :meth:`HeldOut.fit_var`
    already counts."""
    n, p = len(y), len(form.constants)
    d = max(sum(len(np.unique(X[v])) > 1 for v in form.bound_variables), 1)
    masks, where = [], []
    # a variable indexing per-level or per-group constants has no fit without its edge level
    grouped = {*(form.levels or {}), *((form.by,) if form.by is not None else ())}
    for v in form.bound_variables:
        x = np.asarray(X[v], float)
        shift, levels, step = _axis(x, n, d)
        if len(levels) < 3 or v in grouped:
            continue
        u = x if shift is None else np.log(x + shift)
        if step is None:
            band = (u <= levels[0], u >= levels[-1])
        else:
            # as many cells as a factorial design's level holds (n over the levels per
            # variable): a band one step wide held a single run of Epoch's Chinchilla table at
            # its largest D, whose t quantile on 0 degrees of freedom made a 4x extrapolation's
            # interval -1.06 to 4.85 nats
            k = min(max(int(math.ceil(n / max(int(round(n ** (1 / d))), 2))), 2), n - p - 1)
            order = np.argsort(u, kind="stable")
            low, high = np.zeros(n, bool), np.zeros(n, bool)
            low[order[:k]], high[order[-k:]] = True, True
            band = (low, high)
        for side, held in enumerate(band):
            where.append((v, side, np.flatnonzero(held)))
            masks.append(~held)
    out: dict = {}
    if not masks:
        return out
    fits = fit_splits(form, X, y, np.array(masks), obj, options)
    cf = CompiledForm(form)
    for (v, side, idx), r, m in zip(where, fits, masks, strict=True):
        e, se2, s2 = np.full(len(idx), np.nan), np.zeros(len(idx)), math.nan
        if int(m.sum()) >= p + 1 and np.isfinite(r.objective):
            theta = np.array([r.constants[c] for c in form.constants], float)
            Xi = {k: X[k][idx] for k in form.bound_variables}
            with np.errstate(all="ignore"):
                f = cf.predict(Xi, theta[None, :])[0]
                scale = np.abs(f) if relative else 1.0
                e = (y[idx] - f) / scale
            e = np.where(np.isfinite(e), e, np.nan)
            # the refit's own error at the edge, which fit_var already carries: taken off
            u = jacobian_uncertainty(form, {k: a[m] for k, a in X.items()}, y[m], r.constants,
                                     obj)  # fmt: skip
            if u.ok:
                with np.errstate(all="ignore"):
                    se = u.prediction_se(form, Xi, r.constants) / scale
                se2 = np.where(np.isfinite(se), se**2, 0.0)
                s2 = float(u.residual_sd) ** 2
        pair = out.setdefault(v, [None, None])
        pair[side] = (e, idx, se2, s2)
    return {v: tuple(pair) for v, pair in out.items()}
