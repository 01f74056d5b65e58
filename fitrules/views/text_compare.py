"""A comparison in plain text: its conclusion, the ranked summary, the paired verdicts in words,
and the lines saying how the splits, the guard and the tests were made."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fitrules.views.text_parts import (
    data_line,
    difference_unit,
    fmt_p,
    headed,
    seed_effect_sentence,
    sentence,
    table,
    with_unit,
)

ALPHA = 0.05  # the Holm-adjusted level at which a verdict names the better form


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not np.isfinite(x))


def verdict_of(row: dict) -> str:
    """A paired row's verdict in words: "A predicts better" (Holm-adjusted p below 0.05,
    the direction from the error ratio or, for held-out groups, the median difference),
    "not distinguishable", or "no test" (too few splits or groups to reject)."""
    p = row.get("p_holm")
    if _missing(p) or _missing(row.get("p")):
        return "no test"
    if p >= ALPHA:
        return "not distinguishable"
    ratio = row.get("ratio")
    a_better = ratio < 1 if not _missing(ratio) else row.get("median_diff", 0) < 0
    return f"{row['a'] if a_better else row['b']} predicts better"


def rank_value(row: dict) -> float:
    """What a summary row is ranked by: its median held-out error on the splits valid for
    every form (``ranked_on == "common"``), else on its own valid splits; inf for none."""
    key = "common_median" if row.get("ranked_on") == "common" else "median"
    v = row.get(key)
    return math.inf if _missing(v) else float(v)


RUNAWAY = 10  # a worst split this many times the median is explained under the table


def worst_notes(rows: list[dict], results: pd.DataFrame, unit: str = "%") -> list[str]:
    """A line under the table for a ranked form whose worst split is many times its median
    (issue 44: "worst split 209.5%, worst cell 1512%" beside the winner, explained 40 lines
    later): which split it is, whether the guard names its fit wild, and that the ranking
    reads medians."""
    out = []
    for r in rows:
        med, worst = r.get("median"), r.get("worst_split")
        if _missing(med) or _missing(worst) or not med > 0 or worst < RUNAWAY * med:
            continue
        mine = results[(results["form"] == r["form"]) & results["used"].astype(bool)]
        if not len(mine):
            continue
        top = mine.loc[mine["heldout_error"].astype(float).idxmax()]
        why = (
            "a fit the guard names wild (listed below, with the summaries without such fits)"
            if bool(top.get("wild"))
            else "a fit the guard did not name: it extrapolates badly to the cells it holds out"
        )
        out.append(
            f"note: {r['form']}'s worst split ({with_unit(worst, '.4g', unit)}, "
            f"{top['split_label']}) is {why}; its worst cell is "
            f"{with_unit(r.get('worst_cell', float('nan')), '.4g', unit)}; the ranking "
            "reads medians, which a runaway split does not move"
        )
    return out


def heldout_definition(
    kind: str | None, where: str = "held-out cells", metric: dict | None = None
) -> str:
    """What a split's held-out error is, under the settings' ``heldout_weights``, in the
    result's ``error_metric`` (by default the ``|relative error|`` in %)."""
    quantity = (metric or {}).get("quantity", "|relative error|")
    unit = (metric or {}).get("unit", "%") or "the grid's value units"
    if kind == "box":
        return (
            f"mean {quantity} over {where}, each weighted by its share of the grid's box "
            f"(half on an edge of a variable, a quarter at a corner), in {unit}"
        )
    return f"mean {quantity} over {where}, in {unit}"


def common_note(summary: list[dict]) -> str:
    """What the two median columns are, and which one ranks the forms."""
    if not summary:
        return ""
    n = summary[0].get("common_splits", 0)
    if summary[0].get("ranked_on") == "common":
        return (
            f"common median = over the {n} splits valid for every form, which the ranking "
            "uses; median = over each form's own valid splits"
        )
    return (
        f"only {n} splits are valid for every form, so the ranking uses each form's median "
        "over its own valid splits (a form set aside on hard splits looks better by it)"
    )


def conclusion(summary: list[dict], paired: list[dict], unit: str = "%") -> list[str]:
    """The answer in at most three lines: which form predicts best, which rivals it beats
    with the corrected paired verdict, which it cannot be told from.

    Parameters
    ----------
    summary, paired : the records of :attr:`Comparison.summary` and :attr:`Comparison.paired`
        (``to_dict()["summary"]``, ``["paired"]``).
    unit : the unit of their errors (:attr:`Comparison.error_metric`).
    """
    rank = [r for r in summary if math.isfinite(rank_value(r))]
    rank.sort(key=rank_value)
    if not rank:
        return ["No form has a valid split: nothing to rank (see the flagged pairs below)."]
    best = rank[0]
    name = best["form"]
    if len(rank) == 1 or best.get("ranked_on", "own") == "own":
        first = (
            f"{name} predicts the held-out cells best: median error "
            f"{with_unit(best['median'], '.3f', unit)} over {best['splits_used']} splits"
        )
        if len(rank) > 1:
            first += (
                f" (next {rank[1]['form']}, {with_unit(rank[1]['median'], '.3f', unit)} over "
                f"{rank[1]['splits_used']}; ranked on each form's own valid splits, since only "
                f"{best.get('common_splits', 0)} are valid for every form)"
            )
    else:
        first = (
            f"{name} predicts the held-out cells best: median error "
            f"{with_unit(best['common_median'], '.3f', unit)} over the {best['common_splits']} "
            f"splits valid for every form (next {rank[1]['form']}, "
            f"{with_unit(rank[1]['common_median'], '.3f', unit)})"
        )
    lines = [first + "."]
    beats, loses, same, untested = [], [], [], []
    for r in paired:
        if name not in (r["a"], r["b"]):
            continue
        other = r["b"] if r["a"] == name else r["a"]
        verdict = r.get("verdict") or verdict_of(r)
        p = f"Holm p = {_p(r.get('p_holm'))}"
        if verdict == "no test":
            untested.append(other)
        elif verdict == "not distinguishable":
            same.append(f"{other} ({p})")
        elif verdict.startswith(f"{name} "):
            beats.append(f"{other} ({p})")
        else:
            loses.append(f"{other} ({p})")
    if not any((beats, loses, same, untested)):
        lines.append(
            # flag words: advice shown on both faces
            "No paired verdict involves it (one form, or --pairs/--against left it out)."
            if len(rank) > 1 or len(summary) > 1
            else "One form: nothing to compare it with."
        )
        return lines
    # a sentence of the verdicts it wins or loses, then one of those that cannot decide
    for clauses in (
        (("By the corrected paired verdict it predicts better than {}", beats),
         ("the corrected verdict favours {} over it", loses)),
        (("It cannot be told apart from {} with these cells", same),
         ("no test can decide against {}", untested)),
    ):  # fmt: skip
        said = [clause.format(_join(forms)) for clause, forms in clauses if forms]
        if said:
            lines.append(sentence(said))
    return lines


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _p(p: Any) -> str:
    if _missing(p):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _fmt_ratio(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3g}"


def verdict_sentence(row: dict, basis: str = "valid", unit: str = "%") -> str:
    """One paired row in words: the test first, then the descriptive counts (differences in
    ``unit``'s terms), and a warning when most splits were set aside for one of the forms."""
    text = _verdict(row, basis, unit)
    total = row.get("splits")
    if total and row["n"] < MOST * total:
        text += (
            f". Warning: {total - row['n']} of {total} splits were set aside for one form or "
            f"both; this verdict rests on the other {row['n']}"
        )
    return text


MOST = 0.5


def _verdict(row: dict, basis: str, unit: str) -> str:
    a, b, n = row["a"], row["b"], row["n"]
    both = "valid for both" if basis == "valid" else "(all, degenerate kept)"
    if n == 0:
        return f"{a} vs {b}: no split is {'valid for both' if basis == 'valid' else 'usable'}"
    ties = f", {row['ties']} tied" if row["ties"] else ""
    counts = (
        f"{a} lower in {row['a_better']} and {b} in {row['b_better']} of {n} splits "
        f"{both}{ties}; median difference "
        + " ".join(filter(None, (f"{row['median_diff']:+.3f}", difference_unit(unit))))
    )
    if "min_p" in row:  # structured protocol: held-out groups are the units
        if not row.get("can_reject"):
            return (
                f"{a} vs {b}: {counts}. With {n} held-out group{'s' if n != 1 else ''} no "
                f"test can reject (smallest attainable p = {row['min_p']:.2g})"
            )
        return (
            f"{a} vs {b}: {counts}; {row['test']}: p = {fmt_p(row['p'])} "
            f"(Holm {fmt_p(row.get('p_holm'))})"
        )
    if row.get("p") is None:
        why = row.get("test") or "too few splits for a test"
        return f"{a} vs {b}: {counts}; {why.removeprefix('none: ')}"
    lo, hi = row["ratio_ci"]
    p_adj = row.get("p_holm")
    unadjusted = "unadjusted " if row.get("p_holm") is not None else ""
    if p_adj is not None and p_adj < 0.05:
        better = a if row["ratio"] < 1 else b
        verdict = f"{better} predicts better"
    else:
        verdict = "not distinguishable from these cells"
    on = f" over {row['verdict_n']} verdict splits" if row.get("verdict_n") is not None else ""
    return (
        f"{a} vs {b}: {verdict}: error ratio {_fmt_ratio(row['ratio'])} "
        f"({unadjusted}interval {_fmt_ratio(lo)} to {_fmt_ratio(hi)}){on}, "
        + (
            "sign-flip over held-out cells"
            if "sign-flip" in (row.get("test") or "")
            else "corrected t"
        )
        + f" p = {fmt_p(row['p'])}, Holm {fmt_p(p_adj)}. Descriptive: {counts}"
    )


def summary_columns(basis: str = "valid", unit: str = "%") -> list[tuple[str, str, str]]:
    """The summary table's columns (key, header, format), headed in the errors' ``unit``."""
    return [
        (key, headed(label, unit) if fmt.endswith(("f", "g")) else label, fmt)
        for key, label, fmt in _columns_without_unit(basis)
    ]


def _columns_without_unit(basis: str) -> list[tuple[str, str, str]]:
    return [
        ("form", "form", ""),
        ("constants", "constants", "d"),
        ("splits_used", basis, "d"),
        ("degenerate_splits", "degenerate", "d"),
        ("wild_splits", "wild", "d"),
        ("common_median", "common median", ".3f"),
        ("median", "median", ".3f"),
        ("trimmed_mean", "trimmed mean", ".3f"),
        ("p90", "p90", ".3f"),
        ("worst_split", "worst split", ".4g"),
        ("worst_cell", "worst cell", ".4g"),
        ("noise_floor", "noise floor", ".3f"),
    ]


def tame_columns(unit: str = "%") -> list[tuple[str, str, str]]:
    """The with-and-without-wild-fits table's columns, headed in the errors' ``unit``."""
    return [("form", "form", ""), ("wild_splits", "wild", "d")] + [
        (f"{pre}{key}", headed(f"{words}{label}", unit), ".3f")
        for key, label in (("median", "median"), ("trimmed_mean", "trimmed"), ("p90", "p90"))
        for pre, words in (("", ""), ("tame_", "without: "))
    ]


def guard_line(settings: dict) -> str:
    g = settings.get("guard") or {}
    rng = g.get("metric_range")
    extra = f", or predicts outside [{rng[0]:g}, {rng[1]:g}]" if rng else ""
    return (
        f"guard: a fit is wild when its predictions over the grid's cells spread more than "
        f"{g.get('max_span', 20):g} times its training values, its predictions at the cells "
        f"not fitted lie on average more than {g.get('max_excursion', 10):g}% of the training "
        "level outside the training values and their straight-line trend, or a "
        "delta-method standard error exceeds "
        f"{g.get('max_rel_se', 1):g} times its prediction{extra} (training fit and design "
        "only; wild fits stay in the numbers)"
    )


def protocol_line(settings: dict, n_train_min: int, cells: int) -> str:
    proto = settings["protocol"]
    held = settings.get("held_out") or (settings.get("descriptive_protocol") or {}).get(
        "held_out", ""
    )
    # the default (cells) is not repeated on every output; another protocol always is
    tail = f"; held out by {held}" if held and not held.startswith("cells:") else ""
    if proto == "random":
        return (
            f"splits (descriptive protocol): {settings['n_splits']} random, {n_train_min} of "
            f"{cells} cells fitted (train fraction {settings['train_frac']:.3g}), seed "
            f"{settings['seed']}" + tail
        )
    return f"protocol: {proto}" + tail


def verdict_protocol_text(settings: dict, cells: int | str) -> str:
    """The verdict protocol in words (random splits only)."""
    v = settings.get("verdict_protocol") or settings
    if v.get("kind") == "leave-one-cell-out":
        return (
            f"leave-one-cell-out: each of the {v['n_splits']} cells held out once, "
            f"{v['n_train']} fitted (the random verdict splits would only repeat these)"
        )
    n_train = v.get("n_train")
    fitted = f"{n_train} of {cells} cells fitted" if n_train else "cells fitted"
    same = v.get("train_frac") == settings.get("train_frac")
    return (
        f"{v['n_splits']} random splits, {fitted} (train fraction {v['train_frac']:.3g}), "
        f"seed {v['seed']}" + (" (the descriptive splits themselves)" if same else "")
    )


def _family(settings: dict, n_pairs: int) -> str:
    k = settings.get("comparisons", n_pairs)
    which = "named pairs" if settings.get("family") == "named pairs" else "pairs"
    return f"Holm across {k} comparison{'s' if k != 1 else ''} ({which})"


def interval_note(settings: dict, n_pairs: int) -> str:
    """What the paired intervals are adjusted for (nothing) and what the verdict is."""
    k = settings.get("comparisons", n_pairs)
    level = settings.get("level", 0.95)
    if k <= 1:
        return f"each interval is a {level:.0%} interval"
    return (
        f"each interval is the {level:.0%} interval of its pair alone, not adjusted for the "
        f"{k} comparisons; the verdict is (Holm p < 0.05), so an interval that excludes 1 "
        'beside "not distinguishable" is no contradiction'
    )


def paired_heading(settings: dict, n_pairs: int, cells: int | None = None) -> str:
    basis = settings.get("splits_used", "valid")
    on = "splits valid for both forms" if basis == "valid" else "all splits (degenerate kept)"
    if settings["protocol"] == "random":
        n = cells if cells is not None else "the"
        return (
            f"Paired verdicts, on {on}: corrected resampled t test (Nadeau-Bengio) on log "
            f"error ratios over the verdict protocol, "
            f"{verdict_protocol_text(settings, n)}; {_family(settings, n_pairs)}; "
            f"{interval_note(settings, n_pairs)}. Counts of "
            "splits won come from the descriptive protocol and are descriptive, not evidence "
            "(random splits share cells):"
        )
    return (
        f"Paired, on {on}: the held-out groups are the units; exact sign-flip test where "
        f"enough groups exist; {_family(settings, n_pairs)}:"
    )


def render_comparison(cmp) -> str:
    s = cmp.settings
    basis = s.get("splits_used", "valid")
    unit = cmp.error_metric["unit"]
    n_train = int(cmp.results["n_train"].min()) if len(cmp.results) else 0
    # the answer first: the conclusion, then the forms ranked by median held-out error
    lines = [*cmp.conclusion, "", table(cmp.ranking, summary_columns(basis, unit))]
    lines += worst_notes(cmp.ranking.to_dict("records")[:1], cmp.results, unit)
    lines += [f"warning: {w}" for w in getattr(cmp, "warnings", [])]
    lines += [
        "",
        data_line(cmp.data),
        f"{protocol_line(s, n_train, cmp.data['cells'])}; objective {s['objective']}; "
        f"weights {s.get('weights', 'cells')}; "
        f"held-out error = {heldout_definition(s.get('heldout_weights'), metric=cmp.error_metric)}"
        "; noise floor = the error of a predictor that knew each cell's true mean (from the "
        "seed spread); " + common_note(cmp.summary.to_dict("records")),
        guard_line(s),
    ]
    if s["protocol"] != "random":
        for lab, g in cmp.results.groupby("split", sort=True):
            lines.append(f"  split {lab}: {g['split_label'].iloc[0]}")
    for f in cmp.forms:  # ranges read from the grid's values, named where they were used
        ranges = {c: r for c, r in getattr(f, "ranges", {}).items() if c not in f.bounds}
        if ranges:
            lines.append(
                # flag words: advice shown on both faces
                f"{f.name}: default ranges from the grid's values (--bound replaces them): "
                + ", ".join(f"{c} in {r.describe()} ({r.role})" for c, r in ranges.items())
            )
    seed_line = seed_effect_sentence(getattr(cmp, "seed_effect", None), cmp.data.get("unit") or "")
    if seed_line:
        lines += [seed_line]
    if cmp.summary["wild_splits"].sum():
        lines += ["", "With and without the wild fits:", table(cmp.ranking, tame_columns(unit))]
    if len(cmp.paired):
        lines += ["", paired_heading(s, len(cmp.paired), cmp.data["cells"])]
        lines += [f"  {verdict_sentence(r, basis, unit)}" for r in cmp.paired.to_dict("records")]
    wild = {k: v for k, v in (cmp.wild or {}).items() if v}
    if wild:
        lines += ["", "Wild extrapolation (named from the training fit alone):"]
        for form, items in wild.items():
            used = int(cmp.summary.set_index("form").loc[form, "splits_used"])
            lines.append(f"  {form}: {len(items)} of {used} splits")
            lines += [f"    {x}" for x in items[:5]]
            if len(items) > 5:
                lines.append(f"    ... and {len(items) - 5} more (results.json: wild_fits)")
    flagged = {k: v for k, v in cmp.reasons.items() if v}
    if flagged:
        lines += [
            "",
            "Flagged (split, form) pairs: constants not identified, or the fit failed"
            + (
                " (kept: --keep-degenerate)"  # flag words: advice shown on both faces
                if s["keep_degenerate"]
                # flag words: advice shown on both faces
                else "; set aside (--keep-degenerate keeps them)"
            )
            + ":",
        ]
        for form, counts in flagged.items():
            lines.append(f"  {form}: " + "; ".join(f"{c} x {r}" for r, c in counts.items()))
    return "\n".join(lines)
