"""fr.fit and fr.load_fit: one form fitted on every cell of a grid, and a saved fit made
again from its data."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, FormError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    Bounds,
    Fix,
    FormLike,
    GridLike,
    as_forms,
    as_grid,
    check_customising,
    check_objective,
    customised,
    load_grid,
    tune_first,
)
from fitrules.jobs.options import FIT
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.model.forms import Form
from fitrules.model.grids import Grid

if TYPE_CHECKING:  # the result types, for annotations only
    from fitrules.jobs.fit import FittedForm


def check_runs(runs: int | None) -> None:
    """The number of new runs a prediction's interval is for: 1 to 1000, or None."""
    whole = isinstance(runs, numbers.Integral) and not isinstance(runs, bool)
    if runs is not None and not (whole and 1 <= runs <= 1000):
        raise FitrulesError(
            f"{param('runs')} {runs}: the number of new runs must be between 1 and 1000"
        )


@api_terms
@shared_params
def fit(
    grid: GridLike | None, form: FormLike, *,
    objective: str = FIT.objective, delta: float = FIT.delta, weights: str = FIT.weights,
    fix: Fix = None, bounds: Bounds = None, by: str | None = None,
    shared: Sequence[str] | str | None = None,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    # intervals and predictions
    intervals: bool | str = False, predict: str | dict | Sequence[str | dict] = (),
    runs: int | None = None, bootstrap: str = FIT.bootstrap, resamples: int = FIT.resamples,
    seed: int = FIT.seed, level: float = FIT.level,
    constraints: str | Sequence[str] | None = None,
):  # fmt: skip
    """Fit one form on every cell of a grid, with standard errors and optional intervals.

    Parameters
    ----------
    {grid}
    form : str or Form
        A name, ``"NAME = EXPR"`` or a :class:`Form`.
    {objective}
    {delta}
    weights : {"cells", "runs", "inverse-variance"}, optional
        ``"cells"`` (default: each cell once), ``"runs"`` (each cell by its runs) or
        ``"inverse-variance"`` (by one over its squared standard error); see
        :func:`fitrules.engine.fit.cell_weights`.
    {fix}
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, ``{"Nc": (1e10, 1e16)}`` or ``["Nc=1e10..1e16"]`` (a
        wide positive range is searched on a log scale).
    by : str, optional
        Fit one form per level of this column, jointly: the ``shared`` constants (default: the
        nonlinear ones, e.g. exponents) are common to all groups, the others are one per group
        (``a[M=2]``).
    shared : sequence of str or str, optional
        The constants common to all groups (names, or ``"b,c"``).
    {tune}
    {tune_seeds}
    intervals : bool or {"bootstrap", "profile"}, optional
        ``True`` or ``"bootstrap"``: also refit on bootstrap replicates for intervals of the
        constants, and once per cell with that cell left out for prediction intervals that
        carry the form's misfit (implied by ``predict``); ``"profile"``: profile-likelihood
        intervals of the constants instead of the bootstrap's (each constant held on a path of
        values, the others refitted; see :mod:`fitrules.engine.profile`), with the same
        prediction intervals.
    constraints : str or sequence of str, optional
        Linear constraints between constants, ``"b > a"``, ``"a + b = 1"``, ``"c >= 0.5*b"``
        (a text, texts, or several in one text separated by ``;``), enforced by the optimiser
        (see :mod:`fitrules.engine.constraints`); with them, intervals are ``"profile"`` only
        and ``predict`` is refused (the bootstrap's and the prediction intervals' refits do not
        keep constraints).
    predict : str, dict or sequence of str or dict, optional
        Points to predict, e.g. ``"H=8,keep=0.25"`` or ``{"H": 8, "keep": 0.25}``.
    runs : int, optional
        k: the predictions also give the interval for the mean of k new runs.
    bootstrap : {"studentized", "auto", "seeds", "residuals"}, optional
        ``"studentized"`` (default: residual replicates, symmetric bootstrap-t intervals from
        each refit's Jacobian standard errors), ``"auto"`` (the percentile intervals of the
        residuals when any cell has a single run, else of the seeds), ``"seeds"`` or
        ``"residuals"``; see :mod:`fitrules.engine.intervals`.
    {resamples}
    {seed}
    {level}

    Returns
    -------
    FittedForm
        ``.constants``, ``.stderr`` and ``.correlation`` (Jacobian), ``.intervals``,
        ``.table``, ``.residuals``, ``.predict(...)``, ``.plot_*()``, ``.report(dir)``.

    Examples
    --------
    >>> f = fr.fit(g, "composition", intervals=True)  # doctest: +SKIP
    >>> f.stderr["b"], f.intervals["b"]  # doctest: +SKIP
    """
    check(locals())
    g, _, (f,) = grid_and_forms(grid, form, tune, tune_seeds, fix, bounds, by, shared)
    fitted = _fitted(g, f.bind(g.columns, g.runs), objective=objective, delta=delta,
                     weights=weights, intervals=intervals, predict=predict, runs=runs,
                     bootstrap=bootstrap, resamples=resamples, seed=seed, level=level,
                     constraints=constraints)  # fmt: skip
    fitted.call = _fit_call(g, objective, delta, weights, tune, tune_seeds, fitted.call,
                            bootstrap, resamples, seed, level,
                            [c.text for c in fitted.constraints.items]
                            if fitted.constraints else None)  # fmt: skip
    return made_from(fitted, g)


def grid_and_forms(grid, forms, tune, tune_seeds, fix, bounds, by, shared):
    """The grid read and tuned, its tuning (or None) and the forms read and given their fixed
    values, bounds and groups: how fr.fit, fr.compare and fr.design begin."""
    g, tuning = tune_first(as_grid(grid), tune, tune_seeds)
    return g, tuning, customised(as_forms(forms), fix, bounds, by, shared)


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.fit's arguments) gives before any grid is read: the command
    line calls this before it takes its outputs, fr.fit first. The command line's checks
    come first, so that a value two checks refuse is refused in its words."""
    from fitrules.engine.intervals import check_bootstrap_options, parse_point

    v = {o.name: o.value for o in FIT.python} | dict(values)
    check_objective(v["objective"], v["delta"])
    check_customising(v["fix"], v["bounds"], v["by"], v["shared"])
    if v["intervals"] or v["predict"]:
        check_bootstrap_options(v["resamples"], v["seed"], v["level"])
        given = v["predict"]
        for point in given if isinstance(given, list | tuple) else [given]:
            if isinstance(point, str):  # a dict is checked against the grid's columns
                parse_point(point)
    check_runs(v["runs"])
    FIT.check(v)
    arg.text(v["bootstrap"], "bootstrap")
    if not isinstance(v["form"], Form | str):
        raise FormError(
            f"form {v['form']!r}: give one form: a name, 'NAME = EXPR' or a fitrules.Form"
        )


def _fitted(g: Grid, f: Form, *, objective, delta, weights, intervals, predict, runs, bootstrap,
            resamples, seed, level, constraints) -> FittedForm:  # fmt: skip
    """``f`` (bound) fitted on every cell of ``g``, with the intervals and predictions asked
    for; its ``call`` is what its intervals were (True, False or "profile")."""
    from fitrules.engine.fit import Objective, cell_weights
    from fitrules.engine.intervals import robust_cells
    from fitrules.jobs.fit import FittedForm

    obj = Objective(objective, delta)
    # under log_huber a cell is the biweight location of its runs (robust_cells), as the
    # bootstrap's and the design's are
    cells = robust_cells(g, f.bound_variables, obj)
    if len(cells) < len(f.constants):  # no unique fit: every constant cannot be told apart
        raise FitrulesError(
            f"form {f.name!r} has {len(f.constants)} constants but {g.label} has "
            f"{len(cells)} cell(s) over {', '.join(f.bound_variables)}: a fit needs at least "
            f"as many cells as constants ({len(f.constants) + 1} for standard errors)"
        )
    w = cell_weights(weights, cells.table, obj)
    points = _prediction_points(predict, f, g)
    cons = _constraints_of(constraints, f, intervals, points)
    with_intervals = bool(intervals or points)
    profile = intervals == "profile"
    if with_intervals:
        resamples, seed, level = arg.count(resamples, "resamples"), arg.seed(seed), arg.level(level)
    result, boot = _fit_or_bootstrap(g, f, obj, cells, w, with_intervals and not profile,
                                     resamples, seed, level, bootstrap, weights)  # fmt: skip
    if cons:
        from fitrules.engine.profile import constrained_fit

        result = constrained_fit(f, cells.X, cells.y, result, cons, obj, w)
    unc = _jacobian_of(f, cells, w, result, obj, cons)
    fitted = FittedForm(f, result, cells, obj, unc, _fit_data(g, f, cells), g.unit, boot,
                        derive=tuple(g.derive), weights=weights, harness=g.harness)  # fmt: skip
    fitted.heldout = fitted.seed_offset = fitted.offset_response = None
    fitted.constraints = cons or None
    if with_intervals and not cons:
        fitted.heldout, fitted.seed_offset, fitted.offset_response = _misfit_parts(
            g, f, cells, result, obj, level, w
        )
    if profile:
        from fitrules.engine.profile import profile_intervals

        fitted.profile = profile_intervals(f, cells.X, cells.y, result.constants, obj, level, w,
                                           cons or None)  # fmt: skip
    fitted.predictions = [fitted.predict(p, runs) for p in points]
    fitted.call = "profile" if profile else with_intervals
    return fitted


def _fit_call(g, objective, delta, weights, tune, tune_seeds, intervals, bootstrap, resamples,
              seed, level, constraints=None) -> dict:  # fmt: skip
    """What :func:`load_fit` needs to make a fit again: how its grid was read (the form's
    own setup, fixed values, bounds and groups, is in the form's record) and the fit's
    arguments."""
    return {
        "grid": {"where": list(g.where), "derive": list(g.derive), "metric": g.metric,
                 "seed_col": g.seed, "unit": g.unit,
                 "path": None if g.source is None else str(g.source)},
        "objective": objective, "delta": delta, "weights": weights,
        "tune": tune if tune is None or isinstance(tune, str) else list(tune),
        "tune_seeds": tune_seeds if tune_seeds is None or isinstance(tune_seeds, str)
        else list(tune_seeds),
        "intervals": intervals if intervals == "profile" else bool(intervals),
        "bootstrap": bootstrap, "resamples": resamples, "seed": seed, "level": level,
        "constraints": constraints,
    }  # fmt: skip


SAVED_FIT_RTOL = 1e-6  # a refit's constants within this of the saved ones are the same fit


def load_fit(source: str | Path, data: GridLike | None = None) -> FittedForm:
    """A fit saved by :meth:`FittedForm.to_json`, made again from its data.

    The saved file records the form (with its fixed values, bounds and groups), the fit's
    arguments and the data's sha256. The data is read again (from the recorded path, or
    ``data``) and must be the same bytes; the form is refitted with the recorded arguments,
    and its constants must equal the saved ones, so predictions, standard errors and
    intervals are those of the saved fit.

    Parameters
    ----------
    source : str or Path
        The JSON file ``to_json(path)`` wrote, or its text.
    data : Grid, DataFrame or path, optional
        The table the fit was made from, when it is not at the recorded path (a fit of a
        DataFrame, or a file moved); read with the recorded ``where``, ``derive``, metric
        and seed column unless it is a Grid.

    Returns
    -------
    FittedForm
        The saved fit, refitted on its data.

    Raises
    ------
    FitrulesError
        For a file that is not a saved fit, data that is not what the fit was made from
        (its sha256 differs), or a refit whose constants differ from the saved ones.

    Examples
    --------
    >>> f = fr.fit(g, "composition")  # doctest: +SKIP
    >>> f.to_json("fit.json")  # doctest: +SKIP
    >>> fr.load_fit("fit.json").predict(H=8, keep=0.25)  # doctest: +SKIP
    """
    doc, label, g, form, arguments = _saved_call(source, data)
    refit = fit(g, form, **arguments)
    return _with_saved_values(doc, label, refit)


def _saved_call(source, data) -> tuple[dict, str, Grid, Form, dict]:
    """A saved fit's record, a label for messages, its data read again (the same bytes, or
    refused in one line), its form and the arguments of :func:`fit` that made it."""
    from fitrules.model.grids import IN_MEMORY

    doc, label = _saved_fit(source)
    call, saved = doc["call"], doc["data"]
    read = call["grid"]
    if data is None:
        if saved.get("path") in (None, IN_MEMORY):
            raise FitrulesError(
                f"{label}: the fit was made from a table in memory; give it again with data="
            )
        # as given then (relative to that working directory), else where it was then
        data = saved["path"]
        if not Path(data).is_file() and read.get("path") and Path(read["path"]).is_file():
            data = read["path"]
    if isinstance(data, Grid):
        g = data
    else:
        g = load_grid(data, metric=read["metric"], where=tuple(read["where"]),
                      derive=tuple(read["derive"]), seed_col=read["seed_col"],
                      unit=read["unit"])  # fmt: skip
    if g.sha256 != saved.get("sha256"):
        raise FitrulesError(
            f"{g.label}: not the data {label} was fitted on (sha256 "
            f"{str(saved.get('sha256'))[:12]} saved, {str(g.sha256)[:12]} now); refit it "
            "with fitrules.fit, or give the data it was made from with data="
        )
    spec = doc["form"]
    form = Form(spec["name"], spec["expression"], tuple(spec["variables"]))
    arguments = dict(
        objective=call["objective"], delta=call["delta"], weights=call["weights"],
        fix=spec.get("fixed"),
        bounds={k: tuple(v) for k, v in spec.get("bounds", {}).items()} or None,
        by=spec.get("by"), shared=spec.get("shared"), tune=call["tune"],
        tune_seeds=call["tune_seeds"], intervals=call["intervals"],
        bootstrap=call["bootstrap"], resamples=call["resamples"], seed=call["seed"],
        level=call["level"], constraints=call.get("constraints"),
    )  # fmt: skip
    return doc, label, g, form, arguments


def _check_saved_constants(doc: dict, label: str, refit) -> None:
    """Refuse a refit whose constants are not the saved ones."""
    from fitrules import __version__

    for name, value in doc["constants"].items():
        now = refit.constants.get(name)
        if now is None or value is None or not math.isclose(now, value, rel_tol=SAVED_FIT_RTOL,
                                                            abs_tol=1e-300):  # fmt: skip
            raise FitrulesError(
                f"{label}: the refit's {name} = {now!r} is not the saved {value!r} (saved by "
                f"fitrules {doc.get('fitrules_version')}, this is {__version__})"
            )


def _with_saved_values(doc: dict, label: str, refit):
    """``refit`` checked against the saved constants and then given the saved values
    themselves (a refit may differ in the last digits, e.g. with the number of threads), so
    that it predicts exactly what the saved fit did; its predictions made again."""
    _check_saved_constants(doc, label, refit)
    exact = doc["call"].get("constants_exact") or {}
    saved_values = {
        k: float.fromhex(exact[k]) if k in exact else float(doc["constants"][k])
        for k in refit.result.constants
    }
    refit.result = dataclasses.replace(refit.result, constants=saved_values)
    refit.predictions = [refit.predict(p["point"], p.get("runs")) for p in refit.predictions]
    return refit


def _saved_fit(source) -> tuple[dict, str]:
    """The saved fit's record and a label for messages; refused in one line when ``source``
    is not a file or text that ``FittedForm.to_json`` wrote."""
    import json

    from fitrules.base.inputs import read_text

    if isinstance(source, str) and source.lstrip().startswith("{"):
        label, text = "the saved fit", source
    elif isinstance(source, str | Path):
        path = Path(source)
        label = str(source)
        if not path.exists():
            raise FitrulesError(f"{label}: no such file (give the path to_json wrote)")
        # a directory, a pipe or a device is refused in its own words before it is opened
        text = read_text(path, label, FitrulesError, what="the file FittedForm.to_json wrote")
    else:
        raise FitrulesError(f"source {source!r}: give the path of a saved fit or its JSON text")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise FitrulesError(f"{label}: not JSON ({err.msg}, line {err.lineno})") from None
    need = ("form", "constants", "data", "call")
    if not isinstance(doc, dict) or any(k not in doc for k in need):
        missing = [k for k in need if not isinstance(doc, dict) or k not in doc]
        raise FitrulesError(
            f"{label}: not a fit saved by FittedForm.to_json (no {', '.join(missing)}); "
            "a fit saved before fitrules recorded its arguments must be refitted"
        )
    return doc, label


def _prediction_points(predict, f: Form, g: Grid) -> list:
    """``predict`` as a list of points, each checked against the form and grid."""
    from fitrules.engine.intervals import resolve_point

    if predict is None:
        predict = ()
    if not isinstance(predict, str | dict | Sequence) or (
        not isinstance(predict, str | dict) and not all(isinstance(p, str | dict) for p in predict)
    ):
        raise FitrulesError(
            f"predict {predict!r}: give a point ('H=8,keep=0.25' or a dict) or a list of them"
        )
    points = [predict] if isinstance(predict, str | dict) else list(predict)
    for p in points:  # every point checked before any work
        resolve_point(p, f, g.derive, harness=g.harness)
    return points


def _fit_or_bootstrap(g, f, obj, cells, w, with_intervals, resamples, seed, level, kind,
                      weights):  # fmt: skip
    """The fit on every cell, and its bootstrap when intervals are asked for (whose first
    fit is the same); refused when no constants give a finite prediction everywhere."""
    from fitrules.engine.fit import fit as fit_cells
    from fitrules.engine.intervals import bootstrap_fit

    boot = None
    if with_intervals:
        boot = bootstrap_fit(g, f, obj, resamples, seed, level, kind=kind, weights=weights)
        result = boot.fit
    else:
        result = fit_cells(f, cells.X, cells.y, obj, weights=w)
    if not math.isfinite(result.objective):
        raise FitrulesError(
            f"form {f.name!r}: no values of its constants give a finite prediction at "
            f"every one of the {len(cells)} cells; {'; '.join(result.reasons)}"
        )
    return result, boot


def _jacobian_of(f, cells, w, result, obj, constraints=None):
    from fitrules.engine.fit import WEIGHT_KEY
    from fitrules.engine.intervals import jacobian_uncertainty

    if constraints:
        from fitrules.engine.profile import constrained_uncertainty

        return constrained_uncertainty(f, cells.X, cells.y, result.constants, obj, w,
                                       constraints)  # fmt: skip
    X = cells.X if w is None else {**cells.X, WEIGHT_KEY: w}
    return jacobian_uncertainty(f, X, cells.y, result.constants, obj)


def _constraints_of(constraints, f: Form, intervals, points):
    """The fit's constraints parsed against the bound form's free constants; refused with
    the bootstrap or predictions, whose refits do not keep them."""
    from fitrules.engine.constraints import parse_constraints

    cons = parse_constraints(constraints, f.constants, f.name)
    if cons and intervals not in (False, "profile"):
        shown = "bootstrap" if intervals is True else intervals
        raise FitrulesError(
            f"{param('intervals')} {shown} with {param('constraints')}: the bootstrap's refits do "
            "not keep "
            f"constraints; use {param('intervals')} profile"
        )
    if cons and points:
        raise FitrulesError(
            # raised under fit and predict (a saved fit's constraints), which has no --constraint
            # flag words: Python reads --predict with --constraint as predict with constraints
            "--predict with --constraint: the leave-one-cell-out refits of prediction "
            "intervals do not keep constraints; fit with them, then predict from the fit for "
            "the value and its standard error"
        )
    return cons


def _fit_data(g: Grid, f: Form, cells) -> dict:
    """What a fit records of its grid."""
    return {
        "path": g.label,
        "sha256": g.sha256,
        "runs": len(g.runs),
        "cells": len(cells),
        "where": list(g.where),
        "derive": list(g.derive),
        "metric": g.metric,
        "unit": g.unit,
        "excluded": g.summary()["excluded"],
        **g.handling(f.bound_variables),
    }


def _misfit_parts(g, f, cells, result, obj, level, w):
    """The leave-one-cell-out misfit of the fit, the effect the grid's seed ids share
    across cells (which the fit absorbed) and the fit's response to it."""
    from fitrules.engine.intervals import (
        NO_SHARED_IDS,
        heldout_fit,
        no_offset_reason,
        offset_response,
        seed_noise,
        seed_offset,
    )

    noise = seed_noise(g, f.bound_variables, obj)
    offset = seed_offset(g, cells, obj, noise)
    note = NO_SHARED_IDS if offset is not None else no_offset_reason(g, cells)
    heldout = heldout_fit(f, cells, result.constants, noise, obj, level, offset=offset,
                          offset_note=note)  # fmt: skip
    heldout.check()
    response = None
    if offset is not None:
        response = offset_response(
            f, cells.X, cells.y, result.constants, obj, offset.shares, offset.relative, w
        )
    return heldout, offset, response
