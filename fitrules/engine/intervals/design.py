"""Positions in design steps: how the values of a variable become levels, and the
bandwidth of the cells' weights about a point.
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
    :meth:`HeldOut._design_position`); ``n`` cells in ``d`` varying variables."""
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
