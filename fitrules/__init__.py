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

Each name is a function or a class, never a module: the jobs' modules live under
:mod:`fitrules.jobs` (``fitrules.jobs.compare``), below the API's functions. Every result
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
    "compare": "fitrules.api",
    "fit": "fitrules.api",
    "allocate": "fitrules.api",
    "load_fit": "fitrules.api",
    "tune": "fitrules.api",
    "design": "fitrules.api",
    "search": "fitrules.api",
    "validate": "fitrules.api",
    "predict": "fitrules.api",
    "score": "fitrules.api",
    "verify_ledger": "fitrules.api",
    "simulate": "fitrules.api",
    "add_form": "fitrules.api",
    "remove_form": "fitrules.api",
    "load_grid": "fitrules.api",
    "load_example": "fitrules.model.examples",
    "example_path": "fitrules.model.examples",
    "list_examples": "fitrules.model.examples",
    "Grid": "fitrules.model.grids",
    "Form": "fitrules.model.forms",
    "available_forms": "fitrules.model.forms",
    "BUILTIN_FORMS": "fitrules.model.forms",
    "Objective": "fitrules.engine.fit",
    "ErrorMetric": "fitrules.base.error_metrics",
    "ERROR_METRICS": "fitrules.base.error_metrics",
    "ci": "fitrules.api",
    "Comparison": "fitrules.jobs.compare",
    "FittedForm": "fitrules.jobs.fit",
    "Prediction": "fitrules.jobs.fit",
    "PairedIntervals": "fitrules.jobs.ci",
    "Allocation": "fitrules.jobs.allocate",
    "Tuning": "fitrules.jobs.tune",
    "Search": "fitrules.jobs.search",
    "Grammar": "fitrules.engine.grammar",
    "FitrulesError": "fitrules.base.errors",
    "GridError": "fitrules.base.errors",
    "FormError": "fitrules.base.errors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fitrules' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
