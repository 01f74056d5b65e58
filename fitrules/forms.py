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
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from fitrules import expr as ex
from fitrules.errors import FormError, LimitError
from fitrules.limits import MAX_CONSTANTS, MAX_NONLINEAR

FORMS_FILE = "forms.toml"
DEFAULT_NONLINEAR_BOUNDS = (-10.0, 10.0)
DEFAULT_NONLINEAR_START = (-3.0, 3.0)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass(frozen=True)
class Form:
    """A candidate rule.

    Parameters
    ----------
    name : identifier used in tables and on the command line.
    expression : arithmetic over variables and constants (+ - * / **, log, exp, sqrt).
    variables : the names that are grid columns; ``None`` resolves them against the grid.
    bounds : per constant, (low, high); nonlinear constants default to (-10, 10).
    start : per nonlinear constant, the range searched by the starting grid (default (-3, 3)).
    description : one sentence for ``fitrules forms show``.

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

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise FormError(
                f"form name {self.name!r} is not allowed; use letters, digits, _ or -"
                ", starting with a letter"
            )
        for label in ("description", "source"):
            if not isinstance(getattr(self, label), str):
                raise FormError(
                    f"form {self.name!r}: {label} must be text, got {getattr(self, label)!r}"
                )
        if not isinstance(self.expression, str):
            raise FormError(f"form {self.name!r}: the expression must be text, not "
                            f"{type(self.expression).__name__}")  # fmt: skip
        tree = ex.parse(self.expression, what=f"form {self.name!r}")
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
                if key not in self.constants:
                    raise FormError(
                        f"form {self.name!r}: {label} given for {key!r}, which is "
                        f"not a constant of it (constants: {', '.join(self.constants)})"
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
        for label, opts in (("bounds", self.bounds), ("start", self.start)):
            for key in opts:
                if key in s.linear:
                    raise FormError(
                        f"form {self.name!r}: {label} given for {key!r}, which enters "
                        "linearly and is solved exactly without bounds; bounds and start "
                        "apply to nonlinear constants"
                        + (f" ({', '.join(s.nonlinear)})" if s.nonlinear else " (it has none)")
                    )
        for c in s.nonlinear:
            i = s.constants.index(c)
            lo, hi = s.lower[i], s.upper[i]
            a, b = self.start.get(c, default_start(lo, hi))
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
        return tuple(n for n in self.names if n not in self.bound_variables)

    def bind(self, columns: Iterable[str]) -> Form:
        """This form with its variables resolved against (and checked in) ``columns``."""
        columns = list(columns)
        if self.variables is not None:
            lacking = [v for v in self.variables if v not in columns]
            if lacking:
                hint = _close(lacking[0], columns)
                if lacking[0] == "omega" and "keep" in columns:
                    hint = " (add --derive 'omega = 1/keep - 1')"
                raise FormError(
                    f"form {self.name!r} reads variable {lacking[0]!r}, which the "
                    f"grid lacks{hint}; columns: {', '.join(columns)}"
                )
            self._check_structure()
            return self
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
            raise FormError(
                f"form {self.name!r} reads no column of the grid "
                f"({self.expression!r}); columns: {', '.join(columns)}"
            )
        bound = Form(
            self.name,
            self.expression,
            variables,
            dict(self.bounds),
            dict(self.start),
            self.description,
            self.source,
        )
        bound._check_structure()
        return bound

    def describe(self) -> str:
        return f"{self.name} = {self.expression}"

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "expression": self.expression}
        if self.variables is not None:
            out["variables"] = list(self.variables)
            out["constants"] = list(self.constants)
        if self.bounds:
            out["bounds"] = {k: list(v) for k, v in self.bounds.items()}
        if self.start:
            out["start"] = {k: list(v) for k, v in self.start.items()}
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
        for c in consts:
            default = DEFAULT_NONLINEAR_BOUNDS if c in nonlinear else (-math.inf, math.inf)
            lo, hi = form.bounds.get(c, default)
            lower.append(float(lo))
            upper.append(float(hi))
        s_lo, s_hi = [], []
        for c in nonlinear:
            i = consts.index(c)
            lo, hi = form.start.get(c, default_start(lower[i], upper[i]))
            s_lo.append(max(float(lo), lower[i]))
            s_hi.append(min(float(hi), upper[i]))
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
    ]
}
DEFAULT_FORMS = ("composition", "additive", "free_omega", "omega_only", "log_additive")

_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_\-]*)\s*(?:\(([^)]*)\))?\s*=\s*(.+)$", re.S)


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
        unknown = set(value) - {"expr", "variables", "bounds", "start", "description"}
        if unknown or "expr" not in value:
            raise FormError(
                f"{source}: form {name!r} needs 'expr' and may have variables, "
                f"bounds, start, description; got {sorted(value)}"
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
        for key in ("bounds", "start"):
            if not isinstance(value.get(key, {}), dict):
                raise FormError(
                    f"{source}: form {name!r}: {key} must be a table such as "
                    f"{{ b = [-2, 2] }}; got {value[key]!r}"
                )
        if not isinstance(value.get("description", ""), str):
            raise FormError(f"{source}: form {name!r}: description must be a string")
        return Form(
            name,
            value["expr"],
            tuple(v.strip("`") for v in variables) if variables is not None else None,
            value.get("bounds", {}),
            value.get("start", {}),
            value.get("description", ""),
            source,
        )
    raise FormError(f"{source}: form {name!r} must be a string expression or a table")


def _read_toml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise FormError(f"{path}: is a directory, not a forms file") from None
    except UnicodeDecodeError as err:
        raise FormError(f"{path}: is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise FormError(f"{path}: cannot be read ({err.strerror})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise FormError(f"{path}: not valid TOML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise FormError(f"{path}: not valid TOML (nested too deeply)") from None


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
    """Built-in forms plus those in ``forms.toml`` of ``cwd`` (the working directory)."""
    forms = dict(BUILTIN_FORMS)
    path = Path(cwd or ".") / FORMS_FILE
    if path.exists() or path.is_symlink():
        forms.update(load_forms_file(path))
    return forms


def select_forms(
    names: Sequence[str] | None, extra: Sequence[str] = (), cwd: Path | None = None
) -> list[Form]:
    """Forms to compare: the named ones (default: the built-in set) plus ``--form`` lines."""
    pool = available_forms(cwd)
    added = [parse_form_line(line) for line in extra]
    for f in added:
        _check_new_name(f.name, pool)
    if names:
        chosen = []
        for n in names:
            if n not in pool:
                raise FormError(
                    f"unknown form {n!r}; available: {', '.join(pool)} "
                    "(or add one with --form 'NAME = EXPR')"
                )
            chosen.append(pool[n])
    else:
        chosen = [] if added else [pool[n] for n in DEFAULT_FORMS]
    out = chosen + added
    seen: set[str] = set()
    for f in out:
        if f.name in seen:
            raise FormError(f"form {f.name!r} is given twice")
        seen.add(f.name)
    return out


def add_form_to_file(name: str, expression: str, cwd: Path | None = None) -> Path:
    """Append ``name = "expression"`` to ``forms.toml`` after checking it parses."""
    form = parse_form_line(f"{name} = {expression}", "fitrules forms add")
    path = Path(cwd or ".") / FORMS_FILE
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
    from fitrules.util import atomic_write_text

    atomic_write_text(path, text)
    return path


def remove_form_from_file(name: str, cwd: Path | None = None) -> Path:
    """Remove the form ``name`` from ``forms.toml``: its ``name = ...`` line or its
    ``[name]`` table. The other forms are checked to read back unchanged."""
    path = Path(cwd or ".") / FORMS_FILE
    if name in BUILTIN_FORMS:
        raise FormError(f"form {name!r} is built in and cannot be removed")
    existing = load_forms_file(path) if path.exists() else {}
    if name not in existing:
        raise FormError(
            f"no form {name!r} in {path}"
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
    from fitrules.util import atomic_write_text

    atomic_write_text(path, text)
    return path


def _parse_forms_text(text: str, source: str) -> dict[str, Form]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise FormError(f"{source}: not valid TOML ({' '.join(str(err).split())})") from None
    except RecursionError:
        raise FormError(f"{source}: not valid TOML (nested too deeply)") from None
    return {n: _form_from_toml(n, v, source) for n, v in doc.items()}
