"""Variable projection: the linear constants solved exactly at given nonlinear values,
for a grid shared by every split or for each row's own points.
"""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit.objective import Objective
from fitrules.engine.fit.weights import _root_weights, _weights
from fitrules.model.compiled import CompiledForm


def _evaluate_pieces(cf: CompiledForm, X, thetas: np.ndarray, axes=None):
    """Basis (..., n, k), offset (..., n) and finiteness at nonlinear values (..., q)
    (``None`` when every value is finite; else where they are, the others set to 0).

    ``axes``: when ``thetas`` (T, L, q) is each row's full grid of m values per constant
    (L = m^q, the first constant's index varying slowest), those values, (T, m) per constant:
    each constant then rides on an axis of its own, so a term of one constant (``omega**c``)
    is evaluated at m points, not at L, with the same values.
    """
    s = cf.s
    lead = thetas.shape[:-1]
    n = next(iter(X.values())).shape[-1]
    shape = lead if axes is None else (lead[0], *(a.shape[1] for a in axes))
    # X values are (n,) shared by all rows, or (T, n): each row its own (training) cells
    env = {
        v: X[v].reshape(X[v].shape[:-1] + (1,) * (len(shape) + 1 - X[v].ndim) + (n,))
        for v in cf.form.bound_variables
    }
    if axes is None:
        env.update({c: thetas[..., i][..., None] for i, c in enumerate(s.nonlinear)})
    else:
        q = len(axes)
        for i, c in enumerate(s.nonlinear):
            env[c] = axes[i].reshape((len(axes[i]),) + (1,) * i + (-1,) + (1,) * (q - i))
    with np.errstate(all="ignore"):
        *values, offset = cf.pieces(env)
        # finiteness checked on each piece before it is broadcast (a term of one constant
        # is checked at its m values, not at the L points of the window)
        finite = np.isfinite(offset)
        for b in values:
            finite = finite & np.isfinite(b)
        # each piece written into its column (numpy broadcasts it there)
        basis = np.empty((*shape, n, len(values)))
        for j, b in enumerate(values):
            basis[..., j] = b
        out = np.empty((*shape, n))
        out[...] = offset
        basis = basis.reshape((*lead, n, len(values)))
        offset = out.reshape((*lead, n))
    if np.all(finite):
        return basis, offset, None
    finite = np.broadcast_to(finite, (*shape, n)).reshape((*lead, n))
    basis = np.where(finite[..., None], basis, 0.0)
    offset = np.where(finite, offset, 0.0)
    return basis, offset, finite


def _small_symmetric_solve(
    A: np.ndarray, ridge: np.ndarray, rhs: np.ndarray, refine: bool = True
) -> np.ndarray:
    """Solve stacks of symmetric 1x1, 2x2 or 3x3 systems ``A + ridge * I`` for ``rhs``
    (..., k) by cofactors, element-wise, with (``refine``) one step of iterative refinement
    against ``A``.

    Batched LAPACK calls cost about a microsecond per tiny matrix; these formulas handle a
    grid x splits stack in a few passes over flat arrays. The cofactors are made once for
    the solve and its refinement, and every product and sum is a flat array of the stack's
    shape: no (..., k, k) temporary, and no reduction over an axis of length k (numpy's
    reductions over tiny axes cost more than the arithmetic). The sums keep the order of
    ``(A * c[..., None, :]).sum(-1)``, so the results are the same to the bit.
    """
    k = A.shape[-1]
    zero = ridge * 0.0  # what ridge * I adds off the diagonal (nan where ridge is not finite)

    def el(i: int, j: int) -> np.ndarray:
        return A[..., i, j] + (ridge if i == j else zero)

    r = [rhs[..., i] for i in range(k)]
    if k == 1:
        a = el(0, 0)

        def solve(r0):
            return (r0 / a,)

    elif k == 2:
        a, b, d = el(0, 0), el(0, 1), el(1, 1)
        det2 = a * d - b * b

        def solve(r0, r1):
            return (d * r0 - b * r1) / det2, (a * r1 - b * r0) / det2

    else:
        a, b, c = el(0, 0), el(0, 1), el(0, 2)
        d, e, f = el(1, 1), el(1, 2), el(2, 2)
        c00, c01, c02 = d * f - e * e, c * e - b * f, b * e - c * d
        c11, c12, c22 = a * f - c * c, b * c - a * e, a * d - b * b
        det = a * c00 + b * c01 + c * c02

        def solve(r0, r1, r2):
            return (
                (c00 * r0 + c01 * r1 + c02 * r2) / det,
                (c01 * r0 + c11 * r1 + c12 * r2) / det,
                (c02 * r0 + c12 * r1 + c22 * r2) / det,
            )

    x = solve(*r)
    if not refine:
        return np.stack(x, axis=-1)
    resid = []
    for i in range(k):
        acc = A[..., i, 0] * x[0]
        for j in range(1, k):
            acc = acc + A[..., i, j] * x[j]
        resid.append(r[i] - acc)
    dx = solve(*resid)
    return np.stack([x[i] + dx[i] for i in range(k)], axis=-1)


def _solve(A: np.ndarray, rhs: np.ndarray, rank_only: bool = False) -> np.ndarray:
    """Batched symmetric solve with a tiny ridge and one step of iterative refinement.

    ``rank_only``: the solutions only rank grid points (the starts are then fitted): no
    refinement step, and a large stack of four or more constants by elimination.
    """
    k = A.shape[-1]
    if k == 0:
        return np.zeros(rhs.shape)
    if k <= 3:  # the trace's sum element-wise, in its order (numpy's trace is slow here)
        trace = A[..., 0, 0]
        for i in range(1, k):
            trace = trace + A[..., i, i]
        with np.errstate(all="ignore"):
            return _small_symmetric_solve(A, 1e-13 * trace + 1e-300, rhs, refine=not rank_only)
    ridge = 1e-13 * np.trace(A, axis1=-2, axis2=-1) + 1e-300
    Ar = A + ridge[..., None, None] * np.eye(k)
    if rank_only and Ar[..., 0, 0].size >= ELIMINATION_BATCH:
        with np.errstate(all="ignore"):
            return _eliminate(Ar)(rhs)
    c = np.linalg.solve(Ar, rhs[..., None])
    c = c + np.linalg.solve(Ar, rhs[..., None] - A @ c)
    return c[..., 0]


ELIMINATION_BATCH = 256  # systems at least, above which a stack is solved by elimination


def _eliminate(A: np.ndarray):
    """Gaussian elimination of a stack of symmetric positive definite systems (..., k, k),
    element-wise over the stack, without pivoting (as stable as Cholesky on such systems;
    the ridge keeps them definite). Returns the solver of right-hand sides (..., k).

    Batched LAPACK costs about a microsecond a system for these small ones (the 5 x 5
    systems of a per-level form on 121 grid points x 300 splits); the elimination makes
    k^3 / 3 passes over flat arrays of the stack's shape.
    """
    k = A.shape[-1]
    U = [[A[..., i, j].copy() for j in range(k)] for i in range(k)]
    factors = {}
    for p in range(k):
        for i in range(p + 1, k):
            f = U[i][p] / U[p][p]
            factors[i, p] = f
            for j in range(p + 1, k):
                U[i][j] = U[i][j] - f * U[p][j]

    def solve(rhs: np.ndarray) -> np.ndarray:
        b = [rhs[..., i].copy() for i in range(k)]
        for p in range(k):
            for i in range(p + 1, k):
                b[i] = b[i] - factors[i, p] * b[p]
        x = [None] * k
        for i in range(k - 1, -1, -1):
            acc = b[i]
            for j in range(i + 1, k):
                acc = acc - U[i][j] * x[j]
            x[i] = acc / U[i][i]
        return np.stack(x, axis=-1)

    return solve


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
        """(cells, scaled basis (G, c, k), offset (G, c), finite (G, c) or None) per chunk."""
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


PROFILE_BLOCK = 1 << 17  # grid points x splits x k^2 solved at once in _profile

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


def _profile(g: _GridPieces, masks, rank_only: bool = False):
    """Training objective at grid points shared by every split, linear constants solved.

    ``masks`` (S, n). Returns the objective (G, S) and the scaled coefficients (G, S, k).
    The basis does not depend on the split, so the normal equations of all splits are one
    matrix product with the masks, and so is the residual sum of squares (expanded as
    t'Wt - 2c'r + c'Ac), accumulated over chunks of cells. The values are (relative) least
    squares for every objective; for log-Huber they are a ranking that
    :func:`_huber_rescore` refines. ``rank_only``: the values only rank starting points (see
    :func:`_solve`), to the last bits or so.
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
        if finite is not None:
            bad |= (~finite).astype(float) @ m.T > 0
    # solved a block of grid points at a time: the dozens of element-wise passes of the
    # small solves then stay in the processor's cache (each point's values are its own)
    c = np.empty((G, S, k))
    out = np.empty((G, S))
    step = max(1, PROFILE_BLOCK // max(S * max(k, 1) ** 2, 1))
    for a in range(0, G, step):
        b = slice(a, a + step)
        c[b] = _solve(A[b], rhs[b], rank_only)
        out[b] = tt[b] - 2 * np.einsum("gsk,gsk->gs", c[b], rhs[b])
        out[b] += _quadratic_form(c[b], A[b], fast=rank_only)
    out = np.maximum(out, 0.0)
    out[bad | ~np.isfinite(out)] = np.inf
    return out, c


def _quadratic_form(c: np.ndarray, A: np.ndarray, fast: bool) -> np.ndarray:
    """``c' A c`` of stacks (..., k) and symmetric (..., k, k): with ``fast`` and k <= 3
    element-wise (the off-diagonal terms doubled, so the last bits differ), else by einsum."""
    k = c.shape[-1]
    if k > 3 or not fast:
        return np.einsum("...k,...kj,...j->...", c, A, c)
    out = np.zeros(c.shape[:-1])
    for i in range(k):
        row = A[..., i, i] * c[..., i]
        for j in range(i + 1, k):
            row = row + 2.0 * A[..., i, j] * c[..., j]
        out += c[..., i] * row
    return out


def _sum_over_cells(b2: np.ndarray) -> np.ndarray:
    """``b2.sum(axis=2, keepdims=True)`` of a C-ordered (T, L, n, k) array, the same to the
    bit: with k >= 2 numpy adds the cells one after another (the reduced axis is not the
    contiguous one), and so does this loop, a cell of every row at a time, without numpy's
    slow walk over short rows of k values. With one linear constant the reduced axis is the
    contiguous one, which numpy sums pairwise: that case stays numpy's."""
    n, k = b2.shape[2], b2.shape[3]
    if k < 2 or n < 2:
        return b2.sum(axis=2, keepdims=True)
    acc = b2[:, :, 0, :].copy()
    for i in range(1, n):
        acc += b2[:, :, i, :]
    return acc[:, :, None, :]


def _profile_rows(cf: CompiledForm, X, y, masks, objective: Objective, thetas, axes=None):
    """As :func:`_profile`, each row t with its own training mask and points ``thetas[t]``.

    ``thetas`` (T, L, q); ``masks`` (T, n); ``axes``: see :func:`_evaluate_pieces`. Returns
    objective (T, L), coefficients (T, L, k).
    """
    basis, offset, finite = _evaluate_pieces(cf, X, thetas, axes)  # (T, L, n, k), (T, L, n)
    norm = np.sqrt(_sum_over_cells(basis**2))
    norm = np.where(norm > 0, norm, 1.0)
    bs = basis / norm
    # every cell of every row (the local search gathers each row's training cells): the
    # products with the mask and the selections by it are left out, their values the same
    full = bool(masks.all())
    m = masks.astype(float)  # (T, n)
    yb = y if y.ndim == 1 else y[:, None, :]  # y is (n,) or per row (T, n)
    w = _weights(objective, y, X)
    sw = np.broadcast_to(w, m.shape) if full else m * w  # square root of the row weights
    bw = np.swapaxes(bs * sw[:, None, :, None], -1, -2)  # (T, L, k, n)
    A = bw @ np.swapaxes(bw, -1, -2)
    rhs = (bw @ (sw[:, None, :] * (yb - offset))[..., None])[..., 0]
    c = _solve(A, rhs)
    pred = offset + (bs @ c[..., None])[..., 0]
    with np.errstate(all="ignore"):
        rw = np.asarray(_root_weights(X))
        rw = rw[..., None, :] if rw.ndim else rw
        r = objective.residuals(pred, yb) * rw
        if not full:
            r = np.where(m[:, None, :] > 0, r, 0.0)
        out = objective.value(r, axis=2)
    if finite is not None:
        bad = ((~finite) if full else ((~finite) & (m[:, None, :] > 0))).any(axis=2)
        out[bad] = np.inf
    out[~np.isfinite(out)] = np.inf
    return out, c / norm[:, :, 0, :]
