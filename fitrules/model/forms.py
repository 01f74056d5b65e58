"""The registry of forms: the built-in ones and those in ``forms.toml``, one-line forms, and
the forms a command compares. It is the public face of the form modules too.

A form is data: a name, an expression over variables (grid columns) and constants, and
optional bounds and starting ranges for the constants. Adding one is a line::

    fitrules compare --form "mine = L0 + a*omega**c*(H/16)**b"

or ``mine = "L0 + a*omega**c*(H/16)**b"`` in a ``forms.toml`` in the working directory.
The variables are the names that are columns of the grid; write ``mine(H, omega) = ...``
to declare them instead.

The form itself is :mod:`~fitrules.model.form_class`; its per-level constants and groups
:mod:`~fitrules.model.form_levels`; how its constants enter it
:mod:`~fitrules.model.form_structure`; the built-in forms :mod:`~fitrules.model.form_builtins`;
``--fix``, ``--bound``, ``--by`` and ``--shared`` :mod:`~fitrules.model.form_options`.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from fitrules.base.errors import FormError
from fitrules.base.paths import FORMS_FILE
from fitrules.model.form_builtins import BUILTIN_FORMS, DEFAULT_FORMS
from fitrules.model.form_class import Form
from fitrules.model.form_levels import base_name, format_level, level_of
from fitrules.model.form_options import customise, parse_bounds, parse_fix
from fitrules.model.form_structure import Structure

# what other modules import from here
__all__ = [
    "BUILTIN_FORMS",
    "DEFAULT_FORMS",
    "FORMS_FILE",
    "Form",
    "Structure",
    "add_form_to_file",
    "available_forms",
    "base_name",
    "customise",
    "did_you_mean",
    "format_level",
    "level_of",
    "load_forms_file",
    "parse_bounds",
    "parse_fix",
    "parse_form_line",
    "remove_form_from_file",
    "resolve_form",
    "select_forms",
]


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

    An inline form may take the name of a built-in form or of one in ``forms.toml``: it is
    used in that one's place, with a note (:func:`note_shadowing`).
    """
    if "=" not in text:
        return select_forms([text], cwd=cwd)[0]
    form = parse_form_line(text)
    note_shadowing(form, available_forms(cwd))
    return form


def note_shadowing(form: Form, pool: Mapping[str, Form]) -> None:
    """Warn (:class:`~fitrules.base.errors.FitrulesNote`) when a user's ``form`` takes the
    name of another form of ``pool`` (a built-in one or one in ``forms.toml``): the user's
    form is the one used under that name."""
    other = pool.get(form.name)
    if other is None or other.expression == form.expression:  # the same form, given again
        return
    import warnings

    from fitrules.base.errors import FitrulesNote

    where = "built-in" if form.name in BUILTIN_FORMS else f"{FORMS_FILE}'s"
    warnings.warn(
        f"form {form.name!r} = {form.expression} shadows the {where} form of that name "
        f"({other.expression}); the one given here is used",
        FitrulesNote,
        stacklevel=_callers_level(),
    )


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside fitrules, for a warning issued by the
    function that calls this: Python shows the caller's line, not the package's."""
    import sys

    root = str(Path(__file__).resolve().parents[1])
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    return level


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
        note_shadowing(f, pool)
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


def did_you_mean(name: str, names: Sequence[str] | dict) -> str:
    """`` (did you mean 'composition'?)`` for a misspelt form name, else ``""``."""
    close = difflib.get_close_matches(str(name), list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


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
