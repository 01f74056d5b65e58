"""The seed noise of one run, pooled over the cells, and the cells as a ``log_huber`` fit
reads them (each the biweight location of its runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fitrules.engine.fit import Objective
from fitrules.model.grids import Cells, Grid

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
