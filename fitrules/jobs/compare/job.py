"""compare(): bind the forms, run the splits, summarise them and test the pairs, into a
:class:`~fitrules.jobs.compare.result.Comparison`; and the memory it needs, refused before
any fit when too large."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from fitrules.base.error_metrics import DEFAULT_ERROR_METRIC, ErrorMetric, error_metric
from fitrules.base.errors import param
from fitrules.base.limits import (
    HELDOUT_WEIGHTS,
    LEVEL,
    OBJECTIVES,
    SEED_PROTOCOLS,
    VERDICT_TRAIN_FRAC,
    WEIGHTS,
    check_memory,
)
from fitrules.engine.fit import WEIGHT_KEY, FitOptions, Objective, cell_weights, fit_memory
from fitrules.engine.guard import GuardOptions
from fitrules.engine.stats import grid_seed_effect
from fitrules.jobs.compare.result import Comparison
from fitrules.jobs.compare.scoring import (
    _descriptive_splits,
    _Fitting,
    _held_seeds,
    _heldout_weights,
    _score_forms,
    noise_floor,
)
from fitrules.jobs.compare.summaries import _cell_table, _summarise, set_aside_warnings
from fitrules.jobs.compare.verdicts import (
    _leaves_one_out,
    _paired,
    _verdict_results,
    family,
    verdict_splitter,
)
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import RandomSplit


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
    metric: str | ErrorMetric = DEFAULT_ERROR_METRIC,
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
    metric : the held-out error's metric, a name of
        :data:`fitrules.base.error_metrics.ERROR_METRICS` (default ``relative``: the absolute
        relative error in percent) or an :class:`~fitrules.base.error_metrics.ErrorMetric`; the
        summaries, verdicts, cell errors and noise floor are in its unit, which the result
        records (:attr:`Comparison.error_metric`).

    Raises
    ------
    FormError, GridError, SplitError
        For forms the grid cannot support or splits that cannot be made.
    """
    splitter = splitter or RandomSplit()
    objective = objective or Objective()
    guard = guard or GuardOptions()
    metric = error_metric(metric)
    bound, variables, cells = _bind_and_cells(grid, forms, test_grid, objective)
    n = len(cells)
    w = cell_weights(weights, cells.table, objective)
    masks, labels = _descriptive_splits(splitter, cells, bound)
    wanted = family([f.name for f in bound], pairs)
    random = isinstance(splitter, RandomSplit)
    vsplit = verdict_splitter(splitter, n, verdict_train_frac) if random else None
    _check_compare_memory(bound, n, masks, vsplit, options, objective)
    hw = _heldout_weights(cells, heldout_weights)
    floor, no_noise = noise_floor(cells, masks, hw, metric)
    held, seeds_note = (
        (None, "cells") if test_grid is not None else _held_seeds(grid, cells, seeds, splitter)
    )
    # the weights ride with the cells into every fit (fit.WEIGHT_KEY)
    X = cells.X if w is None else {**cells.X, WEIGHT_KEY: w}
    fitting = _Fitting(
        X, cells.y, objective, options, guard, on_progress, keep_degenerate, hw, metric
    )
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
        error_metric=metric.as_dict(grid.unit),
    )


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
        f"use fewer {param('splits')} or forms",
    )


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
        "error_metric": fitting.metric.name,
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
