"""Default ranges of nonlinear constants from the role they play in a form.

An exponent (``N**alpha``) is of order one: it keeps the range [-10, 10]. A constant that
scales or shifts a variable (``N/Nc``, ``A/N``, ``x - c``, ``exp(-x/c)``) is of the order of
that variable, which can be 1e13 (Kaplan's Nc) or 1e8 (ParScale's A): its range comes from
the variable's values on the grid, widened by ``SCALE_MARGIN`` on each side and searched on a
log scale. Where the form is undefined for one sign of it (the constant is a factor of the
base of a fractional power, or of the argument of log or sqrt, and the variables there are
positive) the range is positive; otherwise it holds both signs, each on a log scale.

The ranges are read from the grid's cells when a form is bound to a grid
(:meth:`fitrules.model.forms.Form.bind`); a ``--bound`` on the constant replaces its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fitrules.model import expr as ex

SCALE_MARGIN = 1e6  # how far beyond the variable's own range a positive scale may lie
SIGNED_MARGIN = 1e3  # the same for a constant of either sign (searched on two log axes)
RELATIVE_FLOOR = 1e-9  # magnitudes below this fraction of the largest are rounding (x/x - 1)
ORDER_ONE = (0.1, 10.0)  # a scale whose variable stays within this needs no default of its own


@dataclass(frozen=True)
class DefaultRange:
    """The default range of one constant.

    Attributes
    ----------
    lo, hi : the bounds; ``lo < 0 < hi`` for a range of both signs.
    floor : the smallest magnitude searched (both-sign ranges only; else 0).
    role : what the constant does, for the output, e.g. ``"scale of N"``.
    """

    lo: float
    hi: float
    floor: float
    role: str

    @property
    def signed(self) -> bool:
        return self.lo < 0 < self.hi

    def describe(self) -> str:
        if self.signed:
            return f"+-[{self.floor:.3g}, {self.hi:.3g}]"
        return f"[{self.lo:.3g}, {self.hi:.3g}]"


def _chain(node: ex.Node, sign: int = 1) -> list[tuple[int, ex.Node]]:
    """Factors of a product / quotient with their powers: ``a/(b*c)`` -> a^1 b^-1 c^-1."""
    if node.op == "mul":
        return _chain(node.args[0], sign) + _chain(node.args[1], sign)
    if node.op == "div":
        return _chain(node.args[0], sign) + _chain(node.args[1], -sign)
    if node.op == "neg":
        return _chain(node.args[0], sign)
    return [(sign, node)]


def _sum(node: ex.Node) -> list[ex.Node]:
    return [t for _, t in ex.terms(node)]


def _is_integer(node: ex.Node) -> bool:
    return node.op == "num" and float(node.value).is_integer()


def _magnitudes(node: ex.Node, env: Mapping[str, np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        v = np.abs(np.asarray(ex.evaluate(node, env), float))
    v = v[np.isfinite(v) & (v > 0)]
    return v[v >= RELATIVE_FLOOR * v.max()] if len(v) else v


def default_ranges(
    tree: ex.Node, nonlinear: tuple[str, ...], variables: Mapping[str, np.ndarray]
) -> dict[str, DefaultRange]:
    """Per nonlinear constant that scales or shifts a variable, its default range.

    Parameters
    ----------
    tree : the form's expression (levels expanded).
    nonlinear : the constants searched on the grid.
    variables : each variable's values over the grid's cells (or runs).

    Returns
    -------
    dict
        Only constants with a scale or shift role whose variable is not of order one.

    Examples
    --------
    >>> import numpy as np
    >>> t = ex.parse("E + (Nc/N)**alpha")
    >>> r = default_ranges(t, ("Nc", "alpha"), {"N": np.array([1e7, 1e9])})
    >>> r["Nc"].role, r["Nc"].lo, r["Nc"].hi
    ('scale of N', 10.0, 1000000000000000.0)
    """
    consts = set(nonlinear)
    env = {k: np.asarray(v, float) for k, v in variables.items()}
    found: dict[str, list[tuple[float, float, bool, str]]] = {}

    def note(c: str, mags: np.ndarray, positive: bool, role: str) -> None:
        if len(mags):
            found.setdefault(c, []).append((float(mags.min()), float(mags.max()), positive, role))

    def walk(node: ex.Node, positive: bool) -> None:
        if node.op in ("mul", "div", "neg"):
            factors = _chain(node)
            # factors of variables alone (a linear constant, or a name that is no column,
            # scales nothing that can be measured)
            pure = [(s, f) for s, f in factors if ex.names(f) and set(ex.names(f)) <= set(env)]
            for s_c, f in factors:
                if f.op == "name" and f.value in consts and pure:
                    ref = ex.ONE
                    for s_f, g in pure:
                        ref = ex.mul(ref, g) if s_f * s_c < 0 else ex.div(ref, g)
                    role = "scale of " + "*".join(str(g) for _, g in pure)
                    note(f.value, _magnitudes(ref, env), positive, role)
            for _, f in factors:
                walk(f, positive)
            return
        if node.op in ("add", "sub"):
            parts = _sum(node)
            pure = [t for t in parts if ex.names(t) and set(ex.names(t)) <= set(env)]
            for t in parts:
                if t.op == "name" and t.value in consts and pure:
                    ref = pure[0]
                    note(t.value, _magnitudes(ref, env), False, f"shift of {ref}")
            for t in parts:
                walk(t, False)
            return
        if node.op == "pow":
            base, power = node.args
            walk(base, not _is_integer(power))
            walk(power, False)
            return
        if node.op in ("log", "sqrt"):
            walk(node.args[0], True)
            return
        for a in node.args:
            if isinstance(a, ex.Node):
                walk(a, False)

    walk(tree, False)
    out = {}
    for c, seen in found.items():
        lo = min(s[0] for s in seen)
        hi = max(s[1] for s in seen)
        if ORDER_ONE[0] <= lo and hi <= ORDER_ONE[1]:
            continue  # of order one: the exponent's default range serves
        roles = ", ".join(dict.fromkeys(s[3] for s in seen))
        if any(s[2] for s in seen):
            out[c] = DefaultRange(lo / SCALE_MARGIN, hi * SCALE_MARGIN, 0.0, roles)
        else:
            top = hi * SIGNED_MARGIN
            out[c] = DefaultRange(-top, top, lo / SIGNED_MARGIN, roles)
    return out
