"""Positions in design steps: where a point lies among the fitted cells, level by level,
and the Gaussian weights of the cells about it.
"""

from __future__ import annotations

import numpy as np

LOCAL_BANDWIDTH = 0.75  # design steps: nearest cells of a point between levels weigh most;
# in exploratory runs before the benchmark (30 grids each, seed 1, the design and truths of
# bench_intervals.py's seeds section) 0.5 covered 0.93 at interior points under iid noise and
# the wrong form, and 1.0 smoothed the lean away (3.4x the rms error)
SCATTERED = 2  # a variable with more than this many times the levels a factorial design of
# as many cells has per variable is scattered (positions in steps of its range), else factorial
# (positions count its levels): 60 runs at distinct N in 2 variables (8 a side) are scattered;
# 24 levels of one variable, or 8 H of an 8 x 3 grid, are levels


def _axis(x: np.ndarray, n: int, d: int) -> tuple:
    """How values of one variable become design positions: ``(shift, levels, step)``, read
    on ``log(x + shift)`` (shift None: on ``x``), ``levels`` the distinct values on that
    scale, ``step`` None for a factorial variable, else one step's width (see
    :func:`design_position`); ``n`` cells in ``d`` varying variables."""
    shift = _log_shift(x)
    u = x if shift is None else np.log(x + shift)
    levels = np.unique(u)
    per_axis = max(int(round(n ** (1 / max(d, 1)))), 2)
    step = None
    if len(levels) > SCATTERED * per_axis:
        step = (levels[-1] - levels[0]) / (per_axis - 1)
    return shift, levels, step


def _log_shift(x: np.ndarray) -> float | None:
    """The shift ``s`` under which a variable is read as ``log(x + s)``: 0 for positive
    values, the smallest positive value when the smallest is 0, None (read as it is) when
    any value is negative or none is positive."""
    if not len(x) or not np.all(np.isfinite(x)) or x.min() < 0:
        return None
    if x.min() > 0:
        return 0.0
    pos = x[x > 0]
    return float(pos.min()) if len(pos) else None


def design_axes(X: dict[str, np.ndarray], variables, ok: np.ndarray) -> list[tuple]:
    """Per variable, how a value becomes a position in design steps (see
    :func:`design_position`): ``(shift, levels, step)`` with positions read on
    ``log(x + shift)`` (``shift`` None: on ``x`` itself), ``levels`` the fitted cells' (``ok``)
    distinct values on that scale and ``step`` None for a factorial variable (positions
    count levels) or the width of one step for a scattered one (see :func:`_axis`)."""
    n = int(ok.sum())
    cols = {v: np.asarray(X[v], float)[ok] for v in variables}
    d = max(sum(len(np.unique(x)) > 1 for x in cols.values()), 1)
    return [_axis(x, n, d) for x in cols.values()]


def design_position(X: dict[str, np.ndarray], variables, axes: list[tuple]) -> np.ndarray:
    """(m, d) each point's position in the design, so that one step is one level
    whatever the variable's scale or design. Each variable is read on the log of its
    values when they are positive (``log(x + s)`` when the smallest is 0, ``s`` the
    smallest positive value: omega in {0, 1, 3, 7, 15} reads as log(1 + omega)), else on
    the values. A factorial variable (no more than ``SCATTERED`` times the levels a
    factorial design of as many cells has per variable) counts levels:
    fractional between them and, beyond them, the end step on that scale, so that
    H = 256 after 16, 64 and keep = 1/32 after 1/8, 1/16 are each one level beyond. A
    scattered variable (issue 42: 60 runs at distinct N, where the point at twice the
    largest N lay a median 22 steps beyond, once 26,723) counts in steps of its range
    over the levels a factorial design of as many cells would have per variable.
    ``axes``: :func:`design_axes` of the fitted cells."""
    cols = []
    for v, (shift, levels, step) in zip(variables, axes, strict=True):
        x = np.asarray(X[v], float)
        if shift is None:
            u = x
        else:
            with np.errstate(all="ignore"):
                u = np.log(np.maximum(x + shift, np.finfo(float).tiny))
        if len(levels) < 2:
            cols.append(np.zeros_like(u))
            continue
        if shift is not None and (x + shift <= 0).any():
            # below the log scale's domain (0 of a positive variable): its distance below
            # the smallest value in units of the first step, on the values themselves
            raw = np.exp(levels[:2]) - shift
            lin = levels[0] + (x - raw[0]) / (raw[1] - raw[0]) * (levels[1] - levels[0])
            u = np.where(x + shift > 0, u, lin)
        if step is not None:
            cols.append((u - levels[0]) / step)
            continue
        idx = np.arange(len(levels), dtype=float)
        pos = np.interp(u, levels, idx)
        lo, hi = levels[1] - levels[0], levels[-1] - levels[-2]
        pos = np.where(u < levels[0], (u - levels[0]) / lo, pos)
        pos = np.where(u > levels[-1], idx[-1] + (u - levels[-1]) / hi, pos)
        cols.append(pos)
    return np.stack(cols, axis=-1)


def gaussian_weights(pos: np.ndarray, cells: np.ndarray, loo: bool = False) -> np.ndarray:
    """(m, n) Gaussian weights of the cells at positions ``cells`` (n, d) about each point
    at ``pos`` (m, d), in design steps (``loo``: the points are the cells, each given no
    weight of its own). Each row is shifted by its nearest cell's distance, so that a point
    far beyond still has weights; normalised, the shift cancels."""
    d2 = ((pos[:, None, :] - cells[None]) ** 2).sum(axis=-1)
    if loo:
        np.fill_diagonal(d2, np.inf)
    d2 = d2 - d2.min(axis=1, keepdims=True)
    return np.exp(-0.5 * d2 / LOCAL_BANDWIDTH**2)
