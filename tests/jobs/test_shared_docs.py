"""The Parameters entries the public functions share (fitrules.jobs.public.shared_docs): every
placeholder filled at import, "optional" where the parameter has a default, a bad one refused."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import fitrules.jobs.public
from fitrules.jobs.public.shared_docs import ENTRIES, PLACEHOLDER, shared_params


def _public_functions():
    """Every function defined in a module of fitrules.jobs.public, as its module holds it."""
    for info in pkgutil.iter_modules(fitrules.jobs.public.__path__):
        module = importlib.import_module(f"fitrules.jobs.public.{info.name}")
        for obj in vars(module).values():
            if inspect.isfunction(obj) and obj.__module__ == module.__name__:
                yield obj


def test_every_placeholder_in_a_public_docstring_is_filled():
    """No ``{name}`` line is left in any public function's docstring, wrapped or not."""
    functions = list(_public_functions())
    docs = [(f.__qualname__, d.__doc__ or "") for f in functions for d in (f, inspect.unwrap(f))]
    assert len(functions) > 20
    assert not [name for name, doc in docs if PLACEHOLDER.search(doc)]


def test_an_entry_is_optional_where_its_parameter_has_a_default():
    """The entry's type gains ", optional" for a parameter with a default, at the line's indent."""

    @shared_params
    def f(grid, delta=1e-3):
        """Summary.

        Parameters
        ----------
        {grid}
        {delta}
        """

    _, desc = ENTRIES["grid"]
    assert inspect.getdoc(f).splitlines()[4:] == [
        "grid : Grid, DataFrame, path or None",
        f"    {desc[0]}",
        f"    {desc[1]}",
        "delta : float, optional",
        "    The Huber threshold of ``log_huber`` (default 1e-3).",
    ]


@pytest.mark.parametrize(
    ("name", "why"), [("nope", "no shared entry"), ("delta", "not a parameter")]
)
def test_a_placeholder_without_an_entry_or_a_parameter_is_refused(name, why):
    """A placeholder naming no entry, or an entry for a parameter the function lacks, fails."""

    def f(grid):
        pass

    f.__doc__ = f"Summary.\n\n    {{{name}}}\n"
    with pytest.raises(ValueError, match=why):
        shared_params(f)
