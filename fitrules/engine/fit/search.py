"""The multi-start search of the nonlinear constants: the shared grid, the starts from its
separate basins, and their local refinement on the profiled objective.
"""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit.options import FitOptions
from fitrules.engine.fit.projection import _GridPieces, _profile_rows
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Structure


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


# Beyond three nonlinear constants the window is a star (one step along each axis), which
# crawls along a ridge where constants trade off (Muennighoff's rn and alpha) and used all 80
# rounds on every start; after 20 the rows still moving go to Levenberg-Marquardt, which
# follows such ridges: every corpus case and published law reached the same objective
# (289 within 1e-9, bench_engine.py --objectives --against), data-constrained's four fits in
# 1.65 CPU s instead of 2.91
STAR_ROUNDS = 20
FULL_STENCIL_MAX_Q = 3  # up to 3 nonlinear constants the local window is a full 3^q grid


STEPS = np.linspace(-1, 1, 3)  # a full window's offsets along each axis, in steps
LATTICE = 8  # the model's step is rounded to 1/LATTICE of the window's step


def _stencil(q: int) -> tuple[np.ndarray, int]:
    """Offsets of the local search window and the index of its centre.

    A full 3^q grid for q <= 3 (27 points at most); beyond, the centre and one step either
    way along each axis (2q + 1 points), so the cost grows linearly with q, not as 3^q.
    """
    if q <= FULL_STENCIL_MAX_Q:
        local = np.stack([a.ravel() for a in np.meshgrid(*[STEPS] * q, indexing="ij")], axis=1)
        return local, (len(local) - 1) // 2
    eye = np.eye(q)
    return np.concatenate([np.zeros((1, q)), eye, -eye]), 0


def _refine(
    cf: CompiledForm, X, y, masks, objective, theta0, step, opts: FitOptions, guided: bool = True
):
    """Local pattern search on the profiled objective, every row at once, guided by the
    quadratic its window's values define.

    Each round scores a small grid of +-h around each row's point. The full window of up to
    three constants holds the central differences of a quadratic model; where that model is
    convex and its minimum lies inside the window, the next window is centred there at a
    quarter of the step (Newton's step on the profile). Otherwise, when the best point is on
    the window's edge the window moves without shrinking (the optimum lies further out; on
    the edge again after a move, the step doubles), and else it shrinks by half. A row keeps the best point it has scored, so a model that
    misleads costs a round, never the result. Rows stop at ``resolution`` x their start range
    (after scoring the last model's point). ``guided=False``: the plain search (no model,
    no doubling), whose path along a flat ridge is the one earlier versions took. Returns
    the nonlinear values, the linear constants, the objective, and which rows were still
    moving when the rounds ran out.
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
    model = _QuadraticModel(q) if guided and q <= FULL_STENCIL_MAX_Q else None
    grow = 2.0 if guided else 1.0
    theta = theta0.copy()  # each row's window centre
    best = theta0.copy()  # ... and the best point it has scored
    h = np.broadcast_to(np.asarray(step, float), (T, q)).copy()
    val = np.full(T, np.inf)
    lin = np.zeros((T, len(cf.lin_idx)))
    active = np.ones(T, bool)
    moved = np.zeros(T, bool)
    rounds = opts.max_rounds if q <= FULL_STENCIL_MAX_Q else min(opts.max_rounds, STAR_ROUNDS)
    for _ in range(rounds):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        grid = np.clip(theta[idx, None, :] + local[None] * h[idx, None, :], lo, hi)
        # a full window is a grid per constant: each constant's three values, once
        axes = (
            [np.clip(theta[idx, i, None] + STEPS * h[idx, i, None], lo[i], hi[i]) for i in range(q)]
            if q <= FULL_STENCIL_MAX_Q
            else None
        )
        Xi = {v: a[idx] if a.ndim == 2 else a for v, a in X.items()}
        vals, coefs = _profile_rows(
            cf, Xi, y[idx] if y.ndim == 2 else y, masks[idx], objective, grid, axes
        )
        # keep the current point on ties so a flat direction does not drift
        vals[:, centre] -= 1e-15 * np.abs(vals[:, centre])
        b = np.argmin(vals, axis=1)
        rows = np.arange(len(idx))
        vb = vals[rows, b]
        gain = vb < val[idx]
        kept = idx[gain]
        best[kept], val[kept], lin[kept] = grid[rows[gain], b[gain]], vb[gain], coefs[rows, b][gain]
        on_edge = (np.abs(local[b]) == 1) & (grid[rows, b] > lo) & (grid[rows, b] < hi)
        was = h[idx].copy()
        # where the window did not beat the best point (a model's step that misled), back to it
        theta[idx] = np.where(gain[:, None], grid[rows, b], best[idx])
        move = gain & on_edge.any(axis=1)
        # on the edge again after a move: the optimum is far (a constant running away), and
        # the window doubles rather than crawling there a step at a time
        h[idx] = np.where(move[:, None], np.where(moved[idx, None], was * grow, was), was * 0.5)
        moved[idx] = move
        newton = np.zeros(len(idx), bool)
        if model is not None:
            c = grid[:, centre]  # the window's centre, inside the bounds
            inside = ((c - was > lo) & (c + was < hi)).all(axis=1)  # no point of it clipped
            u, newton = model.step(vals, inside & gain)
            theta[idx[newton]] = c[newton] + u[newton] * was[newton]
            h[idx[newton]] = was[newton] * 0.25
        span = _search_scale(cf.s, best[idx])
        fine = (was <= opts.resolution * span).all(axis=1)
        active[idx] = (h[idx] > opts.resolution * span).any(axis=1) | (newton & ~fine)
    return best, lin, val, active


class _QuadraticModel:
    """The quadratic through a full 3^q window's values (central differences), in units of
    the window's step, and its Newton step where it is convex."""

    def __init__(self, q: int) -> None:
        self.q = q
        weights = 3 ** np.arange(q - 1, -1, -1)  # the first constant varies slowest

        def at(offset) -> int:
            return int(np.dot(np.asarray(offset) + 1, weights))

        eye = np.eye(q, dtype=int)
        self.zero = at(np.zeros(q, int))
        self.plus = [at(eye[i]) for i in range(q)]
        self.minus = [at(-eye[i]) for i in range(q)]
        self.cross = [
            (i, j, at(eye[i] + eye[j]), at(eye[i] - eye[j]), at(eye[j] - eye[i]), at(-eye[i] - eye[j]))
            for i in range(q)
            for j in range(i + 1, q)
        ]

    def step(self, vals: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the model's minimum as an offset from the centre (in steps) and whether
        to take it: allowed, every value finite, the model convex, the minimum in the window."""
        q = self.q
        f0 = vals[:, self.zero]
        g = np.stack([(vals[:, p] - vals[:, m]) / 2 for p, m in zip(self.plus, self.minus)], -1)
        H = np.zeros((len(vals), q, q))
        for i in range(q):
            H[:, i, i] = vals[:, self.plus[i]] - 2 * f0 + vals[:, self.minus[i]]
        for i, j, pp, pm, mp, mm in self.cross:
            H[:, i, j] = H[:, j, i] = (vals[:, pp] - vals[:, pm] - vals[:, mp] + vals[:, mm]) / 4
        ok = allowed & np.isfinite(vals).all(axis=1)
        if q <= 2:
            ok, u = _small_newton(H, g, ok)
        else:
            # convex: every leading principal minor positive
            for k in range(1, q + 1):
                with np.errstate(all="ignore"):
                    ok &= np.linalg.det(np.where(ok[:, None, None], H, np.eye(q))[:, :k, :k]) > 0
            u = np.zeros((len(vals), q))
            if ok.any():
                u[ok] = np.linalg.solve(H[ok], -g[ok][..., None])[..., 0]
        ok &= np.isfinite(u).all(axis=1) & (np.abs(u) <= 1).all(axis=1)
        # rounded to an eighth of the step, the path stays on a dyadic lattice of its start, so
        # a last-bit difference in a value (another BLAS kernel) moves it only when it falls on
        # a rounding boundary, as the plain search's comparisons do; the next window (a quarter
        # step either way) still holds the unrounded minimum
        return np.round(u * LATTICE) / LATTICE, ok


def _small_newton(H: np.ndarray, g: np.ndarray, ok: np.ndarray):
    """:meth:`_QuadraticModel.step`'s convexity test and Newton step for one or two
    constants, element-wise (LAPACK's batched calls cost more than these few formulas):
    the rows still ``ok`` (every leading minor positive) and their steps (0 elsewhere)."""
    with np.errstate(all="ignore"):
        if H.shape[-1] == 1:
            a = H[:, 0, 0]
            ok = ok & (a > 0)
            u = np.where(ok, -g[:, 0] / np.where(ok, a, 1.0), 0.0)[:, None]
            return ok, u
        a, b, d = H[:, 0, 0], H[:, 0, 1], H[:, 1, 1]
        det = a * d - b * b
        ok = ok & (a > 0) & (det > 0)
        det = np.where(ok, det, 1.0)
        u0 = (-d * g[:, 0] + b * g[:, 1]) / det
        u1 = (b * g[:, 0] - a * g[:, 1]) / det
        return ok, np.where(ok[:, None], np.stack([u0, u1], axis=-1), 0.0)


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


def _starts(values: np.ndarray, thetas: np.ndarray, s: Structure, n_starts: int) -> list[list[int]]:
    """Per split (a column of ``values``, (G, S)), the indices of the best grid points from
    separate basins (at least 2.5 steps apart)."""
    G, S = values.shape
    if S == 0:
        return []
    # look further down the ranking when many starts are wanted (a single fit on all cells)
    depth = max(200, 40 * n_starts)
    orders = _stable_top(values.T, depth)  # (S, depth at most)
    ranked = np.take_along_axis(values.T, orders, axis=1)
    if thetas.shape[1] == 0:
        return [[int(o[0])] if np.isfinite(r[0]) else [] for o, r in zip(orders, ranked)]
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
    if n_starts == 2:
        return _two_starts(orders, ranked, thetas, 2.5 * step, depth)
    out = []
    for order, ranked_values in zip(orders, ranked):
        order = order[np.isfinite(ranked_values)]  # non-finite values sort last
        if len(order) == 0:
            out.append([])
            continue
        picked = [int(order[0])]
        candidates = order[1:depth]
        # greedily, in rank order, each candidate far from every start picked before it: the
        # candidates still far from all picked ones, and the first of them picked, per round
        far = np.ones(len(candidates), bool)
        while len(picked) < n_starts:
            far &= np.any(np.abs(thetas[candidates] - thetas[picked[-1]]) > 2.5 * step, axis=1)
            if not far.any():
                break
            picked.append(int(candidates[np.argmax(far)]))
        out.append(picked)
    return out


def _stable_top(V: np.ndarray, depth: int) -> np.ndarray:
    """Per row of ``V`` (S, G), the indices of its ``depth`` smallest values in the order
    of the row's stable sort (ties by index; non-finite values, all +inf here, last).

    A partition finds them and only they are sorted; a row where values tie at the
    boundary (so the partition's choice among them is arbitrary) is sorted whole.
    """
    S, G = V.shape
    if depth * 4 >= G:
        return np.argsort(V, axis=1, kind="stable")
    part = np.argpartition(V, depth - 1, axis=1)[:, :depth]
    vals = np.take_along_axis(V, part, axis=1)
    kth = vals.max(axis=1)
    exact = ((V <= kth[:, None]).sum(axis=1) == depth) & np.isfinite(kth)
    # sorted by (value, index): the stable order of the chosen ones
    inner = np.lexsort((part, vals), axis=1)
    out = np.take_along_axis(part, inner, axis=1)
    for s in np.flatnonzero(~exact):
        out[s] = np.argsort(V[s], kind="stable")[:depth]
    return out


def _two_starts(orders, ranked, thetas, apart, depth: int) -> list[list[int]]:
    """:func:`_starts` with two starts a split, every split at once: its best grid point,
    and the first of the next ``depth - 1`` in rank order farther than ``apart`` from it in
    some constant (the same picks as the greedy loop makes)."""
    n_finite = np.isfinite(ranked).sum(axis=1)  # non-finite values sort last
    cand = orders[:, 1:depth]
    first = thetas[orders[:, 0]]
    far = (np.abs(thetas[cand] - first[:, None, :]) > apart).any(axis=2)
    far &= np.arange(1, cand.shape[1] + 1)[None, :] < n_finite[:, None]
    second = cand[np.arange(len(cand)), np.argmax(far, axis=1)] if cand.shape[1] else None
    has = far.any(axis=1).tolist()
    firsts = orders[:, 0].tolist()
    return [
        [firsts[s], int(second[s])] if has[s] else [firsts[s]] if k else []
        for s, k in enumerate(n_finite.tolist())
    ]
