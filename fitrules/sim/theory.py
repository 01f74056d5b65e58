"""Exact stationary losses of local SGD with compressed displacements on a noisy quadratic.

The model is the harness's (:mod:`fitrules.sim.quadratic`): per eigen-mode of curvature s,
M workers start from the global point x and take H SGD steps ``x <- x - lr*(s*x + xi)``
(noise variance V per step); each displacement is compressed by unbiased rand-k (relative
variance omega = 1/keep - 1), the messages are averaged and an outer step with learning rate
eta and momentum mu (heavy ball or Nesterov) follows.

Per mode, with ``a = 1 - lr*s`` and ``r = 1 - a**H``, the averaged message is
``-r*x + n``: its noise n has conditional variance ``kappa * r**2 * x**2 + sigma2`` where
``sigma2 = (1 + omega) * q / M``, ``q = lr**2 * V * sum_{k<H} a**(2k)`` (the variance of
one worker's H noisy steps) and ``kappa = omega/M`` for independent masks (omega for one
mask shared by all workers). The outer state z = (x, momentum buffer) therefore follows
``z' = A z + b n``, linear with a state-dependent noise, and its covariance S obeys the
linear recursion ``S' = A S A^T + b b^T (kappa r**2 S_11 + sigma2)``. Its fixed point is
exact: ``S = c S0`` with S0 the solution of the discrete Lyapunov equation
``S0 = A S0 A^T + b b^T`` and ``c = sigma2 / (1 - kappa r**2 S0_11)``. The mode is
mean-square stable exactly when the second-moment map ``S -> A S A^T + kappa r**2 S_11 b b^T``
has spectral radius below 1 (equivalently ``rho(A) < 1`` and ``kappa r**2 S0_11 < 1``).

Closed forms (no momentum): the stationary variance is
``eta * sigma2 / (r * (2 - eta*r*(1 + kappa)))``; for H = 1 and eta = 1 it is the
compressed-sync result ``lr*V*(1 + omega) / (M*s*((2 - lr*s) - lr*s*omega/M))``, stable while
``lr*s*(1 + omega/M) < 2``. The excess loss of a mode is ``s/2`` times its variance.

Median and trimmed-mean aggregation, top-k and attackers are not linear: the harness runs
them, this module refuses them (:class:`~fitrules.base.errors.TheoryError`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from fitrules.base.errors import TheoryError
from fitrules.sim import quadratic

# the harness's choices (MASKS, COMPRESSORS, AGGREGATORS); the theory covers rand-k or none
# with the mean
from fitrules.sim.common import AGGREGATORS, COMPRESSORS, MASKS, compressor_omega


def curvatures(spectrum: str, dim: int, curvature: float, condition: float) -> np.ndarray:
    """The harness's Hessian eigenvalues (:func:`fitrules.sim.quadratic.curvatures`), its
    arguments checked first.

    Parameters
    ----------
    spectrum : ``"constant"``, ``"linear"`` or ``"geometric"``.
    dim : number of modes.
    curvature : the largest eigenvalue.
    condition : largest over smallest eigenvalue (1 or more).

    Returns
    -------
    numpy.ndarray of ``dim`` eigenvalues, largest first.
    """
    if spectrum not in quadratic.SPECTRA:
        raise TheoryError(f"spectrum={spectrum!r} is unknown; allowed: constant, linear, geometric")
    dim = _int(dim, "dim", 1, 10_000_000)
    _positive(curvature, "curvature")
    if not _finite(condition) or condition < 1:
        raise TheoryError(f"condition={condition!r} must be a finite number >= 1")
    return quadratic.curvatures(spectrum, dim, curvature, condition)


def _finite(v: object) -> bool:
    return (
        isinstance(v, int | float | np.integer | np.floating)
        and not isinstance(v, bool)
        and math.isfinite(float(v))
    )


def _positive(v: object, name: str) -> float:
    if not _finite(v) or float(v) <= 0:  # type: ignore[arg-type]
        raise TheoryError(f"{name}={v!r} must be a finite number > 0")
    return float(v)  # type: ignore[arg-type]


def _int(v: object, name: str, lo: int, hi: int) -> int:
    if (
        isinstance(v, bool)
        or not isinstance(v, int | np.integer | float)
        or not float(v).is_integer()
        or not lo <= v <= hi
    ):
        raise TheoryError(f"{name}={v!r} must be a whole number from {lo} to {hi:,}")
    return int(v)


def _curv(s: object) -> np.ndarray:
    try:
        raw = np.asarray(s)
    except (TypeError, ValueError):
        raw = None
    if raw is None or raw.dtype.kind not in "iuf" or raw.ndim > 1 or raw.size == 0:
        raise TheoryError(f"s={s!r}: curvatures must be finite numbers > 0 (one or a list)")
    arr = np.atleast_1d(raw.astype(float))
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        bad = arr[~(np.isfinite(arr) & (arr > 0))][0]
        raise TheoryError(f"s: curvatures must be finite numbers > 0; got {float(bad)!r}")
    return arr


def _settings(lr, noise, H, M, omega, outer_lr, outer_momentum, nesterov, masks) -> dict:
    if masks not in MASKS:
        raise TheoryError(f"masks={masks!r} is unknown; allowed: independent, shared")
    if not isinstance(nesterov, bool | np.bool_):
        raise TheoryError(f"nesterov={nesterov!r} must be True or False")
    if not _finite(noise) or noise < 0:
        raise TheoryError(f"noise={noise!r} must be a finite number >= 0")
    if not _finite(omega) or omega < 0:
        raise TheoryError(f"omega={omega!r} must be a finite number >= 0")
    if not _finite(outer_momentum) or not 0 <= outer_momentum < 1:
        raise TheoryError(f"outer_momentum={outer_momentum!r} must be in [0, 1)")
    return {
        "lr": _positive(lr, "lr"),
        "noise": float(noise),
        "H": _int(H, "H", 1, 1_000_000),
        "M": _int(M, "M", 1, 1_000_000),
        "omega": float(omega),
        "eta": _positive(outer_lr, "outer_lr"),
        "mu": float(outer_momentum),
        "nesterov": bool(nesterov),
        "masks": masks,
    }


UNRESOLVED_STEP = 1e-12
"""A mode whose step ``lr * s * H`` is below this contracts by less than double precision
resolves next to 1 each round: its stationary variance (about ``lr * noise**2 / 2``, finite)
cannot be computed, and is refused rather than reported as unstable."""


def _check_resolved(s_unstable: np.ndarray, p: dict) -> None:
    step = p["lr"] * s_unstable * p["H"]
    tiny = s_unstable[step < UNRESOLVED_STEP]
    if tiny.size:
        raise TheoryError(
            f"lr={p['lr']!r} with curvature {float(tiny[0])!r} (H={p['H']}) is a step below "
            f"{UNRESOLVED_STEP:g}, too small to resolve in double precision; rescale lr, s and "
            "noise (the excess loss scales as lr * noise**2)"
        )


def _modes(s: np.ndarray, p: dict):
    """Per mode: the outer transition A (n, 2, 2), noise loading b (n, 2), r, kappa, sigma2.

    Beyond double precision (a huge step, a huge H) entries become inf or NaN; callers mark
    such modes unstable, so no warning is raised here."""
    with np.errstate(all="ignore"):
        return _modes_unchecked(s, p)


def _modes_unchecked(s: np.ndarray, p: dict):
    lr = np.float64(p["lr"])  # numpy's overflow is inf under errstate; a Python float's raises
    a = 1.0 - lr * s
    with np.errstate(over="ignore", invalid="ignore"):
        aH = a ** p["H"]
        a2 = a * a
        geo = np.where(np.abs(1 - a2) > 1e-12, (1 - a2 ** p["H"]) / (1 - a2), float(p["H"]))
    r = 1.0 - aH
    q = lr**2 * p["noise"] * geo
    M, omega, eta, mu = p["M"], p["omega"], p["eta"], p["mu"]
    kappa = omega / M if p["masks"] == "independent" else omega
    sigma2 = (1 + omega) * q / M
    n = s.size
    A = np.zeros((n, 2, 2))
    b = np.empty((n, 2))
    if p["nesterov"]:
        A[:, 0, 0] = 1 - eta * (1 + mu) * r
        A[:, 0, 1] = -eta * mu * mu
        b[:, 0] = eta * (1 + mu)
    else:
        A[:, 0, 0] = 1 - eta * r
        A[:, 0, 1] = -eta * mu
        b[:, 0] = eta
    A[:, 1, 0] = r
    A[:, 1, 1] = mu
    b[:, 1] = -1.0
    return A, b, r, kappa, sigma2


def _second_moment_map(A, b, r, kappa) -> tuple[np.ndarray, np.ndarray]:
    """The linear map on (S11, S12, S22) of one round, per mode: shape (n, 3, 3)."""
    with np.errstate(all="ignore"):
        return _second_moment_map_unchecked(A, b, r, kappa)


def _second_moment_map_unchecked(A, b, r, kappa) -> tuple[np.ndarray, np.ndarray]:
    a11, a12, a21, a22 = A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1]
    L = np.empty((A.shape[0], 3, 3))
    L[:, 0] = np.stack([a11 * a11, 2 * a11 * a12, a12 * a12], axis=1)
    L[:, 1] = np.stack([a11 * a21, a11 * a22 + a12 * a21, a12 * a22], axis=1)
    L[:, 2] = np.stack([a21 * a21, 2 * a21 * a22, a22 * a22], axis=1)
    bb = np.stack([b[:, 0] ** 2, b[:, 0] * b[:, 1], b[:, 1] ** 2], axis=1)
    L[:, :, 0] += (kappa * r * r)[:, None] * bb
    return L, bb


def _round_map(s: np.ndarray, p: dict, feedback: bool = True):
    """Per mode at setting ``p``: one round's second-moment map L and noise loading bb
    (:func:`_second_moment_map`), then r, kappa and sigma2 (:func:`_modes`). Without
    ``feedback`` the map leaves out the compressor's state-dependent noise."""
    A, b, r, kappa, sigma2 = _modes(s, p)
    L, bb = _second_moment_map(A, b, r, kappa if feedback else 0.0 * r)
    return L, bb, r, kappa, sigma2


def _radii(L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The modes whose map is finite, and the spectral radius of the map of each of them."""
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.all(np.isfinite(L), axis=(1, 2))
        if not ok.any():
            return ok, np.empty(0)
        return ok, np.max(np.abs(np.linalg.eigvals(L[ok])), axis=1)


def second_moment_radius(
    s,
    lr: float,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
) -> np.ndarray:
    """Per mode, the spectral radius of one round's map on the state's second moments.

    A mode is mean-square stable (its stationary variance exists) exactly when this is < 1.

    Parameters
    ----------
    s : curvature(s) of the modes, each > 0.
    lr, H, M, omega, outer_lr, outer_momentum, nesterov, masks : as in
        :func:`stationary_variance`.

    Returns
    -------
    numpy.ndarray, one radius per mode.

    Raises
    ------
    TheoryError
        For a setting outside its range.

    Example
    -------
    >>> float(second_moment_radius(1.0, lr=0.25, M=16, omega=99)[0]) < 1
    True
    """
    p = _settings(lr, 0.0, H, M, omega, outer_lr, outer_momentum, nesterov, masks)
    s = _curv(s)
    ok, radius = _radii(_round_map(s, p)[0])
    out = np.full(s.size, np.inf)
    out[ok] = radius
    return out


def variance_gain(
    s,
    lr: float,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
) -> np.ndarray:
    """Per mode, the compressor's feedback gain ``kappa * r**2 * S0_11``.

    The stationary variance is the variance without the compressor's state-dependent noise
    divided by ``1 - gain``: 0 without compression, 1 at the mean-square stability limit,
    ``inf`` where the outer step's transition itself is unstable. Near 1 the stationary law
    has heavy tails and time averages converge slowly. Arguments as in
    :func:`stationary_variance`.

    Example
    -------
    >>> round(float(variance_gain(1.0, lr=0.1, M=16, omega=15.0)[0]), 4)  # H = 1: kappa*r/(2-r)
    0.0493
    """
    p = _settings(lr, 0.0, H, M, omega, outer_lr, outer_momentum, nesterov, masks)
    s = _curv(s)
    L0, bb, r, kappa, _ = _round_map(s, p, feedback=False)
    out = np.full(s.size, np.inf)
    ok, radius = _radii(L0)
    stable = np.flatnonzero(ok)[radius < 1]
    if stable.size:
        with np.errstate(invalid="ignore", over="ignore"):
            S0 = np.linalg.solve(np.eye(3)[None] - L0[stable], bb[stable][..., None])
            out[stable] = kappa * r[stable] ** 2 * S0[:, 0, 0]
    return out


def stationary_variance(
    s,
    lr: float,
    noise: float = 1.0,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
) -> np.ndarray:
    """The exact stationary variance of the global point in each mode.

    Solves the linear fixed point of the covariance recursion of (position, momentum) per
    mode; ``inf`` where the mode is not mean-square stable.

    Parameters
    ----------
    s : curvature(s) of the modes, each > 0.
    lr : inner SGD learning rate (alpha).
    noise : variance of one worker's gradient noise per coordinate and step (V_w).
    H : inner steps per round.
    M : workers (N in the papers' formulas).
    omega : relative variance of the unbiased compressor (1/keep - 1 for rand-k).
    outer_lr, outer_momentum, nesterov : the outer step.
    masks : ``"independent"`` (one rand-k mask per worker) or ``"shared"``.

    Returns
    -------
    numpy.ndarray, one variance per mode.

    Raises
    ------
    TheoryError
        For a setting outside its range.

    Example
    -------
    >>> v = stationary_variance(1.0, lr=0.1, noise=1.0, M=16, omega=3.0)
    >>> bool(np.isclose(v[0], compressed_sync_variance(0.1, 1.0, 1.0, 3.0, 16)))
    True
    """
    p = _settings(lr, noise, H, M, omega, outer_lr, outer_momentum, nesterov, masks)
    s = _curv(s)
    L, bb, _, _, sigma2 = _round_map(s, p)
    out = np.full(s.size, np.inf)
    ok, radius = _radii(L)
    with np.errstate(invalid="ignore", over="ignore"):
        _check_resolved(s[ok][radius >= 1], p)
        stable = np.flatnonzero(ok)[radius < 1]
        if stable.size:
            lhs = np.eye(3)[None] - L[stable]
            rhs = (sigma2[stable][:, None] * bb[stable])[..., None]
            out[stable] = _solve_or_inf(lhs, rhs)
    return out


def _solve_or_inf(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The stationary variances ``(I - L) v = b`` of the stable modes; inf for a mode on the
    boundary, whose eigenvalue of 1 rounding put just inside (I - L exactly singular: the
    variance does not settle, as beyond it; the API fuzzer's
    ``stationary_loss([1, 0.5], lr=3, outer_momentum=0.5)``), or nearly singular, where
    the solved variance comes out negative."""
    try:
        out = np.linalg.solve(lhs, rhs)[:, 0, 0]
    except np.linalg.LinAlgError:  # some mode singular: only those are inf
        out = np.full(len(lhs), np.inf)
        for i in range(len(lhs)):
            try:
                out[i] = np.linalg.solve(lhs[i], rhs[i])[0, 0]
            except np.linalg.LinAlgError:
                pass
    # nearly singular without being exactly so (how close depends on the CPU's rounding),
    # the solve returns a huge value of either sign: a variance is never negative, so a
    # negative one is that boundary mode, whose variance does not settle
    return np.where(out >= 0, out, np.inf)


def mode_covariance(
    s: float,
    lr: float,
    noise: float = 1.0,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
) -> np.ndarray:
    """The stationary 2x2 covariance of (position, momentum) of one mode, by Lyapunov.

    ``S0 = scipy.linalg.solve_discrete_lyapunov(A, b b^T)``, then the compressor's
    state-dependent variance scales it: ``S = S0 * sigma2 / (1 - kappa r**2 S0[0, 0])``.
    A second route to :func:`stationary_variance`'s numbers; arguments as there.

    Raises
    ------
    TheoryError
        For a setting outside its range, or a mode that is not mean-square stable.
    """
    from scipy.linalg import solve_discrete_lyapunov

    p = _settings(lr, noise, H, M, omega, outer_lr, outer_momentum, nesterov, masks)
    sv = _curv(s)
    if sv.size != 1:
        raise TheoryError(f"s={s!r}: mode_covariance takes one curvature")
    A, b, r, kappa, sigma2 = _modes(sv, p)
    A, b = A[0], b[0]
    if not np.all(np.isfinite(A)) or np.max(np.abs(np.linalg.eigvals(A))) >= 1:
        raise TheoryError(f"s={s}: the outer step's transition is unstable (rho(A) >= 1)")
    S0 = solve_discrete_lyapunov(A, np.outer(b, b))
    gain = kappa * r[0] ** 2 * S0[0, 0]
    if gain >= 1:
        raise TheoryError(
            f"s={s}: not mean-square stable (the compressor's variance gain is {gain:.3g} >= 1)"
        )
    return S0 * sigma2[0] / (1 - gain)


def stationary_loss(
    s,
    lr: float,
    noise: float = 1.0,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
) -> float:
    """The exact stationary excess loss ``1/2 sum_i s_i E[x_i**2]``; ``inf`` if unstable.

    Arguments as in :func:`stationary_variance`.

    Example
    -------
    >>> stationary_loss([1.0, 0.5], lr=0.1, M=4) > 0
    True
    """
    s_arr = _curv(s)
    v = stationary_variance(s_arr, lr, noise, H, M, omega, outer_lr, outer_momentum, nesterov,
                            masks)  # fmt: skip
    return float(0.5 * np.sum(s_arr * v)) if np.all(np.isfinite(v)) else math.inf


def loss_curve(
    s,
    rounds: int,
    lr: float,
    noise: float = 1.0,
    H: int = 1,
    M: int = 1,
    omega: float = 0.0,
    outer_lr: float = 1.0,
    outer_momentum: float = 0.0,
    nesterov: bool = True,
    masks: str = "independent",
    init: float = 0.0,
) -> np.ndarray:
    """The exact expected excess loss after each of ``rounds`` outer rounds from
    ``x = init`` in every mode (momentum buffer 0): the recursion of the second moments.

    Other arguments as in :func:`stationary_variance`. Returns an array of ``rounds``.
    """
    p = _settings(lr, noise, H, M, omega, outer_lr, outer_momentum, nesterov, masks)
    s_arr = _curv(s)
    rounds = _int(rounds, "rounds", 1, 10_000_000)
    if not _finite(init):
        raise TheoryError(f"init={init!r} must be a finite number")
    uniq, inverse = np.unique(s_arr, return_inverse=True)
    weight = np.bincount(inverse, weights=s_arr) / 2
    L, bb, _, _, sigma2 = _round_map(uniq, p)
    m = np.zeros((uniq.size, 3))
    m[:, 0] = float(init) ** 2
    add = sigma2[:, None] * bb
    out = np.empty(rounds)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(rounds):
            m = np.einsum("nij,nj->ni", L, m) + add
            out[t] = weight @ m[:, 0]
    out[np.isnan(out)] = np.inf  # 0 * inf beyond double precision: a loss without bound
    return out


def compressed_sync_variance(lr: float, s: float, noise: float, omega: float, M: int) -> float:
    """Stationary variance of one mode at H = 1, outer step 1, no momentum (closed form).

    ``lr*V*(1 + omega) / (M*s*((2 - lr*s) - lr*s*omega/M))``, from the compressed-sync
    result: unbiased compression with relative variance omega, M workers averaged. ``inf``
    beyond the stability limit :func:`stable_step`.

    Example
    -------
    >>> round(compressed_sync_variance(0.1, 1.0, 1.0, 0.0, 1), 6)  # plain SGD: lr*V/(s(2-lr*s))
    0.052632
    """
    return local_sgd_variance(lr, s, noise, omega, M, H=1, outer_lr=1.0)


def local_sgd_variance(
    lr: float, s: float, noise: float, omega: float, M: int, H: int = 1, outer_lr: float = 1.0
) -> float:
    """Stationary variance of one mode for any H and outer step, no momentum (closed form).

    ``eta*sigma2 / (r*(2 - eta*r*(1 + omega/M)))`` with ``r = 1 - (1 - lr*s)**H`` and
    ``sigma2 = (1 + omega) * lr**2 * V * sum_{k<H} (1 - lr*s)**(2k) / M``; at outer step 1
    it is ``(1 + omega) * lr**2 * V * (1 + a**H) / (M*(1 - a**2)*(2 - r*(1 + omega/M)))``.
    ``inf`` where the mode is not stable.
    """
    p = _settings(lr, noise, H, M, omega, outer_lr, 0.0, True, "independent")
    sv = _curv(s)
    if sv.size != 1:
        raise TheoryError(f"s={s!r}: takes one curvature")
    _, _, r, kappa, sigma2 = _modes(sv, p)
    eta = p["eta"]
    with np.errstate(all="ignore"):  # beyond double precision: not stable, inf below
        denom = r[0] * (2 - eta * r[0] * (1 + kappa))
        value = eta * sigma2[0] / denom
    if not (r[0] > 0 and denom > 0 and math.isfinite(denom) and math.isfinite(value)):
        return math.inf
    return float(value)


def stable_step(s: float, omega: float, M: int) -> float:
    """The largest stable ``lr`` at H = 1, outer step 1, no momentum: ``2/(s*(1 + omega/M))``.

    Example
    -------
    >>> round(stable_step(1.0, 99.0, 16), 4)
    0.2783
    """
    s = _positive(s, "s")
    if not _finite(omega) or omega < 0:
        raise TheoryError(f"omega={omega!r} must be a finite number >= 0")
    M = _int(M, "M", 1, 1_000_000)
    return 2.0 / (s * (1.0 + omega / M))


_RUN_KEYS = (
    "dim", "spectrum", "curvature", "condition", "noise", "M", "H", "keep", "compressor",
    "masks", "aggregator", "lr", "outer_lr", "outer_momentum", "nesterov", "attackers",
)  # fmt: skip


def exact_loss(run: Mapping, rounds: tuple[int, int] | None = None) -> float:
    """The exact expected excess loss of one quadratic run (a results row or its config).

    Parameters
    ----------
    run : a mapping with the harness's settings (a row of a table written by
        ``fitrules simulate`` from a quadratic spec, or ``dataclasses.asdict`` of its config).
    rounds : ``None`` for the stationary value; ``(burn_in, rounds)`` for the expectation of
        the harness's ``loss``: the mean over rounds ``burn_in + 1 .. rounds`` from ``init``.

    Raises
    ------
    TheoryError
        For a missing setting, a compressor or aggregator the harness does not know, or a
        run the theory does not cover (median or trimmed-mean aggregation, top-k, attackers).
    """
    if not isinstance(run, Mapping):
        raise TheoryError(f"run={run!r}: expected a mapping of the run's settings")
    missing = [k for k in _RUN_KEYS if k not in run]
    if missing:
        raise TheoryError(f"run: missing setting(s) {missing}")

    def num(key: str, kind: type = float):
        value = run[key]
        try:
            out = kind(str(value).lower() == "true") if kind is bool else kind(value)
        except (TypeError, ValueError, OverflowError):
            raise TheoryError(f"run: {key}={value!r} is not a {kind.__name__}") from None
        if kind is bool and str(value).lower() not in ("true", "false"):
            raise TheoryError(f"run: {key}={value!r} is not True or False")
        return out

    for key, allowed in (("compressor", COMPRESSORS), ("aggregator", AGGREGATORS)):
        if run[key] not in allowed:
            raise TheoryError(f"{key}={run[key]!r} is unknown; allowed: {', '.join(allowed)}")
    if run["aggregator"] != "mean" or run["compressor"] == "topk" or num("attackers") > 0:
        raise TheoryError(
            f"aggregator={run['aggregator']!r}, compressor={run['compressor']!r}, "
            f"attackers={run['attackers']!r}: exact only for the mean aggregator, rand-k or no "
            "compression and no attackers"
        )
    keep = num("keep")
    if not 0 < keep <= 1:
        raise TheoryError(f"keep={keep!r} is outside (0, 1]")
    omega = compressor_omega(run["compressor"], keep)
    s = curvatures(str(run["spectrum"]), num("dim"), num("curvature"), num("condition"))
    args = dict(
        lr=num("lr"), noise=num("noise"), H=num("H"), M=num("M"), omega=omega,
        outer_lr=num("outer_lr"), outer_momentum=num("outer_momentum"),
        nesterov=num("nesterov", bool), masks=str(run["masks"]),
    )  # fmt: skip
    if rounds is None:
        return stationary_loss(s, **args)
    if not isinstance(rounds, tuple | list) or len(rounds) != 2:
        raise TheoryError(f"rounds={rounds!r}: expected None or (burn_in, rounds)")
    burn_in, total = rounds
    total = _int(total, "rounds", 1, 10_000_000)
    burn_in = _int(burn_in, "burn_in", 0, total - 1)
    curve = loss_curve(s, total, init=num("init") if "init" in run else 0.0, **args)
    return float(curve[burn_in:].mean())
