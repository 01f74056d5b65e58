"""fr.search: forms proposed from a grammar, chosen among by nested validation."""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, SplitError, api_terms, param
from fitrules.base.limits import MAX_SIM_JOBS, MAX_SPLITS
from fitrules.base.results import made_from
from fitrules.jobs.inputs import (
    FormLike,
    GridLike,
    a_number,
    as_forms,
    as_grid,
    objective_and_guard,
    tune_first,
)
from fitrules.jobs.options import SEARCH
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.model.forms import Form
from fitrules.model.grids import Grid


@api_terms
@shared_params
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
    {grid}
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
    {objective}
    {delta}
    {guard_span}
    {guard_se}
    {guard_excursion}
    {metric_range}
    {tune}
    {tune_seeds}
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
        naming what would shrink it); the candidate and memory limits hold either way. The
        candidates and the time are counted for every step the budget may grow to, up to
        ``max_constants``, before the first runs.
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

    settings = _settings(locals())  # every option checked, before any reading

    g, _ = tune_first(as_grid(grid), tune, tune_seeds)
    gram = settings.pop("gram")
    with search_progress(_bar_shown(on_progress, progress), on_plan, on_progress) as (plan, step):
        result = run_search(g, gram, settings.pop("outer"), seed=seed, rule=rule, yes=yes,
                            references=_search_references(references, gram, g),
                            references_given=references is not None, on_plan=plan,
                            on_progress=step, heldout_weights=heldout_weights,
                            **settings)  # fmt: skip
    made_from(result, g, Path(grammar) if isinstance(grammar, str | Path) else None)
    return result


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.search's arguments) gives before any grid is read: the
    command line calls this before it takes its outputs, fr.search first."""
    _settings(values)


def _settings(values: Mapping[str, Any]) -> dict:
    """The search's settings made from fr.search's arguments, each refused in one line: the
    workers (first, in the command line's words, when a number or None), the declared checks,
    then the grammar, the protocols, the objective and guard, the points and the screen."""
    v = {o.name: o.value for o in SEARCH.python} | dict(values)
    if v["jobs"] is None or isinstance(v["jobs"], numbers.Integral) and a_number(v["jobs"]):
        search_jobs(v["jobs"], v["scheduler"])
    SEARCH.check(v)
    gram = _search_grammar(v["grammar"], *(v[k] for k in GRAMMAR_FIELDS))
    outer, inner, inner_fraction = _search_splits(*(v[k] for k in SPLIT_OPTIONS))
    obj, guard = objective_and_guard(*(v[k] for k in GUARD_OPTIONS))
    jobs = search_jobs(v["jobs"], v["scheduler"])
    return dict(gram=gram, outer=outer, inner_splits=inner, inner_train_frac=inner_fraction,
                objective=obj, guard=guard, jobs=jobs, seeds=arg.text(v["seeds"], "seeds"),
                at=_search_points(v["at"]), screen=_screen(v["screen"]),
                scheduler=_scheduler(v["scheduler"], jobs))  # fmt: skip


# the arguments of _search_grammar, _search_splits and objective_and_guard, in order
GRAMMAR_FIELDS = ("variables", "terms", "max_constants", "max_nonlinear", "interactions",
                  "factors", "levels", "tie_exponents", "first_constants")  # fmt: skip
SPLIT_OPTIONS = ("split", "splits", "train_frac", "seed", "inner_splits", "inner_train_frac")
GUARD_OPTIONS = ("objective", "delta", "guard_span", "guard_se", "metric_range",
                 "guard_excursion")  # fmt: skip


def _bar_shown(on_progress, progress) -> bool:
    """Whether a search draws its own bar: not with a caller's callback; when asked, or by
    default in a notebook."""
    from fitrules.base.util import in_notebook

    return bool(on_progress is None and (progress or (progress is None and in_notebook())))


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
    if not shown:
        yield on_plan, on_progress
        return
    with contextlib.ExitStack() as bars:
        bar = _FitsBar(bars, on_plan, on_progress)
        yield bar.plan, bar.step
        bar.close()


class _FitsBar:
    """A bar counting a search's fits, opened at its first plan (after the plan's line: a bar
    drawn first leaves "0it"), its total grown by each later step's plan; the caller's
    callbacks are called too."""

    def __init__(self, bars: contextlib.ExitStack, on_plan, on_progress) -> None:
        self.bars, self.on_plan, self.on_progress = bars, on_plan, on_progress
        self.bar: Any = None
        self.phases: list[list[int]] = []  # [reports left, fits each] of the step, in order

    def open(self, total) -> None:
        from fitrules.base.util import progress

        if self.bar is None:
            self.bar = self.bars.enter_context(
                progress(total, desc="searching", enabled=True, unit="fit")
            )

    def plan(self, p, seconds) -> None:
        if self.on_plan is not None:
            self.on_plan(p, seconds)
        left = sum(n * c for n, c in self.phases)  # the last step's unused phases
        phases = search_phases(p)
        self.phases = [list(x) for x in phases]
        add = float(sum(n * c for n, c in phases))
        if self.bar is not None and self.bar.total is not None:  # a growing budget's step
            self.bar.total += add - left
            self.bar.refresh()
        self.open(add)

    def step(self, k: int) -> None:
        self.open(None)
        fits, left = 0.0, k
        while left > 0 and self.phases:
            phase = self.phases[0]
            take = min(left, phase[0])
            fits += take * phase[1]
            phase[0] -= take
            left -= take
            if phase[0] == 0:
                self.phases.pop(0)
        self.bar.update(fits)
        if self.on_progress is not None:
            self.on_progress(k)

    def close(self) -> None:
        if self.bar is not None and self.bar.total is not None:  # survivors fewer than the most
            self.bar.total = self.bar.n
            self.bar.refresh()


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
    inner_splits = arg.count(inner_splits, param("inner_splits"), 2, MAX_SPLITS // 2)
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
            f"{param('jobs')} {jobs} with {param('scheduler')} {scheduler}: give one of them; on "
            "a cluster the "
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
            # flag words: Python reads --at as `predict` (param('at') would say at)
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
