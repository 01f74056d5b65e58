"""What the harnesses (the MLP's, the quadratic's, the transformer's) do alike: the choices of
compressor, masks and aggregator, a run's settings checked against their choices, compression
(rand-k, and top-k with error feedback), attackers and the robust aggregators."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np

from fitrules.base.errors import SimError

COMPRESSORS = ("none", "randk", "topk")
MASKS = ("independent", "shared")
AGGREGATORS = ("mean", "median", "trimmed")
# the choices of the settings every harness has, in the order they are checked
CHOICES = {"compressor": COMPRESSORS, "masks": MASKS, "aggregator": AGGREGATORS}
ATTACKS = ("signflip", "scale")
ATTACK_MODES = ("independent", "coordinated")


def compressor_omega(compressor: str, keep: float) -> float:
    """Relative variance of unbiased rand-k, 1/keep - 1 (0 without compression); for top-k
    a nominal label."""
    return 1.0 / keep - 1.0 if compressor != "none" else 0.0


def check_settings(cfg, choices: dict[str, tuple[str, ...]]) -> None:
    """Refuse a setting of ``cfg`` outside its ``choices``, or a number that is not finite.

    Parameters
    ----------
    cfg : a run's configuration (a dataclass).
    choices : the allowed values of each setting that has a fixed set of them.

    Raises
    ------
    SimError
        Naming the setting, its value and what is allowed.
    """
    for name, allowed in choices.items():
        if getattr(cfg, name) not in allowed:
            raise SimError(
                f"{name}={getattr(cfg, name)!r} is unknown; allowed: "
                + ", ".join(a or "''" for a in allowed)
            )
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise SimError(f"{f.name}={v}: must be a finite number")


def compress(d: np.ndarray, cfg, rng, error, dtype=np.float64) -> np.ndarray:
    """The messages ``d`` (one row per worker) as ``cfg``'s compressor sends them: unbiased
    rand-k (one mask per worker, or one for all), top-k with error feedback, or unchanged.
    ``dtype`` is the harness's float type, of the masks' uniform draws and of the scaling."""
    if cfg.compressor == "none" or cfg.keep >= 1.0:
        return d
    if cfg.compressor == "randk":
        rows = 1 if cfg.masks == "shared" else d.shape[0]
        as_float = np.dtype(dtype).type
        mask = rng.random((rows, d.shape[1]), dtype=dtype) < as_float(cfg.keep)
        return d * mask * as_float(1.0 / cfg.keep)
    # top-k with error feedback: what is not sent this round is added to the next message
    return topk_with_feedback(d, cfg.keep, error)


def trimmed_mean(ordered: np.ndarray, trim: float) -> np.ndarray:
    """The mean over rows of ``ordered`` (sorted along axis 0) less the ``trim`` fraction at
    each end."""
    m = ordered.shape[0]
    cut = int(math.floor(trim * m))
    return ordered[cut : m - cut].mean(axis=0)


def topk_with_feedback(d: np.ndarray, keep: float, error: np.ndarray) -> np.ndarray:
    """Top-k compression with error feedback: each row sends the ``keep`` fraction of its
    entries of ``d + error`` that are largest in magnitude.

    Parameters
    ----------
    d : the messages, one row per worker.
    keep : the fraction of each row sent.
    error : what earlier rounds did not send, one row per worker; updated in place with
        what this round does not send (added to the next round's message).

    Returns
    -------
    numpy.ndarray
        The messages sent (zero where nothing is).
    """
    acc = d + error
    k = max(1, int(round(keep * acc.shape[1])))
    idx = np.argpartition(np.abs(acc), acc.shape[1] - k, axis=1)[:, -k:]
    rows = np.arange(acc.shape[0])[:, None]
    sent = np.zeros_like(acc)
    sent[rows, idx] = acc[rows, idx]
    error[:] = acc - sent
    return sent


def check_limits(cfg, limits: dict[str, int]) -> None:
    """Refuse an integer setting of ``cfg`` outside 1 to its entry in ``limits``."""
    for name, most in limits.items():
        if not 1 <= getattr(cfg, name) <= most:
            raise SimError(f"{name}={getattr(cfg, name)} must be from 1 to {most:,}")


def check_attack(cfg) -> None:
    """Refuse more attackers than workers, or an attack scale outside 0 to 1e6."""
    if not 0 <= cfg.attackers <= cfg.M:
        raise SimError(f"attackers={cfg.attackers} must be from 0 to M = {cfg.M}")
    if not 0 <= cfg.attack_scale <= 1e6:
        raise SimError(f"attack_scale={cfg.attack_scale} must be from 0 to 1e6")


def attack(c: np.ndarray, cfg) -> np.ndarray:
    """The messages ``c`` (one row per worker) with the first ``cfg.attackers`` rows replaced
    by the attack: each its own message times ``-attack_scale`` (``signflip``) or
    ``attack_scale`` (``scale``), or with ``attack_mode = "coordinated"`` all the same vector,
    made from the honest workers' mean."""
    n = cfg.attackers
    if n == 0:
        return c
    sign = -1.0 if cfg.attack == "signflip" else 1.0
    c = c.copy()
    if cfg.attack_mode == "coordinated":
        honest = c[n:].mean(axis=0) if n < cfg.M else c.mean(axis=0)
        c[:n] = sign * cfg.attack_scale * honest[None, :]
    else:
        c[:n] *= sign * cfg.attack_scale
    return c


def aggregate(c: np.ndarray, cfg) -> np.ndarray:
    """The messages ``c`` (one row per worker) aggregated by ``cfg.aggregator``: their mean,
    coordinate-wise median or trimmed mean."""
    if cfg.aggregator == "mean":
        return c.mean(axis=0)
    s = np.sort(c, axis=0)  # several times faster than np.median here, the same values
    m = c.shape[0]
    if cfg.aggregator == "median":
        return s[m // 2] if m % 2 else 0.5 * (s[m // 2 - 1] + s[m // 2])
    return trimmed_mean(s, cfg.trim)
