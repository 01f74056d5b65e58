"""Constants set from the command line: ``--fix`` and ``--bound`` parsed, and with ``--by``
and ``--shared`` applied to the forms (:func:`customise`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import replace

from fitrules.base.errors import FormError, param
from fitrules.model import expr as ex
from fitrules.model.form_class import Form


def parse_fix(items: Sequence[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["alpha=0.34", ...]`` (``--fix``) -> ``{"alpha": 0.34}``."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        out_map: dict[str, float] = {}
        for k, v in items.items():
            if not isinstance(k, str) or not _finite_number(v):
                raise FormError(
                    f"{param('fix')} {{{k!r}: {v!r}}}: each constant name must map to a finite "
                    "number, "
                    "e.g. {'alpha': 0.34}"
                )
            out_map[k] = float(v)
        return out_map
    texts = _option_texts(
        items, param("fix"), "NAME=VALUE texts (e.g. ['alpha=0.34']) or a mapping {'alpha': 0.34}"
    )
    out: dict[str, float] = {}
    for text in texts:
        name, eq, value = str(text).partition("=")
        name = name.strip()
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        if not eq or not name or not math.isfinite(x):
            raise FormError(
                f"{param('fix')} {text!r}: expected NAME=VALUE with a finite number, e.g. "
                "alpha=0.34"
            )
        out[name] = x
    return out


def parse_bounds(
    items: Sequence[str] | Mapping[str, tuple[float, float]] | None,
) -> dict[str, tuple[float, float]]:
    """``["Nc=1e10..1e16", ...]`` (``--bound``) -> ``{"Nc": (1e10, 1e16)}``."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        out_map: dict[str, tuple[float, float]] = {}
        for k, v in items.items():
            ok = (
                isinstance(k, str)
                and isinstance(v, Sequence)
                and not isinstance(v, str)
                and len(v) == 2
                and all(_number(x) for x in v)
                and float(v[0]) < float(v[1])
            )
            if not ok:
                raise FormError(
                    f"{param('bounds')} {{{k!r}: {v!r}}}: each constant name must map to two "
                    "numbers "
                    "(low, high) with low < high, e.g. {'Nc': (1e10, 1e16)}"
                )
            out_map[k] = (float(v[0]), float(v[1]))
        return out_map
    texts = _option_texts(
        items,
        param("bounds"),
        "NAME=LOW..HIGH texts (e.g. ['Nc=1e10..1e16']) or a mapping {'Nc': (1e10, 1e16)}",
    )
    out: dict[str, tuple[float, float]] = {}
    for text in texts:
        name, eq, rng = str(text).partition("=")
        lo_s, dots, hi_s = rng.partition("..")
        try:
            lo, hi = float(lo_s), float(hi_s)
        except ValueError:
            lo = hi = math.nan
        bad = math.isnan(lo) or math.isnan(hi) or not lo < hi
        if not eq or not name.strip() or not dots or bad:
            raise FormError(
                f"{param('bounds')} {text!r}: expected NAME=LOW..HIGH with LOW < HIGH, e.g. "
                "Nc=1e10..1e16 (inf and -inf allowed)"
            )
        out[name.strip()] = (lo, hi)
    return out


def _option_texts(items: object, option: str, allowed: str) -> Sequence[str]:
    """``items`` as a sequence of texts (one text alone too); else the option's refusal."""
    if isinstance(items, str):
        return [items]
    if not isinstance(items, Sequence) or not all(isinstance(t, str) for t in items):
        raise FormError(f"{option} {items!r}: give {allowed}")
    return items


def _number(x) -> bool:
    """A real number that is not NaN (infinity allowed: an open end of a bound)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and not math.isnan(float(x))


def _finite_number(x) -> bool:
    return _number(x) and math.isfinite(float(x))


def customise(
    forms: Sequence[Form],
    fix: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    by: str | None = None,
    shared: Sequence[str] | None = None,
) -> list[Form]:
    """The forms with constants fixed, bounded, or made per group (``--fix``, ``--bound``,
    ``--by``, ``--shared``).

    A fixed or bounded name applies to every form that has a constant of that name, and
    must name a constant of at least one form.

    Raises
    ------
    FormError
        If a name is a constant of none of the forms.
    """
    fix, bounds = dict(fix or {}), dict(bounds or {})
    if shared is not None and by is None:
        raise FormError(
            f"{param('shared')} needs {param('by')} COLUMN (the constants shared across groups)"
        )
    for label, keys in ((param("fix"), fix), (param("bounds"), bounds)):
        for key in keys:
            if not any(key in ex.names(f.tree) for f in forms):
                raise FormError(
                    f"{label} {key!r}: no form has a constant of that name (forms: "
                    + ", ".join(f"{f.name} = {f.expression}" for f in forms)
                    + ")"
                )
    out = []
    for f in forms:
        names = ex.names(f.tree)
        own_fix = {k: v for k, v in fix.items() if k in names}
        own_bounds = {k: v for k, v in bounds.items() if k in names and k not in own_fix}
        out.append(
            replace(
                f,
                fixed={**f.fixed, **own_fix},
                bounds={**f.bounds, **own_bounds},
                by=by if by is not None else f.by,
                shared=tuple(shared) if shared is not None else f.shared,
            )
        )
    return out
