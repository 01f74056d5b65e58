"""The candidate cells a design ranks: the grid's levels and the midpoints between them, or
the values named, each runnable by the harness."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, param
from fitrules.model.grids import Cells, Grid

MAX_CANDIDATES = 5000  # candidate cells scored at once (each a refit per ordered pair)


def _fmt(v: float) -> str:
    return f"{v:g}"


def _midpoints(levels: np.ndarray) -> list[float]:
    out = []
    for a, b in itertools.pairwise(np.sort(levels)):
        out.append(float(math.sqrt(a * b)) if a > 0 and b > 0 else float((a + b) / 2))
    return out


def _parse_values(text: str, name: str) -> list[float]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            if "/" in part:
                num, den = part.split("/", 1)
                out.append(float(num) / float(den))
            else:
                out.append(float(part))
        except (ValueError, ZeroDivisionError):
            raise FitrulesError(
                f"{param('candidates')}: {name}={text!r}: {part!r} is not a number or fraction"
            ) from None
    if not out or not all(np.isfinite(out)):
        raise FitrulesError(f"{param('candidates')}: {name}={text!r}: give finite numbers")
    return out


def integer_variables(grid: Grid, variables: tuple[str, ...]) -> set[str]:
    """Variables that take whole numbers: integer columns of the grid, and integer settings
    of the harness (a run cannot be made at H=1.414)."""
    fields = _run_fields(grid)
    return {
        v for v in variables if grid.runs[v].dtype.kind in "iub" or str(fields.get(v, "")) == "int"
    }


def _check_candidate_values(name: str, values: list[float], text: str, integer: bool) -> None:
    """Named candidate values must be runnable: in the variable's domain, whole for a whole
    variable, and within the harness's limits."""
    from fitrules.base.limits import MAX_ABS_VALUE, SIM_INT_LIMITS
    from fitrules.model.grids import DOMAIN

    for v in values:
        if abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(
                f"{param('candidates')}: {name}={text!r}: {v:g} is beyond +-{MAX_ABS_VALUE:g}"
            )
        if name in DOMAIN:
            ok = bool(np.asarray(DOMAIN[name][0](pd.Series([v]))).all())
            if not ok:
                raise FitrulesError(f"{param('candidates')}: {name}={text!r}: {DOMAIN[name][1]}")
        if integer and not float(v).is_integer():
            raise FitrulesError(
                f"{param('candidates')}: {name}={text!r}: {v:g} is not a whole number, and {name} "
                "takes "
                "whole numbers (in the grid and in a run)"
            )
        if integer and name in SIM_INT_LIMITS and not v <= SIM_INT_LIMITS[name]:
            raise FitrulesError(
                f"{param('candidates')}: {name}={text!r}: {v:g} is above "
                f"{SIM_INT_LIMITS[name]:,}, the "
                f"largest {name} a run takes"
            )


def _whole_midpoints(levels: np.ndarray) -> list[float]:
    """Midpoints rounded to whole numbers, without the levels themselves."""
    have = set(levels.tolist())
    return sorted({float(round(m)) for m in _midpoints(levels)} - have)


def candidate_cells(
    cells: Cells,
    variables: tuple[str, ...],
    spec: str | None = None,
    integer: set[str] | frozenset[str] = frozenset(),
):
    """The candidate cells, a DataFrame over ``variables`` with an ``in_grid`` column.

    Default: for every variable, the grid's levels and the geometric midpoints between
    neighbouring levels (arithmetic where a level is <= 0; rounded to whole numbers for
    the ``integer`` variables, so that the cells ranked are the cells that will be run);
    their product, minus the cells already in the grid. ``spec`` names values instead,
    e.g. ``"H=2,8,32;keep=1/32"`` (``keep`` is turned into ``omega = 1/keep - 1`` when the
    forms read omega); variables it does not name take the grid's levels. Cells named that
    are in the grid are kept and flagged.

    Raises
    ------
    FitrulesError
        For a malformed ``spec``, a variable named twice or not read by the forms, a value
        outside the variable's domain, a fraction for a whole variable, or too many cells.
    """
    table = cells.table
    named: dict[str, list[float]] = {}
    if spec:
        for chunk in filter(None, (c.strip() for c in spec.split(";"))):
            name, sep, values = chunk.partition("=")
            name = name.strip()
            if not sep:
                raise FitrulesError(
                    f"{param('candidates')} {spec!r}: {chunk!r} is not NAME=V1,V2,..."
                )
            vals = _parse_values(values, name)
            if name == "keep" and "omega" in variables and "keep" not in variables:
                if not all(0 < v <= 1 for v in vals):
                    raise FitrulesError(
                        f"{param('candidates')}: keep={values!r}: keep must be in (0, 1]"
                    )
                name, vals = "omega", [1 / v - 1 for v in vals]
            if name not in variables:
                raise FitrulesError(
                    f"{param('candidates')}: {name!r} is not a variable of the forms "
                    f"({', '.join(variables)})"
                )
            if name in named:
                raise FitrulesError(
                    f"{param('candidates')} {spec!r}: {name} is named twice; give all its values "
                    "once, "
                    f"e.g. {name}=2,8"
                )
            _check_candidate_values(name, vals, values, name in integer)
            named[name] = vals
    axes = []
    for v in variables:
        levels = np.unique(table[v].to_numpy(float))
        if v in named:
            axes.append(sorted(set(named[v])))
        elif spec:
            axes.append(levels.tolist())
        elif v in integer:
            axes.append(sorted(set(levels.tolist()) | set(_whole_midpoints(levels))))
        else:
            axes.append(sorted(set(levels.tolist()) | set(_midpoints(levels))))
    grid_keys = {tuple(np.round(r, 12)) for r in table[list(variables)].to_numpy(float)}
    n_rows = math.prod(len(a) for a in axes)
    _check_count(n_rows, 50 * MAX_CANDIDATES, f"{n_rows:,}")  # before the product is made
    rows = []
    for combo in itertools.product(*axes):
        key = tuple(np.round(np.array(combo, float), 12))
        in_grid = key in grid_keys
        if in_grid and not spec:
            continue
        rows.append({**dict(zip(variables, map(float, combo), strict=True)), "in_grid": in_grid})
    if not rows:
        raise FitrulesError("no candidate cell: every combination is already in the grid")
    _check_count(len(rows), MAX_CANDIDATES, str(len(rows)))
    return pd.DataFrame(rows)


def _check_count(n: int, most: int, shown: str) -> None:
    """Refuse more than ``most`` candidate cells (``shown``: their number as the message says
    it)."""
    if n > most:
        raise FitrulesError(
            f"{shown} candidate cells; at most {MAX_CANDIDATES}: name fewer with "
            f"{param('candidates')}"
        )


def cell_label(row, variables) -> str:
    return ", ".join(f"{v}={_fmt(row[v])}" for v in variables)


def _run_fields(grid: Grid | None = None) -> dict:
    """The harness's settings and their types: those of the model a grid's ``model`` column
    names (``fitrules simulate`` writes one for the gpt and quadratic backends), else the
    MLP's. A setting added since the grid was written (``ADDED_SETTINGS``) that its table
    lacks is left out: its runs were made at its default, which a spec leaving it out asks."""
    from fitrules.sim.spec import CONFIG_FIELDS, MODELS

    if grid is not None and "model" in grid.runs.columns:
        models = set(grid.runs["model"].astype(str))
        if len(models) == 1 and (model := models.pop()) in MODELS:
            cls, fields = MODELS[model]
            added = set(getattr(cls, "ADDED_SETTINGS", ())) - set(grid.runs.columns)
            return {k: v for k, v in fields.items() if k not in added}
    return dict(CONFIG_FIELDS)
