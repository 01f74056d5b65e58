"""The training objective: the residuals a fit squares (or Hubers) and their sum."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import HUBER_DELTA, OBJECTIVES

TINY = 1e-300


@dataclass(frozen=True)
class Objective:
    """The training objective.

    ``rel_ls``: sum of squared relative residuals (pred - y) / y (default; matches the
    relative held-out error). ``log_huber``: sum of Huber(log pred - log y, delta), the
    Chinchilla convention (a sum, not a mean). ``abs_ls``: sum of squared residuals.

    Parameters
    ----------
    kind : {"rel_ls", "log_huber", "abs_ls"}, optional
        The objective (default ``"rel_ls"``).
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).

    Raises
    ------
    FitrulesError
        For an unknown kind, or a delta that is not finite and > 0.
    """

    kind: str = OBJECTIVES[0]
    delta: float = HUBER_DELTA

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise FitrulesError(
                f"objective {self.kind!r} is unknown; allowed: " + ", ".join(OBJECTIVES)
            )
        if not (np.isfinite(self.delta) and self.delta > 0):
            raise FitrulesError(
                f"{param('delta')} {self.delta}: the Huber delta must be finite and > 0"
            )

    def residuals(self, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.kind == "abs_ls":
            return pred - y
        if self.kind == "rel_ls":
            return (pred - y) / y
        return np.log(np.maximum(pred, TINY)) - np.log(y)

    def dres_dpred(self, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.kind == "abs_ls":
            return np.ones_like(y)
        if self.kind == "rel_ls":
            return 1.0 / y
        return 1.0 / np.maximum(pred, TINY)

    def value(self, r: np.ndarray, axis: int | None = None) -> np.ndarray:
        if self.kind == "log_huber":
            a = np.abs(r)
            d = self.delta
            return np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d)).sum(axis=axis)
        return (r * r).sum(axis=axis)

    def describe(self) -> str:
        return f"log_huber(delta={self.delta:g})" if self.kind == "log_huber" else self.kind
