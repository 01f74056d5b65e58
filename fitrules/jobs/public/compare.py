"""fr.compare: every form fitted on the same splits of a grid's cells, their held-out errors
compared."""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.error_metrics import ErrorMetric
from fitrules.base.errors import FitrulesError, FormError, SplitError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    Bounds,
    Fix,
    FormLike,
    GridLike,
    a_number,
    as_forms,
    as_grid,
    check_customising,
    check_objective,
    objective_and_guard,
)
from fitrules.jobs.options import COMPARE, RANDOM_SPLITS
from fitrules.jobs.public.fit import grid_and_forms
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.model.grids import Grid


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
        # flag words: a note naming both faces' words
        f"forms.toml defines {', '.join(extra)}, not compared here: name "
        f"{'it' if len(extra) == 1 else 'them'} with --forms (forms= in Python) to include "
        f"{'it' if len(extra) == 1 else 'them'}"
    ]


@api_terms
@shared_params
def compare(
    grid: GridLike | None = None, forms: FormLike | Sequence[FormLike] | None = None,
    splits: int | Any | None = None, *,
    # the splits
    split: str = COMPARE.split, train_frac: float = COMPARE.train_frac, seed: int = COMPARE.seed,
    seeds: str = COMPARE.seeds, test_grid: GridLike | None = None,
    heldout_weights: str = COMPARE.heldout_weights,
    error_metric: str | ErrorMetric = COMPARE.error_metric,
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
    {grid}
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
    error_metric : str or ErrorMetric, optional
        What a held-out cell's error is: ``"relative"`` (default: the absolute relative error,
        in %), ``"absolute"`` (the absolute error, in the grid's value units), another name of
        :data:`fitrules.base.error_metrics.ERROR_METRICS`, or an
        :class:`~fitrules.base.error_metrics.ErrorMetric` of your own. The result records it
        (:attr:`Comparison.error_metric`) and every error it holds is in its unit.
    {objective}
    {delta}
    weights : {"cells", "runs", "inverse-variance"}, optional
        How each cell counts in the fit: once (default), by its runs, or by one over its
        squared standard error. See :func:`fit`.
    {fix}
    {bounds}
    {by}
    shared : sequence of str or str, optional
        The constants common to all groups of ``by`` (names, or ``"b,c"``); see :func:`fit`.
    {tune}
    {tune_seeds}
    {guard_span}
    {guard_se}
    {guard_excursion}
    {metric_range}
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
    >>> c.summary[["form", "median"]]  # doctest: +SKIP
    """
    check(locals())
    g, tuning, chosen = grid_and_forms(grid, forms, tune, tune_seeds, fix, bounds, by, shared)
    splitter, test = _splitter(splits, split, train_frac, seed, g, test_grid)
    obj, guard = objective_and_guard(objective, delta, guard_span, guard_se, metric_range,
                                     guard_excursion)  # fmt: skip
    with _compare_progress(progress, on_progress, splitter, chosen, train_frac,
                           verdict_train_frac) as step:  # fmt: skip
        cmp = _compared(g, chosen, splitter, obj, keep_degenerate,
                        on_progress=step, test_grid=test, guard=guard, level=level,
                        pairs=_family(chosen, pairs, against),
                        verdict_train_frac=verdict_train_frac, weights=weights, seeds=seeds,
                        heldout_weights=heldout_weights, metric=error_metric)  # fmt: skip
    return _finished(cmp, g, test, tuning, chosen, splitter)


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.compare's arguments) gives before any grid is read: the
    command line calls this before it takes its outputs (``split`` the list of its
    protocols, ``fit_data`` its --fit-data), fr.compare first. The command line's checks come
    first (a value of the wrong type is left to the declared checks), so that a value two
    checks refuse is refused in its words."""
    from fitrules.jobs.compare import check_verdict_train_frac, parse_pairs
    from fitrules.model.splits import Transfer

    v = {o.name: o.value for o in COMPARE.python} | dict(values)
    protocols = v["split"] if isinstance(v["split"], list) else [v["split"]]
    named = all(isinstance(p, str) for p in protocols)
    n = v["splits"]
    if a_number(n) and named and not any(p.strip() == "random" for p in protocols):
        raise SplitError(
            f"{param('splits')} {n} applies to random splits only; "
            f"{', '.join(protocols)} make their own (one per held-out group)"
        )
    transfer = isinstance(n, Transfer) or named and any(p.strip() == "transfer" for p in protocols)
    if not transfer and (v.get("fit_data") is not None or v["test_grid"] is not None):
        raise SplitError(
            # flag words: Python reads --fit-data as `grid` (param('fit_data') says fit_data)
            f"--fit-data and {param('test_grid')} are used only with {param('split')} transfer"
        )
    check_objective(v["objective"], v["delta"])
    check_customising(v["fix"], v["bounds"], v["by"], v["shared"])
    _check_guard(v)
    _check_protocols(v, protocols if named else [])
    if a_number(v["verdict_train_frac"]):
        check_verdict_train_frac(v["verdict_train_frac"])
    parse_pairs(_pairs_text(v["pairs"]), v["against"], [f.name for f in as_forms(v["forms"])])
    if transfer and v["tune"]:
        raise FitrulesError(
            f"{param('tune')} with {param('split')} transfer is not supported: tune each grid"
        )
    for protocol in protocols:
        COMPARE.check(v | {"split": protocol})
    arg.text(v["seeds"], "seeds")


def random_splits(splits: int | None) -> int:
    """The number of random splits: ``splits``, or by default :data:`RANDOM_SPLITS`."""
    return RANDOM_SPLITS if splits is None else splits


def _check_guard(v: dict) -> None:
    """The wild-extrapolation guard's thresholds, when they are numbers."""
    from fitrules.engine.guard import GuardOptions

    span, se, excursion, metric_range = (v[k] for k in GUARD_OPTIONS)
    given = metric_range is None or (
        isinstance(metric_range, tuple | list) and len(metric_range) == 2
        and all(a_number(x) for x in metric_range)
    )  # fmt: skip
    if given and all(a_number(x) for x in (span, se, excursion)):
        GuardOptions(span, se, metric_range and tuple(metric_range), excursion)


GUARD_OPTIONS = ("guard_span", "guard_se", "guard_excursion", "metric_range")


def _check_protocols(v: dict, protocols: list[str]) -> None:
    """Each protocol made once (a splitter checks its settings as it is made); a transfer
    needs both grids (the command line's --fit-data and --test-data; fr.compare's
    ``test_grid``)."""
    from fitrules.model.splits import parse_protocol

    n, frac, seed = v["splits"], v["train_frac"], v["seed"]
    if not (n is None or a_number(n)) or not a_number(frac) or not a_number(seed):
        return
    both = v.get("fit_data", "grid") is not None and v["test_grid"] is not None
    labels = (str(v.get("fit_data", "grid")), str(v["test_grid"])) if both else None
    for protocol in protocols:
        # 0 is left to the count's own check (in _splitter), in its words
        parse_protocol(protocol, random_splits(n or None), frac, seed, labels)


def _splitter(splits, split: str, train_frac, seed, g: Grid, test_grid):
    """The splitter compare asks for (a count of random splits, a protocol or a splitter)
    and, for transfer, the grid scored (which must measure what ``g`` does)."""
    from fitrules.model.splits import Transfer, parse_protocol

    test = None
    if splits is None or isinstance(splits, numbers.Real):
        splits = random_splits(None if splits is None else arg.count(splits, "splits"))
        labels = None
        if split.partition(":")[0].strip() == "transfer":
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
    if test is not None:
        _check_same_metric(g, test)
    return splitter, test


def _compared(*args, **kwargs):
    """The job's runner, :func:`fitrules.jobs.compare.compare` (imported when first run)."""
    from fitrules.jobs.compare import compare as compare_splits

    return compare_splits(*args, **kwargs)


def _family(chosen, pairs, against):
    """The pairs of forms the verdicts test."""
    from fitrules.jobs.compare import parse_pairs

    return parse_pairs(_pairs_text(pairs), against, [f.name for f in chosen])


def _finished(cmp, g, test, tuning, chosen, splitter):
    """The comparison with its tuning, inputs, the forms of forms.toml left out and, for
    structured splits, their number."""
    from fitrules.model.splits import RandomSplit

    cmp.tuning = tuning
    made_from(cmp, g, test)
    cmp.warnings.extend(_left_out([f.name for f in chosen]))
    if not isinstance(splitter, RandomSplit):
        cmp.settings.setdefault("n_splits", len(cmp.results["split"].unique()))
    return cmp


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
            f"be scored on {scored.metric!r}; give both grids the same metric ({param('metric')})"
        )
