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
    intervals: str = ALLOCATE.intervals,
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
        is None and the fitting options are not used).
    cost : str
        The cost of a run, a product of powers of two of the form's variables
        (``"6*N*D"``, the training compute of a language model).
    budgets : str, float or sequence of float
        Budgets of the cost: a number, a list, ``"1e20,1e21"`` or a log-spaced range
        ``"LOW:HIGH:COUNT"``.
    intervals : {"covariance", "bootstrap", "none"}
        ``"covariance"`` (the delta method on the fit's Jacobian covariance),
        ``"bootstrap"`` (percentiles over the fit's bootstrap refits: ``resamples``,
        ``seed``, ``bootstrap``) or ``"none"``. Both carry the constants' uncertainty only.
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
        read or is not a product of powers, or a fitted loss that does not fall in both
        variables.

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
    result = run(fitted, cost, budgets, intervals, level)
    return made_from(result, *getattr(fitted, "inputs", ()))


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
        if v.get("grid") is not None:
            raise FitrulesError("give the grid or a fitted form, not both (grid=None with a fit)")
        if v["intervals"] == "bootstrap" and v["form"].bootstrap is None:
            raise FitrulesError(
                "intervals 'bootstrap' needs a fit with a bootstrap: fit with intervals=True, "
                "or use intervals='covariance'"
            )
