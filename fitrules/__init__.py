"""fitrules: decide honestly whether a closed-form rule predicts a grid of experiments.

The public API (imported on first use, so that ``import fitrules`` stays cheap)::

    import fitrules as fr
    g = fr.load_grid(df_or_path, where="lr == 3e-4", derive="omega = 1/keep - 1")
    g = fr.load_example("main", where="lr == 3e-4")   # a shipped grid (fr.list_examples())
    c = fr.compare(g, forms=["composition", "additive"], splits=300)   # Comparison
    f = fr.fit(g, "composition", intervals=True)                      # FittedForm
    p = fr.ci(g, baseline="algo=sync", treatment="algo=diloco,H=16", tune="lr")
    t = fr.tune(g, "lr")                                              # Tuning
    d = fr.design(g, forms=["composition", "additive"], budget=24)   # Design
    s = fr.search(g, terms=3, max_constants=5)                        # Search
    fr.Form("mine", "L0 + a*omega**c", variables=("omega",))

``fr.compare``, ``fr.fit``, ``fr.tune``, ``fr.design`` and ``fr.search`` are the API
functions (``help(fr.compare)`` shows the function); the modules of those names stay
reachable through them (``fr.compare.Comparison``; see :mod:`fitrules._modules`). Every result
renders itself: ``print(r)`` or ``r.summary()`` in words, HTML in a notebook, ``r.to_json()``;
``c.summary`` is also the per-form table. ``fr.__version__`` is the version.
"""

from __future__ import annotations

import importlib
import importlib.metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("fitrules")
except _metadata.PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0+unknown"

# public name -> module that defines it
_PUBLIC = {
    "load_grid": "fitrules.api",
    "load_example": "fitrules.examples",
    "example_path": "fitrules.examples",
    "list_examples": "fitrules.examples",
    "Grid": "fitrules.grids",
    "Form": "fitrules.forms",
    "available_forms": "fitrules.forms",
    "BUILTIN_FORMS": "fitrules.forms",
    "Objective": "fitrules.fit",
    "ci": "fitrules.api",
    "Comparison": "fitrules.compare",
    "FittedForm": "fitrules.fitted",
    "Prediction": "fitrules.fitted",
    "PairedIntervals": "fitrules.jobs.ci",
    "Tuning": "fitrules.tune",
    "Search": "fitrules.search",
    "Grammar": "fitrules.grammar",
    "FitrulesError": "fitrules.errors",
    "GridError": "fitrules.errors",
    "FormError": "fitrules.errors",
}
_CALLABLE_MODULES = ("compare", "fit", "tune", "design", "search")
# fr.compare is the API function (help() shows its docstring), and stays so when the module
# fitrules.compare is imported; the module's names are reachable through it
_FUNCTIONS = {
    "compare": "fitrules.api.compare",
    "fit": "fitrules.api.fit",
    "tune": "fitrules.api.tune",
    "design": "fitrules.api.design",
    "search": "fitrules.api.search",
}

__all__ = ["__version__", *_CALLABLE_MODULES, *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _CALLABLE_MODULES:
        return _ENTRIES[name]
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fitrules' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


from fitrules._modules import package_with_functions  # noqa: E402

_ENTRIES = package_with_functions(__name__, _FUNCTIONS)
