"""Jacobian standard errors of a fit's constants, and the delta method for a prediction's.

The covariance of the constants is ``s^2 (J'J)^-1``, with J the Jacobian of the training
residuals at the fit and ``s^2`` the residual variance (sum of squared residuals over n - p
degrees of freedom); standard errors and correlations follow, and the delta method gives a
standard error for any prediction. For ``log_huber`` ``s^2`` is Huber's sandwich factor
instead (the clipped residuals' mean square over the share of residuals within delta,
squared), so that a few corrupted runs, which the fit shrugs off, do not multiply the errors
either. Because ``s^2`` is the scatter of the cells about the form, these errors carry the
form's misfit as well as seed noise, and they exist with one run per cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fitrules.engine.fit import WEIGHT_KEY, Objective
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form

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
