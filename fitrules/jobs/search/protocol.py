"""The nested validation protocol: the outer splits, the inner splits of each outer training
set and of all cells, their seeds, the seed ids held out, and how each is told in words."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from fitrules.base.errors import FitrulesError, SplitError
from fitrules.model.splits import (
    Extrapolate,
    LeaveOneLevelOut,
    RandomSplit,
    RollingOrigin,
    SeedHoldout,
    inner_masks,
)


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
            inner_split = partial(RandomSplit, inner_splits, inner_train_frac,
                                  _sub_seed(seed, _INNER, o))  # fmt: skip
            split = _check_inner(labels[o], len(idx), inner_split)
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
        _check_inner(label, m, lambda: RandomSplit(inner_splits, frac, 0),
                     lambda: outer.labels(table)[0])  # fmt: skip
    RandomSplit(2 * inner_splits, frac, 0).check(n)


def _turn_column(outer) -> str | None:
    """The column whose levels shape sense judges: the one an extrapolation asks about (the
    first named, when it asks about several)."""
    return outer.column if isinstance(outer, RollingOrigin | Extrapolate) else None


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


def _check_inner(label, n_cells, make_split, first_label=None):
    """The inner splits ``make_split()`` makes, refused (a bad inner setting too) when an
    outer split of ``n_cells`` cells is too small for them, naming the split
    (``first_label()`` when ``label`` is None)."""
    try:
        split = make_split()
        split.check(int(n_cells))
        return split
    except SplitError as err:
        if label is None:
            label = first_label()
        raise SplitError(
            f"outer split {label!r} fits {n_cells} cells, too few for inner splits: {err}"
        ) from None
