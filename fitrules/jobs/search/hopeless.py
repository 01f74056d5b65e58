"""Hopeless training fits: a candidate whose best fit to an outer training set (or to all
cells) leaves residuals several times those of a form of no more constants is not fitted
on that set's inner splits (or on the final splits), since no ranking there could pick it.

The training fits are least squares, exact for a linear form (no nonlinear constant): only
linear forms are pruned, and compared with the linear forms of no more constants. (Read on the
grid a fit starts from, a form with exponents can fit far worse than at its optimum: on the
MoE variant grid ``L0 + a1*(E/16)**e1*(N/1e8)**e2``, whose exponents lie between the grid's
points near 0, showed 4.4 times the lowest training RMS there and was the pick of 318c40e at
4 constants.) Only the
training cells of each set are read: an outer split's inner ranking learns nothing of its
held-out cells.

Nothing is pruned under log-Huber (not least squares) nor under a question about unseen
levels (``extrapolate:COL``, ``leave-one-level-out:COL``): there the training fit does not
tell the forms apart. On a test grid asked along N and D the form that extrapolated best (outer
error 12.6% against 25.3%) had 3.5 times the lowest training RMS of its budget.
"""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit import FitOptions, Objective
from fitrules.engine.fit.search import _theta_grid
from fitrules.jobs.search.protocol import asks_levels
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form

# a training RMS above this many times the lowest of the forms of no more constants, on the
# same training cells: hopeless there (benchmarks/bench_search.py --cost prints what it saves
# and that the picks of its extrapolation section are the same)
HOPELESS_RATIO = 3.0
# the nonlinear constants' grid the training fits are read on: the search's own starting grid
HOPELESS_GRID = FitOptions(grid_points=(41, 17, 9))
# the share of the nested fits a search's plan counts before any is made (each further step
# of a growing budget is checked again with the share its earlier steps fitted):
# benchmarks/bench_search.py --cost prints the shares measured on the catalogue's grids
HOPELESS_SHARE = 0.3
PRUNED = "its training fit is hopeless"  # a dropped candidate's reason, and a skipped row's


def prunes(outer, objective: Objective) -> bool:
    """Whether a search with the outer protocol ``outer`` prunes hopeless training fits."""
    return objective.kind in ("rel_ls", "abs_ls") and not asks_levels(outer)


def training_rms(form: Form, X: dict, y: np.ndarray, train: np.ndarray, objective: Objective):
    """Per row of ``train`` (sets, cells), the lowest root mean square training residual of
    ``form`` over its nonlinear constants' grid (exact for a linear form); None under an
    objective that is not least squares."""
    if objective.kind not in ("rel_ls", "abs_ls"):
        return None
    cf = CompiledForm(form)
    thetas = _theta_grid(cf.s, HOPELESS_GRID)  # (G, q)
    G, L = len(thetas), len(cf.lin_idx)
    params = np.zeros((G, L + 1, cf.p))
    params[:, :, cf.non_idx] = thetas[:, None, :]
    for j, c in enumerate(cf.lin_idx):
        params[:, j + 1, c] = 1.0
    with np.errstate(all="ignore"):
        pred = cf.predict(X, params.reshape(G * (L + 1), cf.p)).reshape(G, L + 1, -1)
        base = objective.residuals(pred[:, 0], y[None, :])  # (G, n): the offset alone
        Z = (pred[:, 1:] - pred[:, :1]) * objective.dres_dpred(pred[:, 0], y[None, :])[:, None]
        return _least_squares_rms(base, Z, np.asarray(train, bool))


def _least_squares_rms(base: np.ndarray, Z: np.ndarray, train: np.ndarray) -> np.ndarray:
    """min over g of the RMS of ``base[g] + c @ Z[g]`` on each row's cells, over c."""
    ok = np.isfinite(base).all(axis=1) & np.isfinite(Z).all(axis=(1, 2))  # (G,)
    base, Z = base[ok], Z[ok]
    m = train.astype(float)  # (R, n)
    count = np.maximum(m.sum(axis=1), 1.0)
    if not len(base):
        return np.full(len(train), np.inf)
    total = np.einsum("rn,gn->gr", m, base**2)  # (G, R)
    if Z.shape[1]:
        scale = np.maximum(np.sqrt((Z**2).sum(axis=2)), 1e-300)  # columns of one size
        Zs = Z / scale[:, :, None]
        A = np.einsum("rn,gjn,gkn->grjk", m, Zs, Zs)
        b = np.einsum("rn,gjn,gn->grj", m, Zs, base)
        # columns of unit norm: a ridge of 1e-10 of the trace keeps a column without effect
        # on a set (a level not fitted) from breaking the solve, and moves nothing else
        ridge = 1e-10 * np.maximum(np.trace(A, axis1=2, axis2=3), 1e-300)
        A = A + ridge[..., None, None] * np.eye(A.shape[-1])
        c = np.linalg.solve(A, b[..., None])[..., 0]
        total = total - np.einsum("grj,grj->gr", c, b)
    sse = np.maximum(np.where(np.isfinite(total), total, np.inf), 0.0).min(axis=0)
    return np.sqrt(sse / count)


def hopeless(rms: np.ndarray, n_constants: np.ndarray, best: dict[int, np.ndarray]):
    """(C, R) whether each candidate's training fit (``rms``, C x R) is hopeless on each
    set: above :data:`HOPELESS_RATIO` times the lowest RMS on that set of the candidates of
    no more constants, these and those in ``best`` (constants -> lowest RMS per set, of
    earlier steps; updated with these)."""
    for k in np.unique(n_constants):
        low = rms[n_constants == k].min(axis=0)
        best[int(k)] = np.fmin(best.get(int(k), np.full(rms.shape[1], np.inf)), low)
    ks = sorted(best)
    ref = {k: np.min([best[j] for j in ks if j <= k], axis=0) for k in ks}
    floor = np.array([ref[int(k)] for k in n_constants]).reshape(rms.shape)
    return rms > HOPELESS_RATIO * floor
