"""A point to predict at: parsed from text, resolved to the form's variables and checked
against their domains, and formatted back.
"""

from __future__ import annotations

import math

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import MAX_ABS_VALUE
from fitrules.model import expr as ex
from fitrules.model.forms import Form


def parse_point(text: str, option: str = param("predict")) -> dict[str, float]:
    """``"H=8,keep=0.25"`` -> {"H": 8.0, "keep": 0.25}; every value a finite number.

    Raises
    ------
    FitrulesError
        For a part that is not NAME=NUMBER, a name given twice, a value that is not finite,
        or an empty point.
    """
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().strip("`")
        try:
            if not sep or not key:
                raise ValueError
            number = float(value)
        except ValueError:
            raise FitrulesError(
                f"{option} {text!r}: {part!r} is not of the form NAME=NUMBER"
            ) from None
        if not math.isfinite(number):
            raise FitrulesError(f"{option} {text!r}: {key}={value.strip()} is not finite")
        if key in given:
            raise FitrulesError(f"{option} {text!r}: {key!r} is given twice")
        given[key] = number
    if not given:
        raise FitrulesError(f"{option} {text!r}: no NAME=NUMBER given")
    return given


def resolve_point(
    text_or_dict, form: Form, derive=(), option: str = param("predict"), harness: bool = True
) -> tuple[dict, dict]:
    """``"H=8,keep=0.25"`` -> (the values as given, the form's variables at that point).

    Variables the point does not name are computed from the ``--derive`` expressions, and
    ``omega`` from ``keep`` (omega = 1/keep - 1) when the grid's convention is needed. Every
    name must be a variable of the form or an input of a derivation; a variable that is both
    given and derivable must agree with its derivation; values with a known domain (H, M,
    keep, omega) must lie in it when the grid is one the harness wrote (``harness``).

    Raises
    ------
    FitrulesError
        For an unknown name, a value outside its domain, a contradiction, or a variable the
        point does not determine.
    """
    if isinstance(text_or_dict, dict):
        import numbers

        for k, v in text_or_dict.items():
            if (
                not isinstance(k, str)
                or isinstance(v, bool)
                or not isinstance(v, numbers.Real)
                or not math.isfinite(float(v))
            ):
                raise FitrulesError(
                    f"{option} {text_or_dict!r}: {k!r} = {v!r}; a point maps variable names "
                    "to finite numbers"
                )
        given = {str(k): float(v) for k, v in text_or_dict.items()}
        shown: object = text_or_dict
    elif not isinstance(text_or_dict, str):
        raise FitrulesError(
            f"{option} {text_or_dict!r}: give a point as text ('H=8,keep=0.25') or a dict"
        )
    else:
        given = parse_point(text_or_dict, option)
        shown = text_or_dict
    rules: list[tuple[str, ex.Node, str]] = []
    for text in derive:
        name, _, rhs = text.partition("=")
        rules.append((name.strip().strip("`"), ex.parse(rhs), text))
    if "omega" in form.bound_variables and not any(r[0] == "omega" for r in rules):
        rules.append(("omega", ex.parse("1/keep - 1"), "omega = 1/keep - 1"))
    inputs = {n for _, node, _ in rules for n in ex.names(node)}
    known = set(form.bound_variables) | inputs | {r[0] for r in rules}
    unknown = [k for k in given if k not in known]
    if unknown:
        raise FitrulesError(
            f"{option} {shown!r}: {unknown[0]!r} is not a variable of form {form.name!r} "
            f"(variables: {', '.join(form.bound_variables)})"
        )
    _check_domain(given, shown, option)
    values = dict(given)
    for name, node, text in rules:
        if not all(n in values for n in ex.names(node)):
            continue
        with np.errstate(all="ignore"):
            v = float(ex.evaluate(node, values))
        if name in given:
            if not math.isclose(v, given[name], rel_tol=1e-9, abs_tol=1e-12):
                raise FitrulesError(
                    f"{option} {shown!r}: {name}={given[name]:g} contradicts {text!r}, which "
                    f"gives {name}={v:g}; give one of them"
                )
            continue
        if not math.isfinite(v):
            raise FitrulesError(f"{option} {shown!r}: {text!r} gives {name}={v} there")
        values[name] = v
    _check_domain(values, shown, option, harness)
    missing = [v for v in form.bound_variables if v not in values]
    if missing:
        raise FitrulesError(
            f"{option} {shown!r} does not give {', '.join(missing)}, which form {form.name!r} reads"
        )
    return given, {v: values[v] for v in form.bound_variables}


def _check_domain(values: dict[str, float], shown, option: str, harness: bool = True) -> None:
    from fitrules.model.grids import DOMAIN

    for name, v in values.items():
        if not math.isfinite(v) or abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(f"{option} {shown!r}: {name}={v:g} is not a finite value")
        if harness and name in DOMAIN:
            test, allowed = DOMAIN[name]
            if not bool(test(np.float64(v))):
                raise FitrulesError(f"{option} {shown!r}: {name}={v:g}; {allowed}")


def format_point(point: dict) -> str:
    """``{"H": 8.0, "keep": 0.25}`` -> ``"H=8, keep=0.25"``."""
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float | int) else f"{k}={v}" for k, v in point.items()
    )
