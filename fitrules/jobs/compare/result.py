"""The :class:`Comparison` a compare returns: its tables, its views (text, HTML, report) and
its figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fitrules import __version__
from fitrules.base.error_metrics import DEFAULT_ERROR_METRIC, ERROR_METRICS
from fitrules.base.errors import FormError
from fitrules.base.results import Views
from fitrules.base.util import json_ready
from fitrules.engine.fit import FitResult
from fitrules.engine.intervals import JacobianUncertainty
from fitrules.jobs.axes import form_variable
from fitrules.jobs.compare.summaries import ranked
from fitrules.jobs.compare.verdicts import VERDICT_COLUMNS
from fitrules.jobs.reports import report_target
from fitrules.jobs.result_docs import figure_doc, form_figure_doc, report_doc, view
from fitrules.model.forms import Form
from fitrules.model.grids import Cells
from fitrules.views.text_compare import conclusion


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


# the summary's columns a LaTeX table shows by default, and those in the error's unit
LATEX_COLUMNS = ("form", "constants", "splits_used", "median", "trimmed_mean", "p90",
                 "noise_floor")  # fmt: skip
ERROR_COLUMNS = ("common_median", "median", "trimmed_mean", "p90", "worst_split", "worst_cell",
                 "noise_floor", "tame_median", "tame_trimmed_mean", "tame_p90", "mean")  # fmt: skip


@dataclass
class Comparison(Views, text=view("text.render_comparison"), html=view("html.comparison_html")):
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
    error_metric : dict
        The held-out error's metric: ``name``, ``unit`` (``"%"`` for the default relative
        error) and ``quantity`` (``|relative error|``); every error column (``median``,
        ``heldout_error``, ``noise_floor``, ...) is in this unit.
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
    error_metric: dict = field(
        default_factory=lambda: ERROR_METRICS[DEFAULT_ERROR_METRIC].as_dict()
    )

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
        return conclusion(
            self.summary.to_dict("records"),
            self.paired.to_dict("records"),
            self.error_metric["unit"],
        )

    @property
    def ranking(self) -> pd.DataFrame:
        """:attr:`summary` ranked by median held-out error (what every view shows)."""
        return ranked(pd.DataFrame(self.summary))

    def to_latex(self, columns: Sequence[str] | None = None) -> str:
        """The summary, ranked (:attr:`ranking`), as a LaTeX ``tabular`` for a paper: one row
        per form, in 4 significant digits, the error columns headed with the error's unit;
        the conclusion is ``%`` comments above it, for the caption
        (:mod:`fitrules.views.latex`: plain LaTeX, no package needed).

        Parameters
        ----------
        columns : sequence of str, optional
            Columns of :attr:`summary` to show (default: form, constants, splits_used,
            median, trimmed_mean, p90, noise_floor).

        Returns
        -------
        str
            The table, ending in a newline.

        Examples
        --------
        >>> print(fr.compare(g, forms=["composition", "additive"]).to_latex())  # doctest: +SKIP
        """
        from fitrules.base.errors import FitrulesError
        from fitrules.views.latex import escape, tabular

        columns = list(columns or LATEX_COLUMNS)
        unknown = [c for c in columns if c not in self.summary.columns]
        if unknown:
            raise FitrulesError(
                f"columns {unknown}: not columns of the summary; it has "
                f"{', '.join(self.summary.columns)}"
            )
        unit = escape(self.error_metric["unit"])
        headers = {c: f"{escape(c)} ({unit})" for c in columns if c in ERROR_COLUMNS}
        notes = [f"held-out {self.error_metric['quantity']} in {self.error_metric['unit']}",
                 *self.conclusion]  # fmt: skip
        return tabular(self.ranking[columns], headers, notes)

    def to_dict(self) -> dict:
        """Everything, JSON-ready (NaN and infinities become null)."""
        out = json_ready(
            {
                "fitrules_version": __version__,
                "data": self.data,
                "settings": self.settings,
                "error_metric": self.error_metric,
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

    @report_doc
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
        """
        from fitrules.views.markdown import comparison_report

        with report_target(self, target, "target", figure_format, labels) as path:
            return comparison_report(self, self.to_dict(), path, command, force, self.tuning)

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

    @figure_doc
    def plot_heldout(self, ax=None, labels=None, units=None):
        """Empirical CDF of every form's held-out error; returns the matplotlib Axes."""
        from fitrules.views import figures

        with figures.axis_labels(labels, units):
            return figures.heldout_ecdf(self, ax)

    @figure_doc
    def plot_paired(self, a: str, b: str, ax=None, labels=None, units=None):
        """a's held-out error against b's, one point per split valid for both.

        Parameters
        ----------
        a : str
            The form on the horizontal axis.
        b : str
            The form on the vertical axis.
        """
        from fitrules.views import figures

        self.form(a), self.form(b)
        with figures.axis_labels(labels, units):
            return figures.paired_scatter(self, a, b, ax)

    @figure_doc
    def plot_fit(self, form: str, ax=None, labels=None, units=None):
        """``form`` fitted on all cells: observed against predicted.

        Parameters
        ----------
        form : str
            The name of the form.
        """
        from fitrules.views import figures

        f = self.form(form)
        with figures.axis_labels(labels, units):
            return figures.observed_vs_predicted(
                self.cells, f, self.full_fits[form].constants, self.unit, ax
            )

    @figure_doc
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

    @form_figure_doc
    def plot_curves(self, form: str, x: str | None = None, ax=None, labels=None, units=None):
        """The data and ``form`` fitted on all cells, against ``x`` (default: its first
        variable).

        Parameters
        ----------
        form : str
            The name of the form.
        """
        from fitrules.views import figures

        f = self.form(form)
        x = form_variable(f, x)
        with figures.axis_labels(labels, units):
            return figures.curves_vs(
                self.cells, f, self.full_fits[form].constants, x, self.unit, ax
            )
