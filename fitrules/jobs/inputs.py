"""The inputs every job's Python function takes as a user gives them: a grid (a Grid, a
DataFrame, a path or None), forms (names, lines or Form objects), tuning, fixed constants."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, FormError, GridError, api_terms, param
from fitrules.model import grids as _grids
from fitrules.model.forms import Form
from fitrules.model.grids import Grid
from fitrules.model.grids import load_grid as _load_grid

Fix: TypeAlias = "Mapping[str, float] | Sequence[str] | None"


Bounds: TypeAlias = "Mapping[str, tuple[float, float]] | Sequence[str] | None"


GridLike: TypeAlias = Grid | pd.DataFrame | str | Path


FormLike: TypeAlias = Form | str


# fr.load_grid: the loader, its errors in the words of its parameters
load_grid = api_terms(_grids.load_grid)


def as_grid(grid: GridLike | None, **load: Any) -> Grid:
    """A :class:`Grid` from a Grid, a DataFrame or a path; ``None`` is the default grid
    (the committed main grid at inner learning rate 3e-4)."""
    if isinstance(grid, Grid):
        if any(v for v in load.values()):
            raise FitrulesError(
                "where/derive/metric/unit apply when a grid is loaded; this one already is "
                "(pass them to fr.load_grid)"
            )
        return grid
    if grid is None:
        from fitrules.model.grids import default_grid

        path, where = default_grid(load.pop("where", None) or ())
        return _load_grid(path, where=where, **load)
    return _load_grid(_table(grid), **load)


def _table(grid):
    """A DataFrame as it is, or the path a path or an example's name reads."""
    if not isinstance(grid, pd.DataFrame | str | Path):
        raise GridError(
            f"grid {type(grid).__name__}: give a fitrules.Grid, a pandas DataFrame, or the path "
            "of a CSV or Parquet file (None: the default grid)"
        )
    if isinstance(grid, str | Path):
        from fitrules.model.examples import resolve_data

        return resolve_data(grid)
    return grid


def as_forms(forms: FormLike | Sequence[FormLike] | None, cwd: Path | None = None) -> list[Form]:
    """Forms from names (built-in or ``forms.toml``), inline ``"NAME = EXPR"`` lines and
    :class:`Form` objects; ``None`` is the built-in set."""
    from fitrules.model.forms import select_forms

    if forms is None:
        return select_forms(None, cwd=cwd)
    if isinstance(forms, Form | str):
        forms = [forms]
    if not isinstance(forms, Sequence):
        raise FormError(
            f"forms {forms!r}: give a name, 'NAME = EXPR', a fitrules.Form, or a list of them"
        )
    pool: dict = {}  # the named forms, read at the first name
    out = [_one_form(f, pool, cwd) for f in forms]
    _check_names(out)
    return out


def _check_names(forms: list[Form]) -> None:
    """Refuse no form, or a name given twice."""
    names = [f.name for f in forms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FormError(f"form {twice[0]!r} is given twice")
    if not forms:
        raise FormError("no form given")


def _one_form(f, pool: dict, cwd: Path | None) -> Form:
    """One form as given: a Form, a ``"NAME = EXPR"`` line or a name (found in ``pool``,
    which the first name fills with the forms available)."""
    from fitrules.model.forms import (
        available_forms,
        did_you_mean,
        note_shadowing,
        parse_form_line,
    )

    if not isinstance(f, Form | str):
        raise FormError(f"a form is a name, 'NAME = EXPR' or a fitrules.Form, not {f!r}")
    if not pool:
        pool.update(available_forms(cwd))
    if isinstance(f, Form) or "=" in f:
        form = f if isinstance(f, Form) else parse_form_line(f, "forms")
        note_shadowing(form, pool)  # a user's form may take a built-in's name
        return form
    if f not in pool:
        raise FormError(
            f"unknown form {f!r}{did_you_mean(f, pool)}; available: {', '.join(pool)} "
            "(or give 'NAME = EXPR' or a fitrules.Form)"
        )
    return pool[f]


def check_objective(objective, delta) -> None:
    """The training objective and its Huber delta, in the command line's words; a delta that
    is no number is left to the declared checks."""
    from fitrules.engine.fit import Objective

    if a_number(delta):
        Objective(objective, float(delta))


def a_number(x) -> bool:
    """Whether ``x`` is a number numpy takes (not a bool, not an integer beyond 64 bits): a
    command line's check runs on it, else the declared checks name its type."""
    if isinstance(x, numbers.Integral):
        return not isinstance(x, bool) and abs(x) < 2**63
    return isinstance(x, numbers.Real)


def check_customising(fix, bounds, by, shared) -> None:
    """Refuse a bad ``fix`` or ``bounds``, or ``shared`` without ``by``, before any grid is
    read (:func:`customised` applies them to the forms)."""
    from fitrules.model.forms import parse_bounds, parse_fix

    parse_fix(fix)
    parse_bounds(bounds)
    if shared is not None and by is None:
        raise FormError(f"{param('shared')} needs {param('by')} COLUMN")


def customised(forms: list[Form], fix, bounds, by, shared) -> list[Form]:
    """The forms with ``fix``, ``bounds``, ``by`` and ``shared`` applied."""
    from fitrules.model.forms import customise, parse_bounds, parse_fix

    arg.text(by, "by", none=True)
    if isinstance(shared, str):
        shared = [c.strip() for c in shared.split(",") if c.strip()]
    elif shared is not None:
        shared = list(arg.texts(shared, "shared"))
    return customise(forms, parse_fix(fix), parse_bounds(bounds), by, shared)


def tune_first(grid: Grid, tune: str | Sequence[str] | None, tune_seeds):
    tune = list(arg.texts(tune, "tune"))
    if tune_seeds is not None and not isinstance(tune_seeds, str):
        if not isinstance(tune_seeds, Sequence):
            raise FitrulesError(f"tune_seeds {tune_seeds!r}: give a list of seeds, e.g. [0, 1]")
        tune_seeds = [arg.seed(s, "tune_seeds") for s in tune_seeds]
    if not tune:
        if tune_seeds is not None:
            raise FitrulesError(
                f"{param('tune_seeds')} needs {param('tune')} FACTOR (tune_seeds needs tune)"
            )
        return grid, None
    from fitrules.jobs.tune import tune as tune_grid

    if isinstance(tune_seeds, str):
        tune_seeds = arg.seed_list(tune_seeds, "tune_seeds")
    tuning = tune_grid(grid, tune, tune_seeds)
    return tuning.grid, tuning


def objective_and_guard(objective, delta, guard_span, guard_se, metric_range, excursion):
    """The training objective and the wild-extrapolation guard of compare and search."""
    from fitrules.engine.fit import Objective
    from fitrules.engine.guard import GuardOptions

    return Objective(objective, delta), GuardOptions(guard_span, guard_se, metric_range, excursion)
