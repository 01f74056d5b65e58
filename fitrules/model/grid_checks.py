"""Checks of a table read, before it becomes a Grid: exact copies of rows, the metric
column, the harness's domains and finite conditions, the runs set aside (diverged, failed,
non-finite) and the seed column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError, param, with_fixes
from fitrules.base.limits import MAX_ABS_VALUE
from fitrules.model.grid_columns import (
    DOMAIN,
    METRIC_DEFAULTS,
    NON_FACTORS,
    SEED_COLUMNS,
    _line,
    _shown,
    to_float,
)


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
            f"others: a run exported twice?); drop exact copies with {param('drop_duplicates')}"
        ),
        ("--drop-duplicates", None),  # flag words: a fix the command line applies
    )


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
                f"{like[0]!r} looks like one{also}: give {param('metric')} "
                f"{formats.quoted_arg(like[0])}"
                if like
                else f"choose one with {param('metric')}"
            )
            raise with_fixes(
                GridError(
                    f"{label}: no metric column (looked for {', '.join(METRIC_DEFAULTS)}); "
                    f"{choose}; columns: {', '.join(df.columns)}"
                ),
                # flag words: a fix the command line applies
                *([("--metric", like[0])] if like else []),
            )
    elif metric not in df.columns:
        raise GridError(
            f"{label}: no column {metric!r} for {param('metric')}; columns: {', '.join(df.columns)}"
        )
    elif metric in SEED_COLUMNS:
        raise GridError(
            f"{label}: {param('metric')} {metric}: is the seed column, which names each run's "
            "seed; "
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
            f"{label}: no column {seed_col!r} for {param('seed_col')}; columns: "
            f"{', '.join(df.columns)}"
        )
    if seed_col is not None and seed_col == metric:
        raise GridError(
            f"{label}: {param('seed_col')} {seed_col!r} is the metric; name the seed column"
        )
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

    # a condition at +-inf is no setting a run was made at (all columns at once: a wide
    # table has thousands)
    floats = [c for c, t in df.dtypes.items() if t.kind == "f" and c != metric
              and c not in NON_FACTORS]  # fmt: skip
    inf = np.isinf(df[floats].to_numpy(float)) if floats else np.zeros((0, 0), bool)
    if inf.any():
        col = floats[int(np.flatnonzero(inf.any(axis=0))[0])]
        i = int(np.flatnonzero(inf[:, floats.index(col)])[0])
        raise GridError(
            f"{label}: column {col!r} has {df[col].iloc[i]:g} in line "
            f"{_line(df.index[i])}; a condition of a run must be finite (leave it empty "
            "where it does not apply)"
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
