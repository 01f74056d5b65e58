"""What each column of a results table is, and how its values read in messages.

The metric, the seed, each run's outcomes and the harness's bookkeeping columns and domains;
columns that label runs or that look like factors pooled within cells; a value or a column's
levels as a message shows them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.arguments import name_value_pairs
from fitrules.base.errors import GridError, param

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
    "tokens",  # the GPT backend's record of its budget and corpus
    "corpus_sha256",
    "train_chars",
    "valid_chars",
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


def _line(index: int) -> int:
    return int(index) + 2  # 1-based line in the file, after the header


# ---------------------------------------------------------------- a user's table as it comes
# A column that varies within cells is a factor when it has at most this many levels and
# every level is shared by at least two cells; otherwise it labels runs.
MAX_POOLED_LEVELS = 12


def _distinct_counts(runs: pd.DataFrame, distinct: pd.Series | None) -> pd.Series:
    """Each column's number of distinct values (a missing value counts as one): ``distinct``
    when the caller counted them already, else counted here in one pass."""
    return runs.nunique(dropna=False) if distinct is None else distinct


def per_run_columns(runs: pd.DataFrame, skip: set, distinct: pd.Series | None = None) -> list[str]:
    """Text columns (names, ids, paths, timestamps) with a different value in every run
    (``distinct``: each column's count of distinct values, when known)."""
    if len(runs) < 2:
        return []
    text = [c for c, dtype in runs.dtypes.items() if c not in skip and dtype.kind not in "biufc"]
    if not text:
        return []
    n = _distinct_counts(runs[text], distinct)
    return [c for c in text if n[c] == len(runs)]


def classify_within_cells(
    runs: pd.DataFrame,
    variables: tuple[str, ...],
    skip: set,
    distinct: pd.Series | None = None,
) -> dict:
    """Columns no form reads that vary within some cell over ``variables``: per-run labels
    (``ignored``) or factor-like columns whose levels the cell means pool (``pooled``).

    A column is factor-like when it has few levels (at most ``MAX_POOLED_LEVELS``, and fewer
    than half the runs) and each level occurs in at least two cells: an optimiser, a
    learning rate, a hardware type. Ids, names, paths, timestamps and per-run measurements
    have a level per run, or levels confined to one cell. ``distinct``: each column's count
    of distinct values, when the caller has it (a column with one value varies nowhere).
    """
    ignored: list[str] = []
    pooled: dict[str, list] = {}
    if not variables or len(runs) == 0:
        return {"ignored": ignored, "pooled": pooled}
    n = _distinct_counts(runs, distinct)
    groups = runs.groupby(list(variables), sort=True, dropna=False)
    for c in runs.columns:
        if c in variables or c in skip or n[c] < 2:
            continue
        if not (groups[c].nunique(dropna=False) > 1).any():
            continue
        n_levels = int(n[c])
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
        pairs = name_value_pairs(units)
        if pairs is None:
            raise GridError(
                f"{param('units')} {units!r}: expected NAME=UNIT pairs, e.g. N=parameters"
            )
        units = pairs
    if not isinstance(units, dict):
        raise GridError(f"units: expected a dict of column -> unit, got {type(units).__name__}")
    for name in units:
        if name not in columns:
            raise GridError(
                f"{param('units')}: {label} has no column {name!r}; columns: {', '.join(columns)}"
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


def first_non_number(col: pd.Series) -> int:
    """The position of the first value of ``col`` that is not a number (0 if none is)."""
    text = col.map(lambda v: v.strip() if isinstance(v, str) else v)
    numbers = pd.to_numeric(text, errors="coerce")
    bad = numbers.isna().to_numpy() & col.notna().to_numpy()
    return int(np.flatnonzero(bad)[0]) if bad.any() else 0


def digits_note(value: Any) -> str:
    """Why text made of another script's digits (fullwidth ``'１２'``) is no number, or ""."""
    if isinstance(value, str) and any(ch.isdigit() and not ch.isascii() for ch in value):
        return "; digits of other scripts (fullwidth '１２') are text: write ASCII digits"
    return ""


def to_float(col: pd.Series) -> pd.Series:
    """``col`` as floats: text that is not a number as pandas reads one (fullwidth digits
    included) becomes NaN, an integer beyond double precision +-inf."""

    def one(v: Any) -> float:
        try:
            # text as pandas reads it: Python's float() would take '１２' and '1_0'
            return float(pd.to_numeric(v.strip()) if isinstance(v, str) else v)
        except OverflowError:
            return -np.inf if str(v).lstrip().startswith("-") else np.inf
        except (TypeError, ValueError):
            return np.nan

    try:
        return pd.to_numeric(col, errors="coerce").astype(float)
    except (OverflowError, TypeError, ValueError):
        return col.map(one).astype(float)


def beyond_doubles(label: str, column: str, value: Any, index: Any) -> GridError:
    """The refusal of a number no double holds (a 400-digit integer, ``1e400``), which a
    reader would otherwise take as an infinity or keep as an integer no form can use."""
    return GridError(
        f"{label}: column {column!r} has {_shown(value)} in line {_line(index)}, beyond the "
        "largest double; allowed: numbers within +-1.8e308"
    )


def _shown(v: Any, limit: int = 40) -> str:
    """A cell's value for a message: its repr, cut in the middle when long."""
    r = repr(_plain(v))
    return r if len(r) <= limit else r[: limit // 2] + "..." + r[-limit // 2 :]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
