"""The docstring entries the result classes' ``plot_*`` and ``report`` methods share, written
once and set into each method's numpydoc sections by :func:`documented` (as
:data:`figure_doc`, :data:`form_figure_doc` and :data:`report_doc`)."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable


def view(path: str) -> Callable[[object], str]:
    """The function ``path`` of :mod:`fitrules.views` (``"text.render_tuning"``), imported
    when a result is first rendered with it (some views load matplotlib)."""
    module, _, function = path.rpartition(".")

    def render(result: object) -> str:
        return getattr(importlib.import_module(f"fitrules.views.{module}"), function)(result)

    return render


# name -> (type, description lines); a description line more than one long is a tuple
AXES = {
    "ax": ("matplotlib.axes.Axes, optional", ("The axes to draw on (default: new ones).",)),
    "labels": (
        "dict or str, optional",
        (
            'Names for columns on the axes, ``{"N": "parameters"}`` or',
            '``"N=parameters,D=tokens"``.',
        ),
    ),
    "units": (
        "dict or str, optional",
        ('Units of columns on the axes, ``{"loss": "nats"}`` or ``"loss=nats"``.',),
    ),
}
AXES_RETURNED = ("matplotlib.axes.Axes", "The axes drawn on.")
FORM_VARIABLE = {"x": ("str, optional", ("A variable of the form (default: its first).",))}

REPORT = {
    "target": (
        "str or path",
        ("The report directory to write; it must not exist unless ``force``.",),
    ),
    "force": (
        "bool, optional",
        ("Replace an existing directory (swapped in one step once the new one is written).",),
    ),
    "command": ("str, optional", ("The command that made the result, written into the report.",)),
    "figure_format": (
        "str or sequence of str, optional",
        ('``"png"`` (default), or also vector files, e.g. ``"png,svg"`` or ``["png", "pdf"]``.',),
    ),
    "labels": (
        "str or dict, optional",
        (
            'Names of columns on the axes, ``{"val/loss": "validation loss"}`` or',
            '``"val/loss=validation loss"``.',
        ),
    ),
}
REPORT_RETURNED = ("pathlib.Path", "The report directory written.")


def documented(shared: dict, returned: tuple[str, str]):
    """A decorator completing a method's docstring: its Parameters in the signature's order,
    each the method's own entry if it writes one, else ``shared``'s; then ``returned``.

    The method's docstring is its summary, optionally followed by a Parameters section of
    the entries that are its own; the method is one of a top-level class.
    """

    def complete(method):
        method.__doc__ = _completed(method, shared, returned)
        return method

    return complete


def _completed(method, shared: dict, returned: tuple[str, str]) -> str:
    doc = method.__doc__
    # a method's indent, which docstrings keep before Python 3.13
    indent = " " * 8 if sys.version_info < (3, 13) else ""
    if "\n" in doc and not doc[doc.rindex("\n") :].strip():
        doc = doc[: doc.rindex("\n")]  # the closing quotes' line
    head, _, own_section = doc.partition(f"\n\n{indent}Parameters\n{indent}----------\n")
    own = _entries(own_section, indent)
    lines = [f"{head.rstrip()}\n", f"{indent}Parameters", f"{indent}----------"]
    for name in list(inspect.signature(method).parameters)[1:]:
        if name in own:
            lines.extend(own[name])
        else:
            type_, desc = shared[name]
            lines.append(f"{indent}{name} : {type_}")
            lines.extend(f"{indent}    {d}" for d in desc)
    type_, desc = returned
    lines += ["", f"{indent}Returns", f"{indent}-------", f"{indent}{type_}",
              f"{indent}    {desc}", indent]  # fmt: skip
    return "\n".join(lines)


def _entries(section: str, indent: str) -> dict[str, list[str]]:
    """A Parameters section's entries by name: each its lines as written."""
    out: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.strip():
            continue
        if not line.startswith(indent + " "):
            out[line.strip().partition(" : ")[0]] = [line]
        else:
            out[next(reversed(out))].append(line)
    return out


# a plot_* method's ax, labels and units and the Axes it returns; with the x of a form's figure
figure_doc = documented(AXES, AXES_RETURNED)
form_figure_doc = documented(AXES | FORM_VARIABLE, AXES_RETURNED)
# a report's target, force, command, figure_format and labels, and the directory it returns
report_doc = documented(REPORT, REPORT_RETURNED)
