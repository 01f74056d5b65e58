"""fr.add_form and fr.remove_form: the forms of a folder's forms.toml."""

from __future__ import annotations

from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.errors import api_terms
from fitrules.jobs.inputs import GridLike, as_grid
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.model.forms import Form


@api_terms
@shared_params
def add_form(line: str, grid: GridLike | None = None, folder: str | Path | None = None) -> Form:
    """Add a form to ``forms.toml`` (of the working directory, or ``folder``): what
    ``fitrules forms add`` does. Later commands and calls find it by its name.

    Parameters
    ----------
    line : str
        ``"NAME = EXPR"`` or ``"NAME(VARS) = EXPR"``, e.g. ``"mine = L0 + a*omega**c"``.
    grid : Grid, DataFrame or path, optional
        A grid to resolve the variables against (a name close to a column, "omgea", is
        refused); default: the default grid when the line names no variables.
    {folder}

    Returns
    -------
    Form
        The form added, bound to the grid's columns.

    Raises
    ------
    FormError
        For a line that is no form, a name already taken, or a variable the grid lacks.

    Examples
    --------
    >>> fr.add_form("mine = L0 + a*omega**c")  # doctest: +SKIP
    """
    from fitrules.model.forms import add_form_to_file

    form = check_add(line)
    if form.variables is None or grid is not None:
        g = as_grid(grid)
        form = form.bind(g.columns, g.runs)  # refuses a name close to a column ("omgea")
    name, _, expression = line.partition("=")
    cwd = None if folder is None else arg.path(folder, "folder")
    add_form_to_file(name.strip(), expression.strip(), cwd=cwd)
    return form


def check_add(line) -> Form:
    """The form a ``forms add`` line makes (its variables unresolved), refused in one line
    when the line is no form; the command line calls this before it reads a grid to resolve
    the variables against, fr.add_form first."""
    from fitrules.model.forms import parse_form_line

    arg.text(line, "line")
    return parse_form_line(line, "fitrules forms add")


@api_terms
@shared_params
def remove_form(name: str, folder: str | Path | None = None) -> Path:
    """Remove a form from ``forms.toml`` (of the working directory, or ``folder``): what
    ``fitrules forms remove`` does. Returns the file's path.

    Parameters
    ----------
    name : str
        The name of the form to remove.
    {folder}

    Returns
    -------
    Path
        The ``forms.toml`` file the form was removed from.

    Raises
    ------
    FormError
        For a name the file does not hold (a built-in form cannot be removed).

    Examples
    --------
    >>> fr.remove_form("mine")  # doctest: +SKIP
    """
    from fitrules.model.forms import remove_form_from_file

    arg.text(name, "name")
    return remove_form_from_file(name, cwd=None if folder is None else arg.path(folder, "folder"))
