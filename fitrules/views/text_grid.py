"""A grid in plain text: its summary (what validate prints) and how it was tuned."""

from __future__ import annotations

import math

from fitrules.views.text_parts import numbers_note, seed_effect_sentence

MAX_LEVELS = 12  # a factor with more levels is shown by its count and range


BIG_INTEGER = 10**6  # integers from here on print as numbers do: 1.653e+07, not 16527360


def _digits(values: list) -> int:
    """The fewest significant digits (4 at least, 6 as ``:g`` at most unless more are needed)
    that print the large integers of ``values`` apart."""
    big = sorted({x for x in values if isinstance(x, int) and abs(x) >= BIG_INTEGER})
    for digits in range(4, 18):
        if len({f"{x:.{digits}g}" for x in big}) == len(big):
            return digits
    return 17


def _levels_line(name: str, values: list) -> str:
    digits = _digits(values)

    def show(x) -> str:
        if isinstance(x, float) and not math.isfinite(x):
            # an empty cell of the table is a level of its own: named, never printed as nan
            return "missing" if math.isnan(x) else ("+" if x > 0 else "-") + "infinite"
        if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= BIG_INTEGER:
            return f"{x:.{digits}g}"  # as the figures' axes and the floats beside them
        return f"{x:g}" if isinstance(x, float) else str(x)

    finite = [x for x in values if not (isinstance(x, float) and not math.isfinite(x))]
    values = finite + [x for x in values if x not in finite]  # missing last, after a sort
    if len(values) <= MAX_LEVELS:
        return f"  {name} ({len(values)}): {', '.join(show(x) for x in values)}"
    numeric = all(isinstance(x, int | float) and not isinstance(x, bool) for x in values)
    if numeric and finite:
        tail = "" if len(finite) == len(values) else ", and missing"
        return f"  {name} ({len(values)} levels): {show(finite[0])} to {show(finite[-1])}{tail}"
    return f"  {name} ({len(values)} levels, text): {', '.join(map(show, values[:3]))}, ..."


def render_summary(summary: dict) -> str:
    seed = summary["seed_column"]
    seeds = (
        f"seed column: {seed}"
        if seed
        else "seed column: none (runs cannot be paired by seed; a cell's runs are its repeats)"
    )
    unit = f" {summary['unit']}" if summary.get("unit") else ""
    lines = [
        f"{summary['path']}: sha256 {summary['sha256']}",
        f"rows read: {summary['rows_read']}; "
        + (
            f"exact copies dropped: {summary['duplicates_dropped']}; "
            if summary.get("duplicates_dropped")
            else ""
        )
        + "filtered out by --where: "  # flag words: advice shown on both faces
        f"{summary['filtered_out']}; runs kept: {summary['runs']}",
        "excluded: " + (", ".join(f"{v} {k}" for k, v in summary["excluded"].items()) or "none"),
        *([numbers_note(summary["numbers_from_text"])] if summary.get("numbers_from_text") else []),
        f"metric: {summary['metric']} (range {summary['metric_range'][0]:.4g} to "
        f"{summary['metric_range'][1]:.4g}{unit}); {seeds}",
        f"cells: {summary['cells']} (distinct combinations of "
        f"{', '.join(summary.get('cells_by') or []) or 'nothing: one cell'}; compare counts cells "
        "over the variables its forms read); runs per cell: min "
        f"{summary['seeds_per_cell']['min']}, median {summary['seeds_per_cell']['median']:g}, "
        f"max {summary['seeds_per_cell']['max']}",
        "levels of the varying factors:",
    ]
    for k, v in summary["levels"].items():
        lines.append(_levels_line(k, v))
    if summary.get("continuous"):
        lines.append(
            "continuous (a different value in every run): " + ", ".join(summary["continuous"])
        )
    if summary.get("outcome_like"):
        lines.append(
            "left out as other outcomes of each run (not design columns, not counted in the "
            "cells): "
            + ", ".join(f"{c} ({why})" for c, why in summary["outcome_like"].items())
            # flag words: advice shown on both faces
            + "; a form or --variables that names one reads it"
        )
    if summary.get("per_run_columns"):
        lines.append(
            "per-run columns (a different label in every run; ignored): "
            + ", ".join(summary["per_run_columns"])
        )
    if summary["fixed"]:
        lines.append("fixed: " + ", ".join(f"{k}={v}" for k, v in summary["fixed"].items()))
    seed_line = seed_effect_sentence(summary.get("seed_effect"), summary.get("unit") or "")
    if seed_line:
        lines.append(seed_line)
    return "\n".join(lines)


def _fmt_level(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def render_tuning(tuning, max_rows: int = 24) -> str:
    """Which level won where, winners at the edge of the sweep, and the flattery avoided."""
    d = tuning.describe()
    factors = ", ".join(tuning.factors)
    config = ", ".join(tuning.configuration) or "the whole grid"
    if tuning.scheme == "tune seeds":
        how = (
            f"chosen on seeds {', '.join(map(str, d['tune_seeds']))}, measured on seeds "
            f"{', '.join(map(str, d['evaluation_seeds']))}"
        )
    else:
        how = (
            "cross-fitted: the seeds split in two halves, each half's values taken at the "
            "level the other half chose"
        )
    levels = "; ".join(
        f"{k} in {{{', '.join(_fmt_level(v) for v in vs)}}}" for k, vs in d["levels"].items()
    )
    lines = [
        f"tuning: {factors} tuned per configuration ({config}) over {levels}; {how}; "
        f"{d['runs']} runs kept",
    ]
    flat = tuning.flattery
    chosen_cols = [f"chosen_{f}" for f in tuning.factors]
    for i, r in enumerate(flat.to_dict("records")):
        if i == max_rows:
            lines.append(f"  ... and {len(flat) - max_rows} more configurations (JSON: tuning)")
            break
        where = ", ".join(f"{c}={_fmt_level(r[c])}" for c in tuning.configuration) or "all"
        picks = "; ".join(
            f"{c[len('chosen_') :]} {' / '.join(_fmt_level(v) for v in r[c])}" for c in chosen_cols
        )
        lines.append(
            f"  {where}: {picks}; value {r['honest']:.4f}, chosen on the same seeds "
            f"{r['same_seeds']:.4f} (would have flattered by {r['optimism']:+.4f})"
        )
    if d.get("mean_optimism") is not None:
        lines.append(
            f"  choosing and measuring on the same seeds would have flattered the "
            f"configurations by {d['mean_optimism']:.4f} on average"
        )
    lines += [f"  warning: {w}" for w in tuning.warnings]
    return "\n".join(lines)
