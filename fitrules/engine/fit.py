"""Fitting a form's constants to cells: the global optimum of the training objective.

For fixed values of the nonlinear constants, the constants that enter linearly solve a
weighted least-squares problem exactly (variable projection). The nonlinear constants
(usually one to three exponents) are searched on a grid shared by every split, so all splits
of a form are scored in a few array operations. From the best grid point of each separate
basin of each split:

- least-squares objectives refine the nonlinear constants on shrinking local grids (the
  linear ones re-solved exactly at every point), all splits at once;
- log-Huber, whose linear constants the projection only approximates, is finished by
  Levenberg-Marquardt on all constants, all splits at once.

A least-squares row whose window keeps moving (an optimum beyond the grid, a constant
running away) is finished by the same Levenberg-Marquardt, with the analytic Jacobian of the
parsed expression; a row that does not converge within its iterations is flagged. The
fit is then checked, again for all splits at once, for the ways its constants can fail to be
identified; those become named reasons, not errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fitrules.base.errors import FitrulesError
from fitrules.base.limits import HUBER_DELTA, OBJECTIVES, WEIGHTS, check_memory
from fitrules.model import expr as ex
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form, Structure, base_name, format_level

RANK_TOL = 1e-9  # singular values below this fraction of the largest count as zero
COND_LIMIT = 1e6  # condition number of the scaled Jacobian above which a fit is flagged
TINY = 1e-300
WEIGHT_KEY = "\x00weights"  # cell weights ride along with the variables (never a name: NUL)


@dataclass(frozen=True)
class Objective:
    """The training objective.

    ``rel_ls``: sum of squared relative residuals (pred - y) / y (default; matches the
    relative held-out error). ``log_huber``: sum of Huber(log pred - log y, delta), the
    Chinchilla convention (a sum, not a mean). ``abs_ls``: sum of squared residuals.

    Parameters
    ----------
    kind : {"rel_ls", "log_huber", "abs_ls"}, optional
        The objective (default ``"rel_ls"``).
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).

    Raises
    ------
    FitrulesError
        For an unknown kind, or a delta that is not finite and > 0.
    """

    kind: str = OBJECTIVES[0]
    delta: float = HUBER_DELTA

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise FitrulesError(
                f"objective {self.kind!r} is unknown; allowed: " + ", ".join(OBJECTIVES)
            )
        if not (np.isfinite(self.delta) and self.delta > 0):
            raise FitrulesError(f"--delta {self.delta}: the Huber delta must be finite and > 0")

    def residuals(self, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.kind == "abs_ls":
            return pred - y
        if self.kind == "rel_ls":
            return (pred - y) / y
        return np.log(np.maximum(pred, TINY)) - np.log(y)

    def dres_dpred(self, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.kind == "abs_ls":
            return np.ones_like(y)
        if self.kind == "rel_ls":
            return 1.0 / y
        return 1.0 / np.maximum(pred, TINY)

    def value(self, r: np.ndarray, axis: int | None = None) -> np.ndarray:
        if self.kind == "log_huber":
            a = np.abs(r)
            d = self.delta
            return np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d)).sum(axis=axis)
        return (r * r).sum(axis=axis)

    def describe(self) -> str:
        return f"log_huber(delta={self.delta:g})" if self.kind == "log_huber" else self.kind


@dataclass
class FitOptions:
    """Search settings: grid points per nonlinear dimension and polished starts per split."""

    grid_points: Sequence[int] = (121, 41, 17)  # for 1, 2, 3 nonlinear constants
    grid_points_high_dim: int = 4096  # quasi-random points for 4 or more
    n_starts: int = 2  # starts per split, from separate basins of the grid
    # starts shared out among the splits of a batch when that gives each more than
    # n_starts: a fit on all cells polishes 64 starts, which multi-basin laws need
    # (Muennighoff's data-constrained law has four local optima on its grid)
    start_budget: int = 64
    start_cells: int = 20_000  # ... as long as starts x training cells stay within this
    resolution: float = 1e-6  # local refinement stops at this fraction of the start range
    max_rounds: int = 80  # local refinement rounds, counting moves of the window
    lm_iterations: int = 200  # Levenberg-Marquardt iterations; a row still moving is flagged
    huber_iterations: int = 800  # the same for log-Huber, whose kinks slow the last steps
    chunk_splits: int = 512  # splits fitted together; bounds memory at any number of splits


@dataclass
class FitResult:
    """One fit of a form on one set of training cells, with its diagnostics.

    Attributes
    ----------
    constants : fitted value of each constant.
    objective : training objective at the fit.
    converged : the optimiser reported convergence.
    reasons : why the constants may not be identified; empty when the fit is well posed.
    cond : condition number of the column-scaled Jacobian at the fit.
    """

    form: str
    constants: dict[str, float]
    objective: float
    n_train: int
    converged: bool
    cond: float
    reasons: list[str] = field(default_factory=list)

    @property
    def degenerate(self) -> bool:
        return bool(self.reasons)


def _theta_grid(s: Structure, opts: FitOptions) -> np.ndarray:
    q = len(s.nonlinear)
    if q == 0:
        return np.zeros((1, 0))
    lo, hi = np.array(s.start_lo), np.array(s.start_hi)
    logs = np.array(s.log_axes or [False] * q, bool)
    floors = _floors(s)
    if q <= len(opts.grid_points):
        k = opts.grid_points[q - 1]
        axes = []
        for i in range(q):
            if floors[i] > 0:  # both signs, each on a log scale
                negative = -np.geomspace(hi[i], floors[i], k // 2)
                axes.append(np.concatenate([negative, np.geomspace(floors[i], hi[i], k - k // 2)]))
            elif logs[i]:
                axes.append(np.geomspace(lo[i], hi[i], k))
            else:
                axes.append(np.linspace(lo[i], hi[i], k))
        return np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    from scipy.stats import qmc  # only for four or more nonlinear constants: slow to import

    pts = qmc.Sobol(q, scramble=True, seed=0).random(opts.grid_points_high_dim)
    with np.errstate(all="ignore"):
        in_log = np.exp(np.log(lo) + pts * (np.log(hi) - np.log(lo)))
        u = 2 * pts - 1
        in_signed = np.sign(u) * floors * np.exp(np.abs(u) * np.log(hi / floors))
    out = np.where(logs, in_log, lo + pts * (hi - lo))
    return np.where(floors > 0, in_signed, out)


def _floors(s: Structure) -> np.ndarray:
    """Per nonlinear constant, the smallest magnitude of a both-sign log axis (0: none)."""
    return np.array(s.floors or [0.0] * len(s.nonlinear), float)


def _log_axes(s: Structure) -> np.ndarray:
    return np.array(s.log_axes or [False] * len(s.nonlinear), bool)


def _search_scale(s: Structure, theta: np.ndarray) -> np.ndarray:
    """Per row, the size of each nonlinear constant's starting range, in its own units:
    the range's width, or for a log-scale axis the width of its log range at ``theta``."""
    span = np.maximum(np.array(s.start_hi) - np.array(s.start_lo), 1e-12)
    logs, floors = _log_axes(s), _floors(s)
    if not (logs.any() or floors.any()):
        return np.broadcast_to(span, theta.shape)
    with np.errstate(all="ignore"):
        decades = np.log(np.array(s.start_hi) / np.array(s.start_lo))
        signed = np.log(np.array(s.start_hi) / np.where(floors > 0, floors, 1.0))
    out = np.where(logs, np.abs(theta) * decades, span)
    return np.where(floors > 0, np.abs(theta) * signed, out)


def _weights(objective: Objective, y: np.ndarray, X=None) -> np.ndarray:
    # log-Huber is profiled with relative least squares: log(p/y) ~ (p - y)/y near the fit
    base = np.ones_like(y) if objective.kind == "abs_ls" else 1.0 / y
    return base * _root_weights(X)


def _root_weights(X) -> np.ndarray | float:
    """Square roots of the cell weights carried in ``X`` (1 when cells count equally)."""
    if X is None or WEIGHT_KEY not in X:
        return 1.0
    return np.sqrt(X[WEIGHT_KEY])


def _evaluate_pieces(cf: CompiledForm, X, thetas: np.ndarray):
    """Basis (..., n, k), offset (..., n) and finiteness at nonlinear values (..., q)."""
    s = cf.s
    lead = thetas.shape[:-1]
    n = next(iter(X.values())).shape[-1]
    # X values are (n,) shared by all rows, or (T, n): each row its own (training) cells
    env = {
        v: X[v].reshape(X[v].shape[:-1] + (1,) * (len(lead) + 1 - X[v].ndim) + (n,))
        for v in cf.form.bound_variables
    }
    env.update({c: thetas[..., i][..., None] for i, c in enumerate(s.nonlinear)})
    with np.errstate(all="ignore"):
        cols = [np.broadcast_to(ex.evaluate(b, env), (*lead, n)) for b in s.basis]
        basis = np.stack(cols, axis=-1) if cols else np.zeros((*lead, n, 0))
        offset = np.broadcast_to(ex.evaluate(s.offset, env), (*lead, n)).astype(float)
    finite = np.isfinite(basis).all(axis=-1) & np.isfinite(offset)
    basis = np.where(finite[..., None], basis, 0.0)
    offset = np.where(finite, offset, 0.0)
    return basis, offset, finite


def _solve_small_symmetric(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve stacks of symmetric 1x1, 2x2 or 3x3 systems by cofactors, element-wise.

    Batched LAPACK calls cost about a microsecond per tiny matrix; these formulas handle a
    grid x splits stack in a few passes over flat arrays.
    """
    k = A.shape[-1]
    r = [rhs[..., i] for i in range(k)]
    if k == 1:
        return (r[0] / A[..., 0, 0])[..., None]
    if k == 2:
        a, b, d = A[..., 0, 0], A[..., 0, 1], A[..., 1, 1]
        det = a * d - b * b
        return np.stack([(d * r[0] - b * r[1]) / det, (a * r[1] - b * r[0]) / det], axis=-1)
    a, b, c = A[..., 0, 0], A[..., 0, 1], A[..., 0, 2]
    d, e, f = A[..., 1, 1], A[..., 1, 2], A[..., 2, 2]
    c00, c01, c02 = d * f - e * e, c * e - b * f, b * e - c * d
    c11, c12, c22 = a * f - c * c, b * c - a * e, a * d - b * b
    det = a * c00 + b * c01 + c * c02
    return np.stack(
        [
            (c00 * r[0] + c01 * r[1] + c02 * r[2]) / det,
            (c01 * r[0] + c11 * r[1] + c12 * r[2]) / det,
            (c02 * r[0] + c12 * r[1] + c22 * r[2]) / det,
        ],
        axis=-1,
    )


def _solve(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Batched symmetric solve with a tiny ridge and one step of iterative refinement."""
    k = A.shape[-1]
    if k == 0:
        return np.zeros(rhs.shape)
    ridge = 1e-13 * np.trace(A, axis1=-2, axis2=-1)[..., None, None] + 1e-300
    Ar = A + ridge * np.eye(k)
    if k <= 3:
        with np.errstate(all="ignore"):
            c = _solve_small_symmetric(Ar, rhs)
            return c + _solve_small_symmetric(Ar, rhs - (A * c[..., None, :]).sum(-1))
    c = np.linalg.solve(Ar, rhs[..., None])
    c = c + np.linalg.solve(Ar, rhs[..., None] - A @ c)
    return c[..., 0]


PIECE_ELEMENTS = 1 << 21  # grid points x cells evaluated at once: bounds the grid's memory


class _GridPieces:
    """What the shared grid needs that does not depend on the split.

    The basis of every grid point over the cells, scaled to unit norm per column, its
    offset and where it is finite. Small grids keep them; over many cells (200,000 cells x
    121 grid points would be 1.5 GB an array) they are remade chunk by chunk of cells when
    used, so memory stays at ``PIECE_ELEMENTS`` x a few arrays, whatever the cell count.
    """

    def __init__(self, cf: CompiledForm, X, y, objective: Objective, thetas, cells=None) -> None:
        # ``cells``: the cells the grid is scored on (all when None); see _grid_cells
        self.sub = cells
        if cells is not None:
            X = {v: a[..., cells] for v, a in X.items()}
            y = y[cells]
        self.cf, self.X, self.y, self.thetas = cf, X, y, thetas
        self.w2 = _weights(objective, y, X) ** 2
        G, n = len(thetas), len(y)
        step = max(1, PIECE_ELEMENTS // max(G, 1))
        self.slices = [slice(a, min(a + step, n)) for a in range(0, n, step)] or [slice(0, 0)]
        k = len(cf.s.linear)
        norm2 = np.zeros((G, 1, k))
        self._kept = None
        for sl in self.slices:
            basis, offset, finite = self._evaluate(sl)
            norm2 += (basis**2).sum(axis=1, keepdims=True)
            if len(self.slices) == 1:
                self._kept = (basis, offset, finite)
        # basis columns scaled to unit norm so that the normal equations stay conditioned
        norm = np.sqrt(norm2)
        self.norm = np.where(norm > 0, norm, 1.0)  # (G, 1, k)
        if self._kept is not None:
            basis, offset, finite = self._kept
            self._kept = (basis / self.norm, offset, finite)

    def _evaluate(self, sl: slice):
        X = {v: a[..., sl] for v, a in self.X.items()}
        return _evaluate_pieces(self.cf, X, self.thetas)

    def chunks(self):
        """(cells, scaled basis (G, c, k), offset (G, c), finite (G, c)) per chunk."""
        if self._kept is not None:
            yield (self.slices[0], *self._kept)
            return
        for sl in self.slices:
            basis, offset, finite = self._evaluate(sl)
            yield sl, basis / self.norm, offset, finite

    def at(self, idx: np.ndarray):
        """Scaled basis and offset over all cells at grid points ``idx`` (any shape)."""
        basis, offset, _ = _evaluate_pieces(self.cf, self.X, self.thetas[idx])
        return basis / self.norm[idx], offset


GRID_CELLS = 8192  # above this many cells the shared grid is scored on a spread of them


def _grid_cells(cf: CompiledForm, X, n: int) -> np.ndarray | None:
    """The cells the shared grid is scored on: all of them up to GRID_CELLS; beyond, that
    many spread evenly through the table plus every variable's extremes. The grid only
    locates the basins; every start is then finished on all cells, so the optimum is the
    one of all cells while the grid's cost stops growing with their number."""
    if n <= GRID_CELLS or not cf.s.nonlinear:
        return None
    take = np.linspace(0, n - 1, GRID_CELLS).astype(int)
    ends = [int(f(X[v])) for v in cf.form.bound_variables for f in (np.argmin, np.argmax)]
    return np.union1d(take, ends)


def _profile(g: _GridPieces, masks):
    """Training objective at grid points shared by every split, linear constants solved.

    ``masks`` (S, n). Returns the objective (G, S) and the scaled coefficients (G, S, k).
    The basis does not depend on the split, so the normal equations of all splits are one
    matrix product with the masks, and so is the residual sum of squares (expanded as
    t'Wt - 2c'r + c'Ac), accumulated over chunks of cells. The values are (relative) least
    squares for every objective; for log-Huber they are a ranking that
    :func:`_huber_rescore` refines.
    """
    G, S, k = len(g.thetas), len(masks), g.norm.shape[-1]
    A = np.zeros((G, S, k, k))
    rhs = np.zeros((G, S, k))
    tt = np.zeros((G, S))
    bad = np.zeros((G, S), bool)
    for sl, bs, offset, finite in g.chunks():
        m = masks[:, sl].astype(float)
        w2 = g.w2[sl]
        target = g.y[None, sl] - offset
        wt = w2 * target
        A += np.einsum("gnk,gnj,n,sn->gskj", bs, bs, w2, m, optimize=True)
        rhs += np.einsum("gnk,gn,sn->gsk", bs, wt, m, optimize=True)
        tt += (wt * target) @ m.T
        bad |= (~finite).astype(float) @ m.T > 0
    c = _solve(A, rhs)  # (G, S, k)
    out = tt - 2 * np.einsum("gsk,gsk->gs", c, rhs)
    out += np.einsum("gsk,gskj,gsj->gs", c, A, c)
    out = np.maximum(out, 0.0)
    out[bad | ~np.isfinite(out)] = np.inf
    return out, c


def _profile_rows(cf: CompiledForm, X, y, masks, objective: Objective, thetas):
    """As :func:`_profile`, each row t with its own training mask and points ``thetas[t]``.

    ``thetas`` (T, L, q); ``masks`` (T, n). Returns objective (T, L), coefficients (T, L, k).
    """
    basis, offset, finite = _evaluate_pieces(cf, X, thetas)  # (T, L, n, k), (T, L, n)
    norm = np.sqrt((basis**2).sum(axis=2, keepdims=True))
    norm = np.where(norm > 0, norm, 1.0)
    bs = basis / norm
    m = masks.astype(float)  # (T, n)
    yb = y if y.ndim == 1 else y[:, None, :]  # y is (n,) or per row (T, n)
    sw = m * _weights(objective, y, X)  # square root of the row weights
    bw = np.swapaxes(bs * sw[:, None, :, None], -1, -2)  # (T, L, k, n)
    A = bw @ np.swapaxes(bw, -1, -2)
    rhs = (bw @ (sw[:, None, :] * (yb - offset))[..., None])[..., 0]
    c = _solve(A, rhs)
    pred = offset + (bs @ c[..., None])[..., 0]
    with np.errstate(all="ignore"):
        rw = np.asarray(_root_weights(X))
        rw = rw[..., None, :] if rw.ndim else rw
        r = np.where(m[:, None, :] > 0, objective.residuals(pred, yb) * rw, 0.0)
        out = objective.value(r, axis=2)
    bad = ((~finite) & (m[:, None, :] > 0)).any(axis=2)
    out[bad | ~np.isfinite(out)] = np.inf
    return out, c / norm[:, :, 0, :]


FULL_STENCIL_MAX_Q = 3  # up to 3 nonlinear constants the local window is a full 3^q grid


def _stencil(q: int) -> tuple[np.ndarray, int]:
    """Offsets of the local search window and the index of its centre.

    A full 3^q grid for q <= 3 (27 points at most); beyond, the centre and one step either
    way along each axis (2q + 1 points), so the cost grows linearly with q, not as 3^q.
    """
    if q <= FULL_STENCIL_MAX_Q:
        offsets = np.linspace(-1, 1, 3)
        local = np.stack([a.ravel() for a in np.meshgrid(*[offsets] * q, indexing="ij")], axis=1)
        return local, (len(local) - 1) // 2
    eye = np.eye(q)
    return np.concatenate([np.zeros((1, q)), eye, -eye]), 0


def _refine(cf: CompiledForm, X, y, masks, objective, theta0, step, opts: FitOptions):
    """Local pattern search on the profiled objective, every row at once.

    Each round scores a small grid of +-h around each row's point. When the best point is on
    the window's edge the window moves without shrinking (the optimum lies further out);
    otherwise it shrinks. Rows stop at ``resolution`` x their start range. Returns the
    nonlinear values, the linear constants, the objective, and which rows were still moving
    when the rounds ran out.
    """
    T, q = theta0.shape
    counts = masks.sum(axis=1)
    if len(counts) and (counts == counts[0]).all() and counts[0] < masks.shape[1]:
        # every row fits the same number of cells: work on those cells only
        take = np.argsort(~masks, axis=1, kind="stable")[:, : counts[0]]
        X = {v: a[take] for v, a in X.items()}
        y = y[take]
        masks = np.ones(take.shape, bool)
    lo = np.array(cf.s.lower)[cf.non_idx]
    hi = np.array(cf.s.upper)[cf.non_idx]
    local, centre = _stencil(q)
    theta = theta0.copy()
    h = np.broadcast_to(np.asarray(step, float), (T, q)).copy()
    val = np.full(T, np.inf)
    lin = np.zeros((T, len(cf.lin_idx)))
    active = np.ones(T, bool)
    for _ in range(opts.max_rounds):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        grid = np.clip(theta[idx, None, :] + local[None] * h[idx, None, :], lo, hi)
        Xi = {v: a[idx] if a.ndim == 2 else a for v, a in X.items()}
        vals, coefs = _profile_rows(
            cf, Xi, y[idx] if y.ndim == 2 else y, masks[idx], objective, grid
        )
        # keep the current point on ties so a flat direction does not drift
        vals[:, centre] -= 1e-15 * np.abs(vals[:, centre])
        best = np.argmin(vals, axis=1)
        rows = np.arange(len(idx))
        theta[idx] = grid[rows, best]
        val[idx], lin[idx] = vals[rows, best], coefs[rows, best]
        on_edge = (np.abs(local[best]) == 1) & (theta[idx] > lo) & (theta[idx] < hi)
        shrink = ~on_edge.any(axis=1)
        h[idx[shrink]] *= 0.5
        span = _search_scale(cf.s, theta[idx])
        active[idx] = (h[idx] > opts.resolution * span).any(axis=1)
    return theta, lin, val, active


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
):
    """Levenberg-Marquardt on all constants, every row (a split and a start) at once.

    Least-squares objectives use the Gauss-Newton model; log-Huber uses the iteratively
    reweighted one (weight 1 inside +-delta, delta/|r| outside, the quadratic that touches
    the Huber loss at the current residuals) with its clipped gradient, on a Jacobi-scaled
    system. A step is kept only where it lowers the objective; the damping of each row
    adapts on its own. A row is done when a kept step gains less than 1e-9 (relative), its
    steps vanish, or no damping finds a lower point.
    ``y`` is (n,) or one target vector per row (T, n). ``scaled`` (default: for log-Huber)
    solves a Jacobi-scaled system.
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
    for _ in range(opts.huber_iterations if huber else opts.lm_iterations):
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


def _push_to_bounds(cf: CompiledForm, X, y, masks, objective, theta_start, x, val):
    """Move ridge rows' nonlinear constants to the bound they were travelling towards.

    Returns the constants, objective and convergence flag of each row: at the bound when the
    objective there is no worse (the search ran out of rounds on the way), else unchanged and
    not converged.
    """
    theta = x[:, cf.non_idx]
    lo = np.array(cf.s.lower)[cf.non_idx]
    hi = np.array(cf.s.upper)[cf.non_idx]
    travel = theta - theta_start
    target = np.where(travel > 0, hi, np.where(travel < 0, lo, theta))
    target = np.where(np.isfinite(target), target, theta)
    new_val, coefs = _profile_rows(cf, X, y, masks, objective, target[:, None, :])
    new_val, coefs = new_val[:, 0], coefs[:, 0]
    take = new_val <= val * (1 + 1e-9)
    out = x.copy()
    out[np.ix_(take, cf.non_idx)] = target[take]
    out[np.ix_(take, cf.lin_idx)] = coefs[take]
    return out, np.where(take, new_val, val), take


def _huber_rescore(g: _GridPieces, y, masks, objective, values, c, keep: int = 64):
    """Log-Huber values at each split's ``keep`` best grid points by least squares.

    Huber with a small delta is close to least absolute deviations, so its ranking can
    differ from least squares; the shortlist is wide enough to hold its basins, and its
    points are re-ranked by the Huber loss at their least-squares linear constants (the
    starts that Levenberg-Marquardt then finishes). Points off the shortlist get an infinite
    value.
    """
    G, S = values.shape
    keep = min(keep, G)
    top = np.argsort(values, axis=0, kind="stable")[:keep].T  # (S, keep)
    cols = np.arange(S)[:, None]
    bs, offset = g.at(top)  # (S, keep, n, k), (S, keep, n)
    pred = offset + (bs @ c[top, cols][..., None])[..., 0]  # (S, keep, n)
    with np.errstate(all="ignore"):
        r = np.where(masks[:, None, :], objective.residuals(pred, y), 0.0)
        hv = objective.value(r, axis=2)
    hv[~np.isfinite(hv) | ~np.isfinite(values[top, cols])] = np.inf
    out = np.full((G, S), np.inf)
    out[top, cols] = hv
    return out


def _starts(values: np.ndarray, thetas: np.ndarray, s: Structure, n_starts: int) -> list[int]:
    """Indices of the best grid points from separate basins (at least 2.5 steps apart)."""
    order = np.argsort(values, kind="stable")
    order = order[np.isfinite(values[order])]
    if len(order) == 0:
        return []
    if thetas.shape[1] == 0:
        return [int(order[0])]
    logs, floors = _log_axes(s), _floors(s)
    lo_s, hi_s = np.array(s.start_lo), np.array(s.start_hi)
    if logs.any() or floors.any():  # basins are apart in log units on a log-scale axis
        with np.errstate(all="ignore"):
            f = np.where(floors > 0, floors, 1.0)
            signed = np.sign(thetas) * np.log(np.maximum(np.abs(thetas) / f, 1.0))
            thetas = np.where(logs, np.log(np.abs(thetas) + 1e-300), thetas)
            thetas = np.where(floors > 0, signed, thetas)
            top = np.log(hi_s / f)
            lo_s, hi_s = (
                np.where(floors > 0, -top, np.where(logs, np.log(lo_s), lo_s)),
                np.where(floors > 0, top, np.where(logs, np.log(hi_s), hi_s)),
            )
    span = np.maximum(hi_s - lo_s, 1e-12)
    step = span / max(2, round(len(thetas) ** (1 / thetas.shape[1])) - 1)
    picked = [int(order[0])]
    # look further down the ranking when many starts are wanted (a single fit on all cells)
    for i in order[1 : max(200, 40 * n_starts)]:
        if len(picked) >= n_starts:
            break
        if np.all(np.any(np.abs(thetas[picked] - thetas[i]) > 2.5 * step, axis=1)):
            picked.append(int(i))
    return picked


def _diagnose(cf: CompiledForm, X, y, masks, params, objective, converged):
    """Condition numbers and reasons for every split at once; params (S, p)."""
    ok = np.isfinite(params).all(axis=1)
    safe = np.where(ok[:, None], params, 0.0)
    Js, colnorm, sv_full, vt = _relative_jacobians(cf, X, y, masks, safe, objective)
    smax = sv_full.max(axis=1)
    null = sv_full <= RANK_TOL * smax[:, None]
    with np.errstate(divide="ignore"):
        cond = np.where(sv_full.min(axis=1) > 0, smax / sv_full.min(axis=1), np.inf)
    validity = _validity(cf, X, safe)
    out = []
    for si in range(len(masks)):
        mask = masks[si]
        n = int(mask.sum())
        if not ok[si]:
            out.append((np.inf, ["no starting point gives a finite prediction"]))
            continue
        reasons, idle = _unfitted_level_reasons(cf, X, mask)
        p_eff = cf.p - len(idle)
        if n < p_eff + 1:
            reasons.append(
                f"only {n} training cells for {p_eff} constants (need at least {p_eff + 1})"
            )
        null_si, cond_si, vt_si, sv_si = null[si], cond[si], vt[si], sv_full[si]
        if idle:  # the unfitted levels' constants are set aside, not a rank deficiency
            null_si, cond_si, vt_si, sv_si = _spectrum_without(cf, Js[si], idle)
        names = cf.s.constants
        weak = {names[j] for j in np.flatnonzero(colnorm[si] == 0) if names[j] not in idle}
        for i in np.flatnonzero(null_si):
            weak |= {names[j] for j in np.flatnonzero(np.abs(vt_si[i]) > 0.1)}
        design = _design_reasons(cf, X, mask, weak)
        reasons.extend(design)
        if not design and n >= p_eff:
            reasons += _rank_reasons(cf, params[si], null_si, cond_si, vt_si, sv_si, weak, p_eff)
        reasons += _bound_reasons(cf, params[si])
        if not converged[si]:
            reasons.append("optimiser did not converge")
        if validity[si]:
            reasons.append(validity[si])
        out.append((float(cond_si), reasons))
    return out


def _relative_jacobians(cf: CompiledForm, X, y, masks, safe: np.ndarray, objective):
    """Each split's Jacobian of the weighted residuals in relative sensitivities, its
    columns' norms, singular values and right singular vectors."""
    S = len(masks)
    Xg, yg, mg = _gather(X, y, masks)  # each split's training cells
    pred = cf.predict(Xg, safe)  # (S, n_train)
    with np.errstate(all="ignore"):
        J = cf.jacobian(Xg, safe) * objective.dres_dpred(pred, yg)[..., None]
        J = J * np.asarray(_root_weights(Xg))[..., None]
    J = np.where(np.isfinite(J) & mg[..., None], J, 0.0)
    # Relative sensitivities: each column scaled by its constant's size (at least 1), so a
    # constant whose effect has vanished (an exponent run off to where its term is ~0) is a
    # tiny column instead of being normalised back to unit length.
    Js = np.clip(J * np.maximum(np.abs(safe), 1.0)[:, None, :], -1e150, 1e150)
    colnorm = np.linalg.norm(Js, axis=1)  # (S, p)
    if Js.shape[1] < cf.p:  # fewer cells than constants: zero rows give all p directions
        Js = np.concatenate([Js, np.zeros((S, cf.p - Js.shape[1], cf.p))], axis=1)
    # only the singular values and right singular vectors are needed: the thin SVD's left
    # vectors are (S, n, p), where full ones would be (S, n, n), splits x n_train^2
    _, sv, vt = np.linalg.svd(Js, full_matrices=False)  # sv (S, p), vt (S, p, p)
    sv_full = np.zeros((S, cf.p))
    sv_full[:, : sv.shape[1]] = sv
    return Js, colnorm, sv_full, vt


def _unfitted_level_reasons(cf: CompiledForm, X, mask: np.ndarray) -> tuple[list[str], list[str]]:
    """A reason per level with no training cell, and the constants it leaves unfitted."""
    reasons = []
    missing = cf.unfitted(X, mask)
    idle = [c for c, at in cf.level_of.items() if any(a in missing for a in at)]
    for col, level in missing:
        own = [c for c in idle if (col, level) in cf.level_of[c]]
        at = f"{col}={format_level(level)}"
        reasons.append(
            f"level {at} has no training cell: {', '.join(own)} not fitted, held-out "
            f"cells at {at} cannot be predicted"
        )
    return reasons, idle


def _spectrum_without(cf: CompiledForm, Js_si: np.ndarray, idle: list[str]):
    """One split's null directions, condition number, right singular vectors and singular
    values over the constants it fits."""
    keep = [j for j, c in enumerate(cf.s.constants) if c not in idle]
    _, sv_k, vt_k = np.linalg.svd(Js_si[:, keep], full_matrices=True)
    sv_si = np.zeros(len(keep))
    sv_si[: len(sv_k)] = sv_k
    null_si = sv_si <= RANK_TOL * sv_si.max()
    cond_si = sv_si.max() / sv_si.min() if sv_si.min() > 0 else np.inf
    vt_si = np.zeros((len(keep), cf.p))
    vt_si[:, keep] = vt_k
    return null_si, cond_si, vt_si, sv_si


def _design_reasons(cf: CompiledForm, X, mask: np.ndarray, weak: set[str]) -> list[str]:
    """A reason per variable the training cells hold at one value."""
    names = cf.s.constants
    design = []
    for v in cf.form.bound_variables:
        values = np.unique(X[v][mask])
        if len(values) == 1:
            which = [c for c in names if c in weak]
            what = (
                f"{', '.join(which)} {'is' if len(which) == 1 else 'are'} not identifiable"
                if which
                else "its effect cannot be identified"
            )
            design.append(f"all training cells have {v}={values[0]:g}: {what}")
    return design


def _rank_reasons(
    cf: CompiledForm, x, null_si, cond_si, vt_si, sv_si, weak: set[str], p_eff: int
) -> list[str]:
    """A reason when the Jacobian at the fit is rank-deficient or badly conditioned."""
    names = cf.s.constants
    if null_si.any():
        rank = int((~null_si).sum())
        return [
            f"Jacobian is rank-deficient at the fit (rank {rank} of {p_eff}; "
            f"{', '.join(c for c in names if c in weak)} not identifiable)",
            *_edge_hints(cf, x),
        ]
    if cond_si > COND_LIMIT:
        worst = np.abs(vt_si[np.argmin(sv_si)])
        top = [names[j] for j in np.argsort(-worst)[:2]]
        return [
            f"Jacobian is badly conditioned at the fit (condition number "
            f"{cond_si:.1e}; weakest direction mostly {', '.join(top)})"
        ]
    return []


def _bound_reasons(cf: CompiledForm, x: np.ndarray) -> list[str]:
    """A reason per constant at one of its bounds, with how to widen it."""
    lo, hi = np.array(cf.s.lower), np.array(cf.s.upper)
    reasons = []
    for j, c in enumerate(cf.s.constants):
        # near a bound relative to the bound itself: a range over decades (A in
        # [540, 4e15]) is not "at" 540 when A = 1e8
        near_lo = np.isfinite(lo[j]) and x[j] - lo[j] <= 1e-6 * max(1.0, abs(lo[j]))
        near_hi = np.isfinite(hi[j]) and hi[j] - x[j] <= 1e-6 * max(1.0, abs(hi[j]))
        if near_lo or near_hi:
            kind = "bound"
            if base_name(c) not in cf.form.bounds and c in cf.form.ranges:
                kind = f"default bound (its range as {cf.form.ranges[c].role})"
            reasons.append(
                f"constant {c} is at its {kind} {lo[j] if near_lo else hi[j]:g}; widen it "
                f"with --bound '{base_name(c)}=LOW..HIGH' (or bounds in forms.toml)"
            )
    return reasons


VALIDITY_CELLS = 2048  # cells at most whose terms are checked (with the box's corners)


def _check_points(cf: CompiledForm, X) -> dict[str, np.ndarray]:
    """Where a fit must be defined: the grid's cells (a spread of at most VALIDITY_CELLS,
    every variable's extremes among them) and the corners and midpoints of the box they
    span (3^d points for d <= 4 variables, the 2^d corners up to 6)."""
    names = [v for v in cf.form.bound_variables if v in X]
    n = len(X[names[0]]) if names else 0
    take = np.unique(np.linspace(0, n - 1, min(n, VALIDITY_CELLS)).astype(int)) if n else []
    for v in names:
        take = np.union1d(take, [int(np.argmin(X[v])), int(np.argmax(X[v]))])
    points = {v: X[v][take] for v in names}
    d = len(names)
    if 0 < d <= 6:
        axes = []
        for v in names:
            lo, hi = float(np.min(X[v])), float(np.max(X[v]))
            mid = np.sqrt(lo * hi) if lo > 0 and hi > 10 * lo else (lo + hi) / 2
            axes.append([lo, mid, hi] if d <= 4 else [lo, hi])
        box = np.meshgrid(*axes, indexing="ij")
        points = {
            v: np.concatenate([points[v], b.ravel()]) for v, b in zip(names, box, strict=True)
        }
    return points


def _subterms(node: ex.Node, constants: set[str]) -> list[ex.Node]:
    """The nodes of ``node`` that read a constant, innermost first (each once)."""
    out: list[ex.Node] = []
    for a in node.args:
        if isinstance(a, ex.Node):
            out += _subterms(a, constants)
    if node.op not in ("num", "str", "name") and set(ex.names(node)) & constants:
        out.append(node)
    return list(dict.fromkeys(out))


def _validity(cf: CompiledForm, X, params: np.ndarray) -> list[str | None]:
    """Per row of ``params`` (S, p), why the fit is not a valid rule over the grid's box:
    the first term (innermost first) whose value is not finite at a check point, with
    the constants it reads and the place; ``None`` where every term is finite."""
    points = _check_points(cf, X)
    if not points:
        return [None] * len(params)
    env = cf.env(points, params)
    # variables as (1, m) so that they broadcast against the constants' (S, 1)
    env.update({v: a[None, :] for v, a in points.items()})
    consts = set(cf.s.constants)
    m = len(next(iter(points.values())))
    out: list[str | None] = [None] * len(params)
    finite_rows = np.isfinite(params).all(axis=1)
    for node in _subterms(cf.form.tree, consts):
        with np.errstate(all="ignore"):
            val = np.broadcast_to(ex.evaluate(node, env), (len(params), m))
        bad = ~np.isfinite(val)
        for si in np.flatnonzero(bad.any(axis=1) & finite_rows):
            if out[si] is not None:
                continue
            j = int(np.flatnonzero(bad[si])[0])
            reads = ex.names(node)
            at = ", ".join(f"{v}={points[v][j]:.4g}" for v in reads if v in points)
            with_c = ", ".join(
                f"{c}={params[si][cf.s.constants.index(c)]:.4g}" for c in reads if c in consts
            )
            what = "prediction" if node is cf.form.tree else f"term {ex.unparse(node)}"
            out[si] = (
                f"not a valid rule on the grid's box: {what} is not finite at {at} (with {with_c})"
            )
    return out


def _edge_hints(cf: CompiledForm, x: np.ndarray) -> list[str]:
    """For a fit that failed: nonlinear constants searched over the default range that
    stopped on its edge. Their optimum may lie far outside (Kaplan's Nc ~ 1e13), which
    only a wider range given with --bound reaches."""
    out = []
    for i, c in enumerate(cf.s.nonlinear):
        if base_name(c) in cf.form.bounds or base_name(c) in cf.form.start:
            continue
        v = x[cf.non_idx[i]]
        lo, hi = cf.s.start_lo[i], cf.s.start_hi[i]
        # (a constant at its bound has its own reason, which names --bound too)
        if any(abs(v - e) <= 1e-9 * max(1.0, abs(e)) for e in (lo, hi)):
            out.append(
                f"constant {c} stopped at the edge of its default search range {lo:g}..{hi:g}; "
                f"if its value lies outside, give its range with --bound '{base_name(c)}=LOW..HIGH'"
            )
    return out


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
            f"found {y.min():g} (use --objective abs_ls)"
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
    results: list[FitResult] = []
    # floating-point overflow and 0/0 are expected at grid points far from a fit; every
    # value is checked for finiteness where it is used, so numpy's warnings are only noise
    with np.errstate(all="ignore"):
        pieces = _GridPieces(cf, X, y, objective, thetas, _grid_cells(cf, X, len(y)))
        # batches of splits bound the memory of the shared-grid arrays (grid x splits x k x k)
        for a in range(0, len(masks), options.chunk_splits):
            results += _fit_chunk(
                cf, X, y, masks[a : a + options.chunk_splits], objective, options, thetas, pieces
            )
            if on_progress:
                on_progress(len(masks[a : a + options.chunk_splits]))
    if scale != 1.0:
        lin = set(cf.s.linear)
        factor = scale**2 if objective.kind == "abs_ls" else 1.0
        for r in results:
            r.constants = {c: v * scale if c in lin else v for c, v in r.constants.items()}
            r.objective *= factor
    return results


def _with_weights(X, weights, objective: Objective, n: int) -> dict:
    if weights is None:
        return X
    w = np.asarray(weights, float)
    if w.shape != (n,) or not (np.isfinite(w).all() and (w > 0).all()):
        raise FitrulesError(f"cell weights must be {n} finite positive numbers")
    if objective.kind == "log_huber" and not np.all(w == w[0]):
        raise FitrulesError(
            "weights other than cells apply to least-squares objectives (rel_ls, abs_ls); "
            "log_huber weighs every cell once"
        )
    return {**X, WEIGHT_KEY: w}


def cell_weights(kind: str, table, objective: Objective | None = None) -> np.ndarray | None:
    """Per-cell weights of the squared residuals for ``--weights``.

    ``cells``: every cell once (``None``). ``runs``: each cell by its number of runs, so
    that a fit to cell means is the least-squares fit to the runs (with residuals relative
    to the cell mean for ``rel_ls``). ``inverse-variance``: each cell by one over the
    squared standard error of its mean (on the objective's scale), so the objective is a
    chi-square; it needs at least two runs in every cell.

    Raises
    ------
    FitrulesError
        For an unknown kind, or inverse-variance weights where a cell has one run or no
        spread.
    """
    if kind not in WEIGHTS:
        raise FitrulesError(f"--weights {kind!r} is unknown; allowed: {', '.join(WEIGHTS)}")
    if kind == "cells":
        return None
    if objective is not None and objective.kind == "log_huber":
        raise FitrulesError(
            f"--weights {kind}: weights other than cells apply to least-squares objectives "
            "(rel_ls, abs_ls); log_huber weighs every cell once (use --weights cells)"
        )
    n = table["n_seeds"].to_numpy(float)
    if kind == "runs":
        return n / n.mean()
    sem = table["sem"].to_numpy(float)
    bad = ~(np.isfinite(sem) & (sem > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = table.iloc[i]
        raise FitrulesError(
            f"--weights inverse-variance needs a standard error in every cell; the cell "
            f"at row {i} ({int(row['n_seeds'])} run(s), standard error "
            f"{float(row['sem']):g}) has none (it needs at least 2 runs that differ); use "
            "--weights runs or cells"
        )
    y = table["value"].to_numpy(float)
    scale = 1.0 if (objective is not None and objective.kind == "abs_ls") else 1.0 / y
    w = 1.0 / (sem * scale) ** 2
    return w / w.mean()


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


def _fit_chunk(cf: CompiledForm, X, y, masks, objective, options, thetas, pieces):
    """Fit one batch of splits; see :func:`fit_splits`."""
    form = cf.form
    S = len(masks)
    on_grid = masks if pieces.sub is None else masks[:, pieces.sub]
    values, c = _profile(pieces, on_grid)
    if objective.kind == "log_huber" and len(thetas) > 1:
        values = _huber_rescore(pieces, pieces.y, on_grid, objective, values, c)
    coefs = c / pieces.norm[:, 0, None, :]
    q = len(cf.non_idx)
    rows, gidx = [], []
    n_train = int(masks.sum(axis=1).max(initial=1))
    extra = min(options.start_budget // max(S, 1), options.start_cells // max(n_train, 1))
    n_starts = max(options.n_starts, extra)
    for si in range(S):
        for gi in _starts(values[:, si], thetas, cf.s, n_starts):
            rows.append(si)
            gidx.append(gi)
    rows_a, gidx_a = np.array(rows, int), np.array(gidx, int)
    x = np.full((len(rows), cf.p), np.nan)
    val = values[gidx_a, rows_a] if len(rows) else np.zeros(0)
    moving = np.zeros(len(rows), bool)
    if len(rows):
        x[:, cf.lin_idx] = coefs[gidx_a, rows_a]
        x[:, cf.non_idx] = thetas[gidx_a]
        if objective.kind == "log_huber" or (q and n_train > GRID_CELLS):
            # no exact projection for Huber, and over many cells a few Gauss-Newton steps
            # cost less than the ~20 rounds of the local grid: Levenberg-Marquardt on all
            # constants, from the grid's starts
            x, val, converged = _lm(cf, X, y, masks[rows_a], objective, x, options)
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
            theta, lin, val, moving = _refine(
                cf, X, y, masks[rows_a], objective, thetas[gidx_a], step, options
            )
            x[:, cf.non_idx], x[:, cf.lin_idx] = theta, lin
    converged = ~moving
    if objective.kind != "log_huber" and moving.any():
        # rows whose window kept moving (an optimum off the grid, a constant running away):
        # Levenberg-Marquardt on all constants, from where the search stopped
        mv = np.flatnonzero(moving)
        start = x[mv].copy()
        xt, vt, ct = _lm(cf, X, y, masks[rows_a[mv]], objective, x[mv], options)
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
    if S <= POLISH_SPLITS:
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
) -> FitResult:
    """Fit ``form`` on all cells; see :func:`fit_splits`."""
    return fit_splits(form, X, y, np.ones((1, len(y)), bool), objective, options, weights=weights)[
        0
    ]


def fit_all_cells(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    objective: Objective | None = None,
    options: FitOptions | None = None,
    weights: np.ndarray | None = None,
    candidates: Sequence[dict[str, float]] = (),
) -> FitResult:
    """Fit ``form`` on all cells, never worse than any of ``candidates`` there.

    ``candidates`` are constants found elsewhere (the fits of the splits of the same
    cells): each is scored on all cells, and when one scores below the fit, the best few
    are polished by Levenberg-Marquardt and the best result is taken. So the fit on all
    cells is never worse than a split's fit evaluated on the same cells.
    """
    objective = objective or Objective()
    options = options or FitOptions()
    best = fit(form, X, y, objective, options, weights)
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


def information_criteria(
    y: np.ndarray,
    pred: np.ndarray,
    objective: Objective,
    n_constants: int,
    weights: np.ndarray | None = None,
) -> dict[str, float]:
    """AIC, AICc, BIC and R^2 of a fit to cell means.

    The likelihood is Gaussian in the residuals the objective squares (relative for
    ``rel_ls``, log for ``log_huber``, absolute for ``abs_ls``; times the square roots of
    the weights), with their variance profiled out, as statsmodels' OLS computes it:
    ``llf = -n/2 (log(2 pi) + log(RSS/n) + 1)``, ``AIC = -2 llf + 2k``,
    ``AICc = AIC + 2k(k+1)/(n-k-1)``, ``BIC = -2 llf + k log n``, where ``k`` counts every
    fitted constant (each level of a per-level constant; fixed ones not). ``R^2`` is
    ``1 - sum w (pred - y)^2 / sum w (y - weighted mean)^2`` on the cell means. These are
    in-sample; held-out error, not these, is what ``compare`` ranks.

    Examples
    --------
    >>> y = np.array([1.0, 2.1, 2.9, 4.2])
    >>> ic = information_criteria(y, np.array([1.0, 2.0, 3.0, 4.0]), Objective("abs_ls"), 2)
    >>> round(ic["r2"], 4)
    0.9904
    """
    y = np.asarray(y, float)
    pred = np.asarray(pred, float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, float)
    n, k = len(y), int(n_constants)
    with np.errstate(all="ignore"):
        r = objective.residuals(pred, y) * np.sqrt(w)
        # log(RSS) through the largest residual, so values near 1e-300 or 1e300 do not
        # underflow or overflow on squaring
        top = float(np.max(np.abs(r))) if n else 0.0
        log_rss = 2 * np.log(top) + np.log(((r / top) ** 2).sum()) if top > 0 else -np.inf
        rss = float(np.exp(log_rss))
        llf = -n / 2 * (np.log(2 * np.pi) + log_rss - np.log(n) + 1)
        aic = -2 * llf + 2 * k
        aicc = aic + 2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else np.nan
        bic = -2 * llf + k * np.log(n)
        size = float(np.max(np.abs(y))) if n else 1.0
        size = size if size > 0 and np.isfinite(size) else 1.0
        y, pred = y / size, pred / size  # R^2 does not depend on the unit
        mean = float((w * y).sum() / w.sum())
        # numpy division: a constant grid (or values near 1e-300) gives NaN, not an error
        r2 = 1 - np.divide((w * (pred - y) ** 2).sum(), (w * (y - mean) ** 2).sum())
    if not all(np.isfinite(v) for v in (llf, aic, bic)):
        llf = aic = aicc = bic = np.nan  # an exact fit (RSS 0) has no Gaussian likelihood
    return {
        "n": n,
        "k": k,
        "rss": rss,
        "log_likelihood": float(llf),
        "aic": float(aic),
        "aicc": float(aicc),
        "bic": float(bic),
        "r2": float(r2),
    }
