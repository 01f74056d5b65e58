"""fr.tune and fr.validate: a grid's factors tuned per configuration, and a grid checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitrules.base.errors import FitrulesError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import GridLike, as_grid, tune_first
from fitrules.jobs.public.shared_docs import shared_params


@api_terms
@shared_params
def tune(grid: GridLike | None, factors: Sequence[str] | str, tune_seeds: Sequence | None = None):
    """Tune ``factors`` per configuration, choosing on some seeds and measuring on others.

    A configuration is one combination of the grid's other varying factors
    (``grid.varying_factors`` minus ``factors``); the levels tried are the combinations of
    the tuned factors present for it (kept or set aside). Several factors are tuned jointly.

    Selection: the level with the lowest mean metric over the choosing seeds wins. A run set
    aside as diverged or with a non-finite metric (``grid.excluded``) counts as +inf, so a
    level that diverged on a choosing seed cannot win unless every level did; a run that is
    simply absent is left out of its level's mean. Ties go to the smallest level (in the
    order of the levels, lexicographic over several factors).

    Schemes:

    - ``tune_seeds=None``, cross-fitting: each configuration's seeds are sorted and split
      by alternating position, half A = positions 0, 2, 4, ... and half B = positions 1, 3,
      5, ... (seeds 0..5 give A = 0, 2, 4 and B = 1, 3, 5). The level chosen on A supplies
      B's runs (fold ``"A->B"``) and the level chosen on B supplies A's (``"B->A"``), so
      every seed's output run was chosen without that seed.
    - ``tune_seeds`` given: the level is chosen on those seeds, and only the other seeds'
      runs at that level are output (fold ``"tune seeds"``).

    An evaluated seed whose run at the chosen level is missing or diverged is left out of
    ``runs`` and counted (``choices.n_left_out``, and a warning).

    Parameters
    ----------
    {grid}
    factors : str or sequence of str
        The column or columns to tune, e.g. ``["lr"]``.
    tune_seeds : sequence of int, optional
        The seeds to choose on; None (default) cross-fits.

    Returns
    -------
    Tuning
        ``runs`` and ``grid`` (the tuned reduction), ``choices``, ``curves``, ``flattery``
        (how much choosing on the same seeds would flatter) and ``warnings``.

    Raises
    ------
    GridError
        If a tuned factor is not a column, has missing values or only one level; if the grid
        has no seed column; if a tune seed is not in the grid, a configuration has no tuning
        seed or no evaluation seed left; or, for cross-fitting, if a configuration has fewer
        than two seeds. The message names the column, seed or configuration.

    Examples
    --------
    >>> import fitrules as fr
    >>> grid = fr.load_grid("data/paired_tuned.csv")  # doctest: +SKIP
    >>> t = fr.tune(grid, ["lr"], tune_seeds=[0, 1, 2])  # doctest: +SKIP
    >>> t.choices[["algo", "chosen_lr", "at_edge"]]  # doctest: +SKIP
    >>> t.grid.cells(["algo"]).table  # doctest: +SKIP
    """
    from fitrules.jobs.tune import tune as run_tune

    g = as_grid(grid)
    return made_from(run_tune(g, factors, tune_seeds), g)


@api_terms
@shared_params
def validate(
    grid: GridLike | None = None,
    *,
    tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None,
):
    """Check a results grid and summarise it: what ``fitrules validate`` prints.

    Runs, cells, levels per factor, seeds per cell, the rows set aside and the columns left
    out or pooled, and a per-seed effect shared across cells when the runs show one. A
    grid whose seed ids mean different things in different cells is refused, as
    :func:`compare` refuses it.

    Parameters
    ----------
    {grid}
    {tune}
    {tune_seeds}

    Returns
    -------
    fitrules.jobs.validate.Validation
        ``.facts`` (a dict), ``.grid``, ``.tuning``; ``print(v)`` in words,
        ``v.to_json(path)``, HTML in a notebook.

    Raises
    ------
    GridError
        For a table that cannot be read or checked; the message names the file and column.

    Examples
    --------
    >>> v = fr.validate(fr.load_example("main"))  # doctest: +SKIP
    >>> v.facts["cells"], v.facts["seeds_per_cell"]  # doctest: +SKIP
    """
    check_validate(locals())
    from fitrules.jobs.validate import validate as run_validate

    g, tuning = tune_first(as_grid(grid), tune, tune_seeds)
    return made_from(run_validate(g, tuning), g)


def check_validate(values: Mapping[str, Any]) -> None:
    """Refuse the grid given twice on the command line (its PATH and ``--data``), before
    anything is read; fr.validate calls this first too."""
    path, data = values.get("path"), values.get("data")
    if path is not None and data is not None:
        raise FitrulesError(
            f"give the grid once: PATH ({path}) or {param('grid')} ({data}), not both"
        )
