"""Figures. Each function takes an optional matplotlib Axes, draws on it and returns it.

They are written for any grid, not only the DiLoCo one:

- **Axes from quantiles.** A range is set by the quartiles of what is drawn (fences at three
  interquartile ranges, on a log scale when the values are positive and span more than 30
  times), so one runaway split does not squash every other point into a corner. Points
  beyond the range are drawn on its edge with an open marker and counted in the legend or a
  note, with the largest value; curves that continue beyond the edge end in an arrow.
- **Titles of one line** (at most ``TITLE_MAX`` characters); what does not fit, such as a
  paired verdict, is a caption under the axes, and what the marks mean is in the legend.
- **Log axes for scale variables**: a positive variable whose levels are evenly spaced on a
  log scale (N, D, H, lr) or span more than ``LOG_SPAN`` times, ticked at its levels and
  written 2e7, 1.6e8 (legends "N = 2e7").
- **Labels true to the data**: the metric's unit only when it is known (``--unit`` or a
  table written by ``fitrules simulate``); "mean ± s.e. over seeds" only when some cell has
  repeated runs; "hatched: degenerate" only when a bar is.
- **Every variable of a form**: fitted curves and residuals against each variable it reads;
  other variables with many levels are grouped into a few bins.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fitrules.model.compiled import predict
from fitrules.views.text_parts import with_unit

FENCE = 3.0  # interquartile ranges beyond the quartiles that still set the axis range
RESIDUAL_FENCE = 10.0  # residuals of full-grid fits: only runaway ones go to the edge
LOG_SPAN = 30.0  # positive values spanning more than this many times get a log axis
MAX_GROUPS = 6  # more levels than this of a variable not on the x axis are binned
EDGE = dict(marker="o", facecolors="none", linewidths=1.2, zorder=4)


def _legend(ax, **kwargs) -> None:
    """A legend when something is labelled (a form with no usable split draws nothing),
    placed in the axes' free space: where asked (or "best") if no data lie under it, else
    outside the axes on the right."""
    if not (kwargs.get("handles") or ax.get_legend_handles_labels()[0]):
        return
    if "bbox_to_anchor" in kwargs:  # asked for outside the axes
        ax.legend(**kwargs)
        return
    kwargs.setdefault("loc", "best")
    ax.legend(**kwargs)
    if legend_overlap(ax):
        kwargs.pop("loc")
        wide = ax.get_legend().get_window_extent().width > 0.3 * ax.figure.bbox.width
        if wide:  # long labels: below the axes (and below the x label, clear of it)
            ax.figure.draw_without_rendering()
            label = ax.xaxis.label.get_window_extent()
            below = ax.transAxes.inverted().transform((0, label.y0))[1] - 0.03
            legend = ax.legend(loc="upper center", bbox_to_anchor=(0.5, min(below, -0.16)),
                               borderaxespad=0, **kwargs)  # fmt: skip
            for note in captions(ax):  # a caption goes under the legend, not through it
                note.xycoords = legend
        else:
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, **kwargs)


def data_points(ax, step: float = 3.0) -> np.ndarray:
    """Display coordinates of what is drawn in data coordinates: the markers of every
    scatter and the points of every line, with segments filled in every ``step`` pixels (a
    legend over the middle of a segment covers it too). Lines in axes coordinates
    (``axhline``) are left out: a legend may sit on a reference line."""
    from matplotlib.cbook import STEP_LOOKUP_MAP

    parts = []
    for line in ax.lines:
        if line.get_transform() is not ax.transData or not line.get_visible():
            continue
        xy = np.asarray(line.get_xydata(), float)
        if not len(xy):
            continue
        xs, ys = STEP_LOOKUP_MAP[line.get_drawstyle()](xy[:, 0], xy[:, 1])
        pts = ax.transData.transform(np.column_stack([xs, ys]))
        if line.get_linestyle() not in ("None", "", " ") and len(pts) > 1:
            parts.append(_fill_segments(pts, step))
        parts.append(pts)
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), float)
        if len(offsets) and coll.get_offset_transform() is ax.transData and coll.get_visible():
            parts.append(ax.transData.transform(offsets))
    if not parts:
        return np.empty((0, 2))
    pts = np.concatenate(parts)
    return pts[np.isfinite(pts).all(1)]


def _fill_segments(pts: np.ndarray, step: float) -> np.ndarray:
    """Points every ``step`` pixels along each finite segment of the polyline ``pts``, both
    ends included (at least 2, at most 2002 a segment), segment after segment: for each, the
    values of ``p0 + np.linspace(0, 1, k)[:, None] * (p1 - p0)``, bit for bit."""
    a, b = pts[:-1], pts[1:]
    ok = np.isfinite(a).all(1) & np.isfinite(b).all(1)
    a, b = a[ok], b[ok]
    if not len(a):
        return np.empty((0, 2))
    d = b - a
    k = np.minimum(np.hypot(d[:, 0], d[:, 1]) // step, 2000).astype(int) + 2
    seg = np.repeat(np.arange(len(k)), k)
    ends = np.cumsum(k)
    i = np.arange(ends[-1]) - np.repeat(ends - k, k)
    # np.linspace(0, 1, k) is i * (1 / (k - 1)), its last point set to 1 exactly
    t = i * np.repeat(1.0 / (k - 1), k)
    t[ends - 1] = 1.0
    return a[seg] + t[:, None] * d[seg]


def legend_overlap(ax) -> int:
    """How many drawn data points lie under the axes' legend (0 when it has none)."""
    legend = ax.get_legend()
    if legend is None:
        return 0
    # layout without rasterising: a tenth of the cost of a full draw
    ax.figure.draw_without_rendering()
    box = legend.get_window_extent().padded(-1)
    pts = data_points(ax)
    inside = (
        (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
    )
    return int(inside.sum())


# ------------------------------------------------------------------ helpers
def _ax(ax, size=(7.0, 4.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


TITLE_MAX = 60  # characters: a title is one line; what else there is to say goes below


def _title(ax, text: str, fontsize: float = 10.0) -> None:
    """A one-line title (its first line, cut at ``TITLE_MAX`` characters); the other lines
    of ``text`` go under the axes as a caption."""
    head, _, rest = text.partition("\n")
    if len(head) > TITLE_MAX:
        head = head[: TITLE_MAX - 1].rstrip() + "…"
    ax.set_title(head, fontsize=fontsize)
    if rest.strip():
        caption(ax, rest)


one_line_title = _title  # for the other views' figures


def caption(ax, text: str, fontsize: float = 8.0) -> None:
    """``text`` under the axes, below the x label, wrapped to the axes' width: a figure's
    long statements (a verdict, what the marks mean) kept off the title and off the data."""
    width_in = ax.figure.get_size_inches()[0] * ax.get_position().width
    chars = max(30, int(width_in * 72 / (0.55 * fontsize)))
    lines = [textwrap.fill(part, chars) for part in text.strip().split("\n")]
    note = ax.annotate("\n".join(lines), xy=(0.5, 0), xycoords=ax.xaxis.label, xytext=(0, -4),
                       textcoords="offset points", ha="center", va="top", fontsize=fontsize,
                       annotation_clip=False, color="0.25")  # fmt: skip
    note._fitrules_caption = True


def captions(ax) -> list:
    return [t for t in ax.texts if getattr(t, "_fitrules_caption", False)]


def _unit_of(cells, name: str) -> str | None:
    return (getattr(cells, "units", None) or {}).get(name)


_labels: ContextVar[dict | None] = ContextVar("fitrules_axis_labels", default=None)
_units: ContextVar[dict | None] = ContextVar("fitrules_axis_units", default=None)


def parse_labels(labels: str | dict | None, what: str = "labels") -> dict[str, str]:
    """``"val/loss=validation loss,H=sync interval"`` (or a dict) as ``{column: label}``;
    ``what="units"`` for ``"N=parameters,D=tokens"``.

    Raises
    ------
    ReportError
        For a pair without ``=`` or with an empty side, or a value that is neither text
        nor a dict of text.
    """
    from fitrules.base.arguments import name_value_pairs
    from fitrules.base.errors import ReportError

    word = "label" if what == "labels" else "unit"
    example = "'val/loss=validation loss'" if what == "labels" else "'N=parameters,D=tokens'"
    if labels is None:
        return {}
    if isinstance(labels, dict):
        if not all(isinstance(k, str) and isinstance(v, str) and k and v
                   for k, v in labels.items()):  # fmt: skip
            raise ReportError(f"{what} {labels!r}: expected a dict of column -> {word} (text)")
        return dict(labels)
    if not isinstance(labels, str):
        raise ReportError(f"{what} {labels!r}: expected 'COLUMN={word.upper()},...' or a dict")
    out = name_value_pairs(labels)
    if out is None:
        raise ReportError(
            f"--{what} {labels!r}: expected COLUMN={word.upper()} pairs, e.g. {example}"
        )
    return out


@contextmanager
def axis_labels(labels: str | dict | None, units: str | dict | None = None):
    """Within the block, axes name the columns of ``labels`` by their label
    (``{"val/loss": "validation loss"}``) and give the columns of ``units`` that unit
    (``{"N": "parameters"}``, over a unit the table knows); ``None`` keeps those in force."""
    tokens = []
    if labels is not None:
        tokens.append((_labels, _labels.set(parse_labels(labels))))
    if units is not None:
        tokens.append((_units, _units.set(parse_labels(units, "units"))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def shown_name(name: str) -> str:
    """The column's label (:func:`axis_labels`), or its name."""
    return (_labels.get() or {}).get(name, name)


def unit_label(name: str, unit: str | None) -> str:
    """``"loss (nats)"``, or ``"loss"`` when the unit is not known or is the label itself
    (``"experts"``, not ``"experts (experts)"``); a column given a label or a unit
    (:func:`axis_labels`, ``--labels``) is named by them."""
    unit = (_units.get() or {}).get(name, unit)
    shown = shown_name(name)
    return f"{shown} ({unit})" if unit and unit.strip() != shown.strip() else shown


MAX_LEVEL_TICKS = 12  # a variable with at most this many levels is ticked at each level


def level_text(v: float) -> str:
    """A level as people write it: ``64``, ``0.25``, ``2e7``, ``1.5e9``, ``3e-4`` (no
    ``e+07``)."""
    v = float(v)
    if v == 0 or not np.isfinite(v) or 1e-3 <= abs(v) < 1e4:
        return f"{v:.4g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def level_ticks(ax, values: np.ndarray, axis: str = "x") -> None:
    """Tick a log axis at the grid's levels (1, 4, 16, 64; 2e7, 6e7), labelled plainly,
    rather than at powers of ten: a reader looks for the settings that were run."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    v = np.unique(np.asarray(values, float))
    v = v[np.isfinite(v) & (v > 0)]
    if not 1 < len(v) <= MAX_LEVEL_TICKS:
        return
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(v))
    target.set_major_formatter(FuncFormatter(lambda t, _: level_text(t)))
    target.set_minor_locator(NullLocator())


def scale_log(values) -> bool:
    """A log axis for a positive scale variable: one spanning more than ``LOG_SPAN`` times,
    or whose levels (at least 4 times apart) are closer to evenly spaced in log than in
    linear terms (N = 2e7, 6e7, 2e8; H = 1, 4, 16), as a grid over a scale is laid out."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v) or v.min() <= 0:
        return False
    if _use_log(v):
        return True
    levels = np.unique(v)
    if len(levels) < 2 or levels[-1] / levels[0] < 4:
        return False
    if len(levels) == 2:
        return True
    lin, log = np.diff(levels), np.diff(np.log(levels))
    return bool(np.std(log) / np.mean(log) < np.std(lin) / np.mean(lin))


def _use_log(v: np.ndarray) -> bool:
    v = v[np.isfinite(v)]
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > LOG_SPAN)


def robust_range(
    values, log: bool | None = None, fence: float = FENCE
) -> tuple[float, float, bool]:
    """Axis range from the quartiles: (low, high, log scale).

    The range covers the values within ``FENCE`` interquartile ranges of the quartiles (on
    a log scale when the values are positive and span more than ``LOG_SPAN`` times), padded
    by 5%. Values outside it are for :func:`clip_to` to draw on the edge.
    """
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0, False
    if log is None:
        log = bool(v.min() > 0)
        t = np.log10(v) if log else v
        q1, q3 = np.percentile(t, [25, 75])
        iqr = max(q3 - q1, 1e-12)
        inside = t[(t >= q1 - fence * iqr) & (t <= q3 + fence * iqr)]
        log = log and inside.max() - inside.min() > np.log10(LOG_SPAN)
    t = np.log10(v) if log else v
    q1, q3 = np.percentile(t, [25, 75])
    iqr = q3 - q1
    lo, hi = max(t.min(), q1 - fence * iqr), min(t.max(), q3 + fence * iqr)
    pad = 0.05 * (hi - lo) if hi > lo else (0.05 * abs(hi) if hi else 0.5)
    pad = pad if pad > 0 else 0.05
    lo, hi = lo - pad, hi + pad
    if log:
        return float(10**lo), float(10**hi), True
    return float(lo), float(hi), False


def clip_to(v: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Values clipped into [lo, hi] and a mask of those that were outside."""
    v = np.asarray(v, float)
    return np.clip(v, lo, hi), (v < lo) | (v > hi)


def _identity_square(ax, lo: float, hi: float, log: bool, label: str) -> None:
    """The line y = x, both axes over [lo, hi] (log scales when ``log``)."""
    ax.plot([lo, hi], [lo, hi], color="k", lw=1, label=label)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)


def _off_note(n_off: int, largest: float, what: str = "point") -> str:
    what = what if n_off == 1 else f"{what}s"
    return f"{n_off} {what} off the chart, drawn on its edge (largest {largest:.4g})"


def data_range(observed, others=(), reach: float = 0.5) -> tuple[float, float, bool]:
    """Axis range for a metric: every observed value shown (data are never pushed off the
    chart), widened to other values (predictions) that lie within ``reach`` times the
    observed span beyond it; the rest of those are for :func:`clip_to`."""
    y = np.asarray(observed, float)
    y = y[np.isfinite(y)]
    o = np.asarray(others, float)
    o = o[np.isfinite(o)]
    if not len(y):
        return robust_range(o)
    log = _use_log(np.concatenate([y, o[o > 0]]) if (y > 0).all() else y)
    t = np.log10(y) if log else y
    lo, hi = t.min(), t.max()
    span = hi - lo if hi > lo else max(abs(hi) * 0.1, 1e-6)
    if len(o) and (not log or (o > 0).all()):
        to = np.log10(o) if log else o
        near = to[(to >= lo - reach * span) & (to <= hi + reach * span)]
        if len(near):
            lo, hi = min(lo, near.min()), max(hi, near.max())
    pad = 0.06 * (hi - lo if hi > lo else span)
    lo, hi = lo - pad, hi + pad
    return (float(10**lo), float(10**hi), True) if log else (float(lo), float(hi), False)


def _has_repeats(cells) -> bool:
    return bool((cells.table["n_seeds"] > 1).any())


def _errorbar_label(cells) -> str:
    return "cells (mean ± s.e. over seeds)" if _has_repeats(cells) else "cells (one run each)"


def _sem(cells, rows=None) -> np.ndarray | None:
    t = cells.table if rows is None else cells.table.loc[rows]
    return t["sem"].fillna(0).to_numpy(float) if _has_repeats(cells) else None


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float | np.floating) else str(v)


def _level(v) -> str:
    return level_text(v) if isinstance(v, int | float | np.integer | np.floating) else str(v)


# One sign convention in every figure, table and JSON: observed minus predicted, in percent
# of the observed value (a cell above the fit is positive), said on every axis.
RESIDUAL_LABEL = "observed - predicted (% of observed)"


def residuals_pct(cells, form, constants) -> np.ndarray:
    """(observed - predicted) / observed, in percent, at every cell."""
    pred = predict(form, cells.X, constants)
    y = cells.y
    return 100 * (y - pred) / y


# ------------------------------------------------------------------ comparisons
def _in_unit(cmp) -> str:
    """`` (%)`` after an axis of held-out errors, in the comparison's error unit."""
    unit = cmp.error_metric["unit"]
    return f" ({unit})" if unit else ""


def _usable(cmp, form):
    df = cmp.results[cmp.results["form"] == form]
    ok = df["heldout_error"].notna()
    if not cmp.settings["keep_degenerate"]:
        ok &= ~df["degenerate"]
    return df[ok]


def heldout_ecdf(cmp, ax=None):
    """Empirical CDF of the held-out error of every form, on shared axes.

    The x range comes from the quartiles of all forms' errors; a curve that continues beyond
    the right edge ends in an arrow there, and the legend counts its splits beyond.
    """
    ax = _ax(ax)
    series = []
    for i, f in enumerate(cmp.forms):
        e = np.sort(_usable(cmp, f.name)["heldout_error"].to_numpy(float))
        if len(e):
            series.append((i, f.name, e))
    if not series:
        ax.text(0.5, 0.5, "no valid split", ha="center", va="center", transform=ax.transAxes)
        return ax
    lo, hi, log = robust_range(np.concatenate([e for _, _, e in series]))
    res, metric = cmp.results, cmp.error_metric
    unit = metric["unit"]
    floors = res["noise_floor"].to_numpy(float) if "noise_floor" in res else np.array([])
    floor = float(np.median(floors[np.isfinite(floors)])) if np.isfinite(floors).any() else None
    if floor is not None and floor > 0 and floor < hi:
        lo = min(lo, floor * 0.8) if log else min(lo, floor - 0.05 * (hi - lo))
        ax.axvline(floor, color="0.35", ls=":", lw=1.5,
                   label=f"noise floor {with_unit(floor, '.3g', unit)} (knowing each cell's "
                   "true mean)")  # fmt: skip
    for i, name, e in series:
        frac = np.arange(1, len(e) + 1) / len(e)
        beyond = int((e > hi).sum())
        label = f"{name} (median {with_unit(np.median(e), '.3g', unit)}, n={len(e)})"
        if beyond:
            label += f"; {beyond} beyond the edge, up to {with_unit(e.max(), '.4g', unit)}"
        ax.step(np.minimum(e, hi), frac, where="post", color=f"C{i}", label=label)
        if beyond:
            y_exit = frac[len(e) - beyond - 1] if len(e) > beyond else 0.0
            ax.annotate(
                "",
                xy=(hi, y_exit),
                xytext=(-14, 0),
                textcoords="offset points",
                arrowprops=dict(arrowstyle="->", color=f"C{i}", lw=1.5),
            )
    if log:
        ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(
        f"held-out error (mean {metric['quantity']} over held-out cells{', ' * bool(unit)}{unit})"
    )
    basis = "valid splits" if not cmp.settings["keep_degenerate"] else "splits"
    ax.set_ylabel(f"fraction of {basis} at or below")
    _title(ax, f"Held-out error over {cmp.settings['n_splits']} {cmp.settings['protocol']} splits")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8, loc="lower right")
    return ax


def _verdict_head(cmp, a: str, b: str) -> str:
    """The paired test's verdict for (a, b), as the text view states it, without its
    descriptive counts; "a vs b" when the comparison has no test for the pair."""
    from fitrules.views.text import verdict_sentence

    paired = getattr(cmp, "paired", None)
    if paired is None or not len(paired):
        return f"{a} vs {b}"
    rows = paired[[{r["a"], r["b"]} == {a, b} for r in paired.to_dict("records")]]
    if not len(rows):
        return f"{a} vs {b}"
    basis = cmp.settings.get("splits_used", "valid")
    text = verdict_sentence(rows.iloc[0].to_dict(), basis, cmp.error_metric["unit"])
    return text.split(". Descriptive:")[0]


def paired_scatter(cmp, a: str, b: str, ax=None):
    """One point per split valid for both forms: a's error against b's; the diagonal drawn.

    The range comes from the quartiles of both forms' errors; splits beyond it are drawn on
    the edge as open circles and counted in the legend.
    """
    ax = _ax(ax, (5.2, 5.2))
    ea = _usable(cmp, a).set_index("split")["heldout_error"]
    eb = _usable(cmp, b).set_index("split")["heldout_error"]
    both = ea.index.intersection(eb.index)
    x, y = ea.loc[both].to_numpy(float), eb.loc[both].to_numpy(float)
    wins = int((x < y).sum())
    if len(both):
        lo, hi, log = robust_range(np.concatenate([x, y]))
        xc, xo = clip_to(x, lo, hi)
        yc, yo = clip_to(y, lo, hi)
        off = xo | yo
        ax.scatter(xc[~off], yc[~off], s=12, alpha=0.6, color="C0",
                   label=f"splits (n={len(both)}; {a} lower in {wins})")  # fmt: skip
        if off.any():
            largest = float(np.max(np.concatenate([x[off], y[off]])))
            ax.scatter(xc[off], yc[off], s=30, edgecolors="C3", **EDGE, label=_off_note(
                int(off.sum()), largest, "split"))  # fmt: skip
        _identity_square(ax, lo, hi, log, "equal error")
    in_unit = _in_unit(cmp)
    ax.set_xlabel(f"{a}: held-out error{in_unit}")
    ax.set_ylabel(f"{b}: held-out error{in_unit}")
    # the verdict is a paragraph: under the figure, the title stays one line
    _title(
        ax,
        f"{a} against {b}: held-out error per split\n{_verdict_head(cmp, a, b)}\n"
        f"Descriptive only: {a} lower in {wins} of {len(both)} splits (above the diagonal).",
    )
    _legend(ax, fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return ax


def errors_by_split(cmp, ax=None):
    """Held-out error of each form in each split (grouped bars), with the noise floor."""
    t = cmp.results
    splits = sorted(t["split"].unique())
    labels = [t.loc[t["split"] == s, "split_label"].iloc[0] for s in splits]
    names = [f.name for f in cmp.forms]
    ax = _ax(ax, (max(7.5, 1.6 * len(splits) + 4), 4.5))
    width = 0.8 / len(names)
    any_hatched = False
    for i, name in enumerate(names):
        d = t[t["form"] == name].set_index("split").loc[splits]
        vals = d["heldout_error"].to_numpy(float)
        bars = ax.bar(
            np.arange(len(splits)) + (i - (len(names) - 1) / 2) * width,
            np.nan_to_num(vals),
            width,
            label=name,
            color=f"C{i}",
        )
        for bar, deg in zip(bars, d["degenerate"], strict=True):
            if deg:
                bar.set_hatch("//")
                any_hatched = True
    floor = t.drop_duplicates("split").set_index("split").loc[splits, "noise_floor"]
    x = np.arange(len(splits))
    f = floor.to_numpy(float)
    if np.isfinite(f).any():
        ax.hlines(f, x - 0.42, x + 0.42, colors="k", linestyles="--", lw=1.5,
                  label="noise floor", zorder=3)  # fmt: skip
    ax.set_xticks(range(len(splits)), labels, fontsize=8)
    ax.set_ylabel(f"held-out error{_in_unit(cmp)}")
    v = t["heldout_error"].to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) and v.max() > LOG_SPAN * v.min():
        ax.set_yscale("log")
    handles, texts = ax.get_legend_handles_labels()
    if any_hatched:  # said by the legend, not the title
        from matplotlib.patches import Patch

        handles.append(Patch(facecolor="none", edgecolor="0.3", hatch="//"))
        texts.append("degenerate")
    _title(ax, f"Held-out error per split: {cmp.settings['protocol']}")
    _legend(ax, handles=handles, labels=texts, fontsize=8, loc="upper left",
            bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # fmt: skip
    ax.grid(alpha=0.3, axis="y")
    return ax


# ------------------------------------------------------------------ one fit
def observed_vs_predicted(cells, form, constants, unit: str | None = None, ax=None):
    """Full-grid fit: each cell's value (with its standard error when it has repeats)
    against the prediction."""
    panel = None
    if ax is None:
        fig, (ax, panel) = plt.subplots(
            2, 1, figsize=(5.2, 6.6), layout="constrained", height_ratios=(3, 1.3), sharex=True
        )
    t = cells.table
    pred = predict(form, cells.X, constants)
    y = t["value"].to_numpy(float)
    lo, hi, log = data_range(y, pred)
    pc, off = clip_to(pred, lo, hi)
    yc = y
    sem = _sem(cells)
    ax.errorbar(
        pc[~off],
        yc[~off],
        yerr=None if sem is None else sem[~off],
        fmt="o",
        ms=4,
        capsize=2,
        label=_errorbar_label(cells),
    )
    if off.any():
        largest = float(pred[off][np.argmax(np.abs(pred[off]))])
        ax.scatter(pc[off], yc[off], s=30, edgecolors="C3", **EDGE,
                   label=_off_note(int(off.sum()), largest, "prediction"))  # fmt: skip
    _identity_square(ax, lo, hi, log, "observed = predicted")
    ax.set_xlabel(f"predicted {unit_label(cells.metric, unit)}")
    ax.set_ylabel(f"observed {unit_label(cells.metric, unit)}")
    _title(ax, f"{form.name} fitted on all {len(t)} cells")
    _legend(ax, fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    if panel is not None:
        ax.set_xlabel("")
        _residual_panel(panel, pc, y, pred, off, sem, lo, hi)
        panel.set_xlabel(f"predicted {unit_label(cells.metric, unit)}")
    return ax


def _residual_panel(ax, pc, y, pred, off, sem, lo, hi) -> None:
    """(observed - predicted) / observed in percent under the observed-predicted panel (the
    residuals' one convention): on a 2 to 3.4 range a 0.5% miss is a hair's breadth from the
    diagonal; here it is the scale."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = 100 * (y - pred) / y
        rs = None if sem is None else 100 * sem / np.abs(y)
    ok = ~off & np.isfinite(r)
    if ok.any():
        rlo, rhi, _ = robust_range(r[ok], log=False, fence=RESIDUAL_FENCE)
        rlo, rhi = min(rlo, 0.0), max(rhi, 0.0)
        pad = 0.1 * (rhi - rlo) if rhi > rlo else 1.0
        rc, roff = clip_to(r, rlo - pad, rhi + pad)
        inside = ok & ~roff
        ax.errorbar(pc[inside], rc[inside], yerr=None if rs is None else rs[inside], fmt="o",
                    ms=3, capsize=2)  # fmt: skip
        if (ok & roff).any():
            ax.scatter(pc[ok & roff], rc[ok & roff], s=24, edgecolors="C3", **EDGE)
        ax.set_ylim(rlo - pad, rhi + pad)
    ax.axhline(0, color="k", lw=1)
    ax.set_xlim(lo, hi)
    ax.set_ylabel(RESIDUAL_LABEL.replace(" (", "\n("), fontsize=8)
    ax.grid(alpha=0.3)


def residual_limit(residuals: Sequence[np.ndarray]) -> float:
    """One colour limit for several residual maps: the 95th percentile of |residual| over
    all of them (cells beyond it are saturated and the colour bar says so)."""
    v = np.abs(np.concatenate([np.asarray(r, float).ravel() for r in residuals]))
    v = v[np.isfinite(v)]
    return float(max(np.percentile(v, 95), 1e-6)) if len(v) else 1.0


def can_map(cells, x: str, y: str) -> bool:
    """A heat map needs a grid: few levels of x and y, and at most one cell per pair."""
    t = cells.table
    return (
        x in t
        and y in t
        and t[x].nunique() <= 12
        and t[y].nunique() <= 12
        and not t.duplicated([x, y]).any()
    )


def residual_map(cells, form, constants, x: str, y: str, lim: float | None = None, ax=None):
    """Relative residual (%) of the full-grid fit over two variables, as a labelled heat map.

    ``lim`` is the colour limit; give the same one to every form's map (see
    :func:`residual_limit`) so that their colours can be compared.
    """
    ax = _ax(ax, (5.5, 4.5))
    t = cells.table.copy()
    t["res"] = residuals_pct(cells, form, constants)
    grid = t.pivot_table(index=y, columns=x, values="res", aggfunc="mean")
    vals = grid.to_numpy(float)
    if not np.isfinite(vals).any():  # the fit on all cells predicts nothing finite: say so
        ax.text(0.5, 0.5, f"{form.name}: the fit on all cells gives no finite prediction",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return ax
    if lim is None:
        lim = residual_limit([vals])
    im = ax.imshow(vals, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", origin="lower")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            v = grid.iat[i, j]
            if np.isfinite(v):
                # a residual that rounds to zero shows as 0.0, not -0.0 (issue 44)
                ax.text(j, i, "0.0" if round(v, 1) == 0 else f"{v:+.1f}", ha="center",
                        va="center", fontsize=8,
                        color="white" if abs(v) > 0.6 * lim else "black")  # fmt: skip
    ax.set_xticks(range(grid.shape[1]), [level_text(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [level_text(r) for r in grid.index])
    ax.set_xlabel(unit_label(x, _unit_of(cells, x)))
    ax.set_ylabel(unit_label(y, _unit_of(cells, y)))
    _title(ax, f"{form.name}: observed - predicted, % of observed")
    extend = "both" if np.nanmax(np.abs(vals)) > lim else "neither"
    ax.figure.colorbar(im, ax=ax, extend=extend, label=f"{RESIDUAL_LABEL}, shared scale ±{lim:.3g}")
    return ax


# the forms' residuals at one cell share its x; each form has its own marker, so that two
# points at one place are both seen
MARKERS = "osD^v<>p"


def residuals_vs(cells, fits: Sequence[tuple], x: str, ax=None):
    """Relative residual (%) of each full-grid fit against the variable ``x``.

    ``fits`` holds (form, constants) pairs; all forms share the axes, so their residuals are
    on one scale. Residuals beyond the quartile range are drawn on its edge and counted.
    """
    ax = _ax(ax)
    xs = cells.table[x].to_numpy(float)
    res = [residuals_pct(cells, f, c) for f, c in fits]
    # the union of each form's own range: one form's small residuals must not push a
    # rival's off the chart
    ranges = [robust_range(r, log=False, fence=RESIDUAL_FENCE) for r in res]
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    lo, hi = min(lo, -abs(hi) * 0.05), max(hi, abs(lo) * 0.05)
    n_off = 0
    for i, ((f, _), r) in enumerate(zip(fits, res, strict=True)):
        rc, off = clip_to(r, lo, hi)
        marker = MARKERS[i % len(MARKERS)]
        ax.scatter(xs[~off], rc[~off], s=16, alpha=0.6, color=f"C{i}", marker=marker,
                   label=f.name)  # fmt: skip
        if off.any():
            ax.scatter(xs[off], rc[off], s=30, edgecolors=f"C{i}", **EDGE)
            n_off += int(off.sum())
    if n_off:
        worst = float(np.max(np.abs(np.concatenate(res))))
        ax.text(0.01, 0.01, _off_note(n_off, worst, "residual") + " %", fontsize=8,
                transform=ax.transAxes, va="bottom")  # fmt: skip
    ax.axhline(0, color="k", lw=1)
    if scale_log(xs):
        ax.set_xscale("log")
        level_ticks(ax, xs)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(unit_label(x, _unit_of(cells, x)))
    ax.set_ylabel(RESIDUAL_LABEL)
    # the forms are in the legend, the variable on the x axis
    _title(ax, f"Residuals of the fit{'s' if len(fits) > 1 else ''} on all cells")
    _legend(ax, fontsize=8, loc="upper right", ncol=2 if len(fits) > 3 else 1)
    ax.grid(alpha=0.3)
    return ax


def _groups(t: pd.DataFrame, by: list[str]) -> tuple[pd.Series, dict]:
    """A group key per cell over the variables ``by``, binned by quantiles when one has more
    than MAX_GROUPS levels; and for each group the values its curve is drawn at."""
    if not by:
        return pd.Series(0, index=t.index), {0: {}}
    keys = []
    for v in by:
        col = t[v]
        name = shown_name(v)
        if col.nunique() <= MAX_GROUPS:
            keys.append(col.map(lambda a, name=name: f"{name} = {_level(a)}"))
        else:
            log = scale_log(col.to_numpy(float))
            vals = np.log10(col) if log else col
            bins = pd.qcut(vals, min(4, MAX_GROUPS), duplicates="drop")
            # a bin is named by the levels it holds (its lowest and highest), not by the
            # quantile edges that cut it, which are no level of the grid
            lows = col.groupby(bins, observed=True).transform("min")
            highs = col.groupby(bins, observed=True).transform("max")
            keys.append(
                pd.Series(
                    [f"{name} = {level_text(lo)}" if lo == hi
                     else f"{name} {level_text(lo)} to {level_text(hi)}"
                     for lo, hi in zip(lows, highs, strict=True)],
                    index=t.index,
                )  # fmt: skip
            )
    key = keys[0] if len(keys) == 1 else pd.concat(keys, axis=1).agg("; ".join, axis=1)
    at = {k: {v: float(np.median(t.loc[key == k, v])) for v in by} for k in key.unique()}
    return key, at


def curves_vs(cells, form, constants, x: str, unit: str | None = None, ax=None, band=None):
    """Cell values against ``x`` with the fitted form as lines.

    One colour per level of the form's other variables (binned into a few quantile groups
    when they have many levels, each named by the lowest and highest level it holds, the line
    then drawn at the group's median). A form that
    reads only ``x`` gets one line. ``band``, when given, maps the variables (a dict of
    arrays) to the (low, high) prediction interval there, shaded around each line.
    """
    ax = _ax(ax)
    t = cells.table
    others = [v for v in form.bound_variables if v != x]
    key, at = _groups(t, others)
    xs = t[x].to_numpy(float)
    log_x = scale_log(xs)
    y = t["value"].to_numpy(float)
    lo, hi, log_y = data_range(y)
    sem = _sem(cells)
    n_cut = 0
    band_span: list[tuple[float, float]] = []
    order = sorted(at, key=lambda k: tuple(at[k].values()))
    for i, k in enumerate(order):
        rows = (key == k).to_numpy()
        ax.errorbar(
            xs[rows],
            y[rows],
            yerr=None if sem is None else sem[rows],
            fmt="o",
            ms=4,
            capsize=2,
            color=f"C{i % 10}",
            label=str(k) if others else None,
        )
        span = xs[rows] if others else xs
        dense = (
            np.geomspace(span.min(), span.max(), 200)
            if log_x
            else np.linspace(span.min(), span.max(), 200)
        )
        X = {v: np.full_like(dense, at[k][v]) for v in others}
        X[x] = dense
        curve = predict(form, X, constants)
        shown = (curve >= lo) & (curve <= hi)
        n_cut += int(not shown.all())
        ax.plot(np.where(shown, dense, np.nan), curve, color=f"C{i % 10}", lw=1.2)
        if band is not None:  # a faint fill with its edges drawn: overlapping bands stay legible
            low, high = band(X)
            ax.fill_between(dense, low, high, color=f"C{i % 10}", alpha=0.07, lw=0)
            for edge in (low, high):
                ax.plot(dense, edge, color=f"C{i % 10}", lw=0.6, ls="--", alpha=0.8)
            band_span.append((np.nanmin(low), np.nanmax(high)))
    if n_cut:
        ax.text(0.01, 0.01, f"{n_cut} fitted {'curve leaves' if n_cut == 1 else 'curves leave'}"
                " the range of the data", fontsize=8, transform=ax.transAxes,
                va="bottom")  # fmt: skip
    if band_span:  # the bands shown whole (within one data range beyond the data)
        reach = hi - lo
        lo = max(min(lo, min(b[0] for b in band_span)), lo - reach)
        hi = min(max(hi, max(b[1] for b in band_span)), hi + reach)
        if log_y and lo <= 0:
            lo = float(np.nanmin(y[y > 0])) * 0.9
    if log_x:
        ax.set_xscale("log")
        level_ticks(ax, xs)
    if log_y:
        ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.set_xlabel(unit_label(x, _unit_of(cells, x)))
    what = "mean ± s.e. over seeds" if _has_repeats(cells) else "one run per cell"
    ax.set_ylabel(f"{unit_label(cells.metric, unit)}; {what}")
    names = ", ".join(shown_name(v) for v in others)
    binned = any(t[v].nunique() > MAX_GROUPS for v in others)
    # what the marks mean goes in the legend (its title and two keys), not the title
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    keys = [Line2D([], [], color="0.3", marker="o", ls="none", ms=4, label="data"),
            Line2D([], [], color="0.3", lw=1.2, label="fit on all cells")]  # fmt: skip
    if band is not None:
        keys.append(Patch(facecolor="0.3", alpha=0.2, edgecolor="0.3", ls="--",
                          label="prediction interval (misfit included)"))  # fmt: skip
    handles, texts = ax.get_legend_handles_labels()
    title = f"groups of {names}, lines at the median" if binned else (names or None)
    _title(ax, f"{form.name} fitted on all cells")
    _legend(ax, handles=handles + keys, labels=texts + [k.get_label() for k in keys],
            title=title, title_fontsize=8, fontsize=8,
            ncol=2 if len(order) > 4 else 1)  # fmt: skip
    ax.grid(alpha=0.3)
    return ax


# ------------------------------------------------------------------ paired seeds
def paired_differences(ci, ax=None):
    """Per-seed differences (treatment - baseline), the mean, and both intervals.

    The y range is set by the differences and the intervals, not forced to include zero
    (which would press a small, precisely measured difference into a thin strip); when zero
    is outside the range a note says on which side it lies.
    """
    ax = _ax(ax, (6.5, 4.0))
    d = np.asarray(ci.diffs, float)
    seeds = [str(s) for s in ci.seeds]
    ax.scatter(range(len(d)), d, color="C0", zorder=3, label="one seed: treatment - baseline")
    ax.axhline(ci.mean_diff, color="C1", lw=1.5, label=f"mean {ci.mean_diff:+.4g}")
    pct = round(100 * ci.level)
    lo, hi = ci.t_interval
    shown = [*d, ci.mean_diff]
    if np.isfinite(lo) and np.isfinite(hi):
        ax.axhspan(lo, hi, color="C1", alpha=0.15, label=f"{pct}% paired-t interval")
        shown += [lo, hi]
    blo, bhi = ci.bootstrap_interval
    if blo is not None:
        ax.axhline(blo, color="C2", ls="--", lw=1, label=f"{pct}% bootstrap (BCa) interval")
        ax.axhline(bhi, color="C2", ls="--", lw=1)
        shown += [blo, bhi]
    a, b = float(np.nanmin(shown)), float(np.nanmax(shown))
    pad = 0.08 * (b - a) if b > a else max(abs(a) * 0.1, 1e-6)
    ax.set_ylim(a - pad, b + pad)
    if a - pad <= 0 <= b + pad:
        ax.axhline(0, color="k", lw=1)
    else:
        side = "below" if a > 0 else "above"
        ax.text(0.99, 0.02 if side == "below" else 0.98, f"zero difference is {side} the chart",
                transform=ax.transAxes, ha="right", va="bottom" if side == "below" else "top",
                fontsize=8)  # fmt: skip
    ax.set_xticks(range(len(d)), seeds)
    ax.set_xlabel("seed")
    units = getattr(ci, "units", "") or ""
    ax.set_ylabel(f"difference in {ci.metric if hasattr(ci, 'metric') else 'the metric'}"
                  + (f" ({units})" if units else ""))  # fmt: skip
    _title(ax, f"{ci.treatment} minus {ci.baseline}")
    _legend(ax, fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return ax


DPI = 150
FORMATS = ("png", "svg", "pdf")
_formats: ContextVar[tuple[str, ...]] = ContextVar("figure_formats", default=("png",))


def parse_formats(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"png,svg"`` -> ``("png", "svg")``; PNG always comes first (reports link it).

    Raises
    ------
    ReportError
        For a format other than png, svg and pdf.
    """
    from fitrules.base.errors import ReportError

    if text is None:
        return ("png",)
    items = text.split(",") if isinstance(text, str) else list(text)
    out = [f.strip().lower().lstrip(".") for f in items if f.strip()]
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise ReportError(
            f"figure format {','.join(items) if not isinstance(text, str) else text!r}: "
            f"expected one or more of {', '.join(FORMATS)}, comma-separated (e.g. png,svg)"
        )
    return tuple(dict.fromkeys(["png", *out]))


@contextmanager
def figure_formats(formats: str | Sequence[str] | None):
    """Within the block, :func:`save` writes every figure in ``formats`` (PNG always);
    ``None`` keeps the formats already in force."""
    if formats is None:
        yield
        return
    token = _formats.set(parse_formats(formats))
    try:
        yield
    finally:
        _formats.reset(token)


def save(ax, path) -> None:
    """Write the figure of ``ax`` to ``path`` (a .png) and, in the formats asked for with
    :func:`figure_formats`, beside it as .svg or .pdf; then close it."""
    from pathlib import Path

    path = Path(path)
    for fmt in _formats.get():
        # no date in vector files: a report is byte-identical when remade
        meta = {"Date": None} if fmt == "svg" else ({"CreationDate": None} if fmt == "pdf" else {})
        ax.figure.savefig(path.with_suffix(f".{fmt}"), dpi=DPI, metadata=meta)
    plt.close(ax.figure)
