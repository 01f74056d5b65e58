"""Uncertainty of a fit on all cells: Jacobian standard errors and bootstrap intervals.

Two answers, always labelled with how they were made:

- **Jacobian** (cheap, always given): the covariance of the constants is
  ``s^2 (J'J)^-1``, with J the Jacobian of the training residuals at the fit and ``s^2``
  the residual variance (sum of squared residuals over n - p degrees of freedom); standard
  errors and correlations follow, and the delta method gives a standard error for any
  prediction. For ``log_huber`` ``s^2`` is Huber's sandwich factor instead (the clipped
  residuals' mean square over the share of residuals within delta, squared), so that a few
  corrupted runs, which the fit shrugs off, do not multiply the errors either. Because ``s^2`` is
  the scatter of the cells about the form, these errors carry the form's misfit as well as
  seed noise, and they exist with one run per cell.
- **Bootstrap**, intervals from refits of resampled data. ``studentized`` (the default)
  resamples the residuals as ``residuals`` does and reads a symmetric bootstrap-t interval
  off the refits: ``value +- q se``, ``se`` the fit's Jacobian standard error (of a
  constant, or of a prediction by the delta method) and ``q`` the level quantile of
  ``|refit - fit| / se_refit`` over the refits, each with its own standard error from its
  replicate. The pivot carries what a percentile interval of 20 cells misses: the
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
from functools import cached_property

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError
from fitrules.base.limits import (
    BOOTSTRAP_KINDS,
    BOOTSTRAP_RESAMPLES,
    DEFAULT_BOOTSTRAP,
    LEVEL,
    MAX_ABS_VALUE,
    MAX_BOOTSTRAP_RESAMPLES,
    WEIGHTS,
    check_count,
    check_seed,
)
from fitrules.base.util import spread_unit
from fitrules.engine.fit import (
    WEIGHT_KEY,
    FitOptions,
    FitResult,
    Objective,
    cell_weights,
    fit,
    fit_splits,
    refit,
)
from fitrules.model import expr as ex
from fitrules.model.compiled import CompiledForm, predict
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid

RANK_TOL = 1e-10  # relative singular value below which J'J is treated as singular


@dataclass(frozen=True)
class JacobianUncertainty:
    """Standard errors and correlations of a fit's constants from its Jacobian.

    Attributes
    ----------
    constants : the constants, in the order of the matrices.
    covariance : (p, p) ``s^2 (J'J)^-1``; NaN when it cannot be estimated (see ``note``).
    residual_sd : ``s``, on the scale of the objective's residuals.
    dof : n - p.
    rank : rank of J at the fit.
    note : empty, or why the covariance is missing or unreliable.
    """

    constants: tuple[str, ...]
    covariance: np.ndarray
    residual_sd: float
    dof: int
    rank: int
    note: str = ""

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.covariance).all())

    @property
    def stderr(self) -> dict[str, float]:
        se = np.sqrt(np.maximum(np.diagonal(self.covariance), 0.0))
        return {c: float(v) for c, v in zip(self.constants, se, strict=True)}

    @property
    def correlation(self) -> pd.DataFrame:
        se = np.sqrt(np.maximum(np.diagonal(self.covariance), 0.0))
        with np.errstate(all="ignore"):
            corr = self.covariance / np.outer(se, se)
        return pd.DataFrame(corr, index=list(self.constants), columns=list(self.constants))

    def strongest(self, k: int = 3, above: float = 0.0) -> list[tuple[str, str, float]]:
        """The ``k`` largest correlations in absolute value (pairs, each once)."""
        c = self.correlation.to_numpy()
        pairs = [
            (self.constants[i], self.constants[j], float(c[i, j]))
            for i in range(len(self.constants))
            for j in range(i + 1, len(self.constants))
            if np.isfinite(c[i, j]) and abs(c[i, j]) >= above
        ]
        return sorted(pairs, key=lambda t: -abs(t[2]))[:k]

    def prediction_se(self, form: Form, X: dict[str, np.ndarray], constants: dict) -> np.ndarray:
        """Delta-method standard error of the prediction at each point of ``X``."""
        cf = CompiledForm(form)
        G = cf.jacobian(X, np.array([constants[c] for c in cf.s.constants], float))
        var = np.einsum("np,pq,nq->n", G, self.covariance, G)
        return np.sqrt(np.maximum(var, 0.0))

    def to_dict(self) -> dict:
        return {
            "method": "jacobian: s^2 (J'J)^-1 at the fit, s^2 the residual variance "
            "(for log_huber: Huber's sandwich factor)",
            "stderr": self.stderr,
            "correlation": self.correlation.to_dict(),
            "residual_sd": self.residual_sd,
            "dof": self.dof,
            "rank": self.rank,
            "note": self.note,
        }


def jacobian_uncertainty(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    constants: dict[str, float],
    objective: Objective | None = None,
) -> JacobianUncertainty:
    """Covariance of a fit's constants from the Jacobian of its residuals at the fit.

    Parameters
    ----------
    form : a bound form; X, y : the cells it was fitted on; constants : the fit.
    objective : whose residuals (relative, log or absolute) the variance is taken of.

    Returns
    -------
    JacobianUncertainty
        With NaN covariance, and a note saying why, when no degree of freedom is left or
        the Jacobian is rank-deficient at the fit.

    Examples
    --------
    >>> import numpy as np
    >>> from fitrules.model.forms import Form
    >>> x = np.arange(1.0, 9.0)
    >>> y = 2 + 0.5 * x + np.array([0.01, -0.02, 0.0, 0.02, -0.01, 0.01, -0.02, 0.01])
    >>> u = jacobian_uncertainty(Form("line", "a + b*x", ("x",)), {"x": x}, y,
    ...                          {"a": 2.0, "b": 0.5}, Objective("abs_ls"))
    >>> float(round(u.correlation.loc["a", "b"], 2))  # -mean(x) / sqrt(mean(x**2))
    -0.89
    """
    objective = objective or Objective()
    cf = CompiledForm(form)
    params = np.array([constants[c] for c in cf.s.constants], float)
    y = np.asarray(y, float)
    pred = cf.predict(X, params)
    with np.errstate(all="ignore"):
        r = objective.residuals(pred, y)
        J = cf.jacobian(X, params) * objective.dres_dpred(pred, y)[:, None]
        if WEIGHT_KEY in X:  # weighted fits: the residuals the objective squares
            r = r * np.sqrt(X[WEIGHT_KEY])
            J = J * np.sqrt(X[WEIGHT_KEY])[:, None]
    n, p = J.shape
    dof = n - p
    nan = np.full((p, p), np.nan)
    if not (np.isfinite(J).all() and np.isfinite(r).all()):
        return JacobianUncertainty(cf.s.constants, nan, np.nan, dof, 0, "prediction not finite")
    s2 = float((r**2).sum() / dof) if dof > 0 else np.nan
    if objective.kind == "log_huber" and dof > 0:
        s2 = _huber_scale2(r, objective.delta, n, p)
    # column scaling keeps J'J invertible in floating point when constants differ in size;
    # by the largest entry, which cannot overflow where a norm of 1e300-sized entries would
    scale = np.max(np.abs(J), axis=0) if n else np.ones(p)
    scale = np.where(scale > 0, scale, 1.0)
    sv = np.linalg.svd(J / scale, compute_uv=False)
    rank = int((sv > RANK_TOL * sv.max()).sum()) if sv.size and sv.max() > 0 else 0
    if dof <= 0:
        note = f"no degree of freedom left ({n} cells for {p} constants)"
        return JacobianUncertainty(cf.s.constants, nan, np.nan, dof, rank, note)
    if rank < p:
        note = f"Jacobian is rank-deficient at the fit (rank {rank} of {p})"
        return JacobianUncertainty(cf.s.constants, nan, float(np.sqrt(s2)), dof, rank, note)
    Js = J / scale
    with np.errstate(all="ignore"):  # constants of 1e-300-sized data: out of range, said so
        cov = s2 * np.linalg.inv(Js.T @ Js) / np.outer(scale, scale)
    if not np.isfinite(cov).all():
        note = "standard errors outside the floating-point range at this scale of the data"
        return JacobianUncertainty(cf.s.constants, nan, float(np.sqrt(s2)), dof, rank, note)
    cond = float(sv.max() / sv.min())
    note = (
        f"Jacobian is badly conditioned (condition number {cond:.1e}): the errors are large "
        "and only locally meaningful"
        if cond > 1e6
        else ""
    )
    return JacobianUncertainty(cf.s.constants, cov, float(np.sqrt(s2)), dof, rank, note)


def _huber_scale2(r: np.ndarray, delta: float, n: int, p: int) -> float:
    """Huber's sandwich factor, so that ``cov = factor * (J'J)^-1`` for a Huber fit.

    ``K^2 [sum psi(r)^2 / (n - p)] / mean(psi'(r))^2`` with ``psi`` the residual clipped at
    +-delta and ``K = 1 + (p / n) var(psi') / mean(psi')^2`` (Huber, Robust Statistics,
    1981, section 7.6). A run far off moves ``psi`` by at most delta, so the standard errors
    stay put where ``s^2`` (the mean squared residual) would be multiplied by its square.
    ``mean(psi')``, the share of residuals within delta, comes from a normal bulk with the
    residuals' MAD as scale when fewer than 10 residuals lie within delta (too few to count).
    """
    from scipy import stats  # lazily: the compare command does not load scipy.stats

    psi = np.clip(r, -delta, delta)
    inside = np.abs(r) <= delta
    if inside.sum() >= 10:
        m = float(inside.mean())
    else:
        sigma = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        m = float(2 * stats.norm.cdf(delta / sigma) - 1) if sigma > 0 else 1.0
    if m <= 0:
        return float((r**2).sum() / (n - p))
    k = 1 + (p / n) * m * (1 - m) / m**2
    return float(k**2 * (psi**2).sum() / (n - p) / m**2)


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
        "--resamples",
        20,
        MAX_BOOTSTRAP_RESAMPLES,
        "at least 20 for a percentile interval; each resample is one full fit",
    )
    check_seed(seed, "--bootstrap-seed")
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"--level {level}: must be in (0, 1), e.g. 0.95")


def parse_point(text: str, option: str = "--predict") -> dict[str, float]:
    """``"H=8,keep=0.25"`` -> {"H": 8.0, "keep": 0.25}; every value a finite number.

    Raises
    ------
    FitrulesError
        For a part that is not NAME=NUMBER, a name given twice, a value that is not finite,
        or an empty point.
    """
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().strip("`")
        try:
            if not sep or not key:
                raise ValueError
            number = float(value)
        except ValueError:
            raise FitrulesError(
                f"{option} {text!r}: {part!r} is not of the form NAME=NUMBER"
            ) from None
        if not math.isfinite(number):
            raise FitrulesError(f"{option} {text!r}: {key}={value.strip()} is not finite")
        if key in given:
            raise FitrulesError(f"{option} {text!r}: {key!r} is given twice")
        given[key] = number
    if not given:
        raise FitrulesError(f"{option} {text!r}: no NAME=NUMBER given")
    return given


def resolve_point(
    text_or_dict, form: Form, derive=(), option: str = "--predict", harness: bool = True
) -> tuple[dict, dict]:
    """``"H=8,keep=0.25"`` -> (the values as given, the form's variables at that point).

    Variables the point does not name are computed from the ``--derive`` expressions, and
    ``omega`` from ``keep`` (omega = 1/keep - 1) when the grid's convention is needed. Every
    name must be a variable of the form or an input of a derivation; a variable that is both
    given and derivable must agree with its derivation; values with a known domain (H, M,
    keep, omega) must lie in it when the grid is one the harness wrote (``harness``).

    Raises
    ------
    FitrulesError
        For an unknown name, a value outside its domain, a contradiction, or a variable the
        point does not determine.
    """
    if isinstance(text_or_dict, dict):
        import numbers

        for k, v in text_or_dict.items():
            if (
                not isinstance(k, str)
                or isinstance(v, bool)
                or not isinstance(v, numbers.Real)
                or not math.isfinite(float(v))
            ):
                raise FitrulesError(
                    f"{option} {text_or_dict!r}: {k!r} = {v!r}; a point maps variable names "
                    "to finite numbers"
                )
        given = {str(k): float(v) for k, v in text_or_dict.items()}
        shown: object = text_or_dict
    elif not isinstance(text_or_dict, str):
        raise FitrulesError(
            f"{option} {text_or_dict!r}: give a point as text ('H=8,keep=0.25') or a dict"
        )
    else:
        given = parse_point(text_or_dict, option)
        shown = text_or_dict
    rules: list[tuple[str, ex.Node, str]] = []
    for text in derive:
        name, _, rhs = text.partition("=")
        rules.append((name.strip().strip("`"), ex.parse(rhs), text))
    if "omega" in form.bound_variables and not any(r[0] == "omega" for r in rules):
        rules.append(("omega", ex.parse("1/keep - 1"), "omega = 1/keep - 1"))
    inputs = {n for _, node, _ in rules for n in ex.names(node)}
    known = set(form.bound_variables) | inputs | {r[0] for r in rules}
    unknown = [k for k in given if k not in known]
    if unknown:
        raise FitrulesError(
            f"{option} {shown!r}: {unknown[0]!r} is not a variable of form {form.name!r} "
            f"(variables: {', '.join(form.bound_variables)})"
        )
    _check_domain(given, shown, option)
    values = dict(given)
    for name, node, text in rules:
        if not all(n in values for n in ex.names(node)):
            continue
        with np.errstate(all="ignore"):
            v = float(ex.evaluate(node, values))
        if name in given:
            if not math.isclose(v, given[name], rel_tol=1e-9, abs_tol=1e-12):
                raise FitrulesError(
                    f"{option} {shown!r}: {name}={given[name]:g} contradicts {text!r}, which "
                    f"gives {name}={v:g}; give one of them"
                )
            continue
        if not math.isfinite(v):
            raise FitrulesError(f"{option} {shown!r}: {text!r} gives {name}={v} there")
        values[name] = v
    _check_domain(values, shown, option, harness)
    missing = [v for v in form.bound_variables if v not in values]
    if missing:
        raise FitrulesError(
            f"{option} {shown!r} does not give {', '.join(missing)}, which form {form.name!r} reads"
        )
    return given, {v: values[v] for v in form.bound_variables}


def _check_domain(values: dict[str, float], shown, option: str, harness: bool = True) -> None:
    from fitrules.model.grids import DOMAIN

    for name, v in values.items():
        if not math.isfinite(v) or abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(f"{option} {shown!r}: {name}={v:g} is not a finite value")
        if harness and name in DOMAIN:
            test, allowed = DOMAIN[name]
            if not bool(test(np.float64(v))):
                raise FitrulesError(f"{option} {shown!r}: {name}={v:g}; {allowed}")


def format_point(point: dict) -> str:
    """``{"H": 8.0, "keep": 0.25}`` -> ``"H=8, keep=0.25"``."""
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float | int) else f"{k}={v}" for k, v in point.items()
    )


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
        "cells)", "lower --resamples",
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


# ------------------------------------------------------------------ seed noise
ROBUST_NOISE_METHOD = (
    "1.4826 x median absolute relative deviation of each run from its cell's biweight location "
    "(log_huber), the deviations rescaled by sqrt(n / (n - 1)), pooled over the cells"
)


@dataclass(frozen=True)
class SeedNoise:
    """The seed noise of one run, as a coefficient of variation pooled over the cells.

    Attributes
    ----------
    cv : robust spread of one run about its cell's mean, relative to the cell's value;
        NaN when no cell has two runs.
    runs : runs that entered the estimate (those of cells with two or more runs).
    cells : cells with two or more runs.
    method : how it was estimated, for the record.
    """

    cv: float
    runs: int
    cells: int
    method: str = (
        "1.4826 x median absolute relative deviation of each run from its cell's mean, "
        "the deviations rescaled by sqrt(n / (n - 1)), pooled over the cells"
    )

    @property
    def known(self) -> bool:
        return bool(np.isfinite(self.cv))


def seed_noise(
    grid: Grid, variables: tuple[str, ...] | list[str], objective: Objective | None = None
) -> SeedNoise:
    """Robust coefficient of variation of one run, pooled over the cells with repeats.

    A MAD of the runs' relative deviations from their cells' means, not a pooled variance:
    one corrupted run then moves a few of the deviations, not the estimate (a pooled
    variance is multiplied by the square of the corruption). Each deviation is rescaled by
    ``sqrt(n / (n - 1))`` so that, with Gaussian seed noise, it has the variance of one run
    whatever the cell's seed count ``n``.

    Under ``log_huber`` the deviations are then taken again from each cell's biweight location
    (see :func:`robust_cells`) instead of its mean: a corrupted run moves its cell's mean,
    and with it the deviations of the cell's good runs, which would make one bad run three
    large deviations (with 2 of 108 runs corrupted, the noise rose 12%).

    Parameters
    ----------
    grid : the runs.
    variables : the columns that define a cell.
    objective : the training objective (``log_huber``: deviations from the biweight location).

    Returns
    -------
    SeedNoise
        With ``cv`` NaN when no cell has two or more runs.

    Examples
    --------
    >>> noise = seed_noise(grid, ("H", "omega"))  # doctest: +SKIP
    >>> round(100 * noise.cv, 2)  # percent of the value  # doctest: +SKIP
    """
    keys = list(dict.fromkeys(variables))
    y = grid.runs[grid.metric].to_numpy(float)
    g = grid.runs.groupby(keys, sort=False)[grid.metric]
    mean = g.transform("mean").to_numpy(float)
    n = g.transform("size").to_numpy(float)
    ok = (n >= 2) & np.isfinite(y) & (mean != 0)
    if not ok.any():
        return SeedNoise(math.nan, 0, 0)
    cells = int(g.ngroups - int((g.size() < 2).sum()))

    def spread(center: np.ndarray) -> float:
        dev = (y[ok] - center[ok]) / np.abs(center[ok]) * np.sqrt(n[ok] / (n[ok] - 1))
        cv = float(1.4826 * np.median(np.abs(dev)))
        if cv == 0:  # most runs repeat their cell's mean exactly: the MAD says nothing
            cv = float(np.sqrt(np.mean(dev**2)))
        return cv

    cv = spread(mean)
    if objective is not None and objective.kind == "log_huber" and cv > 0 and np.isfinite(cv):
        robust = g.transform(lambda s: _robust_cell(s.to_numpy(float), cv)).to_numpy(float)
        if np.isfinite(robust[ok]).all() and (robust[ok] != 0).all():
            cv = spread(robust)
            return SeedNoise(cv, int(ok.sum()), cells, ROBUST_NOISE_METHOD)
    return SeedNoise(cv, int(ok.sum()), cells)


BIWEIGHT_C = 4.685  # Tukey's tuning constant: 95% of the mean's efficiency for Gaussian runs


def biweight_location(values: np.ndarray, scale: np.ndarray, c: float = BIWEIGHT_C) -> np.ndarray:
    """Tukey's biweight M-estimate of location of each row of ``values`` (..., n), scale known.

    The ``mu`` near the median with ``sum psi((v - mu) / scale) = 0``, ``psi(u) = u (1 -
    (u / c)^2)^2`` for ``|u| < c`` and 0 beyond: runs within a few scales of the rest count
    nearly as in the mean, a run more than ``c`` scales off does not count at all (a
    redescending estimate: a corrupted run neither moves its cell nor biases it, where a
    Huber estimate would still be pulled by ``k * scale / n``). Solved by iterated
    reweighting from the median; ``scale`` broadcasts against ``values[..., 0]``.
    """
    v = np.asarray(values, float)
    s = np.asarray(scale, float)[..., None]
    mu = np.median(v, axis=-1)
    for _ in range(100):
        with np.errstate(divide="ignore", invalid="ignore"):
            u = (v - mu[..., None]) / s
        w = np.where(np.abs(u) < c, (1 - (u / c) ** 2) ** 2, 0.0)
        new = (w * v).sum(axis=-1) / w.sum(axis=-1)  # the median run always has weight 1
        done = np.allclose(new, mu, rtol=1e-12, atol=0.0)
        mu = new
        if done:
            break
    return mu


def robust_cells(
    grid: Grid,
    variables: Sequence[str],
    objective: Objective | None = None,
    noise: SeedNoise | None = None,
) -> Cells:
    """The grid's cells as a fit under ``objective`` reads them.

    For ``log_huber`` a cell's value is the biweight M-estimate of its runs' location
    (:func:`biweight_location`; scale: the pooled robust seed noise of one run times the
    cell's median, see :func:`seed_noise`), not their mean: a corrupted run, which a Huber
    fit shrugs off when it is a cell of its own, would otherwise move its whole cell, and
    every uncertainty measured from the cells (random-split refits, held-out misfit, seed
    bootstrap) with it. Cells of one or two runs (nothing to outvote), every other
    objective, and grids without repeats keep the mean.
    """
    obj = objective or Objective()
    cells = grid.cells(variables, positive=obj.kind != "abs_ls")
    if obj.kind != "log_huber":
        return cells
    noise = noise if noise is not None else seed_noise(grid, cells.variables, obj)
    if not (noise.known and noise.cv > 0) or (cells.table["n_seeds"] < 2).all():
        return cells
    values = _cell_runs(grid, cells.variables)
    table = cells.table.copy()
    table["value"] = [_robust_cell(v, noise.cv) for v in values]
    return Cells(table, cells.variables, cells.metric, cells.units)


def _cell_runs(grid: Grid, keys: Sequence[str]) -> list[np.ndarray]:
    """Each cell's runs, in the order of :meth:`Grid.cells` (sorted by ``keys``)."""
    groups = grid.runs.groupby(list(keys), sort=True)[grid.metric]
    return list(groups.apply(lambda s: s.to_numpy(float)).to_numpy())


def _robust_cell(runs: np.ndarray, cv: float) -> float | np.ndarray:
    """Biweight location of one cell's runs (or of each row of resampled runs)."""
    if runs.shape[-1] < 3:  # one or two runs: nothing to outvote; the mean
        return runs.mean(axis=-1)
    scale = cv * np.abs(np.median(runs, axis=-1))
    return biweight_location(runs, scale) if np.all(scale > 0) else runs.mean(axis=-1)


# ------------------------------------------------------------------ the grid's seed offset
SEED_OFFSET_METHOD = (
    "two-way ANOVA of the runs relative to their cell's value, cells fixed x seed ids random "
    "(the seed mean square over its effective count, an unbiased and never negative estimate "
    "of one seed's shared variance plus a little run noise, chi-square with the seed degrees "
    "of freedom); carried through the fit by its linear response to each seed's effect"
)


CLIP_SDS = 4.0  # runs further than this many seed-noise sds from their cell are clipped


@dataclass(frozen=True)
class SeedOffset:
    """The part of a grid's cell means that its seed ids share, which a fit absorbs.

    Runs that share a seed id share an effect across cells, so the grid's cell means carry
    the average effect of its seed ids (one offset common to every cell when every cell has
    the same ids). A fit's level constants absorb it, held-out cells share it, and no
    leave-one-cell-out residual or residual bootstrap can see it: an interval for the
    configuration's mean over new seeds must add it, one for the mean at the grid's seed ids
    must not. Estimated from the cells x seeds decomposition (:func:`seed_offset`).

    Attributes
    ----------
    var : variance of one seed id's shared effect, relative to the cell's value (absolute
        under ``abs_ls``): the seed mean square over its effective count ``q``, whose
        expectation is the shared variance plus the run variance over ``q``.
    df : its degrees of freedom (seed ids less one in a complete design).
    var_run : the per-run variance beyond the seed effect (same scale).
    shared_var : the unbiased estimate of one seed's shared variance (never below 0), for
        what the cells' own noise does not share.
    shares : (cells, seeds) the share of each cell's runs at each seed id.
    seeds : the seed ids, as text.
    relative : variances relative to the cell's value.
    """

    var: float
    df: int
    var_run: float
    shares: np.ndarray
    seeds: tuple[str, ...]
    relative: bool = True
    shared_var: float = 0.0
    method: str = SEED_OFFSET_METHOD

    def quantile(self, level: float) -> float:
        from scipy import stats

        return float(stats.t.ppf(0.5 + level / 2, max(self.df, 1)))

    def to_dict(self) -> dict:
        return {
            "shared_sd": math.sqrt(self.shared_var),
            "shared_sd_bound": math.sqrt(self.var),
            "run_sd": math.sqrt(self.var_run),
            "df": self.df,
            "seed_ids": len(self.seeds),
            "relative": self.relative,
            "method": self.method,
        }


def seed_offset(
    grid: Grid, cells: Cells, objective: Objective | None = None, noise: SeedNoise | None = None
) -> SeedOffset | None:
    """The variance of the seed effect the grid's seed ids share across ``cells``.

    Each run's deviation from its cell's value is clipped at 4 robust seed-noise sds
    (``noise``) first, so that a corrupted run (loss x 1.3) does not pass for a seed effect;
    Gaussian runs are almost never clipped.

    Parameters
    ----------
    grid : the runs (with a seed column).
    cells : the cells a fit reads (their order is kept in ``shares``).
    objective : ``abs_ls`` makes the variances absolute; otherwise relative.
    noise : the robust seed noise of one run (default: :func:`seed_noise` of the cells).

    Returns
    -------
    SeedOffset or None
        None when the grid has no seed column, or no seed id appears in two cells (fresh
        ids per cell: the runs of different cells are then independent, and nothing is
        shared to add).

    Examples
    --------
    >>> off = seed_offset(grid, grid.cells(("H", "omega")))  # doctest: +SKIP
    >>> round(100 * math.sqrt(off.var), 3)  # one seed's shared effect, % of the value
    ... # doctest: +SKIP
    """
    from fitrules.engine.stats import _crossed_anova

    if grid.seed is None or grid.seed not in grid.runs.columns:
        return None
    keys = list(cells.variables)
    index = cells.table[keys].reset_index(drop=True).assign(_cell=np.arange(len(cells)))
    index = index.assign(_value=cells.y)
    runs = grid.runs[[*keys, grid.seed, grid.metric]].dropna(subset=[grid.metric])
    runs = runs.merge(index, on=keys, how="inner")
    if len(runs) < 4:
        return None
    relative = (objective or Objective()).kind != "abs_ls"
    noise = noise if noise is not None else seed_noise(grid, keys, objective)
    value = runs["_value"].to_numpy(float)
    with np.errstate(all="ignore"):
        y = runs[grid.metric].to_numpy(float) - value
        y = y / np.abs(value) if relative else y
    if not np.isfinite(y).all():
        return None
    if noise.known and noise.cv > 0:  # a corrupted run is not a seed effect
        limit = CLIP_SDS * noise.cv * (1.0 if relative else np.abs(value))
        y = np.clip(y, -limit, limit)
    cell = runs["_cell"].to_numpy()
    seed = runs[grid.seed].astype(str).to_numpy()
    a = _crossed_anova(cell, seed, y)
    if a is None or not (a["ms_e"] >= 0 and a["q"] > 0):
        return None
    # shares over the fit's cells (a cell without runs here keeps a row of zeros)
    counts = np.zeros((len(cells), len(a["seeds"])))
    si = np.searchsorted(a["seeds"], seed)
    np.add.at(counts, (cell, si), 1.0)
    tot = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, tot, out=np.zeros_like(counts), where=tot > 0)
    return SeedOffset(
        float(a["ms_seed"] / a["q"]), int(a["df_seed"]), float(a["ms_e"]), shares,
        tuple(str(s) for s in a["seeds"]), relative,
        max(float((a["ms_seed"] - a["ms_e"]) / a["q"]), 0.0),
    )  # fmt: skip


NO_SHARED_IDS = "no seed id is shared across cells"


def no_offset_reason(grid: Grid, cells: Cells) -> str:
    """Why :func:`seed_offset` found no effect shared across ``cells``, in words: no seed
    column, one seed id in every cell (its effect is then the intercept's, and no interval
    allows for it), or no id in two cells (fresh ids per cell: nothing is shared)."""
    if grid.seed is None or grid.seed not in grid.runs.columns:
        return (
            "the table names no seed column, so runs that share a seed id cannot be told "
            "apart (name it with --seed-col COL, seed_col= in Python, if there is one)"
        )
    keys = list(cells.variables)
    runs = grid.runs[[*keys, grid.seed, grid.metric]].dropna(subset=[grid.metric])
    runs = runs.merge(cells.table[keys], on=keys, how="inner")
    ids = runs[grid.seed].astype(str).unique()
    if len(ids) == 1 and len(cells) > 1:
        return (f"every run has seed id {ids[0]}: one id in every cell, so its shared effect "
                "cannot be told from the intercept and no interval here allows for it; runs "
                "at other seed ids would measure it")  # fmt: skip
    cells_per_id = runs.drop_duplicates([*keys, grid.seed]).groupby(grid.seed).size()
    if len(cells_per_id) and int(cells_per_id.max()) < 2:
        return NO_SHARED_IDS
    return "the seed ids' shared effect could not be estimated from these runs"


def offset_response(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    constants: dict[str, float],
    objective: Objective,
    shares: np.ndarray,
    relative: bool = True,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """(p, seeds) change of each constant per unit effect of each seed id, to first order.

    A seed effect ``u_s`` moves cell c by ``shares[c, s] * u_s`` (times the cell's value when
    ``relative``); the fit at its optimum moves by the Gauss-Newton response
    ``-pinv(J) dr/dy dy``, J the Jacobian of the (weighted) residuals. NaN where the
    Jacobian is not finite.
    """
    cf = CompiledForm(form)
    theta = np.array([constants[c] for c in form.constants], float)
    with np.errstate(all="ignore"):
        pred = cf.predict(X, theta[None, :])[0]
        J = cf.jacobian(X, theta[None, :])[0] * objective.dres_dpred(pred, y)[:, None]
        h = 1e-6
        dr = objective.residuals(pred, y * (1 + h)) - objective.residuals(pred, y * (1 - h))
        dr_dy = dr / (2 * h * y)
    dy = shares * (y[:, None] if relative else 1.0)
    rhs = dr_dy[:, None] * dy
    if weights is not None:
        root = np.sqrt(np.asarray(weights, float))
        J, rhs = J * root[:, None], rhs * root[:, None]
    if not (np.isfinite(J).all() and np.isfinite(rhs).all()):
        return np.full((len(theta), shares.shape[1]), np.nan)
    return -np.linalg.lstsq(J, rhs, rcond=None)[0]


def offset_var_at(
    form: Form,
    X: dict[str, np.ndarray],
    constants: dict[str, float],
    response: np.ndarray,
    offset: SeedOffset,
) -> np.ndarray:
    """Variance the grid's seed offset adds to the prediction at each point (relative to
    the prediction when ``offset.relative``)."""
    cf = CompiledForm(form)
    theta = np.array([constants[c] for c in form.constants], float)
    with np.errstate(all="ignore"):
        pred = cf.predict(X, theta[None, :])[0]
        moved = cf.jacobian(X, theta[None, :])[0] @ response  # (n, seeds)
        if offset.relative:
            moved = moved / np.abs(pred)[:, None]
    return offset.var * (moved**2).sum(axis=1)


# ------------------------------------------------------------------ prediction intervals
PREDICTION_KIND = "held-out misfit"
PREDICTION_METHOD = (
    "the form's misfit where it is measured: its full fit's residuals at the cells about "
    "the point, weighted by a Gaussian of 0.75 design steps, give the misfit's local lean "
    "(the interval is centred on the prediction plus that lean and stretched to contain the"
    " prediction; beyond the cells the lean spans the edge cells' value and their local "
    "linear trend continued to the point); the local misfit the lean leaves unexplained, "
    "from leave-one-cell-out predictions of each cell's residual by its neighbours less the"
    " cells' own seed noise; the lean's own seed noise; the part of the leave-one-cell-out "
    "refits' spread at the point that their values at the neighbouring cells do not carry, "
    "or the growth of that spread beyond the cells, whichever is larger (the constants' "
    "uncertainty there); plus the seed noise of k new runs for their mean; a t quantile "
    "with n - p degrees of freedom; for a mean over new seed ids, plus the grid's seed "
    "offset (the effect its seed ids share, which the fit absorbed and no held-out cell "
    "shows) with a t quantile on the seed degrees of freedom, the two half-widths added in "
    "quadrature"
)
LOCAL_BANDWIDTH = 0.75  # design steps: nearest cells of a point between levels weigh most;
# in exploratory runs before the benchmark (30 grids each, seed 1, the design and truths of
# bench_intervals.py's seeds section) 0.5 covered 0.93 at interior points under iid noise and
# the wrong form, and 1.0 smoothed the lean away (3.4x the rms error)
# which mean each interval covers, as outputs name it
COVERS_NEW_SEEDS = "the configuration's mean over new seed ids"
COVERS_GRID_SEEDS = "the configuration's mean at the grid's seed ids"
ONE_ID = "every run has seed id"  # how no_offset_reason's one-id sentence begins
NOT_COVERED_ONE_ID = (
    "not covered: one seed id in every cell, so how far a new seed id moves every cell "
    "cannot be measured from this grid (runs at a second seed id would measure it); the "
    "interval at the grid's seed id is given"
)


def _half(parts: list[tuple[float, float]], level: float) -> float:
    """Half-width for a sum of independent (variance, degrees of freedom) parts: each
    part's t half-width, added in quadrature. Conservative where Satterthwaite's pooled
    degrees of freedom are not: with the seed offset's 2 degrees of freedom (3 seed ids) the
    pooled t covered the configuration's mean 0.89 of the time at interior points (30 grids),
    the quadrature 0.99."""
    from scipy import stats

    total = 0.0
    for v, df in parts:
        if v > 0:
            total += float(stats.t.ppf(0.5 + level / 2, max(df, 1))) ** 2 * v
        elif not v == 0:
            return math.nan
    return math.sqrt(total)


def _leaning(value, low, high, half, scale):
    """The interval about ``value`` plus its misfit's lean (from ``low`` to ``high``; one
    value inside the cells), ``half`` wide each side, stretched to contain ``value`` itself
    (the form's own prediction is never excluded); leans and ``half`` on the residuals'
    scale, ``scale`` to the value's."""
    lo = value + np.minimum(0.0, low - half) * scale
    hi = value + np.maximum(0.0, high + half) * scale
    if np.ndim(lo) == 0:
        return [float(lo), float(hi)]
    return lo, hi


FEW_IDS = 4  # below this many seed ids the seed offset's t quantile (4.3 on 2 degrees of
# freedom, 12.7 on 1) can be most of an interval: the text says so
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


@dataclass
class HeldOut:
    """Leave-one-cell-out refits of a form: its misfit as held-out cells see it.

    The unit is the cell, never the run: every refit leaves one whole cell out, fits the
    rest, and predicts it. The held-out residual at cell i is
    ``e_i = (y_i - f_-i(x_i)) / f_-i(x_i)`` (relative; absolute for ``abs_ls``), so its mean
    square carries the form's lack of fit, the uncertainty of refitted constants and the
    seed noise of the cell's mean.

    Attributes
    ----------
    form : the bound form; constants : the fit on every cell.
    X, y, n_runs : the cells (variables, means, runs per cell).
    draws : (n, p) constants of each leave-one-out refit (a failed one is a row of NaN).
    residuals : (n,) held-out residuals (NaN for a failed refit).
    noise : the seed noise of one run (see :func:`seed_noise`).
    relative : residuals relative to the prediction (else absolute).
    level : level of the intervals.
    robust : take the held-out residuals' spread as a MAD (for ``log_huber``, whose fit
        shrugs off a corrupted cell that a mean square would not).
    offset : the grid's seed offset (see :class:`SeedOffset`), or None when no seed id is
        shared across cells; response : (p, seeds) the fit's response to each seed's effect
        (:func:`offset_response`).
    """

    form: Form
    constants: dict[str, float]
    X: dict[str, np.ndarray]
    y: np.ndarray
    n_runs: np.ndarray
    draws: np.ndarray
    residuals: np.ndarray
    noise: SeedNoise
    relative: bool = True
    level: float = LEVEL
    robust: bool = False
    offset: SeedOffset | None = None
    response: np.ndarray | None = None
    # why there is no offset (no_offset_reason), when there is none
    offset_note: str = NO_SHARED_IDS
    # per variable, the held-out residuals of its edge cells when the form is fitted
    # without them: {variable: (low edge's, high edge's)} (see :meth:`edge_var`)
    edges: dict = field(default_factory=dict)

    @property
    def ok(self) -> np.ndarray:
        return np.isfinite(self.residuals)

    @property
    def dof(self) -> int:
        return int(self.ok.sum()) - len(self.form.constants)

    def _scale(self, pred: np.ndarray) -> np.ndarray:
        return np.abs(pred) if self.relative else np.ones_like(pred)

    def _noise_sd(self, value: np.ndarray) -> np.ndarray:
        """Seed sd of one run on the residuals' scale at cells of this ``value``: from the
        repeats, or, where no cell has two runs, from the residuals' local roughness
        (:attr:`roughness_var`)."""
        if not self.noise.known:  # on the residuals' scale already, relative or absolute
            rv = self.roughness_var
            return np.full_like(value, math.sqrt(rv) if math.isfinite(rv) else 0.0)
        return self.noise.cv * (np.ones_like(value) if self.relative else np.abs(value))

    @cached_property
    def roughness_var(self) -> float:
        """One run's noise variance read from the full fit's residuals where no cell has two
        runs (NaN where one has: the repeats say it): each residual's miss from its
        neighbours' weighted mean (the cell itself left out), squared and divided by its
        expectation under pure noise, ``1 + sum w**2 / (sum w)**2``, averaged (the
        fitted curve barely lowers it: the neighbour difference is nearly orthogonal to it,
        so no ``n / (n - p)`` factor, which overcorrected by 9% to 58% on 60 to 5 cells).
        A misfit that varies smoothly between neighbours cancels in the difference; one
        that changes from cell to cell is read as noise, which is the assumption the text
        states. Issue 42: without it, 60 runs at distinct N and D read their 0.5% noise as
        misfit, and the interval for a configuration's mean was 20 times its rms error."""
        if self.noise.known:
            return math.nan
        r = self._fit_residuals
        W = self._weights(self._cells_X, loo=True)
        w = W.sum(axis=1)
        with np.errstate(all="ignore"):
            d2 = (r - W @ r / w) ** 2 / (1 + (W**2).sum(axis=1) / w**2)
        d2 = d2[np.isfinite(d2)]
        return float(np.mean(d2)) if len(d2) else math.nan

    def _run_var(self, value: np.ndarray) -> np.ndarray:
        """Variance of one run beyond the seed effect its id shares (residuals' scale)."""
        total = self._noise_sd(value) ** 2
        if self.offset is None:
            return total
        shared = self.offset.shared_var * (1.0 if self.relative else value**2)
        return np.maximum(total - shared, 0.0)

    def _own_var(self) -> np.ndarray:
        """Per cell, the seed noise of its mean that held-out residuals see: its runs' own
        noise, plus the part of its seed ids' effects that other cells do not share (none
        when every cell has the same ids)."""
        own = self._run_var(self.y) / self.n_runs
        if self.offset is not None:
            D = self.offset.shares
            apart = ((D - D.mean(axis=0)) ** 2).sum(axis=1)
            own = own + self.offset.shared_var * apart * (1.0 if self.relative else self.y**2)
        return own

    @cached_property
    def _axes(self) -> list[tuple]:
        """Per variable, how a value becomes a position in design steps (see
        :meth:`_design_position`): ``(shift, levels, step)`` with positions read on
        ``log(x + shift)`` (``shift`` None: on ``x`` itself), ``levels`` the fitted cells'
        distinct values on that scale and ``step`` None for a factorial variable (positions
        count levels) or the width of one step for a scattered one (see :func:`_axis`)."""
        ok = self.ok
        n = int(ok.sum())
        cols = {v: np.asarray(self.X[v], float)[ok] for v in self.form.bound_variables}
        d = max(sum(len(np.unique(x)) > 1 for x in cols.values()), 1)
        return [_axis(x, n, d) for x in cols.values()]

    def _design_position(self, X: dict[str, np.ndarray]) -> np.ndarray:
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
        over the levels a factorial design of as many cells would have per variable."""
        cols = []
        for v, (shift, levels, step) in zip(self.form.bound_variables, self._axes, strict=True):
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

    # what depends on the cells alone is computed once, whatever the points asked about
    @cached_property
    def _cells_X(self) -> dict[str, np.ndarray]:
        return {k: v[self.ok] for k, v in self.X.items()}

    @cached_property
    def _cell_positions(self) -> np.ndarray:
        return self._design_position(self._cells_X)

    def _weights(self, X: dict[str, np.ndarray], loo: bool = False) -> np.ndarray:
        """(m, n) Gaussian weights of the fitted cells about each point, in design steps
        (``loo``: the points are the cells, each given no weight of its own). Each row is
        shifted by its nearest cell's distance, so that a point far beyond still has
        weights; normalised, the shift cancels."""
        d2 = ((self._design_position(X)[:, None, :] - self._cell_positions[None]) ** 2).sum(axis=-1)
        if loo:
            np.fill_diagonal(d2, np.inf)
        d2 = d2 - d2.min(axis=1, keepdims=True)
        return np.exp(-0.5 * d2 / LOCAL_BANDWIDTH**2)

    @cached_property
    def _fit_residuals(self) -> np.ndarray:
        """The full fit's residuals at the fitted cells, on the residuals' scale."""
        f = predict(self.form, self._cells_X, self.constants)
        with np.errstate(all="ignore"):
            return (self.y[self.ok] - f) / self._scale(f)

    def lean(self, X: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The misfit's local lean at each point: (low, high, seed-noise variance).

        The lean is the weighted mean of the full fit's residuals about the point: where
        the form runs below the cells it is positive. Residuals, not held-out ones, because
        the prediction is the full fit's; the constants' own error is orthogonal to them
        and enters separately (:meth:`fit_var`). Inside the cells' range low = high. Beyond
        it nothing says whether the misfit holds at its edge value or keeps its trend, so
        the lean spans both: the edge cells' mean and their local linear trend continued to
        the point (the larger noise of the two)."""
        W = self._weights(X)
        w = W.sum(axis=1)
        own = self._own_var()[self.ok]
        r = self._fit_residuals
        held, var = W @ r / w, (W**2 @ own) / w**2
        trend, trend_var = self._trend(X, r, own)
        return np.fmin(held, trend), np.fmax(held, trend), np.fmax(var, trend_var)

    def _trend(self, X: dict[str, np.ndarray], r: np.ndarray, own: np.ndarray):
        """The residuals' local linear trend about the nearest edge of the cells, continued
        to each point beyond them, and its noise variance (NaN inside the cells' range).
        Twice the lean's bandwidth, since a slope needs cells on more than one level."""
        pos = self._design_position(X)
        cells = self._cell_positions
        lo, hi = cells.min(axis=0), cells.max(axis=0)
        out, var = np.full(len(pos), np.nan), np.full(len(pos), np.nan)
        for j in np.flatnonzero(((pos < lo) | (pos > hi)).any(axis=1)):
            edge = np.clip(pos[j], lo, hi)
            d2 = ((cells - edge) ** 2).sum(axis=1)
            w = np.exp(-0.5 * (d2 - d2.min()) / (2 * LOCAL_BANDWIDTH) ** 2)
            A = np.column_stack([np.ones(len(cells)), cells - edge])
            ell = np.concatenate([[1.0], pos[j] - edge]) @ np.linalg.pinv(A.T @ (A * w[:, None]))
            ell = (A * w[:, None]) @ ell
            out[j], var[j] = ell @ r, ell**2 @ own
        return out, var

    @cached_property
    def _edge_step_var(self) -> dict:
        """Per variable and edge, the misfit variance one step of extrapolation adds: the
        mean square of the edge cells' residuals when the form is fitted without them, less
        their own seed noise and the seed-noise share of the refit's own prediction variance
        there (never below 0). A wrong form shows here how fast its misfit grows past the
        cells it was fitted on, which the residuals at the cells cannot."""
        out = {}
        own = self._own_var()
        for v, (low, high) in self.edges.items():
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

    def edge_terms(self, X: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Variance added at each point beyond the fitted cells, and its degrees of freedom.

        For each variable, the steps beyond its edge (:meth:`_design_position`) squared times
        that edge's one-step extrapolation variance (:attr:`_edge_step_var`), summed over
        the variables (issue 42: one level beyond in keep under a wrong form, the intervals
        at the grid's seed ids covered 0.58 to 0.72 of the time without it). The degrees of
        freedom are the fewest cells of an edge the point lies beyond, less one (at least 1;
        0 where it lies beyond none): the variance is read from those few cells, not from
        all n - p residuals."""
        pos = self._design_position(X)
        cells = self._cell_positions
        lo, hi = cells.min(axis=0), cells.max(axis=0)
        total, df = np.zeros(len(pos)), np.full(len(pos), np.inf)
        for j, v in enumerate(self.form.bound_variables):
            if v not in self._edge_step_var:
                continue
            steps = (np.maximum(lo[j] - pos[:, j], 0), np.maximum(pos[:, j] - hi[j], 0))
            for side, (d, var) in enumerate(zip(steps, self._edge_step_var[v], strict=True)):
                hit = d > 0
                total[hit] += d[hit] ** 2 * var
                df[hit] = np.minimum(df[hit], max(len(self.edges[v][side][0]) - 1, 1))
        return total, np.where(np.isfinite(df), df, 0.0)

    def edge_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """The variance part of :meth:`edge_terms`."""
        return self.edge_terms(X)[0]

    def misfit_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """The local misfit the lean leaves unexplained, at each point: each cell's residual
        predicted by its neighbours' lean (the cell left out), the squared miss less the
        seed noise both carry, averaged with the same weights about the point. Conservative
        between levels, where a point's nearest cells are closer than a cell's."""
        W = self._weights(X)
        return np.maximum(W @ self._neighbour_excess / W.sum(axis=1), 0.0)

    @cached_property
    def _neighbour_excess(self) -> np.ndarray:
        """Per cell, the squared miss of its residual predicted by its neighbours' lean,
        less the seed noise both carry (see :meth:`misfit_var`)."""
        r = self._fit_residuals
        own = self._own_var()[self.ok]
        Wc = self._weights(self._cells_X, loo=True)
        wc = Wc.sum(axis=1)
        return (r - Wc @ r / wc) ** 2 - own - (Wc**2 @ own) / wc**2

    def fit_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """The constants' uncertainty at each point that the lean does not carry: the
        jackknife variance of the refits' predictions less their lean over the neighbouring
        cells (a refit that moves smoothly is already in the residuals about the point),
        or, where larger, the growth of the refits' spread beyond its mean at the cells."""
        ok = self.ok
        cf = CompiledForm(self.form)
        P = cf.predict(X, self.draws[ok])  # (k, m)
        Pc = cf.predict(self._cells_X, self.draws[ok])  # (k, n)
        W = self._weights(X)
        full = predict(self.form, X, self.constants)
        m = int(ok.sum())
        with np.errstate(all="ignore"):
            U = (P - Pc @ W.T / W.sum(axis=1)[None, :]) / self._scale(full)[None, :]
            unsmoothed = (m - 1) / m * np.sum((U - U.mean(axis=0)) ** 2, axis=0)
        growth = np.maximum(self._jackknife_var(X) - self.components["jackknife_var_at_cells"], 0.0)
        return np.maximum(unsmoothed, growth)

    def offset_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """Variance the grid's seed offset adds at each point (0 without shared seed ids)."""
        n = len(next(iter(X.values())))
        if self.offset is None or self.response is None:
            return np.zeros(n)
        return offset_var_at(self.form, X, self.constants, self.response, self.offset)

    def _jackknife_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """Jackknife variance of the prediction at each point, on the residuals' scale."""
        ok = self.ok
        P = CompiledForm(self.form).predict(X, self.draws[ok])  # (m, k)
        m = int(ok.sum())
        full = predict(self.form, X, self.constants)
        with np.errstate(all="ignore"):
            P = P / self._scale(full)[None, :]
            return (m - 1) / m * np.sum((P - P.mean(axis=0)) ** 2, axis=0)

    @cached_property
    def components(self) -> dict[str, float]:
        """The parts of the variance shared by every point (on the residuals' scale)."""
        ok = self.ok
        e = self.residuals[ok]
        mse = float((1.4826 * np.median(np.abs(e))) ** 2 if self.robust else np.mean(e**2))
        own = float(np.mean(self._own_var()[ok]))
        grid_jack = float(np.mean(self._jackknife_var({k: v[ok] for k, v in self.X.items()})))
        # e_i = misfit + seed noise of the cell's mean + error of the refitted constants
        # there: the misfit is what is left after the other two
        return {
            "heldout_mse": mse,
            "cells_seed_var": own,
            "jackknife_var_at_cells": grid_jack,
            "misfit_var": max(mse - own - grid_jack, 0.0),
        }

    def check(self) -> None:
        """Refuse to give an interval from too few held-out cells.

        Raises
        ------
        FitrulesError
            When fewer than p + 2 leave-one-out refits succeeded.
        """
        p = len(self.form.constants)
        if int(self.ok.sum()) < p + 2:
            raise FitrulesError(
                f"form {self.form.name!r}: {int(self.ok.sum())} of {len(self.y)} "
                f"leave-one-cell-out refits succeeded; an interval with the form's misfit "
                f"needs at least {p + 2} (its {p} constants plus 2)"
            )

    def predict_at(self, point: dict[str, float], runs: int | None = None) -> dict:
        """Prediction intervals at ``point`` for each target.

        Parameters
        ----------
        point : the form's variables there.
        runs : k, the number of new runs whose mean is a target (None: only the
            configuration's mean).

        Returns
        -------
        dict
            ``prediction``; ``interval``: the configuration's mean over new seed ids (what a
            user means: misfit, the constants' uncertainty there and the grid's seed offset);
            ``interval_grid_seeds``: its mean at the grid's seed ids (no seed offset; the
            same interval when no seed id is shared across cells); with ``runs``,
            ``interval_runs`` (the mean of ``runs`` new runs at fresh seed ids) and
            ``interval_runs_grid_seeds`` (new runs at the grid's seed ids, one run an id:
            their per-run noise only); ``covers`` names each; ``misfit_lean``: how far the
            full fit's residuals about the point lean (positive: the form runs below the
            cells there), which every interval follows while still containing the
            prediction; ``misfit_sd``: the local misfit the lean leaves unexplained;
            ``sd`` of each target on the residuals' scale and its parts; ``extrapolation``
            (how far the point lies from the fitted cells).
        """
        from scipy import stats

        self.check()
        X = {v: np.array([float(point[v])]) for v in self.form.bound_variables}
        value = float(predict(self.form, X, self.constants)[0])
        comp = self.components
        jack = float(self._jackknife_var(X)[0])
        if not math.isfinite(jack):
            # e.g. a*omega**c at omega=0 with a refit's c < 0: nothing bounds the prediction
            ok = self.ok
            with np.errstate(all="ignore"):
                P = CompiledForm(self.form).predict(X, self.draws[ok])[:, 0]
            where = ", ".join(f"{k}={v:g}" for k, v in point.items())
            raise FitrulesError(
                f"form {self.form.name!r}: {int((~np.isfinite(P)).sum())} of {int(ok.sum())} "
                f"leave-one-cell-out refits predict no finite value at {where}: the "
                "constants' uncertainty there is unbounded, so there is no interval"
            )
        extra = max(jack - comp["jackknife_var_at_cells"], 0.0)
        low, high, lean_var = (float(a[0]) for a in self.lean(X))
        lean = low if abs(low) > abs(high) else high
        misfit = float(self.misfit_var(X)[0])
        # the unexplained misfit, the lean's own noise and the constants' uncertainty there
        edge, df_edge = (float(t[0]) for t in self.edge_terms(X))
        df_edge = int(df_edge)
        base = misfit + lean_var + float(self.fit_var(X)[0])
        var_mean = base + edge
        q = float(stats.t.ppf(0.5 + self.level / 2, max(self.dof, 1)))
        off = float(self.offset_var(X)[0])
        if not math.isfinite(off):
            off = 0.0 if self.offset is None else math.inf
        q_off = self.offset.quantile(self.level) if self.offset is not None else 0.0
        df, df_off = max(self.dof, 1), self.offset.df if self.offset is not None else 1
        scale = abs(value) if self.relative else 1.0

        def interval(parts: list[tuple[float, float]]) -> list[float]:
            return _leaning(value, low, high, _half(parts, self.level), scale)

        one_id = self.one_id
        out: dict = {
            "prediction": value,
            # issue 42: with one seed id in every cell the interval over new ids covered a
            # configuration's mean 0.55 of the time (8 H x 3 keep, 100 grids): no number
            "interval": None if one_id else interval([(base, df), (edge, df_edge), (off, df_off)]),
            "covers": NOT_COVERED_ONE_ID if one_id else COVERS_NEW_SEEDS,
            "interval_grid_seeds": interval([(base, df), (edge, df_edge)]),
            "covers_grid_seeds": COVERS_GRID_SEEDS,
            "sd_mean": math.sqrt(var_mean + off) * scale,
            "quantile": q,
            "misfit_lean": lean * scale,
            "misfit_sd": math.sqrt(misfit) * scale,
            "misfit_sd_pooled": math.sqrt(comp["misfit_var"]) * scale,
            "extrapolation_sd": math.sqrt(extra) * scale,
            "edge_sd": math.sqrt(edge) * scale,
            "seed_offset_sd": math.sqrt(off) * scale,
            "seed_offset_quantile": q_off,
            "few_seed_ids": self._few_ids(var_mean, df, off),
            "jackknife_ratio": math.sqrt(jack / comp["jackknife_var_at_cells"])
            if comp["jackknife_var_at_cells"] > 0
            else math.nan,
            "extrapolation": self.extrapolation(point),
        }
        if runs is not None:
            v = np.array([value])
            seed_var = float(self._noise_sd(v)[0] ** 2) / runs
            run_var = float(self._run_var(v)[0]) / runs
            out["runs"] = int(runs)
            out["interval_runs"] = (
                None
                if one_id
                else interval([(base + seed_var, df), (edge, df_edge), (off, df_off)])
            )
            out["covers_runs"] = (
                NOT_COVERED_ONE_ID
                if one_id
                else f"the mean of {int(runs)} new runs at fresh seed ids"
            )
            out["interval_runs_grid_seeds"] = interval([(base + run_var, df), (edge, df_edge)])
            out["covers_runs_grid_seeds"] = (
                f"the mean of {int(runs)} new runs at the grid's seed ids (one run an id)"
            )
            out["sd_runs"] = math.sqrt(var_mean + seed_var + off) * scale
            out["seed_sd_runs"] = math.sqrt(seed_var) * scale
        return out

    @property
    def one_id(self) -> bool:
        """One seed id in every cell: no interval covers new seed ids (see predict_at)."""
        return self.offset is None and self.offset_note.startswith(ONE_ID)

    def _few_ids(self, var_mean: float, df: int, off: float) -> dict | None:
        """With fewer than ``FEW_IDS`` seed ids, whether the seed offset's term is most of the
        interval's width, and what one more id would do to it (issue 42: with 2 ids that term
        is a t interval on 1 degree of freedom, quantile 12.7, 18 times the rms error, and
        nothing said so): the same estimated seed sd on one more degree of freedom. None
        with enough ids or no offset."""
        from scipy import stats

        if self.offset is None or not math.isfinite(off) or off <= 0:
            return None
        k = len(self.offset.seeds)
        if k >= FEW_IDS:
            return None
        half = _half([(var_mean, df), (off, self.offset.df)], self.level)
        q = float(stats.t.ppf(0.5 + self.level / 2, self.offset.df))
        q_more = float(stats.t.ppf(0.5 + self.level / 2, self.offset.df + 1))
        rest = _half([(var_mean, df)], self.level)
        more = math.sqrt(rest**2 + (q_more**2) * off)
        return {
            "seed_ids": k,
            "quantile": q,
            "share_of_width": float(q**2 * off / half**2) if half > 0 else math.nan,
            "term_narrower": q / q_more,
            "interval_narrower": half / more if more > 0 else math.nan,
        }

    def band(
        self, X: dict[str, np.ndarray], grid_seeds: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """The interval for the configuration's mean over new seed ids (``grid_seeds``: at
        the grid's seed ids) at many points at once (for figures). With one seed id in
        every cell the two are the same (:attr:`one_id`: none covers new ids), which a
        figure's caption says."""

        self.check()
        value = predict(self.form, X, self.constants)
        low, high, lean_var = self.lean(X)
        var = self.misfit_var(X) + lean_var + self.fit_var(X)
        edge, df_edge = self.edge_terms(X)
        off = self.offset_var(X) if not grid_seeds and self.offset is not None else 0 * var
        df_off = self.offset.df if self.offset is not None else 1
        half = np.array(
            [
                _half([(a, max(self.dof, 1)), (e, max(int(k), 1)), (b, df_off)], self.level)
                for a, e, k, b in zip(var, edge, df_edge, off, strict=True)
            ]
        )
        return _leaning(value, low, high, half, self._scale(value))

    def extrapolation(self, point: dict[str, float]) -> dict[str, float]:
        """For each variable outside the fitted cells' range: how far, as a ratio.

        ``{"H": 2.0}`` means H lies at twice the largest H fitted (or half the smallest:
        the ratio is always >= 1); for a variable whose values are not all positive, the
        distance beyond the range in units of the range. An empty dict: inside the range
        of every variable (which is not the same as near a fitted cell).
        """
        out = {}
        for v in self.form.bound_variables:
            x, cells = float(point[v]), self.X[v]
            lo, hi = float(np.min(cells)), float(np.max(cells))
            if lo <= x <= hi:
                continue
            if lo > 0 and x > 0:
                out[v] = x / hi if x > hi else lo / x
            else:
                out[v] = 1 + (x - hi if x > hi else lo - x) / max(hi - lo, 1e-300)
        return out

    def describe(self) -> str:
        comp = self.components
        unit, f = spread_unit(self.relative)
        return (
            f"{PREDICTION_KIND}: {int(self.ok.sum())} leave-one-cell-out refits; held-out "
            f"rms {f * math.sqrt(comp['heldout_mse']):.3g}{unit}, of which misfit "
            f"{f * math.sqrt(comp['misfit_var']):.3g}{unit} after the cells' own seed noise "
            "and the refitted constants' error (pooled over the grid; each interval reads the "
            "misfit about its own point and leans with it)"
            + (
                f" (one run: {100 * self.noise.cv:.3g}%)"
                if self.noise.known
                else f" (one run's noise {f * math.sqrt(self.roughness_var):.3g}{unit}: no "
                "cell has two runs, so it is read from the residuals' local roughness, which "
                "takes a misfit that changes from cell to cell for noise)"
                if math.isfinite(self.roughness_var)
                else " (unknown: no cell has two runs, so none is taken off)"
            )
            + (
                f"; intervals for a mean over new seed ids add the grid's seed offset (one "
                f"seed id's shared effect {f * math.sqrt(self.offset.shared_var):.3g}{unit}, "
                f"{len(self.offset.seeds)} ids, t quantile on {self.offset.df} degrees of "
                "freedom)"
                if self.offset is not None
                else f"; {NO_SHARED_IDS}, so the mean over new seed ids and at the grid's "
                "seed ids coincide"
                if self.offset_note == NO_SHARED_IDS
                else f"; {self.offset_note}"
            )
        )

    def to_dict(self) -> dict:
        return {
            "kind": PREDICTION_KIND,
            "method": PREDICTION_METHOD,
            "level": self.level,
            "cells": len(self.y),
            "refits": int(self.ok.sum()),
            "dof": self.dof,
            "seed_cv": self.noise.cv,
            "covers": COVERS_NEW_SEEDS,
            "seed_offset": None if self.offset is None else self.offset.to_dict(),
            **self.components,
        }


def heldout_fit(
    form: Form,
    cells: Cells,
    constants: dict[str, float],
    noise: SeedNoise,
    objective: Objective | None = None,
    level: float = LEVEL,
    options: FitOptions | None = None,
    offset: SeedOffset | None = None,
    offset_note: str = NO_SHARED_IDS,
) -> HeldOut:
    """Refit ``form`` once per cell with that cell left out, and keep the held-out residuals.

    Parameters
    ----------
    form : a bound form; cells : the cells it was fitted on; constants : that fit.
    noise : the seed noise of one run (see :func:`seed_noise`).
    objective : the training objective (``abs_ls`` makes the residuals absolute).
    level : level of the intervals.
    offset : the grid's seed offset (:func:`seed_offset`; None: no seed id shared across
        cells, and the intervals for a mean over new seed ids add nothing for it).
    offset_note : with no offset, why (:func:`no_offset_reason`), for the text.

    Returns
    -------
    HeldOut

    Examples
    --------
    >>> h = heldout_fit(form, cells, fit.constants, seed_noise(grid, form.bound_variables))
    ... # doctest: +SKIP
    >>> h.predict_at({"H": 8, "omega": 3}, runs=3)["interval_runs"]  # doctest: +SKIP
    """
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"--level {level}: must be in (0, 1), e.g. 0.95")
    obj = objective or Objective()
    n = len(cells)
    p = len(form.constants)
    if n < p + 2:
        raise FitrulesError(
            f"form {form.name!r}: {n} cells for {p} constants; an interval with the form's "
            f"misfit needs at least {p + 2} cells to leave one out"
        )
    X, y = cells.X, cells.y
    masks = ~np.eye(n, dtype=bool)
    fits = fit_splits(form, X, y, masks, obj, options)
    draws = np.full((n, p), np.nan)
    resid = np.full(n, np.nan)
    relative = obj.kind != "abs_ls"
    for i, r in enumerate(fits):
        if not np.isfinite(r.objective):
            continue
        theta = np.array([r.constants[c] for c in form.constants], float)
        Xi = {v: X[v][i : i + 1] for v in form.bound_variables}
        with np.errstate(all="ignore"):
            pi = float(CompiledForm(form).predict(Xi, theta[None, :])[0, 0])
            e = (y[i] - pi) / (abs(pi) if relative else 1.0)
        if np.isfinite(e) and np.isfinite(theta).all():
            draws[i], resid[i] = theta, e
    n_runs = cells.table["n_seeds"].to_numpy(float)
    robust = obj.kind == "log_huber"
    edges = _edge_residuals(form, X, y, obj, options, relative)
    response = None
    if offset is not None:
        response = offset_response(form, X, y, constants, obj, offset.shares, offset.relative)
    return HeldOut(
        form, dict(constants), X, y, n_runs, draws, resid, noise, relative, float(level), robust,
        offset, response, offset_note, edges,
    )  # fmt: skip


def _edge_residuals(form: Form, X, y, obj, options, relative: bool) -> dict:
    """Per variable with three or more levels, each edge's cells predicted by the form
    fitted without them: {variable: ((residuals, cell indices) at the low edge, the same at
    the high edge)}, NaN residuals where the refit failed. The edge is the extreme level
    (a factorial variable) or the as many most extreme cells as a factorial design's level
    would hold (a scattered one); an edge whose removal leaves fewer
    cells than the form's constants plus 1 is not refitted (NaN), nor is a variable that
    indexes per-level or per-group constants. Each edge also carries the refit's own
    prediction variance at its cells (delta method), which :meth:`HeldOut.fit_var`
    already counts."""
    n, p = len(y), len(form.constants)
    d = max(sum(len(np.unique(X[v])) > 1 for v in form.bound_variables), 1)
    masks, where = [], []
    # a variable indexing per-level or per-group constants has no fit without its edge level
    grouped = {*(form.levels or {}), *((form.by,) if form.by is not None else ())}
    for v in form.bound_variables:
        x = np.asarray(X[v], float)
        shift, levels, step = _axis(x, n, d)
        if len(levels) < 3 or v in grouped:
            continue
        u = x if shift is None else np.log(x + shift)
        if step is None:
            band = (u <= levels[0], u >= levels[-1])
        else:
            # as many cells as a factorial design's level holds (n over the levels per
            # variable): a band one step wide held a single run of Epoch's Chinchilla table at
            # its largest D, whose t quantile on 0 degrees of freedom made a 4x extrapolation's
            # interval -1.06 to 4.85 nats
            k = min(max(int(math.ceil(n / max(int(round(n ** (1 / d))), 2))), 2), n - p - 1)
            order = np.argsort(u, kind="stable")
            low, high = np.zeros(n, bool), np.zeros(n, bool)
            low[order[:k]], high[order[-k:]] = True, True
            band = (low, high)
        for side, held in enumerate(band):
            where.append((v, side, np.flatnonzero(held)))
            masks.append(~held)
    out: dict = {}
    if not masks:
        return out
    fits = fit_splits(form, X, y, np.array(masks), obj, options)
    cf = CompiledForm(form)
    for (v, side, idx), r, m in zip(where, fits, masks, strict=True):
        e, se2, s2 = np.full(len(idx), np.nan), np.zeros(len(idx)), math.nan
        if int(m.sum()) >= p + 1 and np.isfinite(r.objective):
            theta = np.array([r.constants[c] for c in form.constants], float)
            Xi = {k: X[k][idx] for k in form.bound_variables}
            with np.errstate(all="ignore"):
                f = cf.predict(Xi, theta[None, :])[0]
                scale = np.abs(f) if relative else 1.0
                e = (y[idx] - f) / scale
            e = np.where(np.isfinite(e), e, np.nan)
            # the refit's own error at the edge, which fit_var already carries: taken off
            u = jacobian_uncertainty(form, {k: a[m] for k, a in X.items()}, y[m], r.constants,
                                     obj)  # fmt: skip
            if u.ok:
                with np.errstate(all="ignore"):
                    se = u.prediction_se(form, Xi, r.constants) / scale
                se2 = np.where(np.isfinite(se), se**2, 0.0)
                s2 = float(u.residual_sd) ** 2
        pair = out.setdefault(v, [None, None])
        pair[side] = (e, idx, se2, s2)
    return {v: tuple(pair) for v, pair in out.items()}


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
