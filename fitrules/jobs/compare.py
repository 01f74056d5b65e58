"""Splits x forms -> a tidy table of held-out errors, per-form summaries and paired verdicts.

What a verdict may claim: random splits of one grid share cells, so they are not independent
samples. Paired verdicts over random splits use the corrected resampled t test (Nadeau and
Bengio, 2003), whose p-value does not shrink as splits are added; counts of splits won are
descriptive. Structured protocols are tested over their held-out groups, or say that too few
groups exist for any test to reject. Summaries are robust (median, trimmed mean, p90), and
fits that the wild-extrapolation guard names are shown with and without.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules import __version__
from fitrules.base.errors import FormError, SplitError
from fitrules.base.limits import (
    HELDOUT_WEIGHTS,
    LEVEL,
    OBJECTIVES,
    SEED_PROTOCOLS,
    VERDICT_TRAIN_FRAC,
    WEIGHTS,
    check_memory,
)
from fitrules.base.results import Views
from fitrules.base.util import json_ready
from fitrules.engine.fit import (
    WEIGHT_KEY,
    FitOptions,
    FitResult,
    Objective,
    cell_weights,
    fit_all_cells,
    fit_memory,
    fit_splits,
)
from fitrules.engine.guard import GuardOptions, check_fits
from fitrules.engine.intervals import JacobianUncertainty, jacobian_uncertainty
from fitrules.engine.metrics import box_weights, heldout_errors, robust_summary, weighted_mean
from fitrules.engine.stats import (
    c4,
    cells_verdict,
    grid_seed_effect,
    holm,
    paired_verdict,
    units_verdict,
)
from fitrules.model.compiled import predict
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import RandomSplit
from fitrules.views.text import conclusion, rank_value, verdict_of

# Train fraction of the verdict protocol. Random thirds describe what a third of the grid
# predicts, but the corrected t test over them has almost no power on a 20-cell grid (its
# n_test/n_train = 2 term overstates the variance 4 to 9 times); at 0.9 the same test keeps
# its level and has power at 2 to 3x error ratios (benchmarks/bench_calibration.py).


class SummaryTable(pd.DataFrame):
    """:attr:`Comparison.summary`: the per-form table, a DataFrame; called,
    ``c.summary()``, the whole comparison in words (statsmodels' ``results.summary()``).

    Anything computed from it (a selection, a sort) is a plain DataFrame.
    """

    _metadata = ["_comparison"]

    @property
    def _constructor(self):
        return pd.DataFrame

    def __call__(self) -> str:
        from fitrules.base.util import Text

        owner = getattr(self, "_comparison", None)
        if owner is None:
            raise TypeError("this summary table belongs to no comparison")
        return Text(str(owner))


@dataclass
class Comparison(Views):
    """The outcome of comparing forms on paired splits.

    Attributes
    ----------
    results : DataFrame
        One row per (split, form): held-out errors, constants, condition number, training
        cells, degenerate reasons and the guard's verdict.
    summary : DataFrame
        One row per form: split counts, robust percentiles of held-out error, with and without
        the fits the guard names. Called, ``c.summary()`` is the whole comparison in words
        (what ``print(c)`` and the command line print).
    paired : DataFrame
        One row per pair of forms: descriptive counts, the test, Holm-adjusted p and the
        ``verdict`` in words ("composition predicts better", "not distinguishable", "no
        test").
    forms : list of Form
        The forms compared, bound to the grid's columns.
    cells : Cells
        The grid's cells the forms were fitted on.
    full_fits : dict of str to FitResult
        Each form fitted on every cell.
    data : dict
        Where the cells came from (path, sha256, filters, counts).
    settings : dict
        The comparison's settings (splits, seed, objective, guard, ...).
    reasons : dict of str to dict
        Per form, why splits were flagged degenerate, with counts.
    cell_errors : DataFrame or None
        One row per (cell, form): mean held-out error over the splits that held the cell
        out, so a reader can see which cells decide a verdict.
    wild : dict of str to list of str
        Per form, the splits whose fit the wild-extrapolation guard named, and why.
    warnings : list of str
        One-line warnings about the comparison.
    unit : str or None
        The metric's unit, if known.
    tuning : Tuning or None
        The :class:`fitrules.Tuning` the grid came from, if it was tuned.
    full_uncertainty : dict of str to JacobianUncertainty
        Per form, the standard errors of its full fit's constants.
    verdict_results : DataFrame or None
        The rows the paired tests are made on, one per (split, form): ``results`` unless
        the verdict protocol has splits of its own.
    seed_effect : dict or None
        A per-seed effect shared across cells, if measurable.
    conclusion : list of str
        The answer in at most three lines.
    ranking : DataFrame
        The summary ranked by median held-out error.
    """

    results: pd.DataFrame
    summary: pd.DataFrame
    paired: pd.DataFrame
    forms: list[Form]
    cells: Cells
    full_fits: dict[str, FitResult]
    data: dict
    settings: dict
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    cell_errors: pd.DataFrame | None = None
    wild: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unit: str | None = None
    tuning: Any = None  # the fitrules.jobs.tune.Tuning the grid came from, if it was tuned
    full_uncertainty: dict[str, JacobianUncertainty] = field(default_factory=dict)
    verdict_results: pd.DataFrame | None = None  # per (split, form) of the verdict protocol
    seed_effect: dict | None = None  # a per-seed effect shared across cells, if measurable

    def __post_init__(self) -> None:
        table = SummaryTable(self.summary)
        object.__setattr__(table, "_comparison", self)
        self.summary = table

    @property
    def conclusion(self) -> list[str]:
        """The answer in at most three lines (the first lines of ``print(c)``, of the
        notebook view and of report.md): the form with the lowest median held-out error,
        the rivals it beats with the corrected paired verdict, those it cannot be told
        apart from."""
        return conclusion(self.summary.to_dict("records"), self.paired.to_dict("records"))

    @property
    def ranking(self) -> pd.DataFrame:
        """:attr:`summary` ranked by median held-out error (what every view shows)."""
        return ranked(pd.DataFrame(self.summary))

    def to_dict(self) -> dict:
        """Everything, JSON-ready (NaN and infinities become null)."""
        out = json_ready(
            {
                "fitrules_version": __version__,
                "data": self.data,
                "settings": self.settings,
                "forms": [f.to_dict() for f in self.forms],
                "summary": self.summary.to_dict("records"),
                "paired": self.paired.to_dict("records"),
                "warnings": self.warnings,
                "degenerate_reasons": self.reasons,
                "wild_fits": self.wild,
                "full_fit": {
                    name: {
                        "constants": r.constants,
                        "train_objective": r.objective,
                        "cond": r.cond,
                        "degenerate": r.degenerate,
                        "reasons": r.reasons,
                        **self._uncertainty(name),
                    }
                    for name, r in self.full_fits.items()
                },
                "cells": self.cells.table.to_dict("records"),
                "cell_errors": (
                    self.cell_errors.to_dict("records") if self.cell_errors is not None else []
                ),
                "results": self.results.to_dict("records"),
                "verdict_results": (
                    self.verdict_results[VERDICT_COLUMNS].to_dict("records")
                    if self.verdict_results is not None
                    else []
                ),
                "seed_effect": self.seed_effect,
            }
        )
        if self.tuning is not None:
            out["tuning"] = self.tuning.to_dict()
        return out

    def _uncertainty(self, name: str) -> dict:
        u = self.full_uncertainty.get(name)
        if u is None:
            return {}
        top = u.strongest(1)
        return {
            "stderr": u.stderr if u.ok else None,
            "strongest_correlation": list(top[0]) if u.ok and top else None,
            "uncertainty_note": u.note,
        }

    # ------------------------------------------------------------ views
    def __repr__(self) -> str:
        forms = ", ".join(f.name for f in self.forms)
        return (
            f"Comparison({forms}: {self.settings['protocol']}, {self.settings['n_splits']} "
            f"splits, {self.data['cells']} cells)"
        )

    def text(self) -> str:
        from fitrules.views.text import render_comparison

        return render_comparison(self)

    def html(self) -> str:
        from fitrules.views.html import comparison_html

        return comparison_html(self)

    def report(
        self,
        target: str | Path,
        force: bool = False,
        command: str = "",
        figure_format: str | Sequence[str] | None = None,
        labels: str | dict | None = None,
    ) -> Path:
        """Write a report directory (report.md, figures, results.json, splits.csv); figures
        as PNG and, with ``figure_format="png,svg"`` (or pdf), as vector files beside them;
        ``labels`` names columns on the axes (``{"val/loss": "validation loss"}``).

        Parameters
        ----------
        target : str or path
            The report directory to write; it must not exist unless ``force``.
        force : bool, optional
            Replace an existing directory (swapped in one step once the new one is written).
        command : str, optional
            The command that made the result, written into the report.
        figure_format : str or sequence of str, optional
            ``"png"`` (default), or also vector files, e.g. ``"png,svg"`` or ``["png", "pdf"]``.
        labels : str or dict, optional
            Names of columns on the axes, ``{"val/loss": "validation loss"}`` or
            ``"val/loss=validation loss"``.

        Returns
        -------
        pathlib.Path
            The report directory written.
        """
        from fitrules.base.errors import report_parameter
        from fitrules.base.outputs import check_result_output, inputs_of
        from fitrules.views.figures import axis_labels, figure_formats
        from fitrules.views.markdown import comparison_report

        check_result_output(target, inputs_of(self), "target", "dir")
        with report_parameter("target"):
            with figure_formats(figure_format), axis_labels(labels):
                return comparison_report(
                    self, self.to_dict(), Path(target), command, force, self.tuning
                )

    def form(self, name: str) -> Form:
        """The (bound) form called ``name``.

        Parameters
        ----------
        name : str
            The name of a form of this comparison.

        Returns
        -------
        Form
            The form, bound to the grid's columns.

        Raises
        ------
        FormError
            For a name that is not one of the comparison's forms.
        """
        for f in self.forms:
            if f.name == name:
                return f
        raise FormError(f"no form {name!r} in this comparison; forms: "
                        + ", ".join(f.name for f in self.forms))  # fmt: skip

    def plot_heldout(self, ax=None, labels=None, units=None):
        """Empirical CDF of every form's held-out error; returns the matplotlib Axes.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Names for columns on the axes, ``{"N": "parameters"}`` or
            ``"N=parameters,D=tokens"``.
        units : dict or str, optional
            Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views import figures

        with figures.axis_labels(labels, units):
            return figures.heldout_ecdf(self, ax)

    def plot_paired(self, a: str, b: str, ax=None, labels=None, units=None):
        """a's held-out error against b's, one point per split valid for both.

        Parameters
        ----------
        a : str
            The form on the horizontal axis.
        b : str
            The form on the vertical axis.
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Names for columns on the axes, ``{"N": "parameters"}`` or
            ``"N=parameters,D=tokens"``.
        units : dict or str, optional
            Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views import figures

        self.form(a), self.form(b)
        with figures.axis_labels(labels, units):
            return figures.paired_scatter(self, a, b, ax)

    def plot_fit(self, form: str, ax=None, labels=None, units=None):
        """``form`` fitted on all cells: observed against predicted.

        Parameters
        ----------
        form : str
            The name of the form.
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Names for columns on the axes, ``{"N": "parameters"}`` or
            ``"N=parameters,D=tokens"``.
        units : dict or str, optional
            Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views import figures

        f = self.form(form)
        with figures.axis_labels(labels, units):
            return figures.observed_vs_predicted(
                self.cells, f, self.full_fits[form].constants, self.unit, ax
            )

    def plot_residuals(
        self,
        x: str | None = None,
        forms: Sequence[str] | None = None,
        ax=None,
        labels=None,
        units=None,
    ):
        """Every form's (or ``forms``') full-grid residuals against the variable ``x``.

        Parameters
        ----------
        x : str, optional
            A variable of the forms (default: the first).
        forms : sequence of str, optional
            The forms drawn (default: every form).
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Names for columns on the axes, ``{"N": "parameters"}`` or
            ``"N=parameters,D=tokens"``.
        units : dict or str, optional
            Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views import figures

        x = x or self.cells.variables[0]
        if x not in self.cells.variables:
            raise FormError(f"{x!r} is not a variable of these forms: "
                            + ", ".join(self.cells.variables))  # fmt: skip
        chosen = [self.form(n) for n in forms] if forms else self.forms
        fits = [(f, self.full_fits[f.name].constants) for f in chosen]
        with figures.axis_labels(labels, units):
            return figures.residuals_vs(self.cells, fits, x, ax)

    def plot_curves(self, form: str, x: str | None = None, ax=None, labels=None, units=None):
        """The data and ``form`` fitted on all cells, against ``x`` (default: its first
        variable).

        Parameters
        ----------
        form : str
            The name of the form.
        x : str, optional
            A variable of the form (default: its first).
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Names for columns on the axes, ``{"N": "parameters"}`` or
            ``"N=parameters,D=tokens"``.
        units : dict or str, optional
            Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views import figures

        f = self.form(form)
        x = x or f.bound_variables[0]
        if x not in f.bound_variables:
            raise FormError(f"form {form!r} reads {', '.join(f.bound_variables)}, not {x!r}")
        with figures.axis_labels(labels, units):
            return figures.curves_vs(
                self.cells, f, self.full_fits[form].constants, x, self.unit, ax
            )


def _reason_key(reason: str) -> str:
    """Group reasons that differ only in numbers after a colon or in parentheses."""
    return reason.split(" (")[0]


def noise_floor(
    cells: Cells, masks: np.ndarray, weights: np.ndarray | None = None
) -> tuple[list[float | None], int]:
    """Per split, the held-out error of a predictor that knew every cell's true mean.

    Such a predictor still misses each cell's seed mean by its sampling error, whose
    expected absolute size is ``sigma / sqrt(n) * sqrt(2/pi)``. sigma is estimated by
    ``s / c4(n)``: the sample standard deviation of n seeds is biased low (E[s] = 0.886 sigma
    at n = 3), ``c4`` removes that bias for normal seed noise. The floor is the mean over the
    held-out cells, relative to the cell value, in percent. Cells with one seed have no
    estimate and are left out (and counted). ``weights``: each cell's weight in the mean, as
    in the held-out error (:func:`fitrules.engine.metrics.box_weights`).
    """
    t = cells.table
    n = t["n_seeds"].to_numpy(float)
    sigma = t["std"].to_numpy(float) / c4(n)
    rel = sigma / np.sqrt(n) * np.sqrt(2 / np.pi) / t["value"].abs().to_numpy(float)
    known = np.isfinite(rel)
    out: list[float | None] = []
    for mask in masks:
        test = ~mask & known
        out.append(
            100 * weighted_mean(rel[test], None if weights is None else weights[test])
            if test.any()
            else None
        )
    return out, int((~known).sum())


def _unfitted_levels(form: Form, X, mask: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Per held-out cell: its level of a per-level column has no training cell."""
    out = np.zeros(int(test.sum()), bool)
    for col in form.levels or {}:
        out |= ~np.isin(X[col][test], np.unique(X[col][mask]))
    return out


def compare(
    grid: Grid,
    forms: Sequence[Form],
    splitter=None,
    objective: Objective | None = None,
    keep_degenerate: bool = False,
    options: FitOptions | None = None,
    on_progress: Callable[[int], None] | None = None,
    test_grid: Grid | None = None,
    guard: GuardOptions | None = None,
    level: float = LEVEL,
    pairs: Sequence[tuple[str, str]] | None = None,
    verdict_train_frac: float = VERDICT_TRAIN_FRAC,
    weights: str = WEIGHTS[0],
    seeds: str = SEED_PROTOCOLS[0],
    heldout_weights: str = HELDOUT_WEIGHTS[0],
) -> Comparison:
    """Fit every form on the same splits of ``grid``'s cells and score the held-out cells.

    Parameters
    ----------
    grid : the checked results table.
    forms : candidate forms; bound to the grid's columns here.
    splitter : the split protocol (default: 300 random thirds, seed 0); see
        :mod:`fitrules.model.splits`.
    objective : training objective (default relative least squares).
    keep_degenerate : keep flagged (split, form) pairs in summaries and paired verdicts.
    on_progress : called with the number of splits finished, for progress bars.
    test_grid : for the transfer protocol, the grid whose cells are scored.
    guard : thresholds of the wild-extrapolation guard (see :mod:`fitrules.engine.guard`).
    level : confidence level of the paired intervals.
    pairs : the pairs of forms to test (default: every pair); Holm's adjustment runs over
        these only. See :func:`family`.
    verdict_train_frac : with random splits, the train fraction of the verdict protocol: the
        paired tests are made on ``splitter.n_splits`` random splits (same seed) that fit this
        fraction of the cells, while summaries and counts of splits won describe
        ``splitter``'s splits. A ``splitter`` whose train fraction is at least this large is
        its own verdict protocol.
    weights : ``cells`` (each cell once), ``runs`` or ``inverse-variance``: how each
        cell's squared residual counts in the training objective (see
        :func:`fitrules.engine.fit.cell_weights`). Held-out error stays the mean over
        held-out cells.
    seeds : the descriptive splits' protocol: ``cells`` (default: every run of the training
        and held-out cells, as the verdict protocol always does) or ``cells-and-seeds``
        (seed ids held out too, in folds, split s holding out fold s mod folds, when seed
        ids are shared across cells: the held-out error is then put on the scale of the mean
        of new runs at fresh seed ids; see :class:`fitrules.model.splits.SeedHoldout`).
    heldout_weights : ``box`` (default: each held-out cell by its share of the grid's box,
        :func:`fitrules.engine.metrics.box_weights`) or ``equal``: how a split's held-out
        cells count in its error, its noise floor and the verdicts.

    Raises
    ------
    FormError, GridError, SplitError
        For forms the grid cannot support or splits that cannot be made.
    """
    splitter = splitter or RandomSplit()
    objective = objective or Objective()
    guard = guard or GuardOptions()
    bound, variables, cells = _bind_and_cells(grid, forms, test_grid, objective)
    n = len(cells)
    w = cell_weights(weights, cells.table, objective)
    masks, labels = _descriptive_splits(splitter, cells, bound)
    wanted = family([f.name for f in bound], pairs)
    random = isinstance(splitter, RandomSplit)
    vsplit = verdict_splitter(splitter, n, verdict_train_frac) if random else None
    _check_compare_memory(bound, n, masks, vsplit, options, objective)
    hw = _heldout_weights(cells, heldout_weights)
    floor, no_noise = noise_floor(cells, masks, hw)
    held, seeds_note = (
        (None, "cells") if test_grid is not None else _held_seeds(grid, cells, seeds, splitter)
    )
    # the weights ride with the cells into every fit (fit.WEIGHT_KEY)
    X = cells.X if w is None else {**cells.X, WEIGHT_KEY: w}
    fitting = _Fitting(X, cells.y, objective, options, guard, on_progress, keep_degenerate, hw)
    results, full, unc, at_cell = _score_forms(bound, cells, masks, labels, floor, held, fitting)
    loo = _leaves_one_out(splitter, vsplit, n)
    verdict = _verdict_results(results, bound, vsplit, loo, n, fitting)
    summary, reasons, wild = _summarise(results, bound, keep_degenerate)
    cell_errors = _cell_table(cells, at_cell)
    paired = _paired(results, verdict, wanted, random, level, cell_errors, loo)
    settings = _settings(
        fitting,
        splitter,
        vsplit,
        verdict,
        n,
        loo,
        seeds_note,
        weights,
        level,
        wanted,
        pairs,
        heldout_weights,
    )
    return Comparison(
        results,
        summary,
        paired,
        bound,
        cells,
        full,
        _data_block(grid, test_grid, cells, variables, no_noise),
        settings,
        reasons,
        cell_errors,
        wild,
        _notes(summary, reasons, len(masks), bound),
        grid.unit,
        full_uncertainty=unc,
        verdict_results=verdict,
        seed_effect=grid_seed_effect(grid, variables) if test_grid is None else None,
    )


def _heldout_weights(cells: Cells, kind: str) -> np.ndarray:
    """Each cell's weight in a held-out error; under transfer, the box is the scored grid's."""
    X = {v: np.asarray(a) for v, a in cells.X.items()}
    if "_source" not in cells.table:
        return box_weights(X, kind)
    scored = (cells.table["_source"] == "test").to_numpy()
    w = np.ones(len(cells))
    w[scored] = box_weights({v: a[scored] for v, a in X.items()}, kind)
    return w


def _bind_and_cells(
    grid: Grid, forms: Sequence[Form], test_grid: Grid | None, objective: Objective
) -> tuple[list[Form], list[str], Cells]:
    """The forms bound to the grid's columns, the variables they read, and the cells."""
    bound = [f.bind(grid.columns, grid.runs) for f in forms]
    if test_grid is not None:
        bound = [f.bind(test_grid.columns, test_grid.runs) for f in bound]
    variables = list(dict.fromkeys(v for f in bound for v in f.bound_variables))
    positive = objective.kind != "abs_ls"
    cells = grid.cells(variables, positive)
    if test_grid is not None:  # transfer: cells of both grids, marked by where they come from
        other = test_grid.cells(variables, positive)
        table = pd.concat(
            [cells.table.assign(_source="fit"), other.table.assign(_source="test")],
            ignore_index=True,
        )
        cells = Cells(table, cells.variables, cells.metric, cells.units)
    return bound, variables, cells


def _descriptive_splits(splitter, cells: Cells, bound: list[Form]) -> tuple[np.ndarray, list]:
    """The splits' training masks and labels; a form with more constants than a split fits
    is refused."""
    n = len(cells)
    random = isinstance(splitter, RandomSplit)
    if random:
        splitter.check(n)
    masks = splitter.masks_for(cells.table)
    labels = splitter.labels(cells.table)
    n_train = int(masks.sum(axis=1).min())
    for f in bound:
        p = len(f.constants)
        if n_train < p:
            if random and p >= n:
                raise SplitError(
                    f"form {f.name!r} has {p} constants but the grid has only {n} cells, and "
                    f"each split must hold at least one out; drop the form or use a grid "
                    f"with more than {p} cells"
                )
            if random:
                need = math.ceil(1000 * (p - 0.5) / n) / 1000  # n_train rounds frac * n
                raise SplitError(
                    f"form {f.name!r} has {p} constants but each split fits only "
                    f"{n_train} of {n} cells; raise --train-frac so that at least {p} "
                    f"cells are fitted (--train-frac {need:g} or more) or drop the form"
                )
            raise SplitError(
                f"form {f.name!r} has {p} constants but {labels[0]!r} fits only "
                f"{n_train} cells; drop the form or choose another --split"
            )
    return masks, labels


def _check_compare_memory(
    bound: list[Form],
    n: int,
    masks: np.ndarray,
    vsplit: RandomSplit | None,
    options: FitOptions | None,
    objective: Objective,
) -> None:
    """Refuse a comparison whose fits and rows would not fit in memory."""
    check_memory(
        compare_memory(
            bound,
            n,
            len(masks) * (2 if vsplit is not None else 1),
            options,
            max(int(masks.sum(axis=1).max(initial=0)), vsplit.n_train(n) if vsplit else 0),
            objective.kind,
        ),
        f"comparing {len(bound)} forms on {len(masks):,} splits of {n:,} cells",
        "use fewer --splits or forms",
    )


@dataclass(frozen=True)
class _Fitting:
    """What every fit of one comparison shares: the cells' arrays, objective, options, guard."""

    X: dict
    y: np.ndarray
    objective: Objective
    options: FitOptions | None
    guard: GuardOptions
    on_progress: Callable[[int], None] | None
    keep_degenerate: bool
    heldout: np.ndarray | None = None  # each cell's weight in a held-out error (box_weights)


def _score_forms(
    bound: list[Form],
    cells: Cells,
    masks: np.ndarray,
    labels: list,
    floor: list,
    held: dict | None,
    fitting: _Fitting,
) -> tuple[pd.DataFrame, dict, dict, dict]:
    """Fit each form on every split and score the held-out cells; fit it on all cells too.

    Returns the (split, form) rows, the full fits, their uncertainty and, per form, each
    used split's error at each cell it held out.
    """
    X, y, objective, options = fitting.X, fitting.y, fitting.objective, fitting.options
    n = len(cells)
    cell_labels = [cells.label(i) for i in range(n)]
    rows: list[dict] = []
    full = {}
    unc = {}
    # per form, each used split's error at each cell it held out (NaN elsewhere)
    at_cell = {f.name: np.full((len(masks), n), np.nan) for f in bound}
    for f in bound:
        first = len(rows)
        fits = _fit_descriptive(f, masks, held, fitting)
        guarded = check_fits(f, X, y, masks, fits, objective, fitting.guard, cell_labels)
        for s, (mask, r, g) in enumerate(zip(masks, fits, guarded, strict=True)):
            y_s = y if held is None else held["folds"][s % len(held["folds"])]["y_test"]
            rows.append(
                _split_row(f, s, labels[s], floor[s], mask, r, g, y_s, held, at_cell, fitting)
            )
        if held is not None:
            _rescale_rows(rows[first:], at_cell[f.name], held["excess"])
        # never worse on all cells than a split's fit there (the splits explore other basins)
        full[f.name] = fit_all_cells(
            f, X, y, objective, options, candidates=[r.constants for r in fits]
        )
        unc[f.name] = jacobian_uncertainty(f, X, y, full[f.name].constants, objective)
    results = pd.DataFrame(rows).drop(columns=["_mse"], errors="ignore")
    usable = results["heldout_error_pct"].notna()
    if not fitting.keep_degenerate:
        usable &= ~results["degenerate"]
    results["used"] = usable
    return results, full, unc, at_cell


def _fit_descriptive(f: Form, masks: np.ndarray, held: dict | None, fitting: _Fitting) -> list:
    """One form's fits on the descriptive splits."""
    X, objective, options = fitting.X, fitting.objective, fitting.options
    if held is None:
        return fit_splits(f, X, fitting.y, masks, objective, options, fitting.on_progress)
    # split s fitted on the runs outside its seed fold, scored on the fold's
    fits = [None] * len(masks)
    F = len(held["folds"])
    for k, fold in enumerate(held["folds"]):
        idx = np.arange(k, len(masks), F)
        yk = fold["y_fit"]
        fk = fit_splits(f, X, yk, masks[idx], objective, options)
        for i, r in zip(idx, fk, strict=True):
            fits[i] = r
    if fitting.on_progress is not None:
        fitting.on_progress(len(masks))
    return fits


def _split_row(f, s, label, floor, mask, r, g, y_s, held, at_cell, fitting: _Fitting) -> dict:
    """One (split, form) row: held-out errors, the fit's diagnostics, the guard's verdict."""
    X = fitting.X
    test = ~mask
    split_reasons = list(r.reasons)
    if np.isfinite(r.objective):
        pred = predict(f, {v: a[test] for v, a in X.items()}, r.constants)
    else:
        pred = np.full(test.sum(), np.nan)
    unfitted = _unfitted_levels(f, X, mask, test)
    if unfitted.any():  # a level with no training cell has no fitted constant
        pred = np.where(unfitted, np.nan, pred)
    hw = None if fitting.heldout is None else fitting.heldout[test]
    errs = heldout_errors(y_s[test], pred, hw) if np.isfinite(pred).all() else None
    if errs is None or not all(np.isfinite(v) for v in errs.values()):
        # a prediction that is not finite, or so large that its error overflows
        if not unfitted.any():  # else the split already names the unfitted level
            split_reasons.append("prediction is not finite on held-out cells")
        errs = {"heldout_error_pct": np.nan, "worst_cell_pct": np.nan, "rmse": np.nan}
    elif fitting.keep_degenerate or not split_reasons:
        at_cell[f.name][s, test] = 100 * np.abs(pred - y_s[test]) / np.abs(y_s[test])
    return {
        "split": s,
        "split_label": label,
        "form": f.name,
        **errs,
        "noise_floor_pct": floor,
        "train_objective": r.objective,
        "cond": r.cond,
        "n_train": int(mask.sum()),
        "n_test": int(test.sum()),
        "train_cells": np.flatnonzero(mask).tolist(),
        "degenerate": bool(split_reasons),
        "reasons": split_reasons,
        "wild": g.wild,
        "span_ratio": g.span_ratio,
        "max_rel_se": g.max_rel_se,
        "excursion_pct": g.excursion_pct,
        "guard_reasons": list(g.reasons),
        "constants": r.constants,
        **({} if held is None else {"_mse": weighted_mean(
            ((pred - y_s[test]) / y_s[test]) ** 2, hw) if errs["rmse"] == errs["rmse"]
            else np.nan}),
    }  # fmt: skip


def _leaves_one_out(splitter, vsplit: RandomSplit | None, n: int) -> bool:
    """Whether the verdict protocol holds out one cell: it then has only n distinct splits,
    each cell held out once, and the test is made over the cells (stats.cells_verdict)."""
    return isinstance(splitter, RandomSplit) and n - (vsplit or splitter).n_train(n) == 1


def _verdict_results(
    results: pd.DataFrame,
    bound: list[Form],
    vsplit: RandomSplit | None,
    loo: bool,
    n: int,
    fitting: _Fitting,
) -> pd.DataFrame:
    """The rows the paired tests are made on: the descriptive ones, unless the verdict
    protocol has splits of its own."""
    if vsplit is None and not loo:
        return results
    vmasks = ~np.eye(n, dtype=bool) if loo else vsplit.masks(n)
    X, y, objective, options = fitting.X, fitting.y, fitting.objective, fitting.options
    return pd.concat(
        [
            _verdict_rows(
                f,
                X,
                y,
                vmasks,
                objective,
                options,
                fitting.on_progress,
                fitting.keep_degenerate,
                fitting.heldout,
            )
            for f in bound
        ],
        ignore_index=True,
    )


def _data_block(
    grid: Grid, test_grid: Grid | None, cells: Cells, variables: list[str], no_noise: int
) -> dict:
    """What the comparison was made on: the grid (and the test grid), its cells, variables."""
    n = len(cells)
    data = {
        "path": grid.label,
        "sha256": grid.sha256,
        "runs": int(len(grid.runs)),
        "cells": int(n if test_grid is None else (cells.table["_source"] == "fit").sum()),
        "metric": grid.metric,
        "where": list(grid.where),
        "derive": list(grid.derive),
        "excluded": grid.summary()["excluded"],
        **grid.handling(variables),
        "variables": variables,
        "cells_without_noise_estimate": no_noise,
        "unit": grid.unit,
    }
    if test_grid is not None:
        data["test"] = {
            "path": test_grid.label,
            "sha256": test_grid.sha256,
            "runs": int(len(test_grid.runs)),
            "cells": int((cells.table["_source"] == "test").sum()),
        }
    return data


def _settings(
    fitting: _Fitting,
    splitter,
    vsplit: RandomSplit | None,
    verdict: pd.DataFrame,
    n: int,
    loo: bool,
    seeds_note: str,
    weights: str,
    level: float,
    wanted: list[tuple[str, str]],
    pairs: Sequence[tuple[str, str]] | None,
    heldout_weights: str = HELDOUT_WEIGHTS[0],
) -> dict:
    """How the comparison was made: protocols, objective, guard, test and family of pairs."""
    random = isinstance(splitter, RandomSplit)
    return {
        **splitter.describe(),
        "objective": fitting.objective.describe(),
        "weights": weights,
        "heldout_weights": heldout_weights,
        "keep_degenerate": bool(fitting.keep_degenerate),
        "splits_used": "all" if fitting.keep_degenerate else "valid",
        "guard": fitting.guard.describe(),
        "level": level,
        "test": (
            "exact sign-flip over the held-out cells on log error ratios (the verdict "
            "protocol leaves one cell out), Holm across pairs"
            if loo
            else "corrected resampled t (Nadeau-Bengio 2003) on log error ratios, Holm across pairs"
            if random
            else "exact sign-flip over held-out groups where enough exist, Holm across pairs"
        ),
        "descriptive_protocol": splitter.describe() | {"held_out": seeds_note},
        "verdict_protocol": (
            {"kind": "leave-one-cell-out", "n_splits": n, "n_train": n - 1}
            if loo
            else (vsplit or splitter).describe() | {"n_train": int(verdict["n_train"].min())}
            if random
            else splitter.describe()
        ),
        "comparisons": len(wanted),
        "family": "all pairs" if pairs is None else "named pairs",
    }


def _notes(summary: pd.DataFrame, reasons: dict, n_splits: int, bound: list[Form]) -> list[str]:
    """The comparison's warnings: forms most of whose splits were set aside, searched forms."""
    return set_aside_warnings(summary, reasons, n_splits) + [
        f"{f.name} came from a search ({f.origin}); if it was searched on these cells, its "
        "comparison here is not independent of that choice: the search's own outer error is "
        "the honest estimate"
        for f in bound
        if f.origin
    ]


def _held_seeds(grid: Grid, cells: Cells, seeds: str, splitter) -> tuple[dict | None, str]:
    """The seed folds of the cells-and-seeds protocol (None for cells), and its name."""
    from fitrules.engine.intervals import NO_SHARED_IDS, no_offset_reason, seed_offset
    from fitrules.model.splits import SeedHoldout, seed_folds

    if seeds not in SEED_PROTOCOLS:
        raise SplitError(f"--seeds {seeds!r} is unknown; allowed: {', '.join(SEED_PROTOCOLS)}")
    cells_name = "cells: every run of the training and held-out cells"
    if seeds == "cells":
        return None, cells_name
    off = seed_offset(grid, cells)
    if off is None:
        why = no_offset_reason(grid, cells)
        tail = ": nothing to hold out" if why == NO_SHARED_IDS else ""
        return None, f"{cells_name} ({why}{tail})"
    held = seed_folds(grid, cells, off, SeedHoldout(seed=getattr(splitter, "seed", 0)))
    if held is None:
        return None, cells_name + " (seed ids could not be held out: a cell lacks runs at them)"
    n_folds, t, k = len(held["folds"]), held["t"], held["k"]
    return held, (
        f"cells and seeds: {n_folds} folds of {t} of {len(off.seeds)} seed ids, split s "
        f"fitted on the runs outside fold s mod {n_folds} and scored on the fold's; errors "
        f"rescaled to the mean of {k} new runs at fresh seed ids"
    )


def _rescale_rows(rows: list[dict], at_cell: np.ndarray, excess: float) -> None:
    """Take the expected excess off one form's held-out errors, by one factor from their
    pooled mean square (:meth:`fitrules.model.splits.SeedHoldout.rescale`)."""
    from fitrules.model.splits import SeedHoldout

    mse = np.array([r.get("_mse", np.nan) for r in rows], float)
    if not np.isfinite(mse).any():
        return
    factor = float(SeedHoldout.rescale(float(np.nanmean(mse)), excess))
    for r in rows:
        for key in ("heldout_error_pct", "worst_cell_pct", "rmse"):
            r[key] = r[key] * factor
    at_cell *= factor


def verdict_splitter(splitter: RandomSplit, n_cells: int, train_frac: float) -> RandomSplit | None:
    """The random splits the paired tests are made on, or None when ``splitter`` is one.

    Same number of splits and seed as ``splitter``, fitting ``train_frac`` of the cells (at
    least one cell held out).
    """
    check_verdict_train_frac(train_frac)
    if splitter.train_frac >= train_frac:
        return None
    k = min(int(np.floor(train_frac * n_cells + 0.5)), n_cells - 1)
    if k <= splitter.n_train(n_cells):
        return None
    return RandomSplit(splitter.n_splits, k / n_cells, splitter.seed)


def check_verdict_train_frac(train_frac: float) -> None:
    """Refuse a verdict train fraction outside (0, 1) with :class:`SplitError`."""
    ok = isinstance(train_frac, int | float) and not isinstance(train_frac, bool)
    if not (ok and 0 < train_frac < 1):
        raise SplitError(f"--verdict-train-frac {train_frac!r}: must be in (0, 1), e.g. 0.9")


def family(
    names: Sequence[str], pairs: Sequence[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """The pairs of forms tested, in the order the forms were given.

    ``None`` means every pair. Each named pair must be two different forms of ``names``;
    a pair named twice (either way round) counts once.

    Raises
    ------
    FormError
        For a pair naming a form not compared, or a form paired with itself.
    """
    if pairs is None:
        return list(itertools.combinations(names, 2))
    out: list[tuple[str, str]] = []
    for a, b in pairs:
        for x in (a, b):
            if x not in names:
                raise FormError(
                    f"pair {a}:{b}: no form {x!r} in this comparison; forms: {', '.join(names)}"
                )
        if a == b:
            raise FormError(f"pair {a}:{b}: a form cannot be compared with itself")
        if (a, b) not in out and (b, a) not in out:
            out.append((a, b))
    if not out:
        raise FormError("no pair of forms to compare: name at least one pair")
    return out


def parse_pairs(text: str | None, against: str | None, names: Sequence[str]):
    """``--pairs "a:b,a:c"`` or ``--against a`` -> the family of pairs (None: all pairs)."""
    if text is not None and against is not None:
        raise FormError("--pairs and --against both name the pairs tested: give one")
    if against is not None:
        if against not in names:
            raise FormError(
                f"--against {against!r}: no such form in this comparison; forms: "
                + ", ".join(names)
            )
        return [(against, n) for n in names if n != against] or family(names, [])
    if text is None:
        return None
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        a, sep, b = part.partition(":")
        if not sep or not a.strip() or not b.strip():
            raise FormError(f"--pairs {text!r}: {part!r} is not of the form A:B")
        pairs.append((a.strip(), b.strip()))
    return family(names, pairs)


VERDICT_COLUMNS = ["split", "form", "heldout_error_pct", "n_train", "n_test", "used", "reasons"]


def _verdict_rows(f, X, y, masks, objective, options, on_progress, keep_degenerate, heldout=None):
    """Held-out errors of one form on the verdict protocol's splits (cells weighted by
    ``heldout``, as the descriptive splits' are)."""
    fits = fit_splits(f, X, y, masks, objective, options, on_progress)
    rows = []
    for s, (mask, r) in enumerate(zip(masks, fits, strict=True)):
        test = ~mask
        reasons = list(r.reasons)
        err = np.nan
        unfitted = _unfitted_levels(f, X, mask, test)
        if np.isfinite(r.objective) and not unfitted.any():
            pred = predict(f, {v: a[test] for v, a in X.items()}, r.constants)
            if np.isfinite(pred).all():
                hw = None if heldout is None else heldout[test]
                err = heldout_errors(y[test], pred, hw)["heldout_error_pct"]
        if not np.isfinite(err):
            # a level with no training cell has no fitted constant: the split names it
            reasons.append(
                "a held-out cell's level has no training cell"
                if unfitted.any()
                else "prediction is not finite on held-out cells"
            )
            err = np.nan
        rows.append(
            {
                "split": s,
                "form": f.name,
                "heldout_error_pct": err,
                "n_train": int(mask.sum()),
                "n_test": int(test.sum()),
                "used": bool(np.isfinite(err) and (keep_degenerate or not reasons)),
                "reasons": reasons,
            }
        )
    return pd.DataFrame(rows)


MOST = 0.5  # a form with more than this fraction of its splits set aside gets a warning


def set_aside_warnings(summary: pd.DataFrame, reasons: dict, n_splits: int) -> list[str]:
    """A sentence for each form most of whose splits were set aside, saying why.

    A verdict on the splits that remain describes those splits only: when most were set
    aside (e.g. the optimiser did not converge on them), the reader must know.
    """
    out = []
    for r in summary.to_dict("records"):
        gone = n_splits - int(r["splits_used"])
        if n_splits and gone > MOST * n_splits:
            why = "; ".join(f"{c} x {k}" for k, c in list(reasons.get(r["form"], {}).items())[:3])
            out.append(
                f"{r['form']}: {gone} of {n_splits} splits set aside ({why or 'no valid error'}); "
                f"its summary and verdicts rest on the other {r['splits_used']}, which may not "
                "be typical"
            )
    return out


ROW_BYTES = 4_000  # one (split, form) row: its dict, table row, JSON view and text, generously
# per cell of a row: its list of training cells (a third of the cells, ~36 bytes each as
# Python ints) and its held-out errors per cell (8 bytes); measured by bench_memory.py
CELL_BYTES = 24


def compare_memory(
    forms: Sequence[Form],
    n_cells: int,
    n_splits: int,
    options: FitOptions | None = None,
    n_train: int | None = None,
    objective: str = OBJECTIVES[0],
) -> float:
    """Bytes a comparison will need, estimated before any fit: the largest form's fitting
    arrays plus the per-(split, form) results, which grow with the number of splits
    (measured: about 750 bytes a row on the default grid; counted here at 4 kB)."""
    fitting = max(
        (fit_memory(f, n_cells, n_splits, options, n_train, objective) for f in forms),
        default=0.0,
    )
    rows = float(n_splits) * len(forms) * (ROW_BYTES + CELL_BYTES * n_cells)
    return fitting + rows


COMMON_MIN = 30  # fewest splits valid for every form on which the ranking is made


def _summarise(results: pd.DataFrame, forms: list[Form], keep_degenerate: bool):
    rows, reasons, wild = [], {}, {}
    # the splits valid for every form: a median over each form's own valid splits favours a
    # form that fails on the hard splits, so the ranking is made on these when there are
    # enough of them (issue 42: composition over 279, composition_per_h over 186)
    used_by = results.pivot(index="split", columns="form", values="used").astype(bool)
    common = used_by.all(axis=1)
    n_common = int(common.sum())
    ranked_on = "common" if n_common >= COMMON_MIN or len(forms) == 1 else "own"
    for f in forms:
        df = results[results["form"] == f.name]
        used = df[df["used"]]
        e = used["heldout_error_pct"].to_numpy(float)
        tame = used.loc[~used["wild"], "heldout_error_pct"].to_numpy(float)
        counts = Counter(_reason_key(x) for rs in df["reasons"] for x in rs)
        reasons[f.name] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        named = used[used["wild"]]
        wild[f.name] = [
            f"split {s}: {'; '.join(g)}"
            for s, g in zip(named["split"], named["guard_reasons"], strict=True)
        ]
        fl = used["noise_floor_pct"].dropna().to_numpy(float)
        on_common = used[used["split"].map(common).fillna(False).astype(bool)]
        ec = on_common["heldout_error_pct"].to_numpy(float)
        rows.append(
            {
                "form": f.name,
                "constants": len(f.constants),
                "splits_used": int(len(e)),
                "common_splits": n_common,
                "common_median_pct": float(np.median(ec)) if len(ec) else np.nan,
                "ranked_on": ranked_on,
                "degenerate_splits": int(df["degenerate"].sum()),
                "wild_splits": int(used["wild"].sum()),
                **robust_summary(e),
                "worst_split_pct": float(e.max()) if len(e) else np.nan,
                "worst_cell_pct": float(used["worst_cell_pct"].max()) if len(e) else np.nan,
                "noise_floor_pct": float(np.median(fl)) if len(fl) else np.nan,
                **robust_summary(tame, "tame_"),
                "mean_pct": float(e.mean()) if len(e) else np.nan,
            }
        )
    return pd.DataFrame(rows), reasons, wild


def _cell_table(cells: Cells, at_cell: dict) -> pd.DataFrame:
    """Each cell's held-out error per form over the used splits that held it out: median
    (robust to a runaway split) and mean."""
    rows = []
    source = cells.table["_source"] if "_source" in cells.table else None
    for f, errs in at_cell.items():
        cnt = np.isfinite(errs).sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a cell never held out: NaN
            med, mean = np.nanmedian(errs, axis=0), np.nanmean(errs, axis=0)
        for i in range(len(cells)):
            label = cells.label(i) + (f" ({source.iloc[i]} grid)" if source is not None else "")
            rows.append(
                {
                    "cell_index": i,
                    "cell": label,
                    "value": float(cells.y[i]),
                    "form": f,
                    "splits": int(cnt[i]),
                    "median_error_pct": float(med[i]),
                    "mean_error_pct": float(mean[i]),
                }
            )
    return pd.DataFrame(rows)


def _paired(
    results, verdict, pairs, random: bool, level: float, cell_errors, loo: bool = False
) -> pd.DataFrame:
    """Descriptive counts from ``results``; the test from ``verdict`` (the same table when
    the descriptive protocol is its own verdict protocol)."""
    wide = results.pivot(index="split", columns="form", values="heldout_error_pct")
    ok = results.pivot(index="split", columns="form", values="used")
    vwide = verdict.pivot(index="split", columns="form", values="heldout_error_pct")
    vok = verdict.pivot(index="split", columns="form", values="used")
    n_train = int(verdict["n_train"].min())
    n_test = int(verdict["n_test"].min())
    rows = []
    for a, b in pairs:
        both = (ok[a] & ok[b]).to_numpy(bool)
        ea, eb = wide[a].to_numpy()[both], wide[b].to_numpy()[both]
        if random:
            v = paired_verdict(ea, eb)  # descriptive: counts, ties, median difference
            vboth = (vok[a] & vok[b]).to_numpy(bool)
            va, vb = vwide[a].to_numpy()[vboth], vwide[b].to_numpy()[vboth]
            if loo:
                test = cells_verdict(va, vb, level)
            else:
                test = paired_verdict(va, vb, n_train, n_test, level)
            v.update({k: test[k] for k in TEST_KEYS})
            v["verdict_n"] = test["n"]
        else:
            v = units_verdict(ea, eb)
        rows.append(
            {
                "a": a,
                "b": b,
                **v,
                "splits": int(len(both)),
                "deciding_cells": _deciding(cell_errors, a, b),
            }
        )
    paired = pd.DataFrame(rows)
    if len(paired):
        paired["p_holm"] = holm(paired["p"].tolist())
        paired["verdict"] = [verdict_of(r) for r in paired.to_dict("records")]
    return paired


def ranked(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's rows ranked by median held-out error (the robust statistic every view
    ranks by) on the splits valid for every form, or on each form's own valid splits when
    too few are common (:func:`fitrules.views.text.rank_value`); forms without a valid
    split last; ties keep the forms' order."""
    key = np.array([rank_value(r) for r in summary.to_dict("records")], float)
    return summary.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


TEST_KEYS = ("test", "t", "df", "p", "ratio", "ratio_ci", "diff_ci_pct")


def _deciding(cell_errors: pd.DataFrame, a: str, b: str, k: int = 3) -> list[dict]:
    """The cells where the two forms' median held-out errors differ most."""
    ea = cell_errors[cell_errors["form"] == a].set_index("cell_index")
    eb = cell_errors[cell_errors["form"] == b].set_index("cell_index")
    d = (ea["median_error_pct"] - eb["median_error_pct"]).dropna()
    top = d.abs().sort_values(ascending=False, kind="stable").index[:k]
    return [
        {
            "cell": ea.loc[i, "cell"],
            "a_pct": float(ea.loc[i, "median_error_pct"]),
            "b_pct": float(eb.loc[i, "median_error_pct"]),
        }
        for i in top
    ]
