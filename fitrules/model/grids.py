"""Results grids: load a long table (one row a run), check it, and reduce it to cells.

A cell is one combination of the variables the forms read; its value is the mean of the
metric over the runs (seeds) in it, with the seed count and standard error kept. Rows flagged
``diverged`` or whose metric is not finite are set aside and counted, never silently dropped.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base import arguments
from fitrules.base.errors import ExpressionError, FitrulesError, GridError, with_fixes
from fitrules.base.limits import MAX_ABS_VALUE
from fitrules.base.util import sha256_file
from fitrules.model import expr as ex

METRIC_DEFAULTS = ("loss", "val_loss")
SEED_COLUMNS = ("seed",)
# Columns the harness writes that describe a run's outcome or bookkeeping, not its design.
# They are set aside only in tables the harness wrote: in anyone else's table a column called
# ``n_params`` may well be the factor a form reads.
NON_FACTORS = {
    "diverged",
    "train_loss",
    "wall_s",
    "n_params",
    "spec",
    "spec_sha256",
    "run",
    "run_id",
    "loss",
    "val_loss",
    "loss_final",  # the quadratic backend's outcomes
    "rounds_run",
}
# Columns that record what a run produced: a form that read one would predict the metric
# from an outcome of the same run, so no form may read them (nor the metric, nor the seed).
OUTCOMES = {"loss", "val_loss", "train_loss", "diverged", "wall_s", "loss_final", "rounds_run"}
# Words that name a metric: a numeric column whose name has one (or a word of the metric's
# own name) is another outcome of each run, not a design column (``loss_indist``, ``val/acc``)
METRIC_WORDS = {"loss", "ppl", "perplexity", "acc", "accuracy", "nll", "bpb", "bpc", "xent"}
GENERIC_WORDS = {"val", "valid", "validation", "train", "eval", "test", "final", "last", "mean",
                 "min", "max", "avg", "best", "summary", "metrics", "metric"}  # fmt: skip


def _name_words(name: str) -> set[str]:
    """The lower-case words of a column name (split at anything not a letter)."""
    return {w for w in re.split(r"[^a-z]+", str(name).lower()) if w}


# Domain checks for the harness's columns: name -> (test, what is allowed). They hold for
# tables ``fitrules simulate`` wrote (its manifest beside them says so), where ``M`` is a
# number of workers; in another table ``M = 0.07`` may be a model size in billions.
DOMAIN = {
    "keep": (lambda v: (v > 0) & (v <= 1), "keep must be in (0, 1]"),
    "H": (lambda v: (v >= 1) & np.isfinite(v), "H must be finite and >= 1"),
    "M": (lambda v: (v >= 1) & np.isfinite(v), "M must be finite and >= 1"),
    "omega": (lambda v: (v >= 0) & np.isfinite(v), "omega must be finite and >= 0"),
}


# Tables written by ``fitrules simulate`` (they carry these columns) report losses in nats per
# character and wall time in seconds; any other table's unit is what --unit says, or unknown.
HARNESS_COLUMNS = ("spec", "spec_sha256")
HARNESS_UNITS = {"loss": "nats", "val_loss": "nats", "train_loss": "nats", "wall_s": "s"}
# ... and the harness's variables that have a unit (keep, omega and lr have none)
HARNESS_VARIABLE_UNITS = {"H": "inner steps", "M": "workers", "steps": "steps", "width": "units"}
IN_MEMORY = "DataFrame"

DEFAULT_GRID = "main.csv"
DEFAULT_WHERE = ("lr == 3e-4",)


def _data_file(name: str) -> Path:
    from fitrules.base.paths import data_dir

    return data_dir() / name


DEFAULT_PAIRED = _data_file("paired_tuned.csv")
# the default paired comparison tunes lr per arm on these seeds and measures on the others
DEFAULT_PAIRED_TUNE = (("lr",), "0,1,2")


def default_grid(where: Sequence[str] | None = None) -> tuple[Path, list[str]]:
    """The committed main grid at the inner learning rate the composition rule is tested at."""
    from fitrules.base.paths import data_dir

    return data_dir() / DEFAULT_GRID, list(DEFAULT_WHERE) + list(where or [])


def display_path(path: Path) -> str:
    """``path`` relative to the working directory or the checkout, never this machine's root.

    The data shipped inside an installed package shows as ``data/NAME``, as in a checkout.
    """
    from fitrules.base.paths import packaged_data_dir, project_root

    path = Path(path)
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of links: shown as given
        return str(path) if not path.is_absolute() else path.name
    try:
        return str(Path("data") / resolved.relative_to(packaged_data_dir()))
    except ValueError:
        pass
    for base in (Path.cwd(), project_root()):
        try:
            return str(resolved.relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path) if not path.is_absolute() else path.name


def derivations(derive: Sequence[str]) -> dict[str, set[str]]:
    """Each derived column -> the columns of the table it is computed from, through any
    chain of derivations (``b = a*2`` after ``a = loss + 1`` reads ``loss``)."""
    out: dict[str, set[str]] = {}
    for text in derive:
        name, _, rhs = text.partition("=")
        try:
            read = ex.names(ex.parse(rhs))
        except ExpressionError:
            continue  # load_grid has refused it already
        sources: set[str] = set()
        for n in read:
            sources |= out.get(n, {n})
        out[name.strip().strip("`")] = sources
    return out


def derived_inputs(grid: Grid) -> set[str]:
    """Every column of the table that a derivation of ``grid`` reads."""
    return set().union(*derivations(grid.derive).values()) if grid.derive else set()


def _line(index: int) -> int:
    return int(index) + 2  # 1-based line in the file, after the header


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

    @property
    def non_factors(self) -> set[str]:
        """Columns that are never design factors: outcomes, and in a table the harness wrote,
        its bookkeeping columns too."""
        from fitrules.model.formats import tracker_metadata

        base = set(NON_FACTORS) if self.harness else set(OUTCOMES)
        return base | tracker_metadata(list(self.runs.columns))

    @property
    def per_run(self) -> list[str]:
        """Text columns with a different value in every run (names, ids, paths, timestamps):
        they label runs, never cells, and are ignored (and listed once)."""
        return per_run_columns(self.runs, {self.metric, self.seed, *self.non_factors})

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
            self.runs, tuple(dict.fromkeys(variables)), {self.metric, self.seed, *self.non_factors}
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
    def outcome_like(self) -> dict[str, str]:
        """Numeric columns that look like another outcome of each run, not a design column,
        with why: a name that shares a word with the metric or names a metric (``loss_indist``
        beside ``loss``, ``val/acc``), or, in a grid whose settings were run at several seed
        ids, a different value in every run (a design value repeats across a cell's seeds).
        They are left out of the default variables and of the cell count; a form or
        ``--variables`` that names one still reads it."""
        skip = {self.metric, self.seed, *self.non_factors, *self.per_run}
        out: dict[str, str] = {}
        own = _name_words(self.metric) - GENERIC_WORDS
        replicated = self._replicated()
        for c in self.runs.columns:
            col = self.runs[c]
            if c in skip or col.dtype.kind not in "iuf" or col.nunique(dropna=False) < 2:
                continue
            words = _name_words(c)
            if words & own:
                out[c] = f"named like the metric {self.metric!r}"
            elif words & METRIC_WORDS:
                out[c] = f"named like a metric ({sorted(words & METRIC_WORDS)[0]!r})"
            elif replicated and col.dtype.kind == "f" and col.nunique() == len(col):
                out[c] = "a value per run, while the grid's settings repeat across seed ids"
        return out

    def _replicated(self) -> bool:
        """Whether some setting was run at two or more seed ids: runs that agree in every
        column that repeats (all but the metric and the columns with a value per run)."""
        if self.seed is None or len(self.runs) < 2:
            return False
        skip = {self.metric, self.seed, *self.non_factors, *self.per_run}
        keys = [
            c
            for c in self.runs.columns
            if c not in skip and self.runs[c].nunique(dropna=False) < len(self.runs)
        ]
        if not keys:
            return self.runs[self.seed].nunique() > 1
        seeds = self.runs.groupby(keys, dropna=False)[self.seed].nunique()
        return bool((seeds > 1).any())

    @property
    def factors(self) -> list[str]:
        """Design columns: everything but the metric, seed, outcome/bookkeeping columns,
        columns that look like another outcome (:attr:`outcome_like`) and per-run labels."""
        out = []
        skip = {self.metric, self.seed, *self.non_factors, *self.per_run, *self.outcome_like}
        for c in self.runs.columns:
            if c in skip:
                continue
            col = self.runs[c]
            continuous = col.dtype.kind == "f" and len(col) > 3 and col.nunique() == len(col)
            # values that differ only by rounding are one level written twice, not a
            # continuous column: as a factor they are reported, never pooled
            if not continuous or rounding_twins(col) is not None:
                out.append(c)
        return out

    @property
    def varying_factors(self) -> list[str]:
        return [c for c in self.factors if self.runs[c].nunique(dropna=False) > 1]

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
                    f"{where}: column {v!r} is the metric (--metric {self.metric}); a form may "
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
                raise GridError(
                    f"{where}: column {v!r} is read by a form but is not numeric "
                    f"(e.g. {_shown(col.iloc[0])})"
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
                    "--objective abs_ls)"
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
    def continuous(self) -> list[str]:
        """Design columns with a different value in every run (e.g. a compute budget): not
        factors, but a cell is one value of them."""
        skip = {
            self.metric, self.seed, *self.non_factors, *self.factors, *self.per_run,
            *self.outcome_like,
        }  # fmt: skip
        return [
            c for c in self.runs.columns if c not in skip and self.runs[c].nunique(dropna=False) > 1
        ]

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
        levels = {c: sorted(self.runs[c].unique().tolist()) for c in varying}
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


# ---------------------------------------------------------------- a user's table as it comes
# A column that varies within cells is a factor when it has at most this many levels and
# every level is shared by at least two cells; otherwise it labels runs.
MAX_POOLED_LEVELS = 12


def per_run_columns(runs: pd.DataFrame, skip: set) -> list[str]:
    """Text columns (names, ids, paths, timestamps) with a different value in every run."""
    if len(runs) < 2:
        return []
    return [
        c
        for c in runs.columns
        if c not in skip
        and runs[c].dtype.kind not in "biufc"
        and runs[c].nunique(dropna=False) == len(runs)
    ]


def classify_within_cells(runs: pd.DataFrame, variables: tuple[str, ...], skip: set) -> dict:
    """Columns no form reads that vary within some cell over ``variables``: per-run labels
    (``ignored``) or factor-like columns whose levels the cell means pool (``pooled``).

    A column is factor-like when it has few levels (at most ``MAX_POOLED_LEVELS``, and fewer
    than half the runs) and each level occurs in at least two cells: an optimiser, a
    learning rate, a hardware type. Ids, names, paths, timestamps and per-run measurements
    have a level per run, or levels confined to one cell.
    """
    ignored: list[str] = []
    pooled: dict[str, list] = {}
    if not variables or len(runs) == 0:
        return {"ignored": ignored, "pooled": pooled}
    groups = runs.groupby(list(variables), sort=True, dropna=False)
    for c in runs.columns:
        if c in variables or c in skip:
            continue
        if not (groups[c].nunique(dropna=False) > 1).any():
            continue
        n_levels = runs[c].nunique(dropna=False)
        pairs = runs[[*variables, c]].drop_duplicates()
        cells_per_level = pairs.groupby(c, dropna=False).size()
        if (
            n_levels <= MAX_POOLED_LEVELS
            and 2 * n_levels <= len(runs)
            and (cells_per_level >= 2).all()
        ):
            pooled[c] = sorted((_plain(v) for v in runs[c].unique()), key=str)
        else:
            ignored.append(c)
    return {"ignored": ignored, "pooled": pooled}


def parse_units(units: dict[str, str] | str | None, columns: list[str], label: str) -> dict:
    """``"N=parameters,D=tokens"`` (or a dict) checked against the table's columns."""
    if units is None:
        return {}
    if isinstance(units, str):
        pairs = {}
        for part in filter(None, (p.strip() for p in units.split(","))):
            name, sep, unit = part.partition("=")
            if not sep or not name.strip() or not unit.strip():
                raise GridError(f"--units {units!r}: expected NAME=UNIT pairs, e.g. N=parameters")
            pairs[name.strip().strip("`")] = unit.strip()
        units = pairs
    if not isinstance(units, dict):
        raise GridError(f"units: expected a dict of column -> unit, got {type(units).__name__}")
    for name in units:
        if name not in columns:
            raise GridError(
                f"--units: {label} has no column {name!r}; columns: {', '.join(columns)}"
            )
    return {str(k): str(v) for k, v in units.items()}


def where_suggestion(column: str, value: Any) -> str:
    """A ``where`` condition keeping one level of ``column`` that the parser accepts: a name
    that is not an identifier goes in backticks, as in ``pandas.eval``."""
    name = column if column.isidentifier() else f"`{column}`"
    v = _plain(value)
    shown = f"{v:g}" if isinstance(v, float) else repr(v) if isinstance(v, str) else str(v)
    return f"{name} == {shown}"


def pooled_note(column: str, levels: Sequence[Any]) -> str:
    """What was done with a factor-like column no form reads, and how to change it."""
    from fitrules.model import formats

    shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in levels)
    head = (
        f"{column!r} varies within cells and looks like a factor ({len(levels)} levels: "
        f"{shown}): each cell pools its levels"
    )
    if formats.seed_like([column]):  # never filtered to one seed
        return f"{head}; if it names each run's seed, {formats.seed_hint(column)}"
    status = formats.status_filter(column, levels) if formats.is_status(column) else None
    if status is not None:
        return f'{head}; to keep the runs that finished, filter with where "{status}"'
    # a level that names a failure is never the one suggested
    ok = [v for v in levels if str(v).strip().lower() not in formats.FAILED] or list(levels)
    return (
        f'{head}; to keep one, filter with where "{where_suggestion(column, ok[0])}", or name '
        f"{column!r} as a variable of a form"
    )


def written_by_harness(path: Path | None, columns: Sequence[str]) -> bool:
    """True for a table ``fitrules simulate`` wrote: its columns name the spec, and the
    manifest the harness writes beside it (``NAME.manifest.json``) names the same spec."""
    if path is None or not all(c in columns for c in HARNESS_COLUMNS):
        return False
    import json

    from fitrules.base.inputs import read_text

    manifest = path.with_name(path.stem + ".manifest.json")
    try:
        # a pipe or device put there is not a manifest (and a read would never end)
        return "spec_sha256" in json.loads(read_text(manifest, str(manifest), GridError))
    except (GridError, ValueError, TypeError, RecursionError):
        return False


ROUNDING = 1e-6  # distinct values closer than this (relative) are one level rounded twice


def rounding_twins(col: pd.Series) -> tuple[float, float] | None:
    """Two distinct values of a float column that differ only by rounding, or None."""
    if col.dtype.kind != "f":
        return None
    vals = np.unique(col.to_numpy(float))
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return None
    scale = np.maximum(np.abs(vals[:-1]), np.abs(vals[1:]))
    close = np.flatnonzero(np.diff(vals) <= ROUNDING * scale)
    return (float(vals[close[0]]), float(vals[close[0] + 1])) if len(close) else None


MAX_LEVELS_SHOWN = 6  # levels named in one message; a column like job_id has thousands


def level_list(col: pd.Series) -> str:
    """The distinct values of ``col`` for a message, at most :data:`MAX_LEVELS_SHOWN`."""
    levels = sorted((_plain(v) for v in col.unique()), key=str)
    shown = ", ".join(_shown(v, 24) for v in levels[:MAX_LEVELS_SHOWN])
    more = len(levels) - MAX_LEVELS_SHOWN
    return shown + (f", ... ({len(levels)} levels)" if more > 0 else "")


def to_float(col: pd.Series) -> pd.Series:
    """``col`` as floats: text becomes NaN, an integer beyond double precision +-inf."""

    def one(v: Any) -> float:
        try:
            return float(v)
        except OverflowError:
            return -np.inf if str(v).lstrip().startswith("-") else np.inf
        except (TypeError, ValueError):
            return np.nan

    try:
        return pd.to_numeric(col, errors="coerce").astype(float)
    except (OverflowError, TypeError, ValueError):
        return col.map(one).astype(float)


def _shown(v: Any, limit: int = 40) -> str:
    """A cell's value for a message: its repr, cut in the middle when long."""
    r = repr(_plain(v))
    return r if len(r) <= limit else r[: limit // 2] + "..." + r[-limit // 2 :]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _first_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def _read(path: Path) -> pd.DataFrame:
    label = display_path(path)
    if not path.exists():
        raise GridError(f"{label}: file not found")
    if path.is_dir():
        raise GridError(f"{label}: is a directory; give a results table (CSV or Parquet)")
    if not path.is_file():  # a pipe with no writer would wait forever; a device never ends
        raise GridError(
            f"{label}: is not a regular file (a pipe, socket or device); give a results table "
            "(CSV or Parquet) saved to a file"
        )
    from fitrules.base.inputs import check_table_size

    check_table_size(path, label, GridError)  # a gzip bomb is counted while streaming
    parquet = path.suffix.lower() in (".parquet", ".pq")
    from fitrules.model import formats

    if not parquet and formats.is_json(path):
        return formats.read_json_runs(path, label)
    try:
        if parquet:
            return pd.read_parquet(path)
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
        names = [str(c).strip() for c in header.iloc[0].tolist()] if len(header) else []
        _check_unique(names, label)
        return pd.read_csv(path, low_memory=False)
    except GridError:
        raise
    except ImportError:
        raise GridError(
            f"{display_path(path)}: cannot read Parquet here (no pyarrow installed); install "
            'the parquet extra (pip install "fitrules[parquet]", which adds pyarrow) or use CSV'
        ) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise GridError(f"{label}: not a readable results table ({_first_line(err)})") from None
    except OSError as err:
        raise GridError(f"{label}: cannot be read ({err.strerror or _first_line(err)})") from None


def _texts(value: Any, name: str) -> tuple[str, ...]:
    """One condition or a sequence of them, as a tuple (:func:`fitrules.base.arguments.texts`)."""
    try:
        return arguments.texts(value, name)
    except FitrulesError:
        raise GridError(f"{name} {value!r}: give a condition as text, or a list of them") from None


def _index_as_columns(df: pd.DataFrame, label: str) -> pd.DataFrame:
    """A named index (``df.set_index("lr")``, kept by Parquet) holds data: its levels become
    columns. An unnamed index is only row labels and is dropped later."""
    names = [n for n in df.index.names if n is not None]
    if not names:
        return df
    clash = [n for n in names if str(n).strip() in {str(c).strip() for c in df.columns}]
    if clash:
        raise GridError(
            f"{label}: the index is named {str(clash[0])!r}, which is also a column; rename "
            "one (the index holds data and becomes a column)"
        )
    return df.reset_index(level=names)


def _plain_dtypes(df: pd.DataFrame, label: str) -> pd.DataFrame:
    """One scalar per cell, in a dtype pandas can group by: half and single precision
    widened to double (pandas cannot index float16), lists and tables refused.

    Raises
    ------
    GridError
        For a cell holding a list, array, tuple, set or table (Parquet list columns).
    """
    narrow = [c for c in df.columns if df[c].dtype.kind == "f" and df[c].dtype.itemsize < 8]
    if narrow:
        df = df.astype({c: float for c in narrow})
    for c in df.columns:
        if df[c].dtype != object:
            continue
        nested = df[c].map(lambda v: isinstance(v, list | tuple | set | dict | np.ndarray))
        if nested.any():
            i = int(np.flatnonzero(nested.to_numpy())[0])
            raise GridError(
                f"{label}: column {c!r} holds a {type(df[c].iloc[i]).__name__} in line "
                f"{_line(df.index[i])}; a results table holds one value per cell (a number or text)"
            )
    # one block per dtype: pandas warns on every later column added to a frame of 100+
    # separate blocks (as read_csv makes for a wide table)
    return df.copy()


def _numbers_from_text(df: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Text columns whose every value parses as a number, read as numbers, and their names.

    A CSV is parsed into numbers by pandas; a Parquet file, a JSON export or a DataFrame
    (``mlflow.search_runs()`` stores parameters as text) may hold ``'20000000'`` where a
    number is meant, and a form could not read it (issue 44). Empty text counts as missing;
    a column with any value that is not a number (``'sync'``, ``'1e-3x'``) stays text, and a
    column of booleans stays as it is."""
    converted = {}
    for c in df.columns:
        col = df[c]
        if col.dtype.kind != "O" and not isinstance(col.dtype, pd.StringDtype):
            continue
        vals = col.dropna()
        if not len(vals) or not vals.map(lambda v: isinstance(v, str)).all():
            continue
        text = vals.str.strip()
        text = text[text != ""]
        if not len(text):
            continue
        try:
            pd.to_numeric(text, errors="raise")
        except (ValueError, TypeError):
            continue
        stripped = col.map(lambda v: v.strip() if isinstance(v, str) else v)
        converted[c] = pd.to_numeric(stripped.replace("", np.nan), errors="coerce")
    if not converted:
        return df, ()
    out = df.copy()
    for c, v in converted.items():
        out[c] = v
    return out, tuple(converted)


def _csv_lines(path: Path, n_rows: int) -> np.ndarray | None:
    """The line of the file each row starts on, counting blank lines (which pandas skips)
    and newlines inside quoted fields; None when the file does not parse the same way."""
    import csv

    starts: list[int] = []
    end = 0
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            for record in reader:
                start, end = end + 1, reader.line_num
                if record:
                    starts.append(start)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return np.array(starts[1:], dtype=np.int64) if len(starts) == n_rows + 1 else None


def _exact_copies(
    df: pd.DataFrame, label: str, drop: bool, refuse: bool = True
) -> tuple[pd.DataFrame, int]:
    """``df`` without rows that repeat an earlier row in every column (a run exported
    twice), and how many went; without ``drop`` such a row is refused (when ``refuse``),
    both lines named."""
    if not isinstance(drop, bool | np.bool_):
        raise GridError(f"drop_duplicates {drop!r}: must be True or False")
    try:
        copies = df.duplicated(keep="first")
    except TypeError:  # unhashable cells are refused later, by name
        return df, 0
    n = int(copies.sum())
    if n == 0:
        return df, 0
    if drop:
        return df[~copies.to_numpy()], n
    if not refuse:
        return df, 0
    i = int(np.flatnonzero(copies.to_numpy())[0])
    same = (df.iloc[:i] == df.iloc[i]) | (df.iloc[:i].isna() & df.iloc[[i]].isna().to_numpy())
    j = int(np.flatnonzero(same.all(axis=1).to_numpy())[0])
    raise with_fixes(
        GridError(
            f"{label}: line {_line(df.index[i])} repeats line {_line(df.index[j])} in every "
            f"column ({n} row{'s are exact copies' if n > 1 else ' is an exact copy'} of "
            "others: a run exported twice?); drop exact copies with --drop-duplicates"
        ),
        ("--drop-duplicates", None),
    )


def _check_unique(names: Sequence[str], label: str) -> None:
    """Refuse a header that names a column twice (pandas would rename one to 'NAME.1')."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise GridError(
                f"{label}: the header names column {n!r} twice; every column needs its own "
                "name (pandas would rename one and a form could read the wrong one)"
            )
        seen.add(n)


def _as_bool(col: pd.Series, where: str) -> pd.Series:
    if col.dtype == bool:
        return col
    text = col.astype(str).str.strip().str.lower()
    ok = text.isin(["true", "false", "1", "0", "1.0", "0.0", "yes", "no"])
    if not ok.all():
        i = col.index[~ok.to_numpy()][0]
        raise GridError(
            f"{where}: column 'diverged' has {_shown(col[i])} in line {_line(i)}; "
            "allowed: true/false, 1/0"
        )
    return text.isin(["true", "1", "1.0", "yes"])


def _eval(node: ex.Node, frame: pd.DataFrame, text: str, where: str, option: str):
    for n in ex.names(node):
        if n not in frame.columns:
            from fitrules.model.formats import backtick_hint

            raise GridError(
                f"{where}: {option} {text!r} names {n!r}, which is not a column"
                f"{backtick_hint(text, list(frame.columns))}; columns: {', '.join(frame.columns)}"
            )
    env = {c: frame[c].to_numpy() for c in ex.names(node)}
    try:
        with np.errstate(all="ignore"):
            return ex.evaluate(node, env)
    except (TypeError, ValueError) as err:
        raise GridError(f"{where}: {option} {text!r} cannot be evaluated ({err})") from None


def _check_arguments(
    source: Any, metric: Any, unit: Any, frame: Any
) -> tuple[Path | None, pd.DataFrame | None]:
    """Refuse arguments of the wrong type; the path read and the frame given."""
    for name, value in (("metric", metric), ("unit", unit)):
        if value is not None and not isinstance(value, str):
            raise GridError(f"{name} {value!r}: must be a column name (text) or None")
    if not isinstance(source, pd.DataFrame | str | Path):
        raise GridError(
            f"source {type(source).__name__}: give a pandas DataFrame or the path of a CSV or "
            "Parquet file"
        )
    path: Path | None
    if isinstance(source, pd.DataFrame):
        frame, path = source, None
    else:
        path = Path(source)
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise GridError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}")
    return path, frame


def _read_table(path: Path | None, frame: pd.DataFrame | None, label: str) -> pd.DataFrame:
    """The table read (or copied), its header checked and its rows labelled by file line."""
    if frame is not None:
        df = frame.copy()
    elif path is not None:
        df = _index_as_columns(_read(path), label)
    if len(df) == 0:
        raise GridError(f"{label}: the table has no rows")
    df.columns = [str(c).strip() for c in df.columns]
    _check_unique(list(df.columns), label)
    df = df.reset_index(drop=True)
    if path is not None and frame is None and path.suffix.lower() not in (".parquet", ".pq"):
        from fitrules.model import formats

        if formats.is_json(path):
            lines = formats.json_lines(path, len(df))  # no header: the run's own line
        else:
            lines = _csv_lines(path, len(df))
        if lines is not None:  # rows labelled so that _line(label) is the line in the file
            df.index = pd.Index(lines - 2)
    return _plain_dtypes(df, label)


def _derive_columns(df: pd.DataFrame, derive: tuple[str, ...], label: str) -> list[str]:
    """Add each ``--derive`` column to ``df``; the names added."""
    derived = []
    for text in derive:
        name, sep, rhs = text.partition("=")
        name = name.strip().strip("`")
        if not sep or not name or not rhs.strip():
            raise GridError(f"--derive {text!r}: expected 'NAME = EXPRESSION'")
        if name in df.columns:
            raise GridError(f"--derive {text!r}: {label} already has a column {name!r}")
        try:
            node = ex.parse(rhs, what=f"--derive {text!r}")
        except ExpressionError as err:
            raise GridError(str(err)) from None
        try:
            values = np.asarray(_eval(node, df, text, label, "--derive"), dtype=float)
        except (TypeError, ValueError):
            raise GridError(
                f"--derive {text!r}: does not give a number on each row of {label}"
            ) from None
        if values.ndim > 1 or (values.ndim == 1 and len(values) != len(df)):
            raise GridError(f"--derive {text!r}: does not give one number per row")
        df[name] = values
        derived.append(name)
    return derived


def _choose_metric(df: pd.DataFrame, metric: str | None, label: str) -> str:
    """The metric column: the one named, or the first default present; a wide table refused."""
    from fitrules.model import formats

    wide = formats.wide_groups(list(df.columns))
    for prefix, family in wide.items():
        if metric in family or (metric is None and not any(m in df for m in METRIC_DEFAULTS)):
            raise GridError(formats.wide_message(label, prefix, family, list(df.columns)))
    if metric is None:
        metric = next((m for m in METRIC_DEFAULTS if m in df.columns), None)
        if metric is None:
            like = formats.metric_like(list(df.columns), METRIC_DEFAULTS)
            also = f" (so does {', '.join(map(repr, like[1:4]))})" if len(like) > 1 else ""
            choose = (
                f"{like[0]!r} looks like one{also}: give --metric {formats.quoted_arg(like[0])}"
                if like
                else "choose one with --metric"
            )
            raise with_fixes(
                GridError(
                    f"{label}: no metric column (looked for {', '.join(METRIC_DEFAULTS)}); "
                    f"{choose}; columns: {', '.join(df.columns)}"
                ),
                *([("--metric", like[0])] if like else []),
            )
    elif metric not in df.columns:
        raise GridError(
            f"{label}: no column {metric!r} for --metric; columns: {', '.join(df.columns)}"
        )
    elif metric in SEED_COLUMNS:
        raise GridError(
            f"{label}: --metric {metric}: is the seed column, which names each run's seed; "
            "choose the column the runs measured"
        )
    return metric


def _metric_as_float(df: pd.DataFrame, metric: str, label: str) -> None:
    """Make the metric column real numbers in ``df``; text, booleans and huge values refused."""
    kind = df[metric].dtype.kind
    if kind in "bc" or (
        kind == "O"
        and df[metric]
        .map(lambda v: isinstance(v, bool | complex | np.bool_ | np.complexfloating))
        .any()
    ):
        what = {"b": "true/false", "c": "complex"}.get(kind, "true/false or complex")
        raise GridError(
            f"{label}: column {metric!r} holds {what} values; the metric must be real numbers"
        )
    values = to_float(df[metric])
    text_rows = (
        values.isna()
        & df[metric].notna()
        & ~df[metric].astype(str).str.strip().str.lower().isin(["nan", "inf", "-inf", ""])
    )
    if text_rows.any():
        i = df.index[text_rows.to_numpy()][0]
        raise GridError(
            f"{label}: column {metric!r} holds text ({_shown(df.loc[i, metric])} in line "
            f"{_line(i)}); the metric must be numeric"
        )
    df[metric] = values.astype(float)
    with np.errstate(invalid="ignore"):
        huge = np.isfinite(df[metric].to_numpy()) & (np.abs(df[metric].to_numpy()) > MAX_ABS_VALUE)
    if huge.any():
        i = int(np.flatnonzero(huge)[0])
        raise GridError(
            f"{label}: column {metric!r} has {df[metric].iloc[i]:g} in line "
            f"{_line(df.index[i])}; a "
            f"finite metric must lie within +-{MAX_ABS_VALUE:g} (non-finite values are set "
            "aside as excluded runs)"
        )


def _check_conditions(
    df: pd.DataFrame, metric: str, seed_col: str | None, harness: bool, label: str
) -> None:
    """Refuse a missing seed column, a harness column out of its range, an infinite condition."""
    if seed_col is not None and seed_col not in df.columns:
        raise GridError(
            f"{label}: no column {seed_col!r} for --seed-col; columns: {', '.join(df.columns)}"
        )
    if seed_col is not None and seed_col == metric:
        raise GridError(f"{label}: --seed-col {seed_col!r} is the metric; name the seed column")
    for col, (test, allowed) in DOMAIN.items():
        if harness and col in df.columns:
            v = to_float(df[col])
            with np.errstate(invalid="ignore"):
                bad = v.isna() | ~test(v)
            if bad.any():
                i = df.index[bad.to_numpy()][0]
                raise GridError(
                    f"{label}: column {col!r} has {_shown(df.loc[i, col])} in line "
                    f"{_line(i)}; {allowed}"
                )

    for col in df.columns:  # a condition at +-inf is no setting a run was made at
        if col == metric or col in NON_FACTORS or df[col].dtype.kind != "f":
            continue
        inf = np.isinf(df[col].to_numpy())
        if inf.any():
            i = int(np.flatnonzero(inf)[0])
            raise GridError(
                f"{label}: column {col!r} has {df[col].iloc[i]:g} in line "
                f"{_line(df.index[i])}; a condition of a run must be finite (leave it empty "
                "where it does not apply)"
            )


def _apply_filters(df: pd.DataFrame, where: tuple[str, ...], label: str) -> pd.DataFrame:
    """The rows every ``--where`` condition keeps; none left is refused."""
    keep = np.ones(len(df), bool)
    for text in where:
        try:
            node = ex.parse(text, logical=True, what=f"--where {text!r}")
        except ExpressionError as err:
            raise GridError(str(err)) from None
        mask = np.asarray(_eval(node, df, text, label, "--where"))
        if mask.dtype != bool or mask.shape != (len(df),):
            raise GridError(f"--where {text!r}: is not a true/false condition on each row")
        keep &= mask
    df = df[keep]
    if len(df) == 0:
        raise GridError(f"{label}: --where {' and '.join(where)!r} leaves no rows")
    return df


def _check_derived_finite(
    df: pd.DataFrame, derive: tuple[str, ...], derived: list[str], label: str
) -> None:
    """Refuse a derived column that is not finite on a row kept."""
    for text, name in zip(derive, derived, strict=True):
        values = df[name].to_numpy(float)
        if not np.isfinite(values).all():
            i = int(np.flatnonzero(~np.isfinite(values))[0])
            raise GridError(
                f"--derive {text!r}: gives {values[i]:g} in line {_line(df.index[i])} of "
                f"{label}; a derived column must be finite on every row kept"
            )


def _set_aside(
    df: pd.DataFrame, metric: str, label: str
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The runs kept, the ones set aside with their reasons, and the kept rows' labels."""
    from fitrules.model import formats

    reason = pd.Series("", index=df.index)
    if "diverged" in df.columns:
        reason[_as_bool(df["diverged"], label)] = "diverged"
    for col in df.columns:  # a crashed or failed run's last value is no result
        if formats.is_status(col) and col != metric:
            for level in formats.failed_levels(df[col]):
                reason[(reason == "") & (df[col].astype(str) == level).to_numpy()] = (
                    f"{col} {level}"
                )
    reason[(reason == "") & ~np.isfinite(df[metric])] = "non-finite metric"
    excluded = df[reason != ""].assign(reason=reason[reason != ""])
    row_numbers = df.index[(reason == "").to_numpy()].to_numpy()
    runs = df[reason == ""].reset_index(drop=True)
    if len(runs) == 0:
        why = ", ".join(f"{n} {r}" for r, n in excluded["reason"].value_counts().items())
        raise GridError(
            f"{label}: no run left to use: every one of the {len(df)} rows kept was set aside "
            f"({why})"
        )
    return runs, excluded, row_numbers


def _seed_column(
    df: pd.DataFrame, runs: pd.DataFrame, seed_col: str | None, label: str
) -> str | None:
    """The seed column; a column that looks like one, when none is named, is refused."""
    from fitrules.model import formats

    seed = seed_col or next((s for s in SEED_COLUMNS if s in df.columns), None)
    if seed is None:  # pooled as a factor, a seed would be filtered to one level
        for c in formats.seed_like(list(runs.columns)):
            if runs[c].nunique(dropna=False) > 1:
                raise GridError(
                    f"{label}: column {c!r} looks like each run's seed and no seed column is "
                    f"named (a factor's levels would be pooled or filtered); "
                    f"{formats.seed_hint(c)}"
                )
    return seed


def load_grid(
    source: Path | str | pd.DataFrame,
    metric: str | None = None,
    where: Sequence[str] | str = (),
    derive: Sequence[str] | str = (),
    frame: pd.DataFrame | None = None,
    unit: str | None = None,
    seed_col: str | None = None,
    units: dict[str, str] | str | None = None,
    rename: dict[str, str] | Sequence[str] | str | None = None,
    drop_duplicates: bool = False,
) -> Grid:
    """Load and check a results table.

    Parameters
    ----------
    source : str, Path or pandas.DataFrame
        A CSV (or Parquet) file, one row a run, or the table itself.
    metric : str, optional
        The metric column; default the first of ``loss``, ``val_loss`` present.
    where : str or sequence of str
        Filters, e.g. ``"lr == 3e-4"``; rows failing any are left out (and counted).
    derive : str or sequence of str
        New columns, e.g. ``"omega = 1/keep - 1"``; evaluated before the filters. Names with
        spaces go in backticks, as in ``pandas.eval``: ``"N = `Model Size`"``.
    frame : pandas.DataFrame, optional
        An already loaded table; ``source`` then only names it in messages.
    unit : str, optional
        The metric's unit, for labels ("nats"). Default: nats for the loss columns of tables
        written by ``fitrules simulate``, otherwise none.
    seed_col : str, optional
        The column that names each run's seed (default ``seed`` when there is one). Runs
        with the same seed in different cells are paired by it.
    units : dict or str, optional
        Units of variables for axis labels, ``{"N": "parameters", "D": "tokens"}`` or
        ``"N=parameters,D=tokens"``. Tables written by ``fitrules simulate`` know theirs.
    rename : dict, str or sequence of str, optional
        Columns renamed as the table is read, before ``derive`` and ``where``:
        ``{"inner_steps": "H"}`` or ``"inner_steps=H"`` (a list for several), so that a
        tracker's names (``compression.keep``) become the forms' (``keep``).
    drop_duplicates : bool
        Drop rows that repeat an earlier row in every column (a run exported twice); the
        count is kept (``Grid.duplicates_dropped``) and shown. Without it such a row is
        refused, with both lines named, in a table with a seed column (without one,
        identical rows may be repeats whose metric was rounded, and are kept).

    Returns
    -------
    Grid
        The kept runs (derived columns added), the excluded ones with reasons, the metric,
        the seed column and a sha256 of the table (of its CSV text, for a DataFrame).

    Raises
    ------
    GridError
        For a missing file or column, a non-numeric metric, a bad filter or derivation,
        or a value outside its allowed range; the message names file, column and line.
        Also, each with its fix named: a wide table (``loss_seed0``, ``loss_seed1``: one
        row a cell), a column that looks like the seed (``config.seed``) when no seed column
        is named, and an exact copy of a row without ``drop_duplicates``. Rows whose status
        column (``State``, ``status``) says crashed or failed are set aside as excluded.
        See ``docs/input-formats.md``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"H": [1, 4, 16, 1, 4, 16], "seed": [0, 0, 0, 1, 1, 1],
    ...                    "loss": [2.1, 2.2, 2.4, 2.11, 2.21, 2.38]})
    >>> g = load_grid(df, where="H < 16")
    >>> len(g.runs), g.cells(["H"]).table["value"].round(3).tolist()
    (4, [2.105, 2.205])
    """
    where, derive = _texts(where, "where"), _texts(derive, "derive")
    path, frame = _check_arguments(source, metric, unit, frame)
    label = IN_MEMORY if path is None else display_path(path)
    if frame is not None:
        frame = _index_as_columns(frame, label)
    return _build_grid(
        path, frame, label, metric, where, derive, unit, seed_col, units, rename, drop_duplicates
    )


def _build_grid(
    path: Path | None,
    frame: pd.DataFrame | None,
    label: str,
    metric: str | None,
    where: tuple[str, ...],
    derive: tuple[str, ...],
    unit: str | None,
    seed_col: str | None,
    units: dict[str, str] | str | None,
    rename: dict[str, str] | Sequence[str] | str | None,
    drop_duplicates: bool,
) -> Grid:
    """The phases of ``load_grid`` once its arguments are checked: read, derive, check, filter."""
    df = _read_table(path, frame, label)
    df, from_text = _numbers_from_text(df)
    rows_read, columns_read = len(df), list(df.columns)
    from fitrules.model import formats

    df = formats.apply_renames(df, formats.parse_renames(rename), label)
    # an exact copy of a run that names its seed is the run exported twice; without a seed
    # column identical rows may be repeats whose metric was rounded: refused only with one
    has_seed = (seed_col or "seed") in df.columns
    df, duplicates_dropped = _exact_copies(df, label, drop_duplicates, refuse=has_seed)
    derived = _derive_columns(df, derive, label)
    metric = _choose_metric(df, metric, label)
    _metric_as_float(df, metric, label)
    harness = written_by_harness(path, columns_read)
    _check_conditions(df, metric, seed_col, harness, label)
    kept = _apply_filters(df, where, label)
    _check_derived_finite(kept, derive, derived, label)
    runs, excluded, row_numbers = _set_aside(kept, metric, label)
    seed = _seed_column(kept, runs, seed_col, label)
    if frame is not None:  # the table as CSV text: the same rows give the same hash
        sha = hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()
    elif path is not None:
        sha = sha256_file(path)
    # the quadratic backend's tables (model = "quadratic") hold an excess loss, not nats
    if (
        unit is None
        and all(c in columns_read for c in HARNESS_COLUMNS)
        and ("model" not in columns_read)
    ):
        unit = HARNESS_UNITS.get(metric)
    var_units = {k: u for k, u in HARNESS_VARIABLE_UNITS.items() if harness and k in kept.columns}
    var_units |= parse_units(units, list(kept.columns), label)
    return Grid(
        runs,
        excluded,
        metric,
        seed,
        Path(label) if path is not None else None,
        sha,
        where,
        derive,
        rows_read,
        len(df) - len(kept),
        path.stem if path is not None else IN_MEMORY,
        unit or None,
        harness,
        var_units,
        row_numbers,
        duplicates_dropped,
        from_text,
        source=None if path is None else Path(os.path.abspath(path)),
    )
