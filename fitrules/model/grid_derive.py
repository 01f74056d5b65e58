"""Derived columns and where-filters: expressions over a table's columns, evaluated row by
row (``--derive "omega = 1/keep - 1"``, ``--where "lr == 3e-4"``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base import arguments
from fitrules.base.errors import ExpressionError, FitrulesError, GridError, param
from fitrules.model import expr as ex
from fitrules.model.grid_columns import _line


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


def _texts(value: Any, name: str) -> tuple[str, ...]:
    """One condition or a sequence of them, as a tuple (:func:`fitrules.base.arguments.texts`)."""
    try:
        return arguments.texts(value, name)
    except FitrulesError:
        raise GridError(f"{name} {value!r}: give a condition as text, or a list of them") from None


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


def _derive_columns(df: pd.DataFrame, derive: tuple[str, ...], label: str) -> list[str]:
    """Add each ``--derive`` column to ``df``; the names added."""
    derived = []
    for text in derive:
        name, sep, rhs = text.partition("=")
        name = name.strip().strip("`")
        if not sep or not name or not rhs.strip():
            raise GridError(f"{param('derive')} {text!r}: expected 'NAME = EXPRESSION'")
        if name in df.columns:
            raise GridError(f"{param('derive')} {text!r}: {label} already has a column {name!r}")
        try:
            node = ex.parse(rhs, what=f"{param('derive')} {text!r}")
        except ExpressionError as err:
            raise GridError(str(err)) from None
        try:
            values = np.asarray(_eval(node, df, text, label, param("derive")), dtype=float)
        except (TypeError, ValueError):
            raise GridError(
                f"{param('derive')} {text!r}: does not give a number on each row of {label}"
            ) from None
        if values.ndim > 1 or (values.ndim == 1 and len(values) != len(df)):
            raise GridError(f"{param('derive')} {text!r}: does not give one number per row")
        df[name] = values
        derived.append(name)
    return derived


def _apply_filters(df: pd.DataFrame, where: tuple[str, ...], label: str) -> pd.DataFrame:
    """The rows every ``--where`` condition keeps; none left is refused."""
    keep = np.ones(len(df), bool)
    for text in where:
        try:
            node = ex.parse(text, logical=True, what=f"{param('where')} {text!r}")
        except ExpressionError as err:
            raise GridError(str(err)) from None
        mask = np.asarray(_eval(node, df, text, label, param("where")))
        if mask.dtype != bool or mask.shape != (len(df),):
            raise GridError(f"{param('where')} {text!r}: is not a true/false condition on each row")
        keep &= mask
    df = df[keep]
    if len(df) == 0:
        raise GridError(f"{label}: {param('where')} {' and '.join(where)!r} leaves no rows")
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
                f"{param('derive')} {text!r}: gives {values[i]:g} in line {_line(df.index[i])} of "
                f"{label}; a derived column must be finite on every row kept"
            )
