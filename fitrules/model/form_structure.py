"""How a bound form's constants enter it (:class:`Structure`): linearly or not, within which
bounds, and over which starting ranges the nonlinear ones are searched."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fitrules.model import expr as ex
from fitrules.model.form_levels import base_name

if TYPE_CHECKING:
    from fitrules.model.form_class import Form


DEFAULT_NONLINEAR_BOUNDS = (-10.0, 10.0)
DEFAULT_NONLINEAR_START = (-3.0, 3.0)
LOG_RANGE = 1e3  # a positive starting range at least this wide (hi/lo) is searched in log
LOG_FLOOR = 1e9  # a bounded range from 0 to hi is searched on a log scale from hi / this


@dataclass(frozen=True)
class Structure:
    """How a bound form's constants enter it, and the compiled pieces fitting needs.

    The expression is a sum of terms; a constant that multiplies exactly one term and appears
    nowhere else enters linearly: for fixed nonlinear constants the linear ones solve a
    least-squares problem exactly (variable projection).
    """

    constants: tuple[str, ...]
    linear: tuple[str, ...]
    nonlinear: tuple[str, ...]
    basis: tuple[ex.Node, ...]  # one per linear constant: its term with the constant set to 1
    offset: ex.Node  # the terms with no linear constant
    gradient: tuple[ex.Node, ...]  # d expression / d constant, in the order of `constants`
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    start_lo: tuple[float, ...]  # starting ranges of the nonlinear constants
    start_hi: tuple[float, ...]
    log_axes: tuple[bool, ...] = ()  # per nonlinear constant: searched on a log scale
    # per nonlinear constant: > 0 for a range of both signs searched on two log scales,
    # the smallest magnitude searched (a default range of a scale; see fitrules.model.ranges)
    floors: tuple[float, ...] = ()

    @classmethod
    def of(cls, form: Form) -> Structure:
        tree, consts = form.tree, form.constants
        linear, basis, offset = [], [], ex.ZERO
        for sign, term in ex.terms(tree):
            signed = term if sign > 0 else ex.neg(term)
            pick = next(
                (
                    n
                    for n in ex.numerator_names(term)
                    if n in consts and n not in linear and ex.count(tree, n) == 1
                ),
                None,
            )
            if pick is None:
                offset = ex.add(offset, signed)
            else:
                linear.append(pick)
                basis.append(ex.substitute(signed, {pick: ex.ONE}))
        nonlinear = tuple(c for c in consts if c not in linear)
        lower, upper = [], []
        ranges = {c: r for c, r in form.ranges.items() if base_name(c) not in form.bounds}
        for c in consts:
            default = DEFAULT_NONLINEAR_BOUNDS if c in nonlinear else (-math.inf, math.inf)
            if c in ranges and c in nonlinear:
                default = (ranges[c].lo, ranges[c].hi)
            lo, hi = form.bounds.get(base_name(c), default)
            lower.append(float(lo))
            upper.append(float(hi))
        s_lo, s_hi, log_axes, floors = [], [], [], []
        for c in nonlinear:
            i = consts.index(c)
            given = form.bounds.get(base_name(c))
            if base_name(c) in form.start:
                lo, hi = form.start[base_name(c)]
            elif c in ranges:
                lo, hi = ranges[c].lo, ranges[c].hi
            elif given is not None and all(math.isfinite(float(v)) for v in given):
                lo, hi = given  # starts cover the box a user bounded
            else:
                lo, hi = default_start(lower[i], upper[i])
            lo, hi = float(lo), float(hi)
            floor = ranges[c].floor if c in ranges and ranges[c].signed else 0.0
            if base_name(c) in form.start:
                floor = 0.0
            elif c not in ranges and given is not None and lo == 0 < hi and hi >= LOG_RANGE:
                # a bounded box from 0 over decades is searched on a log scale from a floor
                # (Dl in [0, 1e8] with its optimum near 1e3 fell between linear grid points)
                lo = hi / LOG_FLOOR
            s_lo.append(max(lo, lower[i]))
            s_hi.append(min(hi, upper[i]))
            floors.append(floor)
            # a positive range over decades is searched on a log scale (Nc ~ 1e13)
            log_axes.append(bool(s_lo[-1] > 0 and s_hi[-1] >= LOG_RANGE * s_lo[-1]))
        return cls(
            tuple(consts),
            tuple(linear),
            nonlinear,
            tuple(basis),
            offset,
            tuple(ex.diff(tree, c) for c in consts),
            tuple(lower),
            tuple(upper),
            tuple(s_lo),
            tuple(s_hi),
            tuple(log_axes),
            tuple(floors),
        )


def default_start(lo: float, hi: float) -> tuple[float, float]:
    """The starting range of a nonlinear constant with no ``start``: the default range
    clipped to its bounds (bounds = [-2, 2] starts over [-2, 2]), or the bounds themselves
    when the two do not overlap."""
    a, b = max(DEFAULT_NONLINEAR_START[0], lo), min(DEFAULT_NONLINEAR_START[1], hi)
    if a < b:
        return a, b
    return lo, hi
