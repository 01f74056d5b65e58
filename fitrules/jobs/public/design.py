"""fr.design: which runs to do next."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.errors import api_terms
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    Bounds,
    Fix,
    FormLike,
    GridLike,
    as_forms,
    check_customising,
    check_objective,
)
from fitrules.jobs.options import DESIGN
from fitrules.jobs.public.fit import grid_and_forms
from fitrules.jobs.public.shared_docs import shared_params


@api_terms
@shared_params
def design(
    grid: GridLike | None = None, forms: FormLike | Sequence[FormLike] | None = None,
    budget: int = DESIGN.budget, tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None, *,
    candidates: str | None = None, target: str | None = None,
    seeds: int = DESIGN.seeds, max_seeds: int = DESIGN.max_seeds,
    power: float = DESIGN.power, alpha: float = DESIGN.alpha,
    splits: int = DESIGN.splits, resamples: int = DESIGN.resamples, seed: int = DESIGN.seed,
    objective: str = DESIGN.objective, delta: float = DESIGN.delta,
    fix: Fix = None, bounds: Bounds = None, by: str | None = None,
    shared: Sequence[str] | str | None = None,
):  # fmt: skip
    """Which runs to do next: rank candidate cells and choose a batch under ``budget``.

    Parameters
    ----------
    {grid}
    forms : str, Form or sequence of str or Form, optional
        Two or more rival forms (names, ``"NAME = EXPR"`` or :class:`Form`), or one form with
        ``target=``.
    budget : int, optional
        Runs to spend (default 24).
    tune : str or sequence of str, optional
        Reduce the grid by tuning these factors first (see :func:`tune`); the batch then runs
        at every tuned level.
    {tune_seeds}
    candidates : str, optional
        The cells to consider, e.g. ``"H=2,8,32;keep=1/32"`` (default: the grid's levels and
        geometric midpoints, minus the cells already run).
    target : str, optional
        With one form: the cell whose prediction the batch should pin down.
    seeds : int, optional
        Seeds per chosen cell, at least (default 3).
    max_seeds : int, optional
        Seeds per chosen cell, at most (default 12).
    power : float, optional
        The power for the seeds a cell needs (default 0.8).
    alpha : float, optional
        The two-sided level for the seeds a cell needs (default 0.05).
    splits : int, optional
        Random-split refits (default 100).
    resamples : int, optional
        Seed-bootstrap refits (default 100).
    seed : int, optional
        Seed of the splits and the bootstrap (default 0).
    {objective}
    {delta}
    fix : dict of str to float or sequence of str, optional
        Constants held at a value, applied to every form, as for :func:`fit`.
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, applied to every form, as for :func:`fit`.
    by : str, optional
        Fit each form per level of this column, jointly, as for :func:`fit`.
    shared : sequence of str or str, optional
        The constants common to all groups of ``by``, as for :func:`fit`.

    Returns
    -------
    fitrules.jobs.design.Design
        ``candidates`` and ``chosen`` tables, ``spec`` (the batch as a simulate spec, or
        None with ``no_spec_reason``), ``tuning``, ``to_dict()``.

    Examples
    --------
    >>> import fitrules as fr
    >>> d = fr.design(forms=["composition", "additive"], budget=12)  # doctest: +SKIP
    >>> d.chosen[["H", "omega", "seeds"]]  # doctest: +SKIP
    """
    check(locals())
    from fitrules.jobs.design import design as run_design

    g, tuning, chosen = grid_and_forms(grid, forms, tune, tune_seeds, fix, bounds, by, shared)
    budget, seeds, max_seeds, splits, resamples = (
        arg.count(v, n)
        for v, n in zip((budget, seeds, max_seeds, splits, resamples), COUNTS, strict=True)
    )
    d = run_design(g, chosen, candidates, budget, seeds, max_seeds, float(power), float(alpha),
                   splits, resamples, arg.seed(seed), target, objective=objective,
                   delta=delta)  # fmt: skip
    return made_from(_with_spec(d, g, tuning), g)


COUNTS = ("budget", "seeds", "max_seeds", "splits", "resamples")  # design's whole numbers


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.design's arguments) gives before any grid is read: the
    command line calls this before it takes its outputs, fr.design first. The command line's
    checks come first (a value of the wrong type is left to the declared checks), so that a
    value two checks refuse is refused in its words."""
    from fitrules.jobs.design import check_design_options

    v = {o.name: o.value for o in DESIGN.python} | dict(values)
    check_customising(v["fix"], v["bounds"], v["by"], v["shared"])
    whole = all(isinstance(v[n], numbers.Integral) and not isinstance(v[n], bool) for n in COUNTS)
    real = all(isinstance(v[n], numbers.Real) and not isinstance(v[n], bool)
               for n in ("power", "alpha"))  # fmt: skip
    if whole and real and isinstance(v["target"], str | None):
        check_design_options(len(as_forms(v["forms"])), *(v[n] for n in DESIGN_ORDER))
    check_objective(v["objective"], v["delta"])
    DESIGN.check(v)
    for n in COUNTS:
        arg.count(v[n], n)
    arg.seed(v["seed"])
    arg.real(v["power"], "power", 0.0, 1.0)
    arg.real(v["alpha"], "alpha", 0.0, 1.0)
    arg.text(v["candidates"], "candidates", none=True)
    arg.text(v["target"], "target", none=True)


# check_design_options's arguments after the number of forms
DESIGN_ORDER = ("budget", "seeds", "max_seeds", "power", "alpha", "splits", "resamples", "target")


def _with_spec(d, g, tuning):
    """The design ``d`` with its tuning, its batch as a simulate spec (or why there is none)
    and, for a tuned grid, the note that each chosen cell runs at every tuned level."""
    from fitrules.jobs.design import batch_spec, no_spec_reason

    tuned = None if tuning is None else dict(tuning.describe()["levels"])
    d.tuning = tuning
    d.spec = batch_spec(d, g, tuned)
    d.no_spec_reason = no_spec_reason(d, g, tuned) if d.spec is None else None
    if tuned and len(d.chosen):
        per = math.prod(len(v) for v in tuned.values())
        d.notes.append(
            f"the grid is tuned: each chosen cell runs at every level of "
            f"{', '.join(tuned)} ({per} levels), {per * int(d.chosen['runs'].sum())} runs in "
            "all, and score tunes the new runs the same way"
        )
    return d
