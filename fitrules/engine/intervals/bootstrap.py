"""Bootstrap intervals of a fit on all cells: replicates of its data, their refits, and
intervals read off them.

``studentized`` (the default) resamples the residuals as ``residuals`` does and reads a
symmetric bootstrap-t interval off the refits: ``value +- q se``, ``se`` the fit's Jacobian
standard error (of a constant, or of a prediction by the delta method) and ``q`` the level
quantile of ``|refit - fit| / se_refit`` over the refits, each with its own standard error
from its replicate. The pivot carries what a percentile interval of 20 cells misses: the
uncertainty of the standard error itself and the skew of a nonlinear constant. On grids
drawn from composition (20 cells, 3 runs) the old default, the seed bootstrap's
percentile interval, covered the exponent b 0.86 to 0.91 of the time for a nominal 0.95
(``benchmarks/bench_intervals.py``, sections 2 and 2b), the studentized one 0.936 to 0.943
pooled over 1,000 grids for L0, a and b. The percentile kinds remain:
``seeds`` draws, within every cell, as many runs as it has, with replacement, and rescales
the resampled mean's deviation by ``sqrt(n / (n - 1))`` so that it varies as much as a mean
of n runs does (seed noise only; needs repeats); ``residuals`` adds to each cell's fitted
value a residual drawn from all cells' residuals (centred, rescaled by
sqrt(n / (n - p))), on the scale of the objective (relative, log or absolute). ``auto``
uses the residual bootstrap when any cell has a single run, where the seed bootstrap
would leave that cell fixed and give intervals of zero width, and the seed bootstrap
otherwise (the default before ``studentized``; ``design`` still measures its
seed-bootstrap spread with it). ``studentized`` falls back to ``auto``, and says so,
where the fit has no standard errors (no degree of freedom left, a rank-deficient
Jacobian). Under ``studentized`` and ``residuals`` the intervals carry the form's misfit
(the residuals are the cells' scatter about the form); under ``seeds`` only seed noise.

Each replicate is refitted from the full fit's constants by Levenberg-Marquardt, all
replicates at once (:func:`fitrules.engine.fit.refit`); one that does not converge is counted as
failed and left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import (
    BOOTSTRAP_KINDS,
    BOOTSTRAP_RESAMPLES,
    DEFAULT_BOOTSTRAP,
    LEVEL,
    MAX_BOOTSTRAP_RESAMPLES,
    WEIGHTS,
    check_count,
    check_seed,
)
from fitrules.engine.fit import (
    WEIGHT_KEY,
    FitOptions,
    FitResult,
    Objective,
    cell_weights,
    fit,
    refit,
)
from fitrules.engine.intervals.jacobian import RANK_TOL, _huber_scale2, jacobian_uncertainty
from fitrules.engine.intervals.noise import _cell_runs, _robust_cell, robust_cells, seed_noise
from fitrules.model.compiled import CompiledForm, predict
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid


@dataclass
class BootstrapFit:
    """A full-grid fit with bootstrap intervals.

    Attributes
    ----------
    kind : ``"studentized"``, ``"seeds"`` or ``"residuals"``; reason : why that kind was used.
    draws : (resamples, p) constants of each refit; a failed refit is a row of NaN.
    failed : refits that did not converge or predicted a non-finite value.
    single_run_cells : cells with one run (a seed bootstrap cannot vary them).
    covariance : (p, p) Jacobian covariance of the fit (``studentized`` only).
    covariances : (resamples, p, p) the same for each refit on its replicate (``studentized``).
    """

    form: Form
    fit: FitResult
    level: float
    resamples: int
    seed: int
    draws: np.ndarray  # (resamples, p) constants of each refit
    failed: int
    single_run_cells: int
    points: list[dict] = field(default_factory=list)
    kind: str = "seeds"
    reason: str = ""
    covariance: np.ndarray | None = None
    covariances: np.ndarray | None = None

    @property
    def interval_kind(self) -> str:
        """How the intervals are read off the refits."""
        if self.kind == "studentized":
            return "symmetric bootstrap-t"
        return "percentile"

    def _t_interval(self, value: float, se: float, draws: np.ndarray, se_draws: np.ndarray):
        """``value +- q se``, q the level quantile of |draw - value| / se_draw (None when no
        refit gives a finite ratio)."""
        with np.errstate(all="ignore"):
            t = np.abs(draws - value) / se_draws
        t = t[np.isfinite(t)]
        if not (len(t) and math.isfinite(se)):
            return None
        q = float(np.quantile(t, self.level))
        return (float(value - q * se), float(value + q * se))

    def constant_intervals(self) -> dict[str, tuple[float, float]]:
        a = (1 - self.level) / 2
        ok = np.isfinite(self.draws).all(axis=1)
        if not ok.any():
            raise FitrulesError(
                f"form {self.form.name!r}: none of the {self.resamples} bootstrap refits gave "
                "finite constants, so there are no intervals"
            )
        out = {}
        for j, c in enumerate(self.form.constants):
            if self.covariance is not None and self.covariances is not None:
                se = math.sqrt(max(float(self.covariance[j, j]), 0.0))
                se_b = np.sqrt(np.maximum(self.covariances[ok, j, j], 0.0))
                iv = self._t_interval(self.fit.constants[c], se, self.draws[ok, j], se_b)
                if iv is not None:
                    out[c] = iv
                    continue
            lo, hi = np.quantile(self.draws[ok, j], [a, 1 - a])
            out[c] = (float(lo), float(hi))
        return out

    def predict_at(self, point: dict[str, float]) -> dict:
        """Prediction and percentile interval at ``point`` (variable name -> value).

        Raises
        ------
        FitrulesError
            If the fitted form, or every bootstrap refit, predicts a value that is not
            finite there.
        """
        X = {v: np.array([float(point[v])]) for v in self.form.bound_variables}
        value = float(predict(self.form, X, self.fit.constants)[0])
        where = ", ".join(f"{k}={v:g}" for k, v in point.items())
        if not np.isfinite(value):
            raise FitrulesError(
                f"form {self.form.name!r} predicts {value} at {where}: not a finite number"
            )
        ok = np.isfinite(self.draws).all(axis=1)
        preds = np.zeros(0)
        if ok.any():
            preds = CompiledForm(self.form).predict(X, self.draws[ok])[:, 0]
        preds = preds[np.isfinite(preds)]
        if not len(preds):
            raise FitrulesError(
                f"form {self.form.name!r}: no bootstrap refit gives a finite prediction at "
                f"{where}, so there is no interval"
            )
        if self.covariance is not None and self.covariances is not None:
            cf = CompiledForm(self.form)
            params = np.array([self.fit.constants[c] for c in self.form.constants], float)
            g0 = cf.jacobian(X, params)[0]
            se = math.sqrt(max(float(g0 @ self.covariance @ g0), 0.0))
            draws = self.draws[ok]
            with np.errstate(all="ignore"):
                G = cf.jacobian(X, draws)[:, 0, :]  # (m, p)
                var = np.einsum("mp,mpq,mq->m", G, self.covariances[ok], G)
                p_all = cf.predict(X, draws)[:, 0]
            iv = self._t_interval(value, se, p_all, np.sqrt(np.maximum(var, 0.0)))
            if iv is not None:
                return {"point": dict(point), "prediction": value, "interval": list(iv)}
        a = (1 - self.level) / 2
        lo, hi = np.quantile(preds, [a, 1 - a])
        return {"point": dict(point), "prediction": value, "interval": [float(lo), float(hi)]}

    def describe(self) -> str:
        """One line: what was resampled, how many refits, how many failed."""
        what = (
            "the runs within each cell, rescaled by sqrt(n / (n - 1)) (seed noise only)"
            if self.kind == "seeds"
            else "the fit's residuals across cells, each refit studentized by its Jacobian "
            "standard errors (value +- q se, q the level quantile of |refit - fit| / se "
            "over the refits)"
            if self.kind == "studentized"
            else "the fit's residuals across cells (scatter about the form, one run per cell)"
        )
        return (
            f"{self.kind} bootstrap: {self.resamples} resamples of {what}, seed {self.seed}; "
            f"{self.failed} failed refits" + (f"; {self.reason}" if self.reason else "")
        )


def check_bootstrap_options(resamples: int, seed: int, level: float) -> None:
    """Refuse bootstrap settings outside what is allowed, before any work.

    Raises
    ------
    FitrulesError
        For fewer than 20 or more than :data:`~fitrules.base.limits.MAX_BOOTSTRAP_RESAMPLES`
        resamples, a seed outside 0 to 2**63 - 1, or a level outside (0, 1).
    """
    check_count(
        resamples,
        param("resamples"),
        20,
        MAX_BOOTSTRAP_RESAMPLES,
        "at least 20 for a percentile interval; each resample is one full fit",
    )
    check_seed(seed, "--bootstrap-seed")
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"{param('level')} {level}: must be in (0, 1), e.g. 0.95")


def bootstrap_fit(
    grid: Grid,
    form: Form,
    objective: Objective | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
    options: FitOptions | None = None,
    kind: str = DEFAULT_BOOTSTRAP,
    weights: str = WEIGHTS[0],
    variables: Sequence[str] | None = None,
) -> BootstrapFit:
    """Fit ``form`` on all cells and refit it on ``resamples`` bootstrap replicates.

    Parameters
    ----------
    grid, form, objective : what is fitted, and how.
    weights : ``cells``, ``runs`` or ``inverse-variance`` (see
        :func:`fitrules.engine.fit.cell_weights`); every replicate is fitted with the weights of
        the data, and the residual bootstrap resamples weighted (standardised) residuals.
    resamples : number of replicates (at least 20).
    seed : seed of the resampling.
    level : level of the percentile intervals.
    kind : ``"studentized"`` (the default: residual replicates, symmetric bootstrap-t
        intervals), ``"seeds"``, ``"residuals"`` or ``"auto"`` (residuals when any cell has
        a single run, else seeds; percentile intervals); see the module docstring.
    variables : the columns that define a cell (default: the form's variables); more than
        the form reads when it is compared with forms that read more (``design``).

    Raises
    ------
    FitrulesError
        For fewer than 20 resamples, a level outside (0, 1) or an unknown kind.

    Examples
    --------
    >>> path, where = default_grid()  # doctest: +SKIP
    >>> grid = load_grid(path, where=where)  # doctest: +SKIP
    >>> b = bootstrap_fit(grid, BUILTIN_FORMS["composition"])  # doctest: +SKIP
    >>> b.constant_intervals()["b"]  # doctest: +SKIP
    """
    check_bootstrap_options(resamples, seed, level)
    if kind not in BOOTSTRAP_KINDS:
        raise FitrulesError(f"bootstrap {kind!r} is unknown; allowed: {', '.join(BOOTSTRAP_KINDS)}")
    form = form.bind(grid.columns, grid.runs)
    obj = objective or Objective()
    keys = list(dict.fromkeys([*form.bound_variables, *(variables or ())]))
    noise = seed_noise(grid, keys, obj) if obj.kind == "log_huber" else None
    cells = robust_cells(grid, keys, obj, noise)
    w = cell_weights(weights, cells.table, obj)
    base = fit(form, cells.X, cells.y, obj, options, weights=w)
    values = _cell_runs(grid, cells.variables)
    single = int(sum(len(v) == 1 for v in values))
    Xw = cells.X if w is None else {**cells.X, WEIGHT_KEY: w}
    kind, reason, covariance = _bootstrap_kind(kind, form, Xw, cells.y, base, obj, values)
    from fitrules.base.limits import check_memory

    check_memory(
        bootstrap_memory(len(form.constants), len(values), sum(len(v) for v in values),
                         resamples, kind, covariance is not None),
        f"the bootstrap of form {form.name!r} ({resamples:,} resamples of {len(values):,} "
        "cells)", f"lower {param('resamples')}",
    )  # fmt: skip
    if kind == "auto":
        kind = "residuals" if single else "seeds"
        reason += (
            f"chosen because {single} of {len(values)} cells have a single run"
            if single
            else "chosen because every cell has repeated runs"
        )
    rng = np.random.default_rng(seed)
    if kind == "seeds":
        Y = _seed_replicates(values, cells, noise, resamples, rng)
    else:  # residuals, studentized or not
        Y = _residual_replicates(form, cells.X, cells.y, base.constants, obj, resamples, rng, w)
    draws, bad, covariances = _refit_replicates(
        form, cells.X, Xw, Y, base, obj, options, w, covariance
    )
    return BootstrapFit(
        form, base, level, resamples, seed, draws, int(bad.sum()), single, kind=kind,
        reason=reason, covariance=covariance, covariances=covariances,
    )  # fmt: skip


def _refit_replicates(
    form: Form,
    X: dict[str, np.ndarray],
    Xw: dict[str, np.ndarray],
    Y: np.ndarray,
    base: FitResult,
    obj: Objective,
    options: FitOptions | None,
    w: np.ndarray | None,
    covariance: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each replicate's refit (NaN where it failed), which failed, and, studentized, each
    refit's own covariance."""
    draws, _, converged = refit(form, X, Y, base.constants, obj, options, weights=w)
    bad = ~converged | ~np.isfinite(draws).all(axis=1)
    draws[bad] = np.nan
    covariances = None
    if covariance is not None:
        # each refit's own standard errors, from its replicate: the pivot |refit - fit| / se
        covariances = np.full((len(Y), *covariance.shape), np.nan)
        good = np.flatnonzero(~bad)
        if len(good):
            covariances[good] = _replicate_covariances(form, Xw, Y[good], draws[good], obj)
    return draws, bad, covariances


def _bootstrap_kind(
    kind: str,
    form: Form,
    Xw: dict[str, np.ndarray],
    y: np.ndarray,
    base: FitResult,
    obj: Objective,
    values: list[np.ndarray],
) -> tuple[str, str, np.ndarray | None]:
    """The kind of bootstrap that can be made (``auto`` still open), why it differs from the
    one asked, and the fit's covariance when studentized."""
    single = int(sum(len(v) == 1 for v in values))
    reason = ""
    covariance = None
    if kind == "studentized":
        base_u = jacobian_uncertainty(form, Xw, y, base.constants, obj)
        if base_u.ok and base_u.dof >= 1:
            covariance = base_u.covariance
        else:  # no standard error to studentize by: the percentile kinds, and why
            kind = "auto"
            reason = f"not studentized ({base_u.note or 'no standard errors'}); "
    if kind == "seeds" and single:
        # a cell of one run is the same in every seed replicate: with every cell so, the
        # intervals have zero width; with some, they are too narrow. Residuals instead, said
        kind = "residuals"
        reason = (
            f"residuals, not seeds: {single} of {len(values)} cells have a single run, which "
            "a seed replicate cannot vary (the intervals would be too narrow or of zero width)"
        )
    return kind, reason, covariance


def _seed_replicates(
    values: list[np.ndarray], cells: Cells, noise, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The cells' values in each seed replicate: every cell's runs resampled."""
    # a resampled mean of n runs varies (n - 1) / n as much as the mean does: with 3 runs
    # a cell the intervals were a fifth too narrow (coverage 0.86 for a nominal 0.95);
    # the deviations from each cell's mean are rescaled by sqrt(n / (n - 1)) to undo it
    inflate = np.array([math.sqrt(len(v) / (len(v) - 1)) if len(v) > 1 else 0.0 for v in values])
    picks = [[v[rng.integers(0, len(v), len(v))] for v in values] for _ in range(resamples)]
    if noise is not None and noise.known and noise.cv > 0:
        # log_huber: each resampled cell is reduced as the cell itself was (its runs'
        # biweight location), so a corrupted run moves a replicate no more than the fit
        means = cells.y
        cols = [np.array([row[i] for row in picks]) for i in range(len(values))]
        raw = np.array([_robust_cell(c, noise.cv) for c in cols]).T
    else:
        means = np.array([v.mean() for v in values])
        raw = np.array([[p.mean() for p in row] for row in picks])
    return means + inflate * (raw - means)


def _replicate_covariances(
    form: Form, X: dict[str, np.ndarray], Y: np.ndarray, draws: np.ndarray, objective: Objective
) -> np.ndarray:
    """(m, p, p) Jacobian covariance of each refit on its replicate, all at once: what
    :func:`jacobian_uncertainty` gives for one (NaN where J is rank-deficient)."""
    cf = CompiledForm(form)
    n, p = Y.shape[1], draws.shape[1]
    with np.errstate(all="ignore"):
        pred = cf.predict(X, draws)  # (m, n)
        r = objective.residuals(pred, Y)
        J = cf.jacobian(X, draws) * objective.dres_dpred(pred, Y)[..., None]  # (m, n, p)
        if WEIGHT_KEY in X:
            root = np.sqrt(X[WEIGHT_KEY])
            r, J = r * root, J * root[:, None]
        dof = n - p
        if objective.kind == "log_huber":
            s2 = np.array([_huber_scale2(ri, objective.delta, n, p) for ri in r])
        else:
            s2 = (r**2).sum(axis=1) / dof
        scale = np.max(np.abs(J), axis=1)  # (m, p), as in jacobian_uncertainty
        scale = np.where(scale > 0, scale, 1.0)
        Js = J / scale[:, None, :]
        finite = np.isfinite(Js).all(axis=(1, 2)) & np.isfinite(s2)
        out = np.full((len(Y), p, p), np.nan)
        if not finite.any():
            return out
        _, sv, vt = np.linalg.svd(Js[finite], full_matrices=False)
        inv = np.einsum("mki,mk,mkj->mij", vt, 1 / sv**2, vt)
        cov = s2[finite, None, None] * inv / (scale[finite, :, None] * scale[finite, None, :])
        full_rank = (sv > RANK_TOL * sv.max(axis=1, keepdims=True)).all(axis=1)
        cov[~full_rank | ~np.isfinite(cov).all(axis=(1, 2))] = np.nan
        out[finite] = cov
    return out


def _residual_replicates(
    form, X, y, constants, objective: Objective, B: int, rng, weights=None
) -> np.ndarray:
    """(B, n) data sets: the fit plus residuals drawn with replacement, on the objective's
    scale (y = pred / (1 + r) for relative, pred * exp(-r) for log, pred - r for absolute).
    With cell weights the residuals are standardised (times the root weight) before they
    are drawn, and each draw is put back on its cell's scale."""
    pred = predict(form, X, constants)
    r = objective.residuals(pred, y)
    root = np.ones(len(y)) if weights is None else np.sqrt(np.asarray(weights, float))
    r = r * root
    n, p = len(y), len(form.constants)
    if n - p < 1:
        raise FitrulesError(
            f"form {form.name!r}: {n} cells for {p} constants leave no residual to resample"
        )
    r = (r - r.mean()) * np.sqrt(n / (n - p))
    draw = r[rng.integers(0, n, (B, n))] / root
    if objective.kind == "rel_ls":
        return pred / (1 + draw)
    if objective.kind == "log_huber":
        with np.errstate(over="ignore"):  # a huge log residual: that replicate fails its refit
            return pred * np.exp(-draw)
    return pred - draw


def bootstrap_memory(
    n_constants: int, n_cells: int, n_runs: int, resamples: int, kind: str, studentized: bool
) -> float:
    """Bytes :func:`bootstrap_fit` needs at its peak, estimated before any replicate is
    drawn: the replicates (resamples x cells), for the seed kind the runs drawn per replicate
    (a small array per cell, about 120 bytes each, plus 8 bytes a run), the refits'
    Levenberg-Marquardt arrays (a few resamples x cells x constants), and for the
    studentized kind each refit's Jacobian and covariance."""
    R, n, p = float(resamples), float(n_cells), float(max(n_constants, 1))
    replicates = R * n * 8.0
    picks = R * (n * 120.0 + n_runs * 8.0) if kind in ("seeds", "auto") else 0.0
    refits = R * n * p * 8.0 * 4 + R * n * 8.0 * 4
    jacobians = R * n * p * 8.0 * 3 + R * p * p * 8.0 if studentized else 0.0
    return replicates + picks + refits + jacobians
