"""fr.allocate: the loss-optimal split of each budget between two variables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fitrules.base.errors import FitrulesError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    Bounds,
    Fix,
    FormLike,
    GridLike,
    check_customising,
    check_objective,
)
from fitrules.jobs.options import ALLOCATE
from fitrules.jobs.public.fit import fit

if TYPE_CHECKING:  # the result types, for annotations only
    from fitrules.jobs.allocate import Allocation
    from fitrules.jobs.fit import FittedForm


@api_terms
def allocate(
    grid: GridLike | None, form: FormLike | FittedForm, *,
    cost: str = ALLOCATE.cost, budgets: str | float | Sequence[float] = ALLOCATE.budgets,
    intervals: str = ALLOCATE.intervals, family: str = ALLOCATE.family,
    objective: str = ALLOCATE.objective, delta: float = ALLOCATE.delta,
    weights: str = ALLOCATE.weights, fix: Fix = None, bounds: Bounds = None,
    resamples: int = ALLOCATE.resamples, level: float = ALLOCATE.level,
    seed: int = ALLOCATE.seed, bootstrap: str = ALLOCATE.bootstrap,
) -> Allocation:  # fmt: skip
    """The loss-optimal split of each budget between the two variables a cost names.

    Fits ``form`` (or takes a fit), then, for each budget C, finds the values of the cost's
    two variables that spend C with the lowest fitted loss: in closed form when the fit is
    ``E + A*x**-alpha + B*y**-beta``, numerically along the cost otherwise (see
    :mod:`fitrules.engine.allocation`).

    Parameters
    ----------
    grid : Grid, DataFrame, path or None
        The results table (``None``: the default grid, or with a fitted ``form``).
    form : str, Form or FittedForm
        A name, ``"NAME = EXPR"``, a :class:`Form`, or a :class:`FittedForm` (then ``grid``
        is None, and the fitting and bootstrap options, which it would not use, are
        refused).
    cost : str
        The cost of a run, a product of powers of two of the form's variables
        (``"6*N*D"``, the training compute of a language model).
    budgets : str, float or sequence of float
        Budgets of the cost: a number, a list, ``"1e20,1e21"`` or a log-spaced range
        ``"LOW:HIGH:COUNT"``.
    intervals : {"covariance", "bootstrap", "none"}
        ``"covariance"`` (the delta method on the fit's Jacobian covariance),
        ``"bootstrap"`` (percentiles over the fit's bootstrap refits: ``resamples``,
        ``seed``, ``bootstrap``, which are refused with the other two, as they would be
        ignored) or ``"none"`` (``level`` is then refused). Both carry the constants'
        uncertainty only.
    family : {"none", "default"}, optional
        ``"default"``: beside ``form``, the default family of scaling laws in the cost's
        two variables (the Chinchilla form, one with an interaction, a sum of two power laws
        in either variable, a power law in the second broken at a fitted value), each fitted
        with the same options and allocated; the result gains each form's answer
        (``.forms``), the interval over the forms the grid cannot tell apart (an F test of
        their residual sums against the best-fitting one's) and a note wherever they
        disagree by more than ``form``'s own interval is wide. Needs the grid (not a fitted
        form).
    objective : str
        The training objective, as for :func:`fit`.
    delta : float
        The Huber delta of ``log_huber``, as for :func:`fit`.
    weights : str
        How each cell counts in the fit, as for :func:`fit`.
    fix : dict or sequence of str, optional
        Constants held at a value, as for :func:`fit`.
    bounds : dict or sequence of str, optional
        Bounds of nonlinear constants, as for :func:`fit`.
    resamples : int
        Bootstrap refits (with ``intervals="bootstrap"``).
    level : float
        The intervals' level.
    seed : int
        The bootstrap's seed.
    bootstrap : str
        The bootstrap's kind, as for :func:`fit`.

    Returns
    -------
    Allocation
        ``.table`` (one row per budget), ``.exponents``, ``.plot_frontier()``, ``.to_json()``.

    Raises
    ------
    FitrulesError
        For a budget that is not positive, a cost that names a variable the form does not
        read or is not a product of powers, a fitted loss that does not fall in both
        variables, or an option given that would be ignored (see ``intervals``).

    Examples
    --------
    >>> law = "chin(N, D) = E + A/N**alpha + B/D**beta"
    >>> a = fr.allocate(g, law, budgets="1e20:1e24:5")  # doctest: +SKIP
    >>> a.exponents["N"]["value"], a.table[["budget", "N", "D"]]  # doctest: +SKIP
    """
    check(locals())
    from fitrules.jobs.allocate import run
    from fitrules.jobs.fit import FittedForm

    if isinstance(form, FittedForm):
        fitted = form
    else:
        fitted = fit(grid, form, objective=objective, delta=delta, weights=weights, fix=fix,
                     bounds=bounds, intervals=intervals == "bootstrap", resamples=resamples,
                     seed=seed, level=level, bootstrap=bootstrap)  # fmt: skip
    result = run(fitted, cost, budgets, intervals, level,
                 _family_fits(grid, fitted, cost, family, objective, delta, weights, intervals,
                              resamples, seed, level, bootstrap))  # fmt: skip
    return made_from(result, *getattr(fitted, "inputs", ()))


def _family_fits(grid, fitted, cost, family, objective, delta, weights, intervals, resamples,
                 seed, level, bootstrap) -> list:  # fmt: skip
    """(name, FittedForm or why it has none) of each candidate form of ``family``."""
    import numpy as np

    from fitrules.engine.allocation import parse_cost
    from fitrules.jobs.allocate import default_family

    if family == "none":
        return []
    c = parse_cost(cost, fitted.form.bound_variables, fitted.form.name)
    X = fitted.cells.X
    scale = {v: float(np.exp(np.log(np.asarray(X[v], float)).mean())) for v in (c.x, c.y)}
    out: list = []
    for name, expr, bounds in default_family(c.x, c.y, scale[c.x], scale[c.y]):
        try:
            out.append((name, fit(grid, f"{name} = {expr}", objective=objective, delta=delta,
                                  weights=weights, bounds=bounds,
                                  intervals=intervals == "bootstrap", resamples=resamples,
                                  seed=seed, level=level, bootstrap=bootstrap)))  # fmt: skip
        except FitrulesError as e:
            out.append((name, str(e)))
    return out


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.allocate's arguments) gives before any grid is read or
    form fitted: the command line calls this before it takes its outputs, fr.allocate
    first, the command line's checks first."""
    from fitrules.engine.intervals import check_bootstrap_options
    from fitrules.jobs.allocate import parse_budgets
    from fitrules.jobs.fit import FittedForm

    v = {o.name: o.value for o in ALLOCATE.python} | dict(values)
    check_objective(v["objective"], v["delta"])
    check_customising(v["fix"], v["bounds"], None, None)
    parse_budgets(v["budgets"], param("budgets"))
    if v["intervals"] == "bootstrap":
        check_bootstrap_options(v["resamples"], v["seed"], v["level"])
    ALLOCATE.check(v)
    if isinstance(v["form"], FittedForm):
        if v["family"] != "none":
            raise FitrulesError(
                f"{param('family')} {v['family']!r} fits each candidate form to the grid, "
                "which a fitted form does not bring: give the grid and the form"
            )
        if v.get("grid") is not None:
            raise FitrulesError("give the grid or a fitted form, not both (grid=None with a fit)")
        if v["intervals"] == "bootstrap" and v["form"].bootstrap is None:
            raise FitrulesError(
                "intervals 'bootstrap' needs a fit with a bootstrap: fit with intervals=True, "
                "or use intervals='covariance'"
            )
    _check_used(v)


# the options that set the fit's bootstrap, and those that make the fit
BOOTSTRAP_OPTIONS = ("resamples", "seed", "bootstrap")
FITTING_OPTIONS = ("objective", "delta", "weights", "fix", "bounds")


def _given(v: Mapping[str, Any], name: str) -> bool:
    """Whether the option ``name`` was given a value other than its default."""
    value, default = v[name], getattr(ALLOCATE, name)
    if default is None:
        return value is not None
    same = isinstance(value, type(default)) and not isinstance(value, bool) and value == default
    return not same


def _check_used(v: Mapping[str, Any]) -> None:
    """Refuse an option allocate would not use (it would be silently ignored): the bootstrap's
    options unless the intervals are the bootstrap's of a fit made here, the level when no
    intervals are made, the fitting options with a form already fitted."""
    from fitrules.jobs.fit import FittedForm

    if isinstance(v["form"], FittedForm):
        given = [n for n in FITTING_OPTIONS + BOOTSTRAP_OPTIONS if _given(v, n)]
        if given:
            raise FitrulesError(
                f"{', '.join(map(param, given))} would be ignored: a fitted form brings its "
                "fit (and its bootstrap); leave them out, or give the form to fit it here"
            )
    elif v["intervals"] != "bootstrap":
        given = [n for n in BOOTSTRAP_OPTIONS if _given(v, n)]
        if given:
            raise FitrulesError(
                f"{', '.join(map(param, given))} would be ignored: the bootstrap's options are "
                f"used only with {param('intervals')} 'bootstrap'; leave them out, or ask for "
                "those intervals"
            )
    if v["intervals"] == "none" and _given(v, "level"):
        raise FitrulesError(
            f"{param('level')} {v['level']!r} would be ignored: {param('intervals')} 'none' "
            "makes no intervals; leave it out"
        )
