"""`fitrules search`: choose a form from a grammar's candidates by nested validation.

Choosing among many forms by held-out error, then quoting that same error, flatters the
winner. The search therefore never quotes the error it chose by:

- the **outer protocol** (random splits, ``extrapolate:COL``, ``leave-one-level-out:COL``)
  holds cells out;
- inside each outer training set, **inner** random splits of those cells rank every
  candidate; the **selection rule** picks one form from that ranking alone;
- the **outer error** is the error of whatever was picked, on the outer held-out cells.

The outer errors measure the *procedure* (grammar + rule), not any one form. Run with every
complexity budget (at most k constants), they give a Pareto front of outer error against
constants; the form the procedure picks from all cells at each budget on the front is the
one to carry to ``compare``. The optimism of selection is the winner's inner error (what a
search that reports its own ranking would quote) against its outer error.

Selection rule ``one-se`` (default): the candidate with the lowest median inner log error
is the best; every candidate whose mean paired log-error difference to the best is within
one standard error (corrected for the overlap of random splits, Nadeau and Bengio 2003) is
as good as the data can tell; the one with fewest constants among them is picked (ties: the
lower median). ``best`` picks the lowest median outright. Fits that are degenerate or named
wild by the guard (training fit and design only) count as failures: a candidate that fails
in half the inner splits or more, or whose fit on the outer training cells fails, cannot
be picked there.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, LimitError, SplitError
from fitrules.base.limits import MAX_SEARCH_CANDIDATES, SEARCH_TIME_BUDGET_SECONDS, check_memory
from fitrules.base.results import Result
from fitrules.engine.fit import FitOptions, Objective, fit_memory, fit_splits
from fitrules.engine.grammar import (
    DUPLICATE_RTOL,
    Candidate,
    Grammar,
    TwinIndex,
    count_candidates,
    generate,
    named,
    pilot_candidate,
    structural_rank_ok,
)
from fitrules.engine.guard import TURN_STEP, GuardOptions, check_fits, turns_back
from fitrules.engine.metrics import box_weights
from fitrules.jobs.options import RULES, SEARCH
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid
from fitrules.model.splits import (
    Extrapolate,
    LeaveOneLevelOut,
    RandomSplit,
    RollingOrigin,
    SeedHoldout,
    inner_masks,
)

DEFAULT_REFERENCES = ("composition", "log_additive")
# a staged search (above SCREEN_ABOVE candidates, or --screen K): every candidate fitted on the
# first SCREEN_SPLITS inner splits of each outer split, the SCREEN_KEEP best of each number of
# constants kept there for the full nested fits
SCREEN_SPLITS = 2
SCREEN_KEEP = 25
SCREEN_ABOVE = 2_000
# a coarser starting grid, one start and a resolution of 1e-3 of each exponent's range (compare:
# 1e-6): the search fits thousands of forms; fit and compare refit the forms it returns
SEARCH_FIT_OPTIONS = FitOptions(grid_points=(41, 17, 9), n_starts=1, resolution=1e-3)
# the probes that find duplicate forms compare fitted values to 1e-6: fitted to compare's
# resolution (one fit per probe, so the cost is small)
PROBE_FIT_OPTIONS = FitOptions(grid_points=(41, 17, 9), n_starts=1)


# ------------------------------------------------------------------------------ protocol
@dataclass(frozen=True)
class NestedMasks:
    """All training masks one candidate is fitted on, and the cells each one scores.

    Rows: ``O`` outer splits, then ``O x I`` inner splits (outer split by outer split),
    then ``F`` final inner splits of all cells (the choice made from every cell), then one
    fit on every cell (no cell scored: it decides whether the final choice may be picked).
    """

    train: np.ndarray  # (O + O*I + F + 1, n) bool
    test: np.ndarray  # same shape: the cells each row scores
    n_outer: int
    n_inner: int
    outer_labels: list[str]

    @property
    def outer(self) -> slice:
        return slice(0, self.n_outer)

    @property
    def inner(self) -> slice:
        return slice(self.n_outer, self.n_outer + self.n_outer * self.n_inner)

    @property
    def final(self) -> slice:
        return slice(self.n_outer + self.n_outer * self.n_inner, len(self.train) - 1)

    @property
    def whole(self) -> int:
        return len(self.train) - 1

    @property
    def min_train(self) -> int:
        return int(self.train.sum(axis=1).min())

    def sizes(self, rows: slice) -> tuple[int, int]:
        """The fewest cells fitted and scored by ``rows``."""
        return int(self.train[rows].sum(axis=1).min()), int(self.test[rows].sum(axis=1).min())


# seeds of the search's random streams, one namespace each: SeedSequence([seed, KIND, ...])
_INNER, _FINAL, _PROBES, _RANK, _SEEDS = range(5)


def _sub_seed(seed: int, *path: int) -> int:
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])


def asks_levels(outer) -> bool:
    """Whether ``outer`` asks about unseen levels of a column (an extrapolation or a level
    left out): its inner splits then ask the same (:func:`fitrules.model.splits.inner_masks`)."""
    return isinstance(outer, RollingOrigin | Extrapolate | LeaveOneLevelOut)


def asks_inside(outer, table: pd.DataFrame, inner_splits: int) -> bool:
    """Whether the inner splits can ask ``outer``'s question inside every outer training
    set and on all cells (else :func:`nested_masks` makes random inner splits)."""
    if not asks_levels(outer):
        return False
    masks = np.asarray(outer.masks_for(table), bool)  # refuses a column the cells lack
    whole = inner_masks(outer, table, np.ones(len(table), bool), 1, 0)[0]
    return len(whole) >= 1 and all(len(inner_masks(outer, table, m, 1, 0)[0]) >= 1 for m in masks)


def question_protocol(outer):
    """The outer protocol a search runs for the one asked: an extrapolation along a column
    is asked at several cut points (:class:`fitrules.model.splits.RollingOrigin`), so that the
    front has a standard error; any other protocol as given."""
    if isinstance(outer, Extrapolate):
        return RollingOrigin(outer.column, outer.threshold, also=outer.also)
    return outer


def nested_masks(
    outer,
    table: pd.DataFrame,
    inner_splits: int,
    inner_train_frac: float,
    seed: int,
    final_splits: int | None = None,
) -> NestedMasks:
    """The outer protocol's masks over ``table``'s cells, with the inner splits of each
    outer training set, ``final_splits`` (default twice ``inner_splits``) of all cells, and
    one row fitting every cell. The inner splits ask the outer protocol's question: seeded
    random splits under random outer splits; under an extrapolation or a level left out,
    the same along the column inside each training set (as many in every outer split: the
    fewest any of them can give, at most ``inner_splits``)."""
    n = len(table)
    outer_masks = np.asarray(outer.masks_for(table), bool)
    tests_for = getattr(outer, "tests_for", None)
    outer_tests = np.asarray(tests_for(table), bool) if tests_for else ~outer_masks
    labels = list(outer.labels(table))
    train, test = [outer_masks], [outer_tests]
    inner = []
    if asks_levels(outer):
        inner = [
            inner_masks(outer, table, m, inner_splits, _sub_seed(seed, _INNER, o))
            for o, m in enumerate(outer_masks)
        ]
        fm, ft = inner_masks(
            outer, table, np.ones(n, bool), 2 * inner_splits, _sub_seed(seed, _FINAL)
        )
    # too few levels inside some training set to ask the question there: random inner
    # splits (the search says so, see asks_inside)
    structured = bool(inner) and min(len(tr) for tr, _ in inner) >= 1 and len(fm) >= 1
    if structured:
        k = min(len(tr) for tr, _ in inner)
        for tr, te in inner:
            train.append(tr[:k])
            test.append(te[:k])
        inner_splits = k
        fm, ft = fm[: final_splits or 2 * k], ft[: final_splits or 2 * k]
    else:
        for o, m in enumerate(outer_masks):
            idx = np.flatnonzero(m)
            try:
                split = RandomSplit(inner_splits, inner_train_frac, _sub_seed(seed, _INNER, o))
                split.check(len(idx))
            except SplitError as err:
                raise SplitError(
                    f"outer split {labels[o]!r} fits {len(idx)} cells, too few for inner "
                    f"splits: {err}"
                ) from None
            sub = split.masks(len(idx))
            tr = np.zeros((inner_splits, n), bool)
            tr[:, idx] = sub
            te = np.zeros((inner_splits, n), bool)
            te[:, idx] = ~sub
            train.append(tr)
            test.append(te)
        final = RandomSplit(
            final_splits or 2 * inner_splits, inner_train_frac, _sub_seed(seed, _FINAL)
        )
        final.check(n)
        fm = final.masks(n)
        ft = ~fm
    train += [fm, np.ones((1, n), bool)]
    test += [ft, np.zeros((1, n), bool)]
    return NestedMasks(np.vstack(train), np.vstack(test), len(outer_masks), inner_splits, labels)


# ------------------------------------------------------------------------------ scoring
@dataclass
class Scored:
    """One form's errors on every row of a :class:`NestedMasks` (percent; NaN = failed)."""

    error: np.ndarray  # (rows,)
    valid: np.ndarray  # (rows,) bool: neither degenerate nor named wild
    seconds: float = 0.0
    mse: np.ndarray | None = None  # (rows,) mean squared relative error of the test cells


def score_form(
    form: Form,
    X,
    y,
    masks: NestedMasks,
    objective: Objective,
    options: FitOptions,
    guard: GuardOptions,
    rows: slice | np.ndarray | None = None,
    y_test: np.ndarray | None = None,
    turn: str | None = None,
    weights: np.ndarray | None = None,
) -> Scored:
    """Fit ``form`` on every training mask (or ``rows`` of them) and score its test cells.

    ``y_test`` (cells,): the values the test cells are scored against (default ``y``, the
    values fitted). ``turn``: the column a question extrapolates along; a fit that turns
    back past its training levels there (:func:`fitrules.engine.guard.turns_back`) fails,
    as a fit the guard names wild does. ``weights`` (cells,): each held-out cell's weight in
    a split's error (:func:`fitrules.engine.metrics.box_weights`; default each once)."""
    t0 = time.perf_counter()
    train = masks.train if rows is None else masks.train[rows]
    test = masks.test if rows is None else masks.test[rows]
    # rows fitting the same number of cells are fitted together: the local search then works
    # on those cells only (fit._refine), which the mixed sizes of nested masks would prevent
    counts = train.sum(axis=1)
    fits: list = [None] * len(train)
    for size in np.unique(counts):
        rows_k = np.flatnonzero(counts == size)
        for r, f in zip(
            rows_k, fit_splits(form, X, y, train[rows_k], objective, options), strict=True
        ):
            fits[r] = f
    guarded = check_fits(form, X, y, train, fits, objective, guard)
    cf = CompiledForm(form)
    params = np.array([[r.constants[c] for c in cf.s.constants] for r in fits], float)
    ok = np.isfinite(params).all(axis=1)
    target = y if y_test is None else y_test
    with np.errstate(all="ignore"):
        pred = cf.predict(X, np.where(ok[:, None], params, 0.0))
        rel = np.abs(pred - target) / np.abs(target)
        w = np.where(test, 1.0 if weights is None else weights, 0.0)
        held = np.maximum(w.sum(axis=1), 1e-300)
        err = 100 * np.where(test, w * rel, 0.0).sum(axis=1) / held
        mse = np.where(test, w * rel**2, 0.0).sum(axis=1) / held
    valid = (
        ok
        & np.isfinite(err)
        & np.array([not r.degenerate and not g.wild for r, g in zip(fits, guarded, strict=True)])
    )
    if turn is not None:
        valid &= ~turns_back(cf, X, y, train, test, params, turn)
    return Scored(
        np.where(valid, err, np.nan), valid, time.perf_counter() - t0, np.where(valid, mse, np.nan)
    )


# ------------------------------------------------------------------------------ selection
def select(
    inner: np.ndarray,
    n_constants: np.ndarray,
    eligible: np.ndarray,
    n_train: int,
    n_test: int,
    rule: str = SEARCH.rule,
) -> tuple[int, float]:
    """The index picked from ``inner`` (candidates x inner splits, percent, NaN = failed)
    among ``eligible`` candidates, and its median inner error; (-1, nan) if none can be."""
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(np.where(np.isfinite(inner), inner, np.inf))
    L = np.where(np.isnan(L), np.inf, L)
    score = np.median(L, axis=1)
    score = np.where(eligible, score, np.inf)
    if not np.isfinite(score).any():
        return -1, float("nan")
    best = int(np.argmin(score))
    if rule == "best":
        return best, float(np.exp(score[best]))
    both = np.isfinite(L) & np.isfinite(L[best])
    J = both.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(both, L - L[best], 0.0)
        mean = d.sum(axis=1) / J
        var = ((d - mean[:, None]) ** 2 * both).sum(axis=1) / (J - 1)
        se = np.sqrt(var * (1 / J + n_test / n_train))
    within = np.isfinite(score) & (J >= 2) & (mean <= np.nan_to_num(se, nan=0.0))
    within[best] = True
    pool = np.flatnonzero(within)
    order = np.lexsort((score[pool], n_constants[pool]))
    pick = int(pool[order[0]])
    return pick, float(np.exp(score[pick]))


# ------------------------------------------------------------------------------ the result
@dataclass
class Search(Result):
    """What :func:`run_search` found; every view renders these tables.

    Attributes
    ----------
    grid_label : str
        Where the grid came from, for messages.
    grammar : Grammar
        The grammar the candidates were proposed from.
    settings : dict
        The search's settings (splits, seeds, rule, budgets grown, ...).
    candidates : DataFrame
        One row per fitted candidate: name, expression, constants, how often the
        unrestricted procedure picked it across outer splits and its median outer error in
        those splits, and its own median outer error over all outer splits (descriptive:
        never a selection criterion).
    budgets : DataFrame
        One row per budget (at most k constants): the procedure's outer error (median,
        trimmed mean, p90 over outer splits), the winners' median inner error, the optimism
        (outer / inner), the most-picked form and its share, the form picked from all cells,
        and whether the budget is on the Pareto front.
    choices : DataFrame
        One row per (budget, outer split): the form picked, its inner and outer error.
    references : DataFrame
        One row per reference form: its outer error on the same outer splits and how often
        the unrestricted procedure's pick beat it.
    pruned : dict of str to int
        Why candidates were dropped before the nested fits, with counts.
    dropped : DataFrame
        One row per dropped candidate: name, expression, reason.
    n_generated : int
        Candidates the grammar proposed.
    forms : dict of str to Form
        The forms of the candidates kept for the nested fits, by name.
    seconds : float
        Wall time of the search.
    warnings : list of str
        One-line warnings about the search.
    pick_guard : dict
        The wild-extrapolation guard's verdict on the pick at the points of ``at``.
    """

    grid_label: str
    grammar: Grammar
    settings: dict
    candidates: pd.DataFrame
    budgets: pd.DataFrame
    choices: pd.DataFrame
    references: pd.DataFrame
    pruned: dict[str, int]
    dropped: pd.DataFrame
    n_generated: int
    forms: dict[str, Form]
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    pick_guard: dict = field(default_factory=dict)

    @property
    def front(self) -> pd.DataFrame:
        return self.budgets[self.budgets["on_front"]]

    @property
    def best(self) -> pd.Series:
        """The budget on the front with the lowest outer error (the front's last)."""
        b = self.budgets
        return b[b["max_constants"] == self.settings["best_budget"]].iloc[0]

    @property
    def chosen(self) -> Form | None:
        """The form the procedure picks from all cells at the best budget on the front (None
        if every candidate failed there)."""
        name = self.best["final_choice"]
        # a budget without a final choice holds None (NaN once pandas mixes it with names)
        return self.forms[name] if isinstance(name, str) else None

    def forms_toml(self) -> str:
        """The front's forms as ``forms.toml`` entries ready for ``compare``."""
        from fitrules.views.search import forms_toml

        return forms_toml(self)

    def to_dict(self) -> dict:
        from fitrules.views.search import search_dict

        return search_dict(self)

    def to_json(self, path: str | Path | None = None) -> str:
        import json

        from fitrules.base.util import json_ready

        text = json.dumps(json_ready(self.to_dict()), indent=2)
        if path is not None:
            from fitrules.base.outputs import inputs_of, write_text

            write_text(Path(path), text + "\n", "path", inputs=inputs_of(self))
        return text

    def text(self) -> str:
        from fitrules.views.search import render_search

        return render_search(self)

    def __repr__(self) -> str:
        picked = self.chosen.expression if self.chosen is not None else None
        return (
            f"Search({self.grid_label}: {len(self.candidates)} candidates fitted of "
            f"{self.n_generated} proposed; picked {picked!r})"
        )

    def html(self) -> str:
        from fitrules.views.html import search_html

        return search_html(self)

    def plot_front(self, ax=None, labels=None, units=None):
        """Outer held-out error against the number of constants: the search at each budget,
        its front, every candidate and the references.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The axes to draw on (default: new ones).
        labels : dict or str, optional
            Taken as by the other results' ``plot_*`` (this figure's axes name no column).
        units : dict or str, optional
            Taken as by the other results' ``plot_*``.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from fitrules.views.figures import axis_labels
        from fitrules.views.search import plot_front

        with axis_labels(labels, units):
            return plot_front(self, ax)

    def report(self, path: str | Path, command: str | None = None, force: bool = False) -> Path:
        from fitrules.base.errors import report_parameter
        from fitrules.base.outputs import check_result_output, inputs_of
        from fitrules.views.search import write_search_report

        check_result_output(path, inputs_of(self), "path", "dir")
        with report_parameter("path"):
            return write_search_report(self, Path(path), command, force)


# ------------------------------------------------------------------------------ the engine
def default_variables(grid: Grid) -> list[str]:
    """The grid's varying numeric factors and continuous columns; of columns that map one to
    one onto each other (keep and omega = 1/keep - 1) only the last is kept (derived columns
    come last); a tuned grid's record of its choices (``tuned_lr``) and columns that look
    like another outcome (:attr:`fitrules.model.grids.Grid.outcome_like`) are left out."""
    # a tuned grid's tuned_FACTOR columns record the choice of the tuning, not the design
    tuned = {f"tuned_{f}" for f in getattr(grid, "tuned", ())}
    cols = [
        c
        for c in [*grid.varying_factors, *grid.continuous]
        if c not in tuned
        if pd.api.types.is_numeric_dtype(grid.runs[c])
        and not pd.api.types.is_bool_dtype(grid.runs[c])
    ]
    keep: list[str] = []
    for c in reversed(cols):
        if not any(_one_to_one(grid.runs[c], grid.runs[k]) for k in keep):
            keep.append(c)
    return [c for c in cols if c in keep]


def _one_to_one(a: pd.Series, b: pd.Series) -> bool:
    pairs = pd.DataFrame({"a": a.to_numpy(), "b": b.to_numpy()}).drop_duplicates()
    return bool(pairs["a"].is_unique and pairs["b"].is_unique)


# what the workers read: the forms, cells, masks and settings, set once per process
_STATE: dict = {}


def _set_state(state: dict) -> None:
    """A worker's initializer: one BLAS thread (the pool is the parallelism), then the state."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    _STATE.clear()
    _STATE.update(state)


def _fingerprint_task(indices: list[int]) -> list[tuple[int, bool, np.ndarray | None]]:
    s = _STATE
    out: list[tuple[int, bool, np.ndarray | None]] = []
    for i in indices:
        form = s["forms"][i]
        rng = np.random.default_rng(_sub_seed(s["seed"], _RANK, i))
        if not structural_rank_ok(form, s["X"], rng):
            out.append((i, False, None))
            continue
        out.append((i, True, _probe_values(form, s["X"], s["probes"], s["objective"])))
    return out


def _nested_task(indices: list[int]) -> list[tuple[int, Scored]]:
    s = _STATE
    return [(i, _score(s["forms"][i], s)) for i in indices]


def _screen_task(indices: list[int]) -> list[tuple[int, Scored]]:
    s = _STATE
    return [(i, _score(s["forms"][i], s, only=s["screen_rows"])) for i in indices]


def _score(form: Form, s: dict, stop: int | None = None, only: np.ndarray | None = None) -> Scored:
    """Score ``form`` on every row of the nested masks (or the first ``stop``, or the rows
    ``only`` marks; the others are NaN).

    Under the cells-and-seeds protocol (``s["seeds"]``) outer split o is fitted on the runs
    at every seed id but fold ``o mod folds``'s, and its test cells scored on that fold's
    runs; each outer error is then rescaled by one factor that takes the expected excess off
    the mean square pooled over the outer splits
    (:meth:`fitrules.model.splits.SeedHoldout.rescale`). The inner rows, like the final
    ones, read every run of their cells, all of them outer training cells: the choice in an
    outer split reads as many runs per cell as the choice from all cells does."""
    masks = s["masks"]
    args = (s["objective"], s["options"], s["guard"])
    turn = s.get("turn")
    held = s.get("seeds")
    kw = dict(turn=turn, weights=s.get("heldout"))
    n_all = len(masks.train)
    want = np.zeros(n_all, bool)
    want[: n_all if stop is None else stop] = True
    if only is not None:
        want &= only
    if held is None:
        if want.all():
            return score_form(form, s["X"], s["y"], masks, *args, **kw)
        rows = np.flatnonzero(want)
        sc = score_form(form, s["X"], s["y"], masks, *args, rows=rows, **kw)
        err, valid, mse = np.full(n_all, np.nan), np.zeros(n_all, bool), np.full(n_all, np.nan)
        err[rows], valid[rows], mse[rows] = sc.error, sc.valid, sc.mse
        return Scored(err, valid, sc.seconds, mse)
    n_out = masks.n_outer
    err = np.full(n_all, np.nan)
    valid = np.zeros(n_all, bool)
    mse = np.full(n_all, np.nan)
    seconds = 0.0
    for k, fold in enumerate(held["folds"]):
        rows = np.arange(k, n_out, len(held["folds"]))
        rows = rows[want[rows]]
        if not len(rows):
            continue
        sc = score_form(form, s["X"], fold["y_fit"], masks, *args, rows=rows,
                        y_test=fold["y_test"], **kw)  # fmt: skip
        err[rows], valid[rows], mse[rows] = sc.error, sc.valid, sc.mse
        seconds += sc.seconds
    on = np.isfinite(mse[:n_out])
    if on.any():  # one factor: a split's few held-out cells are too noisy to correct alone
        err[:n_out] *= SeedHoldout.rescale(float(np.mean(mse[:n_out][on])), held["excess"])
    # inner rows read every id's runs, of outer training cells only (the held-out fold's effect
    # is there a common offset a form's linear constants absorb): ranking on 2 of 3 runs a
    # cell picked worse forms than the final choice does, and so quoted too high (issue 28)
    rest = np.flatnonzero(want[n_out:]) + n_out
    if len(rest):
        sc = score_form(form, s["X"], s["y"], masks, *args, rows=rest, **kw)
        err[rest], valid[rest] = sc.error, sc.valid
        seconds += sc.seconds
    return Scored(err, valid, seconds, mse)


def _probe_values(form, X, probes, objective) -> np.ndarray:
    cf = CompiledForm(form)
    out = np.full(probes.shape, np.nan)
    whole = np.ones((1, probes.shape[1]), bool)
    for k, target in enumerate(probes):
        r = fit_splits(form, X, target, whole, objective, PROBE_FIT_OPTIONS)[0]
        params = np.array([[r.constants[c] for c in cf.s.constants]], float)
        if np.isfinite(params).all():
            with np.errstate(all="ignore"):
                out[k] = cf.predict(X, params)[0]
    return out


def _check_reachable(scheduler: str) -> None:
    from fitrules.sim.cluster import check_reachable

    check_reachable(scheduler)


def _connect(scheduler: str):
    """A client of the Dask cluster ``scheduler`` (imported here: Dask is optional)."""
    from fitrules.sim.cluster import connect

    return connect(scheduler)


def _with_state(worker, state: dict, task: list[int]) -> list:
    """``worker(task)`` with the search's state set (a Dask task: the state is scattered to
    the workers once, and set per task, since a worker may run tasks of several searches)."""
    _set_state(state)
    return worker(task)


def _run(tasks: list[list[int]], worker, state: dict, jobs: int, on_done, client=None) -> list:
    """Run ``worker`` over index chunks, in this process (jobs 1), a pool, or on a Dask
    cluster (``client``), in order: the results do not depend on where they ran."""
    results: list = []
    if client is not None:
        from distributed import as_completed

        # one future for the whole state (a dict would be scattered value by value, under
        # its keys, which the next scatter of a search would replace)
        (shared,) = client.scatter([state], broadcast=True, hash=False)
        futures = [client.submit(_with_state, worker, shared, t, pure=False) for t in tasks]
        size = {f.key: len(t) for f, t in zip(futures, tasks, strict=True)}
        for f in as_completed(futures):
            on_done(size[f.key])
        for f in futures:
            results += f.result()
        return results
    if jobs <= 1:
        saved = dict(_STATE)  # a search run inside a callback of another keeps its state
        _STATE.clear()
        _STATE.update(state)
        try:
            for t in tasks:
                results += worker(t)
                on_done(len(t))
        finally:
            _STATE.clear()
            _STATE.update(saved)
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # fork where there is one: a script without a __main__ guard, or a notebook, is not
    # re-imported by the workers (spawn and forkserver would run it again)
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(
        jobs, mp_context=ctx, initializer=_set_state, initargs=(state,)
    ) as pool:
        for t, r in zip(tasks, pool.map(worker, tasks), strict=True):
            results += r
            on_done(len(t))
    return results


def _chunks(indices: Sequence[int], size: int) -> list[list[int]]:
    return [list(indices[a : a + size]) for a in range(0, len(indices), size)]


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
    seconds : estimated time of the fits in one process (from pilot fits on a few masks).
    memory : estimated bytes at the peak in this process.
    min_train : the fewest cells a nested mask fits.
    worker_memory : estimated bytes each worker process holds beside it (its copy of the
        candidates and masks, and its largest fit); see :func:`search_memory`.
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


SEARCH_WORKER_BYTES = 120 * 2**20
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


def _shape(outer, table: pd.DataFrame, inner_splits: int, inner_train_frac: float):
    """(outer splits, fewest cells any nested mask fits, cells an inner mask fits), from
    the protocol's sizes alone: no nested mask is made."""
    n = len(table)
    if asks_inside(outer, table, inner_splits):  # few masks, made: sizes follow the levels
        m = nested_masks(outer, table, inner_splits, inner_train_frac, 0)
        inner_train = m.sizes(m.inner)[0] if m.n_inner else m.min_train
        return m.n_outer, m.min_train, inner_train
    if isinstance(outer, RandomSplit):
        n_outer, sizes = outer.n_splits, [outer.n_train(n)]
    else:
        sizes_all = np.asarray(outer.masks_for(table), bool).sum(axis=1)
        n_outer, sizes = len(sizes_all), sorted(set(sizes_all.tolist()))
    inner = [RandomSplit(2, inner_train_frac, 0).n_train(m) for m in sizes]
    final = RandomSplit(2, inner_train_frac, 0).n_train(n)
    return n_outer, max(1, min([*sizes, *inner, final])), max(1, min(inner))


def _check_inner_splits(outer, table: pd.DataFrame, inner_splits: int, frac: float) -> None:
    """Refuse, as :func:`nested_masks` would, inner splits that an outer training set (or
    all cells, for the final choice) cannot give; no mask is made."""
    n = len(table)
    if asks_inside(outer, table, inner_splits):  # raises what nested_masks raises
        nested_masks(outer, table, inner_splits, frac, 0)
        return
    if isinstance(outer, RandomSplit):
        sizes = [(outer.n_train(n), None)]
    else:
        masks = np.asarray(outer.masks_for(table), bool)
        sizes = list(zip(masks.sum(axis=1).tolist(), outer.labels(table), strict=True))
    for m, label in sizes:
        try:
            RandomSplit(inner_splits, frac, 0).check(int(m))
        except SplitError as err:
            label = label if label is not None else outer.labels(table)[0]
            raise SplitError(
                f"outer split {label!r} fits {m} cells, too few for inner splits: {err}"
            ) from None
    RandomSplit(2 * inner_splits, frac, 0).check(n)


def _pilot_seconds(form, X, y, n_train, objective, options, guard) -> tuple[float, float]:
    """(fixed, per mask) seconds of fitting ``form`` on masks of ``n_train`` cells: timed on
    a few random masks (the pilots' results are not used)."""
    n = len(y)
    times = []
    for m in PILOT_MASKS:
        sp = RandomSplit(m, min(max(n_train / n, 1e-9), 1 - 1e-9), 0)
        train = sp.masks(n)
        pilot = NestedMasks(train, ~train, 0, 0, [])
        t0 = time.perf_counter()
        score_form(form, X, y, pilot, objective, options, guard)
        times.append(time.perf_counter() - t0)
    (m1, m2), (t1, t2) = PILOT_MASKS, times
    slope = max(t2 - t1, 0.0) / (m2 - m1)
    slope = max(slope, t2 / m2 / 4)  # noise cannot make the cost of a mask vanish
    return max(t1 - slope * m1, 0.0), slope


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
    full, screened, fitting = 0.0, 0.0, 0.0
    if n_generated <= MAX_SEARCH_CANDIDATES:  # beyond it the count alone refuses
        pilots = {} if pilots is None else pilots
        for q, c in sorted(by_q.items()):
            if q not in pilots:
                pilot = pilot_candidate(grammar, cols, q)
                if pilot is None:
                    pilots[q] = None
                else:
                    form = pilot.form.bind(list(cols))
                    pilots[q] = (
                        *_pilot_seconds(form, cols, y, inner_train, objective, options, guard),
                        fit_memory(form, n, rows, options, inner_train),
                    )
            if pilots[q] is None:
                continue
            fixed, per, memory_q = pilots[q]
            # the nested fits, the two probe fits and the rank check (about one mask each)
            full += c * (fixed + per * (rows + 3))
            screened += c * (fixed + per * (n_screen + 3))
            fitting = max(fitting, memory_q)
    seconds = screened + full * survivors_max / max(n_fit, 1) if keep else full
    memory = (
        n_generated * CANDIDATE_BYTES  # the candidates made
        + 2.0 * rows * n  # the nested masks (train and test)
        + n_fit * rows * 9.0  # each candidate's errors and flags
        + fitting
    )
    # a worker's copy of the state (the candidates to fit, the masks) and its largest fit
    worker = n_fit * CANDIDATE_BYTES + 2.0 * rows * n + fitting
    return Plan(
        n_generated, n_fit, rows, n, by_q, seconds, memory, min_train, keep,
        n_screen + 3 if keep else 0, survivors_max, worker, step=only_constants,
    )  # fmt: skip


def check_plan(
    plan: Plan, jobs: int, yes: bool, shrink: dict[str, str], scheduler: str | None = None
) -> None:
    """Refuse a search beyond the limits, naming what would shrink it: more candidates
    than :data:`~fitrules.base.limits.MAX_SEARCH_CANDIDATES`, more memory than the budget, or
    (unless ``yes``) an estimated time above
    :data:`~fitrules.base.limits.SEARCH_TIME_BUDGET_SECONDS`.

    Raises
    ------
    LimitError
    """
    from fitrules.views.search import estimate_text

    hint = ", ".join(f"{k} {v}" for k, v in shrink.items())
    grammar_hint = ", ".join(
        f"{k} {v}" for k, v in shrink.items() if k not in ("--splits", "--inner-splits")
    )
    what = (
        f"search of {plan.n_generated:,} candidates x {plan.fits_per_candidate:,} nested fits "
        f"on {plan.n_cells:,} cells"
    )
    if plan.n_generated > MAX_SEARCH_CANDIDATES:
        raise LimitError(
            f"the grammar proposes {plan.n_generated:,} candidates, more than the "
            f"{MAX_SEARCH_CANDIDATES:,} a search makes; lower {grammar_hint}"
        )
    memory, where = search_memory(plan, jobs, scheduler)
    reduce = [f"lower {hint}"] if hint else []
    if memory > plan.memory:
        reduce.append("use fewer --jobs or a smaller local:N")
    check_memory(memory, f"{what} {where}", ", or ".join(reduce))
    wall = plan.seconds / max(1, min(jobs, max(plan.n_candidates, 1)))
    if wall > SEARCH_TIME_BUDGET_SECONDS and not yes:
        p = "process" if jobs == 1 else "processes"
        raise LimitError(
            f"{what} would take about {estimate_text(wall)} on {jobs} {p}, more than the "
            f"{estimate_text(SEARCH_TIME_BUDGET_SECONDS)} a search runs unconfirmed; lower "
            f"{hint}, or pass --yes to run it anyway"
        )


def _shrink_options(grammar: Grammar, outer, inner_splits: int, variables) -> dict[str, str]:
    """The options that make a search smaller, with their values now."""
    out = {}
    for name in ("terms", "first_constants", "max_constants", "max_nonlinear", "interactions"):
        out[f"--{name.replace('_', '-')}"] = f"({getattr(grammar, name)})"
    if isinstance(outer, RandomSplit):
        out["--splits"] = f"({outer.n_splits:,})"
    out["--inner-splits"] = f"({inner_splits:,})"
    out["--variables"] = f"({len(variables)})"
    out["--factors"] = f"({len(grammar.factors)})"
    return out


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
) -> Search:
    """Nested validation of every candidate of ``grammar`` on ``grid``; see the module.

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
    (:func:`check_plan`: a search estimated above the time budget runs only with ``yes``);
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
        raise FitrulesError(f"--rule {rule!r} is unknown; allowed: {', '.join(RULES)}")
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
                on_progress, client, kept, allow_none=True, before=len(fitted.kept),
            )  # fmt: skip
            fitted = _merged(fitted, part, masks.n_outer)
            growth.append(_step_row(k, len(new), part))
            budget = k
    ref_scores = [_score(f, state, stop=masks.inner.stop) for f in refs]
    out = _assemble(grid, grammar, fitted, masks, refs, ref_scores, rule, n_generated)
    out.settings["growth"] = (
        dict(first_constants=first.max_constants, max_constants=grammar.max_constants,
             reached=budget, steps=growth, stopped=stop)  # fmt: skip
        if grammar.grows
        else None
    )
    out.settings["ceiling"]["stopped"] = stop
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


def _step_row(k: int, proposed: int, part: _Fitted) -> dict:
    return dict(max_constants=k, proposed=proposed, kept=len(part.kept))


def _growth_stop(
    fitted: _Fitted, masks: NestedMasks, rule: str, budget: int, grammar: Grammar
) -> str | None:
    """Why the budget stops growing at ``budget`` constants, or None to go on: it goes on
    while its largest budget beat the one before it on the front by more than a standard
    error over the outer splits (:func:`front_flags`; a first step of one budget has none to
    beat), to ``grammar.max_constants``."""
    ceiling = f"the ceiling, max_constants {grammar.max_constants}"
    if masks.n_outer < 2:
        if budget >= grammar.max_constants:
            return ceiling
        return (
            f"with {masks.n_outer} outer split the front cannot be tested, so the budget stays "
            f"at first_constants {budget} (raise it to search more constants)"
        )
    e = _Nested.of(fitted.kept, fitted.results, masks)
    if not len(e.k) or int(e.k.max()) < budget:
        return f"no candidate of {budget} constants was kept to fit"
    # a reference of more constants than the step reached waits for its budget
    budgets = sorted(b for b in set(e.k.tolist()) if b <= budget)
    outs = [_pick_at_budget(b, e, masks, rule, fitted)[1] for b in budgets]
    otr, ote = masks.sizes(masks.outer)
    on = front_flags(np.array(outs, float), otr, ote)
    if on[-1] and (len(on) == 1 or any(on[:-1])):  # one budget: nothing yet to beat
        return ceiling if budget >= grammar.max_constants else None
    before = [b for b, f in zip(budgets[:-1], on[:-1], strict=True) if f]
    than = f"{before[-1]} constants" if before else "a smaller budget"
    return (
        f"{budget} constants did not beat {than} by more than a standard error over the "
        "outer splits"
    )


def _step_refusal(
    plan: Plan, k: int, spec: _SearchSpec, variables, jobs: int, yes: bool, scheduler
) -> str | None:
    """Why the next budget, ``k`` constants, is not searched (None: it is): the grammar has
    no such form, none fits on the fewest cells a nested mask fits, or it is beyond the
    limits a search is held to (:func:`check_plan`)."""
    g = spec.grammar
    if not plan.n_generated:
        return (
            f"the grammar has no form of {k} constants (terms {g.terms}, max_nonlinear "
            f"{g.max_nonlinear})"
        )
    if not plan.n_candidates:
        return (
            f"forms of {k} constants need more cells than the {plan.min_train} the smallest "
            "nested split fits"
        )
    shrink = _shrink_options(g, spec.outer, spec.inner_splits, variables)
    try:
        check_plan(plan, jobs, yes, shrink, scheduler)
    except LimitError as err:
        return f"the next budget, {k} constants, is beyond the limits: {err}"
    return None


def _merged(a: _Fitted, b: _Fitted, n_outer: int) -> _Fitted:
    """Two steps' candidates as one search's: a step searched in full lets every outer
    split and the final choice pick its candidates."""
    if a.allowed_outer is None and b.allowed_outer is None:
        outer = final = None
    else:
        def rows(f: _Fitted):
            if f.allowed_outer is not None:
                return f.allowed_outer, f.allowed_final
            return np.ones((len(f.kept), n_outer), bool), np.ones(len(f.kept), bool)

        (oa, fa), (ob, fb) = rows(a), rows(b)
        outer, final = np.concatenate([oa, ob]), np.concatenate([fa, fb])
    note = None
    if a.screen_note or b.screen_note:
        notes = [n for n in (a.screen_note, b.screen_note) if n]
        note = dict(notes[0])
        note["screened"] = sum(n["screened"] for n in notes)
        note["validated"] = sum(n["validated"] for n in notes)
    return _Fitted(
        a.kept + b.kept, a.results + b.results, a.dropped + b.dropped, outer, final, note
    )


@dataclass(frozen=True)
class _SearchSpec:
    """The search asked for, its defaults filled in: what it searches, and how."""

    grid: Grid
    grammar: Grammar
    outer: Any
    objective: Objective
    guard: GuardOptions
    options: FitOptions
    inner_splits: int
    inner_train_frac: float
    seed: int
    rule: str
    heldout: np.ndarray | None = None  # each cell's weight in a held-out error
    heldout_weights: str = SEARCH.heldout_weights


def _checked_inputs(
    spec: _SearchSpec, at: Sequence[dict[str, float]], references: Sequence[Form]
) -> tuple[list[str], Cells, dict[str, int], list[Form]]:
    """The variables searched, the cells, each per-level column's levels and the bound
    references; every bad option refused before the plan is shown."""
    grid, grammar = spec.grid, spec.grammar
    variables = _search_variables(grammar, grid)
    _check_points(at, variables)
    level_cols = _level_columns(grammar, grid)
    cell_vars = list(dict.fromkeys(variables + level_cols))
    cells = _search_cells(grid, cell_vars, spec.objective)
    counts = {col: int(cells.table[col].nunique()) for col in level_cols}
    _check_inner_splits(spec.outer, cells.table, spec.inner_splits, spec.inner_train_frac)
    refs = [f.bind(grid.columns, grid.runs) for f in references]
    for f in refs:  # refused before the plan is shown, as every bad option is
        missing = [v for v in f.bound_variables if v not in cell_vars]
        if missing:
            raise FitrulesError(
                f"reference form {f.name!r} reads {missing}, which the search does not; add "
                f"them to --variables or leave the form out of --reference"
            )
    return variables, cells, counts, refs


def _search_variables(grammar: Grammar, grid: Grid) -> list[str]:
    """The variables searched over: each a column of the grid with more than one value."""
    variables = list(grammar.variables or default_variables(grid))
    if not variables:
        raise FitrulesError(
            f"{grid.label}: no varying numeric column to search over; name them with --variables"
        )
    for v in variables:
        if v not in grid.columns:
            raise FitrulesError(
                f"--variables: {v!r} is not a column of {grid.label}; columns: "
                f"{', '.join(map(str, grid.columns))}"
            )
    for v in variables:
        values = grid.runs[v].dropna().unique()
        if len(values) < 2:  # else every run falls in one cell, refused as repeated seeds
            raise FitrulesError(
                f"--variables: {v!r} has one value over {grid.label} "
                f"({', '.join(map(str, values[:1])) or 'none'}); a search needs columns that vary"
            )
    return variables


def _check_points(at: Sequence[dict[str, float]], variables: list[str]) -> None:
    """Refuse an ``at`` point that does not give exactly the variables of the search."""
    for point in at:  # refused before the plan is shown, as every bad option is
        missing = [v for v in variables if v not in point]
        extra = [k for k in point if k not in variables]
        if missing or extra:
            shown = ",".join(f"{k}={v:g}" for k, v in point.items())
            raise FitrulesError(
                f"--at {shown!r}: "
                + (f"gives no value of {', '.join(missing)}" if missing else "")
                + ("; " if missing and extra else "")
                + (f"{', '.join(extra)} is not a variable of the search" if extra else "")
                + f"; a point gives every variable of the search: {', '.join(variables)}"
            )


def _level_columns(grammar: Grammar, grid: Grid) -> list[str]:
    """The grammar's per-level columns; each must leave room for a term in a form."""
    level_cols = list(grammar.levels)
    for col in level_cols:
        if col not in grid.columns:
            raise FitrulesError(f"grammar levels: {col!r} is not a column of {grid.label}")
        k = int(grid.runs[col].nunique())
        if k + 1 > grammar.max_constants:  # L0[COL] and one term: more than any form may have
            raise FitrulesError(
                f"grammar levels: {col!r} has {k:,} levels, so L0[{col}] is {k:,} constants and "
                f"no form with it fits --max-constants {grammar.max_constants}; raise "
                "--max-constants or leave the column out of --levels"
            )
    return level_cols


def _search_cells(grid: Grid, cell_vars: list[str], objective: Objective) -> Cells:
    """The cells searched on; a cell of value 0 is refused (errors are relative to it)."""
    # as fit and design read them: under log_huber a cell of 3 or more runs is the biweight
    # location of its runs (one corrupted run does not move it), otherwise the mean
    from fitrules.engine.intervals import robust_cells

    cells = robust_cells(grid, cell_vars, objective)
    y = cells.y
    if (y == 0).any():  # reachable with abs_ls, which allows values <= 0
        i = int(np.flatnonzero(y == 0)[0])
        raise FitrulesError(
            f"{grid.label}: the cell {cells.label(i)} has value 0; the search scores held-out "
            "error relative to each cell's value, so it needs no zero (drop it with --where)"
        )
    return cells


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
    if not plan.n_generated:
        raise FitrulesError("the grammar proposes no form; allow more terms, constants or factors")
    if not plan.n_candidates:
        raise SplitError(
            f"every candidate has at least {plan.min_train} constants but the smallest inner "
            f"split fits {plan.min_train} cells; lower --max-constants or raise "
            "--inner-train-frac"
        )
    if on_plan is not None:
        on_plan(plan, plan.seconds / max(1, min(jobs, max(plan.n_candidates, 1))))


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
    if not proposed:
        raise FitrulesError("the grammar proposes no form; allow more terms, constants or factors")
    fits_ok = [c for c in proposed if c.n_constants < n_fit]
    too_big = [c for c in proposed if c.n_constants >= n_fit]
    if not fits_ok:
        raise SplitError(
            f"every candidate has at least {n_fit} constants but the smallest inner split fits "
            f"{n_fit} cells; lower --max-constants or raise --inner-train-frac"
        )
    return proposed, fits_ok, too_big


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
    )


@dataclass
class _Fitted:
    """The candidates kept and their nested errors, those dropped with why, and a staged
    search's survivors."""

    kept: list[Candidate]
    results: list[Scored]
    dropped: list[tuple[Candidate, str]]
    allowed_outer: np.ndarray | None = None
    allowed_final: np.ndarray | None = None
    screen_note: dict | None = None


class _KeptPrints:
    """The fingerprints of the candidates kept so far and their names: the twins a new
    candidate is checked against, across every step of a growing budget."""

    def __init__(self) -> None:
        self.twins = TwinIndex(DUPLICATE_RTOL)
        self.names: list[str] = []


def _fit_candidates(
    fits_ok: list[Candidate],
    too_big: list[Candidate],
    state: dict,
    screen: int | str,
    jobs: int,
    on_progress: Callable[[int], None] | None,
    client,
    kept: _KeptPrints | None = None,
    allow_none: bool = False,
    before: int = 0,
) -> _Fitted:
    """Drop the candidates that cannot be told apart (from each other and from those
    ``kept`` before), then score the others; with ``allow_none``, a step whose candidates
    are all dropped is empty rather than refused; ``before`` candidates of earlier steps count
    towards ``screen="auto"``'s threshold (a step of a large search is staged too)."""
    done = on_progress or (lambda k: None)
    forms = state["forms"]
    size = max(1, min(25, len(forms) // max(1, 4 * jobs)))
    prints = _run(_chunks(range(len(forms)), size), _fingerprint_task, state, jobs, done, client)
    dropped, keep_idx = _prune(prints, fits_ok, too_big, state, kept or _KeptPrints())
    todo = list(keep_idx)
    done(len(forms) - len(todo))
    scored, allowed_outer, allowed_final, screen_note = _score_candidates(
        todo, fits_ok, state, screen, size, jobs, done, client, before
    )
    if not keep_idx and not allow_none:
        counts = Counter(why.split(" as ")[0].split(" (")[0] for _, why in dropped)
        raise FitrulesError(
            "every proposed form was dropped before fitting ("
            + "; ".join(f"{k}: {v}" for k, v in counts.items())
            + "); allow more terms, factors or variables"
        )
    return _Fitted(
        [fits_ok[i] for i in keep_idx],
        [scored[i] for i in keep_idx],
        dropped,
        allowed_outer,
        allowed_final,
        screen_note,
    )


TOO_BIG = "more constants than the fewest cells fitted"  # a dropped candidate's reason


def _turn_column(outer) -> str | None:
    """The column whose levels shape sense judges: the one an extrapolation asks about (the
    first named, when it asks about several)."""
    return outer.column if isinstance(outer, RollingOrigin | Extrapolate) else None


def _prune(
    prints: list,
    fits_ok: list[Candidate],
    too_big: list[Candidate],
    state: dict,
    kept: _KeptPrints,
) -> tuple[list[tuple[Candidate, str]], list[int]]:
    """The candidates dropped, with why (too many constants, a constant with no effect, the
    same function as one kept), and the indices of those kept (added to ``kept``)."""
    n_fit = state["masks"].min_train
    dropped: list[tuple[Candidate, str]] = [
        (c, f"{TOO_BIG} ({n_fit})") for c in too_big
    ]
    keep_idx: list[int] = []
    twins, owners = kept.twins, kept.names
    scale = np.maximum(np.abs(state["probes"]), 1e-300).ravel()
    for i, identifiable, values in prints:
        c = fits_ok[i]
        if not identifiable:
            dropped.append((c, "a constant has no effect on the grid's cells"))
            continue
        if values is not None and np.isfinite(values).all():
            fp = values.ravel() / scale
            same = twins.twin(fp)
            if same is not None:
                dropped.append((c, f"the same function on these cells as {owners[same]}"))
                continue
            twins.add(fp)
            owners.append(c.form.name)
        keep_idx.append(i)
    return dropped, keep_idx


def _score_candidates(
    todo: list[int],
    fits_ok: list[Candidate],
    state: dict,
    screen: int | str,
    size: int,
    jobs: int,
    done: Callable[[int], None],
    client,
    before: int = 0,
) -> tuple[dict[int, Scored], np.ndarray | None, np.ndarray | None, dict | None]:
    """Each candidate's nested errors: all in full or, staged, the screen's survivors in
    full; with the survivors of each outer split and the final choice, and a note."""
    scored: dict[int, Scored] = {}
    keep_n = screen_size(screen, before + len(todo))
    if not keep_n:
        for i, s in _run(_chunks(todo, size), _nested_task, state, jobs, done, client):
            scored[i] = s
        return scored, None, None, None
    # stage 1: every candidate on the first inner splits of each outer split and the
    # first final splits; stage 2: the full nested fits of those that rank in the top
    # keep_n of their number of constants somewhere (each outer split then picks only
    # among the candidates its own screen kept: the screen reads no outer test cell)
    masks = state["masks"]
    state["screen_rows"] = screen_rows(masks, SCREEN_SPLITS)
    for i, s in _run(_chunks(todo, size), _screen_task, state, jobs, done, client):
        scored[i] = s
    k_of = np.array([fits_ok[i].n_constants for i in todo])
    errs = np.array([scored[i].error for i in todo])
    allowed_outer, allowed_final = survivors(errs, k_of, masks, SCREEN_SPLITS, keep_n)
    full = [todo[j] for j in np.flatnonzero(allowed_outer.any(axis=1) | allowed_final)]
    for i, s in _run(_chunks(full, size), _nested_task, state, jobs, done, client):
        scored[i] = s
    screen_note = {"keep": keep_n, "splits": SCREEN_SPLITS, "screened": len(todo),
                   "validated": len(full)}  # fmt: skip
    return scored, allowed_outer, allowed_final, screen_note


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


def _along(outer) -> str:
    """The column (or columns, "N and D") a structured protocol asks about."""
    columns = getattr(outer, "columns", (outer.column,))
    return " and ".join(columns)


def _inner_text(outer, n_inner: int, frac: float, inside: bool = True) -> str:
    """How the candidates are ranked inside each outer training set, in words."""
    if asks_levels(outer) and not inside:
        return (
            f"{n_inner} inner random splits fitting {frac:.3g} of its cells (an outer training "
            f"set has too few levels of {_along(outer)} to ask the outer question inside it: "
            "the candidates are ranked by interpolation there)"
        )
    if isinstance(outer, RollingOrigin | Extrapolate):
        return (
            f"{n_inner} inner rolling origin{'s' if n_inner != 1 else ''} along "
            f"{_along(outer)} (fit below one of the "
            "training set's top levels, score the levels from it on, with the outer split's "
            "horizon)"
        )
    if isinstance(outer, LeaveOneLevelOut):
        return f"{n_inner} inner splits leaving one level of {outer.column} out in turn"
    return f"{n_inner} inner random splits fitting {frac:.3g} of its cells"


def guard_pick(
    s: Search, cells, masks: NestedMasks, objective: Objective, guard: GuardOptions, at: list
) -> dict:
    """The wild-extrapolation guard on the search's pick, as compare runs it: its fit on
    each outer training set checked at every cell of the grid, and its fit on all cells at
    the points ``at``. Reads no held-out value: only each fit's training cells and the
    design."""
    form = s.chosen
    out: dict = {"form": None, "expression": None, "outer": [], "outer_splits": 0, "at": []}
    if form is None:
        out["named"] = False
        return out
    out.update(form=form.name, expression=form.expression)
    X, y = cells.X, cells.y
    labels = [cells.label(i) for i in range(len(y))]
    train = masks.train[masks.outer]
    fits = fit_splits(form, X, y, train, objective)
    out["outer_splits"] = len(train)
    for label, g in zip(
        masks.outer_labels,
        check_fits(form, X, y, train, fits, objective, guard, labels),
        strict=True,
    ):
        if g.wild:
            out["outer"].append(f"outer split {label}: {'; '.join(g.reasons)}")
    if at:
        Xa = {v: np.concatenate([X[v], [p[v] for p in at]]) for v in form.bound_variables}
        # never read: the guard and the fit see only the training cells' values
        ya = np.concatenate([y, np.full(len(at), float(np.median(y)))])
        whole = np.concatenate([np.ones(len(y), bool), np.zeros(len(at), bool)])
        names = labels + ["--at " + ",".join(f"{k}={v:g}" for k, v in p.items()) for p in at]
        full = fit_splits(form, Xa, ya, whole[None, :], objective)
        g = check_fits(form, Xa, ya, whole[None, :], full, objective, guard, names)[0]
        if g.wild:
            out["at"] = list(g.reasons)
    out["named"] = bool(out["outer"] or out["at"])
    return out


def pick_guard_warning(g: dict) -> str:
    """One line: the pick the guard names, where, and what compare would say."""
    parts = []
    if g["outer"]:
        parts.append(
            f"{len(g['outer'])} of its {g['outer_splits']} fits on the outer training sets"
        )
    if g["at"]:
        parts.append("its fit on all cells at the --at points (" + "; ".join(g["at"]) + ")")
    return (
        f"the pick {g['form']} ({g['expression']}) is named wild by the extrapolation guard "
        f"(from its training fits alone, as compare names fits): {' and '.join(parts)}; its "
        "predictions beyond the fitted cells run away from the values it was fitted on"
    )


def _seed_holdout(grid, cells, masks, objective, seeds: str, seed: int):
    """The cells-and-seeds protocol's values for the nested rows, and a note naming the
    protocol the outer error used (see :func:`run_search`)."""
    from fitrules.base.limits import SEED_PROTOCOLS
    from fitrules.engine.intervals import NO_SHARED_IDS, no_offset_reason, seed_offset
    from fitrules.model.splits import seed_folds

    if seeds not in SEED_PROTOCOLS:
        raise FitrulesError(f"seeds {seeds!r} is unknown; allowed: {', '.join(SEED_PROTOCOLS)}")
    cells_note = (
        "cells: the outer test cells' runs at the seed ids the fit read (misses the grid's "
        "seed offset, which new runs at new seed ids show)"
    )
    if seeds == "cells":
        return None, cells_note
    off = seed_offset(grid, cells, objective)
    if off is None:
        why = no_offset_reason(grid, cells)
        return None, f"{cells_note}; {why}" + (", so nothing is missed" if why == NO_SHARED_IDS
                                               else "")  # fmt: skip
    held = seed_folds(grid, cells, off, SeedHoldout(seed=_sub_seed(seed, _SEEDS)))
    if held is None:
        return None, cells_note + "; seed ids could not be held out (a cell lacks runs at them)"
    n_folds, t, k, excess = len(held["folds"]), held["t"], held["k"], held["excess"]
    note = (
        f"cells and seeds: the seed ids in {n_folds} folds, outer split o held out with "
        f"fold o mod {n_folds} ({t} of {len(off.seeds)} ids), its fit reading the other "
        "ids' runs (its inner splits, which rank the candidates, every run of its training "
        "cells, as the choice from all cells does); the outer errors rescaled by one factor "
        "that takes off the expected excess of their pooled mean square over that of the mean "
        f"of {k} new runs at fresh seed ids ({100 * math.sqrt(max(excess, 0.0)):.3g}% rms)"
    )
    return held, note


def _inner_median(inner: np.ndarray) -> float:
    """Median over outer splits of the median over inner splits (failed fits left out)."""
    per = [float(np.median(r[np.isfinite(r)])) for r in inner if np.isfinite(r).any()]
    return float(np.median(per)) if per else float("nan")


def front_flags(outer: np.ndarray, n_train: int, n_test: int) -> list[bool]:
    """Which budgets are on the front, from their outer errors (budgets x outer splits, in
    increasing budget; NaN where a split picked nothing).

    The first budget with an outer error is on it; a larger budget joins only when its outer
    errors are lower than those of the last budget on the front by more than one standard
    error: the mean paired log ratio over the outer splits both have, with the variance
    corrected for the overlap of random splits (1/J + n_test/n_train, Nadeau and Bengio).
    """
    flags: list[bool] = []
    last = -1
    for b, row in enumerate(outer):
        if last < 0:
            flags.append(bool(np.isfinite(row).any()))
            last = b if flags[-1] else -1
            continue
        both = np.isfinite(row) & np.isfinite(outer[last]) & (row > 0) & (outer[last] > 0)
        d = np.log(row[both]) - np.log(outer[last][both])
        J = len(d)
        if J < 2:
            flags.append(False)
            continue
        se = math.sqrt(float(np.var(d, ddof=1)) * (1 / J + n_test / max(n_train, 1)))
        flags.append(bool(d.mean() + se < 0))
        if flags[-1]:
            last = b
    return flags


def screen_size(screen: int | str, n: int) -> int:
    """Survivors per outer split and number of constants of a staged search (0: none,
    every candidate gets the full nested fits). ``auto``: :data:`SCREEN_KEEP` above
    :data:`SCREEN_ABOVE` candidates, else 0."""
    if screen == "auto":
        return SCREEN_KEEP if n > SCREEN_ABOVE else 0
    return int(screen)


def screen_rows(masks: NestedMasks, k: int) -> np.ndarray:
    """The rows a staged search's screen fits: the first ``k`` inner splits of each outer
    split and the first ``k`` final splits."""
    rows = np.zeros(len(masks.train), bool)
    k = min(k, masks.n_inner)
    for o in range(masks.n_outer):
        start = masks.n_outer + o * masks.n_inner
        rows[start : start + k] = True
    f = masks.final
    rows[f.start : min(f.start + max(k, 1), f.stop)] = True
    return rows


def survivors(
    errors: np.ndarray, n_constants: np.ndarray, masks: NestedMasks, k: int, keep: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which candidates each outer split (C x outer) and the final choice (C,) keep after
    the screen: per number of constants, the ``keep`` with the lowest median screened
    error (log scale; a failed fit counts as infinitely bad)."""
    C = len(errors)
    k = min(k, masks.n_inner)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(np.where(np.isfinite(errors) & (errors > 0), errors, np.inf))
    L = np.where(np.isnan(L), np.inf, L)

    def top(score: np.ndarray) -> np.ndarray:
        out = np.zeros(C, bool)
        for c in np.unique(n_constants):
            idx = np.flatnonzero(n_constants == c)
            order = idx[np.argsort(score[idx], kind="stable")][:keep]
            out[order[np.isfinite(score[order])]] = True
        return out

    allowed = np.zeros((C, masks.n_outer), bool)
    for o in range(masks.n_outer):
        start = masks.n_outer + o * masks.n_inner
        allowed[:, o] = top(np.median(L[:, start : start + k], axis=1))
    f = masks.final.start
    final = top(np.median(L[:, f : f + max(k, 1)], axis=1))
    return allowed, final


@dataclass(frozen=True)
class _Nested:
    """The kept candidates' errors by kind of nested row, and the sizes the rule reads."""

    outer: np.ndarray  # (C, outer splits)
    inner: np.ndarray  # (C, outer splits, inner splits)
    final: np.ndarray  # (C, final splits)
    whole_ok: np.ndarray  # (C,): the fit on all cells did not fail
    k: np.ndarray  # (C,): constants
    names: list[str]
    tr: np.ndarray  # (outer, inner): cells each inner split fits
    te: np.ndarray  # (outer, inner): cells each inner split holds out
    ftr: int  # cells each final split fits
    fte: int  # cells each final split holds out

    @classmethod
    def of(cls, kept: list[Candidate], results: list[Scored], masks: NestedMasks) -> _Nested:
        """Split each candidate's errors by kind of row."""
        n_out, n_in = masks.n_outer, masks.n_inner
        err = np.array([r.error for r in results])  # (C, rows)
        ftr, fte = masks.sizes(masks.final)
        return cls(
            err[:, masks.outer],
            err[:, masks.inner].reshape(len(kept), n_out, n_in),
            err[:, masks.final],
            np.array([r.valid[masks.whole] for r in results], bool),
            np.array([c.n_constants for c in kept]),
            [c.form.name for c in kept],
            masks.train[masks.inner].reshape(n_out, n_in, -1).sum(axis=2),
            masks.test[masks.inner].reshape(n_out, n_in, -1).sum(axis=2),
            ftr,
            fte,
        )


def _assemble(
    grid, grammar, fitted: _Fitted, masks: NestedMasks, refs, ref_scores, rule, n_generated
) -> Search:
    """The search's tables from the kept candidates' nested errors."""
    kept, dropped = fitted.kept, fitted.dropped
    e = _Nested.of(kept, fitted.results, masks)
    budgets = sorted(set(e.k.tolist()))
    rows, budget_rows = [], []
    picks_all = np.zeros(len(kept), int)
    outs_by_budget = []
    for b in budgets:
        b_rows, outs, picked, budget_row = _pick_at_budget(b, e, masks, rule, fitted)
        rows += b_rows
        outs_by_budget.append(outs)
        if b == budgets[-1]:
            for i in picked:
                if i >= 0:
                    picks_all[i] += 1
        budget_rows.append(budget_row)
    budget_df, testable = _budget_table(budget_rows, outs_by_budget, budgets, masks)
    choices = pd.DataFrame(rows)
    choices["form"] = pd.Series(
        [v if isinstance(v, str) else None for v in choices["form"]], dtype=object
    )
    cand_df = _candidate_table(kept, e, picks_all, choices, budgets)
    best = budget_df[budget_df["on_front"]]
    best_b = int(best["max_constants"].iloc[-1]) if len(best) else budgets[-1]
    at_best = choices[choices["budget"] == best_b]["outer_pct"].to_numpy(float)
    ref_df = _reference_table(refs, ref_scores, masks, at_best, best_b)
    reasons: dict[str, int] = {}
    for _, why in dropped:
        key = why.split(" as ")[0].split(" (")[0]
        reasons[key] = reasons.get(key, 0) + 1
    settings: dict = {
        "grammar": grammar.describe(),
        # issue 41: how many forms were too large for the fewest cells a nested split fits
        "too_few_cells": {"min_train": masks.min_train, "set_aside": reasons.get(TOO_BIG, 0)},
        "n_outer": masks.n_outer,
        "n_inner": masks.n_inner,
        "n_final": int(e.final.shape[1]),
        "best_budget": best_b,
        "front_testable": testable,
        "front_at_ceiling": _front_at_ceiling(budget_df, budgets, testable),
        "ceiling": _ceiling(grammar, budgets),
    }
    warnings = []
    if len(kept) and (picks_all == 0).all():
        warnings.append("no outer split could pick a form: every candidate failed there")
    return Search(
        grid.label,
        grammar,
        settings,
        cand_df,
        budget_df,
        choices,
        ref_df,
        reasons,
        pd.DataFrame(
            [(c.form.name, c.form.expression, why) for c, why in dropped],
            columns=["name", "expression", "reason"],
        ),
        n_generated,
        {c.form.name: c.form for c in kept},
        warnings=warnings,
    )


def _front_at_ceiling(budget_df: pd.DataFrame, budgets: list[int], testable: bool) -> bool:
    """Whether the front was still falling where the search stopped: its largest budget
    joined the front by beating a smaller one, so nothing says a larger one would not."""
    if not testable or len(budgets) < 2:
        return False
    on = budget_df["on_front"].to_numpy(bool)
    return bool(on[-1] and on[:-1].any())


def _ceiling(grammar, budgets: list[int]) -> dict:
    """What stopped the budgets: the grammar's limits and the largest budget it reached.

    Below ``max_constants`` the terms or the nonlinear constants ran out first, so those are
    the limits to raise."""
    top = int(budgets[-1]) if budgets else 0
    limits = ["max_constants"] if top >= grammar.max_constants else ["terms", "max_nonlinear"]
    return {
        "largest_budget": top,
        "max_constants": int(grammar.max_constants),
        "terms": int(grammar.terms),
        "max_nonlinear": int(grammar.max_nonlinear),
        "raise": limits,
    }


def _pick_at_budget(
    b: int, e: _Nested, masks: NestedMasks, rule: str, fitted: _Fitted
) -> tuple[list[dict], list[float], list[int], dict]:
    """At most ``b`` constants: each outer split's pick (its rows, outer errors and picks)
    and the budget's row, with the choice from all cells."""
    from fitrules.engine.metrics import robust_summary

    allowed = e.k <= b
    rows, outs, ins, picked = [], [], [], []
    for o in range(masks.n_outer):
        eligible = allowed & np.isfinite(e.outer[:, o])
        if fitted.allowed_outer is not None:  # a staged search: what this split's screen kept
            eligible &= fitted.allowed_outer[:, o]
        tr, te = int(e.tr[o].min()), int(e.te[o].min())
        i, score = select(e.inner[:, o, :], e.k, eligible, tr, te, rule)
        e_out = float(e.outer[i, o]) if i >= 0 else float("nan")
        rows.append(
            dict(
                budget=b,
                outer_split=masks.outer_labels[o],
                form=e.names[i] if i >= 0 else None,
                inner_pct=score,
                outer_pct=e_out,
            )
        )
        outs.append(e_out)
        ins.append(score)
        picked.append(i)
    # from all cells: a candidate whose fit on every cell fails cannot be picked
    final_ok = allowed & e.whole_ok
    if fitted.allowed_final is not None:
        final_ok &= fitted.allowed_final
    fi, fscore = select(e.final, e.k, final_ok, e.ftr, e.fte, rule)
    valid = np.isfinite(outs)
    o_arr = np.asarray(outs)[valid]
    i_arr = np.asarray(ins)[valid]
    counts = pd.Series([e.names[i] for i in picked if i >= 0]).value_counts()
    n_out = masks.n_outer
    row = dict(
        max_constants=b,
        n_candidates=int(allowed.sum()),
        outer_splits=int(valid.sum()),
        **robust_summary(o_arr, "outer_"),
        inner_median_pct=float(np.median(i_arr)) if len(i_arr) else np.nan,
        optimism=_ratio(np.median(o_arr), np.median(i_arr)) if len(i_arr) else np.nan,
        most_picked=str(counts.index[0]) if len(counts) else None,
        most_picked_share=float(counts.iloc[0] / n_out) if len(counts) else 0.0,
        distinct_picks=int(len(counts)),
        final_choice=e.names[fi] if fi >= 0 else None,
        final_inner_pct=fscore,
        final_choice_share=float(sum(i == fi for i in picked) / n_out) if fi >= 0 else 0.0,
    )
    return rows, outs, picked, row


def _budget_table(
    budget_rows: list[dict], outs_by_budget: list, budgets: list[int], masks: NestedMasks
) -> tuple[pd.DataFrame, bool]:
    """One row per budget, with which are on the front; and whether the front was tested."""
    budget_df = pd.DataFrame(budget_rows)
    for col in ("most_picked", "final_choice"):  # None, not NaN, where nothing was picked
        budget_df[col] = pd.Series(
            [v if isinstance(v, str) else None for v in budget_df[col]], dtype=object
        )
    otr, ote = masks.sizes(masks.outer)
    # the front needs a standard error over outer splits: with one outer split it cannot be
    # tested, and the unrestricted budget (whose pick the inner splits alone made) is reported
    testable = masks.n_outer >= 2
    budget_df["on_front"] = (
        front_flags(np.array(outs_by_budget, float), otr, ote)
        if testable
        else [b == budgets[-1] for b in budgets]
    )
    return budget_df, testable


def _candidate_table(
    kept: list[Candidate], e: _Nested, picks_all: np.ndarray, choices: pd.DataFrame, budgets
) -> pd.DataFrame:
    """One row per kept candidate: its shape, how often it was picked, its outer errors."""
    outer = e.outer
    own = [float(np.median(r[np.isfinite(r)])) if np.isfinite(r).any() else np.nan for r in outer]
    cand_df = pd.DataFrame(
        dict(
            name=e.names,
            expression=[c.form.expression for c in kept],
            key=[c.key for c in kept],
            n_constants=e.k,
            n_nonlinear=[c.n_nonlinear for c in kept],
            n_terms=[c.n_terms for c in kept],
            picked=picks_all,
            outer_valid=np.isfinite(outer).sum(axis=1) if len(kept) else [],
            own_outer_median_pct=own,
        )
    )
    at_top = choices[choices["budget"] == budgets[-1]]
    when = at_top.groupby("form")["outer_pct"].median()
    cand_df["outer_median_when_picked_pct"] = [float(when.get(nm, np.nan)) for nm in e.names]
    return cand_df


def _reference_table(
    refs, ref_scores, masks: NestedMasks, at_best: np.ndarray, best_b: int
) -> pd.DataFrame:
    """One row per reference form: its outer and inner errors beside the search's."""
    from fitrules.engine.metrics import robust_summary

    n_out, n_in = masks.n_outer, masks.n_inner
    ref_rows = []
    for f, sc in zip(refs, ref_scores, strict=True):
        e = sc.error[masks.outer]
        both = np.isfinite(e) & np.isfinite(at_best)
        ref_rows.append(
            dict(
                form=f.name,
                expression=f.expression,
                n_constants=len(f.constants),
                outer_splits=int(np.isfinite(e).sum()),
                **robust_summary(e[np.isfinite(e)], "outer_"),
                inner_median_pct=_inner_median(sc.error[masks.inner].reshape(n_out, n_in)),
                search_budget=best_b,
                search_lower=int((at_best[both] < e[both]).sum()),
                paired_splits=int(both.sum()),
                median_ratio=_median_ratio(at_best[both], e[both]),
            )
        )
    ref_df = pd.DataFrame(ref_rows)
    if len(ref_df):  # the same ratio without selection: what the protocol alone gives
        ref_df["outer_over_inner"] = [
            _ratio(a, b)
            for a, b in zip(ref_df["outer_median_pct"], ref_df["inner_median_pct"], strict=True)
        ]
    return ref_df


def _ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 (a grid with no noise: every error 0)."""
    return float(a / b) if b > 0 else float("nan")


def _median_ratio(a: np.ndarray, b: np.ndarray) -> float:
    """Median over splits of a / b, where b > 0."""
    ok = b > 0
    return float(np.median(a[ok] / b[ok])) if ok.any() else float("nan")
