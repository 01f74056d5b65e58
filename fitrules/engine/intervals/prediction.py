"""Prediction intervals with the form's misfit, assembled from the terms of a form's
leave-one-cell-out refits (a :class:`HeldOut`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import NoReturn

import numpy as np

from fitrules.base.errors import FitrulesError
from fitrules.base.limits import LEVEL
from fitrules.base.util import spread_unit
from fitrules.engine.intervals.design import design_axes, design_position, gaussian_weights
from fitrules.engine.intervals.extrapolation import (
    beyond_edge_terms,
    edge_growth,
    edge_misfit_shown,
    edge_step_variances,
    extrapolation_ratios,
    missed_power_deviation,
    missed_powers,
)
from fitrules.engine.intervals.misfit import (
    local_lean,
    local_misfit_var,
    local_roughness_var,
    neighbour_excess,
)
from fitrules.engine.intervals.noise import SeedNoise
from fitrules.engine.intervals.offset import (
    GIVEN_DF,
    NO_SHARED_IDS,
    POOL_METHOD,
    SeedOffset,
    offset_var_at,
)
from fitrules.model.compiled import CompiledForm, predict
from fitrules.model.forms import Form

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
    "uncertainty there); beyond the cells, each edge's one-step misfit from the form refitted"
    " without it, grown with the distance beyond; with one seed id in every cell where the "
    "cells show the form misses a power of a variable, at least the largest change the form "
    "refitted with a power they allow makes at the point; plus the seed noise of k new runs "
    "for their mean; a t quantile "
    "with n - p degrees of freedom; for a mean over new seed ids, plus the grid's seed "
    "offset (the effect its seed ids share, which the fit absorbed and no held-out cell "
    "shows) with a t quantile on the seed degrees of freedom, the two half-widths added in "
    "quadrature"
)


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
        return local_roughness_var(self._fit_residuals, self._weights(self._cells_X, loo=True))

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
        :func:`~fitrules.engine.intervals.design.design_axes`)."""
        return design_axes(self.X, self.form.bound_variables, self.ok)

    def _design_position(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """(m, d) each point's position in the design, in steps of one level (see
        :func:`~fitrules.engine.intervals.design.design_position`)."""
        return design_position(X, self.form.bound_variables, self._axes)

    # what depends on the cells alone is computed once, whatever the points asked about
    @cached_property
    def _cells_X(self) -> dict[str, np.ndarray]:
        return {k: v[self.ok] for k, v in self.X.items()}

    @cached_property
    def _cell_positions(self) -> np.ndarray:
        return self._design_position(self._cells_X)

    def _weights(self, X: dict[str, np.ndarray], loo: bool = False) -> np.ndarray:
        """(m, n) Gaussian weights of the fitted cells about each point, in design steps
        (``loo``: the points are the cells, each given no weight of its own)."""
        return gaussian_weights(self._design_position(X), self._cell_positions, loo)

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
        own = self._own_var()[self.ok]
        pos = self._design_position(X)
        return local_lean(self._weights(X), self._fit_residuals, own, pos, self._cell_positions)

    @cached_property
    def _edge_step_var(self) -> dict:
        """Per variable and edge, the misfit variance one step of extrapolation adds: the
        mean square of the edge cells' residuals when the form is fitted without them, less
        their own seed noise and the seed-noise share of the refit's own prediction variance
        there (never below 0). A wrong form shows here how fast its misfit grows past the
        cells it was fitted on, which the residuals at the cells cannot."""
        return edge_step_variances(self.edges, self._own_var())

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
        return beyond_edge_terms(
            pos, self._cell_positions, self.form.bound_variables, self.edges,
            self._edge_step_var, self._edge_growth(X), self._edge_misfit_shown,
        )  # fmt: skip

    def misfit_shown_beyond(self, X: dict[str, np.ndarray]) -> list[str]:
        """The variables in which the (first) point lies beyond an edge whose refit shows a
        misfit (:attr:`_edge_misfit_shown`): there the form is known to be wrong and its
        misfit is taken to grow as a missed curvature would."""
        pos = self._design_position(X)[0]
        cells = self._cell_positions
        lo, hi = cells.min(axis=0), cells.max(axis=0)
        shown = self._edge_misfit_shown
        return [v for j, v in enumerate(self.form.bound_variables)
                if (pos[j] < lo[j] and shown.get(v, (False, False))[0])
                or (pos[j] > hi[j] and shown.get(v, (False, False))[1])]  # fmt: skip

    @cached_property
    def _edge_misfit_shown(self) -> dict:
        """Per variable and edge, whether its refit shows a misfit beyond noise
        (:func:`~fitrules.engine.intervals.extrapolation.edge_misfit_shown`), on grids with
        one seed id in every cell only (:attr:`one_id`), the design the test was calibrated
        on by simulation (issue 64: a right form's edges shown in about one grid in ten). With
        repeats the refit's Jacobian variance understates its extrapolation error there, and
        the test showed a right form's edges in 2 of 5 small composition grids; those grids'
        intervals keep the edge term as it was."""
        if not self._single_id:  # (one id with its sd given: the same design)
            return {}
        return edge_misfit_shown(self.edges, self._own_var())

    @property
    def _single_id(self) -> bool:
        """One seed id in every cell (its sd given or not): the design the edge test and the
        missed-power test are for."""
        return self.one_id or (self.offset is not None and len(self.offset.seeds) == 1)

    @cached_property
    def _missed_powers(self) -> dict:
        """On grids with one seed id in every cell (:attr:`_single_id`; else none), per
        variable with three or more levels, none negative, the score test of a missed power
        on it (:func:`~fitrules.engine.intervals.extrapolation.missed_powers`) on the full
        fit's residuals at every cell."""
        if not self._single_id:
            return {}
        X = self._cells_X
        tested = [v for v in self.form.bound_variables
                  if len(np.unique(X[v])) >= 3 and np.all(X[v] >= 0)]  # fmt: skip
        return missed_powers(self.form, X, self.y[self.ok], self.constants, tested,
                             self.level, self.relative)  # fmt: skip

    def missed_power_terms(self, X: dict[str, np.ndarray]) -> tuple[np.ndarray, list]:
        """Variance at each point for the missed powers the cells show (the largest of
        :func:`~fitrules.engine.intervals.extrapolation.missed_power_deviation` over the
        variables whose test shows one, as a variance for a normal quantile), and per point
        those variables."""
        from scipy import stats

        n = len(next(iter(X.values())))
        half, which = np.zeros(n), [[] for _ in range(n)]
        shown = {v: t for v, t in self._missed_powers.items() if t[0]}
        for v, t in shown.items():
            h = missed_power_deviation(t, self.form, X, self.constants, v, self.relative)
            half = np.fmax(half, np.where(np.isfinite(h), h, 0.0))
            for i in range(n):
                which[i].append(v)
        return (half / stats.norm.ppf(0.5 + self.level / 2)) ** 2, which

    def beyond_part(self, X: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list]:
        """The part of each point's interval for the form's misfit beyond what its residuals
        about the point carry: (variance, degrees of freedom, variables whose missed power
        the cells show). The edges' own term (:meth:`edge_terms`, a t quantile on its few cells;
        0 inside the cells) or the deviation of a missed power the cells show
        (:meth:`missed_power_terms`, a normal quantile: its error is in it), whichever
        gives the wider half-width."""
        from scipy import stats

        edge, df_edge = self.edge_terms(X)
        power, which = self.missed_power_terms(X)
        q = stats.t.ppf(0.5 + self.level / 2, np.maximum(df_edge, 1))
        wider = stats.norm.ppf(0.5 + self.level / 2) ** 2 * power > q**2 * edge
        var = np.where(wider, power, edge)
        df = np.where(wider, GIVEN_DF, df_edge)
        return var, df, [w if v > 0 else [] for w, v in zip(which, power, strict=True)]

    def _edge_growth(self, X: dict[str, np.ndarray]) -> dict:
        """Per factorial variable, (low side, high side) of :func:`edge_growth` at each
        point: the full fit's change from the edge level to the point against its change
        across the last step inside (the point's other variables held)."""
        out = {}
        cells = self._cells_X
        for v, (_, levels, step) in zip(self.form.bound_variables, self._axes, strict=True):
            vals = np.unique(cells[v])
            if step is not None or len(vals) < 2:
                continue  # a scattered variable counts steps of its range already
            x = np.asarray(X[v], float)
            sides = []
            for edge, inner in ((vals[0], vals[1]), (vals[-1], vals[-2])):
                at = {k: np.asarray(a, float) for k, a in X.items()}
                f_point = predict(self.form, at, self.constants)
                at[v] = np.full_like(x, edge)
                f_edge = predict(self.form, at, self.constants)
                at[v] = np.full_like(x, inner)
                f_inner = predict(self.form, at, self.constants)
                sides.append(edge_growth(f_point - f_edge, f_edge - f_inner,
                                         self._scale(f_edge), self._scale(f_point)))  # fmt: skip
            out[v] = tuple(sides)
        return out

    def edge_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """The variance part of :meth:`edge_terms`."""
        return self.edge_terms(X)[0]

    def misfit_var(self, X: dict[str, np.ndarray]) -> np.ndarray:
        """The local misfit the lean leaves unexplained, at each point: each cell's residual
        predicted by its neighbours' lean (the cell left out), the squared miss less the
        seed noise both carry, averaged with the same weights about the point. Conservative
        between levels, where a point's nearest cells are closer than a cell's."""
        return local_misfit_var(self._weights(X), self._neighbour_excess)

    @cached_property
    def _neighbour_excess(self) -> np.ndarray:
        """Per cell, the squared miss of its residual predicted by its neighbours' lean,
        less the seed noise both carry (see :meth:`misfit_var`)."""
        own = self._own_var()[self.ok]
        return neighbour_excess(self._fit_residuals, own, self._weights(self._cells_X, loo=True))

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
            self._refuse_unbounded(X, point)
        extra = max(jack - comp["jackknife_var_at_cells"], 0.0)
        low, high, lean_var = (float(a[0]) for a in self.lean(X))
        lean = low if abs(low) > abs(high) else high
        misfit = float(self.misfit_var(X)[0])
        # the unexplained misfit, the lean's own noise and the constants' uncertainty there
        beyond = self.beyond_part(X)
        edge, df_edge, powers = float(beyond[0][0]), int(beyond[1][0]), beyond[2][0]
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
            "misfit_shown_beyond": self.misfit_shown_beyond(X),
            "misfit_power_shown": powers,
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

    def _refuse_unbounded(self, X: dict[str, np.ndarray], point: dict[str, float]) -> NoReturn:
        """Refuse a point where leave-one-cell-out refits predict no finite value."""
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
        if k >= FEW_IDS or self.offset.df >= GIVEN_DF:  # a given sd: more ids change nothing
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
        edge, df_edge, _ = self.beyond_part(X)
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
        return extrapolation_ratios(point, self.form.bound_variables, self.X)

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
                f"{len(self.offset.seeds)} ids, {self._offset_source()})"
                if self.offset is not None
                else f"; {NO_SHARED_IDS}, so the mean over new seed ids and at the grid's "
                "seed ids coincide"
                if self.offset_note == NO_SHARED_IDS
                else f"; {self.offset_note}"
            )
        )

    def _offset_source(self) -> str:
        """Where the seed offset's variance came from, in words."""
        if self.offset.df >= GIVEN_DF:
            return "its sd as the user gave it, taken as known: a normal quantile"
        pooled = " pooled with the slices named" if self.offset.method == POOL_METHOD else ""
        return f"t quantile on {self.offset.df} degrees of freedom{pooled}"

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
