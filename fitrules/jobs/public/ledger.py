"""fr.predict, fr.score and fr.verify_ledger: a prediction recorded before its runs, scored
after them, and the ledger's chain checked."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    Bounds,
    Fix,
    FormLike,
    GridLike,
    as_grid,
    check_customising,
    check_objective,
    tune_first,
)
from fitrules.jobs.options import PREDICT
from fitrules.jobs.public.fit import check_runs, fit, saved_call, with_saved_values
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.jobs.saved_fit import read_saved_fit


def _check_saved_fit_use(saved_fit, form, **fitting) -> None:
    """A prediction from a saved fit takes its form and fit options from it: refuse a form
    or a fitting option given beside it (it would be silently ignored), or neither."""
    if saved_fit is None:
        if form is None:
            raise FitrulesError(
                # flag words: Python reads --form as `forms` (param('form') would say form)
                f"give the form predicted with --form, or a saved fit with {param('saved_fit')}"
            )
        return
    if form is not None:
        raise FitrulesError(
            # flag words: Python reads --form as `forms` (param('form') would say form)
            f"{param('saved_fit')} FILE gives the form and its fit: give --form or "
            f"{param('saved_fit')}, not both"
        )
    defaults = {"objective": PREDICT.objective, "delta": PREDICT.delta,
                "weights": PREDICT.weights}  # fmt: skip
    given = [k for k, v in fitting.items() if v != defaults.get(k) and v not in (None, (), [])]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise FitrulesError(
            # flag words: Python reads --form as `forms` (param('form') would say form)
            f"{param('saved_fit')} FILE gives the fit's options: {flags} would be ignored; leave "
            "them out, or fit again with --form"
        )


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.predict's arguments) gives before anything is read or
    written: the command line calls this before it reads its grid, fr.predict first, the
    command line's checks first."""
    from fitrules.engine.intervals import check_bootstrap_options, parse_point

    v = {o.name: o.value for o in PREDICT.python} | dict(values)
    tolerance = v["tolerance"]
    if tolerance is not None and not (
        isinstance(tolerance, numbers.Real) and math.isfinite(tolerance) and float(tolerance) > 0
    ):
        raise FitrulesError(
            f"{param('tolerance')} {tolerance}: must be a positive, finite percentage"
        )
    check_objective(v["objective"], v["delta"])
    check_customising(v["fix"], v["bounds"], v["by"], v["shared"])
    check_bootstrap_options(v["resamples"], v["seed"], v["level"])
    # flag words: Python reads --at as `predict` (param('at') would say at)
    parse_point(arg.text(point_text(v["at"]), "at"), "--at")
    check_runs(v["runs"])
    if v["ledger"] is None and tolerance is not None:
        raise FitrulesError(
            f"{param('tolerance')} {tolerance} would be ignored: a tolerance is recorded in "
            f"the ledger; give {param('ledger')} too, or leave it out"
        )
    PREDICT.check(v)
    _check_saved_fit_use(v["saved_fit"], v["form"], **{k: v[k] for k in SAVED_FIT_GIVES})


# what a saved fit gives, which a prediction from it refuses beside it
SAVED_FIT_GIVES = ("objective", "delta", "weights", "fix", "bounds", "by", "shared", "tune",
                   "tune_seeds", "seed_sd", "seed_pool")  # fmt: skip


def point_text(at):
    """``{"H": 8, "keep": 0.25}`` -> ``"H=8,keep=0.25"``; anything else as it is."""
    if isinstance(at, Mapping):
        return ",".join(f"{k}={v!r}" for k, v in at.items())
    return at


@api_terms
@shared_params
def predict(
    grid: GridLike | None, form: FormLike | None, at: str | Mapping[str, float], *,
    ledger: str | Path | None = None, saved_fit: str | Path | None = None,
    runs: int | None = None, tolerance: float | None = None,
    objective: str = PREDICT.objective, delta: float = PREDICT.delta,
    weights: str = PREDICT.weights, fix: Fix = None, bounds: Bounds = None,
    by: str | None = None, shared: Sequence[str] | str | None = None,
    bootstrap: str = PREDICT.bootstrap, resamples: int = PREDICT.resamples,
    seed: int = PREDICT.seed, level: float = PREDICT.level,
    tune: str | Sequence[str] | None = None, tune_seeds: Sequence[int] | str | None = None,
    seed_sd: float | None = None, seed_pool: str | Sequence[str] | None = None,
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
    {grid}
    form : str, Form or None
        A form's name, a ``"NAME = EXPR"`` line or a :class:`Form`; None with ``saved_fit``.
    at : str or dict of str to float
        The configuration predicted, ``"H=8,keep=0.25"`` or ``{"H": 8, "keep": 0.25}``.
    ledger : str or path, optional
        The ledger file (created if absent). Without it nothing is written and the
        :class:`~fitrules.jobs.fit.Prediction` is returned: the same value, interval and
        extrapolation words.
    saved_fit : str or path, optional
        A fit saved by :meth:`FittedForm.to_json` (``fitrules fit --json``): the prediction
        is made with its form and fit options on the data it was made from (checked, as
        :func:`load_fit` does; ``grid`` gives the data when it is not at the recorded path),
        in place of ``form`` and the fitting options, which are then refused. Without a
        ledger and without ``grid`` the saved fit alone predicts (no data read, no refit).
    runs : int, optional
        The number of new runs whose mean will be measured (default: the configuration's
        mean).
    tolerance : float, optional
        The relative error (percent) the prediction commits to, if any.
    {objective}
    {delta}
    weights : {"cells", "runs", "inverse-variance"}, optional
        How each cell counts in the fit: once (default), by its runs, or by one over its
        squared standard error.
    {fix}
    {bounds}
    {by}
    shared : sequence of str or str, optional
        The constants common to all groups of ``by`` (names, or ``"b,c"``).
    bootstrap : {"studentized", "auto", "seeds", "residuals"}, optional
        The bootstrap of the intervals (default ``"studentized"``).
    {resamples}
    {seed}
    {level}
    {tune}
    {tune_seeds}
    seed_sd : float, optional
        One seed id's shared effect as an sd relative to the value, known from outside the
        grid, as :func:`fit` takes it (recorded in the ledger).
    seed_pool : str or sequence of str, optional
        Filters naming other slices of the grid's file whose seed variance is pooled with
        the grid's, as :func:`fit` takes them (recorded in the ledger).
    command : str, optional
        What made the record, kept in it (default ``"fr.predict"``).

    Returns
    -------
    fitrules.jobs.ledger.LedgerEntry or Prediction
        ``.record`` (as appended, with its id and hashes), ``.head`` (keep it elsewhere),
        ``.fitted``; ``print(e)`` says what was recorded. Without a ledger, the
        prediction (:meth:`FittedForm.predict`).

    Raises
    ------
    FitrulesError
        For a bad option (named), a ledger that was tampered with or cannot be written, a
        point that gives no value of a variable, or a ``saved_fit`` that :func:`load_fit`
        would refuse (a ``SavedFitError`` naming the file, before anything is written);
        ``seed_sd`` or ``seed_pool`` as :func:`fit` refuses them (a sd that is not a
        positive number, no seed id shared across cells, a slice whose seed noise differs),
        or given beside ``saved_fit`` (which records its own).

    Examples
    --------
    >>> e = fr.predict(None, "composition", "H=8,keep=0.25", ledger="l.jsonl")  # doctest: +SKIP
    >>> e.record["interval"]  # doctest: +SKIP
    """
    check(locals())
    fitting = {k: v for k, v in locals().items() if k in FIT_OPTIONS}
    if ledger is None:
        return _prediction(grid, saved_fit, form, point_text(at), runs, fitting)
    return _recorded(grid, saved_fit, form, point_text(at), arg.path(ledger, "ledger"), runs,
                     tolerance, command, fitting)  # fmt: skip


def _recorded(grid, saved_fit, form, at: str, ledger_path: Path, runs, tolerance, command,
              fitting: dict):  # fmt: skip
    """The prediction at ``at`` appended to the ledger at ``ledger_path``: its LedgerEntry."""
    from fitrules.jobs.ledger import LedgerEntry, append_prediction, prediction_record
    from fitrules.views.text import table_notes

    saved = None if saved_fit is None else read_saved_fit(arg.path(saved_fit, "saved_fit"))
    call = None if saved is None else saved_call(saved, grid)
    g = _beside_ledger(as_grid(grid if call is None else call[0]), ledger_path)
    g, fitted, used = _predicted(g, saved, call, form, at, runs, fitting)
    record = prediction_record(fitted, g, objective=used["objective"], level=used["level"],
                               resamples=used["resamples"], runs=runs, tolerance=tolerance,
                               command=command or "fr.predict")  # fmt: skip
    rec = append_prediction(ledger_path, record)
    return made_from(LedgerEntry(ledger_path, rec, table_notes(fitted.data), fitted), g,
                     ledger_path)  # fmt: skip


# the options of fr.fit a prediction passes on
FIT_OPTIONS = ("objective", "delta", "weights", "fix", "bounds", "by", "shared", "bootstrap",
               "resamples", "seed", "level", "tune", "tune_seeds", "seed_sd",
               "seed_pool")  # fmt: skip


def _beside_ledger(g, ledger_path: Path):
    """``g``, once the ledger is known to be neither its table (a JSON-lines table would take
    the record as a run) nor tampered with or unwritable."""
    from fitrules.base.outputs import check_distinct
    from fitrules.jobs.ledger import check_ledger_target

    table = g.input_file
    check_distinct([(param("ledger"), ledger_path)], [Path(table)] if table is not None else [])
    check_ledger_target(ledger_path)
    return g


def _prediction(grid, saved_fit, form, at: str, runs, fitting: dict):
    """The prediction at ``at`` with no ledger: from the saved fit alone (or checked on
    ``grid`` when given), else from ``form`` fitted on ``grid``."""
    from fitrules.jobs.public.fit import load_fit
    from fitrules.model.forms import resolve_form

    if saved_fit is not None:
        fitted = load_fit(arg.path(saved_fit, "saved_fit"), grid)
    else:
        form = resolve_form(form) if isinstance(form, str) else form
        tune, tune_seeds = fitting.pop("tune"), fitting.pop("tune_seeds")
        g, _ = tune_first(as_grid(grid), tune, tune_seeds)
        fitted = fit(g, form, **fitting)
    return fitted.predict(at, runs)


def _predicted(g, saved, call, form, at: str, runs, fitting: dict):
    """The grid (tuned), the fit predicting ``at`` and the options it was made with: the
    saved fit's (``call``, made again on its data) or ``fitting``'s."""
    from fitrules.model.forms import resolve_form

    if saved is not None:
        _, form, kw = call
        kw = {**kw, "intervals": False}  # the prediction's own interval is made below
        return g, with_saved_values(saved, fit(g, form, predict=[at], runs=runs, **kw)), kw
    form = resolve_form(form) if isinstance(form, str) else form
    tune, tune_seeds = fitting.pop("tune"), fitting.pop("tune_seeds")
    g, _ = tune_first(g, tune, tune_seeds)
    return g, fit(g, form, predict=[at], runs=runs, **fitting), fitting


@api_terms
@shared_params
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
    {ledger}
    head : str, optional
        The head printed when the last prediction was written (``N:HASH``, or the hash alone):
        a ledger that lost or rewrote a record up to it is refused.
    {tune}
    {tune_seeds}

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
    check_score(locals())
    from fitrules.jobs.ledger import score as run_score

    ledger_path = arg.path(ledger, "ledger")
    g, _ = tune_first(as_grid(grid), tune, tune_seeds)
    return made_from(run_score(ledger_path, g, head=head), g, ledger_path)


def check_score(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.score's arguments) gives before the table is read: no
    table, a malformed head, or a ledger that is missing, malformed or does not hold the
    head (the ledger is read here). The command line calls this before it takes its
    outputs, fr.score first."""
    from fitrules.jobs.ledger import parse_head, read_ledger, verify_head

    if "grid" in values and values["grid"] is None:
        raise FitrulesError(f"score needs {param('grid')}: the results table with the new runs")
    ledger = arg.path(values["ledger"], "ledger")
    head = arg.text(values.get("head"), "head", none=True)
    parsed = parse_head(head) if head is not None else None
    records = read_ledger(ledger, must_exist=True)
    if parsed is not None:
        verify_head(ledger, records, parsed)


@api_terms
@shared_params
def verify_ledger(ledger: str | Path, head: str | None = None):
    """Check a ledger's hash chain: what ``fitrules ledger verify`` does.

    Parameters
    ----------
    {ledger}
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
