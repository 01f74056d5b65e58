"""A saved fit's record, what :meth:`FittedForm.to_json` writes and :func:`fitrules.load_fit`
reads: read, parsed, and its structure checked once before any of it is used.

:data:`SAVED_FIT` declares every key the loader reads and what each may hold;
:func:`read_saved_fit` walks it, so that a file edited by hand, cut short or written by
something else is refused in one line that names the file, the key, its value and what is
allowed (:class:`~fitrules.base.errors.SavedFitError`), not with a ``KeyError`` or a
``TypeError`` from inside the refit. Keys the loader does not read (the per-cell table, the
information criteria, the intervals as printed) are not checked; the ``standalone``
ingredients a fit is made from without its data are (:data:`STANDALONE`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fitrules.base.errors import FitrulesError, SavedFitError
from fitrules.base.limits import BOOTSTRAP_KINDS, MAX_TABLE_BYTES, OBJECTIVES, WEIGHTS


# ------------------------------------------------------------------ what a key may hold
@dataclass(frozen=True)
class Leaf:
    """A value that holds nothing further: ``allowed`` says what may be there, ``test``
    whether ``value`` is that."""

    allowed: str
    test: Callable[[Any], bool]


@dataclass(frozen=True)
class Table:
    """A JSON object with these keys (each required unless ``optional``); others are not
    read, so not checked."""

    allowed: str
    keys: Mapping[str, Spec]
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListOf:
    """A JSON array of ``item``s, at least ``at_least`` of them."""

    allowed: str
    item: Spec
    at_least: int = 0


@dataclass(frozen=True)
class NamesTo:
    """A JSON object of names (text) to ``value``s, at least ``at_least`` of them."""

    allowed: str
    value: Spec
    at_least: int = 0


@dataclass(frozen=True)
class Either:
    """One of ``options``, told apart by their type (text, number, list, table, null)."""

    allowed: str
    options: tuple[Spec, ...]


Spec = Leaf | Table | ListOf | NamesTo | Either


def _finite(v: Any) -> bool:
    """A JSON number that is a finite double (an integer of 400 digits is not one)."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _hex_float(v: Any) -> bool:
    if not isinstance(v, str) or len(v) > 40:  # a double's hex text is at most 24 characters
        return False
    try:
        return math.isfinite(float.fromhex(v))
    except (ValueError, OverflowError):
        return False


def _choice(values: tuple[str, ...]) -> Leaf:
    return Leaf("one of " + ", ".join(map(repr, values)), lambda v: v in values)


NULL = Leaf("null", lambda v: v is None)
TEXT = Leaf("text", lambda v: isinstance(v, str))
NUMBER = Leaf("a finite number", _finite)
WHOLE = Leaf("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
# a bound's side: json_ready writes an infinite bound as null (no bound on that side)
BOUND_SIDE = Either("a finite number or null (no bound)", (NUMBER, NULL))
SHA256 = Leaf("64 hexadecimal digits, or null",
              lambda v: v is None or (isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v)
                                      is not None))  # fmt: skip
TEXTS = ListOf("a list of text", TEXT)



def _float_hex(v: Any) -> bool:
    """Text ``float.fromhex`` reads: a double's hexadecimal text, or nan, inf, -inf."""
    if not isinstance(v, str) or len(v) > 40:
        return False
    try:
        float.fromhex(v)
    except (ValueError, OverflowError):
        return False
    return True


HEX = Leaf("the hexadecimal text of a float (float.hex, e.g. '0x1.8p+1', or 'nan', 'inf', "
           "'-inf')", _float_hex)  # fmt: skip
FLAG = Leaf("true or false", lambda v: isinstance(v, bool))
WHOLES = ListOf("a list of whole numbers", WHOLE)
ARRAY = Table(
    "an array: a table of its shape, its values (hexadecimal floats) and optionally its dtype",
    {
        "shape": WHOLES,
        "values": ListOf("a list of hexadecimal floats", HEX),
        "dtype": _choice(("float64", "int64")),
    },
    optional=("dtype",),
)
ARRAY_OR_NULL = Either("an array or null", (ARRAY, NULL))
SEED_OFFSET = Table(
    "a table of the grid's seed offset",
    {"var": HEX, "df": WHOLE, "var_run": HEX, "shares": ARRAY, "seeds": TEXTS,
     "relative": FLAG, "shared_var": HEX, "method": TEXT},
)  # fmt: skip
OFFSET_OR_NULL = Either("a seed offset or null", (SEED_OFFSET, NULL))
EDGE = Table(
    "a table of one edge's held-out residuals, its cells, their variances and the refit's",
    {"residuals": ARRAY, "cells": WHOLES, "se2": ARRAY, "s2": HEX},
)
# what predicts, allocates and renders a fit with no data beside it (FittedForm.to_dict,
# fitrules.jobs.standalone): every array as exactly as it was, in hexadecimal floats
STANDALONE = Table(
    "a table of the fit's ingredients (constants' order, cells, result, uncertainty, ...)",
    {
        "constants": ListOf("a list of one or more constant names", TEXT, 1),
        "cells": Table(
            "a table of the fitted cells (variables, metric, units, columns)",
            {
                "variables": TEXTS,
                "metric": TEXT,
                "units": NamesTo("a table of variable names to units", TEXT),
                "columns": NamesTo("a table of column names to arrays or lists of text",
                                   Either("an array or a list of text", (ARRAY, TEXTS)), 1),
            },  # fmt: skip
        ),
        "result": Table(
            "a table of the fit's objective, cells, convergence, condition and reasons",
            {"objective": HEX, "n_train": WHOLE, "converged": FLAG, "cond": HEX,
             "reasons": TEXTS},
        ),  # fmt: skip
        "uncertainty": Table(
            "a table of the Jacobian covariance, residual sd, dof, rank and note",
            {"covariance": ARRAY, "residual_sd": HEX, "dof": WHOLE, "rank": WHOLE,
             "note": TEXT},
        ),  # fmt: skip
        "derive": TEXTS,
        "harness": FLAG,
        "unit": Either("text or null", (TEXT, NULL)),
        "heldout": Either(
            "a table of the leave-one-cell-out refits or null",
            (
                Table(
                    "a table of the leave-one-cell-out refits",
                    {
                        "asked": FLAG,
                        "draws": ARRAY,
                        "residuals": ARRAY,
                        "noise": Table(
                            "a table of the seed noise (cv, runs, cells, method)",
                            {"cv": HEX, "runs": WHOLE, "cells": WHOLE, "method": TEXT},
                        ),
                        "relative": FLAG,
                        "level": NUMBER,
                        "robust": FLAG,
                        "offset": OFFSET_OR_NULL,
                        "response": ARRAY_OR_NULL,
                        "offset_note": TEXT,
                        "edges": NamesTo(
                            "a table of variable names to [low edge, high edge]",
                            ListOf("[low edge, high edge], each a table or null",
                                   Either("an edge or null", (EDGE, NULL)), 2),
                        ),  # fmt: skip
                    },
                ),
                NULL,
            ),
        ),
        "seed_offset": OFFSET_OR_NULL,
        "offset_response": ARRAY_OR_NULL,
        "bootstrap": Either(
            "a table of the bootstrap's refits or null",
            (
                Table(
                    "a table of the bootstrap's refits",
                    {"level": NUMBER, "resamples": WHOLE, "seed": WHOLE, "draws": ARRAY,
                     "failed": WHOLE, "single_run_cells": WHOLE, "kind": _choice(BOOTSTRAP_KINDS),
                     "reason": TEXT, "covariance": ARRAY_OR_NULL,
                     "covariances": ARRAY_OR_NULL},
                ),  # fmt: skip
                NULL,
            ),
        ),
        "profile": Either(
            "a table of the profile-likelihood intervals or null",
            (
                Table(
                    "a table of the profile-likelihood intervals",
                    {
                        "constants": TEXTS,
                        "intervals": NamesTo("a table of constant names to [low, high]",
                                             ListOf("[low, high]", HEX, 2)),
                        "notes": NamesTo("a table of constant names to text", TEXT),
                        "level": NUMBER,
                        "dof": WHOLE,
                        "threshold": HEX,
                        "objective": HEX,
                        "refits": WHOLE,
                        "wald_se": NamesTo("a table of constant names to numbers", HEX),
                        "calibration": TEXT,
                        "better": Either("a number or null", (HEX, NULL)),
                        "constrained": TEXTS,
                    },  # fmt: skip
                ),
                NULL,
            ),
        ),
    },
)

SAVED_FIT = Table(
    "a table (JSON object) with form, constants, data and call",
    {
        "form": Table(
            "a table of the form's name, expression and variables",
            {
                "name": TEXT,
                "expression": TEXT,
                "variables": ListOf("a list of one or more variable names", TEXT, 1),
                "fixed": NamesTo("a table of constant names to finite numbers", NUMBER),
                "bounds": NamesTo(
                    "a table of constant names to [low, high]",
                    ListOf("[low, high], each a finite number or null (no bound)",
                           BOUND_SIDE, 2),  # fmt: skip
                ),
                "by": Either("a column name or null", (TEXT, NULL)),
                "shared": Either("a list of constant names or null", (TEXTS, NULL)),
            },
            optional=("fixed", "bounds", "by", "shared"),
        ),
        "constants": NamesTo("a table of constant names to finite numbers", NUMBER, 1),
        "data": Table(
            "a table of the data's path and sha256",
            {"path": Either("text or null", (TEXT, NULL)), "sha256": SHA256},
        ),
        "call": Table(
            "a table of the fit's arguments",
            {
                "grid": Table(
                    "a table of how the grid was read (where, derive, metric, seed_col, unit, "
                    "path)",
                    {
                        "where": TEXTS,
                        "derive": TEXTS,
                        "metric": Either("a column name or null", (TEXT, NULL)),
                        "seed_col": Either("a column name or null", (TEXT, NULL)),
                        "unit": Either("text or null", (TEXT, NULL)),
                        "path": Either("text or null", (TEXT, NULL)),
                    },
                ),
                "objective": _choice(OBJECTIVES),
                "delta": NUMBER,
                "weights": _choice(WEIGHTS),
                "tune": Either("a column name, a list of them, or null", (TEXT, TEXTS, NULL)),
                "tune_seeds": Either(
                    "text, a list of whole numbers, or null",
                    (TEXT, ListOf("a list of whole numbers", WHOLE), NULL),
                ),
                "intervals": Leaf("true, false or 'profile'",
                                  lambda v: v is True or v is False or v == "profile"),
                "bootstrap": _choice(BOOTSTRAP_KINDS),
                "resamples": WHOLE,
                "seed": WHOLE,
                "level": NUMBER,
                "constraints": Either("a list of constraints (text) or null", (TEXTS, NULL)),
                "seed_sd": Either("a number or null", (NUMBER, NULL)),
                "seed_pool": Either("a list of filters (text) or null", (TEXTS, NULL)),
                "constants_exact": NamesTo(
                    "a table of constant names to their exact values",
                    Leaf("the hexadecimal text of a finite float (float.hex, e.g. "
                         "'0x1.8p+1')", _hex_float),  # fmt: skip
                ),
            },
            optional=("constraints", "constants_exact", "seed_sd", "seed_pool"),
        ),
        "fitrules_version": Either("text or null", (TEXT, NULL)),
        "standalone": STANDALONE,
    },
    optional=("fitrules_version", "standalone"),
)


# ------------------------------------------------------------------ the walk
def shown(value: Any) -> str:
    """``value`` in a message: a number or text as written (cut to 60 characters), a list or
    table by its size, so that no message grows with the file."""
    if isinstance(value, dict):
        return f"a table of {len(value)} key(s)"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    r = repr(value)
    return r if len(r) <= 60 else r[:28] + "..." + r[-28:]


def _key(where: str, key: Any) -> str:
    """``call`` and ``grid`` -> ``call.grid``; a key that is not a short name in brackets."""
    text = str(key)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", text):
        return f"{where}.{text}" if where else text
    return f"{where}[{shown(text)}]"


def _fits_type(spec: Spec, value: Any) -> bool:
    """Whether ``value`` is of ``spec``'s type (its contents unchecked)."""
    if isinstance(spec, Leaf):
        return spec.test(value)
    if isinstance(spec, Table | NamesTo):
        return isinstance(value, dict)
    if isinstance(spec, ListOf):
        return isinstance(value, list)
    return any(_fits_type(o, value) for o in spec.options)


def _walk(spec: Spec, value: Any, where: str, label: str) -> None:
    """Refuse ``value`` (at key ``where``) in one line unless it is what ``spec`` allows."""

    def refuse(allowed: str) -> SavedFitError:
        return SavedFitError(f"{label}: {where} is {shown(value)}; it must be {allowed}")

    if isinstance(spec, Either):
        spec = next((o for o in spec.options if _fits_type(o, value)), spec)
        if isinstance(spec, Either):
            raise refuse(spec.allowed)
    if not _fits_type(spec, value):
        raise refuse(spec.allowed)
    if isinstance(spec, Table):
        for key, inner in spec.keys.items():
            if key in value:
                _walk(inner, value[key], _key(where, key), label)
            elif key not in spec.optional:
                raise SavedFitError(
                    f"{label}: {_key(where, key)} is missing; it must be {inner.allowed}"
                )
    elif isinstance(spec, ListOf):
        if len(value) < spec.at_least:
            raise refuse(spec.allowed)
        for i, item in enumerate(value):
            _walk(spec.item, item, f"{where}[{i}]", label)
    elif isinstance(spec, NamesTo):
        if len(value) < spec.at_least:
            raise refuse(spec.allowed)
        for key, item in value.items():
            _walk(spec.value, item, _key(where, key), label)


# ------------------------------------------------------------------ reading
@dataclass(frozen=True)
class SavedFit:
    """A saved fit's record, its structure checked (:data:`SAVED_FIT`), and the label its
    messages name it by (the file's path, or "the saved fit" for its text)."""

    doc: dict
    label: str

    @contextmanager
    def refusals(self) -> Iterator[None]:
        """Within the block a refusal of what the record holds (a form that does not parse,
        a ``where`` that names no column, fit arguments out of range) is a
        :class:`SavedFitError` that names the file."""
        try:
            yield
        except SavedFitError:
            raise
        except FitrulesError as err:
            raise SavedFitError(f"{self.label}: as saved, {Exception.__str__(err)}") from None


def read_saved_fit(source: Any) -> SavedFit:
    """The record of the fit ``source`` saved (a path, or the JSON text ``to_json``
    returned), its structure checked against :data:`SAVED_FIT`.

    Raises
    ------
    SavedFitError
        In one line naming the file: for a path that is not a readable regular file, text
        that is not JSON (or nested too deep to parse), or a record that lacks a key the
        loader reads or holds a value there that it does not allow.
    """
    import json

    from fitrules.base.inputs import read_text

    if isinstance(source, str) and source.lstrip().startswith("{"):
        label, text = "the saved fit", source
    elif isinstance(source, str | Path):
        label = str(source) if len(str(source)) <= 200 else shown(str(source))
        try:  # a saved fit holds a row per cell of its table: the table's limit bounds it
            text = read_text(source, label, SavedFitError, MAX_TABLE_BYTES,
                             what="the file FittedForm.to_json wrote")
        except SavedFitError:
            raise
        except ValueError as err:  # a NUL character, which no path holds
            raise SavedFitError(f"{shown(str(source))}: cannot be read ({err})") from None
    else:
        raise SavedFitError(
            f"source {shown(source)}: give the path of a saved fit or its JSON text"
        )
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise SavedFitError(f"{label}: not JSON ({err.msg}, line {err.lineno})") from None
    except RecursionError:
        raise SavedFitError(f"{label}: not JSON a fit can be (nested too deeply)") from None
    except ValueError as err:  # an integer of thousands of digits
        raise SavedFitError(f"{label}: not JSON a fit can be ({err})") from None
    need = [k for k, v in SAVED_FIT.keys.items() if k not in SAVED_FIT.optional]
    missing = need if not isinstance(doc, dict) else [k for k in need if k not in doc]
    if missing:
        raise SavedFitError(
            f"{label}: not a fit saved by FittedForm.to_json (no {', '.join(missing)}); "
            "a fit saved before fitrules recorded its arguments must be refitted"
        )
    _walk(SAVED_FIT, doc, "", label)
    return SavedFit(doc, label)
