"""The Form class: one candidate rule, an expression over variables and constants, checked
when made and bound to a grid's columns (:meth:`Form.bind`)."""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from fitrules.base.errors import FormError, LimitError, param, with_fixes
from fitrules.base.limits import MAX_CONSTANTS, MAX_NONLINEAR
from fitrules.model import expr as ex
from fitrules.model.form_levels import (
    _check_level_usage,
    _expand,
    _group,
    _level_columns,
    _replace_constants,
    base_name,
)
from fitrules.model.form_structure import Structure, default_start
from fitrules.model.ranges import DefaultRange, default_ranges

if TYPE_CHECKING:
    import pandas as pd


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass(frozen=True)
class Form:
    """A candidate rule.

    Parameters
    ----------
    name : str
        Identifier used in tables and on the command line.
    expression : str
        Arithmetic over variables and constants (``+ - * / **``, ``log``, ``exp``,
        ``sqrt``).
    variables : sequence of str, optional
        The names that are grid columns; ``None`` resolves them against the grid.
    bounds : dict of str to (float, float), optional
        Per constant, (low, high); nonlinear constants default to (-10, 10).
    start : dict of str to (float, float), optional
        Per nonlinear constant, the range searched by the starting grid (default (-3, 3)).
    description : str, optional
        One sentence for ``fitrules forms show``.
    source : str, optional
        Where the form was defined, for messages (default ``"command line"``).
    fixed : dict of str to float, optional
        Constants held at a value instead of fitted.
    by : str, optional
        Fit one form per level of this column, jointly (see :func:`fitrules.fit`).
    shared : sequence of str, optional
        With ``by``, the constants common to all groups (default: the nonlinear ones).
    levels : dict of str to tuple of float, optional
        Per column of a per-level constant ``c[COL]`` or of ``by``, its levels; set by
        :meth:`bind` from the grid's runs.
    origin : str, optional
        Where the form came from when a tool proposed it (``fitrules search``).
    ranges : dict of str to DefaultRange, optional
        Default ranges of the constants that scale or shift a variable, read from the grid's
        values when the form is bound (see :mod:`fitrules.model.ranges`); ``bounds`` replace
        them.

    Examples
    --------
    >>> f = Form("composition", "L0 + a*omega*(H/16)**b", variables=("H", "omega"))
    >>> f.constants
    ('L0', 'a', 'b')
    """

    name: str
    expression: str
    variables: tuple[str, ...] | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    start: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    description: str = ""
    source: str = "command line"
    fixed: Mapping[str, float] = field(default_factory=dict)
    by: str | None = None
    shared: tuple[str, ...] | None = None
    levels: Mapping[str, tuple[float, ...]] | None = None
    origin: str = ""  # where the form came from when a tool proposed it (fitrules search)
    # default ranges of the constants that scale or shift a variable, read from the grid's
    # values when the form is bound to its runs (see fitrules.model.ranges); --bound replaces them
    ranges: Mapping[str, DefaultRange] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise FormError(
                f"form name {self.name!r} is not allowed; use letters, digits, _ or -"
                ", starting with a letter"
            )
        for label in ("description", "source", "origin"):
            if not isinstance(getattr(self, label), str):
                raise FormError(
                    f"form {self.name!r}: {label} must be text, got {getattr(self, label)!r}"
                )
        if not isinstance(self.expression, str):
            raise FormError(f"form {self.name!r}: the expression must be text, not "
                            f"{type(self.expression).__name__}")  # fmt: skip
        # every argument's kind first: the checks below read them
        if self.variables is not None and (
            isinstance(self.variables, str)
            or not isinstance(self.variables, Sequence)
            or not all(isinstance(v, str) for v in self.variables)
        ):
            raise FormError(
                f"form {self.name!r}: variables must be a sequence of column names, e.g. "
                f'("H", "omega"); got {self.variables!r}'
            )
        for label in ("bounds", "start", "fixed"):
            value = getattr(self, label)
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise FormError(
                    f"form {self.name!r}: {label} must be a mapping of constant names, got "
                    f"{value!r}"
                )
        tree = ex.parse(self.expression, what=f"form {self.name!r}")
        _check_level_usage(tree, self)
        tree = self._fix(tree)
        if self._groups_resolved:
            tree = _group(tree, str(self.by), tuple(self.shared or ()), self)
        if self.levels is not None:
            tree = _expand(tree, self.levels, self)
        object.__setattr__(self, "_tree", tree)
        self._check_ranges()
        if self.variables is not None:
            if isinstance(self.variables, str) or not all(
                isinstance(v, str) for v in self.variables
            ):
                raise FormError(
                    f"form {self.name!r}: variables must be a sequence of column names, e.g. "
                    f'("H", "omega"); got {self.variables!r}'
                )
            if not len(self.variables):
                raise FormError(
                    f"form {self.name!r}: declares no variables; name at least one column "
                    "it reads, or leave the variables out to resolve them against the grid"
                )
            object.__setattr__(self, "variables", tuple(self.variables))
            missing = [v for v in self.variables if v not in ex.names(tree)]
            if missing:
                raise FormError(
                    f"form {self.name!r}: declared variable(s) {missing} do not "
                    f"appear in {self.expression!r}"
                )
            self._check_constant_options()

    def _fix(self, tree: ex.Node) -> ex.Node:
        """The tree with each fixed constant replaced by its value."""
        if not isinstance(self.fixed, Mapping):
            raise FormError(
                f"form {self.name!r}: fixed must be a table of NAME = VALUE, got {self.fixed!r}"
            )
        if not self.fixed:
            return tree
        known = ex.names(tree)
        values = {}
        for key, v in self.fixed.items():
            if key not in known or (self.variables is not None and key in self.variables):
                raise FormError(
                    f"form {self.name!r}: cannot fix {key!r}, which is not a constant of "
                    f"{self.expression!r}"
                )
            if isinstance(v, bool | str | bytes):
                raise FormError(f"form {self.name!r}: fixed value of {key!r} must be a number")
            try:
                x = float(v)
            except (TypeError, ValueError, OverflowError):
                raise FormError(
                    f"form {self.name!r}: fixed value of {key!r} must be a number, got {v!r}"
                ) from None
            if not math.isfinite(x):
                raise FormError(
                    f"form {self.name!r}: fixed value of {key!r} must be finite, got {v!r}"
                )
            values[key] = ex.num(x)
        return _replace_constants(tree, values)

    @property
    def _groups_resolved(self) -> bool:
        """Grouped, with the shared constants and the variables (the group column among
        them) known: see :meth:`_resolve_groups`."""
        return (
            self.by is not None
            and self.shared is not None
            and self.variables is not None
            and self.by in self.variables
        )

    @property
    def level_columns(self) -> tuple[str, ...]:
        """Columns ``COL`` of the per-level constants ``c[COL]`` (before expansion)."""
        return _level_columns(ex.parse(self.expression, what=f"form {self.name!r}")) + (
            (self.by,) if self.by is not None else ()
        )

    @property
    def base_constants(self) -> tuple[str, ...]:
        """The constants as written: ``L0`` for the per-level constants ``L0[H=1]``, ..."""
        return tuple(dict.fromkeys(base_name(c) for c in self.constants))

    def _check_ranges(self) -> None:
        """Before the constants are known: a start given with bounds lies within them."""
        for label in ("bounds", "start"):
            if not isinstance(getattr(self, label), Mapping):
                raise FormError(
                    f"form {self.name!r}: {label} must be a table of NAME = [LOW, HIGH], got "
                    f"{getattr(self, label)!r}"
                )
        for key, pair in self.start.items():
            if key not in self.bounds:
                continue
            try:
                (a, b), (lo, hi) = (float(x) for x in pair), (float(x) for x in self.bounds[key])
            except (TypeError, ValueError, OverflowError):
                continue  # the pairs themselves are checked with the constants
            if not (lo <= a < b <= hi):
                raise FormError(
                    f"form {self.name!r}: start of {key!r} {list(pair)!r} is not a range "
                    f"inside its bounds [{lo:g}, {hi:g}]"
                )

    def _check_constant_options(self) -> None:
        for label, opts in (("bounds", self.bounds), ("start", self.start)):
            if not isinstance(opts, Mapping):
                raise FormError(
                    f"form {self.name!r}: {label} must be a table of NAME = [LOW, HIGH], got "
                    f"{opts!r}"
                )
            for key, pair in opts.items():
                if key not in self.base_constants:
                    raise FormError(
                        f"form {self.name!r}: {label} given for {key!r}, which is "
                        f"not a constant of it (constants: {', '.join(self.base_constants)})"
                    )
                try:
                    if isinstance(pair, str | bytes) or len(pair) != 2:
                        raise TypeError
                    if any(isinstance(x, bool | str | bytes) for x in pair):
                        raise TypeError
                    lo, hi = (float(x) for x in pair)
                except (TypeError, ValueError, OverflowError):
                    raise FormError(
                        f"form {self.name!r}: {label} of {key!r} must be two numbers, got {pair!r}"
                    ) from None
                if not lo < hi:
                    raise FormError(
                        f"form {self.name!r}: {label} of {key!r} must have low < high, got {pair!r}"
                    )
                if label == "start" and not (math.isfinite(lo) and math.isfinite(hi)):
                    raise FormError(
                        f"form {self.name!r}: start of {key!r} must be two finite numbers, "
                        f"got {pair!r}"
                    )

    def _check_structure(self) -> None:
        """Once the variables are known: constants exist and are few enough, bounds and
        starting ranges are usable."""
        consts = self.constants
        if not consts:
            raise FormError(
                f"form {self.name!r} has no constants to fit: every name in "
                f"{self.expression!r} is a column of the grid"
            )
        if len(consts) > MAX_CONSTANTS:
            raise LimitError(
                f"form {self.name!r} has {len(consts)} constants; at most {MAX_CONSTANTS} "
                "are allowed"
            )
        s = self.structure
        if len(s.nonlinear) > MAX_NONLINEAR:
            raise LimitError(
                f"form {self.name!r} has {len(s.nonlinear)} nonlinear constants "
                f"({', '.join(s.nonlinear)}); at most {MAX_NONLINEAR} are allowed (each is "
                "searched on a grid)"
            )
        linear = {base_name(c) for c in s.linear}
        for label, opts in (("bounds", self.bounds), ("start", self.start)):
            for key in opts:
                if key in linear:
                    raise FormError(
                        f"form {self.name!r}: {label} given for {key!r}, which enters "
                        "linearly and is solved exactly without bounds; bounds and start "
                        "apply to nonlinear constants"
                        + (f" ({', '.join(s.nonlinear)})" if s.nonlinear else " (it has none)")
                    )
        for c in s.nonlinear:
            i = s.constants.index(c)
            lo, hi = s.lower[i], s.upper[i]
            a, b = self.start.get(base_name(c), default_start(lo, hi))
            if not (lo <= float(a) and float(b) <= hi):
                raise FormError(
                    f"form {self.name!r}: the starting range [{float(a):g}, {float(b):g}] of "
                    f"{c!r} is not inside its bounds [{lo:g}, {hi:g}]; give a start within "
                    "them"
                )

    @property
    def tree(self) -> ex.Node:
        return self._tree  # type: ignore[attr-defined]

    @property
    def names(self) -> list[str]:
        return ex.names(self.tree)

    @property
    def bound_variables(self) -> tuple[str, ...]:
        """The variables, once resolved against a grid (see :meth:`bind`)."""
        if self.variables is None:
            raise FormError(f"form {self.name!r}: variables are not resolved yet")
        return self.variables

    @property
    def constants(self) -> tuple[str, ...]:
        out = [n for n in self.names if n not in self.bound_variables]
        # per-level constants next to each other, in the order their names first appear
        first = {b: i for i, b in reversed(list(enumerate(base_name(c) for c in out)))}
        return tuple(sorted(out, key=lambda c: first[base_name(c)]))

    def bind(self, columns: Iterable[str], data: pd.DataFrame | None = None) -> Form:
        """This form with its variables resolved against (and checked in) ``columns``.

        Parameters
        ----------
        columns : iterable of str
            The grid's columns.
        data : DataFrame, optional
            The grid's runs; needed when the form has per-level constants ``c[COL]`` or groups
            (``by``): one constant per level of ``COL`` found in ``data``.

        Returns
        -------
        Form
            A copy whose variables are bound to ``columns``.

        Raises
        ------
        FormError
            If a variable is not a column, a constant option names no constant, or the
            per-level constants need ``data`` that is not given.
        """
        columns = list(columns)
        for key in self.fixed:
            if key in columns:
                raise FormError(
                    f"form {self.name!r}: cannot fix {key!r}, a column of the grid (a "
                    f"variable); {param('fix')} holds a constant"
                )
        if self.by is not None and not self._groups_resolved:
            return self._resolve_groups(columns, data).bind(columns, data)
        if self.levels is None and _level_columns(self.tree):
            return self._with_levels(columns, data).bind(columns, data)
        self._check_spellings(columns)
        if self.variables is not None:
            lacking = [v for v in self.variables if v not in columns]
            if lacking:
                from fitrules.model.formats import rename_fix, rename_hint

                close = _close(lacking[0], columns)
                hint = close or rename_hint(lacking[0], columns)
                fix = None if close else rename_fix(lacking[0], columns)
                raise with_fixes(
                    FormError(
                        f"form {self.name!r} reads variable {lacking[0]!r}, which the "
                        f"grid lacks{hint}; columns: {', '.join(columns)}"
                    ),
                    *([fix] if fix else []),
                )
            self._check_structure()
            return self._with_ranges(data)
        variables = tuple(n for n in self.names if n in columns)
        for n in self.names:
            if n not in columns:
                hint = _close(n, columns)
                if hint:
                    raise FormError(
                        f"form {self.name!r}: {n!r} is not a column of the grid"
                        f"{hint}; if it is a constant, declare the variables, e.g. "
                        f"{self.name}(H, omega) = ..."
                    )
        if not variables:
            from fitrules.model.formats import quoted_arg, rename_fix

            # a name a column is probably under another name (params.N for N): say which
            fixes = [f for f in (rename_fix(n, columns) for n in self.names) if f]
            hint = (
                " (its variables may be under other names: add "
                + " ".join(f"{flag} {quoted_arg(value)}" for flag, value in fixes)
                + ")"
                if fixes
                else ""
            )
            raise with_fixes(
                FormError(
                    f"form {self.name!r} reads no column of the grid "
                    f"({self.expression!r}){hint}; columns: {', '.join(columns)}"
                ),
                *fixes,
            )
        bound = replace(self, variables=variables)
        bound._check_structure()
        return bound._with_ranges(data)

    def _with_ranges(self, data: pd.DataFrame | None) -> Form:
        """This bound form with the default ranges of its scale and shift constants read
        from ``data`` (unchanged without data, or when it has them already)."""
        if data is None or self.ranges:
            return self
        import pandas as pd

        free = tuple(c for c in self.structure.nonlinear if base_name(c) not in self.bounds)
        if not free:
            return self
        values = {}
        for v in self.bound_variables:
            if v in data:
                values[v] = pd.to_numeric(data[v], errors="coerce").to_numpy(float)
        if len(values) < len(self.bound_variables):
            return self
        ranges = default_ranges(self.tree, free, values)
        if not ranges:
            return self
        out = replace(self, ranges=ranges)
        out._check_structure()
        return out

    def _check_spellings(self, columns: list[str]) -> None:
        """Refuse a name that is a column only once both are normalised (NFKC): MICRO SIGN
        and GREEK MU, FULLWIDTH H and H look alike, and one would silently be a constant."""
        folded: dict[str, str] = {}
        for c in columns:
            folded.setdefault(unicodedata.normalize("NFKC", str(c)), str(c))
        for n in [*self.names, *(self.variables or ())]:
            if n in columns:
                continue
            col = folded.get(unicodedata.normalize("NFKC", n))
            if col is not None and col != n:
                raise FormError(
                    f"form {self.name!r} reads {n!r} ({_spelled(n)}), but the grid's column "
                    f"is {col!r} ({_spelled(col)}): they look alike and differ; write the "
                    "column's own spelling (in backticks if need be) or rename the column"
                )

    def _resolve_groups(self, columns: list[str], data: pd.DataFrame | None) -> Form:
        """This form with ``shared`` decided: the declared names, or by default the
        nonlinear constants (the exponents), every other constant one per group."""
        by = self.by
        if by not in columns:
            raise FormError(
                f"form {self.name!r}: {param('by')} {by!r} is not a column of the grid"
                f"{_close(str(by), columns)}; columns: {', '.join(columns)}"
            )
        plain = replace(self, by=None, shared=None).bind(columns, data)
        if by in plain.bound_variables:
            raise FormError(
                f"form {self.name!r} reads {by!r}; {param('by')} needs a column the form does "
                "not read"
            )
        constants = plain.base_constants
        shared = self.shared
        if shared is None:
            nonlinear = {base_name(c) for c in plain.structure.nonlinear}
            shared = tuple(c for c in constants if c in nonlinear)
        if constants and set(constants) <= set(shared):
            raise FormError(
                f"form {self.name!r}: {param('shared')} names every constant "
                f"({', '.join(constants)}), "
                f"so nothing would differ between the groups of {param('by')} {by!r}; leave at "
                "least "
                f"one constant out of {param('shared')} (or drop {param('by')})"
            )
        return replace(self, shared=tuple(shared), variables=(*plain.bound_variables, by))

    def _with_levels(self, columns: list[str], data: pd.DataFrame | None) -> Form:
        cols = _level_columns(self.tree)
        for col in cols:
            if col not in columns:
                raise FormError(
                    f"form {self.name!r}: per-level constants need {col!r} to be a column of "
                    f"the grid{_close(col, columns)}; columns: {', '.join(columns)}"
                )
        if data is None:
            raise FormError(
                f"form {self.name!r} has constants per level of {', '.join(cols)}: bind it "
                "with the grid's runs (data=grid.runs) so that the levels are known"
            )
        import numpy as np
        import pandas as pd

        levels = {}
        for col in cols:
            values = pd.to_numeric(data[col], errors="coerce")
            if values.isna().any() or not np.isfinite(values.to_numpy(float)).all():
                raise FormError(
                    f"form {self.name!r}: column {col!r} must hold finite numbers to give one "
                    "constant per level"
                )
            levels[col] = tuple(float(v) for v in np.unique(values.to_numpy(float)))
        return replace(self, levels=levels)

    def describe(self) -> str:
        return f"{self.name} = {self.expression}"

    @property
    def constant_notes(self) -> str:
        """How the constants were set up beyond the expression: groups, fixed values, bounds
        (empty when nothing was), e.g. ``"by M: alpha shared, E, A one per group"``."""
        notes = []
        if self.by is not None:
            shared = list(self.shared or ())
            per = [c for c in self.base_constants if c not in shared]
            notes.append(
                f"by {self.by}: "
                + (f"{', '.join(shared)} shared, " if shared else "nothing shared, ")
                + f"{', '.join(per)} one per group"
            )
        if self.fixed:
            notes.append("fixed " + ", ".join(f"{k}={float(v):g}" for k, v in self.fixed.items()))
        if self.bounds:
            notes.append(
                "bounds "
                + ", ".join(
                    f"{k} in [{float(a):g}, {float(b):g}]" for k, (a, b) in self.bounds.items()
                )
            )
        ranges = {c: r for c, r in self.ranges.items() if base_name(c) not in self.bounds}
        if ranges:
            notes.append(
                # flag words: advice shown on both faces
                "default ranges from the grid's values (--bound replaces them) "
                + ", ".join(f"{c} in {r.describe()} ({r.role})" for c, r in ranges.items())
            )
        return "; ".join(notes)

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "expression": self.expression}
        if self.fixed:
            out["fixed"] = {k: float(v) for k, v in self.fixed.items()}
        if self.by is not None:
            out["by"] = self.by
            out["shared"] = list(self.shared) if self.shared is not None else None
        if self.levels is not None:
            out["levels"] = {k: list(v) for k, v in self.levels.items()}
        if self.constant_notes:
            out["constant_notes"] = self.constant_notes
        if self.variables is not None:
            out["variables"] = list(self.variables)
            out["constants"] = list(self.constants)
        if self.bounds:
            out["bounds"] = {k: list(v) for k, v in self.bounds.items()}
        if self.start:
            out["start"] = {k: list(v) for k, v in self.start.items()}
        if self.origin:
            out["origin"] = self.origin
        return out

    @cached_property
    def structure(self) -> Structure:
        return Structure.of(self)


def _close(name: str, columns: Sequence[str]) -> str:
    lower = {c.lower(): c for c in columns}
    match = lower.get(name.lower()) or next(
        iter(difflib.get_close_matches(name, columns, n=1, cutoff=0.75)), None
    )
    return f" (did you mean {match!r}?)" if match and match != name else ""


def _spelled(name: str) -> str:
    """``'µ'`` -> ``'U+00B5 MICRO SIGN'``: the characters of a name that are not ASCII."""
    odd = [ch for ch in name if ord(ch) > 127]
    return ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}" for ch in odd[:3]) or "ASCII"
