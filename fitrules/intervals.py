"""Uncertainty of a fit on all cells: Jacobian standard errors and bootstrap intervals.

Two answers, always labelled with how they were made:

- **Jacobian** (cheap, always given): the covariance of the constants is
  ``s^2 (J'J)^-1``, with J the Jacobian of the training residuals at the fit and ``s^2``
  the residual variance (sum of squared residuals over n - p degrees of freedom); standard
  errors and correlations follow, and the delta method gives a standard error for any
  prediction. For ``log_huber`` the log residuals are treated as least squares would treat
  them (an approximation: the Huber loss downweights large residuals). Because ``s^2`` is
  the scatter of the cells about the form, these errors carry the form's misfit as well as
  seed noise, and they exist with one run per cell.
- **Bootstrap**, percentile intervals from refits of resampled data:
  ``seeds`` draws, within every cell, as many runs as it has, with replacement (seed noise
  only; needs repeats); ``residuals`` adds to each cell's fitted value a residual drawn
  from all cells' residuals (centred, rescaled by sqrt(n / (n - p))), on the scale of the
  objective (relative, log or absolute). ``auto`` uses the residual bootstrap when any cell
  has a single run, where the seed bootstrap would leave that cell fixed and give
  intervals of zero width.

Each replicate is refitted from the full fit's constants by Levenberg-Marquardt, all
replicates at once (:func:`fitrules.fit.refit`); one that does not converge is counted as
failed and left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fitrules import expr as ex
from fitrules.errors import FitrulesError
from fitrules.fit import CompiledForm, FitOptions, FitResult, Objective, fit, predict, refit
from fitrules.forms import Form
from fitrules.grids import Grid
from fitrules.limits import MAX_ABS_VALUE, MAX_BOOTSTRAP_RESAMPLES, check_count, check_seed

BOOTSTRAP_KINDS = ("auto", "seeds", "residuals")
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
            "method": "jacobian: s^2 (J'J)^-1 at the fit, s^2 the residual variance",
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
    >>> from fitrules.forms import Form
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
    n, p = J.shape
    dof = n - p
    nan = np.full((p, p), np.nan)
    if not (np.isfinite(J).all() and np.isfinite(r).all()):
        return JacobianUncertainty(cf.s.constants, nan, np.nan, dof, 0, "prediction not finite")
    s2 = float((r**2).sum() / dof) if dof > 0 else np.nan
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


@dataclass
class BootstrapFit:
    """A full-grid fit with bootstrap intervals.

    Attributes
    ----------
    kind : ``"seeds"`` or ``"residuals"``; reason : why that kind was used.
    draws : (resamples, p) constants of each refit; a failed refit is a row of NaN.
    failed : refits that did not converge or predicted a non-finite value.
    single_run_cells : cells with one run (a seed bootstrap cannot vary them).
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
            if not ok.any():
                out[c] = (np.nan, np.nan)
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
        a = (1 - self.level) / 2
        lo, hi = np.quantile(preds, [a, 1 - a])
        return {"point": dict(point), "prediction": value, "interval": [float(lo), float(hi)]}

    def describe(self) -> str:
        """One line: what was resampled, how many refits, how many failed."""
        what = (
            "the runs within each cell (seed noise only)"
            if self.kind == "seeds"
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
        For fewer than 20 or more than :data:`~fitrules.limits.MAX_BOOTSTRAP_RESAMPLES`
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
    text_or_dict, form: Form, derive=(), option: str = "--predict"
) -> tuple[dict, dict]:
    """``"H=8,keep=0.25"`` -> (the values as given, the form's variables at that point).

    Variables the point does not name are computed from the ``--derive`` expressions, and
    ``omega`` from ``keep`` (omega = 1/keep - 1) when the grid's convention is needed. Every
    name must be a variable of the form or an input of a derivation; a variable that is both
    given and derivable must agree with its derivation; values with a known domain (H, M,
    keep, omega) must lie in it.

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
    _check_domain(values, shown, option)
    missing = [v for v in form.bound_variables if v not in values]
    if missing:
        raise FitrulesError(
            f"{option} {shown!r} does not give {', '.join(missing)}, which form {form.name!r} reads"
        )
    return given, {v: values[v] for v in form.bound_variables}


def _check_domain(values: dict[str, float], shown, option: str) -> None:
    from fitrules.grids import DOMAIN

    for name, v in values.items():
        if not math.isfinite(v) or abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(f"{option} {shown!r}: {name}={v:g} is not a finite value")
        if name in DOMAIN:
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
    resamples: int = 200,
    seed: int = 0,
    level: float = 0.95,
    options: FitOptions | None = None,
    kind: str = "auto",
    variables: Sequence[str] | None = None,
) -> BootstrapFit:
    """Fit ``form`` on all cells and refit it on ``resamples`` bootstrap replicates.

    Parameters
    ----------
    grid, form, objective : what is fitted, and how.
    resamples : number of replicates (at least 20).
    seed : seed of the resampling.
    level : level of the percentile intervals.
    kind : ``"seeds"``, ``"residuals"`` or ``"auto"`` (residuals when any cell has a
        single run; see the module docstring).
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
    form = form.bind(grid.columns)
    obj = objective or Objective()
    keys = list(dict.fromkeys([*form.bound_variables, *(variables or ())]))
    cells = grid.cells(keys, positive=obj.kind != "abs_ls")
    base = fit(form, cells.X, cells.y, obj, options)
    keys = list(cells.variables)
    groups = grid.runs.groupby(keys, sort=True)[grid.metric].apply(lambda s: s.to_numpy(float))
    values = list(groups.to_numpy())
    single = int(sum(len(v) == 1 for v in values))
    reason = ""
    if kind == "auto":
        kind = "residuals" if single else "seeds"
        reason = (
            f"chosen because {single} of {len(values)} cells have a single run"
            if single
            else "chosen because every cell has repeated runs"
        )
    rng = np.random.default_rng(seed)
    if kind == "seeds":
        Y = np.array(
            [[v[rng.integers(0, len(v), len(v))].mean() for v in values] for _ in range(resamples)]
        )
    else:
        Y = _residual_replicates(form, cells.X, cells.y, base.constants, obj, resamples, rng)
    draws, _, converged = refit(form, cells.X, Y, base.constants, obj, options)
    bad = ~converged | ~np.isfinite(draws).all(axis=1)
    draws[bad] = np.nan
    return BootstrapFit(
        form, base, level, resamples, seed, draws, int(bad.sum()), single, kind=kind, reason=reason
    )


def _residual_replicates(form, X, y, constants, objective: Objective, B: int, rng) -> np.ndarray:
    """(B, n) data sets: the fit plus residuals drawn with replacement, on the objective's
    scale (y = pred / (1 + r) for relative, pred * exp(-r) for log, pred - r for absolute)."""
    pred = predict(form, X, constants)
    r = objective.residuals(pred, y)
    n, p = len(y), len(form.constants)
    if n - p < 1:
        raise FitrulesError(
            f"form {form.name!r}: {n} cells for {p} constants leave no residual to resample"
        )
    r = (r - r.mean()) * np.sqrt(n / (n - p))
    draw = r[rng.integers(0, n, (B, n))]
    if objective.kind == "rel_ls":
        return pred / (1 + draw)
    if objective.kind == "log_huber":
        return pred * np.exp(-draw)
    return pred - draw
