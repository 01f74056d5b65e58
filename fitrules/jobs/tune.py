"""Tuning as an honest reduction of a grid: choose a level on some seeds, measure on others.

A grid that sweeps a learning rate answers a different question once each configuration's
learning rate is tuned: results about H or compression can reverse. But picking the best
level and reporting its loss measured on the *same* seeds is optimistic (the winner's curse:
the minimum over levels of noisy means is biased low, more so the more levels are tried).
:func:`tune` therefore chooses a level on one set of seeds and reports the runs of other
seeds at that level, either by cross-fitting two halves of the seeds (the default) or with a
fixed set of tuning seeds. It also says how much choosing on the same seeds would have
flattered (``Tuning.flattery``) and flags winners at the edge of the swept range.

The result carries a new :class:`~fitrules.model.grids.Grid` whose runs have the tuned column
``f`` replaced by ``tuned_f``, so cells, fits, comparisons and paired intervals work on the
tuned grid unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError
from fitrules.base.results import Result
from fitrules.jobs.result_docs import figure_doc, view
from fitrules.model.grids import Grid
from fitrules.model.splits import CROSS_FIT, FOLD_AB, FOLD_BA, TUNE_SEEDS


@dataclass(frozen=True)
class TunedGrid(Grid):
    """A :class:`~fitrules.model.grids.Grid` made by :func:`tune`.

    The same as a ``Grid`` except that the ``tuned_<factor>`` columns are not design
    factors: they record the level each run was taken at, which may differ between the seeds
    of one cell under cross-fitting. Cells pool over them, as tuning intends.

    Attributes
    ----------
    tuned : the factors that were tuned (their ``tuned_`` columns are left out of ``factors``).
    """

    tuned: tuple[str, ...] = ()

    @property
    def factors(self) -> list[str]:
        skip = {f"tuned_{f}" for f in self.tuned}
        return [c for c in super().factors if c not in skip]


@dataclass(frozen=True, repr=False)
class Tuning(Result, text=view("text.render_tuning"), html=view("html.tuning_html")):
    """The result of :func:`tune`: the tuned runs and a record of every choice.

    Attributes
    ----------
    runs : DataFrame
        The grid's runs reduced to one row per (configuration, evaluated seed): the run of
        that seed at the level chosen without it. Each tuned column ``f`` is replaced by
        ``tuned_f`` (the chosen level); the other columns are kept.
    grid : TunedGrid
        A :class:`TunedGrid` holding ``runs`` (its ``excluded`` are the evaluated seeds'
        runs at the chosen level that diverged), for the rest of fitrules.
    choices : DataFrame
        One row per (configuration, fold): the configuration's factor values, ``fold``
        (``"A->B"``, ``"B->A"`` or ``"tune seeds"``), ``choosing_seeds``,
        ``evaluated_seeds``, ``chosen_<f>`` per tuned factor, ``criterion`` (the winning
        mean over the choosing seeds), ``tried_<f>`` (levels tried in the configuration),
        ``at_edge`` and ``edge`` (``"lowest"``, ``"highest"``, ``"only level"``, or for
        several factors e.g. ``"lr highest"``), ``n_evaluated`` (runs output) and
        ``n_left_out`` (evaluated seeds whose run at the chosen level is missing or diverged).
    curves : DataFrame
        One row per (configuration, level): ``mean``, ``sem`` and ``n_runs`` over the
        kept runs of all seeds, ``n_diverged`` (runs set aside as diverged or non-finite),
        the selection criterion of each fold (``criterion_A`` and ``criterion_B`` for
        cross-fitting, ``criterion_tune`` for tune seeds; +inf when the level diverged on a
        choosing seed) and ``chosen_by`` (the folds that chose the level, comma-separated).
    flattery : DataFrame
        One row per configuration: ``honest`` (mean of the output runs),
        ``n_honest``, ``same_seeds`` (minimum over levels of the mean over all seeds, i.e.
        choosing and measuring on the same seeds), ``optimism = honest - same_seeds``,
        ``same_seeds_<f>`` (the level that choice picks), ``chosen_<f>`` (a tuple, the level
        each fold chose) and ``folds_agree``.
    warnings : list of str
        One-line strings: winners at the edge of the sweep (not said of a fold in
        which every level diverged, whose choice is the default smallest level; that fold
        gets its own line), runs left out, configurations with one level.
    factors : tuple of str
        The tuned factors.
    configuration : tuple of str
        The factors that define a configuration.
    scheme : {"cross-fit", "tune seeds"}
        How the levels were chosen.
    tune_seeds : tuple or None
        The tuning seeds, if given.
    seeds : tuple
        Every seed of the grid.
    """

    runs: pd.DataFrame
    grid: TunedGrid
    choices: pd.DataFrame
    curves: pd.DataFrame
    flattery: pd.DataFrame
    warnings: list[str]
    factors: tuple[str, ...]
    configuration: tuple[str, ...]
    scheme: str
    tune_seeds: tuple | None = None
    seeds: tuple = field(default=())

    def __repr__(self) -> str:
        return (
            f"Tuning({', '.join(self.factors)} over {len(self.flattery)} configurations, "
            f"{self.scheme}, {len(self.runs)} runs out, {len(self.warnings)} warnings)"
        )

    @figure_doc
    def plot_curves(self, ax=None, by: str | None = None, labels=None, units=None):
        """The metric against each tuned level per configuration, winners marked; returns the
        matplotlib Axes.

        Parameters
        ----------
        by : str, optional
            A configuration factor: one line per level of it, averaging over the others.
        """
        from fitrules.views.figures import axis_labels
        from fitrules.views.tuning import lr_curves

        with axis_labels(labels, units):
            return lr_curves(self, ax=ax, by=by)

    @figure_doc
    def plot_chosen(self, x: str, y: str, ax=None, labels=None, units=None):
        """The level chosen at each configuration over two factors; returns the Axes.

        Parameters
        ----------
        x : str
            The factor on the horizontal axis.
        y : str
            The factor on the vertical axis.
        """
        from fitrules.views.figures import axis_labels
        from fitrules.views.tuning import chosen_levels_map

        with axis_labels(labels, units):
            return chosen_levels_map(self, x, y, ax=ax)

    def describe(self) -> dict:
        """A JSON-ready summary: scheme, seeds, factors, levels, counts and warnings.

        Returns
        -------
        dict
            ``scheme``, ``factors``, ``configuration_factors``, ``levels`` (per tuned factor),
            ``configurations``, ``seeds``, the choosing and evaluation seeds (``tune_seeds`` /
            ``evaluation_seeds``, or ``halves`` with the rule for cross-fitting), ``runs``,
            ``left_out``, ``choices_at_edge``, ``folds_disagree``, ``mean_optimism`` and
            ``warnings``. Non-finite numbers become None.

        Examples
        --------
        >>> tuning.describe()["scheme"]  # doctest: +SKIP
        'cross-fit'
        """
        c = self.choices
        out: dict[str, Any] = {
            "grid": self.grid.name,
            "metric": self.grid.metric,
            "scheme": self.scheme,
            "factors": list(self.factors),
            "configuration_factors": list(self.configuration),
            "levels": {
                f: sorted({_plain(v) for v in self.curves[f]}, key=_sort_key) for f in self.factors
            },
            "configurations": len(self.flattery),
            "seeds": [_plain(s) for s in self.seeds],
        }
        if self.scheme == TUNE_SEEDS:
            out["tune_seeds"] = [_plain(s) for s in self.tune_seeds or ()]
            out["evaluation_seeds"] = _union(c["evaluated_seeds"])
        else:
            out["halves"] = {
                "rule": "each configuration's seeds sorted; A = positions 0, 2, 4, ...; "
                "B = positions 1, 3, 5, ...",
                "A": _union(c.loc[c["fold"] == FOLD_AB, "choosing_seeds"]),
                "B": _union(c.loc[c["fold"] == FOLD_BA, "choosing_seeds"]),
            }
        out["runs"] = len(self.runs)
        out["left_out"] = int(c["n_left_out"].sum())
        out["choices_at_edge"] = int(c["at_edge"].sum())
        out["folds_disagree"] = int((~self.flattery["folds_agree"]).sum())
        opt = self.flattery["optimism"].to_numpy(float)
        opt = opt[np.isfinite(opt)]
        out["mean_optimism"] = float(opt.mean()) if len(opt) else None
        out["warnings"] = list(self.warnings)
        return _jsonable(out)

    def to_dict(self) -> dict:
        """:meth:`describe` plus the ``choices``, ``curves`` and ``flattery`` tables as records.

        Returns
        -------
        dict
            JSON-ready (tuples become lists, non-finite numbers None).

        Examples
        --------
        >>> import json
        >>> text = json.dumps(tuning.to_dict(), allow_nan=False)  # doctest: +SKIP
        """
        out = self.describe()
        for name in ("choices", "curves", "flattery"):
            out[name] = _jsonable(getattr(self, name).to_dict(orient="records"))
        return out


def tune(grid: Grid, factors: Sequence[str] | str, tune_seeds: Sequence | None = None) -> Tuning:
    """Tune ``factors`` of ``grid`` (a Grid): the reduction :func:`fitrules.api.tune`
    documents (``fr.tune``)."""
    _check_arguments(grid, factors, tune_seeds)
    where = str(grid.path or grid.name or "grid")
    tuned = _check_factors(grid, factors, where)
    if grid.seed is None:
        raise GridError(
            f"{where}: no seed column (looked for 'seed'); tuning needs seeds to choose on "
            "and other seeds to measure on"
        )
    configuration = tuple(c for c in grid.varying_factors if c not in tuned)
    d = _Dense.build(grid, tuned, configuration, where)

    scheme = CROSS_FIT if tune_seeds is None else TUNE_SEEDS
    chosen_set: tuple | None = None
    if tune_seeds is not None:
        chosen_set = _check_tune_seeds(d, tune_seeds, where)
    out = _Tally()
    numeric = {f: d.keys[f].dtype.kind in "iuf" for f in tuned}
    for c in range(d.n_cfg):
        _tune_configuration(d, c, numeric, chosen_set, where, out)
    tuned_grid = _tuned_grid(grid, tuned, scheme, out.out_rows, out.out_excluded)
    return Tuning(
        runs=tuned_grid.runs,
        grid=tuned_grid,
        choices=pd.DataFrame(out.choices),
        curves=pd.DataFrame(out.curves),
        flattery=pd.DataFrame(out.flattery),
        warnings=_warning_lines(out.warnings, d.n_cfg),
        factors=tuned,
        configuration=configuration,
        scheme=scheme,
        tune_seeds=chosen_set,
        seeds=tuple(_plain(s) for s in d.seeds),
    )


def _check_arguments(grid: Any, factors: Any, tune_seeds: Any) -> None:
    """Refuse arguments of the wrong type: a grid that is no Grid, factors or seeds not lists."""
    if not isinstance(grid, Grid):  # fr.tune takes a DataFrame or a path (fitrules.api.tune)
        raise GridError(f"grid {type(grid).__name__}: give a fitrules.Grid (fr.tune loads one)")
    if not isinstance(factors, str) and not (
        isinstance(factors, Sequence) and all(isinstance(f, str) for f in factors)
    ):
        raise GridError(f"factors {factors!r}: give a column name or a list of them, e.g. ['lr']")
    if (
        tune_seeds is not None
        and not isinstance(tune_seeds, Sequence | str)
        and not np.isscalar(tune_seeds)
    ):
        raise GridError(f"tune_seeds {tune_seeds!r}: give a list of seeds, e.g. [0, 1], or None")


@dataclass
class _Tally:
    """What tuning collects over the configurations: its tables' rows, its warnings, and the
    runs it keeps and sets aside."""

    choices: list[dict] = field(default_factory=list)
    curves: list[dict] = field(default_factory=list)
    flattery: list[dict] = field(default_factory=list)
    warnings: list = field(default_factory=list)  # text, or _EdgeChoice until the end
    out_rows: list[int] = field(default_factory=list)
    out_excluded: list[int] = field(default_factory=list)


def _tune_configuration(
    d: _Dense, c: int, numeric: dict[str, bool], chosen_set: tuple | None, where: str, out: _Tally
) -> None:
    """Tune configuration ``c``: choose in each fold, keep the evaluated runs, add its rows."""
    tuned = d.tuned
    cfg = d.config_values(c)
    label = d.config_label(c)
    at = f" at {label}" if label else ""
    present = d.row[c] >= 0  # level x seed
    seeds_c = np.flatnonzero(present.any(axis=0))
    levels_c = np.flatnonzero(present.any(axis=1))
    folds = _folds(d, seeds_c, chosen_set, label, where)
    tried = {
        f: sorted({d.level_values[lv][i] for lv in levels_c}, key=_sort_key)
        for i, f in enumerate(tuned)
    }
    if len(levels_c) == 1:
        only = ", ".join(f"{f}={_fmt(d.level_values[levels_c[0]][i])}" for i, f in enumerate(tuned))
        out.warnings.append(f"only one level tried ({only}){at}: nothing was tuned there")

    fold_crit: dict[str, np.ndarray] = {}
    fold_best: dict[str, int] = {}
    honest_vals: list[float] = []
    for fold, choose, evaluate in folds:
        crit = d.criterion(c, choose)
        fold_crit[fold] = crit
        best = _argbest(crit, levels_c)
        fold_best[fold] = best
        out.warnings += _choice_warnings(d, crit, best, levels_c, fold, at)
        got, lost = _keep_evaluated(d, c, best, evaluate, out, honest_vals)
        if lost:
            one = len(lost) == 1
            out.warnings.append(
                f"{len(lost)} {'run' if one else 'runs'} at the chosen level "
                f"({d.level_label(best)}){at} {'is' if one else 'are'} missing or diverged "
                f"and left out ({'seed' if one else 'seeds'} "
                f"{', '.join(_fmt(d.seeds[s]) for s in lost)}, {_fold_words(fold)})"
            )
        level = d.level_values[best]
        edges = _edges(level, tried, tuned, numeric)
        out.choices.append(
            {
                **cfg,
                "fold": fold,
                "choosing_seeds": tuple(_plain(d.seeds[s]) for s in choose),
                "evaluated_seeds": tuple(_plain(d.seeds[s]) for s in evaluate),
                **{f"chosen_{f}": _plain(level[i]) for i, f in enumerate(tuned)},
                "criterion": float(crit[best]),
                **{f"tried_{f}": tuple(tried[f]) for f in tuned},
                "at_edge": bool(edges),
                "edge": "; ".join(e if len(tuned) == 1 else f"{f} {e}" for f, e, _ in edges),
                "n_evaluated": len(got),
                "n_left_out": len(lost),
            }
        )
    out.warnings.extend(_edge_warnings(out.choices[-len(folds) :], tuned, numeric, tried, at))
    out.curves += _curve_rows(d, c, cfg, levels_c, present, fold_crit, fold_best)
    out.flattery.append(_flattery_row(d, c, cfg, seeds_c, levels_c, honest_vals, fold_best))


def _choice_warnings(
    d: _Dense, crit: np.ndarray, best: int, levels_c: np.ndarray, fold: str, at: str
) -> list[str]:
    """What a fold's choice cannot say: levels with no run on its seeds, a forced default."""
    out = []
    unseen = [lv for lv in levels_c.tolist() if np.isnan(crit[lv])]
    if unseen:  # a level with no run on the choosing seeds cannot win: say so
        out.append(
            f"{', '.join(d.level_label(lv) for lv in unseen)}{at} "
            f"{'has' if len(unseen) == 1 else 'have'} no run on the choosing seeds "
            f"({_fold_words(fold)}), so could not be chosen"
        )
    if not np.isfinite(crit[best]):
        out.append(
            f"every level diverged on a choosing seed{at} ({_fold_words(fold)}); "
            f"the smallest ({d.level_label(best)}) was taken"
        )
    return out


def _keep_evaluated(
    d: _Dense, c: int, best: int, evaluate: np.ndarray, out: _Tally, honest_vals: list[float]
) -> tuple[list[int], list[int]]:
    """Keep each evaluated seed's run at the chosen level (its value an honest one); the
    seeds kept and those whose run is missing or diverged."""
    got, lost = [], []
    for s in evaluate:
        r = d.row[c, best, s]
        if r >= 0 and d.ok[r]:
            got.append(s)
            out.out_rows.append(r)
            honest_vals.append(float(d.score[c, best, s]))
        else:
            lost.append(s)
            if r >= 0:
                out.out_excluded.append(r - d.n_runs)
    return got, lost


def _curve_rows(
    d: _Dense,
    c: int,
    cfg: dict,
    levels_c: np.ndarray,
    present: np.ndarray,
    fold_crit: dict[str, np.ndarray],
    fold_best: dict[str, int],
) -> list[dict]:
    """One row per level of the configuration: its runs' mean, each fold's criterion there."""
    tuned = d.tuned
    mean, sem, n_runs = d.kept_stats(c)
    rows = []
    for lv in levels_c.tolist():
        row = {**cfg, **{f: _plain(d.level_values[lv][i]) for i, f in enumerate(tuned)}}
        row.update(
            mean=mean[lv],
            sem=sem[lv],
            n_runs=int(n_runs[lv]),
            n_diverged=int((present[lv] & ~d.ok_at(c, lv)).sum()),
        )
        for fold, crit in fold_crit.items():
            row[_crit_column(fold)] = float(crit[lv])
        row["chosen_by"] = ", ".join(f for f, b in fold_best.items() if b == lv)
        rows.append(row)
    return rows


def _flattery_row(
    d: _Dense,
    c: int,
    cfg: dict,
    seeds_c: np.ndarray,
    levels_c: np.ndarray,
    honest_vals: list[float],
    fold_best: dict[str, int],
) -> dict:
    """The configuration's honest value beside what choosing on the same seeds would say."""
    tuned = d.tuned
    same = d.criterion(c, seeds_c)  # choosing and measuring on the same (all) seeds
    same_best = _argbest(same, levels_c)
    honest = float(np.mean(honest_vals)) if honest_vals else math.nan
    same_value = float(same[same_best])
    return {
        **cfg,
        "honest": honest,
        "n_honest": len(honest_vals),
        "same_seeds": same_value,
        "optimism": honest - same_value
        if math.isfinite(honest) and math.isfinite(same_value)
        else math.nan,
        **{f"same_seeds_{f}": _plain(d.level_values[same_best][i]) for i, f in enumerate(tuned)},
        **{
            f"chosen_{f}": tuple(_plain(d.level_values[b][i]) for b in fold_best.values())
            for i, f in enumerate(tuned)
        },
        "folds_agree": len(set(fold_best.values())) == 1,
    }


def _tuned_grid(
    grid: Grid, tuned: tuple[str, ...], scheme: str, out_rows: list[int], out_excluded: list[int]
) -> TunedGrid:
    """The grid of the runs kept, each tuned column ``f`` renamed ``tuned_f``."""
    rename = {f: f"tuned_{f}" for f in tuned}
    runs = grid.runs.iloc[sorted(out_rows)].rename(columns=rename).reset_index(drop=True)
    excluded = grid.excluded.iloc[sorted(out_excluded)].rename(columns=rename)
    name = f"{grid.name} ({', '.join(tuned)} tuned, {scheme})" if grid.name else ""
    rows = grid.row_numbers
    kept = rows[sorted(out_rows)] if rows is not None and len(rows) == len(grid.runs) else None
    base = replace(grid, runs=runs, excluded=excluded, name=name, row_numbers=kept)
    return TunedGrid(**{f.name: getattr(base, f.name) for f in fields(Grid)}, tuned=tuned)


# --- the dense view: configuration x level x seed ------------------------------------------


@dataclass
class _Dense:
    """Runs and set-aside runs as arrays over (configuration, level, seed).

    ``row[c, l, s]`` is the position of the run in ``keys`` (kept runs first, then set-aside
    ones) or -1 if absent; ``score`` is its metric, +inf if set aside, NaN if absent.
    """

    keys: pd.DataFrame
    n_runs: int
    ok: np.ndarray
    row: np.ndarray
    score: np.ndarray
    seeds: np.ndarray
    level_values: list[tuple]
    cfg_first: np.ndarray
    configuration: tuple[str, ...]
    tuned: tuple[str, ...]

    @property
    def n_cfg(self) -> int:
        return self.row.shape[0]

    @classmethod
    def build(
        cls, grid: Grid, tuned: tuple[str, ...], configuration: tuple[str, ...], where: str
    ) -> _Dense:
        runs, exc = grid.runs, grid.excluded
        cols = [*configuration, *tuned, grid.seed]
        keys = pd.DataFrame(
            {
                col: np.concatenate([runs[col].to_numpy(), exc[col].to_numpy()])
                if len(exc)
                else runs[col].to_numpy()
                for col in cols
            }
        )
        for f in tuned:
            if keys[f].isna().any():
                raise GridError(f"{where}: tuned column {f!r} has missing values")
        n_runs = len(runs)
        ok = np.arange(len(keys)) < n_runs
        metric = np.concatenate(
            [runs[grid.metric].to_numpy(float), np.full(len(keys) - n_runs, np.inf)]
        )
        if configuration:
            cfg = keys.groupby(list(configuration), sort=True, dropna=False).ngroup().to_numpy()
        else:
            cfg = np.zeros(len(keys), int)
        lvl = keys.groupby(list(tuned), sort=True).ngroup().to_numpy()
        seeds, sid = np.unique(keys[grid.seed].to_numpy(), return_inverse=True)
        n_cfg, n_lvl, n_seed = int(cfg.max()) + 1, int(lvl.max()) + 1, len(seeds)
        count = np.zeros((n_cfg, n_lvl, n_seed), int)
        np.add.at(count, (cfg, lvl, sid), 1)
        if (count > 1).any():
            c, lv, s = (int(i[0]) for i in np.nonzero(count > 1))
            i = int(np.flatnonzero((cfg == c) & (lvl == lv) & (sid == s))[0])
            at = ", ".join(f"{k}={_fmt(keys.at[i, k])}" for k in (*configuration, *tuned))
            raise GridError(
                f"{where}: seed {_fmt(seeds[s])} appears more than once at {at}; "
                "each (configuration, level, seed) must be one run"
            )
        row = np.full((n_cfg, n_lvl, n_seed), -1)
        row[cfg, lvl, sid] = np.arange(len(keys))
        score = np.full((n_cfg, n_lvl, n_seed), np.nan)
        score[cfg, lvl, sid] = metric
        first_lvl = np.unique(lvl, return_index=True)[1]
        level_values = [tuple(_plain(keys.at[i, f]) for f in tuned) for i in first_lvl]
        cfg_first = np.unique(cfg, return_index=True)[1]
        return cls(
            keys, n_runs, ok, row, score, seeds, level_values, cfg_first, configuration, tuned
        )

    def config_values(self, c: int) -> dict:
        i = self.cfg_first[c]
        return {k: _plain(self.keys.at[i, k]) for k in self.configuration}

    def config_label(self, c: int) -> str:
        values = self.config_values(c)
        return ", ".join(f"{k}={_fmt(values[k])}" for k in self.label_columns)

    @cached_property
    def label_columns(self) -> list[str]:
        """Configuration columns to name in messages: not those fixed by the ones before
        (a derived ``omega`` says nothing ``keep`` has not said)."""
        out: list[str] = []
        for col in self.configuration:
            if out and self.keys.groupby(out, dropna=False)[col].nunique(dropna=False).max() <= 1:
                continue
            out.append(col)
        return out

    def level_label(self, lv: int) -> str:
        return ", ".join(
            f"{f}={_fmt(v)}" for f, v in zip(self.tuned, self.level_values[lv], strict=True)
        )

    def criterion(self, c: int, seeds: np.ndarray) -> np.ndarray:
        """Mean score of each level over ``seeds`` (+inf if one diverged; NaN if none ran)."""
        sel = self.score[c][:, seeds]
        have = ~np.isnan(sel)
        n = have.sum(axis=1)
        total = np.where(have, sel, 0.0).sum(axis=1)
        out = np.full(len(n), np.nan)
        out[n > 0] = total[n > 0] / n[n > 0]
        return out

    def ok_at(self, c: int, lv: int) -> np.ndarray:
        r = self.row[c, lv]
        return np.where(r >= 0, self.ok[np.maximum(r, 0)], False)

    def kept_stats(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, standard error and count over the kept runs of all seeds, per level."""
        v = self.score[c]
        have = np.isfinite(v)
        n = have.sum(axis=1)
        x = np.where(have, v, 0.0)
        mean = np.full(len(n), np.nan)
        mean[n > 0] = x.sum(axis=1)[n > 0] / n[n > 0]
        dev = np.where(have, v - np.where(np.isnan(mean), 0.0, mean)[:, None], 0.0)
        sem = np.full(len(n), np.nan)
        two = n > 1
        sem[two] = np.sqrt((dev**2).sum(axis=1)[two] / (n[two] - 1) / n[two])
        return mean, sem, n


# --- checks and small helpers ----------------------------------------------------------------


def _check_factors(grid: Grid, factors: Sequence[str] | str, where: str) -> tuple[str, ...]:
    if isinstance(factors, str):
        factors = [factors]
    tuned = tuple(dict.fromkeys(factors))
    if not tuned:
        raise GridError(f"{where}: no factor to tune; name one, e.g. ['lr']")
    for f in tuned:
        if f not in grid.runs.columns:
            raise GridError(
                f"{where}: no column {f!r} to tune; columns: {', '.join(grid.runs.columns)}"
            )
        if f == grid.metric or f == grid.seed:
            what = "the metric" if f == grid.metric else "the seed column"
            raise GridError(f"{where}: cannot tune {f!r}, it is {what}; tune a design factor")
        values = pd.concat(
            [grid.runs[f], grid.excluded[f]]
            if f in grid.excluded and len(grid.excluded)
            else [grid.runs[f]]
        )
        levels = values.dropna().unique()
        if len(levels) < 2:
            shown = _fmt(levels[0]) if len(levels) else "none"
            raise GridError(
                f"{where}: {f!r} has one level ({shown}): nothing to tune; "
                "tune a column with at least two levels"
            )
    return tuned


def _check_tune_seeds(d: _Dense, tune_seeds: Sequence, where: str) -> tuple:
    if np.isscalar(tune_seeds):  # one seed given bare
        tune_seeds = [tune_seeds]
    known = {_plain(s) for s in d.seeds}
    given = [_plain(s) for s in tune_seeds]
    wanted = tuple(dict.fromkeys(given))
    if len(wanted) != len(given):
        twice = next(s for s in given if given.count(s) > 1)
        raise GridError(f"{where}: seed {_fmt(twice)} is given twice in tune_seeds")
    if not wanted:
        raise GridError(f"{where}: tune_seeds is empty; give the seeds to choose on, or None")
    for s in wanted:
        if s not in known:
            raise GridError(
                f"{where}: seed {_fmt(s)} in tune_seeds is not in the grid; seeds: "
                f"{', '.join(_fmt(v) for v in sorted(known, key=_sort_key))}"
            )
    if known <= set(wanted):
        raise GridError(
            f"{where}: no evaluation seed left: tune_seeds ({', '.join(map(_fmt, wanted))}) "
            "covers every seed of the grid; leave some seeds to measure on"
        )
    return wanted


def _folds(
    d: _Dense, seeds_c: np.ndarray, tune_seeds: tuple | None, label: str, where: str
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    at = f" at {label}" if label else ""
    shown = ", ".join(_fmt(d.seeds[s]) for s in seeds_c)
    if tune_seeds is None:
        if len(seeds_c) < 2:
            raise GridError(
                f"{where}: cross-fitting needs at least 2 seeds per configuration; "
                f"{len(seeds_c)} seed ({shown}){at}"
            )
        a, b = seeds_c[0::2], seeds_c[1::2]  # seeds_c is sorted: alternate positions
        return [(FOLD_AB, a, b), (FOLD_BA, b, a)]
    is_tune = np.array([_plain(d.seeds[s]) in set(tune_seeds) for s in seeds_c], bool)
    if not is_tune.any():
        raise GridError(f"{where}: no tuning seed{at} (its seeds: {shown}); pick tune_seeds it has")
    if is_tune.all():
        raise GridError(
            f"{where}: no evaluation seed left{at}: all its seeds ({shown}) are tune seeds"
        )
    return [(TUNE_SEEDS, seeds_c[is_tune], seeds_c[~is_tune])]


def _argbest(crit: np.ndarray, levels: np.ndarray) -> int:
    """The level with the lowest criterion; ties (and all +inf) go to the smallest level."""
    cand = levels[~np.isnan(crit[levels])]
    return int(cand[np.argmin(crit[cand])])  # argmin takes the first of equal values


def _edges(
    level: tuple, tried: dict[str, list], tuned: tuple[str, ...], numeric: dict[str, bool]
) -> list[tuple[str, str, Any]]:
    out = []
    for i, f in enumerate(tuned):
        if not numeric[f]:
            continue
        v, levels = level[i], tried[f]
        if len(levels) == 1:
            out.append((f, "only level", v))
        elif v == levels[0]:
            out.append((f, "lowest", v))
        elif v == levels[-1]:
            out.append((f, "highest", v))
    return out


@dataclass(frozen=True)
class _EdgeChoice:
    """A configuration's choice at an edge of a factor's sweep, kept as data until every
    configuration is tuned (:func:`_warning_lines` words it, alone or with the others)."""

    factor: str
    which: str  # "largest" or "smallest"
    level: Any
    at: str  # " at H=16, keep=0.25", as the configuration's other warnings name it
    only: str  # " (fold A->B)" when not every fold chose it, else ""

    def line(self) -> str:
        return (
            f"best {self.factor} is the {self.which} tried ({_fmt(self.level)}){self.at}"
            f"{self.only}: widen the sweep"
        )


def _edge_warnings(
    rows: list[dict], tuned: tuple[str, ...], numeric: dict[str, bool], tried: dict, at: str
) -> list[_EdgeChoice]:
    """One per (factor, edge, level) over a configuration's folds."""
    seen: dict[tuple, list[str]] = {}
    for r in rows:
        if not math.isfinite(r["criterion"]):
            continue  # every level diverged: the smallest was a default, not a winner
        level = tuple(r[f"chosen_{f}"] for f in tuned)
        for f, edge, v in _edges(level, tried, tuned, numeric):
            if edge != "only level":
                seen.setdefault((f, edge, v), []).append(r["fold"])
    out = []
    for (f, edge, v), folds in seen.items():
        which = "largest" if edge == "highest" else "smallest"
        only = f" ({', '.join(map(_fold_words, folds))})" if len(folds) < len(rows) else ""
        out.append(_EdgeChoice(f, which, v, at, only))
    return out


EDGE_LINES = 3  # more "widen the sweep" lines than this for one factor's edge become one


def _warning_lines(warnings: list, n_cfg: int) -> list[str]:
    """The warnings in words, in order; the edge choices of one factor's edge as one line
    for all configurations when there are more than ``EDGE_LINES`` (issue 44: a 2-level
    sweep, where every choice is an edge, printed 20 'widen the sweep' lines)."""
    groups: dict[tuple, list[_EdgeChoice]] = {}
    for w in warnings:
        if isinstance(w, _EdgeChoice):
            groups.setdefault((w.factor, w.which), []).append(w)
    out, done = [], set()
    for w in warnings:
        if not isinstance(w, _EdgeChoice):
            out.append(w)
            continue
        key = (w.factor, w.which)
        group = groups[key]
        if len(group) <= EDGE_LINES:
            out.append(w.line())
            continue
        if key in done:
            continue
        done.add(key)
        where = [f"{e.at.strip().removeprefix('at ')}{e.only}" for e in group]
        levels = ", ".join(dict.fromkeys(_fmt(e.level) for e in group))
        shown = "; ".join(where[:EDGE_LINES]) + f"; and {len(where) - EDGE_LINES} more"
        out.append(
            f"best {w.factor} is the {w.which} tried ({levels}) in {len(group)} choices over "
            f"the {n_cfg} configurations ({shown}): widen the sweep"
        )
    return out


def _fold_words(fold: str) -> str:
    return "tune seeds" if fold == TUNE_SEEDS else f"fold {fold}"


def _crit_column(fold: str) -> str:
    return {FOLD_AB: "criterion_A", FOLD_BA: "criterion_B"}.get(fold, "criterion_tune")


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _fmt(v: Any) -> str:
    v = _plain(v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _sort_key(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, int | float) and not isinstance(v, bool) else (1, 0, str(v))


def _union(col: pd.Series) -> list:
    return sorted({_plain(s) for seeds in col for s in seeds}, key=_sort_key)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    x = _plain(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
