"""Split generators: seeded sequences of (train, test) cell indices.

One splitter with one seed yields one sequence, and every form is scored on that same
sequence: the pairing is what makes "A beat B in 288 of 300 splits" meaningful. The protocol
follows scikit-learn's splitters: ``split(n_cells)`` validates and ``_iter_indices`` works.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import SplitError, param
from fitrules.base.limits import (
    MAX_SPLITS,
    RANDOM_SPLITS,
    RANDOM_TRAIN_FRAC,
    check_count,
    check_seed,
)

# the seed folds of a tuning: cross-fitted (choose on half the seeds, measure on the other
# half, then the other way round) or chosen on named tune seeds
CROSS_FIT = "cross-fit"
TUNE_SEEDS = "tune seeds"
FOLD_AB, FOLD_BA = "A->B", "B->A"


@dataclass(frozen=True)
class RandomSplit:
    """Random subsets of cells: ``train_frac`` of them fitted, the rest held out.

    Parameters
    ----------
    n_splits : number of splits.
    train_frac : fraction of cells in each training set, in (0, 1); rounded to a count.
    seed : seed of the one random sequence all forms share.

    Examples
    --------
    >>> sp = RandomSplit(n_splits=2, train_frac=0.5, seed=0)
    >>> [len(tr) for tr, te in sp.split(10)]
    [5, 5]
    """

    n_splits: int = 300
    train_frac: float = 1 / 3
    seed: int = 0

    name = "random"

    def __post_init__(self) -> None:
        if not isinstance(self.n_splits, int | np.integer) or self.n_splits < 1:
            raise SplitError(f"--splits {self.n_splits}: must be an integer >= 1")
        check_count(int(self.n_splits), "--splits", 1, MAX_SPLITS)
        check_seed(self.seed, "--seed")
        if not (isinstance(self.train_frac, int | float) and 0 < self.train_frac < 1):
            raise SplitError(f"{param('train_frac')} {self.train_frac}: must be in (0, 1)")

    def n_train(self, n_cells: int) -> int:
        return int(np.floor(self.train_frac * n_cells + 0.5))

    def check(self, n_cells: int) -> None:
        """Raise :class:`SplitError` if these splits cannot be made from ``n_cells`` cells."""
        k = self.n_train(n_cells)
        if k < 1 or k >= n_cells:
            raise SplitError(
                f"{param('train_frac')} {self.train_frac:g} of {n_cells} cells gives {k} "
                f"training and {n_cells - k} held-out cells; each needs at least 1"
            )

    def split(self, n_cells: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(train, test)`` sorted index arrays, disjoint and covering all cells."""
        self.check(n_cells)
        yield from self._iter_indices(n_cells)

    def _iter_indices(self, n_cells: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng(self.seed)
        k = self.n_train(n_cells)
        for _ in range(self.n_splits):
            perm = rng.permutation(n_cells)
            yield np.sort(perm[:k]), np.sort(perm[k:])

    def masks(self, n_cells: int) -> np.ndarray:
        """(n_splits, n_cells) boolean array, True for training cells."""
        out = np.zeros((self.n_splits, n_cells), bool)
        for i, (train, _) in enumerate(self.split(n_cells)):
            out[i, train] = True
        return out

    def masks_for(self, table) -> np.ndarray:
        return self.masks(len(table))

    def labels(self, table) -> list[str]:
        return [f"random split {i}" for i in range(self.n_splits)]

    def n_train_min(self, table) -> int:
        self.check(len(table))
        return self.n_train(len(table))

    def describe(self) -> dict:
        return {
            "protocol": self.name,
            "n_splits": int(self.n_splits),
            "train_frac": float(self.train_frac),
            "seed": int(self.seed),
        }


# ------------------------------------------------------------------ structured protocols
# Each protocol turns a table of cells into (S, n) training masks; the held-out cells of a
# split are the rest. ``masks_for`` validates, so a split that cannot be made is an error.


def _levels(table, column: str) -> np.ndarray:
    if column not in table.columns:
        stats = {"value", "n_seeds", "std", "sem", "_source"}
        names = [str(c) for c in table.columns if c not in stats]
        raise SplitError(
            f"split column {column!r} is not a variable of the compared forms; "
            f"variables: {', '.join(names)}"
        )
    return np.sort(table[column].unique())


@dataclass(frozen=True)
class LeaveOneLevelOut:
    """Each level of ``column`` held out in turn; the other levels are fitted."""

    column: str
    name = "leave-one-level-out"

    def masks_for(self, table) -> np.ndarray:
        levels = _levels(table, self.column)
        if len(levels) < 2:
            raise SplitError(
                f"leave-one-level-out:{self.column} needs at least 2 levels of "
                f"{self.column!r}; the grid has {len(levels)}"
            )
        values = table[self.column].to_numpy()
        return np.stack([values != v for v in levels])

    def labels(self, table) -> list[str]:
        return [f"{self.column}={v:g} held out" for v in _levels(table, self.column)]

    def n_train_min(self, table) -> int:
        return int(self.masks_for(table).sum(axis=1).min())

    def describe(self) -> dict:
        return {
            "protocol": f"{self.name}:{self.column}",
            "n_splits": None,
            "train_frac": None,
            "seed": None,
        }


def _cut_text(column: str, threshold: float | None) -> str:
    return column if threshold is None else f"{column}>={threshold:g}"


class _Cuts:
    """The columns an extrapolation cuts (``column``, ``threshold`` and ``also``), shared by
    :class:`Extrapolate` and :class:`RollingOrigin`."""

    column: str
    threshold: float | None
    also: tuple[tuple[str, float | None], ...]

    def __post_init__(self) -> None:
        if len(set(self.columns)) < len(self.columns):
            raise SplitError(f"extrapolate:{','.join(self.columns)}: a column is named twice")

    @property
    def cuts(self) -> tuple[tuple[str, float | None], ...]:
        """Every extrapolated column with its threshold, the first one first."""
        return ((self.column, self.threshold), *self.also)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.cuts)

    def _per_column(self, table) -> list[tuple[str, float, np.ndarray, int]]:
        """Each column's name, cut (its top level or threshold), levels and horizon (the
        levels at or above the cut)."""
        out = []
        for col, threshold in self.cuts:
            levels = _levels(table, col)
            cut = levels[-1] if threshold is None else threshold
            h = len(levels) - int(np.searchsorted(levels, cut, side="left"))
            out.append((col, cut, levels, h))
        return out


@dataclass(frozen=True)
class Extrapolate(_Cuts):
    """Fit on the cells below a level of ``column``, score the cells at or above it.

    With no ``threshold`` the highest level is held out. ``also`` names more columns
    extrapolated at once, each ``(column, threshold or None)``: the fit reads the cells below
    every cut and the score the cells at or above any (a held-out split beyond the grid in
    several variables, such as the data-constrained grid's ``N >= 4.2e9 or D >= 6e11``).
    """

    column: str
    threshold: float | None = None
    also: tuple[tuple[str, float | None], ...] = ()
    name = "extrapolate"

    def _cut_values(self, table) -> list[tuple[str, float, np.ndarray]]:
        return [(col, cut, levels) for col, cut, levels, _ in self._per_column(table)]

    def masks_for(self, table) -> np.ndarray:
        cuts = self._cut_values(table)
        where = ",".join(f"{col}>={cut:g}" for col, cut, _ in cuts)
        train = np.ones(len(table), bool)
        for col, cut, levels in cuts:
            below = table[col].to_numpy() < cut
            if len(cuts) > 1 and below.all():  # one column's cut above its levels asks nothing
                raise SplitError(
                    f"extrapolate:{where}: {col}>={cut:g} holds out no level of {col} "
                    f"(levels: {', '.join(f'{v:g}' for v in levels)})"
                )
            train &= below
        if train.all() or not train.any():
            levels = "; ".join(
                f"levels of {col}: {', '.join(f'{v:g}' for v in lv)}" for col, _, lv in cuts
            )
            raise SplitError(
                f"extrapolate:{where} leaves "
                f"{'no held-out' if train.all() else 'no training'} cells ({levels})"
            )
        return train[None, :]

    def labels(self, table) -> list[str]:
        cuts = self._cut_values(table)
        fit = " and ".join(f"{col} < {cut:g}" for col, cut, _ in cuts)
        score = " or ".join(f"{col} >= {cut:g}" for col, cut, _ in cuts)
        return [f"fit {fit}, score {score}"]

    def n_train_min(self, table) -> int:
        return int(self.masks_for(table).sum())

    def describe(self) -> dict:
        return {
            "protocol": f"{self.name}:" + ",".join(_cut_text(c, t) for c, t in self.cuts),
            "n_splits": 1,
            "train_frac": None,
            "seed": None,
        }


@dataclass(frozen=True)
class RollingOrigin(_Cuts):
    """Extrapolation along ``column`` asked at several cut points (a rolling origin).

    The split asked for (fit below the cut, the top level or ``threshold``, score the
    ``h`` levels from it on) and, below it, up to ``origins - 1`` more: fit below each lower
    level, score the next ``h`` levels, so that the question keeps its horizon. A cut is used
    only when at least ``min_levels`` levels lie below it, so that the fits inside each
    training set can extrapolate too; when none can be, the split asked for is the only one.
    With ``also`` (more columns extrapolated at once, as :class:`Extrapolate`'s) every column's
    cut steps down one level at a time together: the fit reads the cells below every cut, the
    score the others within every column's horizon.
    """

    column: str
    threshold: float | None = None
    origins: int = 3
    min_levels: int = 3
    also: tuple[tuple[str, float | None], ...] = ()
    name = "rolling-origin"

    def _steps(self, table) -> tuple[list[tuple[str, np.ndarray, int]], list[int]]:
        """(each column's name, levels and horizon in levels; the steps down from the cut
        asked for, 0 first, at which every column keeps ``min_levels`` below its cut)."""
        Extrapolate(self.column, self.threshold, self.also).masks_for(table)  # its refusals
        per = [(col, levels, h) for col, _, levels, h in self._per_column(table)]
        steps = [
            k for k in range(self.origins)
            if all(len(lv) - h - k >= self.min_levels for _, lv, h in per)
        ]  # fmt: skip
        if len(per) > 1:  # on a partly filled design a lower step may fit or score no cell
            steps = [k for k in steps if all(m.any() for m in self._step_masks(table, per, k))]
        return per, steps or [0]

    @staticmethod
    def _step_masks(table, per, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(fitted, scored) cells of the step ``k`` levels below the cut asked for."""
        train, test = np.ones(len(table), bool), np.ones(len(table), bool)
        for col, levels, h in per:
            values = table[col].to_numpy()
            j = len(levels) - h - k
            train &= values < levels[j]
            test &= values <= levels[min(j + h - 1, len(levels) - 1)]
        return train, test & ~train

    def _masks(self, table) -> tuple[np.ndarray, np.ndarray]:
        per, steps = self._steps(table)
        pairs = [self._step_masks(table, per, k) for k in steps]
        return np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])

    def masks_for(self, table) -> np.ndarray:
        return self._masks(table)[0]

    def tests_for(self, table) -> np.ndarray:
        return self._masks(table)[1]

    def labels(self, table) -> list[str]:
        per, steps = self._steps(table)
        out = []
        for k in steps:
            fit, score = [], []
            for col, levels, h in per:
                j = len(levels) - h - k
                hi = levels[min(j + h - 1, len(levels) - 1)]
                fit.append(f"{col} < {levels[j]:g}")
                score.append(f"{col} {levels[j]:g}" if hi == levels[j]
                             else f"{col} {levels[j]:g} to {hi:g}")  # fmt: skip
            out.append(f"fit {' and '.join(fit)}, score {' or '.join(score)}")
        return out

    def n_train_min(self, table) -> int:
        return int(self.masks_for(table).sum(axis=1).min())

    def describe(self) -> dict:
        return {
            "protocol": "extrapolate:" + ",".join(_cut_text(c, t) for c, t in self.cuts),
            "rolling_origin": True,
            "n_splits": None,
            "train_frac": None,
            "seed": None,
        }


def inner_masks(outer, table, within: np.ndarray, count: int, seed: int):
    """(train, test) masks, (k, n), of the splits that rank candidates inside the training
    cells ``within`` of a structured outer protocol, asking its question: rolling origins
    along the column for an extrapolation (cut at each of the top levels of ``within``, the
    same horizon, each fit reading at least half its levels; every extrapolated column's cut
    stepping down together), each level left out in turn for leave-one-level-out (in an order
    drawn from ``seed``). At most ``count``; fewer when ``within`` has too few levels (none
    when it has fewer than 3 for an extrapolation, 2 for leave-one-level-out)."""
    n = len(table)
    train, test = [], []
    if isinstance(outer, RollingOrigin | Extrapolate):
        if isinstance(outer, RollingOrigin):  # refuses a cut that leaves no cell, as before
            Extrapolate(outer.column, outer.threshold, outer.also).masks_for(table)
        per = []
        for col, _, _, h in outer._per_column(table):
            values = table[col].to_numpy()
            per.append((values, np.sort(np.unique(values[within])), h))
        # each cut fits at least half the levels (and 2): lower cuts fit too few cells for
        # the candidates, and ask about a grid the user does not have
        step = 0
        while all(len(lv) - 1 - step >= max(2, (len(lv) + 1) // 2) for _, lv, _ in per):
            fit, scored = within.copy(), within.copy()
            for values, levels, h in per:
                m = len(levels) - 1 - step
                fit &= values < levels[m]
                scored &= values <= levels[min(m + h - 1, len(levels) - 1)]
            if fit.any() and (scored & ~fit).any():  # a partly filled design may leave none
                train.append(fit)
                test.append(scored & ~fit)
            step += 1
    else:  # leave one level out
        values = table[outer.column].to_numpy()
        levels = np.sort(np.unique(values[within]))
        order = np.random.default_rng([seed, 29]).permutation(len(levels))
        if len(levels) >= 2:
            for i in order:
                train.append(within & (values != levels[i]))
                test.append(within & (values == levels[i]))
    train, test = train[:count], test[:count]
    if not train:
        return np.zeros((0, n), bool), np.zeros((0, n), bool)
    return np.stack(train), np.stack(test)


@dataclass(frozen=True)
class Transfer:
    """Fit on every cell of one grid, score every cell of another (cells marked by source)."""

    fit_label: str
    test_label: str
    name = "transfer"

    def masks_for(self, table) -> np.ndarray:
        if "_source" not in table.columns:
            raise SplitError(f"transfer needs --fit-data and {param('test_grid')}")
        return (table["_source"] == "fit").to_numpy()[None, :]

    def labels(self, table) -> list[str]:
        return [f"fit {self.fit_label}, score {self.test_label}"]

    def n_train_min(self, table) -> int:
        return int(self.masks_for(table).sum())

    def describe(self) -> dict:
        return {
            "protocol": f"{self.name}:{self.fit_label}->{self.test_label}",
            "n_splits": 1,
            "train_frac": None,
            "seed": None,
        }


def _parse_cut(text: str, part: str) -> tuple[str, float | None]:
    """One ``COL``, ``COL:VALUE`` or ``COL>=VALUE`` of an extrapolation."""
    # COL>=VALUE, or COL:VALUE, which needs no quotes in a shell (an unquoted > redirects)
    col, sep, value = part.partition(">=")
    if not sep:
        col, sep, value = part.partition(":")
    if not col.strip():
        raise SplitError(f"{param('split')} {text!r}: a column name is missing")
    if not sep:
        return col.strip(), None
    try:
        return col.strip(), float(value)
    except ValueError:
        raise SplitError(f"{param('split')} {text!r}: {value!r} is not a number") from None


def parse_protocol(
    text: str,
    n_splits: int = RANDOM_SPLITS,
    train_frac: float = float(RANDOM_TRAIN_FRAC),
    seed: int = 0,
    transfer_labels: tuple[str, str] | None = None,
):
    """``random``, ``leave-one-level-out:COL``, ``extrapolate:COL[:VALUE]`` (also
    ``extrapolate:COL>=VALUE``: fit below VALUE, score from it on; several columns at once,
    ``extrapolate:N:4.2e9,D:6e11``: fit below every cut, score at or above any) or
    ``transfer``."""
    kind, _, arg = (text or "").partition(":")
    kind = kind.strip()
    if kind == "random" and not arg:
        return RandomSplit(n_splits, train_frac, seed)
    if kind == "leave-one-level-out" and arg.strip():
        return LeaveOneLevelOut(arg.strip())
    if kind == "extrapolate" and arg.strip():
        cuts = [_parse_cut(text, part) for part in arg.split(",")]
        if len({c for c, _ in cuts}) < len(cuts):
            raise SplitError(f"{param('split')} {text!r}: a column is named twice")
        (col, threshold), *also = cuts
        return Extrapolate(col, threshold, tuple(also))
    if kind == "transfer" and not arg:
        if transfer_labels is None:
            raise SplitError(
                f"{param('split')} transfer needs --fit-data A and {param('test_grid')} B"
            )
        return Transfer(*transfer_labels)
    raise SplitError(
        f"{param('split')} {text!r} is unknown; allowed: random, leave-one-level-out:COL, "
        "extrapolate:COL, extrapolate:COL:VALUE (or 'extrapolate:COL>=VALUE', quoted), "
        "extrapolate:COL,COL2[:VALUE2] (beyond the grid in several columns at once), transfer"
    )


# ------------------------------------------------------------------ seed ids held out too


@dataclass(frozen=True)
class SeedHoldout:
    """Hold out seed ids as well as cells: fit the training cells' runs at some seed ids,
    score the held-out cells' runs at the others.

    Runs that share a seed id share an effect across cells. Held out by cells alone, a
    held-out cell's mean carries the same average seed effect the fit absorbed, so its error
    misses what new runs at new seed ids will show (the grid's seed offset). With seed ids
    held out too, the fit's offset and the held-out runs' are independent. The held-out
    cells then have fewer runs than a new configuration would be measured with, and the
    fit fewer seed ids than the full grid's: the error is put back on the scale of the mean of
    ``runs`` new runs at fresh seed ids, a fit on every seed id, by taking the expected excess
    of its mean square off (:meth:`rescale`; variances from the cells x seeds decomposition).

    Parameters
    ----------
    test_frac : fraction of the seed ids held out (at least one, at least one kept).
    seed : seed of the choice of held-out ids.

    Examples
    --------
    >>> SeedHoldout(seed=0).split_ids(["0", "1", "2"])  # doctest: +SKIP
    (['0', '2'], ['1'])
    """

    test_frac: float = 1 / 3
    seed: int = 0

    name = "cells-and-seeds"

    def __post_init__(self) -> None:
        check_seed(self.seed, "--seed")
        if not (isinstance(self.test_frac, int | float) and 0 < self.test_frac < 1):
            raise SplitError(f"seed test fraction {self.test_frac}: must be in (0, 1)")

    def folds(self, ids) -> list[list[str]]:
        """The seed ids in disjoint held-out folds of ``test_frac`` of them each (the ids
        left over after whole folds join the last), in an order drawn from ``seed`` alone.

        Raises
        ------
        SplitError
            For fewer than two distinct seed ids.
        """
        ids = sorted({str(i) for i in ids})
        kept, _ = self.split_ids(ids)  # checks the count
        k = len(ids) - len(kept)
        order = [ids[i] for i in np.random.default_rng([self.seed, 28]).permutation(len(ids))]
        n = len(ids) // k
        out = [sorted(order[j * k : (j + 1) * k]) for j in range(n)]
        out[-1] = sorted(out[-1] + order[n * k :]) if len(order) > n * k else out[-1]
        if len(out[-1]) >= len(ids):  # a fold must leave an id to fit
            out[-1] = out[-1][:-1]
        return out

    def split_ids(self, ids) -> tuple[list[str], list[str]]:
        """(kept, held out) seed ids, drawn from ``seed`` alone.

        Raises
        ------
        SplitError
            For fewer than two distinct seed ids.
        """
        ids = sorted({str(i) for i in ids})
        if len(ids) < 2:
            raise SplitError(
                f"holding out seed ids needs at least 2 distinct seed ids; the grid has "
                f"{len(ids)}: use the cells protocol"
            )
        k = min(max(int(np.floor(self.test_frac * len(ids) + 0.5)), 1), len(ids) - 1)
        order = np.random.default_rng([self.seed, 28]).permutation(len(ids))
        test = sorted(ids[i] for i in order[:k])
        return [i for i in ids if i not in test], test

    @staticmethod
    def excess(shared_var: float, run_var: float, kept: int, held: int, ids: int,
               runs: int) -> float:  # fmt: skip
        """Expected mean-square excess of the held-out error over the target's.

        The held-out residual carries the held-out runs' noise (``held`` seed ids: shared
        and per-run variance over ``held``) and the fit's offset (``kept`` ids); the target
        (a fit on all ``ids``, scored against ``runs`` new runs at fresh ids) carries
        ``1 / runs`` and ``1 / ids`` of them.
        """
        return (shared_var + run_var) * (1 / held - 1 / runs) + shared_var * (1 / kept - 1 / ids)

    @staticmethod
    def rescale(mse: np.ndarray, excess: float) -> np.ndarray:
        """Factor on a split's errors that takes ``excess`` off its mean square (never
        below a tenth of the error: a split whose held-out residuals are smaller than the
        noise they carry keeps a tenth)."""
        mse = np.asarray(mse, float)
        with np.errstate(all="ignore"):
            return np.sqrt(np.clip(1 - excess / mse, 0.01, 1.0))

    def describe(self) -> dict:
        return {"seeds": self.name, "seed_test_frac": self.test_frac, "seed_split_seed": self.seed}


def seed_values(grid, cells, ids) -> np.ndarray:
    """Each cell's mean over its runs at the seed ids ``ids`` (NaN where it has none)."""
    import pandas as pd

    keys = list(cells.variables)
    runs = grid.runs[grid.runs[grid.seed].astype(str).isin(set(ids))]
    means = runs.groupby(keys, sort=False)[grid.metric].mean().rename("_v").reset_index()
    table = cells.table[keys].merge(means, on=keys, how="left")
    return pd.to_numeric(table["_v"]).to_numpy(float)


def seed_folds(grid, cells, offset, holdout: SeedHoldout) -> dict | None:
    """The folds of the cells-and-seeds protocol, or None when they cannot be made.

    Parameters
    ----------
    grid, cells : the grid and its cells.
    offset : the grid's seed offset (:func:`fitrules.engine.intervals.seed_offset`).
    holdout : how many seed ids a fold holds out, and the seed of their choice.

    Returns
    -------
    dict or None
        ``folds``: per fold, the seed ids it holds out (``held``) and each cell's mean over
        its runs at the other ids (``y_fit``, fitted) and at the fold's (``y_test``, scored);
        ``excess``: the expected excess of the held-out mean square that
        :meth:`SeedHoldout.rescale` takes off; ``t``: the ids a fold holds out; ``k``: the
        runs of a typical cell (the target is the mean of ``k`` new runs). None when a cell
        lacks runs at some ids or has a held-out value of 0.
    """
    folds = []
    for test in holdout.folds(offset.seeds):
        kept = [i for i in offset.seeds if i not in test]
        y_fit, y_test = seed_values(grid, cells, kept), seed_values(grid, cells, test)
        if not (np.isfinite(y_fit).all() and np.isfinite(y_test).all()) or (y_test == 0).any():
            return None
        folds.append({"y_fit": y_fit, "y_test": y_test, "held": test})
    n, t = len(offset.seeds), len(folds[0]["held"])
    k = int(np.median(cells.table["n_seeds"]))
    excess = holdout.excess(offset.shared_var, offset.var_run, n - t, t, n, k)
    return {"folds": folds, "excess": excess, "t": t, "k": k}
