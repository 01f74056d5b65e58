"""The public Python API: the functions behind every command, taking names or objects.

    import fitrules as fr
    g = fr.load_grid(df_or_path, where="lr == 3e-4", derive="omega = 1/keep - 1")
    c = fr.compare(g, forms=["composition", "additive", fr.Form("mine", "L0 + a*omega**c")],
                   splits=300)
    c.summary, c.paired, c.results, c.cell_errors      # tidy DataFrames
    c.plot_heldout(); c.plot_paired("composition", "additive")   # matplotlib Axes
    f = fr.fit(g, "composition", intervals=True)      # FittedForm
    fr.ci(g, baseline="algo=sync", treatment="algo=diloco,H=16", tune="lr")

The command line parses its arguments, calls one of these and prints what it returns.
"""

from __future__ import annotations

from fitrules.jobs.inputs import Bounds, Fix, FormLike, GridLike, as_forms, as_grid, load_grid
from fitrules.jobs.public.allocate import allocate
from fitrules.jobs.public.ci import ci
from fitrules.jobs.public.compare import compare
from fitrules.jobs.public.design import design
from fitrules.jobs.public.fit import check_runs, fit, load_fit
from fitrules.jobs.public.forms import add_form, remove_form
from fitrules.jobs.public.ledger import predict, score, verify_ledger
from fitrules.jobs.public.search import search, search_jobs, search_progress
from fitrules.jobs.public.simulate import simulate
from fitrules.jobs.public.tune import tune, validate
from fitrules.model.forms import Form
from fitrules.model.grids import Grid

__all__ = [
    "Bounds",
    "Fix",
    "Form",
    "FormLike",
    "Grid",
    "GridLike",
    "add_form",
    "allocate",
    "as_forms",
    "as_grid",
    "check_runs",
    "ci",
    "compare",
    "design",
    "fit",
    "load_fit",
    "load_grid",
    "predict",
    "remove_form",
    "score",
    "search",
    "search_jobs",
    "search_progress",
    "simulate",
    "tune",
    "validate",
    "verify_ledger",
]
