"""A form fitted on every cell of a grid, with its uncertainty: what ``fr.fit`` returns.

The result is data (constants, standard errors, correlations, intervals, residuals, as
dicts and DataFrames); its views (text, HTML, JSON, figures, a report directory) render the
same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fitrules import __version__
from fitrules.base.errors import FitrulesError, api_terms
from fitrules.base.limits import WEIGHTS
from fitrules.base.results import Result
from fitrules.base.util import json_ready
from fitrules.engine.constraints import Constraints
from fitrules.engine.fit import FitResult, Objective
from fitrules.engine.intervals import (
    COVERS_GRID_SEEDS,
    BootstrapFit,
    HeldOut,
    JacobianUncertainty,
    SeedOffset,
    format_point,
    resolve_point,
)
from fitrules.engine.profile import ProfileFit
from fitrules.jobs.axes import form_variable
from fitrules.jobs.reports import report_target
from fitrules.jobs.result_docs import figure_doc, form_figure_doc, report_doc, view
from fitrules.model.compiled import predict
from fitrules.model.forms import Form
from fitrules.model.grids import Cells

INFORMATION_NOTE = "in-sample, on cell means; held-out error, not these, is what compare ranks"


class Prediction(dict):
    """What :meth:`FittedForm.predict` returns: a dict of the prediction and its intervals
    (keys as documented there), that renders itself like every result: ``str()`` and
    :meth:`summary` in words, ``_repr_html_`` in a notebook, :meth:`to_json`.

    Parameters
    ----------
    values : dict
        The prediction's keys and values (see :meth:`FittedForm.predict`).
    form : str, optional
        The name of the form that predicts.
    inputs : sequence of path, optional
        The files the fit was made from.

    Attributes
    ----------
    form : str
        The name of the form that predicts.
    inputs : list of path
        The files the fit was made from, which :meth:`to_json` refuses to replace.
    """

    def __init__(self, values: dict, form: str = "", inputs=()) -> None:
        super().__init__(values)
        self.form = form
        self.inputs = list(inputs)

    def __str__(self) -> str:
        from fitrules.views.text import prediction_line

        return f"{self.form}: {prediction_line(self)}" if self.form else prediction_line(self)

    def __repr__(self) -> str:
        where = ", ".join(f"{k}={v:g}" for k, v in self["given"].items())
        return f"Prediction({self.form} at {where}: {self['prediction']:.5g})"

    def _repr_html_(self) -> str:
        import html

        return f"<p><b>fitrules prediction</b>: {html.escape(str(self))}</p>"

    def summary(self) -> str:
        """The prediction in words (the same as ``str(self)``)."""
        from fitrules.base.util import Text

        return Text(str(self))

    def to_dict(self) -> dict:
        """The prediction as a plain dict, JSON-ready (NaN becomes null)."""
        return json_ready({"form": self.form, **self})

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The JSON text of :meth:`to_dict`; with ``path``, written there instead (atomically,
        never over one of the files the fit was made from).

        Parameters
        ----------
        path : str or path, optional
            The file to write.

        Returns
        -------
        str or None
            The JSON text; None when it was written to ``path``.
        """
        from fitrules.base.outputs import inputs_of
        from fitrules.base.util import atomic_write_text

        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        if path is not None:
            atomic_write_text(Path(path), text, "path", inputs=inputs_of(self))
            return None
        return text


@dataclass
class FittedForm(Result, text=view("text.render_fitted"), html=view("html.fitted_html")):
    """A form fitted on all cells of a grid.

    Attributes
    ----------
    form : Form
        The form, bound to the grid's columns.
    result : FitResult
        The fit (constants, training objective, condition number, diagnostics).
    cells : Cells
        The cells it was fitted on.
    objective : Objective
        The training objective.
    uncertainty : JacobianUncertainty
        Standard errors and correlations of the constants from the Jacobian.
    data : dict
        Where the cells came from (path, sha256, filters, counts).
    unit : str or None
        The metric's unit, if known.
    bootstrap : BootstrapFit or None
        Bootstrap refits, when intervals were asked for.
    predictions : list of dict
        Predictions asked for when fitting (see :meth:`predict`).
    derive : tuple of str
        The grid's derived columns, which prediction points are completed with.
    harness : bool
        Whether the grid was written by ``fitrules simulate`` (its domain checks, e.g.
        H >= 1, then apply to prediction points).
    heldout : HeldOut or None
        Leave-one-cell-out refits that give prediction intervals their misfit term, when
        intervals or predictions were asked for.
    weights : str
        How each cell counted in the fit (``"cells"``, ``"runs"`` or ``"inverse-variance"``).
    seed_offset : SeedOffset or None
        The effect the grid's seed ids share across its cells, which the fit's level
        constants absorb (:class:`fitrules.engine.intervals.SeedOffset`; None when no seed id
        is shared across cells or no intervals were asked for).
    offset_response : ndarray or None
        (p, seeds): each constant's response to each seed id's effect.
    call : dict or None
        The arguments of the fit that made it, which ``to_json`` records so that
        :func:`fitrules.load_fit` can make it again from its data.
    profile : ProfileFit or None
        With ``intervals="profile"``: the profile-likelihood intervals of the constants
        (:class:`fitrules.engine.profile.ProfileFit`), in place of the bootstrap's.
    constraints : Constraints or None
        The linear constraints between constants the fit kept
        (:class:`fitrules.engine.constraints.Constraints`), and which were active.
    misfit_source : callable or None
        Without intervals asked for, what makes the leave-one-cell-out refits that
        :attr:`prediction_heldout` gives on first use.

    Examples
    --------
    >>> import fitrules as fr  # doctest: +SKIP
    >>> f = fr.fit(grid, "composition", intervals=True)  # doctest: +SKIP
    >>> f.table  # value, standard error and interval of each constant  # doctest: +SKIP
    >>> f.predict("H=8,keep=0.25")["interval"]  # doctest: +SKIP
    """

    form: Form
    result: FitResult
    cells: Cells
    objective: Objective
    uncertainty: JacobianUncertainty
    data: dict
    unit: str | None = None
    bootstrap: BootstrapFit | None = None
    predictions: list[dict] = field(default_factory=list)
    derive: tuple[str, ...] = ()
    # the grid was written by the harness: its domain checks apply to prediction points
    harness: bool = True
    heldout: HeldOut | None = None
    weights: str = WEIGHTS[0]
    seed_offset: SeedOffset | None = None
    offset_response: np.ndarray | None = None
    # the arguments of the fit that made it (fitrules.api.fit), which to_json records so
    # that fitrules.api.load_fit can make it again from its data
    call: dict | None = None
    # intervals="profile": profile-likelihood intervals instead of the bootstrap's
    profile: ProfileFit | None = None
    constraints: Constraints | None = None
    # without intervals asked for: what makes the leave-one-cell-out refits on first use
    # (a function of nothing), and what it made
    misfit_source: Callable[[], HeldOut | None] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def prediction_heldout(self) -> HeldOut | None:
        """The leave-one-cell-out refits every prediction's interval reads: the fit's own
        (:attr:`heldout`) when intervals were asked for, else made once on first use, so
        that a bare ``predict`` gives the same interval and extrapolation words as the
        command line and the ledger (None when they cannot be made: constraints, or too few
        cells)."""
        if self.heldout is not None:
            return self.heldout
        if self.misfit_source is not None:
            source, self.misfit_source = self.misfit_source, None
            self._made_heldout = source()
        return getattr(self, "_made_heldout", None)

    def keep_heldout(self, heldout: HeldOut) -> None:
        """Keep ``heldout`` as the refits :attr:`prediction_heldout` gives, without counting
        as intervals asked for (a saved fit made again without data).

        Parameters
        ----------
        heldout : HeldOut
            The leave-one-cell-out refits.
        """
        self._made_heldout, self.misfit_source = heldout, None

    @property
    def interval_method(self) -> ProfileFit | BootstrapFit | None:
        """What gives the constants' intervals (its ``level``, ``interval_kind`` and
        ``describe()``): the profile when asked for, else the bootstrap, else None."""
        return self.profile if self.profile is not None else self.bootstrap

    @property
    def cell_weights(self) -> np.ndarray | None:
        """Per cell, the weight of its squared residual (``None``: each cell once)."""
        from fitrules.engine.fit import cell_weights

        return cell_weights(self.weights, self.cells.table, self.objective)

    @property
    def information(self) -> dict[str, float]:
        """AIC, AICc, BIC and R^2 on the cell means (in-sample; see
        :func:`fitrules.engine.fit.information_criteria`)."""
        from fitrules.engine.fit import information_criteria

        pred = predict(self.form, self.cells.X, self.constants)
        return information_criteria(
            self.cells.y, pred, self.objective, len(self.constants), self.cell_weights
        )

    # ------------------------------------------------------------ numbers
    @property
    def constants(self) -> dict[str, float]:
        return dict(self.result.constants)

    @property
    def stderr(self) -> dict[str, float]:
        """Standard error of each constant from the Jacobian (NaN when not estimable)."""
        return self.uncertainty.stderr

    @property
    def correlation(self) -> pd.DataFrame:
        """Correlations between the constants, from the Jacobian."""
        return self.uncertainty.correlation

    @property
    def seed_offset_sd(self) -> dict[str, float]:
        """Per constant, the sd the grid's seed offset gives it (0 without shared seed ids):
        a level constant absorbs the average effect of the grid's seed ids."""
        if self.seed_offset is None or self.offset_response is None:
            return {c: 0.0 for c in self.constants}
        var = self.seed_offset.var * (self.offset_response**2).sum(axis=1)
        return {c: float(np.sqrt(v)) for c, v in zip(self.form.constants, var, strict=True)}

    @property
    def intervals(self) -> dict[str, tuple[float, float]] | None:
        """Interval of each constant for its value over new seed ids (``intervals_covers``),
        if intervals were asked for: the bootstrap interval (its kind:
        ``bootstrap.interval_kind``), each side widened in quadrature by the grid's seed
        offset (``seed_offset_sd`` times a t quantile on the seed degrees of freedom); the
        same as :attr:`intervals_grid_seeds` when no seed id is shared across cells."""
        base = self.intervals_grid_seeds
        if base is None or self.seed_offset is None:
            return base
        q = self.seed_offset.quantile(self.interval_method.level)
        sd = self.seed_offset_sd
        out = {}
        for c, (lo, hi) in base.items():
            v, h = self.constants[c], q * sd[c]
            if not np.isfinite(h):
                out[c] = (-np.inf, np.inf)
                continue
            out[c] = (v - float(np.hypot(v - lo, h)), v + float(np.hypot(hi - v, h)))
        return out

    @property
    def intervals_grid_seeds(self) -> dict[str, tuple[float, float]] | None:
        """Interval of each constant (profile or bootstrap) as the grid's own seed ids give
        it (no seed offset: what a refit on new runs at the same seed ids would scatter
        about)."""
        if self.profile is not None:
            return dict(self.profile.intervals)
        return self.bootstrap.constant_intervals() if self.bootstrap is not None else None

    @property
    def intervals_covers(self) -> str:
        """Which value :attr:`intervals` covers."""
        from fitrules.engine.intervals import NO_SHARED_IDS

        if self.constraints:
            return ("each constant's value at the grid's seed ids (under constraints no seed "
                    "offset shared across cells is estimated)")  # fmt: skip
        note = self.heldout.offset_note if self.heldout is not None else NO_SHARED_IDS
        if self.seed_offset is not None:
            return "each constant's value over new seed ids"
        if note == NO_SHARED_IDS:
            return ("each constant's value (no seed id shared across cells: new seed ids and "
                    "the grid's give the same interval)")  # fmt: skip
        return f"each constant's value at the grid's seed ids ({note})"

    @property
    def table(self) -> pd.DataFrame:
        """One row per constant: value, standard error (Jacobian), and with intervals their
        ``low`` and ``high`` and the method that made them (``interval``: the profile
        likelihood's or the bootstrap's kind)."""
        rows = []
        iv = self.intervals
        method = self.interval_method
        kind = None
        if method is not None:
            kind = (method.interval_kind if self.profile is not None
                    else f"{self.bootstrap.kind} bootstrap, {method.interval_kind}")  # fmt: skip
        for c, v in self.constants.items():
            row = {"constant": c, "value": v, "stderr": self.stderr[c]}
            if iv is not None:
                row["low"], row["high"] = iv[c]
                row["interval"] = kind
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def residuals(self) -> pd.DataFrame:
        """The cells with the prediction and the residual of each: observed minus
        predicted, in percent of the observed value (the convention of every figure)."""
        pred = predict(self.form, self.cells.X, self.result.constants)
        t = self.cells.table.copy()
        t["predicted"] = pred
        t["residual_pct"] = 100 * (t["value"] - pred) / t["value"]
        return t

    @property
    def train_error(self) -> dict:
        """Mean and worst absolute relative error over the fitted cells (%), and the RMSE."""
        from fitrules.engine.metrics import heldout_errors

        e = heldout_errors(self.cells.y, predict(self.form, self.cells.X, self.constants))
        return {"heldout_error_pct": e["heldout_error"], "worst_cell_pct": e["worst_cell"],
                "rmse": e["rmse"]}  # fmt: skip

    @property
    def reasons(self) -> list[str]:
        return list(self.result.reasons)

    @api_terms
    def predict(
        self, point: str | dict | None = None, runs: int | None = None, **values: float
    ) -> Prediction:
        """The prediction at a point, in the grid or not, with its uncertainty.

        Parameters
        ----------
        point : str or dict, optional
            ``"H=8,keep=0.25"`` or a dict; or give the values as keywords. Variables the point
            does not name come from the grid's ``derive`` expressions (and ``omega`` from
            ``keep``).
        runs : int, optional
            k: also give the interval for the mean of k new runs at the point (the
            configuration's mean plus the seed noise of k runs).
        **values : float
            The point's values as keywords, e.g. ``H=8, keep=0.25``.

        Returns
        -------
        Prediction
            A dict that renders itself (``print(p)``, ``p.summary()``, HTML in a notebook,
            ``p.to_json()``): ``given`` (the values as given), ``point`` (the form's variables),
            ``prediction``, ``stderr`` (delta method, from the Jacobian: the constants only);
            ``interval`` with ``interval_kind`` and ``level``: the prediction interval for
            the configuration's mean loss, which carries the form's misfit as held-out cells
            show it (None without intervals); ``interval_runs`` for the mean of ``runs`` new
            runs; ``constants_interval``: the bootstrap interval, which carries only the
            constants' uncertainty, as if the form were exactly true; ``extrapolation``:
            each variable outside the fitted cells' range, with how far (a ratio >= 1);
            ``misfit_shown_beyond``: those in which the point lies beyond an edge whose
            refit without it misses by more than noise (the form is wrong there, and the
            interval takes its misfit to grow as a missed curvature would);
            ``misfit_power_shown``: with one seed id in every cell, the variables on which
            the cells show the form misses a power (a score test on every cell), where the
            interval takes at least the largest change the form refitted with a power they
            allow (its 95% profile confidence set) makes at the point.

        Raises
        ------
        FitrulesError
            For a point the form cannot be evaluated at, or ``runs`` below 1: a point
            that names an unknown variable or leaves one undetermined, or one outside the
            form's domain (no finite prediction, e.g. ``N=-1``).

        Examples
        --------
        >>> f.predict(H=8, keep=0.25, runs=3)["interval_runs"]  # doctest: +SKIP
        """

        if point is None:
            point = dict(values)
        elif values:
            raise TypeError("give the point as text, a dict, or keywords, not several")
        if runs is not None and (
            isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1
        ):
            raise FitrulesError(
                f"runs {runs!r}: the number of new runs must be a whole number >= 1"
            )
        given, at = resolve_point(point, self.form, self.derive, harness=self.harness)
        for col, levels in (self.form.levels or {}).items():
            if float(at[col]) not in levels:
                from fitrules.base.errors import FormError
                from fitrules.model.forms import format_level

                raise FormError(
                    f"form {self.form.name!r} has constants per level of {col}, and none for "
                    f"{col}={format_level(float(at[col]))}; it predicts at the levels it was "
                    f"fitted on: {', '.join(format_level(v) for v in levels)}"
                )
        X = {v: np.array([float(at[v])]) for v in self.form.bound_variables}
        with np.errstate(all="ignore"):
            value = float(predict(self.form, X, self.constants)[0])
        if not np.isfinite(value):
            raise FitrulesError(
                f"form {self.form.name!r} gives no finite prediction at "
                f"{format_point(given)} ({value:g}): the point is outside the form's domain "
                "(e.g. a negative base raised to a fractional power)"
            )
        se = float(self.uncertainty.prediction_se(self.form, X, self.constants)[0])
        out: dict = {"given": given, "point": at, "prediction": value, "stderr": se}
        out["interval"], out["interval_kind"], out["level"] = None, None, None
        held = self.prediction_heldout
        if held is not None:
            h = held.predict_at(at, runs)
            out["interval"] = h["interval"]
            out["interval_kind"] = f"held-out misfit: {h['covers']}"
            out["interval_grid_seeds"] = h["interval_grid_seeds"]
            out["interval_grid_seeds_kind"] = f"held-out misfit: {COVERS_GRID_SEEDS}"
            out["level"] = held.level
            if runs is not None:
                out["runs"] = int(runs)
                out["interval_runs"] = h["interval_runs"]
                out["interval_runs_kind"] = f"held-out misfit: {h['covers_runs']}"
                out["interval_runs_grid_seeds"] = h["interval_runs_grid_seeds"]
                out["interval_runs_grid_seeds_kind"] = (
                    f"held-out misfit: {h['covers_runs_grid_seeds']}"
                )
            out["seed_offset_sd"] = h["seed_offset_sd"]
            out["few_seed_ids"] = h["few_seed_ids"]
            out["misfit_lean"] = h["misfit_lean"]
            out["misfit_sd"] = h["misfit_sd"]
            out["misfit_sd_pooled"] = h["misfit_sd_pooled"]
            out["extrapolation_sd"] = h["extrapolation_sd"]
            out["extrapolation"] = h["extrapolation"]
            out["misfit_shown_beyond"] = h["misfit_shown_beyond"]
            out["misfit_power_shown"] = h["misfit_power_shown"]
        if self.bootstrap is not None:
            out["constants_interval"] = self.bootstrap.predict_at(at)["interval"]
            out["constants_interval_kind"] = (
                f"{self.bootstrap.kind} bootstrap: the constants only (as if the form were exact)"
            )
            out["level"] = self.bootstrap.level if out["level"] is None else out["level"]
        return Prediction(out, form=self.form.name, inputs=self.inputs)

    # ------------------------------------------------------------ views
    def __repr__(self) -> str:
        consts = ", ".join(f"{k}={v:.4g}" for k, v in self.constants.items())
        return f"FittedForm({self.form.name}: {consts}; {len(self.cells)} cells)"

    def to_latex(self) -> str:
        """The constants table (:attr:`table`) as a LaTeX ``tabular`` for a paper: each
        constant's value, standard error and, with intervals, its interval, in 4 significant
        digits; the form, where the standard errors come from and the intervals' method are
        ``%`` comments above it, for the caption (:mod:`fitrules.views.latex`: plain
        LaTeX, no package needed).

        Returns
        -------
        str
            The table, ending in a newline.

        Examples
        --------
        >>> print(fr.fit(g, "composition", intervals=True).to_latex())  # doctest: +SKIP
        """
        from fitrules.views.latex import tabular

        t = self.table
        notes = [f"form {self.form.name} = {self.form.expression}",
                 "standard error: from the Jacobian at the fit"]  # fmt: skip
        headers = {"stderr": "standard error"}
        if "interval" in t:
            level = f"{self.interval_method.level:.0%}".replace("%", r"\%")
            notes.append(f"{self.interval_method.level:.0%} intervals: {t['interval'].iloc[0]}")
            headers |= {"low": f"{level} low", "high": f"{level} high"}
            t = t.drop(columns="interval")
        return tabular(t, headers, notes)

    def to_dict(self, cells: bool = True) -> dict:
        """Everything, JSON-ready (NaN and infinities become null); ``cells=False`` leaves out
        the per-cell table (observed values, predictions, residuals) and the ``standalone``
        ingredients (which hold the cells too) that :func:`fitrules.load_fit` makes the fit
        from with no data beside it.

        Parameters
        ----------
        cells : bool, optional
            Include the per-cell table (default True).

        Returns
        -------
        dict
            The fit, JSON-ready.
        """
        out = {
            "fitrules_version": __version__,
            "data": self.data,
            "form": self.form.to_dict(),
            "objective": self.objective.describe(),
            "weights": self.weights,
            "constants": self.constants,
            "train_objective": self.result.objective,
            "train_error": self.train_error,
            "information_criteria": {
                **self.information,
                "note": INFORMATION_NOTE,
            },
            "condition_number": self.result.cond,
            "degenerate": self.result.degenerate,
            "reasons": self.reasons,
            "uncertainty": self.uncertainty.to_dict(),
        }
        if self.call is not None:
            out["call"] = {**self.call, "constants_exact": _exact_constants(self.constants)}
        if cells:
            from fitrules.jobs.standalone import standalone_record

            out["cells"] = self.residuals.to_dict("records")
            # what fitrules.load_fit makes the fit from with no data beside it
            out["standalone"] = standalone_record(self)
        if self.bootstrap is not None:
            b = self.bootstrap
            out["bootstrap"] = {
                "kind": b.kind,
                "interval": b.interval_kind,
                "why": b.reason,
                "resamples": b.resamples,
                "seed": b.seed,
                "level": b.level,
                "failed": b.failed,
                "single_run_cells": b.single_run_cells,
                "constants": {k: list(v) for k, v in b.constant_intervals().items()},
                "covers": "each constant's value at the grid's seed ids",
            }
            out["constant_intervals"] = {
                "covers": self.intervals_covers,
                "seed_offset_sd": self.seed_offset_sd,
                "seed_offset": None if self.seed_offset is None else self.seed_offset.to_dict(),
                "constants": {k: list(v) for k, v in (self.intervals or {}).items()},
            }
        if self.profile is not None:
            out["profile"] = {
                **self.profile.to_dict(),
                "covers": "each constant's value at the grid's seed ids",
            }
            out["constant_intervals"] = {
                "kind": self.profile.interval_kind,
                "covers": self.intervals_covers,
                "seed_offset_sd": self.seed_offset_sd,
                "seed_offset": None if self.seed_offset is None else self.seed_offset.to_dict(),
                "constants": {k: list(v) for k, v in (self.intervals or {}).items()},
            }
        if self.constraints:
            theta = np.array([self.constants[c] for c in self.constraints.constants])
            out["constraints"] = self.constraints.to_dict(theta)
        if self.heldout is not None:
            out["prediction_intervals"] = self.heldout.to_dict()
        if self.predictions:
            out["predictions"] = self.predictions
        return json_ready(out)

    @report_doc
    def report(
        self,
        target: str | Path,
        force: bool = False,
        command: str = "",
        cells: bool = True,
        figure_format: str | Sequence[str] | None = None,
        labels: str | dict | None = None,
    ) -> Path:
        """Write a report directory: report.md, figures and results.json (with the per-cell
        table unless ``cells=False``, e.g. for data that may not be redistributed); figures
        as PNG and, with ``figure_format="png,svg"`` (or pdf), as vector files too;
        ``labels`` names columns on the axes (``{"val/loss": "validation loss"}``).

        Parameters
        ----------
        cells : bool, optional
            Include the per-cell table in results.json (default True).
        """
        from fitrules.views.markdown import fit_report

        with report_target(self, target, "target", figure_format, labels) as path:
            return fit_report(self, path, command, force, cells)

    # ------------------------------------------------------------ figures
    @figure_doc
    def plot_fit(self, ax=None, labels=None, units=None):
        """Observed against predicted at every cell; returns the matplotlib Axes."""
        from fitrules.views import figures

        with figures.axis_labels(labels, units):
            return figures.observed_vs_predicted(
                self.cells, self.form, self.constants, self.unit, ax
            )

    @form_figure_doc
    def plot_residuals(self, x: str | None = None, ax=None, labels=None, units=None):
        """Relative residuals against the variable ``x`` (default: the form's first)."""
        from fitrules.views import figures

        x = form_variable(self.form, x)
        with figures.axis_labels(labels, units):
            return figures.residuals_vs(self.cells, [(self.form, self.constants)], x, ax)

    @form_figure_doc
    def plot_curves(self, x: str | None = None, ax=None, labels=None, units=None):
        """Data and the fitted form against ``x`` (default: the form's first variable), with
        the prediction interval (misfit included) shaded when intervals were asked for.
        """
        from fitrules.views import figures

        x = form_variable(self.form, x)
        band = self.heldout.band if self.heldout is not None else None
        with figures.axis_labels(labels, units):
            return figures.curves_vs(self.cells, self.form, self.constants, x, self.unit, ax, band)


def _exact_constants(constants: dict) -> dict:
    """Each constant as the hexadecimal text of its double (the JSON view rounds numbers to
    12 digits), so that a loaded fit (fitrules.api.load_fit) predicts exactly what the saved
    one did."""
    return {k: float(v).hex() for k, v in constants.items() if np.isfinite(v)}
