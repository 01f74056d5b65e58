"""Arguments of the public functions: each checked for its type and range on the way in.

The command line hands every function text it has parsed; Python callers hand it anything
(``np.int64(20)``, ``"20"``, ``True``, NaN, a list). Each public function checks its
arguments here first, so that a wrong one is a :class:`~fitrules.base.errors.FitrulesError`
naming the argument, the value and what is allowed, never an AttributeError from deep
inside. numpy scalars are accepted wherever the Python number is.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fitrules.base.errors import FitrulesError
from fitrules.base.limits import MAX_SEED


def _shown(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:28] + "..." + r[-28:]


def count(value: Any, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``: an integer (numpy ones too) or a whole float.

    Raises
    ------
    FitrulesError
        For a bool, text, a fraction, NaN or a value out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise FitrulesError(f"{name} {_shown(value)}: must be a whole number")
    if not isinstance(value, numbers.Integral):
        if not (math.isfinite(float(value)) and float(value).is_integer()):
            raise FitrulesError(f"{name} {_shown(value)}: must be a whole number")
    n = int(value) if isinstance(value, numbers.Integral) else int(float(value))
    if n < low or (high is not None and n > high):
        top = f" to {high:,}" if high is not None else " or more"
        raise FitrulesError(f"{name} {n:,}: must be from {low:,}{top}")
    return n


def integer(value: Any, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``: an integer (numpy ones too), not a float,
    however whole, nor a bool; for counts of processes, where ``2.0`` is a mistake.

    Raises
    ------
    FitrulesError
        For a bool, a float, text or a value out of range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise FitrulesError(f"{name} {_shown(value)}: must be an integer")
    return count(value, name, low, high)


def seed(value: Any, name: str = "seed") -> int:
    """A seed: a whole number from 0 to 2**63 - 1."""
    return count(value, name, 0, MAX_SEED)


def real(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = True,
    open_high: bool = True,
) -> float:
    """``value`` as a finite float within the bounds given (open by default).

    Raises
    ------
    FitrulesError
        For a bool, text, NaN, infinity or a value outside the bounds.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise FitrulesError(f"{name} {_shown(value)}: must be a number")
    v = float(value)
    if not math.isfinite(v):
        raise FitrulesError(f"{name} {_shown(value)}: must be a finite number")
    below = low is not None and (v <= low if open_low else v < low)
    above = high is not None and (v >= high if open_high else v > high)
    if below or above:
        lo = "" if low is None else f"{'>' if open_low else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if open_high else '<='} {high:g}"
        raise FitrulesError(f"{name} {v:g}: must be {' and '.join(p for p in (lo, hi) if p)}")
    return v


def level(value: Any, name: str = "level") -> float:
    """An interval level in (0, 1)."""
    return real(value, name, 0.0, 1.0)


def flag(value: Any, name: str) -> bool:
    """True or False (numpy's too); not 'no', 0 or None."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    raise FitrulesError(f"{name} {_shown(value)}: must be True or False")


def text(value: Any, name: str, none: bool = False) -> str | None:
    """A string (or, with ``none``, None)."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise FitrulesError(f"{name} {_shown(value)}: must be text" + (" or None" if none else ""))
    return value


def texts(value: Any, name: str) -> tuple[str, ...]:
    """One string or a sequence of strings, as a tuple (None and () are empty)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise FitrulesError(f"{name} {_shown(value)}: must be text or a list of texts")
    return tuple(value)


def path(value: Any, name: str) -> Path:
    """A file's path: a non-empty string or an ``os.PathLike``."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value.strip()):
        return Path(value)
    raise FitrulesError(f"{name} {_shown(value)}: give a file's path (a string or a Path)")


def interval(value: Any, name: str) -> tuple[float, float] | None:
    """None, or two finite numbers low < high."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise FitrulesError(f"{name} {_shown(value)}: must be two numbers (low, high) or None")
    lo, hi = real(value[0], name), real(value[1], name)
    if not lo < hi:
        raise FitrulesError(f"{name} {_shown(value)}: must have low < high")
    return lo, hi


def callback(value: Any, name: str) -> None:
    """None or something callable (a progress or plan callback)."""
    if value is not None and not callable(value):
        raise FitrulesError(f"{name} {_shown(value)}: must be callable or None")


def name_value_pairs(text: str) -> dict[str, str] | None:
    """``"N=parameters, D=tokens"`` -> ``{"N": "parameters", "D": "tokens"}`` (backticks
    around a name dropped); None when a part has no ``=`` or an empty side, for the caller to
    refuse in its own words."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            return None
        out[name.strip().strip("`")] = value.strip()
    return out


def seed_list(text: str, name: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``: distinct seeds, at least one.

    Raises
    ------
    FitrulesError
        For text that is not whole numbers (ASCII digits) separated by commas, an empty item
        (``0,1,``), no seed, a seed out of range or one given twice.
    """
    items = [s.strip() for s in text.split(",")] if text.strip() else []
    if any(not s for s in items):  # a trailing comma, or two in a row: a seed left out?
        raise FitrulesError(f"{name} {text!r}: an empty seed between commas; e.g. 0,1,2")
    if not all(re.fullmatch(r"[+-]?[0-9]+", s) for s in items):  # int() reads "１" too
        raise FitrulesError(f"{name} {text!r}: expected integers separated by commas")
    seeds = [int(s) for s in items]
    if not seeds:
        raise FitrulesError(f"{name} {text!r}: no seed given")
    from fitrules.base.limits import check_seed

    for s in seeds:
        check_seed(s, name)
    if len(set(seeds)) != len(seeds):
        raise FitrulesError(f"{name} {text!r}: a seed is given twice")
    return seeds
