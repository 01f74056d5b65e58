"""A search's plan: its cost counted from the grammar and options before any candidate is
made (pilot fits, memory), and the limits it is held to."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fitrules.base.errors import LimitError
from fitrules.base.limits import MAX_SEARCH_CANDIDATES, SEARCH_TIME_BUDGET_SECONDS, check_memory
from fitrules.engine.fit import FitOptions, Objective, fit_memory
from fitrules.engine.grammar import Grammar, count_candidates, pilot_candidate
from fitrules.engine.guard import GuardOptions
from fitrules.jobs.search.hopeless import (
    HOPELESS_SHARE,
    PRESCREEN_KEEP,
    PRESCREEN_UNION,
    prunes,
    training_rms,
)
from fitrules.jobs.search.protocol import NestedMasks, _shape, asks_inside, nested_masks
from fitrules.jobs.search.scoring import score_form
from fitrules.jobs.search.staging import SCREEN_SPLITS, screen_size
from fitrules.model.splits import RandomSplit


@dataclass
class Plan:
    """What a search will do, known from the grammar and the options before any candidate is
    made or fitted: shown to the user with an estimate, and checked against the limits.

    Attributes
    ----------
    n_generated : candidates the grammar proposes.
    n_candidates : those with fewer constants than the fewest cells a nested mask fits, and
        the reference forms that compete beside them (:attr:`n_references`).
    fits_per_candidate : nested masks each candidate is fitted on.
    n_cells : cells of the grid.
    by_nonlinear : fittable candidates by number of nonlinear constants.
    seconds : estimated CPU seconds of the fits in one process (from pilot fits on a few
        masks, timed in CPU seconds, so that a loaded machine does not inflate them): the
        training fits of every candidate, and :attr:`share` of its nested fits.
    memory : estimated bytes at the peak in this process.
    min_train : the fewest cells a nested mask fits.
    worker_memory : estimated bytes each worker process holds beside it (its copy of the
        candidates and masks, and its largest fit); see :func:`search_memory`.
    nested : estimated CPU seconds of the linear forms' nested fits were every row fitted
        (those pruning can shrink).
    share : the share of :attr:`nested` counted in :attr:`seconds` (rows whose training fit
        is not hopeless: an assumption before any fit, the measured share after a step).
    """

    n_generated: int
    n_candidates: int
    fits_per_candidate: int
    n_cells: int
    by_nonlinear: dict[int, int]
    seconds: float = 0.0
    memory: float = 0.0
    min_train: int = 0
    screen_keep: int = 0  # a staged search: survivors per outer split and constants
    screen_fits: int = 0  # fits of every candidate in the screen
    survivors_max: int = 0  # the most candidates the full nested fits can take
    worker_memory: float = 0.0
    # a growing budget's further steps: (constants, candidates, estimated seconds in one
    # process), each run only while the front still falls
    growth: list[tuple[int, int, float]] = field(default_factory=list)
    step: int | None = None  # a growing budget's step: the constants of its candidates
    n_references: int = 0  # reference forms competing beside the grammar's (in n_candidates)
    # the nested fits' seconds were every row fitted, and the share of them counted in seconds
    # (rows whose training fit is not hopeless: jobs.search.hopeless)
    nested: float = 0.0
    share: float = 1.0

    def with_share(self, share: float) -> Plan:
        """This plan with ``share`` of its nested fits counted (one measured so far)."""
        return replace(self, seconds=self.seconds + (share - self.share) * self.nested,
                       share=share)  # fmt: skip

    @property
    def more_candidates(self) -> int:
        """Candidates of the further steps of a growing budget (:attr:`growth`)."""
        return sum(n for _, n, _ in self.growth)

    def wall(self, jobs: int) -> float:
        """Estimated seconds of this plan's fits on ``jobs`` processes."""
        return self.seconds / max(1, min(jobs, max(self.n_candidates, 1)))

    def more_wall(self, jobs: int) -> float:
        """Estimated seconds of the further steps' fits on ``jobs`` processes."""
        return sum(t for _, _, t in self.growth) / max(1, jobs)


SEARCH_WORKER_BYTES = 120 * 2**20
# flag words: a benchmark's command line
"""Bytes of one local cluster worker process of a search before its tasks: a simulation's
worker (:data:`~fitrules.sim.cluster.LOCAL_WORKER_BYTES`, 100 MiB) plus the fitting stack it
imports. ``python benchmarks/bench_cluster_memory.py --job search`` (2-core AMD EPYC VM)
measured the cluster's peak RSS at 1.40x and 1.32x this estimate at local:2 and local:8, and
its USS (shared libraries not counted) at 0.92x and 0.85x; with 100 MiB the RSS ratios were
1.61 and 1.55."""


def search_memory(plan: Plan, jobs: int, scheduler: str | None = None) -> tuple[float, str]:
    """Bytes a search takes on this machine at once, and on what: this process's
    :attr:`Plan.memory`; with ``jobs`` above 1, that many forked pool processes each holding
    :attr:`Plan.worker_memory`; under ``local:N``, N worker processes each of
    :data:`SEARCH_WORKER_BYTES` before any task, plus that; a remote
    cluster's workers are not on this machine."""
    if scheduler:
        from fitrules.sim.cluster import check_scheduler

        target = check_scheduler(scheduler)
        if isinstance(target, int):
            per = SEARCH_WORKER_BYTES + plan.worker_memory
            return plan.memory + target * per, f"on a local cluster of {target} worker process(es)"
        return plan.memory, "in this process (the cluster's workers are elsewhere)"
    if jobs > 1:
        return plan.memory + jobs * plan.worker_memory, f"on {jobs} processes"
    return plan.memory, "in one process"


# bytes of one made candidate (its Form, parsed structure and key), generously: tracemalloc
# on the default grammar over H and omega (1,380 forms) measured 4.2 kB each kept, 7.6 kB at
# the peak of making them
CANDIDATE_BYTES = 16_000
PILOT_MASKS = (2, 8)  # pilot fits time each cost on this many masks: a fixed part and a slope
# each pilot timed this many times, the least kept: on a loaded machine a process's CPU
# seconds still vary with what shares its core (caches), never below what it needs
PILOT_REPEATS = 2


def _pilot_seconds(form, X, y, n_train, objective, options, guard) -> tuple[float, float]:
    """(fixed, per mask) CPU seconds of fitting ``form`` on masks of ``n_train`` cells:
    timed on a few random masks (the pilots' results are not used)."""
    n = len(y)
    times = []
    for m in PILOT_MASKS:
        sp = RandomSplit(m, min(max(n_train / n, 1e-9), 1 - 1e-9), 0)
        train = sp.masks(n)
        pilot = NestedMasks(train, ~train, 0, 0, [])
        best = np.inf
        for _ in range(PILOT_REPEATS):
            t0 = time.process_time()  # CPU seconds: what others run beside it does not count
            score_form(form, X, y, pilot, objective, options, guard)
            best = min(best, time.process_time() - t0)
        times.append(best)
    (m1, m2), (t1, t2) = PILOT_MASKS, times
    slope = max(t2 - t1, 0.0) / (m2 - m1)
    slope = max(slope, t2 / m2 / 4)  # noise cannot make the cost of a mask vanish
    return max(t1 - slope * m1, 0.0), slope


def _training_seconds(form, X, y, n_sets: int, n_train: int, objective, options) -> float:
    """CPU seconds of one candidate's training fits on ``n_sets`` sets (jobs.search.hopeless;
    a form with exponents on the grid of ``options``, as a prescreen fits it)."""
    n, m = len(y), min(max(n_sets, 2), 64)  # timed on 64 sets at most, scaled to n_sets
    sets = RandomSplit(m, min(max(n_train / n, 1e-9), 1 - 1e-9), 0).masks(n)
    times = []
    for _ in range(2):  # the first call compiles the form as well
        t0 = time.process_time()
        training_rms(form, X, y, sets, objective, options if form.structure.nonlinear else None)
        times.append(time.process_time() - t0)
    return min(times) * max(n_sets, 2) / m


def plan_search(
    grammar: Grammar,
    cells_X: dict,
    y: np.ndarray,
    table: pd.DataFrame,
    level_counts: dict[str, int],
    outer,
    inner_splits: int,
    inner_train_frac: float,
    objective: Objective,
    options: FitOptions,
    guard: GuardOptions,
    variables: Sequence[str],
    screen: int | str = 0,
    only_constants: int | None = None,
    pilots: dict | None = None,
    before: int = 0,
) -> Plan:
    """The cost of a search from its grammar and options alone: candidates counted (not
    made), nested masks counted (not made), each kind of fit timed by pilots on a few masks.
    A staged search (``screen``, see :func:`screen_size`) is costed with every candidate on
    the screen's rows and, for the full nested fits, the most survivors there can be (the
    ``screen`` best of each number of constants in each outer split and the final choice).
    ``only_constants``: the candidates of that many constants alone (a step of a growing
    budget, :attr:`Grammar.first_constants`). ``pilots``: the pilot timings by number of
    nonlinear constants, filled and reused across the calls of one search. ``before``: the
    candidates of the steps before this one, which ``screen="auto"`` counts too.
    """
    n = len(y)
    n_outer, min_train, inner_train = _shape(outer, table, inner_splits, inner_train_frac)
    if asks_inside(outer, table, inner_splits):
        rows = len(nested_masks(outer, table, inner_splits, inner_train_frac, 0).train)
    else:
        rows = n_outer + n_outer * inner_splits + 2 * inner_splits + 1
    cols = {v: cells_X[v] for v in variables}
    counts = count_candidates(grammar, cols, level_counts, only_constants)
    n_generated = sum(counts.values())
    by_q: dict[int, int] = {}
    for (k, q), c in counts.items():
        if k < min_train:
            by_q[q] = by_q.get(q, 0) + c
    n_fit = sum(by_q.values())
    keep = screen_size(screen, before + n_fit)
    classes = len({k for (k, q) in counts if k < min_train})
    survivors_max = min(n_fit, (n_outer + 1) * keep * classes) if keep else n_fit
    n_screen = n_outer * min(SCREEN_SPLITS, inner_splits) + SCREEN_SPLITS if keep else 0
    # a staged search that prunes prescreens each kind (constants, exponents): it fits about
    # PRESCREEN_UNION x PRESCREEN_KEEP of them (an assumption before any fit)
    prune = prunes(outer, objective)
    prescreen = bool(keep) and prune
    full, screened, fitting, training = 0.0, 0.0, 0.0, 0.0
    linear_full, linear_screened, n_fitted = 0.0, 0.0, 0.0
    if n_generated <= MAX_SEARCH_CANDIDATES:  # beyond it the count alone refuses
        pilots = {} if pilots is None else pilots
        for (k, q), c in sorted(counts.items()):
            if k >= min_train:
                continue
            if q not in pilots:
                pilot = pilot_candidate(grammar, cols, q)
                if pilot is None:
                    pilots[q] = None
                else:
                    form = pilot.form.bind(list(cols))
                    pilots[q] = (
                        *_pilot_seconds(form, cols, y, inner_train, objective, options, guard),
                        fit_memory(form, n, rows, options, inner_train),
                        _training_seconds(form, cols, y, n_outer + 1, min_train, objective,
                                          options),  # fmt: skip
                    )
            if pilots[q] is None:
                continue
            fixed, per, memory_q, train_q = pilots[q]
            fitted = min(c, PRESCREEN_UNION * PRESCREEN_KEEP) if prescreen else c
            n_fitted += fitted
            # the nested fits, the two probe fits and the rank check (about one mask each)
            full += fitted * (fixed + per * (rows + 3))
            screened += fitted * (fixed + per * (n_screen + 3))
            if prescreen or (prune and q == 0):
                training += c * train_q
            if prune and q == 0 and not prescreen:  # linear forms pruned
                linear_full += c * (fixed + per * (rows + 3))
                linear_screened += c * (fixed + per * (n_screen + 3))
            fitting = max(fitting, memory_q)

    def nested_of(sc: float, fu: float) -> float:
        return sc + fu * min(survivors_max, n_fitted) / max(n_fitted, 1) if keep else fu

    nested = nested_of(linear_screened, linear_full)  # what pruning can shrink
    rest = nested_of(screened, full) - nested
    share = HOPELESS_SHARE if prune and not prescreen else 1.0
    memory = (
        n_generated * CANDIDATE_BYTES  # the candidates made
        + 2.0 * rows * n  # the nested masks (train and test)
        + n_fit * rows * 9.0  # each candidate's errors and flags
        + fitting
    )
    # a worker's copy of the state (the candidates to fit, the masks) and its largest fit
    worker = n_fit * CANDIDATE_BYTES + 2.0 * rows * n + fitting
    return Plan(
        n_generated, n_fit, rows, n, by_q, training + rest + share * nested, memory, min_train,
        keep,
        n_screen + 3 if keep else 0, survivors_max, worker, step=only_constants, nested=nested,
        share=share,
    )  # fmt: skip


def check_plan(
    plan: Plan, jobs: int, yes: bool, shrink: dict[str, str], scheduler: str | None = None
) -> None:
    """Refuse a search beyond the limits, naming what would shrink it: more candidates
    than :data:`~fitrules.base.limits.MAX_SEARCH_CANDIDATES`, more memory than the budget, or
    (unless ``yes``) an estimated time above
    :data:`~fitrules.base.limits.SEARCH_TIME_BUDGET_SECONDS`. The candidates and the time
    are those of the whole plan: every further step of a growing budget (:attr:`Plan.growth`)
    counts, since the plan line announces them and the search may take each one (issue 61:
    checked one step at a time, a grammar of 767,539 candidates ran unconfirmed). The memory
    is the first step's; each further step is checked again before it runs.

    Raises
    ------
    LimitError
    """
    from fitrules.views.search import estimate_text

    hint = ", ".join(f"{k} {v}" for k, v in shrink.items())
    # flag words: also a search's growth stop (growth.py), a text Python shows as it is
    split_options = ("--splits", "--inner-splits")
    # the whole plan holds every budget up to max_constants, whatever the first step's: a
    # lower first_constants shrinks that step's memory, not the plan's candidates or time
    first = "--first-constants"  # flag words: as above
    grammar_hint = ", ".join(
        f"{k} {v}" for k, v in shrink.items() if k not in split_options and k != first
    )
    whole_hint = ", ".join(f"{k} {v}" for k, v in shrink.items() if k != first)
    what = (
        f"search of {plan.n_generated:,} candidates x {plan.fits_per_candidate:,} nested fits "
        f"on {plan.n_cells:,} cells"
    )
    whole, upto = what, ""
    if plan.growth:
        upto = f" up to {plan.growth[-1][0]} constants"
        whole += (
            f", growing{upto} while the front keeps falling ({plan.more_candidates:,} more "
            "candidates),"
        )
    if plan.n_generated + plan.more_candidates > MAX_SEARCH_CANDIDATES:
        raise LimitError(
            f"the grammar proposes {plan.n_generated + plan.more_candidates:,} candidates"
            f"{upto}, more than the {MAX_SEARCH_CANDIDATES:,} a search makes; lower "
            f"{grammar_hint}"
        )
    memory, where = search_memory(plan, jobs, scheduler)
    reduce = [f"lower {hint}"] if hint else []
    if memory > plan.memory:
        # flag words: also a search's growth stop (growth.py), a text Python shows as it is
        reduce.append("use fewer --jobs or a smaller local:N")
    check_memory(memory, f"{what} {where}", ", or ".join(reduce))
    wall = plan.wall(jobs) + plan.more_wall(jobs)
    if wall > SEARCH_TIME_BUDGET_SECONDS and not yes:
        p = "process" if jobs == 1 else "processes"
        raise LimitError(
            f"{whole} would take about {estimate_text(wall)} on {jobs} {p}, more than the "
            f"{estimate_text(SEARCH_TIME_BUDGET_SECONDS)} a search runs unconfirmed; lower "
            # flag words: also a search's growth stop (growth.py), a text Python shows as it is
            f"{whole_hint}, or pass --yes to run it anyway"
        )


def _shrink_options(grammar: Grammar, outer, inner_splits: int, variables) -> dict[str, str]:
    """The options that make a search smaller, with their values now."""
    out = {}
    for name in ("terms", "first_constants", "max_constants", "max_nonlinear", "interactions"):
        out[f"--{name.replace('_', '-')}"] = f"({getattr(grammar, name)})"
    if isinstance(outer, RandomSplit):
        # flag words: the words of a search's growth stop too (growth.py), which Python shows
        out["--splits"] = f"({outer.n_splits:,})"
    out["--inner-splits"] = f"({inner_splits:,})"  # flag words: as above
    out["--variables"] = f"({len(variables)})"  # flag words: as above
    out["--factors"] = f"({len(grammar.factors)})"  # flag words: as above
    return out
