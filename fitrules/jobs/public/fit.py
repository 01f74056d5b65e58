"""fr.fit and fr.load_fit: one form fitted on every cell of a grid, and a saved fit made
again from its data."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, FormError, SavedFitError, api_terms, param
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
from fitrules.jobs.saved_fit import SavedFit, read_saved_fit, shown
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
    seed_sd: float | None = None, seed_pool: str | Sequence[str] | None = None,
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
    seed_sd : float, optional
        One seed id's shared effect as an sd relative to the value (absolute under
        ``abs_ls``), when known from outside the grid (earlier runs, a paper): the intervals
        for a mean over new seed ids take it as known (a normal quantile) instead of
        estimating it from the grid's few seed ids; with one seed id in every cell it gives
        them an interval at all (see
        :func:`~fitrules.engine.intervals.offset.given_seed_offset`).
    seed_pool : str or sequence of str, optional
        Filters (like ``where``, e.g. ``"lr == 1e-3"``) each naming another slice of the
        grid's file whose seed variance is pooled with the grid's, for more degrees of
        freedom; refused when a slice's seed noise differs from the grid's (F tests at 5%,
        see :func:`~fitrules.engine.intervals.offset.pooled_seed_offset`).

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
                     constraints=constraints, seeds=(seed_sd, seed_pool))  # fmt: skip
    fitted.call = _fit_call(g, objective, delta, weights, tune, tune_seeds, fitted.call,
                            bootstrap, resamples, seed, level,
                            [c.text for c in fitted.constraints.items]
                            if fitted.constraints else None, (seed_sd, seed_pool))  # fmt: skip
    return made_from(fitted, g)


def grid_and_forms(grid, forms, tune, tune_seeds, fix, bounds, by, shared):
    """The grid read and tuned, its tuning (or None) and the forms read and given their fixed
    values, bounds and groups: how fr.fit, fr.compare and fr.design begin."""
    g, tuning = tune_first(as_grid(grid), tune, tune_seeds)
    return g, tuning, customised(as_forms(forms), fix, bounds, by, shared)


# what a saved fit uses of fit's options: the points to predict and the new runs of their
# intervals (its form and data are the saved fit's)
SAVED_FIT_USES = ("grid", "form", "predict", "runs")


def check_saved(values: Mapping[str, Any]) -> None:
    """Refuse what a saved fit (the command line's ``fit`` of a saved fit) would not use:
    every fitting, interval and bootstrap option given away from its default, since the saved
    fit brings its fit and its intervals; the points and runs are checked as :func:`check`
    checks them."""
    v = {o.name: o.value for o in FIT.python} | dict(values)
    given = [o.name for o in FIT.python
             if o.name not in SAVED_FIT_USES and _differs(v[o.name], o.value)]  # fmt: skip
    if given:
        raise FitrulesError(
            f"{', '.join(map(param, given))} would be ignored: a saved fit brings its fit and "
            f"its intervals; leave them out, or fit here with {param('form')}"
        )
    _check_points(v["predict"])
    check_runs(v["runs"])


def _differs(value, default) -> bool:
    """Whether an option's ``value`` is not its ``default`` (an empty list is no value)."""
    if default is None or default == ():
        return value is not None and len(value if isinstance(value, Sized) else [0]) > 0
    return not (type(value) is type(default) and value == default)


def with_predictions(fitted: FittedForm, predict=(), runs: int | None = None) -> FittedForm:
    """``fitted`` (a saved fit, loaded) with its predictions at the points ``predict``, each
    with the interval of ``runs`` new runs when given, as :func:`fit` makes them."""
    fitted.predictions = [fitted.predict(p, runs) for p in predict]
    return fitted


def _check_points(given) -> None:
    """Refuse a point of ``predict`` written wrong (a dict is checked against the grid's
    columns, later)."""
    from fitrules.engine.intervals import parse_point

    for point in given if isinstance(given, list | tuple) else [given]:
        if isinstance(point, str):
            parse_point(point)


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.fit's arguments) gives before any grid is read: the command
    line calls this before it takes its outputs, fr.fit first. The command line's checks
    come first, so that a value two checks refuse is refused in its words."""
    from fitrules.engine.intervals import check_bootstrap_options

    v = {o.name: o.value for o in FIT.python} | dict(values)
    check_objective(v["objective"], v["delta"])
    check_customising(v["fix"], v["bounds"], v["by"], v["shared"])
    if v["intervals"] or v["predict"]:
        check_bootstrap_options(v["resamples"], v["seed"], v["level"])
        _check_points(v["predict"])
    check_runs(v["runs"])
    FIT.check(v)
    arg.text(v["bootstrap"], "bootstrap")
    if not isinstance(v["form"], Form | str):
        raise FormError(
            f"form {v['form']!r}: give one form: a name, 'NAME = EXPR' or a fitrules.Form"
        )


def _fitted(g: Grid, f: Form, *, objective, delta, weights, intervals, predict, runs, bootstrap,
            resamples, seed, level, constraints, seeds=(None, None)) -> FittedForm:  # fmt: skip
    """``f`` (bound) fitted on every cell of ``g``, with the intervals and predictions asked
    for (``seeds``: fit's ``seed_sd`` and ``seed_pool``); its ``call`` is what its intervals
    were (True, False or "profile")."""
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
            g, f, cells, result, obj, level, w, seeds
        )
    elif not cons:  # made on a bare predict's first use: every route gives its interval
        if seeds[0] is not None or seeds[1]:  # refused now, not at the first predict
            _seeds_offset(g, f, cells, obj, seeds)
        fitted.misfit_source = lambda: _misfit_or_none(g, f, cells, result, obj, level, w,
                                                       seeds)  # fmt: skip
    if profile:
        from fitrules.engine.profile import profile_intervals

        fitted.profile = profile_intervals(f, cells.X, cells.y, result.constants, obj, level, w,
                                           cons or None)  # fmt: skip
    fitted.predictions = [fitted.predict(p, runs) for p in points]
    fitted.call = "profile" if profile else with_intervals
    return fitted


def _fit_call(g, objective, delta, weights, tune, tune_seeds, intervals, bootstrap, resamples,
              seed, level, constraints=None, seeds=(None, None)) -> dict:  # fmt: skip
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
        **({"seed_sd": seeds[0]} if seeds[0] is not None else {}),
        **({"seed_pool": _filters(seeds[1])} if seeds[1] else {}),
    }  # fmt: skip


SAVED_FIT_RTOL = 1e-6  # a refit's constants within this of the saved ones are the same fit


def load_fit(source: str | Path, data: GridLike | None = None) -> FittedForm:
    """A fit saved by :meth:`FittedForm.to_json`: from the file alone, or refitted on its
    data to check it.

    The saved file records the form (with its fixed values, bounds and groups), the fit's
    arguments, the data's sha256 and (unless saved without its cells) the fit's ingredients
    (``standalone``: the cells, the Jacobian covariance, the leave-one-cell-out and
    bootstrap refits, in exact hexadecimal floats). Its structure is checked first, once,
    against :data:`fitrules.jobs.saved_fit.SAVED_FIT`. Without ``data`` the fit is made from
    its ingredients: no table is read and nothing is refitted, so it predicts, allocates and
    renders exactly as the saved one did. With ``data`` (or for a file without ingredients,
    from the recorded path) the data must be the same bytes; the form is refitted with the
    recorded arguments, and its constants must equal the saved ones, both the decimals and
    their exact values (``call.constants_exact``).

    Parameters
    ----------
    source : str or Path
        The JSON file ``to_json(path)`` wrote, or its text.
    data : Grid, DataFrame or path, optional
        The table the fit was made from, to check the fit against it by a refit; read with
        the recorded ``where``, ``derive``, metric and seed column unless it is a Grid.

    Returns
    -------
    FittedForm
        The saved fit.

    Raises
    ------
    SavedFitError
        (:class:`fitrules.base.errors.SavedFitError`, a :class:`FitrulesError` and a
        ``ValueError``) in one line that names the file: for a path that cannot be read,
        text that is not JSON, a record that lacks a key the loader reads or holds a value
        there that it does not allow (a wrong type, a number that is not finite, a choice it
        does not know; the line names the key, the value and what is allowed), a form or
        arguments that the fit refuses, data at the recorded path that is not what the fit
        was made from (its sha256 differs), or a refit whose constants differ from the
        saved ones or from their exact values.
    FitrulesError
        For ``data`` that cannot be read with the recorded ``where``, ``derive``, metric and
        seed column.

    Examples
    --------
    >>> f = fr.fit(g, "composition")  # doctest: +SKIP
    >>> f.to_json("fit.json")  # doctest: +SKIP
    >>> fr.load_fit("fit.json").predict(H=8, keep=0.25)  # doctest: +SKIP
    """
    saved = read_saved_fit(source)
    if data is None and "standalone" in saved.doc:
        return standalone(saved, source)
    g, form, arguments = saved_call(saved, data)
    with saved.refusals():
        refit = fit(g, form, **arguments)
    return with_saved_values(saved, refit)


def standalone(saved: SavedFit, source=None) -> FittedForm:
    """The fit ``saved`` records, made from its ``standalone`` ingredients: no data read,
    no refit; its constants as exactly as saved (checked against their decimals)."""
    from fitrules.jobs.standalone import standalone_fit

    form, _, _ = _saved_form(saved)
    doc = saved.doc
    exact = doc["call"].get("constants_exact") or {}
    now = {n: float.fromhex(exact[n]) if n in exact else doc["constants"].get(n, math.nan)
           for n in doc["standalone"]["constants"]}  # fmt: skip
    constants = _checked_constants(saved, form.name, now, "the exact (call.constants_exact)")
    fitted = standalone_fit(saved, form, constants)
    is_path = not (isinstance(source, str) and source.lstrip().startswith("{"))
    return made_from(fitted, source if is_path and source is not None else None)


def _saved_form(saved: SavedFit) -> tuple[Form, Form, dict]:
    """A saved fit's form as given (with its fixed values, bounds and groups), the form
    :func:`fit` is handed, and the arguments of :func:`fit` that made it; what the record
    holds is refused in the file's name."""
    call, spec = saved.doc["call"], saved.doc["form"]
    bounds = spec.get("bounds") or {}
    arguments = dict(
        objective=call["objective"], delta=call["delta"], weights=call["weights"],
        fix=spec.get("fixed"),
        # json_ready wrote an infinite bound as null: no bound on that side
        bounds={k: (-math.inf if lo is None else lo, math.inf if hi is None else hi)
                for k, (lo, hi) in bounds.items()} or None,
        by=spec.get("by"), shared=spec.get("shared"), tune=call["tune"],
        tune_seeds=call["tune_seeds"], intervals=call["intervals"],
        bootstrap=call["bootstrap"], resamples=call["resamples"], seed=call["seed"],
        level=call["level"], constraints=call.get("constraints"),
        seed_sd=call.get("seed_sd"), seed_pool=call.get("seed_pool"),
    )  # fmt: skip
    with saved.refusals():
        form = Form(spec["name"], spec["expression"], tuple(spec["variables"]))
        check(arguments | {"form": form})
        custom = customised([form], arguments["fix"], arguments["bounds"], arguments["by"],
                            arguments["shared"])[0]  # fmt: skip
    return custom, form, arguments


def saved_call(saved: SavedFit, data) -> tuple[Grid, Form, dict]:
    """A saved fit's data read again (the same bytes, or refused in one line), its form and
    the arguments of :func:`fit` that made it; what the record holds is refused in the
    file's name (:meth:`SavedFit.refusals`), the data given as ``data`` in its own."""
    from fitrules.model.grids import IN_MEMORY

    doc, label = saved.doc, saved.label
    recorded, read = doc["data"], doc["call"]["grid"]
    _, form, arguments = _saved_form(saved)
    if data is None:
        if recorded["path"] in (None, IN_MEMORY):
            raise SavedFitError(
                f"{label}: the fit was made from a table in memory; give it again with data="
            )
        # as given then (relative to that working directory), else where it was then
        places = list(dict.fromkeys(p for p in (recorded["path"], read["path"]) if p))
        data = next((p for p in places if _is_file(p)), None)
        if data is None:
            raise SavedFitError(
                f"{label}: the data it was fitted on is not at "
                f"{' nor at '.join(map(shown, places))}; give it with data="
            )
        with saved.refusals():
            g = _read_again(data, read)
    else:
        g = data if isinstance(data, Grid) else _read_again(data, read)
    if g.sha256 != recorded["sha256"]:
        raise SavedFitError(
            f"{g.label}: not the data {label} was fitted on (sha256 "
            f"{str(recorded['sha256'])[:12]} saved, {str(g.sha256)[:12]} now); refit it "
            "with fitrules.fit, or give the data it was made from with data="
        )
    return g, form, arguments


def _is_file(path: str) -> bool:
    """Whether ``path`` names a file; False for a name the system refuses (too long)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _read_again(data: GridLike, read: dict) -> Grid:
    """``data`` read as the saved fit's grid was (``read``: its ``call.grid``)."""
    return load_grid(data, metric=read["metric"], where=tuple(read["where"]),
                     derive=tuple(read["derive"]), seed_col=read["seed_col"],
                     unit=read["unit"])  # fmt: skip


def _saved_constants(saved: SavedFit, refit) -> dict[str, float]:
    """The saved constants, checked against the refit's (see :func:`_checked_constants`)."""
    return _checked_constants(saved, refit.form.name, refit.result.constants)


def _checked_constants(saved: SavedFit, form_name: str, fitted: dict,
                       whose: str = "the refit's") -> dict[str, float]:  # fmt: skip
    """The saved constants, each as exactly as saved (``call.constants_exact``, else the
    decimal), once the decimal and the exact value are both the refit's (within
    :data:`SAVED_FIT_RTOL`) and the decimal is the exact value rounded as ``to_json``
    rounds; else refused in one line naming the constant and both values."""
    from fitrules import __version__
    from fitrules.base.util import SIGNIFICANT

    doc, label = saved.doc, saved.label
    decimals, exact = doc["constants"], doc["call"].get("constants_exact") or {}
    names = ", ".join(fitted)
    for key, table in (("constants", decimals), ("call.constants_exact", exact)):
        for name in table:
            if name not in fitted:
                raise SavedFitError(
                    f"{label}: {key} names {shown(name)}, which is not a constant of form "
                    f"{form_name!r} ({names})"
                )
    out = {}
    for name, now in fitted.items():
        if name not in decimals:
            raise SavedFitError(
                f"{label}: constants lacks {name!r}, a constant of form {form_name!r} "
                f"({names}); a saved fit records every one"
            )
        value = float.fromhex(exact[name]) if name in exact else None
        for saved_value, key in ((decimals[name], "constants"), (value, "call.constants_exact")):
            if saved_value is not None and not math.isclose(
                now, saved_value, rel_tol=SAVED_FIT_RTOL, abs_tol=1e-300
            ):
                raise SavedFitError(
                    f"{label}: {whose} {name} = {now!r} is not the saved {saved_value!r} "
                    f"({key}; saved by fitrules {str(doc.get('fitrules_version'))[:40]}, this "
                    f"is {__version__})"
                )
        if value is not None and float(f"{value:.{SIGNIFICANT}g}") != decimals[name]:
            raise SavedFitError(
                f"{label}: the saved {name} = {decimals[name]!r} (constants) is not its exact "
                f"value {exact[name]} = {value!r} (call.constants_exact) rounded; one of them "
                "was changed"
            )
        out[name] = float(decimals[name]) if value is None else value
    return out


def with_saved_values(saved: SavedFit, refit):
    """``refit`` checked against the saved constants and then given the saved values
    themselves (a refit may differ in the last digits, e.g. with the number of threads), so
    that it predicts exactly what the saved fit did; its predictions made again."""
    constants = _saved_constants(saved, refit)
    refit.result = dataclasses.replace(refit.result, constants=constants)
    refit.predictions = [refit.predict(p["point"], p.get("runs")) for p in refit.predictions]
    return refit


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


def _misfit_or_none(g, f, cells, result, obj, level, w, seeds=(None, None)):
    """The leave-one-cell-out refits of a fit made without intervals, at the fit's level
    (checked by then), or None when there can be none (too few cells or refits): the
    prediction then gives its standard error alone, as before."""
    try:
        return _misfit_parts(g, f, cells, result, obj, arg.level(level), w, seeds)[0]
    except FitrulesError:
        return None


def _filters(pool) -> list[str]:
    """``seed_pool`` as a list of filters."""
    return [pool] if isinstance(pool, str) else list(pool or ())


def _seeds_offset(g, f, cells, obj, seeds, noise=None):
    """The grid's seed offset: estimated from its seed ids, or as ``seeds`` (fit's
    ``seed_sd`` and ``seed_pool``) say: a given sd, or the variance pooled over slices of
    the grid's file."""
    from fitrules.engine.intervals import seed_offset
    from fitrules.engine.intervals.offset import given_seed_offset, pooled_seed_offset

    sd, pool = seeds
    if sd is not None:
        off = given_seed_offset(g, cells, float(sd), obj, noise)
        if off is None:
            raise FitrulesError(
                f"{param('seed_sd')} {sd!r}: no seed id is shared across {g.label}'s cells "
                "(no seed column, or fresh ids per cell), so there is no seed effect for it "
                "to stand for"
            )
        return off
    if pool:
        return pooled_seed_offset(g, cells, [(w, _slice(g, w)) for w in _filters(pool)],
                                  obj, noise)  # fmt: skip
    return seed_offset(g, cells, obj, noise)


def _slice(g: Grid, where: str) -> Grid:
    """The slice of ``g``'s file that ``where`` selects (``g``'s derived columns, metric
    and seed column; its own filters replaced by ``where``)."""
    from fitrules.model.grids import load_grid

    if g.source is None or not Path(g.source).is_file():
        raise FitrulesError(
            f"{param('seed_pool')} {where!r}: {g.label} was given as a table in memory, and a "
            "slice is read from the grid's file; load the grid from its file"
        )
    try:
        return load_grid(g.source, metric=g.metric, where=[where], derive=list(g.derive),
                         seed_col=g.seed)  # fmt: skip
    except FitrulesError as e:  # its words name the filter as where's
        raise FitrulesError(
            f"{param('seed_pool')} {where!r}, a slice of {g.label}'s file: {e}"
        ) from None


def _misfit_parts(g, f, cells, result, obj, level, w, seeds=(None, None)):
    """The leave-one-cell-out misfit of the fit, the effect the grid's seed ids share
    across cells (which the fit absorbed) and the fit's response to it."""
    from fitrules.engine.intervals import (
        NO_SHARED_IDS,
        heldout_fit,
        no_offset_reason,
        offset_response,
        seed_noise,
    )

    noise = seed_noise(g, f.bound_variables, obj)
    offset = _seeds_offset(g, f, cells, obj, seeds, noise)
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
