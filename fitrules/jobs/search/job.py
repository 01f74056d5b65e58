"""The search job's entry: :func:`run_search` checks the inputs, plans, stages and fits the
candidates, grows the budget, and assembles the result."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace

import numpy as np

from fitrules.base.errors import FitrulesError, SplitError, param
from fitrules.engine.fit import FitOptions, Objective
from fitrules.engine.grammar import Candidate, Grammar, count_candidates, generate, named
from fitrules.engine.guard import TURN_STEP, GuardOptions
from fitrules.engine.metrics import box_weights
from fitrules.jobs.options import RULES, SEARCH
from fitrules.jobs.search.abstention import abstention
from fitrules.jobs.search.growth import _growth_stop, _merged, _step_refusal, _step_row
from fitrules.jobs.search.hopeless import HOPELESS_RATIO, prunes
from fitrules.jobs.search.inputs import _checked_inputs, _SearchSpec
from fitrules.jobs.search.pick_guard import guard_pick, pick_guard_warning
from fitrules.jobs.search.plan import Plan, _shrink_options, check_plan, plan_search
from fitrules.jobs.search.protocol import (
    _PROBES,
    NestedMasks,
    _inner_text,
    _seed_holdout,
    _sub_seed,
    _turn_column,
    asks_inside,
    nested_masks,
    question_protocol,
)
from fitrules.jobs.search.result import Search
from fitrules.jobs.search.scoring import SEARCH_FIT_OPTIONS, _score
from fitrules.jobs.search.staging import _fit_candidates, _Fitted, _KeptPrints
from fitrules.jobs.search.tables import _assemble
from fitrules.jobs.search.workers import _check_reachable, _connect
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid


def run_search(
    grid: Grid,
    grammar: Grammar,
    outer,
    *,
    inner_splits: int = SEARCH.inner_splits,
    inner_train_frac: float = SEARCH.inner_train_frac,
    seed: int = 0,
    objective: Objective | None = None,
    rule: str = SEARCH.rule,
    references: Sequence[Form] = (),
    guard: GuardOptions | None = None,
    jobs: int = 1,
    options: FitOptions | None = None,
    on_plan: Callable[[Plan, float | None], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    yes: bool = False,
    seeds: str = SEARCH.seeds,
    at: Sequence[dict[str, float]] = (),
    screen: int | str = SEARCH.screen,
    scheduler: str | None = None,
    heldout_weights: str = SEARCH.heldout_weights,
    references_given: bool = True,
) -> Search:
    """Nested validation of every candidate of ``grammar`` on ``grid``; see the package.

    ``heldout_weights``: how a split's held-out cells count in its error, outer and inner
    alike: ``box`` (default, by their share of the grid's box: the outer error then estimates
    the error over configurations spread across the grid's range) or ``equal``
    (:func:`fitrules.engine.metrics.box_weights`).

    ``screen``: a staged search keeps, after a screen on the first
    :data:`SCREEN_SPLITS` inner splits of each outer split (and of the final choice), the
    ``screen`` best candidates of each number of constants there for the full nested fits;
    0 fits every candidate in full; ``auto`` (default) stages above :data:`SCREEN_ABOVE`
    candidates (:func:`survivors`).

    ``scheduler``: run the fits on a Dask cluster (an address, or ``local:N`` for a local
    cluster of N processes; see :func:`fitrules.sim.cluster.connect`) instead of ``jobs``
    local processes; the result is the same.

    ``references_given``: whether ``references`` are the user's own forms (not a default
    set): when the search abstains they are then fitted on all cells and recommended
    (:mod:`fitrules.jobs.search.abstention`).

    ``at``: points (variable -> value, every variable of the search) where the pick will be
    used; its fit on all cells goes through the wild-extrapolation guard there. Its fits on
    the outer training sets go through it at every cell either way (:func:`guard_pick`).

    ``seeds``: the outer protocol's held-out error. ``cells-and-seeds`` (the default) holds
    out a third of the seed ids as well as the outer test cells when seed ids are shared
    across cells (:class:`fitrules.model.splits.SeedHoldout`): the outer fits read the kept
    ids' runs (the inner splits that rank the candidates every run of the outer training
    cells, as the choice from all cells does), the outer error the held-out ids' runs of the
    outer test cells, put on the scale of the mean of as many new runs at fresh seed ids as
    a cell of the grid has; without shared ids it is the cells protocol. ``cells``: today's,
    every run of the training and held-out cells (it misses the grid's seed offset, which
    new runs at new seed ids show).

    ``outer`` is a splitter of :mod:`fitrules.model.splits`. Before any candidate is made the
    search's cost is counted from the grammar and options (:func:`plan_search`) and checked
    (:func:`check_plan`, for the first step and every step the budget may grow to: a search
    estimated above the time budget runs only with ``yes``);
    ``on_plan(plan, seconds)`` is then called with the estimated seconds of the fits on
    ``jobs`` processes; ``on_progress(k)`` after each ``k`` candidates done (first while
    pruning, then while fitting: ``2 x`` the candidates in all; a staged search then reports
    each survivor of its screen once more, as its full nested fits finish).
    """
    t_start = time.perf_counter()
    objective = objective or Objective()
    guard = guard or GuardOptions()
    options = options or SEARCH_FIT_OPTIONS
    if rule not in RULES:
        raise FitrulesError(f"{param('rule')} {rule!r} is unknown; allowed: {', '.join(RULES)}")
    spec = _SearchSpec(
        grid, grammar, question_protocol(outer), objective, guard, options, inner_splits,
        inner_train_frac, seed, rule,
    )  # fmt: skip
    variables, cells, counts, refs = _checked_inputs(spec, at, references)
    grammar = grammar.for_variables(len(variables))  # its default interactions resolved
    X, y = cells.X, cells.y
    cols = {v: X[v] for v in variables}
    spec = replace(spec, grammar=grammar, heldout=box_weights(cols, heldout_weights),
                   heldout_weights=heldout_weights)  # fmt: skip
    first = grammar.first_step()
    pilots: dict = {}  # the pilot fits' timings, shared by every step's plan
    plan = plan_search(
        first, X, y, cells.table, counts, spec.outer, inner_splits, inner_train_frac,
        objective, options, guard, variables, screen, pilots=pilots,
    )  # fmt: skip
    # each larger budget the search may grow to, costed now: the plan line covers them
    steps: dict[int, Plan] = {}
    before = plan.n_candidates
    for k in range(first.max_constants + 1, grammar.max_constants + 1):
        steps[k] = plan_search(
            grammar, X, y, cells.table, counts, spec.outer, inner_splits, inner_train_frac,
            objective, options, guard, variables, screen, only_constants=k, pilots=pilots,
            before=before,
        )  # fmt: skip
        before += steps[k].n_candidates
    plan.growth = [(k, p.n_generated, p.seconds) for k, p in steps.items()]
    for f in refs:  # they compete as well
        if len(f.constants) < plan.min_train:
            q = len(f.structure.nonlinear)
            plan.by_nonlinear[q] = plan.by_nonlinear.get(q, 0) + 1
            plan.n_references, plan.n_candidates = plan.n_references + 1, plan.n_candidates + 1
    if scheduler:  # before the plan is shown: a refusal is then the only line
        _check_reachable(scheduler)
    _check_search_plan(spec, plan, variables, jobs, yes, on_plan, scheduler)
    masks = nested_masks(spec.outer, cells.table, inner_splits, inner_train_frac, seed)
    held, seed_note = _seed_holdout(grid, cells, masks, objective, seeds, seed)
    # names sized for the ceiling: a budget that grows names its forms as one search would
    total = sum(count_candidates(grammar, cols, counts).values())
    proposed, fits_ok, too_big = _propose(first, X, variables, counts, masks.min_train, total)
    # the references compete too: first, so a grammar form that is the same function is the
    # one dropped, and the user's theory wins or loses by the same outer errors
    fits_ok = _reference_candidates(refs, masks.min_train) + fits_ok
    state = _worker_state(spec, fits_ok, X, y, masks, held)
    kept = _KeptPrints()
    with ExitStack() as stack:
        # the fits on a Dask cluster when asked: the same tasks, the same results
        client = stack.enter_context(_connect(scheduler)) if scheduler else None
        fitted = _fit_candidates(fits_ok, too_big, state, screen, jobs, on_progress, client, kept)
        n_generated = len(proposed)
        growth = [_step_row(first.max_constants, len(proposed), fitted)]
        budget, stop = first.max_constants, None
        while grammar.grows:
            stop = _growth_stop(fitted, masks, rule, budget, grammar)
            if stop is None:
                k = budget + 1
                # checked again with the share of nested fits the steps so far needed
                steps[k] = steps[k].with_share(fitted.share)
                stop = _step_refusal(steps[k], k, spec, variables, jobs, yes, scheduler)
            if stop is not None:
                break
            if on_plan is not None:
                on_plan(steps[k], steps[k].seconds / max(1, min(jobs, steps[k].n_candidates)))
            new = named(generate(grammar, cols, counts, only_constants=k), n_generated + 1, total)
            n_generated += len(new)
            ok = [c for c in new if c.n_constants < masks.min_train]
            big = [c for c in new if c.n_constants >= masks.min_train]
            part = _fit_candidates(
                ok, big, _worker_state(spec, ok, X, y, masks, held), screen, jobs,
                on_progress, client, kept, allow_none=True, before=fitted.counted,
            )  # fmt: skip
            fitted = _merged(fitted, part, masks.n_outer)
            growth.append(_step_row(k, len(new), part))
            budget = k
    ref_scores = [_score(f, state, stop=masks.inner.stop) for f in refs]
    out = _assemble(grid, grammar, fitted, masks, refs, ref_scores, rule, n_generated)
    out.settings["growth"] = (
        dict(
            first_constants=first.max_constants,
            max_constants=grammar.max_constants,
            reached=budget,
            steps=growth,
            stopped=stop,
        )
        if grammar.grows
        else None
    )
    out.settings["ceiling"]["stopped"] = stop
    out.settings["hopeless"] = dict(ratio=HOPELESS_RATIO, rows_fitted=fitted.share)
    out.reference_forms = {f.name: f for f in refs}
    # issue 62: before the guard, which then has no pick to judge when the search abstains
    out.abstention = abstention(out, variables, cols, y, masks, spec.objective,
                                refs if references_given else ())  # fmt: skip
    out.pick_guard = guard_pick(out, cells, masks, objective, guard, list(at))
    if out.pick_guard["named"]:
        out.warnings.append(pick_guard_warning(out.pick_guard))
    out.settings.update(_run_settings(spec, variables, cells, masks, at, fitted, seed_note))
    out.seconds = time.perf_counter() - t_start
    return out


def _reference_candidates(refs: Sequence[Form], n_fit: int) -> list[Candidate]:
    """The reference forms (``--reference``, ``--form``) as candidates of the first step,
    those with fewer constants than the fewest cells a nested split fits; a name in the
    grammar's pattern (``s0001``) is prefixed ``ref:`` so that it names one form."""
    out = []
    for f in refs:
        k = len(f.constants)
        if k < n_fit:
            name = f"ref:{f.name}" if re.fullmatch(r"s\d{4,}", f.name) else f.name
            form = replace(f, name=name) if name != f.name else f
            out.append(Candidate(f"reference {f.name}", form, k, len(f.structure.nonlinear), 0))
    return out


def _check_search_plan(
    spec: _SearchSpec,
    plan: Plan,
    variables: list[str],
    jobs: int,
    yes: bool,
    on_plan: Callable[[Plan, float | None], None] | None,
    scheduler: str | None = None,
) -> None:
    """Refuse a search beyond the limits or with no candidate to fit; then show the plan."""
    shrink = _shrink_options(spec.grammar, spec.outer, spec.inner_splits, variables)
    check_plan(plan, jobs, yes, shrink, scheduler)
    # what nested_masks and the candidates would refuse, refused before the plan is shown
    _check_candidates(plan.n_generated, plan.n_candidates, plan.min_train)
    if on_plan is not None:
        on_plan(plan, plan.wall(jobs))


def _propose(
    grammar: Grammar,
    X: dict,
    variables: list[str],
    counts: dict[str, int],
    n_fit: int,
    total: int | None = None,
) -> tuple[list[Candidate], list[Candidate], list[Candidate]]:
    """The grammar's candidates: all of them, those with fewer constants than the fewest
    cells a nested mask fits, and the others (named for ``total`` candidates)."""
    proposed = named(generate(grammar, {v: X[v] for v in variables}, counts), total=total)
    fits_ok = [c for c in proposed if c.n_constants < n_fit]
    too_big = [c for c in proposed if c.n_constants >= n_fit]
    _check_candidates(len(proposed), len(fits_ok), n_fit)
    return proposed, fits_ok, too_big


def _check_candidates(proposed: int, fitting: int, n_fit: int) -> None:
    """Refuse a grammar that proposes no form, or only forms with more constants than the
    smallest inner split fits cells."""
    if not proposed:
        raise FitrulesError("the grammar proposes no form; allow more terms, constants or factors")
    if not fitting:
        raise SplitError(
            f"every candidate has at least {n_fit} constants but the smallest inner split fits "
            f"{n_fit} cells; lower {param('max_constants')} or raise {param('inner_train_frac')}"
        )


def _worker_state(
    spec: _SearchSpec, fits_ok: list[Candidate], X: dict, y, masks, held: dict | None
) -> dict:
    """What the workers read: the bound forms, the cells, the masks, the options, the probes."""
    forms = [c.form.bind(spec.grid.columns, spec.grid.runs) for c in fits_ok]
    # two targets drawn from the seed alone: twins on these cells fit any target alike, and
    # no value of the grid decides which forms are kept
    rng = np.random.default_rng(_sub_seed(spec.seed, _PROBES))
    probes = 1 + 0.1 * rng.standard_normal((2, len(y)))
    return dict(
        forms=forms,
        X=X,
        y=y,
        masks=masks,
        objective=spec.objective,
        options=spec.options,
        guard=spec.guard,
        probes=probes,
        seed=spec.seed,
        seeds=held,
        heldout=spec.heldout,
        # shape sense (issue 41): fits that turn back past the levels the question extrapolates
        turn=_turn_column(spec.outer),
        prune=prunes(spec.outer, spec.objective),  # hopeless training fits
    )


def _run_settings(
    spec: _SearchSpec,
    variables: list[str],
    cells: Cells,
    masks: NestedMasks,
    at: Sequence[dict[str, float]],
    fitted: _Fitted,
    seed_note: str,
) -> dict:
    """How the search ran: its protocols, options and variables, for its settings."""
    outer, options = spec.outer, spec.options
    inside = asks_inside(outer, cells.table, spec.inner_splits)
    return dict(
        at=[dict(p) for p in at],
        screen=fitted.screen_note,
        outer=outer.describe(),
        outer_error=seed_note,
        heldout_weights=spec.heldout_weights,
        inner_protocol=_inner_text(outer, masks.n_inner, spec.inner_train_frac, inside),
        inner_splits=spec.inner_splits,
        inner_train_frac=spec.inner_train_frac,
        seed=spec.seed,
        objective=spec.objective.describe(),
        rule=spec.rule,
        guard=spec.guard.describe(),
        # issue 41: fits that turn back past the levels an extrapolation asks about fail
        shape_sense=(
            {"column": _turn_column(outer), "turn_step": TURN_STEP} if _turn_column(outer) else None
        ),
        variables=variables,
        left_out={} if spec.grammar.variables else dict(spec.grid.outcome_like),
        fit_options={
            "grid_points": list(options.grid_points),
            "n_starts": options.n_starts,
            "resolution": options.resolution,
        },
    )
