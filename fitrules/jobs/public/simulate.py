"""fr.simulate: a grid spec's training runs, with the bundled harness."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, api_terms, param
from fitrules.jobs.options import SIMULATE


@api_terms
def simulate(
    spec: str | Path | None = None,
    out: str | Path | None = None,
    *,
    cell: str | None = None,
    seeds: str | None = None,
    jobs: int = SIMULATE.jobs,
    scheduler: str | None = None,
    progress: bool | None = None,
    quiet: bool = False,
    command: str | None = None,
):
    """Run a grid spec's training runs with the bundled harness: what ``fitrules simulate``
    does. Runs already in ``out`` are kept (a stopped run resumes), each finished run is
    appended at once, and a manifest beside ``out`` records the spec, the version and the
    command.

    Parameters
    ----------
    spec : str or path, optional
        A spec file, or a committed spec's name (``"main"``); with ``cell``, the spec whose
        fixed settings the cell starts from.
    out : str or path
        The results CSV to create or resume (required).
    cell : str, optional
        One configuration instead of the whole spec, e.g. ``"H=4,keep=0.5"``.
    seeds : str, optional
        Seeds for ``cell``, e.g. ``"0,1,2"`` (default: the spec's, or 0).
    jobs : int, optional
        Worker processes (default 1).
    scheduler : str, optional
        A Dask scheduler's address to run on instead of processes (needs the ``distributed``
        extra).
    progress : bool, optional
        Show a progress bar (default: in a notebook or a terminal).
    quiet : bool, optional
        No line on stderr per finished run.
    command : str, optional
        What made the table, kept in its manifest.

    Returns
    -------
    pandas.DataFrame
        Every run of the spec, one row a run, as written to ``out``; ``.attrs["spec"]`` is
        the spec's name.

    Raises
    ------
    FitrulesError
        For a spec or cell that cannot be read (``SimError``), an ``out`` that cannot be
        written or holds runs of another spec.

    Examples
    --------
    >>> fr.simulate("main", "new.csv", cell="H=8,keep=0.25", seeds="0,1,2")  # doctest: +SKIP
    """
    check(locals())
    from fitrules.sim.runner import check_out
    from fitrules.sim.runner import simulate as run_simulate
    from fitrules.sim.spec import cell_spec, load_spec

    out_path, jobs = arg.path(out, "out"), arg.count(jobs, "jobs")
    check_out(out_path, jobs)  # before the spec is even read: nothing is written
    base = load_spec(arg.path(spec, "spec")) if spec is not None else None
    grid_spec = cell_spec(cell, base, seeds) if cell is not None else base
    table = run_simulate(grid_spec, out_path, jobs=jobs, show_progress=progress, command=command,
                         scheduler=scheduler, log=None if quiet else _log_line)  # fmt: skip
    table.attrs["spec"] = grid_spec.name
    return table


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.simulate's arguments) gives before anything is read or
    written."""
    v = {o.name: o.value for o in SIMULATE.python} | dict(values)
    SIMULATE.check(v)  # the declared options' types and ranges
    if v["out"] is None:
        raise FitrulesError(
            f"simulate needs {param('out')} PATH: the results CSV to create or resume"
        )
    arg.path(v["out"], "out")
    arg.count(v["jobs"], "jobs")
    arg.text(v["seeds"], "seeds", none=True)
    cell = v["cell"]
    if cell is not None and not (isinstance(cell, str) and cell.strip()):
        raise FitrulesError(f"cell {cell!r}: give one or more settings, e.g. 'H=4,keep=0.5'")
    if cell is None and v["spec"] is None:
        raise FitrulesError(f"simulate needs a SPEC file or {param('cell')}")
    if cell is None and v["seeds"] is not None:
        raise FitrulesError(
            f"{param('seeds')} applies to {param('cell')}; a spec lists its own seeds"
        )


def _log_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
