"""The Grid class: a checked table of runs, its design columns, and its reduction to cells
(:class:`Cells`: the metric's mean over each cell's seeds)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError, param
from fitrules.base.limits import MAX_ABS_VALUE
from fitrules.model.grid_columns import (
    GENERIC_WORDS,
    METRIC_WORDS,
    NON_FACTORS,
    OUTCOMES,
    _line,
    _name_words,
    _plain,
    _shown,
    classify_within_cells,
    digits_note,
    first_non_number,
    level_list,
    per_run_columns,
    rounding_twins,
    where_suggestion,
)
from fitrules.model.grid_derive import derivations
from fitrules.model.grid_reading import IN_MEMORY


@dataclass(frozen=True)
class Cells:
    """Cell means of the metric over one set of variables.

    Attributes
    ----------
    table : one row per cell: the variables, then ``value`` (mean), ``n_seeds``, ``std``, ``sem``.
    variables : the columns that define a cell.
    metric : the metric the values are means of.
    units : the unit of each variable that has one (``{"N": "parameters"}``), for labels.
    """

    table: pd.DataFrame
    variables: tuple[str, ...]
    metric: str
    units: dict = field(default_factory=dict)  # variable -> unit, for axis labels

    def __len__(self) -> int:
        return len(self.table)

    @property
    def y(self) -> np.ndarray:
        return self.table["value"].to_numpy(float)

    @property
    def X(self) -> dict[str, np.ndarray]:
        return {v: self.table[v].to_numpy(float) for v in self.variables}

    def label(self, i: int) -> str:
        row = self.table.iloc[i]
        return ", ".join(f"{v}={_fmt(row[v])}" for v in self.variables)


def _fmt(v: object) -> str:
    if isinstance(v, float | np.floating):
        return f"{float(v):g}"
    return str(v)


def _once(method: Callable) -> Callable:
    """Computed once per grid and handed out as a copy: a grid's runs do not change, and
    its column classification (per-run, outcome-like, factor and continuous columns) reads
    every column several times (a fit's data block made 724 column look-ups a fit)."""

    @functools.wraps(method)
    def wrapper(self, *args):
        memo = self.__dict__.setdefault("_memo", {})  # a frozen dataclass: not a field
        key = (method.__name__, *(tuple(a) if isinstance(a, list | tuple) else a for a in args))
        if key not in memo:
            memo[key] = method(self, *args)
        return copy.deepcopy(memo[key])

    return wrapper


@dataclass(frozen=True)
class Grid:
    """A checked results table.

    Attributes
    ----------
    runs : DataFrame
        The rows kept (metric finite, not diverged), with derived columns added.
    excluded : DataFrame
        Rows set aside, with a ``reason`` column.
    metric : str
        The metric column.
    seed : str or None
        The seed column, if any.
    path : path or None
        Where the table came from, as given (its label in messages); None for a DataFrame.
    sha256 : str or None
        The SHA-256 of the file read.
    where : tuple of str
        The row filters applied.
    derive : tuple of str
        The derived columns' definitions (``"omega = 1/keep - 1"``).
    rows_read : int
        Rows in the table before any filter.
    filtered_out : int
        Rows the ``where`` filters removed.
    name : str
        The file's stem (``"main"``), or ``"DataFrame"``.
    unit : str or None
        The metric's unit, if known.
    harness : bool
        Written by ``fitrules simulate`` (a manifest beside the table says so): the harness's
        column meanings and domain checks apply.
    units : dict
        The unit of each column that has one (``{"N": "parameters"}``), for axis labels.
    row_numbers : ndarray or None
        The 0-based row of the file each run came from (for messages); None if unknown.
    duplicates_dropped : int
        Exact copies of other rows dropped.
    numbers_from_text : tuple of str
        Columns that held numbers as text, read as numbers.
    source : path or None
        The file read, absolute; None for a DataFrame.
    """

    runs: pd.DataFrame
    excluded: pd.DataFrame
    metric: str
    seed: str | None
    path: Path | None = None
    sha256: str | None = None
    where: tuple[str, ...] = ()
    derive: tuple[str, ...] = ()
    rows_read: int = 0
    filtered_out: int = 0
    name: str = field(default="")
    unit: str | None = None
    # written by ``fitrules simulate`` (a manifest beside the table says so): the harness's
    # column meanings and domain checks apply
    harness: bool = False
    # the unit of each column that has one (``{"N": "parameters"}``), for axis labels
    units: dict = field(default_factory=dict)

    # the 0-based row of the file each run came from (for messages); None if unknown
    row_numbers: np.ndarray | None = field(default=None, compare=False, repr=False)
    # exact copies of other rows dropped (drop_duplicates=True)
    duplicates_dropped: int = 0
    # columns that held numbers as text (a Parquet file or an MLflow frame with parameters
    # stored as strings), read as numbers
    numbers_from_text: tuple[str, ...] = ()
    # the file read, absolute (``path`` is its label for messages), None for a DataFrame
    source: Path | None = field(default=None, compare=False, repr=False)

    @property
    def input_file(self) -> Path | None:
        """The file the runs were read from, to be protected from writers: ``source``, or
        ``path`` for a grid made without it (None for a DataFrame)."""
        return self.source if self.source is not None else self.path

    def line_of(self, i: int) -> str:
        """Where run ``i`` (a position in ``runs``) is in the file, for messages.

        Parameters
        ----------
        i : int
            A position in ``runs``.

        Returns
        -------
        str
            ``"line N"`` of the file, or ``"run N"`` when the lines are not known.
        """
        rows = self.row_numbers
        if rows is not None and len(rows) == len(self.runs):
            return f"line {_line(rows[i])}"
        return f"run {i + 1}"

    def __repr__(self) -> str:
        cells = self.summary()["cells"]
        unit = f" ({self.unit})" if self.unit else ""
        where = f", where {' and '.join(self.where)}" if self.where else ""
        return (
            f"Grid({self.label}: {len(self.runs)} runs in {cells} cells, metric "
            f"{self.metric!r}{unit}, {len(self.excluded)} excluded{where})"
        )

    def _repr_html_(self) -> str:
        import html

        from fitrules.base.htmlparts import html_table

        s = self.summary()
        levels = {k: (f"{len(v)} levels" if len(v) > 12 else ", ".join(map(str, v)))
                  for k, v in s["levels"].items()}  # fmt: skip
        rows = pd.DataFrame({"factor": list(levels), "levels": list(levels.values())})
        unit = f" ({self.unit})" if self.unit else ""
        return (
            f"<b>Grid</b> {html.escape(self.label)}: {s['runs']} runs in {s['cells']} cells; "
            f"metric <code>{html.escape(self.metric)}</code>{html.escape(unit)}; excluded: "
            f"{html.escape(', '.join(f'{v} {k}' for k, v in s['excluded'].items()) or 'none')}"
            + html_table(rows)
        )

    @property
    def label(self) -> str:
        """Where the runs came from, for messages: the file, or "DataFrame"."""
        return str(self.path) if self.path is not None else IN_MEMORY

    @property
    def columns(self) -> list[str]:
        return list(self.runs.columns)

    # What each column is (a factor, a per-run label, an outcome, a continuous column) is
    # worked out once per grid, with each column's count of distinct values taken in one
    # pass: the runs of a grid never change once it is made, and validate, compare and fit
    # ask for these many times (a table of 20,000 columns took minutes when each property
    # walked every column again).
    @cached_property
    def _distinct(self) -> pd.Series:
        """Each column's number of distinct values, a missing value counting as one."""
        return self.runs.nunique(dropna=False)

    @cached_property
    def _with_missing(self) -> pd.Series:
        """Whether each column has a missing value."""
        return self.runs.isna().any()

    @cached_property
    def _non_factors(self) -> frozenset[str]:
        from fitrules.model.formats import tracker_metadata

        base = set(NON_FACTORS) if self.harness else set(OUTCOMES)
        return frozenset(base | tracker_metadata(list(self.runs.columns)))

    @property
    def non_factors(self) -> set[str]:
        """Columns that are never design factors: outcomes, and in a table the harness wrote,
        its bookkeeping columns too."""
        return set(self._non_factors)

    @cached_property
    def _per_run(self) -> tuple[str, ...]:
        return tuple(per_run_columns(self.runs, {self.metric, self.seed, *self._non_factors},
                                     self._distinct))  # fmt: skip

    @property
    @_once
    def per_run(self) -> list[str]:
        """Text columns with a different value in every run (names, ids, paths, timestamps):
        they label runs, never cells, and are ignored (and listed once)."""
        return list(self._per_run)

    @_once
    def run_columns(self, variables: Sequence[str]) -> dict:
        """What happens to the columns no form reads that vary within a cell of ``variables``.

        Parameters
        ----------
        variables : sequence of str
            The columns the forms read, which define the cells.

        Returns
        -------
        dict
            ``ignored``: per-run columns (ids, names, paths, timestamps, per-run numbers),
            left out; ``pooled``: columns that look like a factor (few levels, each shared by
            several cells), whose levels each cell's mean pools, with their levels.
        """
        return classify_within_cells(
            self.runs,
            tuple(dict.fromkeys(variables)),
            {self.metric, self.seed, *self._non_factors},
            self._distinct,
        )

    def handling(self, variables: Sequence[str]) -> dict:
        """How the table was taken, for the data block of every result: rows filtered out by
        ``where``, the seed column, per-run columns ignored and factor-like columns pooled
        over the cells of ``variables``.

        Parameters
        ----------
        variables : sequence of str
            The columns the forms read, which define the cells.

        Returns
        -------
        dict
            ``filtered_out``, ``seed_column``, ``ignored_columns`` and ``pooled`` (and
            ``duplicates_dropped`` or ``numbers_from_text`` when the table had them).
        """
        cols = self.run_columns(variables)
        dropped = {"duplicates_dropped": self.duplicates_dropped} if self.duplicates_dropped else {}
        if self.numbers_from_text:
            dropped["numbers_from_text"] = list(self.numbers_from_text)
        return dropped | {
            "filtered_out": int(self.filtered_out),
            "seed_column": self.seed,
            "ignored_columns": list(dict.fromkeys([*self.per_run, *cols["ignored"]])),
            "pooled": cols["pooled"],
        }

    @property
    @_once
    def outcome_like(self) -> dict[str, str]:
        """Numeric columns that look like another outcome of each run, not a design column,
        with why: a name that shares a word with the metric or names a metric (``loss_indist``
        beside ``loss``, ``val/acc``), or, in a grid whose settings were run at several seed
        ids, a different value in every run (a design value repeats across a cell's seeds).
        They are left out of the default variables and of the cell count; a form or
        ``--variables`` that names one still reads it."""
        return dict(self._outcome_like)

    @cached_property
    def _outcome_like(self) -> dict[str, str]:
        skip = {self.metric, self.seed, *self._non_factors, *self._per_run}
        out: dict[str, str] = {}
        own = _name_words(self.metric) - GENERIC_WORDS
        replicated = self._replicated
        n = len(self.runs)
        for c, dtype in self.runs.dtypes.items():
            if c in skip or dtype.kind not in "iuf" or self._distinct[c] < 2:
                continue
            words = _name_words(c)
            if words & own:
                out[c] = f"named like the metric {self.metric!r}"
            elif words & METRIC_WORDS:
                out[c] = f"named like a metric ({sorted(words & METRIC_WORDS)[0]!r})"
            elif replicated and dtype.kind == "f" and self._all_distinct(c, n):
                out[c] = "a value per run, while the grid's settings repeat across seed ids"
        return out

    def _all_distinct(self, c: str, n: int) -> bool:
        """A different value in every one of the ``n`` runs, none missing."""
        return bool(self._distinct[c] == n and not self._with_missing[c])

    @cached_property
    def _replicated(self) -> bool:
        """Whether some setting was run at two or more seed ids: runs that agree in every
        column that repeats (all but the metric and the columns with a value per run)."""
        if self.seed is None or len(self.runs) < 2:
            return False
        skip = {self.metric, self.seed, *self._non_factors, *self._per_run}
        # a column with one value splits no group: only the columns that vary are keys
        keys = [
            c for c in self.runs.columns if c not in skip and 1 < self._distinct[c] < len(self.runs)
        ]
        if not keys:
            return self.runs[self.seed].nunique() > 1
        seeds = self.runs.groupby(keys, dropna=False)[self.seed].nunique()
        return bool((seeds > 1).any())

    @cached_property
    def _factors(self) -> tuple[str, ...]:
        out = []
        skip = {self.metric, self.seed, *self._non_factors, *self._per_run, *self._outcome_like}
        n = len(self.runs)
        for c, dtype in self.runs.dtypes.items():
            if c in skip:
                continue
            continuous = dtype.kind == "f" and n > 3 and self._all_distinct(c, n)
            # values that differ only by rounding are one level written twice, not a
            # continuous column: as a factor they are reported, never pooled
            if not continuous or rounding_twins(self.runs[c]) is not None:
                out.append(c)
        return tuple(out)

    @property
    @_once
    def factors(self) -> list[str]:
        """Design columns: everything but the metric, seed, outcome/bookkeeping columns,
        columns that look like another outcome (:attr:`outcome_like`) and per-run labels."""
        return list(self._factors)

    @property
    @_once
    def varying_factors(self) -> list[str]:
        return [c for c in self._factors if self._distinct[c] > 1]

    def cells(self, variables: Sequence[str], positive: bool = False) -> Cells:
        """Reduce the runs to cells over ``variables`` (mean, seed count, standard error).

        Parameters
        ----------
        variables : sequence of str
            The columns the forms read.
        positive : bool, optional
            Require every run's metric to be > 0 (relative and log objectives).

        Returns
        -------
        Cells
            One row per cell: the variables, the mean metric, the seed count and the standard
            error.

        Raises
        ------
        GridError
            If a variable is missing, is the metric, the seed or an outcome column, is not
            numeric, has missing, non-finite or huge (beyond 1e100) values; if ``positive``
            and a run's metric is not > 0; or if a seed appears twice in one cell. Columns no
            form reads that vary within a cell are not refused: see :meth:`run_columns`.
        """
        variables = tuple(dict.fromkeys(variables))
        where = self.label
        for v in variables:
            if v not in self.runs.columns:
                raise GridError(f"{where}: no column {v!r}; columns: {', '.join(self.columns)}")
            if v == self.metric:
                raise GridError(
                    f"{where}: column {v!r} is the metric ({param('metric')} {self.metric}); a "
                    "form may "
                    "not read the values it predicts"
                )
            if v == self.seed:
                raise GridError(
                    f"{where}: column {v!r} names a run's seed, not a condition; a form may "
                    "not read it"
                )
            if v in OUTCOMES:
                raise GridError(
                    f"{where}: column {v!r} is an outcome of each run, not a condition; a "
                    "form may not read it"
                )
            self._check_not_derived_from_outcome(v)
            col = self.runs[v]
            if col.dtype.kind not in "biuf":
                i = first_non_number(col)
                raise GridError(
                    f"{where}: column {v!r} is read by a form but is not numeric "
                    f"({_shown(col.iloc[i])} in {self.line_of(i)}{digits_note(col.iloc[i])})"
                )
            if col.isna().any():
                i = int(np.flatnonzero(col.isna().to_numpy())[0])
                raise GridError(f"{where}: column {v!r} has a missing value in {self.line_of(i)}")
            vals = col.to_numpy(float)
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(vals) | (np.abs(vals) > MAX_ABS_VALUE)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise GridError(
                    f"{where}: column {v!r} has {vals[i]:g} in {self.line_of(i)}; a variable "
                    f"a form reads must be finite and within +-{MAX_ABS_VALUE:g}"
                )
        if len(self.runs) == 0:
            raise GridError(f"{where}: no runs left to fit")
        if positive:
            m = self.runs[self.metric].to_numpy(float)
            if (m <= 0).any():
                i = int(np.flatnonzero(m <= 0)[0])
                raise GridError(
                    f"{where}: column {self.metric!r} has {m[i]:g} in {self.line_of(i)}; "
                    "relative and log objectives need every run's value > 0 (or use "
                    f"{param('objective')} abs_ls)"
                )
        groups = self.runs.groupby(list(variables), sort=True)
        handled = self.run_columns(variables)
        pooled = list(handled["pooled"])
        for c in [*pooled, *handled["ignored"]]:
            twins = rounding_twins(self.runs[c])
            if twins is not None:  # one level written twice: reported, never pooled
                raise GridError(
                    f"{where}: runs in one cell differ in {c!r} ({level_list(self.runs[c])}), "
                    f"but {twins[0]!r} and {twins[1]!r} differ only by rounding: round the "
                    f"column; no form reads {c!r}, so to keep one level filter with where "
                    f'"{where_suggestion(c, twins[0])}"'
                )
        if self.seed is not None:
            # a seed may recur across the levels of a pooled factor, never within one
            key = [*variables, *pooled, self.seed]
            dup = self.runs.duplicated(key, keep=False)
            if dup.any():
                i = int(np.flatnonzero(dup.to_numpy())[0])
                same = (self.runs[key] == self.runs[key].iloc[i]).all(axis=1).to_numpy()
                i, j = (int(k) for k in np.flatnonzero(same)[:2])
                cell = ", ".join(
                    f"{c}={_fmt(_plain(self.runs[c].iloc[i]))}" for c in [*variables, *pooled]
                )
                raise GridError(
                    f"{where}: seed {_plain(self.runs[self.seed].iloc[i])!r} appears more "
                    f"than once in cell {cell} ({self.line_of(i)} and {self.line_of(j)}); "
                    "one run per seed and cell (a column that tells them apart is a factor "
                    "a form should read, or a filter)"
                )
        agg = groups[self.metric].agg(["mean", "count", "std"]).reset_index()
        agg.columns = [*variables, "value", "n_seeds", "std"]
        agg["sem"] = agg["std"] / np.sqrt(agg["n_seeds"])
        return Cells(agg, variables, self.metric, {v: self.units[v] for v in variables
                                                    if v in self.units})  # fmt: skip

    def check_seeds(self) -> None:
        """Refuse a seed that appears twice among runs that differ in no design column (the
        cells ``validate`` counts), as :meth:`cells` refuses it for the cells a form reads.

        Raises
        ------
        GridError
            Naming the seed, the cell and both lines.
        """
        if self.seed is None or not len(self.runs):
            return
        by = self.varying_factors + self.continuous
        key = [*by, self.seed]
        dup = self.runs.duplicated(key, keep=False)
        if not dup.any():
            return
        i = int(np.flatnonzero(dup.to_numpy())[0])
        same = (self.runs[key] == self.runs[key].iloc[i]).all(axis=1).to_numpy()
        i, j = (int(k) for k in np.flatnonzero(same)[:2])
        cell = ", ".join(f"{c}={_fmt(_plain(self.runs[c].iloc[i]))}" for c in by) or "the one cell"
        raise GridError(
            f"{self.label}: seed {_plain(self.runs[self.seed].iloc[i])!r} appears more than "
            f"once in cell {cell} ({self.line_of(i)} and {self.line_of(j)}); one run per seed "
            "and cell"
        )

    def _check_not_derived_from_outcome(self, v: str) -> None:
        """A derived column computed from the metric, the seed or an outcome would let a
        form read what it predicts: refuse it as the column itself is refused."""
        sources = derivations(self.derive).get(v, set())
        banned = [s for s in sources if s == self.metric or s == self.seed or s in OUTCOMES]
        if banned:
            what = (
                "the metric"
                if banned[0] == self.metric
                else "a run's seed"
                if banned[0] == self.seed
                else "an outcome of each run"
            )
            raise GridError(
                f"{self.label}: column {v!r} is derived from {banned[0]!r}, {what}; a form "
                "may not read it, directly or through a derivation"
            )

    @property
    @_once
    def continuous(self) -> list[str]:
        """Design columns with a different value in every run (e.g. a compute budget): not
        factors, but a cell is one value of them."""
        return list(self._continuous)

    @cached_property
    def _continuous(self) -> tuple[str, ...]:
        skip = {
            self.metric, self.seed, *self._non_factors, *self._factors, *self._per_run,
            *self._outcome_like,
        }  # fmt: skip
        return tuple(c for c in self.runs.columns if c not in skip and self._distinct[c] > 1)

    @_once
    def summary(self) -> dict:
        """Runs, cells, levels per factor, seeds per cell, excluded rows.

        Cells are the distinct combinations of the varying factors and the continuous
        columns: runs that differ in nothing but the seed (and the outcome columns). A form
        that reads only some of them pools the others; ``compare`` counts cells over the
        variables its forms read.
        """
        varying = self.varying_factors
        fixed = {
            c: _plain(self.runs[c].iloc[0])
            for c in self.factors
            if c not in varying and len(self.runs)  # every run may have been set aside
        }
        levels = {c: _sorted_levels(self.runs[c]) for c in varying}
        by = self.cells_by
        if by:
            counts = self.runs.groupby(by, dropna=False).size()
        else:
            counts = pd.Series([len(self.runs)])
        m = self.runs[self.metric]
        return {
            "path": self.label,
            "sha256": self.sha256,
            "rows_read": self.rows_read,
            **({"duplicates_dropped": self.duplicates_dropped} if self.duplicates_dropped else {}),
            **(
                {"numbers_from_text": list(self.numbers_from_text)}
                if self.numbers_from_text
                else {}
            ),
            "filtered_out": self.filtered_out,
            "runs": len(self.runs),
            "excluded": self.excluded["reason"].value_counts().sort_index().to_dict()
            if len(self.excluded)
            else {},
            "metric": self.metric,
            "metric_range": [float(m.min()), float(m.max())] if len(m) else None,
            "seed_column": self.seed,
            "cells": int(len(counts)),
            "seeds_per_cell": {
                "min": int(counts.min()),
                "median": float(counts.median()),
                "max": int(counts.max()),
            }
            if len(counts)
            else None,
            "cells_by": by,
            "levels": levels,
            "continuous": self.continuous,
            "outcome_like": self.outcome_like,
            "per_run_columns": self.per_run,
            "fixed": fixed,
            "unit": self.unit,
        }

    @property
    def cells_by(self) -> list[str]:
        """The columns a cell is a combination of: the varying factors and continuous columns."""
        return self.varying_factors + self.continuous


def _sorted_levels(col: pd.Series) -> list:
    """The distinct values of ``col`` in order, a missing one last as nan (a column of text
    with an empty cell holds text and a missing value, which do not sort together)."""
    values = col.unique().tolist()
    present = [v for v in values if not _missing(v)]
    try:
        out = sorted(present)
    except TypeError:  # values of two kinds, which no reader leaves in one column
        out = sorted(present, key=repr)
    return out + [float("nan")] * (len(present) < len(values))


def _missing(v: object) -> bool:
    missing = pd.isna(v)
    return bool(missing) if isinstance(missing, bool | np.bool_) else False


def derived_inputs(grid: Grid) -> set[str]:
    """Every column of the table that a derivation of ``grid`` reads."""
    return set().union(*derivations(grid.derive).values()) if grid.derive else set()
