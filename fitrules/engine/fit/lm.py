"""Levenberg-Marquardt on all constants, every row (a split and a start) at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fitrules.engine.fit.objective import Objective
from fitrules.engine.fit.options import FitOptions
from fitrules.engine.fit.projection import _solve
from fitrules.engine.fit.weights import _root_weights
from fitrules.model.compiled import CompiledForm


def _gather(X, y, masks):
    """Each row's training cells only, when every row has the same number of them."""
    counts = masks.sum(axis=1)
    if len(counts) and (counts == counts[0]).all() and counts[0] < masks.shape[1]:
        take = np.argsort(~masks, axis=1, kind="stable")[:, : counts[0]]
        return {v: a[take] for v, a in X.items()}, y[take], np.ones(take.shape, bool)
    T = len(masks)
    return (
        {v: np.broadcast_to(a, (T, len(a))) for v, a in X.items()},
        np.broadcast_to(y, (T, y.shape[-1])),  # y may be (n,) or one row per fit (T, n)
        masks,
    )


def _lm(
    cf: CompiledForm,
    X,
    y,
    masks,
    objective: Objective,
    x0: np.ndarray,
    opts: FitOptions,
    scaled: bool | None = None,
    tol: float = 1e-9,
    groups: np.ndarray | None = None,
):
    """Levenberg-Marquardt on all constants, every row (a split and a start) at once.

    Least-squares objectives use the Gauss-Newton model; log-Huber uses the iteratively
    reweighted one (weight 1 inside +-delta, delta/|r| outside, the quadratic that touches
    the Huber loss at the current residuals) with its clipped gradient, on a Jacobi-scaled
    system. A step is kept only where it lowers the objective; the damping of each row
    adapts on its own. A row is done when a kept step gains less than 1e-9 (relative), its
    steps vanish, or no damping finds a lower point.
    ``y`` is (n,) or one target vector per row (T, n). ``scaled`` (default: for log-Huber)
    solves a Jacobi-scaled system. ``groups`` (one integer a row, the rows of one split
    sharing theirs): a row is dropped, not converged, when even :data:`PACE` times its pace
    over the last :data:`WINDOW` iterations, kept up for every iteration left, would leave it
    above its group's best row (:func:`_hopeless`).
    Returns the constants, the objective and which rows converged.
    """
    X, y, m = _gather(X, y, masks)
    m = m.astype(float) * (_root_weights(X) * np.ones(m.shape))  # weights scale residuals
    lo, hi = np.array(cf.s.lower), np.array(cf.s.upper)
    with np.errstate(invalid="ignore"):
        inner_lo = np.where(np.isfinite(lo), lo + 1e-12 * (1 + np.abs(lo)), lo)
        inner_hi = np.where(np.isfinite(hi), hi - 1e-12 * (1 + np.abs(hi)), hi)
    huber = objective.kind == "log_huber"
    # constants searched on a log scale (Nc ~ 1e13) sit beside exponents ~ 0.1: scale too
    scaled = (huber or any(cf.s.log_axes) or any(cf.s.floors)) if scaled is None else scaled
    rows = _LMRows(cf, X, y, m, objective, inner_lo, inner_hi, scaled)
    T = len(x0)
    x = np.clip(np.nan_to_num(x0), inner_lo, inner_hi)
    val, pred, r = rows.evaluate(x, np.arange(T))
    lam = np.full(T, 1e-3)
    done = ~np.isfinite(val)
    converged = np.zeros(T, bool)
    n_iter = opts.huber_iterations if huber else opts.lm_iterations
    then = val.copy()
    for it in range(n_iter):
        if groups is not None and it >= WINDOW and it % WINDOW == 0:
            done |= _hopeless(val, then, groups, n_iter - it)
            then = val.copy()
        idx = np.flatnonzero(~done)
        if len(idx) == 0:
            break
        xi = x[idx]
        new_x = rows.step(idx, xi, r[idx], pred[idx], lam[idx])
        new_val, new_pred, new_r = rows.evaluate(new_x, idx)
        better = new_val < val[idx]
        gain = np.where(better, (val[idx] - new_val) / np.maximum(val[idx], 1e-300), 0.0)
        acc = idx[better]
        x[acc], val[acc], pred[acc], r[acc] = (
            new_x[better],
            new_val[better],
            new_pred[better],
            new_r[better],
        )
        lam[idx] = np.where(better, np.maximum(lam[idx] / 3, 1e-12), lam[idx] * 4)
        tiny = np.all(np.abs(new_x - xi) <= 0.1 * tol * (np.abs(xi) + 1e-8), axis=1)
        small = (better & (gain < tol)) | tiny
        stuck = ~better & (lam[idx] > 1e8)
        converged[idx[small | stuck]] = True
        done[idx[small | stuck]] = True
    return x, val, converged


WINDOW = 20  # iterations over which a row's pace is measured
PACE = 4.0  # a row is dropped when even this many times its pace cannot reach its group's best


def _hopeless(val: np.ndarray, then: np.ndarray, groups: np.ndarray, left: int) -> np.ndarray:
    """Rows that cannot reach their group's best row in the ``left`` iterations remaining,
    even at :data:`PACE` times the pace they kept since ``then`` (their values
    :data:`WINDOW` iterations ago). The best row of a group is never one of them. On
    Chinchilla's 240 runs (log-Huber) 4 of 9 starts crawl at twice the optimum's objective,
    gaining 5% in 200 iterations, and kept the fit running to the 800-iteration cap."""
    best = np.full(int(groups.max(initial=0)) + 1, np.inf)
    np.minimum.at(best, groups, val)
    with np.errstate(all="ignore"):
        pace = np.maximum(then - val, 0.0) / WINDOW
        reach = val - PACE * pace * left
        return np.isfinite(val) & (reach > best[groups] * (1 + 1e-9))


@dataclass(frozen=True)
class _LMRows:
    """The rows of one Levenberg-Marquardt fit: their cells, weights and bounds."""

    cf: CompiledForm
    X: dict
    y: np.ndarray
    m: np.ndarray  # (T, n): each row's training cells, times the root weights
    objective: Objective
    inner_lo: np.ndarray
    inner_hi: np.ndarray
    scaled: bool

    def evaluate(self, x: np.ndarray, rows: np.ndarray):
        """The objective, prediction and weighted residuals of ``rows`` at constants ``x``."""
        objective, m = self.objective, self.m
        Xr = {v: a[rows] for v, a in self.X.items()}
        pred = self.cf.predict(Xr, x)
        with np.errstate(all="ignore"):
            r = objective.residuals(pred, self.y[rows]) * m[rows]
        r = np.where(m[rows] > 0, r, 0.0)
        with np.errstate(all="ignore"):
            val = objective.value(r, axis=1)
        val = np.where(np.isfinite(r).all(axis=1), val, np.inf)
        return val, pred, r

    def step(self, idx: np.ndarray, xi, ri, pi, lam) -> np.ndarray:
        """The damped step of rows ``idx`` from ``xi``, clipped to the bounds."""
        cf, objective, inner_lo, inner_hi = self.cf, self.objective, self.inner_lo, self.inner_hi
        Xr = {v: a[idx] for v, a in self.X.items()}
        mi = self.m[idx]
        with np.errstate(all="ignore"):
            J = cf.jacobian(Xr, xi) * (objective.dres_dpred(pi, self.y[idx]) * mi)[..., None]
        J = np.where(np.isfinite(J), J, 0.0)
        Jt = np.swapaxes(J, -1, -2)
        if objective.kind == "log_huber":
            d = objective.delta
            g = (Jt @ (np.clip(ri, -d, d) * mi)[..., None])[..., 0]
            w = mi * np.minimum(1.0, d / np.maximum(np.abs(ri), 1e-300))
            H = (Jt * w[:, None, :]) @ J
        else:
            g = (Jt @ ri[..., None])[..., 0]
            H = Jt @ J
        diag = np.maximum(np.diagonal(H, axis1=1, axis2=2), 1e-30)
        A = H + lam[:, None, None] * (diag[:, :, None] * np.eye(cf.p))
        # Active set: a constant at its bound whose descent direction points out of the box
        # is held there and the step solved for the others. Clipping the full step instead
        # moves along the box's face in a direction that need not descend, and the fit
        # stalls at the bound (Muennighoff's law stopped at rd = 1000, SSE 14.5 for 10.5).
        held = ((xi <= inner_lo) & (g > 0)) | ((xi >= inner_hi) & (g < 0))
        if held.any():
            free = ~held
            A = A * (free[:, :, None] & free[:, None, :]) + held[:, :, None] * np.eye(cf.p)
            g = np.where(held, 0.0, g)
        if self.scaled:
            # Jacobi scaling first: Huber's weights (delta/|r| outside +-delta) and constants
            # of very different sizes (B ~ 1e3 next to an exponent ~ 0.3) put the diagonal
            # entries 1e10 apart, and the solver's ridge, relative to the trace, would swamp
            # the small ones (most Chinchilla-shaped fits then crawled and were flagged).
            # Least-squares rows keep the plain solve that the committed reports were made with.
            sc = 1.0 / np.sqrt(np.maximum(np.diagonal(A, axis1=1, axis2=2), 1e-300))
            step = sc * _solve(A * sc[:, :, None] * sc[:, None, :], -g * sc)
        else:
            step = _solve(A, -g)
        return np.clip(xi + step, inner_lo, inner_hi)
