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
from fitrules.engine.fit.projection import _GridPieces, _profile
from fitrules.engine.fit.search import _theta_grid
from fitrules.jobs.search.protocol import asks_levels
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form

# a training RMS above this many times the lowest of the forms of no more constants, on the
# same training cells: hopeless there (benchmarks/bench_search.py --cost prints what it saves
# and that the picks of its extrapolation section are the same)
HOPELESS_RATIO = 3.0
# the share of the nested fits a search's plan counts before any is made (each further step
# of a growing budget is checked again with the share its earlier steps fitted):
# benchmarks/bench_search.py --cost prints the shares measured on the catalogue's grids
HOPELESS_SHARE = 0.3
PRUNED = "its training fit is hopeless"  # a dropped candidate's reason, and a skipped row's
# a staged search (jobs.search.staging.screen_size) that prunes also prescreens: of each kind of
# candidate (constants, nonlinear constants) only the PRESCREEN_KEEP with the lowest training
# RMS on an outer training set (on all cells, for the final choice) get its inner fits there
PRESCREEN_KEEP = 100
# the candidates of a kind a prescreen keeps somewhere, in units of PRESCREEN_KEEP, that a
# plan assumes before any fit (on the MoE variant grid 1.2 to 1.5 after twins were dropped:
# bench_search.py --only cost prints the candidates each reason dropped)
PRESCREEN_UNION = 2.0
PRESCREENED = "not among the best training fits of its kind"  # a dropped candidate's reason


def prunes(outer, objective: Objective) -> bool:
    """Whether a search with the outer protocol ``outer`` prunes hopeless training fits."""
    return objective.kind in ("rel_ls", "abs_ls") and not asks_levels(outer)


def training_rms(
    form: Form,
    X: dict,
    y: np.ndarray,
    train: np.ndarray,
    objective: Objective,
    options: FitOptions | None = None,
):
    """Per row of ``train`` (sets, cells), the lowest root mean square training residual of
    ``form`` over its nonlinear constants' starting grid (that of ``options``, default
    :class:`FitOptions`'), its linear constants solved by the fit's own variable projection
    (exact for a linear form, the only kind judged hopeless; an upper bound of the fit's for
    a form with exponents); None under an objective that is not least squares."""
    if objective.kind not in ("rel_ls", "abs_ls"):
        return None
    cf = CompiledForm(form)
    train = np.asarray(train, bool)
    with np.errstate(all="ignore"):
        pieces = _GridPieces(cf, X, y, objective, _theta_grid(cf.s, options or FitOptions()))
        sse, _ = _profile(pieces, train)  # (grid points, sets)
    return np.sqrt(sse.min(axis=0) / np.maximum(train.sum(axis=1), 1))


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


def prescreened(rms: np.ndarray, kinds: np.ndarray, keep: int) -> np.ndarray:
    """(C, R) whether each candidate falls outside the ``keep`` lowest training RMS (``rms``,
    C x R; NaN counts as the worst) of its kind (``kinds``, C x 2: constants and nonlinear
    constants) on each set: the rows a prescreen does not fit (ties broken by the
    candidates' order, so that the result does not depend on where the fits ran)."""
    out = np.zeros(rms.shape, bool)
    if not len(rms):
        return out
    _, kind_of = np.unique(np.asarray(kinds).reshape(len(rms), 2), axis=0, return_inverse=True)
    kind_of = kind_of.ravel()
    for k in np.unique(kind_of):
        idx = np.flatnonzero(kind_of == k)
        if len(idx) <= keep:
            continue
        r = np.where(np.isnan(rms[idx]), np.inf, rms[idx])
        rank = np.argsort(np.argsort(r, axis=0, kind="stable"), axis=0, kind="stable")
        out[idx] = rank >= keep
    return out
