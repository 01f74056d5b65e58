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

import contextlib
import dataclasses
import math
import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, FormError, GridError, SplitError, api_terms
from fitrules.base.limits import MAX_SIM_JOBS, MAX_SPLITS
from fitrules.base.results import made_from
from fitrules.jobs.options import (
    ALLOCATE,
    CI,
    COMPARE,
    DESIGN,
    FIT,
    PREDICT,
    RANDOM_SPLITS,
    SEARCH,
    SIMULATE,
)
from fitrules.model import grids as _grids
from fitrules.model.forms import Form
from fitrules.model.grids import Grid
from fitrules.model.grids import load_grid as _load_grid

if TYPE_CHECKING:  # the result types, for annotations only
    from fitrules.jobs.allocate import Allocation
    from fitrules.jobs.fit import FittedForm

# fr.load_grid: the loader, its errors in the words of its parameters
load_grid = api_terms(_grids.load_grid)

Fix: TypeAlias = "Mapping[str, float] | Sequence[str] | None"
Bounds: TypeAlias = "Mapping[str, tuple[float, float]] | Sequence[str] | None"
GridLike: TypeAlias = Grid | pd.DataFrame | str | Path
FormLike: TypeAlias = Form | str


def as_grid(grid: GridLike | None, **load: Any) -> Grid:
    """A :class:`Grid` from a Grid, a DataFrame or a path; ``None`` is the default grid
    (the committed main grid at inner learning rate 3e-4)."""
    if isinstance(grid, Grid):
        if any(v for v in load.values()):
            raise FitrulesError(
                "where/derive/metric/unit apply when a grid is loaded; this one already is "
                "(pass them to fr.load_grid)"
            )
        return grid
    if grid is None:
        from fitrules.model.grids import default_grid

        path, where = default_grid(load.pop("where", None) or ())
        return _load_grid(path, where=where, **load)
    if not isinstance(grid, pd.DataFrame | str | Path):
        raise GridError(
            f"grid {type(grid).__name__}: give a fitrules.Grid, a pandas DataFrame, or the path "
            "of a CSV or Parquet file (None: the default grid)"
        )
    if isinstance(grid, str | Path):
        from fitrules.model.examples import resolve_data

        grid = resolve_data(grid)
    return _load_grid(grid, **load)


@api_terms
def tune(grid: GridLike | None, factors: Sequence[str] | str, tune_seeds: Sequence | None = None):
    """Tune ``factors`` per configuration, choosing on some seeds and measuring on others.

    A configuration is one combination of the grid's other varying factors
    (``grid.varying_factors`` minus ``factors``); the levels tried are the combinations of
    the tuned factors present for it (kept or set aside). Several factors are tuned jointly.

    Selection: the level with the lowest mean metric over the choosing seeds wins. A run set
    aside as diverged or with a non-finite metric (``grid.excluded``) counts as +inf, so a
    level that diverged on a choosing seed cannot win unless every level did; a run that is
    simply absent is left out of its level's mean. Ties go to the smallest level (in the
    order of the levels, lexicographic over several factors).

    Schemes:

    - ``tune_seeds=None``, cross-fitting: each configuration's seeds are sorted and split
      by alternating position, half A = positions 0, 2, 4, ... and half B = positions 1, 3,
      5, ... (seeds 0..5 give A = 0, 2, 4 and B = 1, 3, 5). The level chosen on A supplies
      B's runs (fold ``"A->B"``) and the level chosen on B supplies A's (``"B->A"``), so
      every seed's output run was chosen without that seed.
    - ``tune_seeds`` given: the level is chosen on those seeds, and only the other seeds'
      runs at that level are output (fold ``"tune seeds"``).

    An evaluated seed whose run at the chosen level is missing or diverged is left out of
    ``runs`` and counted (``choices.n_left_out``, and a warning).

    Parameters
    ----------
    grid : Grid, DataFrame, path or None
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    factors : str or sequence of str
        The column or columns to tune, e.g. ``["lr"]``.
    tune_seeds : sequence of int, optional
        The seeds to choose on; None (default) cross-fits.

    Returns
    -------
    Tuning
        ``runs`` and ``grid`` (the tuned reduction), ``choices``, ``curves``, ``flattery``
        (how much choosing on the same seeds would flatter) and ``warnings``.

    Raises
    ------
    GridError
        If a tuned factor is not a column, has missing values or only one level; if the grid
        has no seed column; if a tune seed is not in the grid, a configuration has no tuning
        seed or no evaluation seed left; or, for cross-fitting, if a configuration has fewer
        than two seeds. The message names the column, seed or configuration.

    Examples
    --------
    >>> import fitrules as fr
    >>> grid = fr.load_grid("data/paired_tuned.csv")  # doctest: +SKIP
    >>> t = fr.tune(grid, ["lr"], tune_seeds=[0, 1, 2])  # doctest: +SKIP
    >>> t.choices[["algo", "chosen_lr", "at_edge"]]  # doctest: +SKIP
    >>> t.grid.cells(["algo"]).table  # doctest: +SKIP
    """
    from fitrules.jobs.tune import tune as run_tune

    g = as_grid(grid)
    return made_from(run_tune(g, factors, tune_seeds), g)


@api_terms
def validate(
    grid: GridLike | None = None,
    *,
    tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None,
):
    """Check a results grid and summarise it: what ``fitrules validate`` prints.

    Runs, cells, levels per factor, seeds per cell, the rows set aside and the columns left
    out or pooled, and a per-seed effect shared across cells when the runs show one. A
    grid whose seed ids mean different things in different cells is refused, as
    :func:`compare` refuses it.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).

    Returns
    -------
    fitrules.jobs.validate.Validation
        ``.facts`` (a dict), ``.grid``, ``.tuning``; ``print(v)`` in words,
        ``v.to_json(path)``, HTML in a notebook.

    Raises
    ------
    GridError
        For a table that cannot be read or checked; the message names the file and column.

    Examples
    --------
    >>> v = fr.validate(fr.load_example("main"))  # doctest: +SKIP
    >>> v.facts["cells"], v.facts["seeds_per_cell"]  # doctest: +SKIP
    """
    from fitrules.jobs.validate import validate as run_validate

    g, tuning = _tuned(as_grid(grid), tune, tune_seeds)
    return made_from(run_validate(g, tuning), g)


def _check_saved_fit_use(saved_fit, form, **fitting) -> None:
    """A prediction from a saved fit takes its form and fit options from it: refuse a form
    or a fitting option given beside it (it would be silently ignored), or neither."""
    if saved_fit is None:
        if form is None:
            raise FitrulesError("give the form predicted with --form, or a saved fit with --fit")
        return
    if form is not None:
        raise FitrulesError("--fit FILE gives the form and its fit: give --form or --fit, not both")
    defaults = {"objective": PREDICT.objective, "delta": PREDICT.delta,
                "weights": PREDICT.weights}  # fmt: skip
    given = [k for k, v in fitting.items() if v != defaults.get(k) and v not in (None, (), [])]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise FitrulesError(
            f"--fit FILE gives the fit's options: {flags} would be ignored; leave them out, or "
            "fit again with --form"
        )


def check_predict_options(
    at,
    *,
    runs=None,
    tolerance=None,
    objective=PREDICT.objective,
    delta=PREDICT.delta,
    resamples=PREDICT.resamples,
    seed=PREDICT.seed,
    level=PREDICT.level,
    fix=None,
    bounds=None,
    by=None,
    shared=None,
) -> None:
    """Refuse a prediction's options before anything is read or written (``fitrules
    predict`` calls this first too, in this order)."""
    from fitrules.engine.fit import Objective
    from fitrules.engine.intervals import check_bootstrap_options, parse_point
    from fitrules.model.forms import parse_bounds, parse_fix

    if tolerance is not None and not (
        isinstance(tolerance, numbers.Real) and math.isfinite(tolerance) and float(tolerance) > 0
    ):
        raise FitrulesError(f"--tolerance {tolerance}: must be a positive, finite percentage")
    Objective(objective, delta)
    parse_fix(fix)
    parse_bounds(bounds)
    if shared is not None and by is None:
        raise FitrulesError("--shared needs --by COLUMN")
    check_bootstrap_options(resamples, seed, level)
    parse_point(at, "--at")
    check_runs(runs)


def check_runs(runs: int | None) -> None:
    """The number of new runs a prediction's interval is for: 1 to 1000, or None."""
    whole = isinstance(runs, numbers.Integral) and not isinstance(runs, bool)
    if runs is not None and not (whole and 1 <= runs <= 1000):
        raise FitrulesError(f"--runs {runs}: the number of new runs must be between 1 and 1000")


@api_terms
def predict(
    grid: GridLike | None, form: FormLike | None, at: str | Mapping[str, float], *,
    ledger: str | Path, saved_fit: str | Path | None = None,
    runs: int | None = None, tolerance: float | None = None,
    objective: str = PREDICT.objective, delta: float = PREDICT.delta,
    weights: str = PREDICT.weights, fix: Fix = None, bounds: Bounds = None,
    by: str | None = None, shared: Sequence[str] | str | None = None,
    bootstrap: str = PREDICT.bootstrap, resamples: int = PREDICT.resamples,
    seed: int = PREDICT.seed, level: float = PREDICT.level,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    command: str | None = None,
):  # fmt: skip
    """Fit ``form`` on every cell and write its prediction at ``at`` to ``ledger`` before
    the run: what ``fitrules predict`` does.

    The interval carries the form's misfit (leave-one-cell-out refits) as well as its
    constants' uncertainty and, with ``runs=K``, the seed noise of K new runs; it is the
    one :func:`score` later checks against the new runs. The ledger is append-only and
    hash-chained: a record cannot be changed or removed unseen.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    form : str, Form or None
        A form's name, a ``"NAME = EXPR"`` line or a :class:`Form`; None with ``saved_fit``.
    at : str or dict of str to float
        The configuration predicted, ``"H=8,keep=0.25"`` or ``{"H": 8, "keep": 0.25}``.
    ledger : str or path
        The ledger file (created if absent).
    saved_fit : str or path, optional
        A fit saved by :meth:`FittedForm.to_json` (``fitrules fit --json``): the prediction
        is made with its form and fit options on the data it was made from (checked, as
        :func:`load_fit` does; ``grid`` gives the data when it is not at the recorded path),
        in place of ``form`` and the fitting options, which are then refused.
    runs : int, optional
        The number of new runs whose mean will be measured (default: the configuration's
        mean).
    tolerance : float, optional
        The relative error (percent) the prediction commits to, if any.
    objective : {"rel_ls", "log_huber", "abs_ls"}, optional
        The training objective: relative least squares (default), Huber on the log, or
        absolute least squares.
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).
    weights : {"cells", "runs", "inverse-variance"}, optional
        How each cell counts in the fit: once (default), by its runs, or by one over its
        squared standard error.
    fix : dict of str to float or sequence of str, optional
        Constants held at a value, ``{"alpha": 0.34}`` or ``["alpha=0.34"]``.
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, ``{"Nc": (1e10, 1e16)}`` or ``["Nc=1e10..1e16"]``.
    by : str, optional
        Fit one form per level of this column, jointly.
    shared : sequence of str or str, optional
        The constants common to all groups of ``by`` (names, or ``"b,c"``).
    bootstrap : {"studentized", "auto", "seeds", "residuals"}, optional
        The bootstrap of the intervals (default ``"studentized"``).
    resamples : int, optional
        Bootstrap resamples (default 200).
    seed : int, optional
        Seed of the bootstrap (default 0).
    level : float, optional
        Level of the intervals (default 0.95).
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    command : str, optional
        What made the record, kept in it (default ``"fr.predict"``).

    Returns
    -------
    fitrules.jobs.ledger.LedgerEntry
        ``.record`` (as appended, with its id and hashes), ``.head`` (keep it elsewhere),
        ``.fitted``; ``print(e)`` says what was recorded.

    Raises
    ------
    FitrulesError
        For a bad option (named), a ledger that was tampered with or cannot be written, or
        a point that gives no value of a variable.

    Examples
    --------
    >>> e = fr.predict(None, "composition", "H=8,keep=0.25", ledger="l.jsonl")  # doctest: +SKIP
    >>> e.record["interval"]  # doctest: +SKIP
    """
    PREDICT.check(locals())  # the declared options' types and ranges, first
    _check_saved_fit_use(saved_fit, form, objective=objective, delta=delta, weights=weights,
                         fix=fix, bounds=bounds, by=by, shared=shared, tune=tune,
                         tune_seeds=tune_seeds)  # fmt: skip
    from fitrules.base.outputs import check_distinct
    from fitrules.jobs.ledger import (
        LedgerEntry,
        append_prediction,
        check_ledger_target,
        prediction_record,
    )
    from fitrules.model.forms import resolve_form
    from fitrules.views.text import table_notes

    if isinstance(at, Mapping):
        at = ",".join(f"{k}={v!r}" for k, v in at.items())
    arg.text(at, "at")
    check_predict_options(at, runs=runs, tolerance=tolerance, objective=objective, delta=delta,
                          resamples=resamples, seed=seed, level=level, fix=fix, bounds=bounds,
                          by=by, shared=shared)  # fmt: skip
    ledger_path = arg.path(ledger, "ledger")
    saved = None
    if saved_fit is not None:  # the saved fit's data, form and arguments (data checked)
        saved = _saved_call(arg.path(saved_fit, "saved_fit"), grid)
        grid = saved[2]
    g = as_grid(grid)
    # the ledger is appended to: never the table the prediction is fitted on (a JSON-lines
    # table would take the record as a run)
    table = g.input_file
    check_distinct([("--ledger", ledger_path)], [Path(table)] if table is not None else [])
    check_ledger_target(ledger_path)  # a tampered or unwritable ledger is refused now
    if saved is not None:
        doc, label, _, form, kw = saved
        kw = {**kw, "intervals": False}  # the prediction's own interval is made below
        fitted = _with_saved_values(doc, label, fit(g, form, predict=[at], runs=runs, **kw))
        objective, level, resamples = kw["objective"], kw["level"], kw["resamples"]
    else:
        form = resolve_form(form) if isinstance(form, str) else form
        g, _ = _tuned(g, tune, tune_seeds)
        fitted = fit(g, form, objective=objective, delta=delta, predict=[at],
                     bootstrap=bootstrap, resamples=resamples, seed=seed, level=level, fix=fix,
                     bounds=bounds, by=by, shared=shared, weights=weights,
                     runs=runs)  # fmt: skip
    record = prediction_record(fitted, g, objective=objective, level=level, resamples=resamples,
                               runs=runs, tolerance=tolerance,
                               command=command or "fr.predict")  # fmt: skip
    rec = append_prediction(ledger_path, record)
    entry = LedgerEntry(ledger_path, rec, table_notes(fitted.data), fitted)
    return made_from(entry, g, ledger_path)


@api_terms
def score(
    grid: GridLike,
    ledger: str | Path,
    *,
    head: str | None = None,
    tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None,
):
    """Score a ledger's predictions against the new runs: what ``fitrules score`` does.

    Each record's interval is checked against the mean of the new runs at its
    configuration, and forms that predicted the same configurations are compared on them
    with a paired test over configurations that knows the runs share seed ids.

    Parameters
    ----------
    grid : Grid, DataFrame or path
        The results table holding the new runs.
    ledger : str or path
        The ledger written by :func:`predict`.
    head : str, optional
        The head printed when the last prediction was written (``N:HASH``, or the hash alone):
        a ledger that lost or rewrote a record up to it is refused.
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).

    Returns
    -------
    fitrules.jobs.ledger.Scores
        ``.scores`` (one row per record), ``.coverage`` (per form), ``.pairs`` (the paired
        tests); ``print(s)`` in words, ``s.to_json(path)``.

    Raises
    ------
    FitrulesError
        For a ledger that is missing, malformed or tampered with (``LedgerError``), or a
        table that lacks a record's configuration or setup.

    Examples
    --------
    >>> s = fr.score("runs.csv", "ledger.jsonl")  # doctest: +SKIP
    >>> s.coverage  # doctest: +SKIP
    """
    from fitrules.jobs.ledger import score as run_score

    ledger_path = arg.path(ledger, "ledger")
    arg.text(head, "head", none=True)
    g, _ = _tuned(as_grid(grid), tune, tune_seeds)
    return made_from(run_score(ledger_path, g, head=head), g, ledger_path)


@api_terms
def verify_ledger(ledger: str | Path, head: str | None = None):
    """Check a ledger's hash chain: what ``fitrules ledger verify`` does.

    Parameters
    ----------
    ledger : str or path
        The ledger written by :func:`predict`.
    head : str, optional
        The head kept elsewhere (``N:HASH``, or the hash alone); without it a removed last
        record or a rewritten chain cannot be detected.

    Returns
    -------
    fitrules.jobs.ledger.LedgerCheck
        ``.records``, ``.head_index``, ``.head`` (the head to keep now); ``print(c)``.

    Raises
    ------
    LedgerError
        For a ledger that is missing, empty, malformed or tampered with, or that no longer
        holds ``head``; the message names the record.

    Examples
    --------
    >>> fr.verify_ledger("ledger.jsonl", head="3:5f2c9e01a7b4")  # doctest: +SKIP
    """
    from fitrules.jobs.ledger import verify_ledger as run_verify

    arg.text(head, "head", none=True)
    ledger_path = arg.path(ledger, "ledger")
    return made_from(run_verify(ledger_path, head), ledger_path)


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
    from fitrules.sim.runner import check_out
    from fitrules.sim.runner import simulate as run_simulate
    from fitrules.sim.spec import cell_spec, load_spec

    SIMULATE.check(locals())  # the declared options' types and ranges, before any reading
    if out is None:
        raise FitrulesError("simulate needs --out PATH: the results CSV to create or resume")
    out_path = arg.path(out, "out")
    jobs = arg.count(jobs, "jobs")
    arg.text(seeds, "seeds", none=True)
    if cell is not None and not (isinstance(cell, str) and cell.strip()):
        raise FitrulesError(f"cell {cell!r}: give one or more settings, e.g. 'H=4,keep=0.5'")
    check_out(out_path, jobs)  # before the spec is even read: nothing is written
    base = load_spec(arg.path(spec, "spec")) if spec is not None else None
    if cell is not None:
        grid_spec = cell_spec(cell, base, seeds)
    elif base is not None:
        if seeds is not None:
            raise FitrulesError("--seeds applies to --cell; a spec lists its own seeds")
        grid_spec = base
    else:
        raise FitrulesError("simulate needs a SPEC file or --cell")
    table = run_simulate(grid_spec, out_path, jobs=jobs, show_progress=progress, command=command,
                         scheduler=scheduler, log=None if quiet else _log_line)  # fmt: skip
    table.attrs["spec"] = grid_spec.name
    return table


def _log_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@api_terms
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
    folder : str or path, optional
        The folder whose ``forms.toml`` holds the forms (default: the working one).

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
    from fitrules.model.forms import add_form_to_file, parse_form_line

    arg.text(line, "line")
    form = parse_form_line(line, "fitrules forms add")
    if form.variables is None or grid is not None:
        g = as_grid(grid)
        form = form.bind(g.columns, g.runs)  # refuses a name close to a column ("omgea")
    name, _, expression = line.partition("=")
    cwd = None if folder is None else arg.path(folder, "folder")
    add_form_to_file(name.strip(), expression.strip(), cwd=cwd)
    return form


@api_terms
def remove_form(name: str, folder: str | Path | None = None) -> Path:
    """Remove a form from ``forms.toml`` (of the working directory, or ``folder``): what
    ``fitrules forms remove`` does. Returns the file's path.

    Parameters
    ----------
    name : str
        The name of the form to remove.
    folder : str or path, optional
        The folder whose ``forms.toml`` holds the forms (default: the working one).

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


@contextlib.contextmanager
def _compare_progress(progress, on_progress, splitter, forms, train_frac, verdict_train_frac):
    """The callback compare reports fits to: the caller's, or a bar counting splits (in a
    notebook by default), or none."""
    from fitrules.base.util import in_notebook, split_progress
    from fitrules.model.splits import RandomSplit

    if on_progress is not None or progress is False or (progress is None and not in_notebook()):
        yield on_progress
        return
    random = isinstance(splitter, RandomSplit)
    passes = 2 if random and train_frac < verdict_train_frac else 1
    n = int(splitter.n_splits) if random else None
    desc = f"fitting {len(forms)} form{'s' if len(forms) != 1 else ''}"
    with split_progress(n, len(forms) * passes, desc, True) as step:
        yield step


def _left_out(names: Sequence[str], cwd: Path | None = None) -> list[str]:
    """A note naming the forms of ``forms.toml`` a comparison did not include."""
    from fitrules.model.forms import BUILTIN_FORMS, available_forms

    try:
        extra = [n for n in available_forms(cwd) if n not in BUILTIN_FORMS and n not in names]
    except FitrulesError:  # an unreadable forms.toml is refused where forms are named
        return []
    if not extra:
        return []
    return [
        f"forms.toml defines {', '.join(extra)}, not compared here: name "
        f"{'it' if len(extra) == 1 else 'them'} with --forms (forms= in Python) to include "
        f"{'it' if len(extra) == 1 else 'them'}"
    ]


def as_forms(forms: FormLike | Sequence[FormLike] | None, cwd: Path | None = None) -> list[Form]:
    """Forms from names (built-in or ``forms.toml``), inline ``"NAME = EXPR"`` lines and
    :class:`Form` objects; ``None`` is the built-in set."""
    from fitrules.model.forms import available_forms, parse_form_line, select_forms

    if forms is None:
        return select_forms(None, cwd=cwd)
    if isinstance(forms, Form | str):
        forms = [forms]
    if not isinstance(forms, Sequence):
        raise FormError(
            f"forms {forms!r}: give a name, 'NAME = EXPR', a fitrules.Form, or a list of them"
        )
    pool = None
    out: list[Form] = []
    for f in forms:
        if isinstance(f, Form):
            out.append(f)
        elif isinstance(f, str) and "=" in f:
            out.append(parse_form_line(f, "forms"))
        elif isinstance(f, str):
            pool = pool if pool is not None else available_forms(cwd)
            if f not in pool:
                from fitrules.model.forms import did_you_mean

                raise FormError(
                    f"unknown form {f!r}{did_you_mean(f, pool)}; available: {', '.join(pool)} "
                    "(or give 'NAME = EXPR' or a fitrules.Form)"
                )
            out.append(pool[f])
        else:
            raise FormError(f"a form is a name, 'NAME = EXPR' or a fitrules.Form, not {f!r}")
    names = [f.name for f in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FormError(f"form {twice[0]!r} is given twice")
    if not out:
        raise FormError("no form given")
    return out


def _customised(forms: list[Form], fix, bounds, by, shared) -> list[Form]:
    """The forms with ``fix``, ``bounds``, ``by`` and ``shared`` applied."""
    from fitrules.model.forms import customise, parse_bounds, parse_fix

    arg.text(by, "by", none=True)
    if isinstance(shared, str):
        shared = [c.strip() for c in shared.split(",") if c.strip()]
    elif shared is not None:
        shared = list(arg.texts(shared, "shared"))
    return customise(forms, parse_fix(fix), parse_bounds(bounds), by, shared)


def _tuned(grid: Grid, tune: str | Sequence[str] | None, tune_seeds):
    tune = list(arg.texts(tune, "tune"))
    if tune_seeds is not None and not isinstance(tune_seeds, str):
        if not isinstance(tune_seeds, Sequence):
            raise FitrulesError(f"tune_seeds {tune_seeds!r}: give a list of seeds, e.g. [0, 1]")
        tune_seeds = [arg.seed(s, "tune_seeds") for s in tune_seeds]
    if not tune:
        if tune_seeds is not None:
            raise FitrulesError("--tune-seeds needs --tune FACTOR (tune_seeds needs tune)")
        return grid, None
    from fitrules.jobs.tune import tune as tune_grid

    if isinstance(tune_seeds, str):
        tune_seeds = arg.seed_list(tune_seeds, "tune_seeds")
    tuning = tune_grid(grid, tune, tune_seeds)
    return tuning.grid, tuning


@api_terms
def compare(
    grid: GridLike | None = None, forms: FormLike | Sequence[FormLike] | None = None,
    splits: int | Any | None = None, *,
    # the splits
    split: str = COMPARE.split, train_frac: float = COMPARE.train_frac, seed: int = COMPARE.seed,
    seeds: str = COMPARE.seeds, test_grid: GridLike | None = None,
    heldout_weights: str = COMPARE.heldout_weights,
    # the fit
    objective: str = COMPARE.objective, delta: float = COMPARE.delta,
    weights: str = COMPARE.weights, fix: Fix = None, bounds: Bounds = None, by: str | None = None,
    shared: Sequence[str] | str | None = None,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    # the guard and the degenerate splits
    guard_span: float = COMPARE.guard_span, guard_se: float = COMPARE.guard_se,
    guard_excursion: float = COMPARE.guard_excursion,
    metric_range: tuple[float, float] | None = None, keep_degenerate: bool = False,
    # the verdicts
    level: float = COMPARE.level, against: str | None = None,
    pairs: Sequence[tuple[str, str]] | str | None = None,
    verdict_train_frac: float = COMPARE.verdict_train_frac,
    on_progress: Callable[[int], None] | None = None, progress: bool | None = None,
):  # fmt: skip
    """Fit every form on the same splits of a grid's cells and compare held-out errors.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    forms : str, Form or sequence of str or Form, optional
        Names, ``"NAME = EXPR"`` lines or :class:`Form` objects (default: the built-in
        forms).
    splits : int or splitter, optional
        Number of random splits (default, and for ``None``: 300), or a splitter object from
        :mod:`fitrules.model.splits`. Refused with a structured ``split``, which makes its own.
    split : str, optional
        ``random`` (default), ``leave-one-level-out:COL``, ``extrapolate:COL``,
        ``extrapolate:COL>=VALUE`` (or ``:VALUE``; several columns at once,
        ``extrapolate:N:4.2e9,D:6e11``) or ``transfer`` (with ``test_grid``).
    train_frac : float, optional
        Fraction of cells fitted per random split (default 1/3).
    seed : int, optional
        Seed of the splits (default 0).
    seeds : {"cells", "cells-and-seeds"}, optional
        The descriptive splits' held-out protocol: ``"cells"`` (default) or
        ``"cells-and-seeds"`` (seed ids held out too: the error new runs at new seed ids
        show; the verdicts stay on cells); see :func:`fitrules.jobs.compare.compare`.
    test_grid : Grid, DataFrame or path, optional
        For ``split="transfer"``: the grid scored (``grid`` is fitted).
    heldout_weights : {"box", "equal"}, optional
        ``"box"`` (default: each held-out cell counts by its share of the grid's box, half on
        an edge of a variable and a quarter at a corner, so that a split's error estimates the
        mean error over configurations spread across the grid's range) or ``"equal"`` (each
        held-out cell once); see :func:`fitrules.engine.metrics.box_weights`.
    objective : {"rel_ls", "log_huber", "abs_ls"}, optional
        The training objective: relative least squares (default), Huber on the log, or
        absolute least squares.
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).
    weights : {"cells", "runs", "inverse-variance"}, optional
        How each cell counts in the fit: once (default), by its runs, or by one over its
        squared standard error. See :func:`fit`.
    fix : dict of str to float or sequence of str, optional
        Constants held at a value, ``{"alpha": 0.34}`` or ``["alpha=0.34"]``.
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, ``{"Nc": (1e10, 1e16)}`` or ``["Nc=1e10..1e16"]``.
    by : str, optional
        Fit one form per level of this column, jointly.
    shared : sequence of str or str, optional
        The constants common to all groups of ``by`` (names, or ``"b,c"``); see :func:`fit`.
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    guard_span : float, optional
        Threshold of the wild-extrapolation guard (see :mod:`fitrules.engine.guard`).
    guard_se : float, optional
        Threshold of the wild-extrapolation guard.
    guard_excursion : float, optional
        Threshold of the wild-extrapolation guard.
    metric_range : (float, float), optional
        The plausible range of the metric, for the wild-extrapolation guard.
    keep_degenerate : bool, optional
        Keep flagged (split, form) pairs in summaries and verdicts.
    level : float, optional
        Level of the paired intervals (default 0.95).
    against : str, optional
        Test this form against each other form only (Holm over those pairs).
    pairs : sequence of (str, str) or str, optional
        The pairs tested, as ``[("a", "b"), ...]`` or ``"a:b,a:c"`` (default: every pair).
        Holm's adjustment runs over the pairs tested; the text says how many.
    verdict_train_frac : float, optional
        With random splits, the paired tests are made on as many random splits (same seed)
        fitting this fraction of the cells (default 0.9), where the corrected t test has power;
        summaries and counts of splits won describe the ``train_frac`` splits. See the docs
        page docs/explanation/verdicts.md.
    on_progress : callable, optional
        Called with the number of fits finished (one per split, form and protocol), for a
        progress bar of your own; none is then drawn.
    progress : bool, optional
        A progress bar counting splits, with a steady ETA: tqdm's widget in a notebook, a text
        bar on stderr elsewhere. Default (None): shown in a notebook only.

    Returns
    -------
    Comparison
        ``.summary``, ``.paired``, ``.results``, ``.cell_errors`` (DataFrames),
        ``.warnings``, ``.plot_*()`` figures, ``.report(dir)``, ``.to_json()``.

    Raises
    ------
    FitrulesError
        For bad input: an unknown form, a column the grid lacks, splits that cannot be made.

    Examples
    --------
    >>> import fitrules as fr  # doctest: +SKIP
    >>> c = fr.compare(fr.load_grid("data/main.csv", where="lr == 3e-4"), splits=100)
    >>> c.summary[["form", "median_pct"]]  # doctest: +SKIP
    """
    from fitrules.jobs.compare import compare as compare_splits
    from fitrules.model.splits import RandomSplit

    COMPARE.check(locals())  # the declared options' types and ranges, before any reading
    g, tuning = _tuned(as_grid(grid), tune, tune_seeds)
    chosen = _customised(as_forms(forms), fix, bounds, by, shared)
    splitter, test = _splitter(splits, split, train_frac, seed, g, test_grid)
    family = _compare_pairs(g, test, tuning, chosen, pairs, against, verdict_train_frac)
    obj, guard = _objective_and_guard(objective, delta, guard_span, guard_se, metric_range,
                                      guard_excursion)  # fmt: skip
    with _compare_progress(progress, on_progress, splitter, chosen, train_frac,
                           verdict_train_frac) as step:  # fmt: skip
        cmp = compare_splits(g, chosen, splitter, obj, keep_degenerate,
                             on_progress=step, test_grid=test, guard=guard, level=level,
                             pairs=family, verdict_train_frac=verdict_train_frac,
                             weights=weights, seeds=arg.text(seeds, "seeds"),
                             heldout_weights=heldout_weights)  # fmt: skip
    cmp.tuning = tuning
    made_from(cmp, g, test)
    cmp.warnings.extend(_left_out([f.name for f in chosen]))
    if not isinstance(splitter, RandomSplit):
        cmp.settings.setdefault("n_splits", len(cmp.results["split"].unique()))
    return cmp


def _splitter(splits, split: str, train_frac, seed, g: Grid, test_grid):
    """The splitter compare asks for (a count of random splits, a protocol or a splitter)
    and, for transfer, the grid scored."""
    from fitrules.model.splits import Transfer, parse_protocol

    test = None
    if splits is None or isinstance(splits, numbers.Real):
        kind = split.partition(":")[0].strip()
        if splits is not None and kind != "random":
            raise SplitError(
                f"--splits {splits} applies to random splits only; {split!r} makes its own "
                "(one per held-out group)"
            )
        splits = RANDOM_SPLITS if splits is None else arg.count(splits, "splits")
        labels = None
        if kind == "transfer":
            if test_grid is None:
                raise SplitError("split='transfer' needs test_grid (--fit-data A --test-data B)")
            test = as_grid(test_grid)
            labels = (g.label, test.label)
        splitter = parse_protocol(split, int(splits), train_frac, seed, labels)
    else:
        if not all(hasattr(splits, a) for a in ("masks_for", "labels", "describe")):
            raise SplitError(
                f"splits {splits!r}: give a number of random splits or a splitter from "
                "fitrules.model.splits"
            )
        splitter = splits
        if isinstance(splitter, Transfer):
            test = as_grid(test_grid)
    if test_grid is not None and test is None:
        raise SplitError("test_grid is only used with split='transfer'")
    return splitter, test


def _objective_and_guard(objective, delta, guard_span, guard_se, metric_range, excursion):
    """The training objective and the wild-extrapolation guard of compare and search."""
    from fitrules.engine.fit import Objective
    from fitrules.engine.guard import GuardOptions

    return Objective(objective, delta), GuardOptions(guard_span, guard_se, metric_range, excursion)


def _compare_pairs(g, test, tuning, chosen, pairs, against, verdict_train_frac):
    """The checks that need the grid and forms; the family of pairs the verdicts test."""
    from fitrules.jobs.compare import check_verdict_train_frac, parse_pairs

    if tuning is not None and test is not None:
        raise FitrulesError("tuning with the transfer protocol is not supported: tune each grid")
    family = parse_pairs(_pairs_text(pairs), against, [f.name for f in chosen])
    check_verdict_train_frac(verdict_train_frac)
    if test is not None:
        _check_same_metric(g, test)
    return family


def _pairs_text(pairs) -> str | None:
    """``[("a", "b"), ...]`` -> ``"a:b,..."``; text and None as they are."""
    if pairs is None or isinstance(pairs, str):
        return pairs
    try:
        return ",".join(p if isinstance(p, str) else ":".join(p) for p in pairs)
    except TypeError:
        raise FormError(
            f"pairs {pairs!r}: give pairs of form names, e.g. [('composition', 'additive')] "
            "or 'composition:additive'"
        ) from None


def _check_same_metric(fitted: Grid, scored: Grid) -> None:
    """Transfer fits one grid and scores another: both must measure the same thing."""
    if fitted.metric != scored.metric:
        raise SplitError(
            f"transfer: {fitted.label} is fitted on {fitted.metric!r} but {scored.label} would "
            f"be scored on {scored.metric!r}; give both grids the same metric (--metric)"
        )


@api_terms
def fit(
    grid: GridLike | None, form: FormLike, *,
    objective: str = FIT.objective, delta: float = FIT.delta, weights: str = FIT.weights,
    fix: Fix = None, bounds: Bounds = None, by: str | None = None,
    shared: Sequence[str] | str | None = None,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    # intervals and predictions
    intervals: bool | str = False, predict: str | dict | Sequence[str | dict] = (),
    runs: int | None = None, bootstrap: str = FIT.bootstrap, resamples: int = FIT.resamples,
    seed: int = FIT.seed, level: float = FIT.level,
    constraints: str | Sequence[str] | None = None,
):  # fmt: skip
    """Fit one form on every cell of a grid, with standard errors and optional intervals.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    form : str or Form
        A name, ``"NAME = EXPR"`` or a :class:`Form`.
    objective : {"rel_ls", "log_huber", "abs_ls"}, optional
        The training objective: relative least squares (default), Huber on the log, or
        absolute least squares.
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).
    weights : {"cells", "runs", "inverse-variance"}, optional
        ``"cells"`` (default: each cell once), ``"runs"`` (each cell by its runs) or
        ``"inverse-variance"`` (by one over its squared standard error); see
        :func:`fitrules.engine.fit.cell_weights`.
    fix : dict of str to float or sequence of str, optional
        Constants held at a value, ``{"alpha": 0.34}`` or ``["alpha=0.34"]``.
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, ``{"Nc": (1e10, 1e16)}`` or ``["Nc=1e10..1e16"]`` (a
        wide positive range is searched on a log scale).
    by : str, optional
        Fit one form per level of this column, jointly: the ``shared`` constants (default: the
        nonlinear ones, e.g. exponents) are common to all groups, the others are one per group
        (``a[M=2]``).
    shared : sequence of str or str, optional
        The constants common to all groups (names, or ``"b,c"``).
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    intervals : bool or {"bootstrap", "profile"}, optional
        ``True`` or ``"bootstrap"``: also refit on bootstrap replicates for intervals of the
        constants, and once per cell with that cell left out for prediction intervals that
        carry the form's misfit (implied by ``predict``); ``"profile"``: profile-likelihood
        intervals of the constants instead of the bootstrap's (each constant held on a path of
        values, the others refitted; see :mod:`fitrules.engine.profile`), with the same
        prediction intervals.
    constraints : str or sequence of str, optional
        Linear constraints between constants, ``"b > a"``, ``"a + b = 1"``, ``"c >= 0.5*b"``
        (a text, texts, or several in one text separated by ``;``), enforced by the optimiser
        (see :mod:`fitrules.engine.constraints`); with them, intervals are ``"profile"`` only
        and ``predict`` is refused (the bootstrap's and the prediction intervals' refits do not
        keep constraints).
    predict : str, dict or sequence of str or dict, optional
        Points to predict, e.g. ``"H=8,keep=0.25"`` or ``{"H": 8, "keep": 0.25}``.
    runs : int, optional
        k: the predictions also give the interval for the mean of k new runs.
    bootstrap : {"studentized", "auto", "seeds", "residuals"}, optional
        ``"studentized"`` (default: residual replicates, symmetric bootstrap-t intervals from
        each refit's Jacobian standard errors), ``"auto"`` (the percentile intervals of the
        residuals when any cell has a single run, else of the seeds), ``"seeds"`` or
        ``"residuals"``; see :mod:`fitrules.engine.intervals`.
    resamples : int, optional
        Bootstrap resamples (default 200).
    seed : int, optional
        Seed of the bootstrap (default 0).
    level : float, optional
        Level of the intervals (default 0.95).

    Returns
    -------
    FittedForm
        ``.constants``, ``.stderr`` and ``.correlation`` (Jacobian), ``.intervals``,
        ``.table``, ``.residuals``, ``.predict(...)``, ``.plot_*()``, ``.report(dir)``.

    Examples
    --------
    >>> f = fr.fit(g, "composition", intervals=True)  # doctest: +SKIP
    >>> f.stderr["b"], f.intervals["b"]  # doctest: +SKIP
    """
    FIT.check(locals())  # the declared options' types and ranges, first
    from fitrules.engine.fit import Objective, cell_weights
    from fitrules.engine.intervals import robust_cells
    from fitrules.jobs.fit import FittedForm

    _check_fit_arguments(intervals, bootstrap, predict, resamples, seed, constraints)
    if not isinstance(form, Form | str):
        raise FormError(f"form {form!r}: give one form: a name, 'NAME = EXPR' or a fitrules.Form")
    g = as_grid(grid)
    g, _ = _tuned(g, tune, tune_seeds)
    (f,) = _customised(as_forms(form), fix, bounds, by, shared)
    f = f.bind(g.columns, g.runs)
    obj = Objective(objective, delta)
    # under log_huber a cell is the biweight location of its runs (robust_cells), as the
    # bootstrap's and the design's are
    cells = robust_cells(g, f.bound_variables, obj)
    if len(cells) < len(f.constants):  # no unique fit: every constant cannot be told apart
        raise FitrulesError(
            f"form {f.name!r} has {len(f.constants)} constants but {g.label} has "
            f"{len(cells)} cell(s) over {', '.join(f.bound_variables)}: a fit needs at least "
            f"as many cells as constants ({len(f.constants) + 1} for standard errors)"
        )
    w = cell_weights(weights, cells.table, obj)
    points = _prediction_points(predict, f, g)
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise FitrulesError(f"runs {runs!r}: the number of new runs must be a whole number >= 1")
    cons = _constraints_of(constraints, f, intervals, points)
    with_intervals = bool(intervals or points)
    profile = intervals == "profile"
    if with_intervals:
        resamples, seed, level = arg.count(resamples, "resamples"), arg.seed(seed), arg.level(level)
    result, boot = _fit_or_bootstrap(g, f, obj, cells, w, with_intervals and not profile,
                                     resamples, seed, level, bootstrap, weights)  # fmt: skip
    if cons:
        from fitrules.engine.profile import constrained_fit

        result = constrained_fit(f, cells.X, cells.y, result, cons, obj, w)
    unc = _jacobian_of(f, cells, w, result, obj, cons)
    fitted = FittedForm(f, result, cells, obj, unc, _fit_data(g, f, cells), g.unit, boot,
                        derive=tuple(g.derive), weights=weights, harness=g.harness)  # fmt: skip
    fitted.heldout = fitted.seed_offset = fitted.offset_response = None
    fitted.constraints = cons or None
    if with_intervals and not cons:
        fitted.heldout, fitted.seed_offset, fitted.offset_response = _misfit_parts(
            g, f, cells, result, obj, level, w
        )
    if profile:
        from fitrules.engine.profile import profile_intervals

        fitted.profile = profile_intervals(f, cells.X, cells.y, result.constants, obj, level, w,
                                           cons or None)  # fmt: skip
    fitted.predictions = [fitted.predict(p, runs) for p in points]
    fitted.call = _fit_call(g, objective, delta, weights, tune, tune_seeds,
                            "profile" if profile else with_intervals, bootstrap, resamples, seed,
                            level, [c.text for c in cons.items] if cons else None)  # fmt: skip
    made_from(fitted, g)
    return fitted


def _fit_call(g, objective, delta, weights, tune, tune_seeds, intervals, bootstrap, resamples,
              seed, level, constraints=None) -> dict:  # fmt: skip
    """What :func:`load_fit` needs to make a fit again: how its grid was read (the form's
    own setup, fixed values, bounds and groups, is in the form's record) and the fit's
    arguments."""
    return {
        "grid": {"where": list(g.where), "derive": list(g.derive), "metric": g.metric,
                 "seed_col": g.seed, "unit": g.unit,
                 "path": None if g.source is None else str(g.source)},
        "objective": objective, "delta": delta, "weights": weights,
        "tune": tune if tune is None or isinstance(tune, str) else list(tune),
        "tune_seeds": tune_seeds if tune_seeds is None or isinstance(tune_seeds, str)
        else list(tune_seeds),
        "intervals": intervals if intervals == "profile" else bool(intervals),
        "bootstrap": bootstrap, "resamples": resamples, "seed": seed, "level": level,
        "constraints": constraints,
    }  # fmt: skip


SAVED_FIT_RTOL = 1e-6  # a refit's constants within this of the saved ones are the same fit


def load_fit(source: str | Path, data: GridLike | None = None) -> FittedForm:
    """A fit saved by :meth:`FittedForm.to_json`, made again from its data.

    The saved file records the form (with its fixed values, bounds and groups), the fit's
    arguments and the data's sha256. The data is read again (from the recorded path, or
    ``data``) and must be the same bytes; the form is refitted with the recorded arguments,
    and its constants must equal the saved ones, so predictions, standard errors and
    intervals are those of the saved fit.

    Parameters
    ----------
    source : str or Path
        The JSON file ``to_json(path)`` wrote, or its text.
    data : Grid, DataFrame or path, optional
        The table the fit was made from, when it is not at the recorded path (a fit of a
        DataFrame, or a file moved); read with the recorded ``where``, ``derive``, metric
        and seed column unless it is a Grid.

    Returns
    -------
    FittedForm
        The saved fit, refitted on its data.

    Raises
    ------
    FitrulesError
        For a file that is not a saved fit, data that is not what the fit was made from
        (its sha256 differs), or a refit whose constants differ from the saved ones.

    Examples
    --------
    >>> f = fr.fit(g, "composition")  # doctest: +SKIP
    >>> f.to_json("fit.json")  # doctest: +SKIP
    >>> fr.load_fit("fit.json").predict(H=8, keep=0.25)  # doctest: +SKIP
    """
    doc, label, g, form, arguments = _saved_call(source, data)
    refit = fit(g, form, **arguments)
    return _with_saved_values(doc, label, refit)



def _saved_call(source, data) -> tuple[dict, str, Grid, Form, dict]:
    """A saved fit's record, a label for messages, its data read again (the same bytes, or
    refused in one line), its form and the arguments of :func:`fit` that made it."""
    from fitrules.model.grids import IN_MEMORY

    doc, label = _saved_fit(source)
    call, saved = doc["call"], doc["data"]
    read = call["grid"]
    if data is None:
        if saved.get("path") in (None, IN_MEMORY):
            raise FitrulesError(
                f"{label}: the fit was made from a table in memory; give it again with data="
            )
        # as given then (relative to that working directory), else where it was then
        data = saved["path"]
        if not Path(data).is_file() and read.get("path") and Path(read["path"]).is_file():
            data = read["path"]
    if isinstance(data, Grid):
        g = data
    else:
        g = load_grid(data, metric=read["metric"], where=tuple(read["where"]),
                      derive=tuple(read["derive"]), seed_col=read["seed_col"],
                      unit=read["unit"])  # fmt: skip
    if g.sha256 != saved.get("sha256"):
        raise FitrulesError(
            f"{g.label}: not the data {label} was fitted on (sha256 "
            f"{str(saved.get('sha256'))[:12]} saved, {str(g.sha256)[:12]} now); refit it "
            "with fitrules.fit, or give the data it was made from with data="
        )
    spec = doc["form"]
    form = Form(spec["name"], spec["expression"], tuple(spec["variables"]))
    arguments = dict(
        objective=call["objective"], delta=call["delta"], weights=call["weights"],
        fix=spec.get("fixed"),
        bounds={k: tuple(v) for k, v in spec.get("bounds", {}).items()} or None,
        by=spec.get("by"), shared=spec.get("shared"), tune=call["tune"],
        tune_seeds=call["tune_seeds"], intervals=call["intervals"],
        bootstrap=call["bootstrap"], resamples=call["resamples"], seed=call["seed"],
        level=call["level"], constraints=call.get("constraints"),
    )  # fmt: skip
    return doc, label, g, form, arguments


def _check_saved_constants(doc: dict, label: str, refit) -> None:
    """Refuse a refit whose constants are not the saved ones."""
    from fitrules import __version__

    for name, value in doc["constants"].items():
        now = refit.constants.get(name)
        if now is None or value is None or not math.isclose(now, value, rel_tol=SAVED_FIT_RTOL,
                                                            abs_tol=1e-300):  # fmt: skip
            raise FitrulesError(
                f"{label}: the refit's {name} = {now!r} is not the saved {value!r} (saved by "
                f"fitrules {doc.get('fitrules_version')}, this is {__version__})"
            )


def _with_saved_values(doc: dict, label: str, refit):
    """``refit`` checked against the saved constants and then given the saved values
    themselves (a refit may differ in the last digits, e.g. with the number of threads), so
    that it predicts exactly what the saved fit did; its predictions made again."""
    _check_saved_constants(doc, label, refit)
    exact = doc["call"].get("constants_exact") or {}
    saved_values = {
        k: float.fromhex(exact[k]) if k in exact else float(doc["constants"][k])
        for k in refit.result.constants
    }
    refit.result = dataclasses.replace(refit.result, constants=saved_values)
    refit.predictions = [refit.predict(p["point"], p.get("runs")) for p in refit.predictions]
    return refit


def _saved_fit(source) -> tuple[dict, str]:
    """The saved fit's record and a label for messages; refused in one line when ``source``
    is not a file or text that ``FittedForm.to_json`` wrote."""
    import json

    if isinstance(source, str) and source.lstrip().startswith("{"):
        label, text = "the saved fit", source
    elif isinstance(source, str | Path):
        path = Path(source)
        label = str(source)
        if not path.is_file():
            raise FitrulesError(f"{label}: no such file (give the path to_json wrote)")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise FitrulesError(f"{label}: cannot be read ({err})") from None
    else:
        raise FitrulesError(f"source {source!r}: give the path of a saved fit or its JSON text")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise FitrulesError(f"{label}: not JSON ({err.msg}, line {err.lineno})") from None
    need = ("form", "constants", "data", "call")
    if not isinstance(doc, dict) or any(k not in doc for k in need):
        missing = [k for k in need if not isinstance(doc, dict) or k not in doc]
        raise FitrulesError(
            f"{label}: not a fit saved by FittedForm.to_json (no {', '.join(missing)}); "
            "a fit saved before fitrules recorded its arguments must be refitted"
        )
    return doc, label


def _check_fit_arguments(intervals, bootstrap, predict, resamples, seed, constraints) -> None:
    """The types and ranges of a fit's undeclared options, before the grid is read (the
    declared ones, objective, delta and level, are checked by ``FIT.check``)."""
    arg.text(bootstrap, "bootstrap")
    if constraints is not None and not (
        isinstance(constraints, str)
        or isinstance(constraints, Sequence) and all(isinstance(c, str) for c in constraints)
    ):
        raise FitrulesError(
            f"constraints {constraints!r}: give a text such as 'b > a' or a list of them"
        )
    if intervals or predict:
        arg.count(resamples, "resamples")
        arg.seed(seed)


def _prediction_points(predict, f: Form, g: Grid) -> list:
    """``predict`` as a list of points, each checked against the form and grid."""
    from fitrules.engine.intervals import resolve_point

    if predict is None:
        predict = ()
    if not isinstance(predict, str | dict | Sequence) or (
        not isinstance(predict, str | dict) and not all(isinstance(p, str | dict) for p in predict)
    ):
        raise FitrulesError(
            f"predict {predict!r}: give a point ('H=8,keep=0.25' or a dict) or a list of them"
        )
    points = [predict] if isinstance(predict, str | dict) else list(predict)
    for p in points:  # every point checked before any work
        resolve_point(p, f, g.derive, harness=g.harness)
    return points


def _fit_or_bootstrap(g, f, obj, cells, w, with_intervals, resamples, seed, level, kind,
                      weights):  # fmt: skip
    """The fit on every cell, and its bootstrap when intervals are asked for (whose first
    fit is the same); refused when no constants give a finite prediction everywhere."""
    from fitrules.engine.fit import fit as fit_cells
    from fitrules.engine.intervals import bootstrap_fit

    boot = None
    if with_intervals:
        boot = bootstrap_fit(g, f, obj, resamples, seed, level, kind=kind, weights=weights)
        result = boot.fit
    else:
        result = fit_cells(f, cells.X, cells.y, obj, weights=w)
    if not math.isfinite(result.objective):
        raise FitrulesError(
            f"form {f.name!r}: no values of its constants give a finite prediction at "
            f"every one of the {len(cells)} cells; {'; '.join(result.reasons)}"
        )
    return result, boot


def _jacobian_of(f, cells, w, result, obj, constraints=None):
    from fitrules.engine.fit import WEIGHT_KEY
    from fitrules.engine.intervals import jacobian_uncertainty

    if constraints:
        from fitrules.engine.profile import constrained_uncertainty

        return constrained_uncertainty(f, cells.X, cells.y, result.constants, obj, w,
                                       constraints)  # fmt: skip
    X = cells.X if w is None else {**cells.X, WEIGHT_KEY: w}
    return jacobian_uncertainty(f, X, cells.y, result.constants, obj)


def _constraints_of(constraints, f: Form, intervals, points):
    """The fit's constraints parsed against the bound form's free constants; refused with
    the bootstrap or predictions, whose refits do not keep them."""
    from fitrules.engine.constraints import parse_constraints

    cons = parse_constraints(constraints, f.constants, f.name)
    if cons and intervals not in (False, "profile"):
        shown = "bootstrap" if intervals is True else intervals
        raise FitrulesError(
            f"--intervals {shown} with --constraint: the bootstrap's refits do not keep "
            "constraints; use --intervals profile"
        )
    if cons and points:
        raise FitrulesError(
            "--predict with --constraint: the leave-one-cell-out refits of prediction "
            "intervals do not keep constraints; fit with them, then predict from the fit for "
            "the value and its standard error"
        )
    return cons


def _fit_data(g: Grid, f: Form, cells) -> dict:
    """What a fit records of its grid."""
    return {
        "path": g.label,
        "sha256": g.sha256,
        "runs": len(g.runs),
        "cells": len(cells),
        "where": list(g.where),
        "derive": list(g.derive),
        "metric": g.metric,
        "unit": g.unit,
        "excluded": g.summary()["excluded"],
        **g.handling(f.bound_variables),
    }


def _misfit_parts(g, f, cells, result, obj, level, w):
    """The leave-one-cell-out misfit of the fit, the effect the grid's seed ids share
    across cells (which the fit absorbed) and the fit's response to it."""
    from fitrules.engine.intervals import (
        NO_SHARED_IDS,
        heldout_fit,
        no_offset_reason,
        offset_response,
        seed_noise,
        seed_offset,
    )

    noise = seed_noise(g, f.bound_variables, obj)
    offset = seed_offset(g, cells, obj, noise)
    note = NO_SHARED_IDS if offset is not None else no_offset_reason(g, cells)
    heldout = heldout_fit(f, cells, result.constants, noise, obj, level, offset=offset,
                          offset_note=note)  # fmt: skip
    heldout.check()
    response = None
    if offset is not None:
        response = offset_response(
            f, cells.X, cells.y, result.constants, obj, offset.shares, offset.relative, w
        )
    return heldout, offset, response


@api_terms
def allocate(
    grid: GridLike | None, form: FormLike | FittedForm, *,
    cost: str = ALLOCATE.cost, budgets: str | float | Sequence[float] = ALLOCATE.budgets,
    intervals: str = ALLOCATE.intervals,
    objective: str = ALLOCATE.objective, delta: float = ALLOCATE.delta,
    weights: str = ALLOCATE.weights, fix: Fix = None, bounds: Bounds = None,
    resamples: int = ALLOCATE.resamples, level: float = ALLOCATE.level,
    seed: int = ALLOCATE.seed, bootstrap: str = ALLOCATE.bootstrap,
) -> Allocation:  # fmt: skip
    """The loss-optimal split of each budget between the two variables a cost names.

    Fits ``form`` (or takes a fit), then, for each budget C, finds the values of the cost's
    two variables that spend C with the lowest fitted loss: in closed form when the fit is
    ``E + A*x**-alpha + B*y**-beta``, numerically along the cost otherwise (see
    :mod:`fitrules.engine.allocation`).

    Parameters
    ----------
    grid : Grid, DataFrame, path or None
        The results table (``None``: the default grid, or with a fitted ``form``).
    form : str, Form or FittedForm
        A name, ``"NAME = EXPR"``, a :class:`Form`, or a :class:`FittedForm` (then ``grid``
        is None and the fitting options are not used).
    cost : str
        The cost of a run, a product of powers of two of the form's variables
        (``"6*N*D"``, the training compute of a language model).
    budgets : str, float or sequence of float
        Budgets of the cost: a number, a list, ``"1e20,1e21"`` or a log-spaced range
        ``"LOW:HIGH:COUNT"``.
    intervals : {"covariance", "bootstrap", "none"}
        ``"covariance"`` (the delta method on the fit's Jacobian covariance),
        ``"bootstrap"`` (percentiles over the fit's bootstrap refits: ``resamples``,
        ``seed``, ``bootstrap``) or ``"none"``. Both carry the constants' uncertainty only.
    objective : str
        The training objective, as for :func:`fit`.
    delta : float
        The Huber delta of ``log_huber``, as for :func:`fit`.
    weights : str
        How each cell counts in the fit, as for :func:`fit`.
    fix : dict or sequence of str, optional
        Constants held at a value, as for :func:`fit`.
    bounds : dict or sequence of str, optional
        Bounds of nonlinear constants, as for :func:`fit`.
    resamples : int
        Bootstrap refits (with ``intervals="bootstrap"``).
    level : float
        The intervals' level.
    seed : int
        The bootstrap's seed.
    bootstrap : str
        The bootstrap's kind, as for :func:`fit`.

    Returns
    -------
    Allocation
        ``.table`` (one row per budget), ``.exponents``, ``.plot_frontier()``, ``.to_json()``.

    Raises
    ------
    FitrulesError
        For a budget that is not positive, a cost that names a variable the form does not
        read or is not a product of powers, or a fitted loss that does not fall in both
        variables.

    Examples
    --------
    >>> law = "chin(N, D) = E + A/N**alpha + B/D**beta"
    >>> a = fr.allocate(g, law, budgets="1e20:1e24:5")  # doctest: +SKIP
    >>> a.exponents["N"]["value"], a.table[["budget", "N", "D"]]  # doctest: +SKIP
    """
    ALLOCATE.check(locals())
    from fitrules.jobs.allocate import parse_budgets, run
    from fitrules.jobs.fit import FittedForm

    parse_budgets(budgets)  # before any fit
    if isinstance(form, FittedForm):
        if grid is not None:
            raise FitrulesError("give the grid or a fitted form, not both (grid=None with a fit)")
        if intervals == "bootstrap" and form.bootstrap is None:
            raise FitrulesError(
                "intervals 'bootstrap' needs a fit with a bootstrap: fit with intervals=True, "
                "or use intervals='covariance'"
            )
        fitted = form
    else:
        fitted = fit(grid, form, objective=objective, delta=delta, weights=weights, fix=fix,
                     bounds=bounds, intervals=intervals == "bootstrap", resamples=resamples,
                     seed=seed, level=level, bootstrap=bootstrap)  # fmt: skip
    result = run(fitted, cost, budgets, intervals, level)
    return made_from(result, *getattr(fitted, "inputs", ()))


@api_terms
def ci(
    grid: GridLike | None = None,
    baseline: str | None = None,
    treatment: str | Sequence[str] | None = None,
    *,
    sweep: str | None = None,
    tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None,
    level: float = CI.level,
    resamples: int = CI.resamples,
    seed: int = CI.seed,
):
    """Paired-seed intervals of each treatment minus the baseline.

    With no ``grid``: the committed tuned paired grid, each arm's lr tuned on seeds 0, 1, 2,
    synchronous Adam against DiLoCo at H=16 (``fitrules ci`` with no arguments).

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    baseline : str, optional
        A selection, e.g. ``"algo=sync"``.
    treatment : str or sequence of str, optional
        One selection or several, e.g. ``"algo=diloco,H=16"``.
    sweep : str, optional
        Compare every level of this column against the baseline.
    tune : str or sequence of str, optional
        Tune these factors per arm first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    level : float, optional
        Level of the intervals (default 0.95).
    resamples : int, optional
        Bootstrap resamples (default 10,000).
    seed : int, optional
        Seed of the bootstrap (default 0).

    Returns
    -------
    PairedIntervals
        ``.results`` (one :class:`fitrules.engine.stats.PairedCI` per treatment), ``.table``,
        ``.plot(i)``, ``.report(dir)``, ``.to_json()``.

    Examples
    --------
    >>> fr.ci(g, baseline="algo=sync", treatment="algo=diloco,H=16", tune="lr")  # doctest: +SKIP
    """
    CI.check(locals())  # the declared options' types and ranges, first
    from fitrules.engine.stats import paired_ci, parse_selection, sweep_treatments
    from fitrules.jobs.ci import PairedIntervals

    arg.text(baseline, "baseline", none=True)
    arg.texts(treatment, "treatment")
    arg.text(sweep, "sweep", none=True)
    level, seed = arg.level(level), arg.seed(seed)
    resamples = arg.count(resamples, "resamples")
    if grid is None:
        from fitrules.model.grids import DEFAULT_PAIRED, DEFAULT_PAIRED_TUNE

        g = _load_grid(DEFAULT_PAIRED)
        if tune is None:
            tune, tune_seeds = list(DEFAULT_PAIRED_TUNE[0]), DEFAULT_PAIRED_TUNE[1]
        if baseline is None and not treatment and sweep is None:
            baseline, treatment = "algo=sync", ["algo=diloco,H=16,keep=1"]
    else:
        g = as_grid(grid)
    if baseline is None:
        raise FitrulesError("a baseline is required (--baseline SEL), e.g. 'algo=sync'")
    treatments = [treatment] if isinstance(treatment, str) else list(treatment or [])
    if not treatments and sweep is None:
        raise FitrulesError("give a treatment (--treatment SEL, repeatable) or a sweep COL")
    g, tuning = _tuned(g, tune, tune_seeds)
    base = parse_selection(baseline, "--baseline")
    sels = [parse_selection(t, "--treatment") for t in treatments]
    if sweep is not None:
        sels += sweep_treatments(g.runs, base, sweep)
    results = paired_ci(g.runs, g.metric, g.seed, base, sels, level, resamples, seed, g.unit)
    if tuning is not None:
        for r, sel in zip(results, sels, strict=True):
            r.tuned = _tuning_note(g, tuning, base, sel)
    data = {
        "path": g.label,
        "sha256": g.sha256,
        "runs": len(g.runs),
        "metric": g.metric,
        "unit": g.unit,
        "where": list(g.where),
        "excluded": g.summary()["excluded"],
        **g.handling(()),
    }
    settings = {"baseline": baseline, "level": level, "resamples": resamples, "seed": seed}
    out = PairedIntervals(results, data, settings, tuning)
    made_from(out, g)
    return out


@api_terms
def design(
    grid: GridLike | None = None, forms: FormLike | Sequence[FormLike] | None = None,
    budget: int = DESIGN.budget, tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None, *,
    candidates: str | None = None, target: str | None = None,
    seeds: int = DESIGN.seeds, max_seeds: int = DESIGN.max_seeds,
    power: float = DESIGN.power, alpha: float = DESIGN.alpha,
    splits: int = DESIGN.splits, resamples: int = DESIGN.resamples, seed: int = DESIGN.seed,
    objective: str = DESIGN.objective, delta: float = DESIGN.delta,
    fix: Fix = None, bounds: Bounds = None, by: str | None = None,
    shared: Sequence[str] | str | None = None,
):  # fmt: skip
    """Which runs to do next: rank candidate cells and choose a batch under ``budget``.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    forms : str, Form or sequence of str or Form, optional
        Two or more rival forms (names, ``"NAME = EXPR"`` or :class:`Form`), or one form with
        ``target=``.
    budget : int, optional
        Runs to spend (default 24).
    tune : str or sequence of str, optional
        Reduce the grid by tuning these factors first (see :func:`tune`); the batch then runs
        at every tuned level.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    candidates : str, optional
        The cells to consider, e.g. ``"H=2,8,32;keep=1/32"`` (default: the grid's levels and
        geometric midpoints, minus the cells already run).
    target : str, optional
        With one form: the cell whose prediction the batch should pin down.
    seeds : int, optional
        Seeds per chosen cell, at least (default 3).
    max_seeds : int, optional
        Seeds per chosen cell, at most (default 12).
    power : float, optional
        The power for the seeds a cell needs (default 0.8).
    alpha : float, optional
        The two-sided level for the seeds a cell needs (default 0.05).
    splits : int, optional
        Random-split refits (default 100).
    resamples : int, optional
        Seed-bootstrap refits (default 100).
    seed : int, optional
        Seed of the splits and the bootstrap (default 0).
    objective : {"rel_ls", "log_huber", "abs_ls"}, optional
        The training objective: relative least squares (default), Huber on the log, or
        absolute least squares.
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).
    fix : dict of str to float or sequence of str, optional
        Constants held at a value, applied to every form, as for :func:`fit`.
    bounds : dict of str to (float, float) or sequence of str, optional
        Bounds of nonlinear constants, applied to every form, as for :func:`fit`.
    by : str, optional
        Fit each form per level of this column, jointly, as for :func:`fit`.
    shared : sequence of str or str, optional
        The constants common to all groups of ``by``, as for :func:`fit`.

    Returns
    -------
    fitrules.jobs.design.Design
        ``candidates`` and ``chosen`` tables, ``spec`` (the batch as a simulate spec, or
        None with ``no_spec_reason``), ``tuning``, ``to_dict()``.

    Examples
    --------
    >>> import fitrules as fr
    >>> d = fr.design(forms=["composition", "additive"], budget=12)  # doctest: +SKIP
    >>> d.chosen[["H", "omega", "seeds"]]  # doctest: +SKIP
    """
    DESIGN.check(locals())  # the declared options' types and ranges, first
    from fitrules.jobs.design import batch_spec, no_spec_reason
    from fitrules.jobs.design import design as run_design

    budget = arg.count(budget, "budget")
    seeds, max_seeds, splits, resamples = (
        arg.count(v, n)
        for v, n in ((seeds, "seeds"), (max_seeds, "max_seeds"), (splits, "splits"),
                     (resamples, "resamples"))
    )  # fmt: skip
    seed = arg.seed(seed)
    power, alpha = arg.real(power, "power", 0.0, 1.0), arg.real(alpha, "alpha", 0.0, 1.0)
    arg.text(candidates, "candidates", none=True)
    arg.text(target, "target", none=True)
    g, tuning = _tuned(as_grid(grid), tune, tune_seeds)
    chosen = _customised(as_forms(forms), fix, bounds, by, shared)
    d = run_design(g, chosen, candidates, budget, seeds, max_seeds, power, alpha, splits,
                   resamples, seed, target, objective=objective, delta=delta)  # fmt: skip
    tuned = None if tuning is None else dict(tuning.describe()["levels"])
    d.tuning = tuning
    d.spec = batch_spec(d, g, tuned)
    d.no_spec_reason = no_spec_reason(d, g, tuned) if d.spec is None else None
    if tuned and len(d.chosen):
        per = math.prod(len(v) for v in tuned.values())
        d.notes.append(
            f"the grid is tuned: each chosen cell runs at every level of "
            f"{', '.join(tuned)} ({per} levels), {per * int(d.chosen['runs'].sum())} runs in "
            "all, and score tunes the new runs the same way"
        )
    return made_from(d, g)


@api_terms
def search(
    grid: GridLike | None = None, *,
    # the grammar
    variables: Sequence[str] | str | None = None, terms: int | None = None,
    max_constants: int | None = None, max_nonlinear: int | None = None,
    interactions: int | None = None, factors: Sequence[str] | str | None = None,
    levels: Sequence[str] | str | None = None, tie_exponents: bool | None = None,
    first_constants: int | None = None, grammar: str | Path | Any | None = None,
    # nested validation
    split: str = SEARCH.split, splits: int = SEARCH.splits, train_frac: float = SEARCH.train_frac,
    inner_splits: int = SEARCH.inner_splits, inner_train_frac: float = SEARCH.inner_train_frac,
    seed: int = SEARCH.seed, rule: str = SEARCH.rule, seeds: str = SEARCH.seeds,
    heldout_weights: str = SEARCH.heldout_weights,
    references: FormLike | Sequence[FormLike] | None = None,
    at: str | dict | Sequence[str | dict] | None = None,
    # the fit and the guard
    objective: str = SEARCH.objective, delta: float = SEARCH.delta,
    guard_span: float = SEARCH.guard_span, guard_se: float = SEARCH.guard_se,
    guard_excursion: float = SEARCH.guard_excursion,
    metric_range: tuple[float, float] | None = None,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    # how it runs
    jobs: int | None = SEARCH.jobs, scheduler: str | None = None, screen: int | str = SEARCH.screen,
    yes: bool = False, on_plan: Callable | None = None,
    on_progress: Callable[[int], None] | None = None, progress: bool | None = None,
):  # fmt: skip
    """Propose forms from a grammar and choose among them by nested validation.

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    variables : sequence of str or str, optional
        Grid columns the forms may read (default: every varying numeric factor).
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    terms : int, optional
        Largest number of terms besides the intercept (default 3).
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    max_constants : int, optional
        Largest number of constants of a form, intercept included (default 7): the ceiling the
        budget grows to.
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    max_nonlinear : int, optional
        Largest number of nonlinear constants (default 3).
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    interactions : int, optional
        Largest number of variables in one product term (default: 2 for one or two variables,
        else 1).
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    factors : sequence of str or str, optional
        The factor kinds used (see the module's table).
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    levels : sequence of str or str, optional
        Columns whose per-level intercept ``L0[COL]`` is also proposed.
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    tie_exponents : bool, optional
        Also propose each set of terms with one exponent shared by its power factors.
        The grammar (see :mod:`fitrules.engine.grammar`); replaces the value of ``grammar``.
    first_constants : int, optional
        The budget searched first (default 4); it grows one constant at a time while the front
        still falls, to ``max_constants`` (default 7), and the output says where it stopped
        and why (``settings["growth"]``).
    grammar : Grammar, str or path, optional
        A :class:`fitrules.engine.grammar.Grammar`, or the path of a TOML file of its fields.
    split : str, optional
        The outer protocol: ``random`` (default: ``splits`` splits fitting ``train_frac`` of
        the cells, seeded by ``seed``), ``extrapolate:COL[:VALUE]`` (several columns at once:
        ``extrapolate:N:4.2e9,D:6e11``, fit below every cut, score at or above any) or
        ``leave-one-level-out:COL``.
    splits : int, optional
        Number of outer random splits (default 20).
    train_frac : float, optional
        Fraction of cells fitted per outer random split (default 0.8).
    inner_splits : int, optional
        The outer training set's random splits that rank forms (default 10).
    inner_train_frac : float, optional
        Fraction of the outer training cells fitted per inner split (default 0.75).
    seed : int, optional
        Seed of the outer and inner splits (default 0).
    rule : {"one-se", "best"}, optional
        ``one-se`` (default: the fewest constants within one s.e. of the best) or ``best``.
    seeds : {"cells-and-seeds", "cells"}, optional
        The outer error's protocol: ``cells-and-seeds`` (default: a third of the seed ids held
        out too, so that it is what new runs at new seed ids show) or ``cells``; see
        :func:`fitrules.jobs.search.run_search`.
    heldout_weights : {"box", "equal"}, optional
        ``"box"`` (default) or ``"equal"``: how a split's held-out cells count in its error, as
        for :func:`compare`; the outer error is then an estimate of the pick's mean error over
        configurations spread across the grid's range.
    references : str, Form or sequence of str or Form, optional
        Forms fitted on the same outer splits without selection (default: the built-in ones
        whose variables the grid has; ``[]``: none).
    at : str, dict or sequence of str or dict, optional
        Points where the pick will be used (``"N=1e10,D=2e11"``, a dict, or a list): the pick's
        fit on all cells goes through the wild-extrapolation guard there, and a pick the guard
        names is shown with its warning.
    objective : {"rel_ls", "log_huber", "abs_ls"}, optional
        The training objective: relative least squares (default), Huber on the log, or
        absolute least squares.
    delta : float, optional
        The Huber threshold of ``log_huber`` (default 1e-3).
    guard_span : float, optional
        Threshold of the wild-extrapolation guard (see :mod:`fitrules.engine.guard`).
    guard_se : float, optional
        Threshold of the wild-extrapolation guard.
    guard_excursion : float, optional
        Threshold of the wild-extrapolation guard.
    metric_range : (float, float), optional
        The plausible range of the metric, for the wild-extrapolation guard.
    tune : str or sequence of str, optional
        Tune these factors first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    jobs : int, optional
        Worker processes (default: the machine's cores, at most 8; 1 with a ``scheduler``);
        results do not depend on it.
    scheduler : str, optional
        Run the fits on a Dask cluster (the same result): a scheduler address
        (``tcp://host:8786``) or ``local:N`` (N local processes); needs
        ``fitrules[distributed]``.
    screen : int or "auto", optional
        A staged search: every candidate is screened on 2 inner splits of each outer split, and
        the ``screen`` best of each number of constants get the full nested fits; 0: every
        candidate in full; ``"auto"`` (default): 25 above 2,000 candidates, else 0 (see
        :func:`fitrules.jobs.search.survivors`).
    yes : bool, optional
        Run a search estimated to take longer than
        :data:`fitrules.base.limits.SEARCH_TIME_BUDGET_SECONDS` (else refused before any fit,
        naming what would shrink it); the candidate and memory limits hold either way.
    on_plan : callable, optional
        Called with the plan and the seconds the fits should take (again before each step of a
        growing budget, with that step's plan).
    on_progress : callable, optional
        Called with the number of candidates finished (2 x candidates in all: each is screened
        for twins, then scored; a staged search then reports each survivor of its screen once
        more, as its full nested fits finish); with it no bar is drawn.
    progress : bool, optional
        A progress bar counting the plan's fits, so that its rate and ETA hold through the
        cheap and the costly phases (tqdm's widget in a notebook, where it is the default;
        ``True`` elsewhere draws a text bar on stderr, ``False`` none); a growing budget's
        steps add to its total as they are planned.

    Returns
    -------
    fitrules.jobs.search.Search
        ``budgets``, ``candidates``, ``choices``, ``references`` (DataFrames), ``chosen``
        (a Form), ``forms_toml()``, ``plot_front()``, ``report(dir)``, ``to_json()``.

    Raises
    ------
    FitrulesError
        For a bad grammar, a column the grid lacks, splits that cannot be made, or an
        argument of the wrong type or range.
    LimitError
        For a search beyond the limits (see ``yes``).

    Examples
    --------
    >>> import fitrules as fr  # doctest: +SKIP
    >>> s = fr.search(terms=2, max_constants=4, splits=10)  # doctest: +SKIP
    >>> s.budgets[["max_constants", "outer_median_pct", "final_choice"]]  # doctest: +SKIP
    """
    from fitrules.jobs.search import run_search

    SEARCH.check(locals())  # the declared options' types and ranges, before any reading
    gram = _search_grammar(grammar, variables, terms, max_constants, max_nonlinear,
                           interactions, factors, levels, tie_exponents,
                           first_constants)  # fmt: skip
    outer, inner, inner_fraction = _search_splits(split, splits, train_frac, seed, inner_splits,
                                                  inner_train_frac)  # fmt: skip
    obj, guard = _objective_and_guard(objective, delta, guard_span, guard_se, metric_range,
                                      guard_excursion)  # fmt: skip
    jobs = search_jobs(jobs, scheduler)
    g, _ = _tuned(as_grid(grid), tune, tune_seeds)
    from fitrules.base.util import in_notebook

    shown = on_progress is None and (progress or (progress is None and in_notebook()))
    with search_progress(bool(shown), on_plan, on_progress) as (plan, step):
        result = run_search(g, gram, outer, inner_splits=inner, inner_train_frac=inner_fraction,
                            seed=seed, objective=obj, rule=rule, guard=guard,
                            references=_search_references(references, gram, g),
                            jobs=jobs, on_plan=plan, on_progress=step,
                            seeds=arg.text(seeds, "seeds"), yes=yes, at=_search_points(at),
                            screen=_screen(screen), heldout_weights=heldout_weights,
                            scheduler=_scheduler(scheduler, jobs))  # fmt: skip
    made_from(result, g, Path(grammar) if isinstance(grammar, str | Path) else None)
    return result


@contextlib.contextmanager
def search_progress(shown: bool, on_plan: Callable | None, on_progress: Callable | None):
    """The callbacks a search reports to: the caller's, and a bar counting the plan's fits
    when ``shown`` (opened at the first plan, its total grown by each later step's).

    The search reports each candidate twice (its probe fits, then its nested fits or, in a
    staged search, its screen) and, staged, each survivor of the screen once more (its full
    nested fits). Their costs differ tenfold and more, so the bar counts fits, each report
    weighted by the plan's fits for that phase (:class:`fitrules.jobs.search.Plan`): a bar in
    candidates ran ahead through the cheap phases and then stood still at its end, and its
    ETA said 35 s with 156 s to go (issue 44)."""
    from fitrules.base.util import progress

    if not shown:
        yield on_plan, on_progress
        return
    state: dict = {"phases": []}  # [reports left, fits each] of the current step, in order
    with contextlib.ExitStack() as bars:

        def open_bar(total) -> None:  # after the plan's line: a bar drawn first leaves "0it"
            if "bar" not in state:
                state["bar"] = bars.enter_context(
                    progress(total, desc="searching", enabled=True, unit="fit")
                )

        def plan(p, seconds) -> None:
            if on_plan is not None:
                on_plan(p, seconds)
            bar = state.get("bar")
            left = sum(n * c for n, c in state["phases"])  # the last step's unused phases
            phases = search_phases(p)
            state["phases"] = [list(x) for x in phases]
            add = float(sum(n * c for n, c in phases))
            if bar is not None and bar.total is not None:  # a growing budget's step
                bar.total += add - left
                bar.refresh()
            open_bar(add)

        def step(k: int) -> None:
            open_bar(None)
            fits, left = 0.0, k
            while left > 0 and state["phases"]:
                phase = state["phases"][0]
                take = min(left, phase[0])
                fits += take * phase[1]
                phase[0] -= take
                left -= take
                if phase[0] == 0:
                    state["phases"].pop(0)
            state["bar"].update(fits)
            if on_progress is not None:
                on_progress(k)

        yield plan, step
        bar = state.get("bar")
        if bar is not None and bar.total is not None:  # survivors fewer than the most
            bar.total = bar.n
            bar.refresh()


def search_phases(p) -> list[tuple[int, int]]:
    """A search step's reports and the fits each stands for, in the order they come: the
    probe fits of every candidate, then its nested fits (or, staged, its screen), then the
    full nested fits of the screen's survivors (at most ``p.survivors_max``)."""
    n, probes = p.n_candidates, 3  # two probe fits and the rank check
    if not p.screen_keep:
        return [(n, probes), (n, p.fits_per_candidate)]
    return [(n, probes), (n, max(p.screen_fits - probes, 1)),
            (p.survivors_max, p.fits_per_candidate)]  # fmt: skip


def _search_grammar(grammar, variables, terms, max_constants, max_nonlinear, interactions,
                    factors, levels, tie_exponents=None, first_constants=None):  # fmt: skip
    """The grammar of a search: ``grammar`` (a Grammar, a TOML path or None) with each field
    given replacing its value."""
    from fitrules.engine.grammar import Grammar, load_grammar

    given: dict[str, Any] = dict(
        variables=_names(variables, "variables"),
        terms=None if terms is None else arg.count(terms, "terms"),
        max_constants=None if max_constants is None else arg.count(max_constants, "max_constants"),
        max_nonlinear=None
        if max_nonlinear is None
        else arg.count(max_nonlinear, "max_nonlinear", 0),
        interactions=None if interactions is None else arg.count(interactions, "interactions"),
        factors=_names(factors, "factors"),
        levels=_names(levels, "levels"),
        tie_exponents=None if tie_exponents is None else arg.flag(tie_exponents, "tie_exponents"),
        first_constants=None
        if first_constants is None
        else arg.count(first_constants, "first_constants"),
    )
    if grammar is None:
        return Grammar(**{k: v for k, v in given.items() if v is not None})
    elif isinstance(grammar, Grammar):
        return dataclasses.replace(grammar, **{k: v for k, v in given.items() if v is not None})
    elif isinstance(grammar, str | Path):
        return load_grammar(grammar, **given)
    raise FitrulesError(f"grammar {grammar!r}: give a fitrules.Grammar or a TOML path")


def _search_splits(split: str, splits, train_frac, seed, inner_splits, inner_train_frac):
    """The outer protocol of a search (random, extrapolate or leave-one-level-out) and its
    inner random splits, checked."""
    from fitrules.model.splits import parse_protocol

    arg.text(split, "split")
    kind = split.partition(":")[0].strip()
    if kind not in ("random", "extrapolate", "leave-one-level-out"):
        raise SplitError(
            f"split {split!r}: the outer protocol is random, extrapolate:COL[:VALUE] or "
            "leave-one-level-out:COL"
        )
    outer = parse_protocol(
        split,
        arg.count(splits, "splits"),
        arg.real(train_frac, "train_frac", 0.0, 1.0),
        arg.seed(seed),
    )
    # the final choice makes twice as many inner splits of all cells
    inner_splits = arg.count(inner_splits, "--inner-splits", 2, MAX_SPLITS // 2)
    return outer, inner_splits, arg.real(inner_train_frac, "inner_train_frac", 0.0, 1.0)


def _search_references(references, gram, g: Grid) -> list[Form]:
    """The forms fitted beside the search without selection (default: the built-in ones
    whose variables the search has)."""
    from fitrules.jobs.search import DEFAULT_REFERENCES
    from fitrules.model.forms import BUILTIN_FORMS

    if references is None:
        names = set(gram.variables or _search_variables(g))
        return [
            BUILTIN_FORMS[n]
            for n in DEFAULT_REFERENCES
            if set(BUILTIN_FORMS[n].variables or ()) <= names
        ]
    elif isinstance(references, Sequence) and not isinstance(references, str) and not references:
        return []
    else:
        return as_forms(references)


def search_jobs(jobs: int | None, scheduler: str | None = None) -> int:
    """The worker processes of a search: ``jobs``, or by default the machine's cores (at
    most 8), or 1 when a scheduler runs the fits."""
    import os

    if jobs is None:
        return 1 if scheduler is not None else max(1, min(os.cpu_count() or 1, 8))
    return arg.count(jobs, "jobs", 1, MAX_SIM_JOBS)


def _scheduler(scheduler, jobs: int) -> str | None:
    """``scheduler``: None, or an address or ``local:N``, not given with ``jobs`` > 1."""
    if scheduler is None:
        return None
    from fitrules.sim.cluster import parse_scheduler

    parse_scheduler(arg.text(scheduler, "scheduler"))  # refuses a malformed one
    if jobs != 1:
        raise FitrulesError(
            f"--jobs {jobs} with --scheduler {scheduler}: give one of them; on a cluster the "
            "workers are its processes"
        )
    return scheduler


def _screen(screen) -> int | str:
    """``screen``: ``"auto"`` or a whole number >= 0."""
    if isinstance(screen, str):
        if screen == "auto":
            return screen
        raise FitrulesError(f"screen {screen!r}: give a whole number >= 0 (0: no screen) or 'auto'")
    return arg.count(screen, "screen", 0)


def _search_points(at) -> list[dict[str, float]]:
    """``at`` as a list of points (variable -> value), each parsed as ``--at`` is."""
    from fitrules.engine.intervals import parse_point

    if at is None:
        return []
    items = [at] if isinstance(at, str | dict) else at
    if not isinstance(items, Sequence) or isinstance(items, bytes):
        raise FitrulesError(
            f"at {at!r}: give a point ('N=1e10,D=2e11' or a dict) or a list of them"
        )
    out = []
    for p in items:
        if isinstance(p, str):
            out.append(parse_point(p, "--at"))
        elif isinstance(p, dict) and p:
            out.append({str(k): arg.real(v, f"at {k}") for k, v in p.items()})
        else:
            raise FitrulesError(f"at {p!r}: a point is 'N=1e10,D=2e11' or a dict of numbers")
    return out


def _search_variables(g: Grid) -> list[str]:
    from fitrules.jobs.search import default_variables

    return default_variables(g)


def _names(value, name: str) -> tuple[str, ...] | None:
    """None, or names from a list or a comma-separated string."""
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return arg.texts(value, name)


def _tuning_note(grid: Grid, tuning, base: dict, sel: dict) -> str:
    """'both arms tuned: lr from {...}, chosen on seeds 0, 1, 2 (sync 0.003, ...); ...'"""
    from fitrules.engine.stats import _match, label

    def chosen(s: dict) -> str:
        rows = grid.runs[_match(grid.runs, s, "selection")]
        return "; ".join(
            f"{f} {', '.join(f'{v:g}' for v in sorted(rows[f'tuned_{f}'].unique()))}"
            for f in tuning.factors
        )

    d = tuning.describe()
    levels = "; ".join(
        f"{k} from {{{', '.join(f'{v:g}' for v in vs)}}}" for k, vs in d["levels"].items()
    )
    if tuning.scheme == "tune seeds":
        seeds = (
            f"chosen per arm on seeds {', '.join(map(str, d['tune_seeds']))}; the interval "
            f"uses only seeds {', '.join(map(str, d['evaluation_seeds']))}"
        )
    else:
        seeds = "cross-fitted: each seed's value at the level the other half of the seeds chose"
    return (
        f"both arms tuned: {levels}, {seeds} ({label(base)}: {chosen(base)}; "
        f"{label(sel)}: {chosen(sel)})"
    )
