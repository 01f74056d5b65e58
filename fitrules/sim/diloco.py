"""DiLoCo-style local SGD with compressed deltas, and the synchronous data-parallel baseline.

M workers start from the global model, each takes H inner optimiser steps on its own shard,
then each worker's delta (its parameters minus the global ones) is compressed, the deltas are
aggregated, and an outer SGD step with Nesterov momentum moves the global model along the
aggregate. Inner optimiser state stays with each worker across rounds, as in DiLoCo.

Random streams are keyed by the seed alone (initialisation, data order, compression masks),
so two configurations with the same seed start from the same model and see the same batches:
that is what makes runs pairable by seed.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fitrules.base.errors import SimError
from fitrules.base.limits import MAX_SEED, SIM_INT_LIMITS
from fitrules.sim.common import CHOICES, check_settings, compress, compressor_omega, trimmed_mean
from fitrules.sim.corpus import Corpus
from fitrules.sim.model import MLPShape, init_params, loss_and_grad, mean_loss

ALGOS = ("diloco", "sync")
INNER_OPTS = ("adam", "adamw", "sgd")


@dataclass(frozen=True)
class RunConfig:
    """One training run. Every field is a factor a grid spec may vary."""

    algo: str = "diloco"
    M: int = 4
    H: int = 16
    keep: float = 1.0
    compressor: str = "randk"
    masks: str = "independent"
    aggregator: str = "mean"
    trim: float = 0.25
    inner_opt: str = "adam"
    lr: float = 3e-4
    weight_decay: float = 0.0
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    nesterov: bool = True
    width: int = 256
    embed: int = 16
    context: int = 8
    steps: int = 2048
    batch: int = 32
    eval_windows: int = 16384
    seed: int = 0

    def validate(self) -> RunConfig:
        """Return self, or raise :class:`SimError` naming the bad field and what is allowed."""
        check_settings(self, {"algo": ALGOS, **CHOICES, "inner_opt": INNER_OPTS})
        if not 0 < self.keep <= 1:
            raise SimError(f"keep={self.keep} is outside (0, 1]")
        for name, most in SIM_INT_LIMITS.items():
            if int(getattr(self, name)) < 1:
                raise SimError(f"{name}={getattr(self, name)} must be >= 1")
            if int(getattr(self, name)) > most:
                raise SimError(
                    f"{name}={getattr(self, name)} is above the limit of {most:,} "
                    "(fitrules.base.limits.SIM_INT_LIMITS)"
                )
        if not 0 <= self.seed <= MAX_SEED:
            raise SimError(f"seed={self.seed} must be from 0 to 2**63 - 1")
        if self.weight_decay < 0:
            raise SimError(f"weight_decay={self.weight_decay} must be >= 0")
        if self.lr <= 0 or self.outer_lr <= 0:
            raise SimError(f"lr={self.lr}, outer_lr={self.outer_lr}: learning rates must be > 0")
        if not 0 <= self.outer_momentum < 1:
            raise SimError(f"outer_momentum={self.outer_momentum} is outside [0, 1)")
        if not 0 <= self.trim < 0.5:
            raise SimError(f"trim={self.trim} is outside [0, 0.5)")
        return self

    def memory(self, vocab: int) -> float:
        """Bytes one run's largest arrays take (parameters, optimiser state, activations)."""
        P = self.shape(vocab).n_params
        state = 4.0 * P * (8 * self.M + 4)  # workers, grads, Adam m and v, deltas, masks
        step = 4.0 * self.M * self.batch * (self.context * self.embed + 4 * self.width + 4 * vocab)
        evals = 4.0 * min(self.eval_windows, 4096) * (self.context * self.embed + 2 * self.width)
        return state + 2 * step + evals

    @property
    def omega(self) -> float:
        """Variance factor of unbiased rand-k, 1/keep - 1; for top-k only a nominal label."""
        return compressor_omega(self.compressor, self.keep)

    def shape(self, vocab: int) -> MLPShape:
        return MLPShape(vocab=vocab, context=self.context, embed=self.embed, hidden=self.width)


class _Adam:
    """Adam / AdamW / SGD over a (M, P) parameter array, one state per worker."""

    def __init__(self, kind: str, lr: float, weight_decay: float, shape: tuple[int, int]):
        self.kind, self.lr, self.wd = kind, np.float32(lr), np.float32(weight_decay)
        self.b1, self.b2, self.eps = np.float32(0.9), np.float32(0.999), np.float32(1e-8)
        self.t = 0
        if kind != "sgd":
            self.m = np.zeros(shape, np.float32)
            self.v = np.zeros(shape, np.float32)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        if self.kind == "sgd":
            params -= self.lr * grad
            return
        self.t += 1
        self.m *= self.b1
        self.m += (1 - self.b1) * grad
        self.v *= self.b2
        self.v += (1 - self.b2) * grad * grad
        c1 = 1 - float(self.b1) ** self.t
        c2 = 1 - float(self.b2) ** self.t
        if self.kind == "adamw" and self.wd > 0:
            params *= 1 - self.lr * self.wd
        step = self.m / (np.sqrt(self.v / np.float32(c2)) + self.eps)
        params -= np.float32(self.lr / c1) * step


def _batches(corpus: Corpus, cfg: RunConfig):
    """Yield (x, y) of shape (M, B, context), (M, B) per inner step; worker m reads shard m."""
    windows = sliding_window_view(corpus.train, cfg.context + 1)
    shard = len(windows) // cfg.M
    rng = np.random.default_rng([cfg.seed, 1])
    offsets = (np.arange(cfg.M) * shard)[:, None]
    for _ in range(cfg.steps):
        w = windows[offsets + rng.integers(0, shard, size=(cfg.M, cfg.batch))]
        yield w[..., :-1], w[..., -1]


def _validation(corpus: Corpus, cfg: RunConfig) -> tuple[np.ndarray, np.ndarray]:
    windows = sliding_window_view(corpus.valid, cfg.context + 1)
    pick = np.linspace(0, len(windows) - 1, min(cfg.eval_windows, len(windows))).astype(int)
    w = windows[pick]
    return w[:, :-1], w[:, -1]


def _compress(delta, cfg: RunConfig, rng, error):
    return compress(delta, cfg, rng, error, np.float32)  # the MLP trains in float32


def _aggregate(c: np.ndarray, cfg: RunConfig) -> np.ndarray:
    if cfg.aggregator == "mean":
        return c.mean(axis=0)
    if cfg.aggregator == "median":
        return np.median(c, axis=0)
    return trimmed_mean(np.sort(c, axis=0), cfg.trim)


def train(cfg: RunConfig, corpus: Corpus) -> tuple[np.ndarray, np.ndarray, bool]:
    """Train one configuration; return the global parameters, last train losses, diverged."""
    cfg.validate()
    shape = cfg.shape(corpus.vocab_size)
    global_p = init_params(shape, np.random.default_rng([cfg.seed, 0]))
    workers = np.tile(global_p, (cfg.M, 1))
    grad = np.empty_like(workers)
    diverged = False
    train_losses = np.full(cfg.M, np.nan)

    if cfg.algo == "sync":
        opt = _Adam(cfg.inner_opt, cfg.lr, cfg.weight_decay, (1, shape.n_params))
        single = global_p[None, :].copy()
        for x, y in _batches(corpus, cfg):
            workers[:] = single
            train_losses, _ = loss_and_grad(workers, x, y, shape, grad)
            if not np.isfinite(train_losses).all():
                diverged = True
                break
            opt.step(single, grad.mean(axis=0, keepdims=True))
        return single[0], train_losses, diverged

    opt = _Adam(cfg.inner_opt, cfg.lr, cfg.weight_decay, workers.shape)
    rng_c = np.random.default_rng([cfg.seed, 2])
    error = np.zeros_like(workers) if cfg.compressor == "topk" else None
    buf = np.zeros_like(global_p)
    mu = np.float32(cfg.outer_momentum)
    for t, (x, y) in enumerate(_batches(corpus, cfg)):
        train_losses, _ = loss_and_grad(workers, x, y, shape, grad)
        if not np.isfinite(train_losses).all():
            diverged = True
            break
        opt.step(workers, grad)
        if (t + 1) % cfg.H == 0 or t + 1 == cfg.steps:
            outer_grad = -_aggregate(_compress(workers - global_p, cfg, rng_c, error), cfg)
            buf = mu * buf + outer_grad
            step = outer_grad + mu * buf if cfg.nesterov else buf
            global_p = global_p - np.float32(cfg.outer_lr) * step
            workers[:] = global_p
    return global_p, train_losses, diverged


def run(cfg: RunConfig, corpus: Corpus) -> dict:
    """Train one configuration and return its results row (config fields + outcomes).

    The loss is the validation cross-entropy (nats per character) of the final global model;
    a run whose loss is not finite or exceeds ln(vocabulary size), a uniform guess, is
    recorded with ``diverged = True``.
    """
    t0 = time.perf_counter()
    params, train_losses, diverged = train(cfg, corpus)
    shape = cfg.shape(corpus.vocab_size)
    if diverged or not np.isfinite(params).all():
        loss = float("nan")
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            loss = mean_loss(params, *_validation(corpus, cfg), shape)
    diverged = diverged or not np.isfinite(loss) or loss > math.log(corpus.vocab_size)
    row = asdict(cfg)
    row.update(
        omega=cfg.omega,
        n_params=shape.n_params,
        loss=loss,
        train_loss=float(np.mean(train_losses)),
        diverged=bool(diverged),
        wall_s=round(time.perf_counter() - t0, 3),
    )
    return row
