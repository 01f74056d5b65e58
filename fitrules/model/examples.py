"""The grids and specs shipped with fitrules, by name: ``fr.load_example("main")``.

Every committed grid (``data/NAME.csv``, made by ``fitrules simulate`` from
``data/specs/NAME.toml``) is installed with the package, so examples run from any directory:
in Python through :func:`load_example` and :func:`example_path`, on the command line as
``--data main``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fitrules.base.errors import GridError, api_terms


def list_examples() -> list[str]:
    """The names of the shipped grids (``main``, ``wide``, ``paired_tuned``, ...).

    Returns
    -------
    list of str
        Sorted names; each is a CSV results table with a manifest and a spec.

    Examples
    --------
    >>> "main" in list_examples()
    True
    """
    from fitrules.base.paths import data_dir

    return sorted(p.stem for p in data_dir().glob("*.csv"))


def example_path(name: str, kind: str = "grid") -> Path:
    """Where the shipped grid (or its spec) called ``name`` is.

    Parameters
    ----------
    name : str
        A name from :func:`list_examples`, e.g. ``"main"``.
    kind : {"grid", "spec", "manifest"}, optional
        The results table (CSV, the default), the simulate spec (TOML) or the manifest beside
        the table.

    Returns
    -------
    pathlib.Path
        The file's path.

    Raises
    ------
    GridError
        For a name that is not a shipped grid (the message lists the names).

    Examples
    --------
    >>> example_path("main").name
    'main.csv'
    """
    from fitrules.base.paths import data_dir

    names = list_examples()
    if name not in names:
        import difflib

        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise GridError(f"no shipped example {name!r}{hint}; examples: {', '.join(names)}")
    kinds = {
        "grid": data_dir() / f"{name}.csv",
        "spec": data_dir() / "specs" / f"{name}.toml",
        "manifest": data_dir() / f"{name}.manifest.json",
    }
    if kind not in kinds:
        raise GridError(f"kind {kind!r}: expected one of {', '.join(kinds)}")
    return kinds[kind]


@api_terms
def load_example(name: str, **load: Any):
    """Load a shipped grid as a :class:`fitrules.Grid`.

    Parameters
    ----------
    name : str
        A name from :func:`list_examples`, e.g. ``"main"``.
    **load : str or sequence of str
        Passed to :func:`fitrules.load_grid`: ``where``, ``derive``, ``metric``, ``unit``,
        ``seed_col``.

    Returns
    -------
    Grid
        The shipped grid, checked.

    Raises
    ------
    GridError
        For an unknown name, or a bad filter or derivation.

    Examples
    --------
    >>> g = load_example("main", where="lr == 3e-4")
    >>> len(g.runs)
    60
    """
    from fitrules.model.grids import load_grid

    return load_grid(example_path(name), **load)


def resolve_data(path: Path | str) -> Path:
    """``path``, or the shipped grid it names when it is a bare name (``main``) and no file
    of that name exists here. A file in the working directory always wins."""
    p = Path(path)
    text = str(path)
    if p.exists() or "/" in text or "\\" in text or p.suffix:
        return p
    return example_path(text) if text in list_examples() else p
