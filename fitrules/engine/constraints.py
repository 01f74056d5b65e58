"""Linear constraints between a form's constants: ``"b > a"``, ``"a + b = 1"``, ``"c >= 0.5*b"``.

Each side is parsed by the expression grammar of forms (:func:`fitrules.model.expr.parse`,
an AST whitelist: nothing is evaluated as code), and the difference of the sides must be
linear in the constants: its derivative by each constant a number. A constraint is kept as
``coef . theta  OP  rhs`` with OP one of ``=``, ``>=``; ``<=`` is turned around, and a strict
``>`` or ``<`` is enforced as its closed form (an optimum on the boundary of an open set does
not exist; the record says which constraints are active at the fit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import ExpressionError, FormError, param
from fitrules.model import expr as ex

MAX_CONSTRAINTS = 16
_OPS = re.compile(r"(>=|<=|==|=|>|<)")


@dataclass(frozen=True)
class Constraint:
    """``coef . theta OP rhs`` (OP ``=`` or ``>=``), and the text it was parsed from."""

    text: str
    coef: tuple[float, ...]
    rhs: float
    op: str  # "=" or ">="

    def margin(self, theta: np.ndarray) -> float:
        """``coef . theta - rhs``: 0 on the boundary, >= 0 where an inequality holds."""
        return float(np.dot(self.coef, theta) - self.rhs)

    def _scale(self, theta: np.ndarray) -> float:
        return max(1.0, abs(self.rhs), float(np.abs(np.multiply(self.coef, theta)).max()))

    def holds(self, theta: np.ndarray, tol: float = 1e-9) -> bool:
        m, scale = self.margin(theta), tol * self._scale(theta)
        return abs(m) <= scale if self.op == "=" else m >= -scale

    def active(self, theta: np.ndarray, tol: float = 1e-7) -> bool:
        """On its boundary at ``theta`` (an equality always is)."""
        return self.op == "=" or abs(self.margin(theta)) <= tol * self._scale(theta)


@dataclass(frozen=True)
class Constraints:
    """The constraints of one fit, over the constants in ``constants``' order."""

    constants: tuple[str, ...]
    items: tuple[Constraint, ...]

    def __bool__(self) -> bool:
        return bool(self.items)

    def matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(C, d) of the equalities ``C theta = d`` and (G, h) of ``G theta >= h``."""
        p = len(self.constants)
        eq = [c for c in self.items if c.op == "="]
        ge = [c for c in self.items if c.op == ">="]
        C = np.array([c.coef for c in eq], float).reshape(len(eq), p)
        G = np.array([c.coef for c in ge], float).reshape(len(ge), p)
        return C, np.array([c.rhs for c in eq]), G, np.array([c.rhs for c in ge])

    def violated(self, theta: np.ndarray) -> list[str]:
        return [c.text for c in self.items if not c.holds(theta)]

    def active(self, theta: np.ndarray) -> list[str]:
        return [c.text for c in self.items if c.active(theta)]

    def to_dict(self, theta: np.ndarray | None = None) -> dict:
        out: dict = {"given": [c.text for c in self.items]}
        if theta is not None:
            out["active"] = self.active(theta)
        return out


def parse_constraints(items: str | Sequence[str] | None, constants: Sequence[str],
                      form: str = "") -> Constraints:  # fmt: skip
    """Parse ``items`` (a text, or texts; several in one text separated by ``;``) against
    the free constants of a bound form.

    Raises
    ------
    FormError
        For a text that is not ``LEFT OP RIGHT`` with one of ``=``, ``==``, ``>=``, ``<=``,
        ``>``, ``<``; a name that is not a free constant of the form; a side that is not
        linear in the constants; a constraint with no constant or one that can never hold.
    """
    if items is None:
        return Constraints(tuple(constants), ())
    given = [items] if isinstance(items, str) else items
    if not (isinstance(given, Sequence) and all(isinstance(t, str) for t in given)):
        raise FormError(f"constraints {items!r}: give a text such as 'b > a' or a list of them")
    for t in given:
        if not t.strip(" ;"):
            raise FormError(f"{param('constraints')} {t!r}: empty; give one such as 'b > a'")
    texts = [t for s in given for t in (u.strip() for u in s.split(";")) if t]
    if len(texts) > MAX_CONSTRAINTS:
        raise FormError(f"constraints: {len(texts)} given; at most {MAX_CONSTRAINTS}")
    out = tuple(_parse_one(t, tuple(constants), form) for t in texts)
    return Constraints(tuple(constants), out)


def _parse_one(text: str, constants: tuple[str, ...], form: str) -> Constraint:
    where = f"{param('constraints')} {text!r}" + (f" (form {form!r})" if form else "")
    parts = _OPS.split(text)
    if len(parts) != 3:
        raise FormError(
            f"{where}: write one comparison, LEFT OP RIGHT with OP one of =, >=, <=, >, <, "
            "e.g. 'b > a' or 'a + b = 1'"
        )
    left, op, right = parts
    try:
        node = ex.sub(ex.parse(left, what=where), ex.parse(right, what=where))
    except ExpressionError as err:
        raise FormError(str(err)) from None
    names = ex.names(node)
    unknown = [n for n in names if n not in constants]
    if unknown:
        raise FormError(
            f"{where}: {unknown[0]!r} is not a free constant of the form (constants: "
            f"{', '.join(constants) or 'none'})"
        )
    coef = []
    for c in constants:
        d = ex.diff(node, c)
        if ex.names(d):
            raise FormError(
                f"{where}: not linear in the constants (d/d{c} = {d}); a constraint is a sum "
                "of constants times numbers, e.g. 'c >= 0.5*b'"
            )
        coef.append(float(ex.evaluate(d, {})))
    zero = {c: 0.0 for c in constants}
    with np.errstate(all="ignore"):
        rhs = -float(ex.evaluate(node, zero))
    if not all(math.isfinite(v) for v in (*coef, rhs)):
        raise FormError(f"{where}: a coefficient is not a finite number")
    if not any(coef):
        raise FormError(f"{where}: names no constant (it is always or never true)")
    if op in ("<=", "<"):
        coef, rhs = [-v for v in coef], -rhs
    return Constraint(text.strip(), tuple(coef), rhs, "=" if op in ("=", "==") else ">=")
