"""Figures for a :class:`~fitrules.jobs.tune.Tuning`: metric against the tuned level, and a map of
the levels chosen. Each function takes an optional matplotlib Axes and returns it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from fitrules.base.errors import GridError
from fitrules.model.splits import FOLD_AB, FOLD_BA, TUNE_SEEDS

if TYPE_CHECKING:
    import pandas as pd

    from fitrules.jobs.tune import Tuning

MANY_LINES = 6  # more lines than this and the legend goes outside the axes
TOO_MANY_LINES = 20  # ... and more than this, no line is named


def _ax(ax, size=(7.0, 4.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _fmt(v: Any) -> str:
    v = v.item() if isinstance(v, np.generic) else v
    return f"{v:g}" if isinstance(v, float) else str(v)


def _label(keys: list[str], values: tuple) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in zip(keys, values, strict=True))


def lr_curves(tuning: Tuning, ax=None, by: str | None = None):
    """The metric against the tuned level, one line per configuration, chosen levels ringed.

    Each point is the mean over all seeds' kept runs at that level (error bars: standard
    error); a ring marks a level some fold chose, a cross a level where some runs diverged.
    The x axis is logarithmic when the levels are positive and span more than 10x. With
    several tuned factors the first is on the x axis and the others split the lines.

    Parameters
    ----------
    tuning : the result of :func:`fitrules.jobs.tune.tune`.
    ax : matplotlib Axes to draw on; default a new figure.
    by : a configuration factor; if given, one line per level of it, averaging the
        configuration means over the other configuration factors.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on: one line per configuration (per level of ``by`` with it).

    Raises
    ------
    GridError
        If ``by`` is not a configuration factor.

    Examples
    --------
    >>> ax = lr_curves(tune(grid, ["lr"]), by="H")  # doctest: +SKIP
    >>> ax.figure.savefig("lr_curves.png")  # doctest: +SKIP
    """
    x = tuning.factors[0]
    keys, curves = _curves_by(tuning, by)
    groups = list(curves.groupby(keys, sort=True, dropna=False)) if keys else [((), curves)]
    n = len(groups)
    ax = _ax(ax, (8.5, 4.8) if n > MANY_LINES else (7.0, 4.5))
    levels = sorted(tuning.curves[x].unique())
    numeric = tuning.curves[x].dtype.kind in "iuf"
    position = {v: (float(v) if numeric else float(i)) for i, v in enumerate(levels)}
    _draw_curves(ax, groups, keys, x, position)
    ticks = [position[v] for v in levels]
    if numeric and min(ticks) > 0 and max(ticks) / min(ticks) > 10:
        ax.set_xscale("log")
    ax.set_xticks(ticks, [_fmt(v) for v in levels])
    ax.minorticks_off()
    _label_curves(ax, tuning, x, by)
    _curve_legend(ax, n)
    ax.grid(alpha=0.3)
    return ax


def _curves_by(tuning: Tuning, by: str | None) -> tuple[list[str], pd.DataFrame]:
    """The columns that split the lines, and the curves (averaged over the others with
    ``by``), each level marked chosen or not."""
    x, rest = tuning.factors[0], list(tuning.factors[1:])
    config = list(tuning.configuration)
    if by is not None and by not in config:
        raise GridError(
            f"lr_curves: by={by!r} is not a configuration factor; "
            f"allowed: {', '.join(config) or 'none (only one configuration)'}"
        )
    curves = tuning.curves
    keys = ([by] if by is not None else config) + rest
    if by is not None:
        curves = (
            curves.groupby([*keys, x], sort=True, dropna=False)
            .agg(
                mean=("mean", "mean"),
                n_diverged=("n_diverged", "sum"),
                chosen=("chosen_by", lambda s: bool((s != "").any())),
            )
            .reset_index()
            .assign(sem=np.nan)
        )
    else:
        curves = curves.assign(chosen=curves["chosen_by"] != "")
    return keys, curves


def _draw_curves(ax, groups: list, keys: list[str], x: str, position: dict) -> None:
    """One line per group with error bars; rings at chosen levels, crosses where runs
    diverged."""
    n = len(groups)
    colors = (
        plt.get_cmap("tab10")(range(n))
        if n <= 10
        else plt.get_cmap("viridis")(np.linspace(0, 0.95, n))
    )
    for color, (key, g) in zip(colors, groups, strict=True):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(x)
        xs = np.array([position[v] for v in g[x]], float)
        ys = g["mean"].to_numpy(float)
        ax.errorbar(
            xs,
            ys,
            yerr=g["sem"].fillna(0).to_numpy(float),
            fmt="-o",
            ms=3,
            capsize=2,
            color=color,
            label=_label(keys, key) if keys else "all runs",
        )
        hit = g["chosen"].to_numpy(bool)
        ax.scatter(xs[hit], ys[hit], s=130, facecolors="none", edgecolors=color, lw=1.8, zorder=4)
        bad = (g["n_diverged"].to_numpy() > 0) & np.isfinite(ys)
        ax.scatter(xs[bad], ys[bad], marker="x", s=50, color="k", zorder=5)


def _label_curves(ax, tuning: Tuning, x: str, by: str | None) -> None:
    """The axes' labels, with units, and the title (one line; the rest a caption)."""
    from fitrules.views.figures import one_line_title, unit_label

    config = list(tuning.configuration)
    metric = tuning.grid.metric + (f" ({tuning.grid.unit})" if tuning.grid.unit else "")
    ax.set_xlabel(unit_label(x, tuning.grid.units.get(x)))
    shown = unit_label(metric, None)
    ax.set_ylabel(f"{shown} (mean ± s.e. over all seeds)" if by is None else f"{shown} (mean)")
    over = "" if by is None else f", averaged over {', '.join(c for c in config if c != by)}"
    one_line_title(
        ax,
        f"{metric} against {x} per configuration{over}\n"
        f"rings: level chosen ({tuning.scheme})"
        + ("; x: some runs diverged" if (tuning.curves["n_diverged"] > 0).any() else ""),
    )


def _curve_legend(ax, n: int) -> None:
    """The legend: beside the axes for many lines, none but the ring's for too many."""
    handles, _ = ax.get_legend_handles_labels()
    handles.append(
        Line2D([], [], ls="", marker="o", ms=10, mfc="none", mec="k", label="chosen level")
    )
    if n > TOO_MANY_LINES:  # a legend this tall would squeeze the axes to nothing
        ax.legend(handles=handles[-1:], fontsize=8, loc="best")
        ax.text(0.01, 0.01, f"{n} configurations (too many to name; see .curves)",
                transform=ax.transAxes, fontsize=8, va="bottom")  # fmt: skip
    elif n > MANY_LINES:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(handles=handles, fontsize=8, loc="best")


def chosen_levels_map(tuning: Tuning, x: str, y: str, ax=None):
    """Heat map of the level chosen in each configuration over two configuration factors.

    Shows the choice of fold ``A->B`` under cross-fitting (a cell whose ``B->A`` choice
    differs says so) or the tune-seed choice; a red outline marks a choice at the lowest or
    highest level tried.

    Parameters
    ----------
    tuning : the result of :func:`fitrules.jobs.tune.tune` with one tuned factor.
    x, y : configuration factors for the columns and rows, e.g. ``"H"`` and ``"keep"``.
    ax : matplotlib Axes to draw on; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on: one cell per (x, y) configuration, a colour bar of the levels.

    Raises
    ------
    GridError
        If more than one factor was tuned, ``x`` or ``y`` is not a configuration factor, or
        another configuration factor varies within an (x, y) cell (the cell would hold
        several choices; a factor derived from x or y, such as omega from keep, is fine).

    Examples
    --------
    >>> ax = chosen_levels_map(tune(grid, ["lr"]), x="H", y="keep")  # doctest: +SKIP
    """
    f = _check_map_factors(tuning, x, y)
    c = tuning.choices
    shown = FOLD_AB if tuning.scheme != TUNE_SEEDS else TUNE_SEEDS
    first = c[c["fold"] == shown].set_index([y, x])
    second = c[c["fold"] == FOLD_BA].set_index([y, x]) if shown == FOLD_AB else None
    xs = sorted(c[x].unique())
    ys = sorted(c[y].unique())
    levels = sorted(tuning.curves[f].unique())
    index = {v: i for i, v in enumerate(levels)}
    codes = np.full((len(ys), len(xs)), np.nan)
    for (yv, xv), row in first.iterrows():
        codes[ys.index(yv), xs.index(xv)] = index[row[f"chosen_{f}"]]
    ax = _ax(ax, (1.3 * len(xs) + 3.0, 0.7 * len(ys) + 2.5))
    cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.1, 0.9, len(levels))))
    norm = BoundaryNorm(np.arange(len(levels) + 1) - 0.5, len(levels))
    im = ax.imshow(codes, cmap=cmap, norm=norm, aspect="auto", origin="lower")
    _mark_choices(ax, f, first, second, xs, ys, codes, len(levels))
    ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys])
    from fitrules.views.figures import one_line_title, unit_label

    ax.set_xlabel(unit_label(x, None))
    ax.set_ylabel(unit_label(y, None))
    fold = f"fold {FOLD_AB}" if shown == FOLD_AB else "tune seeds"
    one_line_title(
        ax, f"{f} chosen per configuration ({fold})\nred outline: at the edge of the sweep"
    )
    bar = ax.figure.colorbar(im, ax=ax, ticks=range(len(levels)))
    bar.ax.set_yticklabels([_fmt(v) for v in levels])
    bar.set_label(f"chosen {f}")
    return ax


def _check_map_factors(tuning: Tuning, x: str, y: str) -> str:
    """The one tuned factor; x and y must be two configuration factors that fix the others."""
    if len(tuning.factors) != 1:
        raise GridError(
            f"chosen_levels_map: shows one tuned factor; this tuning has "
            f"{', '.join(tuning.factors)}"
        )
    f = tuning.factors[0]
    config = list(tuning.configuration)
    for name, v in (("x", x), ("y", y)):
        if v not in config:
            raise GridError(
                f"chosen_levels_map: {name}={v!r} is not a configuration factor; "
                f"allowed: {', '.join(config) or 'none'}"
            )
    if x == y:
        raise GridError(f"chosen_levels_map: x and y are both {x!r}; give two factors")
    c = tuning.choices
    for other in config:
        if other in (x, y):
            continue
        if c.groupby([y, x], dropna=False)[other].nunique(dropna=False).max() > 1:
            raise GridError(
                f"chosen_levels_map: configurations also differ in {other!r}; "
                f'tune a grid filtered to one {other!r} (e.g. where=["{other} == ..."])'
            )
    return f


def _mark_choices(ax, f: str, first, second, xs: list, ys: list, codes, n_levels: int) -> None:
    """Each cell's chosen level in words; an edge outlined, the other fold's choice named
    where it differs."""
    for (yv, xv), row in first.iterrows():
        i, j = ys.index(yv), xs.index(xv)
        lines = [_fmt(row[f"chosen_{f}"])]
        if row["at_edge"]:
            lines.append(
                str(row["edge"]).replace("highest", "max tried").replace("lowest", "min tried")
            )
            ax.add_patch(Rectangle((j - 0.47, i - 0.47), 0.94, 0.94, fill=False, ec="red", lw=2.5))
        if second is not None and (yv, xv) in second.index:
            other = second.loc[(yv, xv), f"chosen_{f}"]
            if other != row[f"chosen_{f}"]:
                lines.append(f"{FOLD_BA}: {_fmt(other)}")
        dark = codes[i, j] < n_levels / 2
        ax.text(
            j,
            i,
            "\n".join(lines),
            ha="center",
            va="center",
            fontsize=8,
            color="white" if dark else "black",
        )
