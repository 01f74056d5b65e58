"""Candidate forms: named closed-form rules, their constants, and the registry of forms.

A form is data: a name, an expression over variables (grid columns) and constants, and
optional bounds and starting ranges for the constants. Adding one is a line::

    fitrules compare --form "mine = L0 + a*omega**c*(H/16)**b"

or ``mine = "L0 + a*omega**c*(H/16)**b"`` in a ``forms.toml`` in the working directory.
The variables are the names that are columns of the grid; write ``mine(H, omega) = ...``
to declare them instead.
"""

from __future__ import annotations

import difflib
import json
import math
import numbers
import re
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from fitrules.base.errors import FormError, LimitError, with_fixes
from fitrules.base.limits import MAX_CONSTANTS, MAX_NONLINEAR
from fitrules.base.paths import FORMS_FILE
from fitrules.model import expr as ex
from fitrules.model.ranges import DefaultRange, default_ranges

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_NONLINEAR_BOUNDS = (-10.0, 10.0)
DEFAULT_NONLINEAR_START = (-3.0, 3.0)
LOG_RANGE = 1e3  # a positive starting range at least this wide (hi/lo) is searched in log
LOG_FLOOR = 1e9  # a bounded range from 0 to hi is searched on a log scale from hi / this
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
                    "variable); --fix holds a constant"
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
                f"form {self.name!r}: --by {by!r} is not a column of the grid"
                f"{_close(str(by), columns)}; columns: {', '.join(columns)}"
            )
        plain = replace(self, by=None, shared=None).bind(columns, data)
        if by in plain.bound_variables:
            raise FormError(
                f"form {self.name!r} reads {by!r}; --by needs a column the form does not read"
            )
        constants = plain.base_constants
        shared = self.shared
        if shared is None:
            nonlinear = {base_name(c) for c in plain.structure.nonlinear}
            shared = tuple(c for c in constants if c in nonlinear)
        if constants and set(constants) <= set(shared):
            raise FormError(
                f"form {self.name!r}: --shared names every constant ({', '.join(constants)}), "
                f"so nothing would differ between the groups of --by {by!r}; leave at least "
                "one constant out of --shared (or drop --by)"
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


def base_name(constant: str) -> str:
    """``L0`` for the per-level constant ``L0[H=16]``; other names unchanged."""
    return constant.split("[", 1)[0] if constant.endswith("]") else constant


def level_name(constant: str, levels: Sequence[tuple[str, float]]) -> str:
    """The name of one per-level constant: ``L0[H=16]``, ``a[M=2,H=16]``."""
    return f"{constant}[{','.join(f'{c}={format_level(v)}' for c, v in levels)}]"


def format_level(v: float) -> str:
    """A level as short as it reads back exactly: ``16``, ``0.25``, ``0.123456789``."""
    short = f"{v:g}"
    return short if float(short) == v else repr(float(v))


def level_of(constant: str) -> tuple[tuple[str, float], ...]:
    """``(("H", 16.0),)`` for ``L0[H=16]``; ``()`` for a constant shared by all levels."""
    if not constant.endswith("]") or "[" not in constant:
        return ()
    inside = constant[constant.index("[") + 1 : -1]
    out = []
    for part in inside.split(","):
        col, _, v = part.rpartition("=")
        out.append((col, float(v)))
    return tuple(out)


def _check_level_usage(tree: ex.Node, form: Form) -> None:
    """A per-level constant ``c[COL]`` is always written with the same COL, never bare."""
    how: dict[str, set] = {}
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.op == "at":
            how.setdefault(n.value, set()).add(n.args[0].value)
        elif n.op == "name":
            how.setdefault(n.value, set()).add(None)
        if n.op != "at":
            stack.extend(n.args)
    for c, cols in how.items():
        if len(cols) > 1 and any(col is not None for col in cols):
            shown = ", ".join(c if col is None else f"{c}[{col}]" for col in sorted(cols, key=str))
            raise FormError(
                f"form {form.name!r}: {c!r} is written as {shown}; a per-level constant "
                "takes one column and is always written with it"
            )


def _level_columns(tree: ex.Node) -> tuple[str, ...]:
    out: list[str] = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.op == "at" and n.args[0].value not in out:
            out.append(n.args[0].value)
        stack.extend(n.args)
    return tuple(sorted(out))


def _replace_constants(tree: ex.Node, values: Mapping[str, ex.Node]) -> ex.Node:
    """Replace names and per-level constants ``c[COL]`` named in ``values``."""
    if tree.op in ("name", "at") and tree.value in values:
        return values[tree.value]
    if not tree.args or tree.op == "at":
        return tree
    return ex.substitute(
        ex.Node(tree.op, tuple(_replace_constants(a, values) for a in tree.args), tree.value), {}
    )


def _group(tree: ex.Node, by: str, shared: Sequence[str], form: Form) -> ex.Node:
    """Every constant not in ``shared`` becomes one constant per level of ``by``."""
    if _level_columns(tree):
        raise FormError(
            f"form {form.name!r} already has per-level constants; group it with --by or "
            "write the per-level constants, not both"
        )
    names = ex.names(tree)
    variables = set(form.variables or ()) | {by}
    for c in shared:
        if c not in names or c in variables:
            raise FormError(
                f"form {form.name!r}: shared constant {c!r} is not a constant of "
                f"{form.expression!r}"
            )
    col = ex.Node("name", value=by)
    per_group = {}
    for c in names:
        if c in shared or c in variables:
            continue
        per_group[c] = ex.Node("at", (col,), c)
    return _replace_constants(tree, per_group)


def _expand(tree: ex.Node, levels: Mapping[str, Sequence[float]], form: Form) -> ex.Node:
    """Write each per-level constant ``c[COL]`` as one constant per level.

    Each term of the sum that reads per-level constants becomes one term per combination of
    their columns' levels, multiplied by an indicator of that combination: so
    ``L0[H] + a*omega`` becomes ``L0[H=1]*[H == 1] + ... + a*omega``, where every
    ``L0[H=...]`` still multiplies one term and stays linear (variable projection keeps it).
    """
    out = ex.ZERO
    for sign, term in ex.terms(tree):
        signed = term if sign > 0 else ex.neg(term)
        cols = _level_columns(term)
        if not cols:
            out = ex.add(out, signed)
            continue
        combos: list[list[tuple[str, float]]] = [[]]
        for col in cols:
            combos = [[*c, (col, v)] for c in combos for v in levels[col]]
            if len(combos) > MAX_CONSTANTS:
                raise LimitError(
                    f"form {form.name!r}: per-level constants over {', '.join(cols)} give "
                    f"more than {MAX_CONSTANTS} constants; at most {MAX_CONSTANTS} are allowed"
                )
        for combo in combos:
            at = dict(combo)
            values = {}
            stack = [term]
            while stack:
                n = stack.pop()
                if n.op == "at":
                    c = n.value
                    own = [(k, at[k]) for k in (n.args[0].value,)]
                    values[c] = ex.Node("name", value=level_name(c, own))
                stack.extend(n.args)
            piece = _replace_constants(signed, values)
            for col, v in combo:
                piece = ex.mul(ex.Node("is", (ex.Node("name", value=col),), float(v)), piece)
            out = ex.add(out, piece)
    return out


def did_you_mean(name: str, names: Sequence[str] | dict) -> str:
    """`` (did you mean 'composition'?)`` for a misspelt form name, else ``""``."""
    close = difflib.get_close_matches(str(name), list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _close(name: str, columns: Sequence[str]) -> str:
    lower = {c.lower(): c for c in columns}
    match = lower.get(name.lower()) or next(
        iter(difflib.get_close_matches(name, columns, n=1, cutoff=0.75)), None
    )
    return f" (did you mean {match!r}?)" if match and match != name else ""


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


# ------------------------------------------------------------------ built-ins and registry
BUILTIN_FORMS: dict[str, Form] = {
    f.name: f
    for f in [
        Form(
            "composition",
            "L0 + a*omega*(H/16)**b",
            ("H", "omega"),
            description="Compression noise scales linearly in omega and by a power of H: "
            "the three-constant composition rule.",
            source="built-in",
        ),
        Form(
            "additive",
            "L0 + a*omega**c + b*(H/16)**d",
            ("H", "omega"),
            description="Separate power laws in omega and H, added: five constants.",
            source="built-in",
        ),
        Form(
            "free_omega",
            "L0 + a*omega**c*(H/16)**b",
            ("H", "omega"),
            description="The composition rule with a free exponent on omega.",
            source="built-in",
        ),
        Form(
            "composition_per_h",
            "L0[H] + a*omega*(H/16)**b",
            ("H", "omega"),
            description="The composition rule with one intercept per level of H (L0[H]): "
            "the loss at omega = 0 may move with H.",
            source="built-in",
        ),
        Form(
            "omega_only",
            "L0 + a*omega",
            ("omega",),
            description="Linear in omega, no dependence on H: the null model for H.",
            source="built-in",
        ),
        Form(
            "log_additive",
            "L0 + a*omega + b*log(H/16)",
            ("H", "omega"),
            description="Linear in omega plus a log-linear H effect; every constant linear.",
            source="built-in",
        ),
        # Theory forms (fitrules.engine.theory): exact for local SGD with unbiased rand-k compressed
        # displacements on a noisy quadratic of one curvature s, M workers averaged, outer
        # step without momentum; the excess loss is the constant part's complement (L0).
        Form(
            "theory_floor",
            "L0 + c*(1 + omega)/(1 - omega/omega_max)",
            ("omega",),
            bounds={"omega_max": (1e-3, 1e9)},
            start={"omega_max": (1.0, 1e6)},
            description="The compressed-sync floor: the excess loss grows as (1 + omega), "
            "amplified near the stability limit omega_max = M*(2 - eta*r)/(eta*r) "
            "(r = 1 - (1 - lr*s)**H), where the outer step stops being mean-square stable. "
            "Exact on the noisy quadratic of one curvature at fixed H, M, lr and outer step "
            "eta, no momentum (fitrules.engine.theory.local_sgd_variance).",
            source="built-in",
        ),
        Form(
            "theory_local_sgd",
            "L0 + c*(1 + omega)*(1 + (1 - u)**H)/(2 - (1 - (1 - u)**H)*(1 + omega/n))",
            ("H", "omega"),
            bounds={"u": (1e-4, 1.0), "n": (1.0, 1e5)},
            start={"u": (1e-3, 1.0), "n": (1.0, 1e4)},
            description="The stationary loss of local SGD with compressed displacements in H "
            "and omega: u = lr*s (one curvature), n workers, outer step 1, no momentum; the "
            "(1 + omega) floor, the (1 + (1-u)**H) factor of H inner steps and the stability "
            "limit (1 - (1-u)**H)*(1 + omega/n) < 2 (fitrules.engine.theory.local_sgd_variance).",
            source="built-in",
        ),
        Form(
            "theory_workers",
            "L0 + c*outer_lr*(1 + omega)/(M*(2 - r*outer_lr*(1 + omega/M)))",
            ("M", "omega", "outer_lr"),
            bounds={"r": (1e-4, 2.0)},
            start={"r": (1e-3, 2.0)},
            description="The floor's dependence on the number of workers M and the outer "
            "step: excess loss eta*(1 + omega)/(M*(2 - r*eta*(1 + omega/M))) with "
            "r = 1 - (1 - lr*s)**H, no momentum; more workers restore the step, never the "
            "(1 + omega) factor (fitrules.engine.theory.local_sgd_variance).",
            source="built-in",
        ),
    ]
}
DEFAULT_FORMS = (
    "composition",
    "additive",
    "free_omega",
    "omega_only",
    "log_additive",
    "composition_per_h",
)

_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_\-]*)\s*(?:\(([^)]*)\))?\s*=\s*(.+)$", re.S)


def _spelled(name: str) -> str:
    """``'µ'`` -> ``'U+00B5 MICRO SIGN'``: the characters of a name that are not ASCII."""
    odd = [ch for ch in name if ord(ch) > 127]
    return ", ".join(f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}" for ch in odd[:3]) or "ASCII"


def parse_form_line(line: str, source: str = "--form") -> Form:
    """Parse ``"name = expr"`` or ``"name(var, ...) = expr"`` into a :class:`Form`."""
    m = _LINE.match(line or "")
    if not m:
        raise FormError(
            f"{source}: {line!r} is not of the form 'NAME = EXPRESSION' "
            "(or 'NAME(var1, var2) = EXPRESSION')"
        )
    name, declared, text = m.group(1), m.group(2), m.group(3).strip()
    variables = None
    if declared is not None:
        variables = tuple(v.strip().strip("`") for v in declared.split(",") if v.strip())
    return Form(name, text, variables, source=source)


def resolve_form(text: str, cwd: Path | None = None) -> Form:
    """A form given on the command line: a known name, or inline ``"NAME = EXPR"``.

    An inline form may not take the name of a built-in form or of one in ``forms.toml``.
    """
    if "=" not in text:
        return select_forms([text], cwd=cwd)[0]
    form = parse_form_line(text)
    _check_new_name(form.name, available_forms(cwd))
    return form


def _check_new_name(name: str, pool: Mapping[str, Form]) -> None:
    if name in pool:
        where = "built-in" if name in BUILTIN_FORMS else f"in {FORMS_FILE}"
        raise FormError(
            f"--form {name!r}: a form of that name already exists ({where}: "
            f"{pool[name].expression}); give the inline form another name"
        )


def _form_from_toml(name: str, value: object, source: str) -> Form:
    if isinstance(value, str):
        return parse_form_line(f"{name} = {value}", source)
    if isinstance(value, dict):
        allowed = {"expr", "variables", "bounds", "start", "fixed", "description", "origin"}
        unknown = set(value) - allowed
        if unknown or "expr" not in value:
            raise FormError(
                f"{source}: form {name!r} needs 'expr' and may have variables, "
                f"bounds, start, fixed, description, origin; got {sorted(value)}"
            )
        if not isinstance(value["expr"], str):
            raise FormError(f"{source}: form {name!r}: expr must be a string expression")
        variables = value.get("variables")
        if variables is not None and not (
            isinstance(variables, list) and all(isinstance(v, str) for v in variables)
        ):
            raise FormError(
                f"{source}: form {name!r}: variables must be a list of column names, e.g. "
                f'["H", "omega"]; got {variables!r}'
            )
        for key in ("bounds", "start", "fixed"):
            if not isinstance(value.get(key, {}), dict):
                raise FormError(
                    f"{source}: form {name!r}: {key} must be a table such as "
                    f"{{ b = [-2, 2] }}; got {value[key]!r}"
                )
        for key in ("description", "origin"):
            if not isinstance(value.get(key, ""), str):
                raise FormError(f"{source}: form {name!r}: {key} must be a string")
        return Form(
            name,
            value["expr"],
            tuple(v.strip("`") for v in variables) if variables is not None else None,
            value.get("bounds", {}),
            value.get("start", {}),
            value.get("description", ""),
            source,
            fixed=value.get("fixed", {}),
            origin=value.get("origin", ""),
        )
    raise FormError(f"{source}: form {name!r} must be a string expression or a table")


def _read_toml(path: Path) -> dict:
    from fitrules.base.inputs import load_toml

    # a pipe, a device, a huge file or nesting thousands deep are refused before reading
    return load_toml(path, str(path), FormError)


def load_forms_file(path: Path) -> dict[str, Form]:
    """Forms defined in a TOML file: ``name = "expr"`` lines or ``[name]`` tables."""
    path = Path(path)
    doc = _read_toml(path)
    out = {n: _form_from_toml(n, v, str(path)) for n, v in doc.items()}
    for name in out:
        if name in BUILTIN_FORMS:
            raise FormError(f"{path}: {name!r} is a built-in form; choose another name")
    return out


def available_forms(cwd: Path | None = None) -> dict[str, Form]:
    """Built-in forms plus those in ``forms.toml`` of ``cwd`` (the working directory).

    Parameters
    ----------
    cwd : path, optional
        The folder whose ``forms.toml`` is read (default: the working directory).

    Returns
    -------
    dict of str to Form
        Every form by name.
    """
    forms = dict(BUILTIN_FORMS)
    path = Path(cwd or ".") / FORMS_FILE
    if path.exists() or path.is_symlink():
        forms.update(load_forms_file(path))
    return forms


def select_forms(
    names: Sequence[str] | None, extra: Sequence[str] = (), cwd: Path | None = None
) -> list[Form]:
    """Forms to compare: the named ones (default: the built-in set) plus ``--form`` lines;
    a name may be that of a ``--form`` line, which then takes its place in the order."""
    pool = available_forms(cwd)
    added = [parse_form_line(line) for line in extra]
    for f in added:
        _check_new_name(f.name, pool)
    inline = {f.name: f for f in added}
    if names:
        chosen = []
        inline = {f.name: f for f in added}
        for n in names:
            if n in inline:  # --forms may name an inline form, to place it in the order
                chosen.append(inline[n])
                continue
            if n not in pool:
                raise FormError(
                    f"unknown form {n!r}{did_you_mean(n, pool)}; available: {', '.join(pool)} "
                    "(or add one with --form 'NAME = EXPR')"
                )
            chosen.append(pool[n])
    else:
        chosen = [] if added else [pool[n] for n in DEFAULT_FORMS]
    out = chosen + [f for f in added if f not in chosen]
    seen: set[str] = set()
    for f in out:
        if f.name in seen:
            raise FormError(f"form {f.name!r} is given twice")
        seen.add(f.name)
    return out


def parse_fix(items: Sequence[str] | Mapping[str, float] | None) -> dict[str, float]:
    """``["alpha=0.34", ...]`` (``--fix``) -> ``{"alpha": 0.34}``."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        out_map: dict[str, float] = {}
        for k, v in items.items():
            if not isinstance(k, str) or not _finite_number(v):
                raise FormError(
                    f"--fix {{{k!r}: {v!r}}}: each constant name must map to a finite number, "
                    "e.g. {'alpha': 0.34}"
                )
            out_map[k] = float(v)
        return out_map
    texts = _option_texts(
        items, "--fix", "NAME=VALUE texts (e.g. ['alpha=0.34']) or a mapping {'alpha': 0.34}"
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
                f"--fix {text!r}: expected NAME=VALUE with a finite number, e.g. alpha=0.34"
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
                    f"--bound {{{k!r}: {v!r}}}: each constant name must map to two numbers "
                    "(low, high) with low < high, e.g. {'Nc': (1e10, 1e16)}"
                )
            out_map[k] = (float(v[0]), float(v[1]))
        return out_map
    texts = _option_texts(
        items,
        "--bound",
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
                f"--bound {text!r}: expected NAME=LOW..HIGH with LOW < HIGH, e.g. "
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
        raise FormError("--shared needs --by COLUMN (the constants shared across groups)")
    for label, keys in (("--fix", fix), ("--bound", bounds)):
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


def add_form_to_file(name: str, expression: str, cwd: Path | None = None) -> Path:
    """Append ``name = "expression"`` to ``forms.toml`` after checking it parses."""
    from fitrules.base.outputs import update_lock

    form = parse_form_line(f"{name} = {expression}", "fitrules forms add")
    # read, check and rewrite under one lock: two concurrent adds lost one of the forms
    with update_lock(Path(cwd or ".") / FORMS_FILE, FORMS_FILE) as path:
        return _add_form_line(form, name, path)


def _add_form_line(form: Form, name: str, path: Path) -> Path:
    existing = load_forms_file(path) if path.exists() else {}
    if name in BUILTIN_FORMS or name in existing:
        raise FormError(
            f"form {name!r} already exists ({'built-in' if name in BUILTIN_FORMS else path}); "
            "choose another name"
        )
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    # json.dumps gives a valid TOML basic string for any expression text. A top-level key
    # must come before the first [table], or TOML would read it as part of that table.
    entry = f"{form.name} = {json.dumps(form.expression)}"
    if form.variables is not None:  # declared variables are part of the form: keep them
        names = ", ".join(json.dumps(v) for v in form.variables)
        entry = f"{form.name} = {{ expr = {json.dumps(form.expression)}, variables = [{names}] }}"
    at = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    text = "\n".join([*lines[:at], entry, *lines[at:]]) + "\n"
    from fitrules.base.util import atomic_write_text

    atomic_write_text(path, text, FORMS_FILE, update=True)
    return path


def remove_form_from_file(name: str, cwd: Path | None = None) -> Path:
    """Remove the form ``name`` from ``forms.toml``: its ``name = ...`` line or its
    ``[name]`` table. The other forms are checked to read back unchanged."""
    from fitrules.base.outputs import update_lock

    if name in BUILTIN_FORMS:
        raise FormError(f"form {name!r} is built in and cannot be removed")
    with update_lock(Path(cwd or ".") / FORMS_FILE, FORMS_FILE) as path:
        return _remove_form_lines(name, path)


def _remove_form_lines(name: str, path: Path) -> Path:
    existing = load_forms_file(path) if path.exists() else {}
    if name not in existing:
        raise FormError(
            f"no form {name!r} in {path}{did_you_mean(name, existing)}"
            + (f"; forms there: {', '.join(existing)}" if existing else "")
        )
    lines = path.read_text().splitlines()
    out: list[str] = []
    skipping = False
    key = re.compile(rf"^\s*(\"?){re.escape(name)}\1\s*=")
    table = re.compile(rf"^\s*\[\s*(\"?){re.escape(name)}\1\s*\]\s*(#.*)?$")
    for line in lines:
        if table.match(line):
            skipping = True
            continue
        if skipping and line.lstrip().startswith("["):
            skipping = False
        if skipping:
            continue
        if key.match(line) and not any(ln.lstrip().startswith("[") for ln in out):
            continue
        out.append(line)
    text = "\n".join(out) + ("\n" if out else "")
    try:
        after = {k: f.to_dict() for k, f in _parse_forms_text(text, str(path)).items()}
    except FormError:
        after = None
    before = {k: f.to_dict() for k, f in existing.items() if k != name}
    if after != before:
        raise FormError(
            f"{path}: cannot remove {name!r} without touching other forms (a multi-line "
            "value?); edit the file by hand"
        )
    from fitrules.base.util import atomic_write_text

    atomic_write_text(path, text, FORMS_FILE, update=True)
    return path


def _parse_forms_text(text: str, source: str) -> dict[str, Form]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise FormError(f"{source}: not valid TOML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise FormError(f"{source}: not valid TOML (nested too deeply)") from None
    return {n: _form_from_toml(n, v, source) for n, v in doc.items()}
