"""Results grids: load a long table (one row a run), check it, and reduce it to cells.

A cell is one combination of the variables the forms read; its value is the mean of the
metric over the runs (seeds) in it, with the seed count and standard error kept. Rows flagged
``diverged`` or whose metric is not finite are set aside and counted, never silently dropped.

This module holds :func:`load_grid` and is the public face of the grid modules: reading a
table (:mod:`~fitrules.model.grid_reading`), its columns (:mod:`~fitrules.model.grid_columns`),
derived columns and filters (:mod:`~fitrules.model.grid_derive`), the checks of a table read
(:mod:`~fitrules.model.grid_checks`) and the Grid itself (:mod:`~fitrules.model.grid_class`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fitrules.base.util import sha256_file
from fitrules.model.grid_checks import (
    _check_conditions,
    _choose_metric,
    _exact_copies,
    _metric_as_float,
    _seed_column,
    _set_aside,
)
from fitrules.model.grid_class import Cells, Grid, derived_inputs
from fitrules.model.grid_columns import (
    DOMAIN,
    HARNESS_COLUMNS,
    HARNESS_UNITS,
    HARNESS_VARIABLE_UNITS,
    METRIC_DEFAULTS,
    _plain,
    level_list,
    parse_units,
    pooled_note,
    to_float,
    where_suggestion,
)
from fitrules.model.grid_derive import (
    _apply_filters,
    _check_derived_finite,
    _derive_columns,
    _texts,
)
from fitrules.model.grid_reading import (
    DEFAULT_PAIRED,
    DEFAULT_PAIRED_TUNE,
    IN_MEMORY,
    _check_arguments,
    _index_as_columns,
    _read_table,
    _settle_types,
    check_mixed,
    default_grid,
    display_path,
    written_by_harness,
)

# what other modules import from here
__all__ = [
    "DEFAULT_PAIRED",
    "DEFAULT_PAIRED_TUNE",
    "DOMAIN",
    "IN_MEMORY",
    "Cells",
    "Grid",
    "_plain",
    "default_grid",
    "derived_inputs",
    "display_path",
    "level_list",
    "load_grid",
    "pooled_note",
    "to_float",
    "where_suggestion",
]


def _in_nats(table) -> bool:
    """Whether a harness table's losses are cross-entropies in nats: no model column (the
    MLP's tables) or every run of the GPT backend."""
    if "model" not in table.columns:
        return True
    return bool((table["model"].astype(str) == "gpt").all())


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
        Also a column that mixes numbers with text that is not a number (``1`` and
        ``"sync"`` in JSON lines; ``1`` and ``"1"`` are read as numbers), a number beyond
        the largest double (a 400-digit integer, ``1e400``), an integer beyond 64 bits that
        no double holds exactly, and a data file that is a directory, a pipe or a device.
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
    df, from_text, mixed = _settle_types(df, label)
    rows_read, columns_read = len(df), list(df.columns)
    from fitrules.model import formats

    renames = formats.parse_renames(rename)
    df = formats.apply_renames(df, renames, label)
    # a column of two kinds of value is refused before anything reads it; the metric's own
    # check refuses text in a metric's words
    named = metric or next((m for m in METRIC_DEFAULTS if m in df.columns), None)
    check_mixed(df, {renames.get(c, c): v for c, v in mixed.items()}, named, label)
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
    # the quadratic backend's tables (model = "quadratic") hold an excess loss, not nats; the
    # MLP's (no model column) and the GPT's (model = "gpt") a cross-entropy in nats
    if unit is None and all(c in columns_read for c in HARNESS_COLUMNS) and _in_nats(kept):
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
