"""Fitting a form's constants to cells: the global optimum of the training objective.

For fixed values of the nonlinear constants, the constants that enter linearly solve a
weighted least-squares problem exactly (variable projection). The nonlinear constants
(usually one to three exponents) are searched on a grid that is shared by every split, so
all splits of a form are scored in a few array operations; the best grid points of each
split, taken from separate basins, are then polished by ``scipy.optimize.least_squares``
with the analytic Jacobian of the parsed expression. The polished fit is checked for the
ways its constants can fail to be identified, and those become named reasons, not errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import qmc

from fitrules import expr as ex
from fitrules.errors import FitrulesError
from fitrules.forms import Form, Structure

OBJECTIVES = ("rel_ls", "log_huber", "abs_ls")
RANK_TOL = 1e-9  # singular values below this fraction of the largest count as zero
COND_LIMIT = 1e6  # condition number of the scaled Jacobian above which a fit is flagged
TINY = 1e-300


@dataclass(frozen=True)
class Objective:
    """The training objective.

    ``rel_ls``: sum of squared relative residuals (pred - y) / y (default; matches the
    relative held-out error). ``log_huber``: sum of Huber(log pred - log y, delta), the
    Chinchilla convention (a sum, not a mean). ``abs_ls``: sum of squared residuals.
    """

    kind: str = "rel_ls"
    delta: float = 1e-3

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise FitrulesError(
                f"objective {self.kind!r} is unknown; allowed: " + ", ".join(OBJECTIVES)
            )
        if not self.delta > 0:
            raise FitrulesError(f"huber delta {self.delta} must be > 0")

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
    n_polish: int = 2
    max_nfev: int = 100


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


class CompiledForm:
    """A bound form with its structure and the numeric pieces fitting evaluates."""

    def __init__(self, form: Form):
        if form.variables is None:
            raise FitrulesError(f"form {form.name!r} must be bound to a grid before fitting")
        self.form = form
        self.s: Structure = form.structure
        self.p = len(self.s.constants)

    def env(self, X: dict[str, np.ndarray], params: np.ndarray) -> dict:
        env = {v: X[v] for v in self.form.variables}
        env.update(zip(self.s.constants, params, strict=True))
        return env

    def predict(self, X: dict[str, np.ndarray], params: np.ndarray) -> np.ndarray:
        n = len(next(iter(X.values())))
        with np.errstate(all="ignore"):
            return np.broadcast_to(ex.evaluate(self.form.tree, self.env(X, params)), (n,)).astype(
                float
            )

    def jacobian(self, X: dict[str, np.ndarray], params: np.ndarray) -> np.ndarray:
        """d prediction / d constants, shape (n, p)."""
        n = len(next(iter(X.values())))
        env = self.env(X, params)
        with np.errstate(all="ignore"):
            cols = [np.broadcast_to(ex.evaluate(g, env), (n,)) for g in self.s.gradient]
        return np.stack(cols, axis=1).astype(float)


def _theta_grid(s: Structure, opts: FitOptions) -> np.ndarray:
    q = len(s.nonlinear)
    if q == 0:
        return np.zeros((1, 0))
    lo, hi = np.array(s.start_lo), np.array(s.start_hi)
    if q <= len(opts.grid_points):
        k = opts.grid_points[q - 1]
        axes = [np.linspace(lo[i], hi[i], k) for i in range(q)]
        return np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    pts = qmc.Sobol(q, scramble=True, seed=0).random(opts.grid_points_high_dim)
    return lo + pts * (hi - lo)


def _evaluate_pieces(cf: CompiledForm, X, thetas: np.ndarray):
    """Basis (..., n, k) and offset (..., n) at nonlinear values ``thetas`` (..., q)."""
    s = cf.s
    lead = thetas.shape[:-1]
    n = len(next(iter(X.values())))
    env = {v: X[v].reshape((1,) * len(lead) + (n,)) for v in cf.form.variables}
    env.update({c: thetas[..., i][..., None] for i, c in enumerate(s.nonlinear)})
    with np.errstate(all="ignore"):
        cols = [np.broadcast_to(ex.evaluate(b, env), (*lead, n)) for b in s.basis]
        basis = np.stack(cols, axis=-1) if cols else np.zeros((*lead, n, 0))
        offset = np.broadcast_to(ex.evaluate(s.offset, env), (*lead, n)).astype(float)
    finite = np.isfinite(basis).all(axis=-1) & np.isfinite(offset)
    basis = np.where(finite[..., None], basis, 0.0)
    offset = np.where(finite, offset, 0.0)
    return basis, offset, finite


def _projected(objective: Objective, y, m, bs, offset, mw2, A, rhs):
    """Solve the (ridged) normal equations; return objective values and coefficients."""
    k = A.shape[-1]
    if k:
        ridge = 1e-12 * np.trace(A, axis1=-2, axis2=-1)[..., None, None] + 1e-300
        c = np.linalg.solve(A + ridge * np.eye(k), rhs[..., None])[..., 0]
    else:
        c = np.zeros((*A.shape[:-2], 0))
    return c


def _weights(objective: Objective, y: np.ndarray) -> np.ndarray:
    # log-Huber is profiled with relative least squares: log(p/y) ~ (p - y)/y near the fit
    return np.ones_like(y) if objective.kind == "abs_ls" else 1.0 / y


def _profile(cf: CompiledForm, X, y, masks, objective: Objective, thetas):
    """Training objective at shared grid points for every split, linear constants solved.

    ``thetas`` (G, q) are shared by all splits; returns objective (G, S), coefficients
    (G, S, k).
    """
    n, G = len(y), len(thetas)
    basis, offset, finite = _evaluate_pieces(cf, X, thetas)
    # Scale basis columns to unit norm so the normal equations stay well conditioned.
    norm = np.sqrt((basis**2).sum(axis=1, keepdims=True))
    norm = np.where(norm > 0, norm, 1.0)
    bs = basis / norm
    w2 = _weights(objective, y) ** 2
    S, k = masks.shape[0], bs.shape[2]
    out, coef = np.empty((G, S)), np.empty((G, S, k))
    bad = (~finite).astype(float) @ masks.T.astype(float) > 0  # (G, S)
    chunk = max(1, int(4e6 // max(1, G * n)))
    target = y[None, :] - offset  # (G, n)
    for a in range(0, S, chunk):
        m = masks[a : a + chunk].astype(float)  # (s, n)
        mw2 = m * w2[None, :]
        A = np.einsum("gnk,gnl,sn->gskl", bs, bs, mw2)
        rhs = np.einsum("gnk,sn,gn->gsk", bs, mw2, target)
        c = _projected(objective, y, m, bs, offset, mw2, A, rhs)
        pred = offset[:, None, :] + np.einsum("gnk,gsk->gsn", bs, c)
        r = np.where(m[None] > 0, objective.residuals(pred, y), 0.0)
        with np.errstate(all="ignore"):
            out[:, a : a + chunk] = objective.value(r, axis=2)
        coef[:, a : a + chunk] = c / norm[:, 0, None, :]
    out[bad | ~np.isfinite(out)] = np.inf
    return out, coef


def _profile_local(cf: CompiledForm, X, y, masks, objective: Objective, thetas):
    """As :func:`_profile`, with each row t having its own grid ``thetas[t]`` (T, G, q)."""
    basis, offset, finite = _evaluate_pieces(cf, X, thetas)  # (T, G, n, k), (T, G, n)
    norm = np.sqrt((basis**2).sum(axis=2, keepdims=True))
    norm = np.where(norm > 0, norm, 1.0)
    bs = basis / norm
    m = masks.astype(float)  # (T, n)
    mw2 = m * (_weights(objective, y) ** 2)[None, :]
    A = np.einsum("tgnk,tgnl,tn->tgkl", bs, bs, mw2)
    rhs = np.einsum("tgnk,tn,tgn->tgk", bs, mw2, y - offset)
    c = _projected(objective, y, m, bs, offset, mw2, A, rhs)
    pred = offset + np.einsum("tgnk,tgk->tgn", bs, c)
    r = np.where(m[:, None, :] > 0, objective.residuals(pred, y), 0.0)
    with np.errstate(all="ignore"):
        out = objective.value(r, axis=2)
    bad = ((~finite) & (m[:, None, :] > 0)).any(axis=2)
    out[bad | ~np.isfinite(out)] = np.inf
    return out, c / norm[:, :, 0, :]


def _zoom(cf: CompiledForm, X, y, masks, objective, theta0, step, rounds=5, points=9):
    """Refine each row's nonlinear constants on shrinking local grids (vectorised)."""
    q = theta0.shape[1]
    lo = np.array(cf.s.lower)[[cf.s.constants.index(c) for c in cf.s.nonlinear]]
    hi = np.array(cf.s.upper)[[cf.s.constants.index(c) for c in cf.s.nonlinear]]
    offsets = np.linspace(-1, 1, points)
    local = np.stack([a.ravel() for a in np.meshgrid(*[offsets] * q, indexing="ij")], axis=1)
    theta, h = theta0.copy(), np.asarray(step, float)
    best_val = np.full(len(theta0), np.inf)
    best_coef = None
    for _ in range(rounds):
        grid = np.clip(theta[:, None, :] + local[None] * h, lo, hi)  # (T, L, q)
        vals, coefs = _profile_local(cf, X, y, masks, objective, grid)
        i = np.argmin(vals, axis=1)
        rows = np.arange(len(theta))
        theta = grid[rows, i]
        best_val, best_coef = vals[rows, i], coefs[rows, i]
        h = h * 2.0 / (points - 1)
    return theta, best_coef, best_val


def _starts(values: np.ndarray, thetas: np.ndarray, s: Structure, n_polish: int) -> list[int]:
    """Indices of the best grid points from separate basins (at least two steps apart)."""
    order = np.argsort(values, kind="stable")
    order = order[np.isfinite(values[order])]
    if len(order) == 0:
        return []
    if thetas.shape[1] == 0:
        return [int(order[0])]
    span = np.maximum(np.array(s.start_hi) - np.array(s.start_lo), 1e-12)
    step = span / max(2, round(len(thetas) ** (1 / thetas.shape[1])) - 1)
    picked = [int(order[0])]
    for i in order[1:200]:
        if all(np.any(np.abs(thetas[i] - thetas[j]) > 2.5 * step) for j in picked):
            picked.append(int(i))
            if len(picked) >= n_polish:
                break
    return picked


def _polish(cf: CompiledForm, X, y, objective: Objective, x0: np.ndarray, max_nfev: int):
    lo, hi = np.array(cf.s.lower), np.array(cf.s.upper)
    with np.errstate(invalid="ignore"):
        inner_lo = np.where(np.isfinite(lo), lo + 1e-9 * (1 + np.abs(lo)), lo)
        inner_hi = np.where(np.isfinite(hi), hi - 1e-9 * (1 + np.abs(hi)), hi)
    x0 = np.clip(np.nan_to_num(x0), inner_lo, inner_hi)

    def fun(x):
        r = objective.residuals(cf.predict(X, x), y)
        return np.where(np.isfinite(r), r, 1e6)

    def jac(x):
        pred = cf.predict(X, x)
        J = cf.jacobian(X, x) * objective.dres_dpred(pred, y)[:, None]
        return np.where(np.isfinite(J), J, 0.0)

    loss = "huber" if objective.kind == "log_huber" else "linear"
    return least_squares(
        fun,
        x0,
        jac=jac,
        bounds=(lo, hi),
        method="trf",
        loss=loss,
        f_scale=objective.delta if loss == "huber" else 1.0,
        max_nfev=max_nfev,
        x_scale="jac",
    )


def _diagnose(cf: CompiledForm, X, y, params, objective, converged) -> tuple[float, list[str]]:
    s, reasons = cf.s, []
    names = s.constants
    n = len(y)
    if n < cf.p + 1:
        reasons.append(f"only {n} training cells for {cf.p} constants (need at least {cf.p + 1})")
    pred = cf.predict(X, params)
    J = cf.jacobian(X, params) * objective.dres_dpred(pred, y)[:, None]
    J = np.where(np.isfinite(J), J, 0.0)
    # Relative sensitivities: each column scaled by its constant's size (at least 1), so a
    # constant whose effect on the fit has vanished (an exponent run off to where its term
    # is ~0) shows up as a tiny column instead of being normalised back to unit length.
    scale = np.maximum(np.abs(np.nan_to_num(params)), 1.0)
    Js = J * scale[None, :]
    colnorm = np.linalg.norm(Js, axis=0)
    _, sv, vt = np.linalg.svd(Js, full_matrices=True)
    sv_full = np.zeros(cf.p)
    sv_full[: len(sv)] = sv
    smax = sv_full.max() if len(sv_full) else 0.0
    null = sv_full <= RANK_TOL * smax if smax > 0 else np.ones(cf.p, bool)
    # right singular vectors of the zero singular values span what the data cannot fix
    weak = set()
    for i in np.flatnonzero(null):
        weak |= {names[j] for j in np.flatnonzero(np.abs(vt[i]) > 0.1)}
    weak |= {names[j] for j in np.flatnonzero(colnorm == 0)}
    cond = float(smax / sv_full.min()) if sv_full.min() > 0 else float("inf")

    design = []
    for v in cf.form.variables:
        values = np.unique(X[v])
        if len(values) == 1:
            which = [c for c in names if c in weak]
            what = (
                f"{', '.join(which)} {'is' if len(which) == 1 else 'are'} not identifiable"
                if which
                else "its effect cannot be identified"
            )
            design.append(f"all training cells have {v}={values[0]:g}: {what}")
    reasons.extend(design)
    if not design and n >= cf.p:
        if null.any():
            rank = int((~null).sum())
            reasons.append(
                f"Jacobian is rank-deficient at the fit (rank {rank} of {cf.p}; "
                f"{', '.join(c for c in names if c in weak)} not identifiable)"
            )
        elif cond > COND_LIMIT:
            worst = np.abs(vt[np.argmin(sv_full)])
            top = [names[j] for j in np.argsort(-worst)[:2]]
            reasons.append(
                f"Jacobian is badly conditioned at the fit (condition number "
                f"{cond:.1e}; weakest direction mostly {', '.join(top)})"
            )
    lo, hi = np.array(s.lower), np.array(s.upper)
    for j, c in enumerate(names):
        width = max(
            1.0,
            abs(lo[j]) if np.isfinite(lo[j]) else 1.0,
            abs(hi[j]) if np.isfinite(hi[j]) else 1.0,
        )
        if (np.isfinite(lo[j]) and params[j] - lo[j] <= 1e-6 * width) or (
            np.isfinite(hi[j]) and hi[j] - params[j] <= 1e-6 * width
        ):
            bound = lo[j] if params[j] - lo[j] <= hi[j] - params[j] else hi[j]
            reasons.append(f"constant {c} is at its bound {bound:g}")
    if not converged:
        reasons.append("optimiser did not converge")
    return cond, reasons


def fit_splits(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    masks: np.ndarray,
    objective: Objective | None = None,
    options: FitOptions | None = None,
) -> list[FitResult]:
    """Fit ``form`` on the training cells of each split.

    Parameters
    ----------
    form : a form bound to the grid (its variables known).
    X : variable name -> values over all cells, each shape (n,).
    y : cell means, shape (n,); must be > 0 for the relative and log objectives.
    masks : (S, n) boolean; row s marks the training cells of split s.
    objective, options : training objective and search settings.

    Returns
    -------
    One :class:`FitResult` per split, in order.
    """
    objective = objective or Objective()
    options = options or FitOptions()
    cf = CompiledForm(form)
    masks = np.atleast_2d(np.asarray(masks, bool))
    y = np.asarray(y, float)
    if objective.kind != "abs_ls" and (y <= 0).any():
        raise FitrulesError(
            f"objective {objective.kind} needs a positive metric; "
            f"found {y.min():g} (use --objective abs_ls)"
        )
    thetas = _theta_grid(cf.s, options)
    values, coefs = _profile(cf, X, y, masks, objective, thetas)
    lin_idx = [cf.s.constants.index(c) for c in cf.s.linear]
    non_idx = [cf.s.constants.index(c) for c in cf.s.nonlinear]
    q = len(non_idx)
    # Starting points: the best grid point of each separate basin, per split.
    rows, gidx = [], []
    for si in range(len(masks)):
        for gi in _starts(values[:, si], thetas, cf.s, options.n_polish):
            rows.append(si)
            gidx.append(gi)
    rows_a, gidx_a = np.array(rows, int), np.array(gidx, int)
    x0 = np.empty((len(rows), cf.p))
    if len(rows):
        x0[:, lin_idx] = coefs[gidx_a, rows_a]
        x0[:, non_idx] = thetas[gidx_a]
        if q:
            k = len(thetas) ** (1 / q)
            step = (np.array(cf.s.start_hi) - np.array(cf.s.start_lo)) / max(1.0, k - 1)
            theta, lin, _ = _zoom(cf, X, y, masks[rows_a], objective, thetas[gidx_a], step)
            x0[:, non_idx] = theta
            x0[:, lin_idx] = lin
    best: dict[int, tuple[float, np.ndarray, bool]] = {}
    for t, si in enumerate(rows):
        mask = masks[si]
        Xt = {v: a[mask] for v, a in X.items()}
        yt = y[mask]
        res = _polish(cf, Xt, yt, objective, x0[t], options.max_nfev)
        val = float(objective.value(objective.residuals(cf.predict(Xt, res.x), yt)))
        if si not in best or val < best[si][0]:
            best[si] = (val, res.x, res.status > 0)
    results = []
    for si, mask in enumerate(masks):
        if si not in best:  # every grid point invalid: nothing finite to start from
            params = [float("nan")] * cf.p
            results.append(
                FitResult(
                    form.name,
                    dict(zip(cf.s.constants, params, strict=True)),
                    float("inf"),
                    int(mask.sum()),
                    False,
                    float("inf"),
                    ["no starting point gives a finite prediction"],
                )
            )
            continue
        val, params, converged = best[si]
        Xt = {v: a[mask] for v, a in X.items()}
        cond, reasons = _diagnose(cf, Xt, y[mask], params, objective, converged)
        results.append(
            FitResult(
                form.name,
                dict(zip(cf.s.constants, params.tolist(), strict=True)),
                val,
                int(mask.sum()),
                converged,
                cond,
                reasons,
            )
        )
    return results


def fit(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    objective: Objective | None = None,
    options: FitOptions | None = None,
) -> FitResult:
    """Fit ``form`` on all cells; see :func:`fit_splits`."""
    return fit_splits(form, X, y, np.ones((1, len(y)), bool), objective, options)[0]


def predict(form: Form, X: dict[str, np.ndarray], constants: dict[str, float]) -> np.ndarray:
    cf = CompiledForm(form)
    return cf.predict(X, np.array([constants[c] for c in cf.s.constants], float))
