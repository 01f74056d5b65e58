"""The extrapolation term: how fast a form's misfit grows beyond the cells it was fitted
on, read from refits without each edge.
"""

from __future__ import annotations

import math

import numpy as np


def edge_step_variances(edges: dict, own: np.ndarray) -> dict:
    """Per variable and edge, the misfit variance one step of extrapolation adds, from the
    edges' refits (:func:`~fitrules.engine.intervals.heldout._edge_residuals`) and each
    cell's seed-noise variance ``own`` (see ``HeldOut._edge_step_var``)."""
    out = {}
    for v, (low, high) in edges.items():
        pair = []
        for e, idx, se2, s2 in (low, high):
            ok = np.isfinite(e)
            # the refit's standard errors are scaled by its residual variance, which
            # under a wrong form is mostly misfit: only their seed-noise share is the
            # refit's own error (taking off all of it lost the misfit: one level beyond
            # in H under an additive truth covered 0.91, 200 grids; 0.955 with this)
            rest = np.ones(len(own), bool)
            rest[idx] = False
            noise = float(np.mean(own[rest])) if rest.any() else 0.0
            share = min(noise / s2, 1.0) if s2 > 0 else 1.0
            pair.append(
                max(float(np.mean(e[ok] ** 2 - own[idx][ok] - share * se2[ok])), 0.0)
                if ok.sum() else math.nan
            )  # fmt: skip
        out[v] = tuple(pair)
    # an edge that could not be refitted borrows the largest other edge's (none: 0)
    finite = [x for pair in out.values() for x in pair if math.isfinite(x)]
    fill = max(finite, default=0.0)
    return {v: tuple(x if math.isfinite(x) else fill for x in pair)
            for v, pair in out.items()}  # fmt: skip


MISFIT_SHOWN = 0.05  # the size of the tests (over every edge, Bonferroni) that an edge's
# refit misses by more than noise


def edge_misfit_shown(edges: dict, own: np.ndarray) -> dict:
    """Per variable and edge, whether the edge cells' residuals, when the form is fitted
    without them, show a misfit.

    Their sum of squares is tested against what the cells' own seed noise (independent
    from cell to cell) and the refit's prediction variance ``se2`` (taken as shared by every
    edge cell, since one refit's constants move them all: conservative) explain, a scaled
    chi-square matched to that sum's mean and variance (Satterthwaite); rejected at
    :data:`MISFIT_SHOWN` over the number of edges tested (Bonferroni). A plain chi-square on
    the cells counted, which takes the misses as independent, rejected a right form's edges
    in about a third of one-seed grids at 5% (issue 64)."""
    pvalues = {}
    for v, pair in edges.items():
        ps = []
        for edge in pair:
            ps.append(1.0 if edge is None else _misfit_pvalue(edge, own))
        pvalues[v] = ps
    size = MISFIT_SHOWN / max(sum(len(p) for p in pvalues.values()), 1)
    return {v: tuple(p < size for p in ps) for v, ps in pvalues.items()}


def _misfit_pvalue(edge, own: np.ndarray) -> float:
    """The p-value of :func:`edge_misfit_shown`'s test at one edge (1 with no cell)."""
    from scipy import stats

    e, idx, se2, _ = edge
    a, b = own[idx], se2
    ok = np.isfinite(e) & np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        return 1.0
    mean = float(a[ok].sum() + b[ok].sum())
    var = float(2 * (a[ok] ** 2).sum() + 2 * b[ok].sum() ** 2)
    if not (mean > 0 and var > 0):
        return 1.0
    g, h = var / (2 * mean), 2 * mean**2 / var
    return float(stats.chi2.sf(float((e[ok] ** 2).sum()) / g, h))


def beyond_edge_terms(
    pos: np.ndarray, cells: np.ndarray, variables, edges: dict, step_var: dict,
    growth: dict | None = None, shown: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Variance added at each point (design positions ``pos``) beyond the cells (``cells``),
    and its degrees of freedom: per variable, the steps beyond its edge squared (or, where
    larger, that side's ``growth`` at the point: see :func:`edge_growth`) times that edge's
    ``step_var`` (:func:`edge_step_variances`), summed; the degrees of freedom are the
    fewest cells of an edge the point lies beyond, less one (see ``HeldOut.edge_terms``).

    Where an edge's refit shows a misfit (``shown``: :func:`edge_misfit_shown`), the form is
    known to be wrong, and how its misfit grows beyond the cells is not known: it is taken
    to grow as a missed curvature would, with the square of that factor (at least the
    factor), and every edge the point lies beyond takes at least the largest step variance
    among the edges that show one (a misfit seen along one variable, such as keep, may grow
    along another the point extrapolates, such as H). Issue 64: on an 8 H x 3 keep grid with
    one seed id, two wrong forms were covered 0.83 one level beyond in H and 0.88 and 0.49
    one level beyond in keep (100 grids each) without it; a right form's edges rarely show
    a misfit, so its intervals rarely change (``HeldOut`` applies it with one seed id in
    every cell only)."""
    lo, hi = cells.min(axis=0), cells.max(axis=0)
    total, df = np.zeros(len(pos)), np.full(len(pos), np.inf)
    growth, shown = growth or {}, shown or {}
    seen = [(var, max(len(edges[v][s][0]) - 1, 1)) for v, flags in shown.items()
            for s, flag in enumerate(flags) if flag and v in step_var
            for var in [step_var[v][s]]]  # fmt: skip
    floor, floor_df = max(seen, default=(0.0, np.inf), key=lambda t: t[0])
    for j, v in enumerate(variables):
        if v not in step_var:
            continue
        steps = (np.maximum(lo[j] - pos[:, j], 0), np.maximum(pos[:, j] - hi[j], 0))
        for side, (d, var) in enumerate(zip(steps, step_var[v], strict=True)):
            hit = d > 0
            factor = d**2
            if v in growth:
                factor = np.fmax(factor, growth[v][side])
            own_df = max(len(edges[v][side][0]) - 1, 1)
            if shown.get(v, (False, False))[side]:
                factor = np.fmax(factor, factor**2)
            if floor > var:
                var, own_df = floor, min(own_df, floor_df)
            total[hit] += factor[hit] * var
            df[hit] = np.minimum(df[hit], own_df)
    return total, np.where(np.isfinite(df), df, 0.0)


def hidden_misfit_terms(
    pos: np.ndarray, cells: np.ndarray, variables, growth: dict, shown: dict, bound: float,
) -> tuple[np.ndarray, list[list[str]]]:  # fmt: skip
    """Variance at each point (design positions ``pos``) beyond the cells (``cells``) for a
    misfit that no edge shows: per variable, on each side the point lies beyond and whose
    edge does not show a misfit (``shown``: :func:`edge_misfit_shown`), the steps beyond
    squared (or, where larger, that side's ``growth``: :func:`edge_growth`) times ``bound``,
    the upper confidence bound of the misfit variance the held-out cells allow
    (``HeldOut.hidden_misfit_bound``), summed; and, per point, the variables counted.

    Where no edge shows a misfit, a wrong form's misfit cannot be told from the seed noise
    (one seed id in every cell, no repeats) and an edge's own step variance, read from its
    few cells (3 at an edge of H on an 8 x 3 grid) and cut at 0, says little: the largest
    misfit the whole grid's held-out residuals allow, grown with the distance beyond as the
    edge term grows, is the least the interval can take there."""
    lo, hi = cells.min(axis=0), cells.max(axis=0)
    total = np.zeros(len(pos))
    which: list[list[str]] = [[] for _ in range(len(pos))]
    if not bound > 0:
        return total, which
    for j, v in enumerate(variables):
        steps = (np.maximum(lo[j] - pos[:, j], 0), np.maximum(pos[:, j] - hi[j], 0))
        for side, d in enumerate(steps):
            if shown.get(v, (False, False))[side]:
                continue  # there the shown rule (beyond_edge_terms) holds, and is wider
            factor = np.fmax(d**2, growth[v][side]) if v in growth else d**2
            for i in np.flatnonzero(d > 0):
                total[i] += factor[i] * bound
                which[i].append(v)
    return total, which


def edge_growth(beyond: np.ndarray, edge: np.ndarray, scale_edge: np.ndarray,
                scale_point: np.ndarray) -> np.ndarray:  # fmt: skip
    """How much more the form changes from its edge to each point than across its last
    step inside the cells, squared, on the residuals' scale: ``(|beyond| / |edge| *
    scale_edge / scale_point)^2`` (NaN where the last step does not change the form).

    A wrong form's misfit one level beyond grows with what it is asked to extrapolate, not
    with the count of levels: with keeps 1, 1/4, 1/16, keep 1/64 is one level beyond on the
    log scale, yet a form linear in omega = 1/keep - 1 extrapolates 48 units past the edge
    where the edge's refit extrapolated 12 (issue 64: the interval at the grid's seed id
    covered 0.31 and 0.00 there under two wrong forms, 100 grids each, without it).

    Examples
    --------
    >>> edge_growth(np.array([4.0]), np.array([1.0]), np.array([1.0]), np.array([2.0]))
    array([4.])
    """
    with np.errstate(all="ignore"):
        g = (np.abs(beyond) / np.abs(edge) * scale_edge / scale_point) ** 2
    return np.where(np.isfinite(g), g, np.nan)


def extrapolation_ratios(point: dict[str, float], variables, X: dict[str, np.ndarray]) -> dict:
    """For each variable outside the range of the cells ``X``: how far ``point`` lies, as a
    ratio (see ``HeldOut.extrapolation``)."""
    out = {}
    for v in variables:
        x, cells = float(point[v]), X[v]
        lo, hi = float(np.min(cells)), float(np.max(cells))
        if lo <= x <= hi:
            continue
        if lo > 0 and x > 0:
            out[v] = x / hi if x > hi else lo / x
        else:
            out[v] = 1 + (x - hi if x > hi else lo - x) / max(hi - lo, 1e-300)
    return out
