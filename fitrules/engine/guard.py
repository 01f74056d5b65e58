"""The wild-extrapolation guard: fits whose predictions run away, found from training alone.

A fit can converge inside its bounds, pass every identifiability check, and still predict
164 nats where the grid holds 2.4: one such split dominates a mean. The guard looks at each
(split, form) fit using only what the fit itself saw, its training cells' values, and the
grid's design (the coordinates of every cell, never a held-out value):

- **span**: the spread of its predictions over every cell of the grid, divided by the spread
  of the training values; a fit that interpolates sensibly stays within a few times that;
- **uncertainty**: the delta-method standard error of each prediction (covariance of the
  constants ``s^2 (J'J)^-1`` from the training residuals), relative to the prediction;
- **excursion**: how far, on average over the grid's cells it was not fitted on, its
  predictions lie outside the range of its training values widened, at each cell, to the
  straight line through them (least squares in the form's variables, each in its log when
  positive; only at cells within one training range of the training cells in every
  variable), as a percentage of their level. A form whose predictions curve sharply can
  spread widely and be right (the span of a good composition fit reaches 15 times its
  training values'); a runaway leaves the training range at most of the cells it predicts.
  On the default grid (4,500 splits per form) no fit that kept within 10% was a runaway,
  and fewer than 1.3% of the others passed 10%; the span and uncertainty rules alone missed
  8 of additive's 141 runaways. The line is there for extrapolations that carry a real
  trend on: fine-tuning loss falls 10% a doubling of data, so a right fit predicts the
  held-out levels 10-15% outside the training values, and measured from the range alone
  the published SFT law was named wild in 22 of 125 rolling-origin fits that were not
  runaways (4 with the line; ``benchmarks/bench_guard.py --published``);
- **range** (optional): a prediction outside the metric's plausible range, e.g. above
  ln 37 = 3.61 nats for a uniform guess over 37 characters.

The thresholds are fixed before any held-out cell is scored. A fit that trips the guard
stays in the distribution of held-out errors (it is a real prediction of the form); it is
counted and named, and summaries are shown with and without it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import GUARD_EXCURSION, GUARD_SE, GUARD_SPAN
from fitrules.engine.fit import FitResult, Objective, value_scale
from fitrules.model.compiled import CompiledForm

TINY = 1e-300


@dataclass(frozen=True)
class GuardOptions:
    """Thresholds of the wild-extrapolation guard.

    Parameters
    ----------
    max_span : flag a fit whose predictions over the grid's cells spread more than this many
        times the spread of its training values (default 20).
    max_rel_se : flag a fit whose delta-method standard error at some cell exceeds this
        fraction of the prediction there (default 1).
    max_excursion : flag a fit whose predictions at the cells it was not fitted on lie, on
        average, more than this percentage of the training values' level outside their
        range and their straight-line trend (default 10; see the module).
    metric_range : optional (low, high) plausible range of the metric; a prediction outside
        it is flagged.
    """

    max_span: float = GUARD_SPAN
    max_rel_se: float = GUARD_SE
    metric_range: tuple[float, float] | None = None
    max_excursion: float = GUARD_EXCURSION

    def __post_init__(self) -> None:
        if not (np.isfinite(self.max_span) and self.max_span > 1):
            raise FitrulesError(
                f"{param('guard_span')} {self.max_span:g}: must be a finite number > 1"
            )
        if not (np.isfinite(self.max_rel_se) and self.max_rel_se > 0):
            raise FitrulesError(
                f"{param('guard_se')} {self.max_rel_se:g}: must be a finite number > 0"
            )
        if not (np.isfinite(self.max_excursion) and self.max_excursion > 0):
            raise FitrulesError(
                f"{param('guard_excursion')} {self.max_excursion:g}: must be a finite "
                "percentage > 0"
            )
        if self.metric_range is not None:
            lo, hi = self.metric_range
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                raise FitrulesError(
                    f"{param('metric_range')} {lo:g},{hi:g}: needs two finite numbers LO < HI"
                )

    def describe(self) -> dict:
        return asdict(self)


def parse_metric_range(text: str | None) -> tuple[float, float] | None:
    """``"0,3.61"`` -> (0.0, 3.61); None stays None."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise FitrulesError(
            f"{param('metric_range')} {text!r}: expected LO,HI, two numbers, e.g. 0,3.61"
        ) from None
    GuardOptions(metric_range=(lo, hi))  # validates
    return lo, hi


@dataclass(frozen=True)
class GuardResult:
    """The guard's verdict on one fit."""

    wild: bool
    span_ratio: float
    max_rel_se: float
    worst_cell: int  # index of the cell whose prediction is furthest from the training values
    worst_prediction: float
    reasons: tuple[str, ...]
    excursion_pct: float = float("nan")


def check_fits(
    form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    masks: np.ndarray,
    fits: list[FitResult],
    objective: Objective,
    options: GuardOptions | None = None,
    labels: list[str] | None = None,
) -> list[GuardResult]:
    """Run the guard on every fit of ``form``; ``masks[s]`` marks split ``s``'s training cells.

    ``X`` holds the coordinates of every cell of the grid (the design); ``y`` is read only
    where ``masks`` is true. ``labels`` name the cells in messages.
    """
    options = options or GuardOptions()
    cf = CompiledForm(form)
    masks = np.atleast_2d(np.asarray(masks, bool))
    S, n = masks.shape
    params = np.array([[r.constants[c] for c in cf.s.constants] for r in fits], float)
    ok = np.isfinite(params).all(axis=1)
    safe = np.where(ok[:, None], params, 0.0)
    pred = cf.predict(X, safe)  # (S, n): every cell of the grid
    G = cf.jacobian(X, safe)  # (S, n, p)
    scale = value_scale(cf, y)
    if scale != 1.0:
        # the delta method does not depend on the constants' units: measure the linear ones
        # in units of the values' scale (as the fit did) so that J'J stays finite
        G = G.copy()
        G[..., cf.lin_idx] *= scale
    y_train = np.where(masks, y[None, :], np.nan)
    with np.errstate(all="ignore"):
        lo_t, hi_t = np.nanmin(y_train, axis=1), np.nanmax(y_train, axis=1)
        spread = np.maximum(hi_t - lo_t, 1e-12 * np.maximum(np.abs(hi_t), 1.0))
        span = (pred.max(axis=1) - pred.min(axis=1)) / spread
        # how far each prediction lies outside the training values, in training spreads
        outside = np.maximum(pred - hi_t[:, None], lo_t[:, None] - pred) / spread[:, None]
        # the same at the cells not fitted, averaged, in % of the training values' level;
        # measured from the training range widened to the training values' own trend there
        trend = _trend(form, X, y, masks)
        lo_e, hi_e = np.fmin(lo_t[:, None], trend), np.fmax(hi_t[:, None], trend)
        past = np.maximum(pred - hi_e, lo_e - pred) / spread[:, None]
        level = np.maximum(np.abs(np.nanmedian(y_train, axis=1)), spread)
        beyond = np.maximum(past, 0.0) * (spread / level)[:, None] * 100
        n_out = np.maximum((~masks).sum(axis=1), 1)
        excursion = np.where(~masks, beyond, 0.0).sum(axis=1) / n_out
        rel_se = _delta_rel_se(cf, X, y, masks, safe, pred, G, objective)
    # per split at once: what the loop below reads of each
    valid = (ok & np.isfinite(pred).all(axis=1)).tolist()
    worsts = np.argmax(outside, axis=1).tolist()
    has_se = np.isfinite(rel_se).any(axis=1)
    with np.errstate(all="ignore"):
        top_se = np.where(has_se, np.fmax.reduce(rel_se, axis=1), np.nan).tolist()
    has_se = has_se.tolist()
    out = []
    for s in range(S):
        if not valid[s]:
            out.append(GuardResult(True, np.inf, np.inf, -1, np.nan, ("prediction not finite",)))
            continue
        worst = worsts[s]
        where = labels[worst] if labels else f"cell {worst}"
        reasons = []
        if span[s] > options.max_span:
            reasons.append(
                f"predicts {pred[s, worst]:.4g} at {where}: predictions spread "
                f"{span[s]:.3g} times the training values' spread"
            )
        if excursion[s] > options.max_excursion:
            reasons.append(
                f"predictions at the cells not fitted lie {excursion[s]:.3g}% of the training "
                f"level outside the training values on average (worst {pred[s, worst]:.4g} at "
                f"{where})"
            )
        if has_se[s] and top_se[s] > options.max_rel_se:
            j = int(np.nanargmax(rel_se[s]))
            cell = labels[j] if labels else f"cell {j}"
            top = top_se[s]
            # a standard error that overflows is said so, never printed as 'inf'
            times = f"{top:.3g} times" if np.isfinite(top) else "beyond any multiple of"
            reasons.append(f"delta-method standard error {times} the prediction at {cell}")
        if options.metric_range is not None:
            lo, hi = options.metric_range
            bad = (pred[s] < lo) | (pred[s] > hi)
            if bad.any():
                j = int(np.argmax(np.where(bad, np.abs(pred[s]), -np.inf)))
                cell = labels[j] if labels else f"cell {j}"
                reasons.append(
                    f"predicts {pred[s, j]:.4g} at {cell}, outside the metric range "
                    f"[{lo:g}, {hi:g}]"
                )
        se_max = top_se[s]  # NaN where no standard error is finite
        out.append(
            GuardResult(
                bool(reasons),
                float(span[s]),
                se_max,
                worst,
                float(pred[s, worst]),
                tuple(reasons),
                float(excursion[s]),
            )
        )
    return out


def _trend(form, X: dict[str, np.ndarray], y: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per split, at every cell, the straight line through its training values: least
    squares in the form's variables (the log of a variable positive at every cell, else the
    variable), (S, n); NaN at a cell farther beyond the training cells, in some variable,
    than the training cells' own range in it.

    A steady trend carried past the training levels is what an extrapolation that is right
    does (fine-tuning loss falls 10% a doubling of data: the held-out levels lie 10-15% below
    the training values); a runaway leaves the line as it leaves the range. Farther out a
    straight line is no safer than the range: a line in log N fitted over two decades runs
    off four decades on."""
    cols = []
    for v in form.bound_variables:
        x = np.asarray(X[v], float)
        cols.append(np.log(x) if (x > 0).all() else x)
    Z = np.stack([np.ones(masks.shape[1]), *cols], axis=1)
    Z = Z / np.maximum(np.abs(Z).max(axis=0), 1e-300)  # comparable columns for the rcond
    m = masks.astype(float)
    with np.errstate(all="ignore"):
        # every split's least squares at once (a search checks hundreds of thousands of
        # fits): normal equations, solved by pseudo-inverse where the levels leave a column
        # without effect (the minimum-norm solution, as lstsq gives)
        A = np.einsum("sn,ni,nj->sij", m, Z, Z)
        b = np.einsum("sn,ni->si", np.where(masks, y[None, :], 0.0), Z)
        beta = np.einsum("sij,sj->si", np.linalg.pinv(A, rcond=1e-10, hermitian=True), b)
        out = beta @ Z.T
        Zm = np.where(masks[..., None], Z[None, :, 1:], np.nan)
        lo, hi = np.nanmin(Zm, axis=1), np.nanmax(Zm, axis=1)  # (S, k): the training cells'
        w = hi - lo
        near = ((Z[None, :, 1:] >= (lo - w)[:, None, :])
                & (Z[None, :, 1:] <= (hi + w)[:, None, :])).all(axis=2)  # fmt: skip
    return np.where(near & np.isfinite(out), out, np.nan)


def _delta_rel_se(cf, X, y, masks, params, pred, G, objective: Objective) -> np.ndarray:
    """Relative delta-method standard error of the prediction at every cell, (S, n).

    The constants' covariance is ``s^2 (J'J)^+`` with J the Jacobian of the training
    residuals and ``s^2`` their sum of squares over ``n_train - p`` degrees of freedom; NaN
    where no degree of freedom is left.
    """
    S, n = masks.shape
    yb = np.broadcast_to(y, (S, n))
    r = objective.residuals(pred, yb)
    J = G * objective.dres_dpred(pred, yb)[..., None]
    m = masks.astype(float)
    J = np.where(np.isfinite(J), J, 0.0) * m[..., None]
    r = np.where(masks & np.isfinite(r), r, 0.0)
    dof = masks.sum(axis=1) - cf.p
    s2 = np.where(dof > 0, (r**2).sum(axis=1) / np.maximum(dof, 1), np.nan)
    JtJ = np.swapaxes(J, -1, -2) @ J
    ok = np.isfinite(JtJ).all(axis=(1, 2))
    cov = np.full_like(JtJ, np.nan)
    if ok.any():
        cov[ok] = np.linalg.pinv(JtJ[ok], hermitian=True) * s2[ok, None, None]
    Gf = np.where(np.isfinite(G), G, 0.0)
    var = np.einsum("snp,spq,snq->sn", Gf, cov, Gf)
    return np.sqrt(np.maximum(var, 0.0)) / np.maximum(np.abs(pred), TINY)


TURN_STEP = 0.5  # a move back of more than this many of the training levels' median steps


def turns_back(
    cf: CompiledForm,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    params: np.ndarray,
    column: str,
) -> np.ndarray:
    """Per split, whether the fit turns back past its training levels along ``column``
    (issue 41, shape sense): its training levels' mean values all move one way (3 levels
    or more), and its predictions at the scored cells beyond the top training level move
    back from its own prediction at that level, on average, by more than ``TURN_STEP``
    times the median step between consecutive training levels' means.

    Loss that falls with every doubling of data or parameters on the grid does not rise
    beyond it on any law the field has published; a form that fits the training levels
    with a curve that turns (``a*x + b*log(x)``) predicts that it does. Like the guard, this
    reads the training values and the design only, never a held-out value. ``params``
    (splits, constants); rows with a non-finite constant are not judged (they fail anyway)."""
    z = np.asarray(X[column], float)
    out = np.zeros(len(train), bool)
    for s in range(len(train)):
        t, h = train[s], test[s]
        levels = np.unique(z[t])
        if len(levels) < 3 or not np.isfinite(params[s]).all():
            continue
        means = np.array([y[t & (z == v)].mean() for v in levels])
        steps = np.diff(means)
        if not ((steps > 0).all() or (steps < 0).all()):
            continue
        beyond = h & (z > levels[-1])
        if not beyond.any():
            continue
        at = {v: np.asarray(X[v])[beyond] for v in cf.form.bound_variables}
        top = {**at, column: np.full(int(beyond.sum()), levels[-1])}
        with np.errstate(all="ignore"):
            moved = cf.predict(at, params[s][None, :])[0] - cf.predict(top, params[s][None, :])[0]
        back = np.maximum(-np.sign(steps[0]) * moved, 0.0)
        if np.isfinite(back).all():
            out[s] = float(back.mean()) > TURN_STEP * float(np.median(np.abs(steps)))
    return out
