"""The compression, attacks and aggregation of :mod:`fitrules.sim.common` on PyTorch tensors,
on whatever device the messages are: what the transformer's device path (``device = "cpu"``
or ``"cuda"``) runs, the same operations in the same order as the numpy functions, so a run
on the CPU gives the numpy path's numbers to float32 rounding (``tests/sim/test_gpt.py``).

Rand-k's masks are drawn by numpy from the run's own stream and copied to the device (one
bool per parameter and worker each round, a few MB for the programme's models): the masks,
and so the runs, pair by seed across devices. No torch import here: every operation is a
method of the tensors given.
"""

from __future__ import annotations

import math

import numpy as np


def compress(d, cfg, rng: np.random.Generator, error):
    """The messages ``d`` (a (M, P) float32 tensor) as ``cfg``'s compressor sends them, as
    :func:`fitrules.sim.common.compress` does with ``dtype = np.float32``; ``error`` (top-k's
    residuals, a tensor like ``d``) is updated in place."""
    if cfg.compressor == "none" or cfg.keep >= 1.0:
        return d
    if cfg.compressor == "randk":
        rows = 1 if cfg.masks == "shared" else d.shape[0]
        mask = rng.random((rows, d.shape[1]), dtype=np.float32) < np.float32(cfg.keep)
        as_tensor = d.new_tensor(mask, dtype=bool)
        return d * as_tensor * float(np.float32(1.0 / cfg.keep))
    acc = d + error
    k = max(1, int(round(cfg.keep * acc.shape[1])))
    idx = acc.abs().topk(k, dim=1).indices
    sent = acc.new_zeros(acc.shape).scatter_(1, idx, acc.gather(1, idx))
    error.copy_(acc - sent)
    return sent


def attack(c, cfg):
    """The messages ``c`` with the first ``cfg.attackers`` rows replaced by the attack, as
    :func:`fitrules.sim.common.attack` does."""
    n = cfg.attackers
    if n == 0:
        return c
    sign = -1.0 if cfg.attack == "signflip" else 1.0
    c = c.clone()
    if cfg.attack_mode == "coordinated":
        honest = c[n:].mean(dim=0) if n < cfg.M else c.mean(dim=0)
        c[:n] = sign * cfg.attack_scale * honest[None, :]
    else:
        c[:n] *= sign * cfg.attack_scale
    return c


def aggregate(c, cfg):
    """The messages ``c`` aggregated by ``cfg.aggregator`` (mean, coordinate-wise median or
    trimmed mean), as :func:`fitrules.sim.common.aggregate` does."""
    if cfg.aggregator == "mean":
        return c.mean(dim=0)
    s = c.sort(dim=0).values
    m = c.shape[0]
    if cfg.aggregator == "median":
        return s[m // 2] if m % 2 else 0.5 * (s[m // 2 - 1] + s[m // 2])
    cut = int(math.floor(cfg.trim * m))
    return s[cut : m - cut].mean(dim=0)
