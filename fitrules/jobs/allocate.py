"""The compute-optimal allocation of a fitted form, as a result: what ``fr.allocate`` returns.

For each budget, the pair of the cost's two variables that spends it with the lowest fitted
loss (:mod:`fitrules.engine.allocation`), with intervals propagated from the fit's constants,
the exponents of the frontier (x* ~ C^a, y* ~ C^b), and where the optimum leaves the grid's
range (extrapolation).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError
from fitrules.base.results import Result
from fitrules.base.util import json_ready
from fitrules.jobs.options.groups import unknown
from fitrules.jobs.reports import report_target
from fitrules.jobs.result_docs import figure_doc, report_doc, view

INTERVALS = ("covariance", "bootstrap", "none")
MAX_BUDGETS = 1000
INTERVAL_KINDS = {
    "covariance": "delta method on the fit's Jacobian covariance (normal on the log of each "
    "optimum): the constants' uncertainty only, as if the form were exact",
    "bootstrap": "percentiles over the fit's bootstrap refits: the constants' uncertainty "
    "only, as if the form were exact",
    "none": "no intervals",
}


def parse_budgets(value, name: str = "budgets") -> np.ndarray:
    """Budgets as given: a number, a list of numbers, ``"1e20,1e21"`` or a log-spaced range
    ``"LOW:HIGH:COUNT"`` (``"1e18:1e24:7"``).

    Raises
    ------
    FitrulesError
        For a budget that is not a positive finite number, a range whose ends are not in
        order or whose count is not a whole number from 2 to :data:`MAX_BUDGETS`.
    """
    allowed = ("a positive number, a comma-separated list, or a range LOW:HIGH:COUNT such as "
               "1e18:1e24:7")  # fmt: skip
    if isinstance(value, str):
        text = value.strip()
        if text.count(":") == 2:
            lo_t, hi_t, n_t = (s.strip() for s in text.split(":"))
            lo, hi = (_budget(t, name, value, allowed) for t in (lo_t, hi_t))
            try:
                count = int(n_t)
            except ValueError:
                count = 0
            if not 2 <= count <= MAX_BUDGETS:
                raise FitrulesError(
                    f"{name} {value!r}: the count of a range LOW:HIGH:COUNT must be a whole "
                    f"number from 2 to {MAX_BUDGETS}"
                )
            if not hi > lo:
                raise FitrulesError(f"{name} {value!r}: a range LOW:HIGH:COUNT needs LOW < HIGH")
            return np.geomspace(lo, hi, count)
        items = [s.strip() for s in text.split(",")] if text else []
    elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, list | tuple | np.ndarray):
        items = list(value)
    else:  # a bool too
        raise FitrulesError(f"{name} {value!r}: give {allowed}")
    if not items:
        raise FitrulesError(f"{name} {value!r}: no budget; give {allowed}")
    if len(items) > MAX_BUDGETS:
        raise FitrulesError(f"{name}: {len(items)} budgets; at most {MAX_BUDGETS}")
    out = np.array([_budget(t, name, value, allowed) for t in items])
    return np.unique(out)


def _budget(item, name: str, value, allowed: str) -> float:
    v = None
    if not isinstance(item, bool) and isinstance(
        item, str | int | float | np.integer | np.floating
    ):
        with contextlib.suppress(ValueError, OverflowError):
            v = float(item)
    if v is None:
        raise FitrulesError(f"{name} {value!r}: {item!r} is not a number; give {allowed}")
    if not (math.isfinite(v) and v > 0):
        raise FitrulesError(
            f"{name} {value!r}: each budget must be a positive finite number, not {item!r}"
        )
    return v


FAMILIES = ("none", "default")
FAMILY_LEVEL = 0.95  # the F test's level that tells a candidate form apart


def default_family(x: str, y: str, sx: float, sy: float) -> list[tuple[str, str, dict]]:
    """The stated default family of scaling laws in ``x`` and ``y`` (each read relative to a
    scale: ``sx``, ``sy``, the grid's geometric means to one significant figure): (name,
    expression, bounds) of the Chinchilla form, one with an x-y interaction, a sum of two
    power laws in y, the same in x, and a power law in y broken at a fitted y (its exponent
    changing to another beyond it)."""
    u, v = f"({x}/{sx:.0e})", f"({y}/{sy:.0e})"
    base = f"E + A*{u}**(-alpha) + B*{v}**(-beta)"
    exps = {"alpha": (0.01, 3.0), "beta": (0.01, 3.0)}
    return [
        ("chinchilla", base, exps),
        ("interaction", f"{base} + G*{u}**(-alpha)*{v}**(-beta)", exps),
        (f"two_power_{y}", f"E + A*{u}**(-alpha) + B*({v}**(-beta) + c*{v}**(-gamma))",
         exps | {"c": (0.0, 100.0), "gamma": (0.0, 3.0)}),
        (f"two_power_{x}", f"E + A*({u}**(-alpha) + c*{u}**(-gamma)) + B*{v}**(-beta)",
         exps | {"c": (0.0, 100.0), "gamma": (0.0, 3.0)}),
        (f"broken_{y}", f"E + A*{u}**(-alpha) + B*{v}**(-beta)*(1 + {v}/k)**(beta - gamma)",
         exps | {"k": (1e-3, 1e3), "gamma": (0.0, 3.0)}),
    ]  # fmt: skip


def check_family(value, name: str) -> None:
    """The declared check of ``family``."""
    if not isinstance(value, str) or value not in FAMILIES:
        raise unknown(name, value, FAMILIES)


def check_budgets(value, name: str) -> None:
    """The declared check of ``budgets``."""
    parse_budgets(value, name)


def check_intervals(value, name: str) -> None:
    if not isinstance(value, str) or value not in INTERVALS:
        raise unknown(name, value, INTERVALS)


@dataclass
class Allocation(
    Result, text=view("allocate.render_allocation"), html=view("allocate.allocation_html")
):
    """The loss-optimal split of each budget between the two variables a cost names.

    Attributes
    ----------
    fit : FittedForm
        The :class:`~fitrules.jobs.fit.FittedForm` it was computed from.
    cost : Cost
        The cost (:class:`fitrules.engine.allocation.Cost`): ``k * x**p * y**q``.
    table : DataFrame
        One row per budget: the budget, each variable's optimum with its interval (``N``,
        ``N_low``, ``N_high``, ...), the ratio y/x, the fitted loss there, and how far the
        optimum lies outside the grid's range (``extrapolation``, empty inside it).
    exponents : dict
        Per variable, the exponent of its optimum against the budget (x* ~ C^a) at
        ``reference_budget``, with its interval; constant for the closed form.
    method : {"closed form", "numerical"}
        ``"closed form"`` (``E + A*x**-alpha + B*y**-beta``) or ``"numerical"``.
    intervals : {"covariance", "bootstrap", "none"}
        How the intervals were made; ``interval_kind`` says what they carry.
    level : float
        The intervals' level.
    reference_budget : float
        The budget at which the exponents are read.
    grid_range : dict
        Per variable, the (lowest, highest) value in the fitted cells.
    failed_draws : int
        Bootstrap refits that gave no optimum.
    draws : int
        Bootstrap refits used.
    notes : list of str
        What the table's reader should know (extrapolation, budgets without an optimum).
    forms : DataFrame or None
        With ``family="default"``: one row per candidate form and budget, each form's
        answer and interval (``N``, ``N_low``, ``N_high``, ...), its exponent, residual sum
        of squares, constants counted, and whether the grid tells it apart from the
        best-fitting one (``kept``: it does not). With a family the table gains, per
        variable, the interval over the kept forms (``N_forms_low``, ``N_forms_high``: the
        union of their intervals) and the range of their answers (``N_forms_min``,
        ``N_forms_max``).
    family_exponents : dict
        With a family: per variable, the exponent's interval over the kept forms.
    refits : str
        With bootstrap intervals, the bootstrap whose refits they read (its kind, resamples
        and seed, as the fit describes it); empty otherwise.
    """

    fit: object
    cost: object
    table: pd.DataFrame
    exponents: dict
    method: str
    intervals: str
    level: float
    reference_budget: float
    grid_range: dict
    failed_draws: int = 0
    draws: int = 0
    notes: list[str] = field(default_factory=list)
    refits: str = ""
    forms: pd.DataFrame | None = None
    family_exponents: dict = field(default_factory=dict)

    @property
    def interval_kind(self) -> str:
        return INTERVAL_KINDS[self.intervals]

    @property
    def variables(self) -> tuple[str, str]:
        return (self.cost.x, self.cost.y)

    def at(self, budget: float) -> dict:
        """The row of ``budget`` (one of the budgets), as a dict.

        Parameters
        ----------
        budget : float
            One of the allocation's budgets.

        Returns
        -------
        dict
            The table's row at that budget.

        Raises
        ------
        FitrulesError
            For a budget that is not one of the allocation's.
        """
        hit = np.isclose(self.table["budget"].to_numpy(), float(budget), rtol=1e-12, atol=0)
        if not hit.any():
            raise FitrulesError(
                f"budget {budget!r} is not one of this allocation's budgets "
                f"({', '.join(f'{b:g}' for b in self.table['budget'])})"
            )
        return self.table[hit].iloc[0].to_dict()

    def to_latex(self) -> str:
        """The allocation's table as a LaTeX ``tabular`` for a paper: per budget, each
        variable's optimum (with its interval, when made), the ratio of the two, the fitted
        loss and how far the optimum lies outside the grid, in 4 significant digits; the head
        of :meth:`text` (the form, the cost, the exponents, what the intervals carry) is ``%``
        comments above it (:mod:`fitrules.views.latex`: plain LaTeX, no package needed).

        Returns
        -------
        str
            The table, ending in a newline.

        Examples
        --------
        >>> print(fr.allocate(runs, law, budgets=1e23).to_latex())  # doctest: +SKIP
        """
        from fitrules.views.latex import escape, tabular

        x, y = self.variables
        headers = {"budget": "budget $C$", "ratio": f"{escape(y)}/{escape(x)}"}
        for v in (x, y):
            headers |= {v: f"{escape(v)}*", f"{v}_low": f"{escape(v)}* low",
                        f"{v}_high": f"{escape(v)}* high"}  # fmt: skip
        shown = ["budget", x, f"{x}_low", f"{x}_high", y, f"{y}_low", f"{y}_high", "ratio",
                 "loss", "extrapolation"]  # fmt: skip
        t = self.table[[c for c in shown if c in self.table]]
        t = t.drop(columns=[c for c in t if c != "extrapolation" and t[c].isna().all()])
        head = self.text().split("\n\n", 1)[0].splitlines()
        return tabular(t, headers, head)

    def to_dict(self) -> dict:
        f = self.fit
        return json_ready(
            {
                "form": f.form.to_dict(),
                "data": f.data,
                "objective": f.objective.describe(),
                "constants": f.constants,
                "cost": self.cost.to_dict(),
                "method": self.method,
                "intervals": {
                    "method": self.intervals,
                    "kind": self.interval_kind,
                    "level": self.level,
                    "draws": self.draws,
                    "failed_draws": self.failed_draws,
                    "refits": self.refits,
                },  # fmt: skip
                "exponents": self.exponents,
                "reference_budget": self.reference_budget,
                "grid_range": {k: list(v) for k, v in self.grid_range.items()},
                "allocation": self.table.to_dict("records"),
                "notes": self.notes,
                **({"forms": self.forms.to_dict("records"),
                    "family_exponents": self.family_exponents}
                   if self.forms is not None else {}),  # fmt: skip
            }
        )

    def __repr__(self) -> str:
        x, y = self.variables
        a = self.exponents[x]["value"]
        return (f"Allocation({self.fit.form.name}, cost {self.cost.text}: {x}* ~ C^{a:.4g}, "
                f"{len(self.table)} budgets)")  # fmt: skip

    @report_doc
    def report(
        self,
        target: str | Path,
        force: bool = False,
        command: str = "",
        figure_format: str | Sequence[str] | None = None,
        labels: str | dict | None = None,
    ) -> Path:
        """Write a report directory: report.md (the allocation in words and its table),
        the frontier figure (frontier.png, and svg or pdf with ``figure_format``) and
        results.json; ``labels`` names columns on the axes."""
        from fitrules.views.markdown import allocation_report

        with report_target(self, target, "target", figure_format, labels) as path:
            return allocation_report(self, path, command, force)

    @figure_doc
    def plot_frontier(self, ax=None, labels=None, units=None):
        """The loss-optimal frontier: each variable's optimum against the budget (log axes),
        its interval shaded, extrapolation beyond the grid's range dashed.
        """
        from fitrules.views.allocate import frontier
        from fitrules.views.figures import axis_labels

        with axis_labels(labels, units):
            return frontier(self, ax)


def run(fitted, cost_text: str, budgets, intervals: str, level: float,
        family: Sequence = ()) -> Allocation:  # fmt: skip
    """The allocation of ``fitted`` (a FittedForm; with a bootstrap when ``intervals`` is
    ``"bootstrap"``) along ``cost_text`` at ``budgets``; ``family``: (name, FittedForm or
    the reason it has none) of the other candidate forms, each allocated the same way."""
    alone = _run_one(fitted, cost_text, budgets, intervals, level)
    if not family:
        return alone
    return _with_family(alone, family, cost_text, budgets, intervals, level)


def _with_family(alone: Allocation, family: Sequence, cost_text, budgets, intervals, level):
    """``alone`` with the candidate forms' answers, which of them the grid tells apart
    (:func:`fitrules.engine.intervals.candidates.not_told_apart`), the interval over those
    it does not, and a note when they disagree by more than the form's own interval."""
    from fitrules.engine.intervals.candidates import not_told_apart, span

    x, y = alone.variables
    fits: list[tuple[str, object]] = [(alone.fit.form.name + " (given)", alone)]
    notes = []
    for name, f in family:
        if isinstance(f, str):
            notes.append(f"candidate form {name!r} was left out: {f}")
            continue
        try:
            a = _run_one(f, cost_text, budgets, intervals, level)
        except FitrulesError as e:
            notes.append(f"candidate form {name!r} was left out: {e}")
            continue
        # the given form again (the user's law is one of the family): once is enough
        same = np.allclose(a.table[x].to_numpy(float), alone.table[x].to_numpy(float),
                           rtol=1e-6, equal_nan=True)  # fmt: skip
        if not (same and len(f.constants) == len(alone.fit.constants)):
            fits.append((name, a))
    rss = [a.fit.information["rss"] for _, a in fits]
    p = [len(a.fit.constants) for _, a in fits]
    kept = not_told_apart(rss, p, len(alone.fit.cells.y), FAMILY_LEVEL)
    rows = []
    for (name, a), k, r, pk in zip(fits, kept, rss, p, strict=True):
        t = a.table.copy()
        t.insert(0, "form", name)
        t["exponent"] = a.exponents[x]["value"]
        t["exponent_low"], t["exponent_high"] = a.exponents[x]["low"], a.exponents[x]["high"]
        t["rss"], t["constants"], t["kept"] = r, pk, bool(k)
        rows.append(t)
    forms = pd.concat(rows, ignore_index=True)
    table = alone.table.copy()
    for v in (x, y):
        cols = [np.stack([a.table[f"{v}{s}"].to_numpy(float) for _, a in fits])
                for s in ("_low", "", "_high")]  # fmt: skip
        out = np.array([span(cols[0][:, i], cols[1][:, i], cols[2][:, i], kept)
                        for i in range(len(table))])  # fmt: skip
        for j, s in enumerate(("_forms_low", "_forms_high", "_forms_min", "_forms_max")):
            table[f"{v}{s}"] = out[:, j]
    e = np.array([[a.exponents[x][k] for k in ("low", "value", "high")] for _, a in fits])
    elo, ehi, _, _ = span(e[:, 0], e[:, 1], e[:, 2], kept)
    # along a cost k x^p y^q, a loss falling in both puts x* ~ C^a with 0 <= a <= 1/p
    elo, ehi = max(elo, 0.0), min(ehi, 1 / alone.cost.p)
    # y* ~ C^b with p a + q b = 1 along the cost k x^p y^q
    cp, cq = alone.cost.p, alone.cost.q
    family_exponents = {x: {"value": alone.exponents[x]["value"], "low": elo, "high": ehi},
                        y: {"value": alone.exponents[y]["value"], "low": (1 - cp * ehi) / cq,
                            "high": (1 - cp * elo) / cq}}  # fmt: skip
    names = [n for (n, _), k in zip(fits, kept, strict=True) if k]
    bare = [n for (n, a), k in zip(fits, kept, strict=True)
            if k and not np.isfinite(a.table[f"{x}_low"].to_numpy(float)).all()]  # fmt: skip
    if intervals == "none":
        notes.append("no intervals asked for: the range over the forms is the range of their "
                     "answers, with no interval of any form in it")
    elif bare:
        notes.append(f"{', '.join(bare)} gave no interval (a constant at a bound, or the "
                     "covariance singular): the interval over forms takes their answers alone")
    notes.append(f"{len(names)} of {len(fits)} candidate forms are not told apart by the grid "
                 f"(F test of their residual sums at {1 - FAMILY_LEVEL:g}): {', '.join(names)}")
    for i, b in enumerate(table["budget"]):
        lo, hi = table[f"{x}_forms_min"][i], table[f"{x}_forms_max"][i]
        wide = table[f"{x}_high"][i] / table[f"{x}_low"][i]
        if np.isfinite(lo) and hi / lo > wide:
            notes.append(
                f"at C={b:.3g} the forms the grid cannot tell apart disagree on {x}* by "
                f"{hi / lo:.3g}x ({lo:.3g} to {hi:.3g}), more than the given form's interval "
                f"is wide ({wide:.3g}x): the form, not the noise, limits this answer"
            )
    alone.table, alone.forms, alone.family_exponents = table, forms, family_exponents
    alone.notes = alone.notes + notes
    return alone


def _run_one(fitted, cost_text: str, budgets, intervals: str, level: float) -> Allocation:
    """The allocation of one fitted form."""
    from fitrules.engine.allocation import (
        Allocator,
        delta_intervals,
        draw_intervals,
        parse_cost,
        summary_values,
    )

    form = fitted.form
    cost = parse_cost(cost_text, form.bound_variables, form.name)
    budgets = parse_budgets(budgets)
    X = fitted.cells.X
    xs, ys = np.asarray(X[cost.x], float), np.asarray(X[cost.y], float)
    for name, v in ((cost.x, xs), (cost.y, ys)):
        if not (v > 0).all():
            raise FitrulesError(
                f"cost {cost.text!r}: {name} must be positive in every cell to be allocated "
                f"(its smallest is {v.min():g})"
            )
    grid_range = {cost.x: (float(xs.min()), float(xs.max())),
                  cost.y: (float(ys.min()), float(ys.max()))}  # fmt: skip
    alloc = Allocator(form, cost, (grid_range[cost.x], grid_range[cost.y]))
    constants = fitted.constants
    falls = alloc.falls(constants, xs, ys)
    if falls:
        raise FitrulesError(
            f"form {form.name!r}: {falls}, so no budget has a trade-off to optimise; allocate "
            f"needs a loss that falls in both {cost.x} and {cost.y}"
        )
    opt = alloc.optimum(constants, budgets)
    # the exponents at the budgets' geometric middle, among those with an optimum
    valid = budgets[np.isfinite(opt.x)]
    ref = float(np.exp(np.log(valid if len(valid) else budgets).mean()))
    rows, exps = summary_values(alloc, constants, budgets, ref)
    method = "closed form" if alloc.closed_form(constants) is not None else "numerical"
    b = len(budgets)
    lo_hi = np.full((b, 4, 2), np.nan)
    e_lo_hi = np.full((2, 2), np.nan)
    failed = draws = 0
    refits = ""
    if intervals == "covariance":
        unc = fitted.uncertainty
        names = list(unc.constants) if hasattr(unc, "constants") else list(form.constants)
        cov = np.asarray(unc.covariance, float)
        se_r, se_e, z = delta_intervals(alloc, constants, names, cov, budgets, ref, level)
        lo_hi = np.stack([rows - z * se_r, rows + z * se_r], axis=-1)
        e_lo_hi = np.stack([exps - z * se_e, exps + z * se_e], axis=-1)
    elif intervals == "bootstrap":
        boot = fitted.bootstrap
        draws, refits = len(boot.draws), boot.describe()
        lo_hi, e_lo_hi, failed = draw_intervals(
            alloc, constants, list(form.constants), boot.draws, budgets, ref, level
        )
    x, y = cost.x, cost.y
    table = pd.DataFrame({"budget": budgets})
    for k, (name, log) in enumerate(((x, True), (y, True), ("ratio", True), ("loss", False))):
        centre = [opt.x, opt.y, opt.y / opt.x, opt.loss][k]
        lo, hi = lo_hi[:, k, 0], lo_hi[:, k, 1]
        table[name] = centre
        with np.errstate(over="ignore"):  # an interval beyond floats is infinite
            table[f"{name}_low"] = np.exp(lo) if log else lo
            table[f"{name}_high"] = np.exp(hi) if log else hi
    table["extrapolation"] = [_outside(grid_range, {x: opt.x[i], y: opt.y[i]}) for i in range(b)]
    table["reason"] = opt.reason
    exponents = {
        v: {"value": float(exps[i]), "low": float(e_lo_hi[i, 0]), "high": float(e_lo_hi[i, 1])}
        for i, v in enumerate((x, y))
    }
    notes = []
    if any(opt.reason):
        notes.append(f"{sum(bool(r) for r in opt.reason)} budget(s) have no optimum: "
                     f"{next(r for r in opt.reason if r)}")  # fmt: skip
    if failed:
        notes.append(f"{failed} of {draws} bootstrap refits gave no allocation and are left "
                     "out of the intervals")  # fmt: skip
    return Allocation(fitted, cost, table, exponents, method, intervals, level, ref, grid_range,
                      failed, draws, notes, refits)  # fmt: skip


def _outside(grid_range: dict, point: dict) -> str:
    """How far each variable lies outside the grid's range: ``"N 4.2x above"``; empty
    inside it."""
    out = []
    for name, v in point.items():
        lo, hi = grid_range[name]
        if not np.isfinite(v):
            continue
        if v > hi * (1 + 1e-9):
            out.append(f"{name} {v / hi:.3g}x above")
        elif v < lo * (1 - 1e-9):
            out.append(f"{name} {lo / v:.3g}x below")
    return ", ".join(out)
