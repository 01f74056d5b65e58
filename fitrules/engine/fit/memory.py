"""The memory a fit needs at its peak, estimated before anything is allocated."""

from __future__ import annotations

from fitrules.base.limits import OBJECTIVES
from fitrules.engine.fit.options import FitOptions
from fitrules.engine.fit.projection import GRID_CELLS, PIECE_ELEMENTS
from fitrules.engine.fit.search import FULL_STENCIL_MAX_Q
from fitrules.model.forms import Form


def fit_memory(
    form: Form,
    n_cells: int,
    n_splits: int,
    options: FitOptions | None = None,
    n_train: int | None = None,
    objective: str = OBJECTIVES[0],
) -> float:
    """Bytes :func:`fit_splits` will need at its peak, estimated before allocating.

    Its phases, each counted with its temporaries: building the shared grid's pieces (grid
    points x cells x k x k for k linear constants, with the outer products made twice), then,
    with those pieces kept, the largest of one batch of splits' normal equations (grid
    points x batch x k x k), the local search (starts x batch x window x training cells x k),
    Levenberg-Marquardt (starts x batch x training cells x constants^2) and the diagnostics
    (a batch's Jacobians and their thin SVD). ``n_train`` is the largest number of cells a
    split fits (default: all of them). Levenberg-Marquardt runs on every row for
    ``objective="log_huber"``, and otherwise only on rows whose search kept moving (none
    without a nonlinear constant). Measured against peak RSS by benchmarks/bench_memory.py.
    """
    options = options or FitOptions()
    s = form.structure
    q, k, p = len(s.nonlinear), len(s.linear), len(s.constants)
    n = max(int(n_cells), 1)
    nt = n if n_train is None else max(min(int(n_train), n), 1)
    if q == 0:
        G = 1
    elif q <= len(options.grid_points):
        G = options.grid_points[q - 1] ** q
    else:
        G = options.grid_points_high_dim
    C = min(max(n_splits, 1), options.chunk_splits)
    window = 3**q if q <= FULL_STENCIL_MAX_Q else 2 * q + 1
    T = max(options.n_starts * C, min(options.start_budget, options.start_cells // nt))
    # the grid is scored on at most GRID_CELLS cells, chunk by chunk of PIECE_ELEMENTS
    # (grid points x cells) when larger, kept when it fits in one chunk
    ng = min(n, GRID_CELLS) if q else n
    per_chunk = min(G * ng, max(PIECE_ELEMENTS, G))
    kept = 8.0 * G * ng * (k + 2) if G * ng <= PIECE_ELEMENTS else 0.0
    build = kept + 8.0 * per_chunk * (2 * k * k + 3 * k + 5)  # while they are made
    batch = 8.0 * G * C * (3 * k * k + 4 * k + 24)  # normal equations and their solves
    search = 8.0 * T * window * nt * (4 * k + 8) if q else 0.0
    lm = 8.0 * T * nt * (2 * p * p + 3 * p + 8) if q or objective == "log_huber" else 0.0
    diagnose = 8.0 * C * nt * (3 * p + 4)
    return max(build, kept + max(batch, search, lm, diagnose))
