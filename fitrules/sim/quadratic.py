"""Local SGD with compressed displacements on a noisy quadratic: the theory's own model.

The loss is ``f(x) = 1/2 sum_i s_i x_i**2`` in the eigenbasis of its Hessian, whose
curvatures ``s_i`` form a named spectrum. Each round, M workers start from the global point
and take H SGD steps ``x <- x - lr * (s * x + xi)`` with gradient noise ``xi`` of variance
``noise`` per coordinate, independent across workers and steps. Each worker's displacement
(its point minus the global one) is compressed (rand-k with a Bernoulli mask of rate
``keep``, rescaled by 1/keep, so unbiased with relative variance omega = 1/keep - 1; or top-k
with error feedback), aggregated (mean, coordinate-wise median or trimmed mean), and an outer
SGD step with (optionally Nesterov) momentum moves the global point along the aggregate, as in
:mod:`fitrules.sim.diloco`.

Attackers are the first ``attackers`` workers. After compression each sends, instead of its
message, ``-attack_scale`` times it (``attack = "signflip"``) or ``attack_scale`` times it
(``"scale"``); with ``attack_mode = "coordinated"`` every attacker sends the same vector, made
from the mean of the honest workers' messages, so that they land together in the order
statistics a robust aggregator reads.

With Gaussian noise, the H inner steps of a worker have an exact law: its displacement is
``(a**H - 1) * x + e`` with ``a = 1 - lr*s`` and ``e`` Gaussian of variance
``lr**2 * noise * sum_k a**(2k)`` (k < H). ``inner = "steps"`` takes every worker's H steps one
by one; ``"exact"`` draws each worker's displacement from that law in one step (H times
cheaper); ``"aggregate"`` draws the mean of the M compressed displacements from its law in
one step (M times cheaper again): with K ~ Binomial(M, keep) workers sending a coordinate, the
mean is ``(K * (a**H - 1) * x + sqrt(K) * sd(e) * z) / (M * keep)``. It needs the mean
aggregator, rand-k or no compression, and no attackers; ``"auto"`` (the default) uses it
where it applies and ``"exact"`` elsewhere. All four are the same process, drawn from
different random numbers (a test holds their losses to the theory's).

The metric ``loss`` is the excess loss ``f(x)`` of the global point averaged over the outer
rounds after ``burn_in`` (its stationary value when the rounds are enough); ``loss_final``
is the excess loss after the last round. A run whose loss is not finite or exceeds
:data:`DIVERGED_LOSS` times the larger of 1 and its starting loss stops there and is recorded
with ``diverged = True`` and a NaN loss. :mod:`fitrules.sim.theory` gives the exact stationary
value for the mean aggregator without attackers.

Random streams are keyed by the seed alone (starting point, gradient noise, masks), so runs
with the same seed are paired across configurations, as in the MLP harness.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from fitrules.base.errors import SimError
from fitrules.base.limits import MAX_SEED, MAX_SIM_RUN_SECONDS
from fitrules.sim.common import (
    ATTACK_MODES,
    ATTACKS,
    CHOICES,
    aggregate,
    attack,
    check_attack,
    check_limits,
    check_settings,
    compress,
    compressor_omega,
)

SPECTRA = ("constant", "linear", "geometric")
INNER = ("auto", "aggregate", "exact", "steps")
QUAD_INT_LIMITS = {  # largest value of each integer setting of a quadratic run
    "dim": 10_000_000,
    "M": 1_024,
    "H": 1_000_000,
    "rounds": 10_000_000,
}
# seconds per coordinate update drawn, on one core of a 2-core AMD EPYC VM (dim 10,000,
# M 32): 28 ns with the mean drawn at once, 17 to 23 ns per worker's coordinate with exact
# draws or steps (rand-k, median, trimmed mean, attackers), 51 ns with top-k's sort; rounded up
SECONDS_PER_UPDATE = {"aggregate": 30e-9, "topk": 60e-9, "other": 25e-9}
DIVERGED_LOSS = 1e12  # a run beyond this many times max(1, starting loss) has diverged


@dataclass(frozen=True)
class QuadConfig:
    """One run on the noisy quadratic. Every field but ``model`` is a factor a spec may vary."""

    model: str = "quadratic"
    dim: int = 1000
    spectrum: str = "constant"
    curvature: float = 1.0
    condition: float = 1.0
    noise: float = 1.0
    M: int = 16
    H: int = 1
    keep: float = 1.0
    compressor: str = "randk"
    masks: str = "independent"
    aggregator: str = "mean"
    trim: float = 0.25
    lr: float = 0.05
    outer_lr: float = 1.0
    outer_momentum: float = 0.0
    nesterov: bool = True
    rounds: int = 1000
    burn_in: int = 200
    init: float = 0.0
    inner: str = "auto"
    attackers: int = 0
    attack: str = "signflip"
    attack_scale: float = 1.0
    attack_mode: str = "independent"
    seed: int = 0

    def validate(self) -> QuadConfig:
        """Return self, or raise :class:`SimError` naming the bad field and what is allowed."""
        choices = {
            "model": ("quadratic",),
            "spectrum": SPECTRA,
            **CHOICES,
            "inner": INNER,
            "attack": ATTACKS,
            "attack_mode": ATTACK_MODES,
        }
        check_settings(self, choices)
        check_limits(self, QUAD_INT_LIMITS)
        if not 0 <= self.seed <= MAX_SEED:
            raise SimError(f"seed={self.seed} must be from 0 to 2**63 - 1")
        if not 0 < self.keep <= 1:
            raise SimError(f"keep={self.keep} is outside (0, 1]")
        for name in ("curvature", "lr", "outer_lr"):
            if not 0 < getattr(self, name) <= 1e6:
                raise SimError(f"{name}={getattr(self, name)} must be > 0 and at most 1e6")
        if not 1 <= self.condition <= 1e12:
            raise SimError(f"condition={self.condition} must be from 1 to 1e12")
        if not 0 <= self.noise <= 1e12:
            raise SimError(f"noise={self.noise} must be from 0 to 1e12")
        if not abs(self.init) <= 1e6:
            raise SimError(f"init={self.init} must be within -1e6 to 1e6")
        if not 0 <= self.outer_momentum < 1:
            raise SimError(f"outer_momentum={self.outer_momentum} is outside [0, 1)")
        if not 0 <= self.trim < 0.5:
            raise SimError(f"trim={self.trim} is outside [0, 0.5)")
        if not 0 <= self.burn_in < self.rounds:
            raise SimError(
                f"burn_in={self.burn_in} must be from 0 to rounds - 1 = {self.rounds - 1}"
            )
        check_attack(self)
        if self.inner == "aggregate" and not self.aggregate_ok:
            raise SimError(
                "inner='aggregate' needs aggregator='mean', compressor 'randk' or 'none' and "
                f"attackers=0 (got aggregator={self.aggregator!r}, compressor="
                f"{self.compressor!r}, attackers={self.attackers}); use inner='exact'"
            )
        seconds = self.seconds()
        if seconds > MAX_SIM_RUN_SECONDS:
            at_once = self._at_once
            raise SimError(
                f"a quadratic run of rounds={self.rounds} x dim={self.dim}"
                + ("" if at_once else f" x M={self.M}")
                + (f" x H={self.H} (inner='steps')" if self.inner == "steps" else "")
                + f" = {self.updates():.3g} coordinate updates would take about "
                f"{_duration(seconds)} on one core, more than the {_duration(MAX_SIM_RUN_SECONDS)}"
                " one run may take (MAX_SIM_RUN_SECONDS); use fewer rounds, a smaller dim"
                + ("" if at_once else " or M")
            )
        return self

    @property
    def _at_once(self) -> bool:
        """The mean of the M messages is drawn in one step (no per-worker arrays)."""
        return self.inner == "aggregate" or (self.inner == "auto" and self.aggregate_ok)

    def updates(self) -> float:
        """Coordinate updates the run draws: rounds x dim, times M (each worker's displacement)
        unless the mean is drawn at once, times H with ``inner = "steps"``."""
        per_round = 1 if self._at_once else self.M * (self.H if self.inner == "steps" else 1)
        return float(self.rounds) * self.dim * per_round

    def seconds(self) -> float:
        """Estimated seconds of the run on one core: :meth:`updates` x the measured time of
        one (:data:`SECONDS_PER_UPDATE`)."""
        kind = "aggregate" if self._at_once else "topk" if self.compressor == "topk" else "other"
        return self.updates() * SECONDS_PER_UPDATE[kind]

    def memory(self, vocab: int | None = None) -> float:
        """Bytes one run's largest arrays take (workers' points, noise, masks, messages)."""
        return 8.0 * self.dim * (8 * self.M + 8)

    def describe(self) -> str:
        """The settings that size a run, for messages."""
        return f"a quadratic run at dim={self.dim}, M={self.M}"

    @property
    def aggregate_ok(self) -> bool:
        """The mean of the messages can be drawn at once (``inner = "aggregate"``)."""
        return self.aggregator == "mean" and self.compressor != "topk" and self.attackers == 0

    @property
    def omega(self) -> float:
        """Relative variance of unbiased rand-k, 1/keep - 1; for top-k a nominal label."""
        return compressor_omega(self.compressor, self.keep)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.3g} h" if seconds >= 3600 else f"{seconds / 60:.3g} min"


def curvatures(spectrum: str, dim: int, curvature: float, condition: float) -> np.ndarray:
    """The Hessian's eigenvalues, largest ``curvature``, smallest ``curvature/condition``.

    ``constant``: all equal to ``curvature``; ``linear``: evenly spaced; ``geometric``:
    evenly spaced in log. :func:`fitrules.sim.theory.curvatures` checks its arguments and
    calls this one, so the theory's modes are the harness's.
    """
    lo = curvature / condition
    if spectrum == "constant" or dim == 1:
        return np.full(dim, float(curvature))
    if spectrum == "linear":
        return np.linspace(curvature, lo, dim)
    return np.geomspace(curvature, lo, dim)


def _law(x, s, cfg):
    """The mean and the noise sd of one worker's displacement after H SGD steps from x."""
    a = 1.0 - cfg.lr * s
    a2 = a * a
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        geo = np.where(
            np.abs(1.0 - a2) > 1e-12, (1.0 - a2**cfg.H) / (1.0 - a2), float(cfg.H)
        )  # sum of a**(2k), k < H
        return (a**cfg.H - 1.0) * x, cfg.lr * np.sqrt(cfg.noise * geo)


def _inner_exact(x, s, cfg, rng):
    """Each worker's displacement after H SGD steps from x, drawn from its exact law."""
    drift, sd = _law(x, s, cfg)
    return drift[None, :] + sd[None, :] * rng.standard_normal((cfg.M, x.size))


def _mean_message(x, s, cfg, rng, rng_mask):
    """The mean of the M compressed displacements, drawn from its exact law."""
    drift, sd = _law(x, s, cfg)
    z = rng.standard_normal(x.size)
    if cfg.compressor == "none" or cfg.keep >= 1.0:
        return drift + sd * z / math.sqrt(cfg.M)
    if cfg.masks == "independent":
        k = rng_mask.binomial(cfg.M, cfg.keep, size=x.size).astype(float)
    else:
        k = cfg.M * (rng_mask.random(x.size) < cfg.keep)
    return (k * drift + np.sqrt(k) * sd * z) / (cfg.M * cfg.keep)


def _inner_steps(x, s, cfg, rng):
    """Each worker's displacement after H SGD steps from x, taken one by one."""
    w = np.tile(x, (cfg.M, 1))
    sd = math.sqrt(cfg.noise)
    for _ in range(cfg.H):
        w -= cfg.lr * (s[None, :] * w + sd * rng.standard_normal(w.shape))
    return w - x[None, :]


def train(cfg: QuadConfig) -> tuple[np.ndarray, float, int, bool]:
    """Run one configuration; return the excess loss per round, the starting loss, the
    rounds run and whether it diverged."""
    cfg.validate()
    s = curvatures(cfg.spectrum, cfg.dim, cfg.curvature, cfg.condition)
    x = np.full(cfg.dim, float(cfg.init))
    buf = np.zeros(cfg.dim)
    rng_noise = np.random.default_rng([cfg.seed, 1])
    rng_mask = np.random.default_rng([cfg.seed, 2])
    error = np.zeros((cfg.M, cfg.dim)) if cfg.compressor == "topk" else None
    inner = _inner_steps if cfg.inner == "steps" else _inner_exact
    at_once = cfg._at_once
    start = 0.5 * float(s @ (x * x))
    limit = DIVERGED_LOSS * max(1.0, start)
    losses = np.empty(cfg.rounds)
    mu, eta = cfg.outer_momentum, cfg.outer_lr
    for t in range(cfg.rounds):
        if at_once:
            u = -_mean_message(x, s, cfg, rng_noise, rng_mask)
        else:
            d = inner(x, s, cfg, rng_noise)
            u = -aggregate(attack(compress(d, cfg, rng_mask, error), cfg), cfg)
        buf = mu * buf + u
        x = x - eta * (u + mu * buf if cfg.nesterov else buf)
        with np.errstate(over="ignore", invalid="ignore"):
            losses[t] = 0.5 * float(s @ (x * x))
        if not losses[t] <= limit:  # also true for NaN
            return losses[: t + 1], start, t + 1, True
    return losses, start, cfg.rounds, False


def run(cfg: QuadConfig, corpus: object = None) -> dict:
    """Run one configuration and return its results row (config fields + outcomes).

    ``corpus`` is ignored (the MLP harness's runs need one; these do not).
    """
    t0 = time.perf_counter()
    losses, _, done, diverged = train(cfg)
    row = asdict(cfg)
    row.update(
        omega=cfg.omega,
        loss=float("nan") if diverged else float(losses[cfg.burn_in :].mean()),
        loss_final=float("nan") if diverged else float(losses[-1]),
        rounds_run=done,
        diverged=bool(diverged),
        wall_s=round(time.perf_counter() - t0, 3),
    )
    return row
