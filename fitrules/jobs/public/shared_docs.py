"""The numpydoc Parameters entries several public functions share, written once: a docstring
names one as a ``{name}`` line, which :func:`shared_params` fills when the module is imported."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

# name -> (type, description lines); ", optional" follows the type where the parameter has a
# default, as numpydoc writes it, so one entry serves a required and an optional parameter
ENTRIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "grid": (
        "Grid, DataFrame, path or None",
        (
            "The results table, as :func:`load_grid` reads it; None is the default grid (the",
            "committed main grid at inner learning rate 3e-4).",
        ),
    ),
    "objective": (
        '{"rel_ls", "log_huber", "abs_ls"}',
        (
            "The training objective: relative least squares (default), Huber on the log, or",
            "absolute least squares.",
        ),
    ),
    "delta": ("float", ("The Huber threshold of ``log_huber`` (default 1e-3).",)),
    "fix": (
        "dict of str to float or sequence of str",
        ('Constants held at a value, ``{"alpha": 0.34}`` or ``["alpha=0.34"]``.',),
    ),
    "bounds": (
        "dict of str to (float, float) or sequence of str",
        ('Bounds of nonlinear constants, ``{"Nc": (1e10, 1e16)}`` or ``["Nc=1e10..1e16"]``.',),
    ),
    "by": ("str", ("Fit one form per level of this column, jointly.",)),
    "tune": (
        "str or sequence of str",
        ('Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.',),
    ),
    "tune_seeds": (
        "sequence of int or str",
        ("The seeds to choose on when tuning; None cross-fits (see :func:`tune`).",),
    ),
    "guard_span": (
        "float",
        ("Threshold of the wild-extrapolation guard (see :mod:`fitrules.engine.guard`).",),
    ),
    "guard_se": ("float", ("Threshold of the wild-extrapolation guard.",)),
    "guard_excursion": ("float", ("Threshold of the wild-extrapolation guard.",)),
    "metric_range": (
        "(float, float)",
        ("The plausible range of the metric, for the wild-extrapolation guard.",),
    ),
    "level": ("float", ("Level of the intervals (default 0.95).",)),
    "resamples": ("int", ("Bootstrap resamples (default 200).",)),
    "seed": ("int", ("Seed of the bootstrap (default 0).",)),
    "ledger": ("str or path", ("The ledger written by :func:`predict`.",)),
    "folder": (
        "str or path",
        ("The folder whose ``forms.toml`` holds the forms (default: the working one).",),
    ),
}

# a line holding only ``{name}``: where the entry of parameter ``name`` goes
PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>\w+)\}[ \t]*$", re.MULTILINE)


def shared_params(func: F) -> F:
    """``func`` with each ``{name}`` line of its docstring replaced by the entry of
    :data:`ENTRIES` for its parameter ``name``, at that line's indent.

    A name with no entry, or not a parameter of ``func``, is refused at import.
    """
    params = inspect.signature(func).parameters

    def entry(m: re.Match) -> str:
        name, indent = m["name"], m["indent"]
        if name not in ENTRIES or name not in params:
            raise ValueError(
                f"{func.__qualname__}'s docstring has {{{name}}}, which is "
                + ("not a parameter of it" if name in ENTRIES else "no shared entry")
            )
        type_, desc = ENTRIES[name]
        optional = ", optional" if params[name].default is not inspect.Parameter.empty else ""
        lines = [f"{indent}{name} : {type_}{optional}"]
        lines += (f"{indent}    {line}" for line in desc)
        return "\n".join(lines)

    if func.__doc__:
        func.__doc__ = PLACEHOLDER.sub(entry, func.__doc__)
    return func
