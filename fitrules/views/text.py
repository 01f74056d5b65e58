"""Plain-text views for the terminal."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.util import spread_unit

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
    a_better = ratio < 1 if not _missing(ratio) else row.get("median_diff_pct", 0) < 0
    return f"{row['a'] if a_better else row['b']} predicts better"


def rank_value(row: dict) -> float:
    """What a summary row is ranked by: its median held-out error on the splits valid for
    every form (``ranked_on == "common"``), else on its own valid splits; inf for none."""
    key = "common_median_pct" if row.get("ranked_on") == "common" else "median_pct"
    v = row.get(key)
    return math.inf if _missing(v) else float(v)


RUNAWAY = 10  # a worst split this many times the median is explained under the table


def worst_notes(rows: list[dict], results: pd.DataFrame) -> list[str]:
    """A line under the table for a ranked form whose worst split is many times its median
    (issue 44: "worst split 209.5%, worst cell 1512%" beside the winner, explained 40 lines
    later): which split it is, whether the guard names its fit wild, and that the ranking
    reads medians."""
    out = []
    for r in rows:
        med, worst = r.get("median_pct"), r.get("worst_split_pct")
        if _missing(med) or _missing(worst) or not med > 0 or worst < RUNAWAY * med:
            continue
        mine = results[(results["form"] == r["form"]) & results["used"].astype(bool)]
        if not len(mine):
            continue
        top = mine.loc[mine["heldout_error_pct"].astype(float).idxmax()]
        why = (
            "a fit the guard names wild (listed below, with the summaries without such fits)"
            if bool(top.get("wild"))
            else "a fit the guard did not name: it extrapolates badly to the cells it holds out"
        )
        out.append(
            f"note: {r['form']}'s worst split ({worst:.4g}%, {top['split_label']}) is {why}; "
            f"its worst cell is {r.get('worst_cell_pct', float('nan')):.4g}%; the ranking "
            "reads medians, which a runaway split does not move"
        )
    return out


def heldout_definition(kind: str | None, where: str = "held-out cells") -> str:
    """What a split's held-out error is, under the settings' ``heldout_weights``."""
    if kind == "box":
        return (
            f"mean |relative error| over {where}, each weighted by its share of the grid's box "
            "(half on an edge of a variable, a quarter at a corner), in %"
        )
    return f"mean |relative error| over {where}, in %"


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


def conclusion(summary: list[dict], paired: list[dict]) -> list[str]:
    """The answer in at most three lines: which form predicts best, which rivals it beats
    with the corrected paired verdict, which it cannot be told from.

    Parameters
    ----------
    summary, paired : the records of :attr:`Comparison.summary` and :attr:`Comparison.paired`
        (``to_dict()["summary"]``, ``["paired"]``).
    """
    rank = [r for r in summary if math.isfinite(rank_value(r))]
    rank.sort(key=rank_value)
    if not rank:
        return ["No form has a valid split: nothing to rank (see the flagged pairs below)."]
    best = rank[0]
    name = best["form"]
    if len(rank) == 1 or best.get("ranked_on", "own") == "own":
        first = (
            f"{name} predicts the held-out cells best: median error {best['median_pct']:.3f}% "
            f"over {best['splits_used']} splits"
        )
        if len(rank) > 1:
            first += (
                f" (next {rank[1]['form']}, {rank[1]['median_pct']:.3f}% over "
                f"{rank[1]['splits_used']}; ranked on each form's own valid splits, since only "
                f"{best.get('common_splits', 0)} are valid for every form)"
            )
    else:
        first = (
            f"{name} predicts the held-out cells best: median error "
            f"{best['common_median_pct']:.3f}% over the {best['common_splits']} splits valid "
            f"for every form (next {rank[1]['form']}, {rank[1]['common_median_pct']:.3f}%)"
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
            "No paired verdict involves it (one form, or --pairs/--against left it out)."
            if len(rank) > 1 or len(summary) > 1
            else "One form: nothing to compare it with."
        )
        return lines
    second = []
    if beats:
        second.append(f"By the corrected paired verdict it predicts better than {_join(beats)}")
    if loses:
        second.append(f"the corrected verdict favours {_join(loses)} over it")
    if second:
        lines.append("; ".join(second)[0].upper() + "; ".join(second)[1:] + ".")
    third = []
    if same:
        third.append(f"It cannot be told apart from {_join(same)} with these cells")
    if untested:
        third.append(f"no test can decide against {_join(untested)}")
    if third:
        lines.append("; ".join(third)[0].upper() + "; ".join(third)[1:] + ".")
    return lines


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _p(p: Any) -> str:
    if _missing(p):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def seed_effect_sentence(e: dict | None, unit: str = "") -> str | None:
    """One line on a shared per-seed effect, or None when the data show none."""
    if not e or not e["shown"]:
        return None
    u = f" {unit}" if unit else ""
    return (
        f"per-seed effect shared across cells: seed {e['extreme_seed']} sits "
        f"{e['extreme_offset']:+.4g}{u} from its cells' means on average; F({e['df'][0]}, "
        f"{e['df'][1]}) = {e['F']:.3g}, p = {e['p']:.2g}; shared sd {e['sd_shared']:.3g}{u}, "
        f"per-run sd {e['sd_run']:.3g}{u}. Runs that share a seed id are correlated across "
        "cells: new runs at fresh seed ids average it out"
    )


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def fmt_pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _fmt_ratio(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3g}"


def verdict_sentence(row: dict, basis: str = "valid") -> str:
    """One paired row in words: the test first, then the descriptive counts, and a warning
    when most splits were set aside for one of the forms."""
    text = _verdict(row, basis)
    total = row.get("splits")
    if total and row["n"] < MOST * total:
        text += (
            f". Warning: {total - row['n']} of {total} splits were set aside for one form or "
            f"both; this verdict rests on the other {row['n']}"
        )
    return text


MOST = 0.5


def _verdict(row: dict, basis: str) -> str:
    a, b, n = row["a"], row["b"], row["n"]
    both = "valid for both" if basis == "valid" else "(all, degenerate kept)"
    if n == 0:
        return f"{a} vs {b}: no split is {'valid for both' if basis == 'valid' else 'usable'}"
    ties = f", {row['ties']} tied" if row["ties"] else ""
    counts = (
        f"{a} lower in {row['a_better']} and {b} in {row['b_better']} of {n} splits "
        f"{both}{ties}; median difference {row['median_diff_pct']:+.3f} points"
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


def table(df: pd.DataFrame, columns: list[tuple[str, str, str]]) -> str:
    """Fixed-width table: columns are (key, header, format) with format '' for str()."""
    cells = [[h for _, h, _ in columns]]
    for _, row in df.iterrows():
        cells.append(
            [
                (
                    format(row[k], f)
                    if f and not pd.isna(row[k])
                    else ("n/a" if pd.isna(row[k]) else str(row[k]))
                )
                for k, _, f in columns
            ]
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for j, r in enumerate(cells):
        parts = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
        lines.append("  ".join(parts).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_columns(basis: str = "valid") -> list[tuple[str, str, str]]:
    return [
        ("form", "form", ""),
        ("constants", "constants", "d"),
        ("splits_used", basis, "d"),
        ("degenerate_splits", "degenerate", "d"),
        ("wild_splits", "wild", "d"),
        ("common_median_pct", "common median %", ".3f"),
        ("median_pct", "median %", ".3f"),
        ("trimmed_mean_pct", "trimmed mean %", ".3f"),
        ("p90_pct", "p90 %", ".3f"),
        ("worst_split_pct", "worst split %", ".4g"),
        ("worst_cell_pct", "worst cell %", ".4g"),
        ("noise_floor_pct", "noise floor %", ".3f"),
    ]


TAME_COLUMNS = [
    ("form", "form", ""),
    ("wild_splits", "wild", "d"),
    ("median_pct", "median %", ".3f"),
    ("tame_median_pct", "without: median %", ".3f"),
    ("trimmed_mean_pct", "trimmed %", ".3f"),
    ("tame_trimmed_mean_pct", "without: trimmed %", ".3f"),
    ("p90_pct", "p90 %", ".3f"),
    ("tame_p90_pct", "without: p90 %", ".3f"),
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


def table_notes(data: dict) -> list[str]:
    """Lines on how a table was taken: rows filtered out, columns ignored or pooled."""
    from fitrules.model.grids import pooled_note

    out = []
    if data.get("numbers_from_text"):
        cols = ", ".join(data["numbers_from_text"])
        out.append(f"read as numbers: {cols} (numbers stored as text in the table)")
    if data.get("duplicates_dropped"):
        n = data["duplicates_dropped"]
        out.append(
            f"dropped {n} exact cop{'ies' if n != 1 else 'y'} of other rows (--drop-duplicates)"
        )
    if data.get("where"):
        n = data.get("filtered_out", 0)
        out.append(f"filtered out by where: {n} row{'s' if n != 1 else ''}")
    if data.get("ignored_columns"):
        out.append(
            "ignored per-run columns (no form reads them; they label runs, not cells): "
            + ", ".join(data["ignored_columns"])
        )
    for col, levels in (data.get("pooled") or {}).items():
        out.append(pooled_note(col, levels))
    return out


def data_line(data: dict) -> str:
    where = f" where {' and '.join(data['where'])}" if data.get("where") else ""
    excl = data.get("excluded") or {}
    excluded = ", ".join(f"{v} {k}" for k, v in excl.items()) or "none"
    sha = (data.get("sha256") or "")[:12]
    out = (
        f"data: {data['path']} (sha256 {sha}){where}: {data['runs']} runs in "
        f"{data['cells']} cells; excluded: {excluded}"
    )
    if data.get("test"):
        t = data["test"]
        out += (
            f"; scored on {t['path']} (sha256 {(t['sha256'] or '')[:12]}): {t['runs']} runs "
            f"in {t['cells']} cells"
        )
    notes = table_notes(data)
    return out + ("\n" + "\n".join(notes) if notes else "")


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
    n_train = int(cmp.results["n_train"].min()) if len(cmp.results) else 0
    # the answer first: the conclusion, then the forms ranked by median held-out error
    lines = [*cmp.conclusion, "", table(cmp.ranking, summary_columns(basis))]
    lines += worst_notes(cmp.ranking.to_dict("records")[:1], cmp.results)
    lines += [f"warning: {w}" for w in getattr(cmp, "warnings", [])]
    lines += [
        "",
        data_line(cmp.data),
        f"{protocol_line(s, n_train, cmp.data['cells'])}; objective {s['objective']}; "
        f"weights {s.get('weights', 'cells')}; "
        f"held-out error = {heldout_definition(s.get('heldout_weights'))}; noise floor = the "
        "error of a predictor that knew each cell's true mean (from the seed spread); "
        + common_note(cmp.summary.to_dict("records")),
        guard_line(s),
    ]
    if s["protocol"] != "random":
        for lab, g in cmp.results.groupby("split", sort=True):
            lines.append(f"  split {lab}: {g['split_label'].iloc[0]}")
    for f in cmp.forms:  # ranges read from the grid's values, named where they were used
        ranges = {c: r for c, r in getattr(f, "ranges", {}).items() if c not in f.bounds}
        if ranges:
            lines.append(
                f"{f.name}: default ranges from the grid's values (--bound replaces them): "
                + ", ".join(f"{c} in {r.describe()} ({r.role})" for c, r in ranges.items())
            )
    seed_line = seed_effect_sentence(getattr(cmp, "seed_effect", None), cmp.data.get("unit") or "")
    if seed_line:
        lines += [seed_line]
    if cmp.summary["wild_splits"].sum():
        lines += ["", "With and without the wild fits:", table(cmp.ranking, TAME_COLUMNS)]
    if len(cmp.paired):
        lines += ["", paired_heading(s, len(cmp.paired), cmp.data["cells"])]
        lines += [f"  {verdict_sentence(r, basis)}" for r in cmp.paired.to_dict("records")]
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
                " (kept: --keep-degenerate)"
                if s["keep_degenerate"]
                else "; set aside (--keep-degenerate keeps them)"
            )
            + ":",
        ]
        for form, counts in flagged.items():
            lines.append(f"  {form}: " + "; ".join(f"{c} x {r}" for r, c in counts.items()))
    return "\n".join(lines)


def uncertainty_lines(f) -> list[str]:
    """How the uncertainty of a fitted form was estimated, in sentences."""
    u = f.uncertainty
    kind = f.objective.kind
    if kind == "rel_ls":
        sd = f"{100 * u.residual_sd:.3g}% (relative)"
    elif kind == "log_huber":
        sd = f"{u.residual_sd:.3g} (log residuals)"
    else:
        sd = f"{u.residual_sd:.4g}{' ' + f.unit if f.unit else ''}"
    lines = []
    if u.ok:
        lines.append(
            "standard errors: from the Jacobian at the fit, scaled by the residual variance "
            f"(residual sd {sd}, {u.dof} degrees of freedom)"
        )
        if u.note:
            lines.append(f"note: {u.note}")
        top = u.strongest(3, above=0.5)
        if top:
            lines.append(
                "strongest correlations: " + ", ".join(f"C({a}, {b}) = {c:+.4f}" for a, b, c in top)
            )
    else:
        lines.append(f"standard errors: not available ({u.note})")
    m = f.interval_method
    if m is not None:
        pct = round(100 * m.level)
        lines.append(f"intervals: {pct}% {m.interval_kind}, {m.describe()}")
        lines.append(f"the intervals cover {f.intervals_covers}" + _offset_note(f))
        notes = getattr(m, "notes", None) or {}
        lines += [f"{c}: {n}" for c, n in notes.items() if n]
    if f.constraints:
        theta = [f.constants[c] for c in f.constraints.constants]
        active = f.constraints.active(theta)
        lines.append(
            "constraints: "
            + "; ".join(c.text for c in f.constraints.items)
            + (f" (active at the fit: {'; '.join(active)})" if active else " (none active)")
        )
    return lines


def _offset_note(f) -> str:
    """How the constants' intervals carry the grid's seed offset, if they do."""
    off = f.seed_offset
    if off is None:
        return ""
    moved = [c for c, v in f.seed_offset_sd.items() if v > 0 and math.isfinite(v)]
    unit, scale = spread_unit(off.relative)
    whose = "profile intervals" if f.profile is not None else "bootstrap's"
    return (
        f": the {whose}, widened in quadrature by the grid's seed offset (one seed id's "
        f"shared effect {scale * math.sqrt(off.shared_var):.3g}{unit} over {len(off.seeds)} "
        f"ids, t quantile on {off.df} degrees of freedom), which moves "
        + (", ".join(moved) if moved else "no constant")
    )


def information_line(f) -> str:
    """AIC, AICc, BIC and R^2 of a fitted form, with what they are not."""
    ic = f.information
    if not all(math.isfinite(ic[k]) for k in ("aic", "bic", "r2")):
        return (
            "information criteria: not available (an exact or non-finite fit has no Gaussian "
            "likelihood)"
        )
    aicc = f"{ic['aicc']:.4g}" if math.isfinite(ic["aicc"]) else "undefined (n - k - 1 <= 0)"
    return (
        f"information criteria ({ic['k']} constants, {ic['n']} cells): AIC {ic['aic']:.4g}, "
        f"AICc {aicc}, BIC {ic['bic']:.4g}, R^2 {ic['r2']:.4f} (in-sample, on cell "
        "means; held-out error, not these, is what compare ranks)"
    )


def _span(pair) -> str:
    """``lo to hi``, or why there is none: an interval whose bound is not finite (a part
    the grid cannot bound, such as the seed offset's effect on constants it does not
    identify) is said to be unbounded, never printed as inf."""
    lo, hi = pair
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{lo:.5g} to {hi:.5g}"
    return "unbounded (a part of it the grid's cells do not bound)"


def prediction_line(p: dict) -> str:
    """One prediction in words: the value, its standard error and its intervals."""
    where = ", ".join(f"{k}={v:g}" for k, v in p["given"].items())
    se = p["stderr"]
    se_text = f"{se:.2g}" if se is not None and math.isfinite(se) else "n/a"
    line = f"prediction at {where}: {p['prediction']:.5g} (standard error {se_text}"
    pct = round(100 * p["level"]) if p.get("level") else None
    if p.get("interval") is not None:
        line += (
            f"; {pct}% interval for the configuration's mean over new seed ids "
            f"{_span(p['interval'])}"
        )
    elif "not covered" in (p.get("interval_kind") or ""):
        why = p["interval_kind"].split("not covered: ", 1)[1].split(";")[0]
        line += f"; no interval for the configuration's mean over new seed ids: {why}"
    lean, iv = p.get("misfit_lean"), p.get("interval")
    if lean and iv is not None and abs(lean) > 0.25 * (iv[1] - iv[0]) and p["prediction"]:
        # an interval visibly off-centre says why
        cells = (
            "the nearest cells' misfit, continued along its trend, runs"
            if p.get("extrapolation")
            else "the cells about it run"
        )
        line += (
            f", leaning {'up' if lean > 0 else 'down'}: {cells} "
            f"{100 * abs(lean / p['prediction']):.2g}% {'above' if lean > 0 else 'below'} the form"
        )
    if p.get("interval_grid_seeds") is not None and p["interval_grid_seeds"] != p.get("interval"):
        line += f"; {pct}% interval at the grid's seed ids {_span(p['interval_grid_seeds'])}"
    if p.get("interval_runs") is not None:
        line += (
            f"; for the mean of {p['runs']} new runs at fresh seed ids {_span(p['interval_runs'])}"
        )
    few = p.get("few_seed_ids")
    if few and few["share_of_width"] >= 0.5:
        line += (
            f"; with {few['seed_ids']} seed ids the seed offset's term (t quantile "
            f"{few['quantile']:.3g}) is {100 * few['share_of_width']:.0f}% of this interval's "
            f"squared width: one more seed id would make that term about "
            f"{few['term_narrower']:.2g}x narrower and the interval about "
            f"{few['interval_narrower']:.2g}x"
        )
    if p.get("constants_interval") is not None:
        line += f"; constants' uncertainty only {_span(p['constants_interval'])}"
    if p.get("extrapolation"):
        line += "; outside the fitted cells: " + ", ".join(
            f"{k} {v:.3g}x beyond" for k, v in p["extrapolation"].items()
        )
    return line + ")"


def render_fitted(f) -> str:
    """A fitted form: data, constants with standard errors (and intervals), correlations,
    training error, diagnostics and predictions."""
    has_iv = f.interval_method is not None
    pct = f"{100 * f.interval_method.level:g}" if has_iv else "95"
    lines = [
        data_line(f.data),
        f"form {f.form.name} = {f.form.expression}"
        + (f" ({f.form.constant_notes})" if f.form.constant_notes else ""),
        f"fitted on all {len(f.cells)} cells; objective {f.objective.describe()} "
        f"{f.result.objective:.6g}; weights {f.weights}; "
        + (
            f"condition number {f.result.cond:.3g}"
            if math.isfinite(f.result.cond)
            else "condition number infinite (singular Jacobian)"
        ),
        "",
        (
            f"constants (value, standard error se, {pct}% interval, which is not value ± se):"
            if has_iv
            else "constants (value and standard error se):"
        ),
    ]
    w = max(len(c) for c in f.constants)
    iv = f.intervals or {}
    for c, v in f.constants.items():
        se = f.stderr[c]
        # issue 42: "L0 = 2.148 ± 0.006 [2.116, 2.179]" read the standard error as the
        # interval's half width; each number is named instead
        line = f"  {c.ljust(w)} = {v:.6g}"
        line += f"  se {se:.3g}" if math.isfinite(se) else "  se n/a"
        if c in iv:
            lo, hi = iv[c]
            # a constant the grid does not identify (an intercept per group beside a term
            # that is constant within each group) has no finite interval: said, not printed
            line += (
                f"  {pct}% interval [{lo:.6g}, {hi:.6g}]"
                if math.isfinite(lo) and math.isfinite(hi)
                else "  interval unbounded (not identified by these cells)"
            )
        lines.append(line)
    lines += [f"  {x}" for x in uncertainty_lines(f)]
    te = f.train_error
    if math.isfinite(te["heldout_error_pct"]) and math.isfinite(te["worst_cell_pct"]):
        relative = f"mean {te['heldout_error_pct']:.3f}%, worst cell {te['worst_cell_pct']:.3f}%, "
    else:  # a cell whose value is 0 has no relative error (abs_ls fits such grids)
        relative = "relative error not defined (a cell's value is 0), "
    lines += [
        "",
        f"training error: {relative}rmse {te['rmse']:.4g}",
        information_line(f),
        "diagnostics: " + ("none (well posed)" if not f.reasons else "; ".join(f.reasons)),
    ]
    lines += [prediction_line(p) for p in f.predictions]
    if f.heldout is not None and f.predictions:
        lines.append(
            f"prediction intervals: {f.heldout.describe()}; they do not cover a change of "
            "regime outside the fitted cells (the further out, the less the held-out cells "
            "say)"
        )
    return "\n".join(lines)


def _nodes(tree):
    stack = [tree]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.args)


def render_form(f, resolved_by: str | None = None) -> str:
    """A bound form: its variables, which constants are linear, bounds and starting ranges."""
    s = f.structure
    how = f"resolved against {resolved_by}" if resolved_by else "declared"
    lines = [f"{f.name} = {f.expression}"]
    if f.description:
        lines.append(f"  {f.description}")
    per_level = sorted({(n.value, n.args[0].value) for n in _nodes(f.tree) if n.op == "at"})
    lines += [
        f"  source: {f.source}",
        f"  variables ({how}): {', '.join(f.bound_variables)}",
        *[f"  {c}[{col}]: one constant {c} per level of {col}" for c, col in per_level],
        f"  constants entering linearly (solved exactly): {', '.join(s.linear) or 'none'}",
        f"  nonlinear constants (grid search, then polish): {', '.join(s.nonlinear) or 'none'}",
    ]
    for c, lo, hi in zip(s.constants, s.lower, s.upper, strict=True):
        if c in s.nonlinear:
            i = s.nonlinear.index(c)
            lines.append(
                f"    {c}: bounds [{lo:g}, {hi:g}], starting grid over "
                f"[{s.start_lo[i]:g}, {s.start_hi[i]:g}]"
            )
    return "\n".join(lines)


MAX_LEVELS = 12  # a factor with more levels is shown by its count and range


def _levels_line(name: str, values: list) -> str:
    def show(x) -> str:
        if isinstance(x, float) and not math.isfinite(x):
            # an empty cell of the table is a level of its own: named, never printed as nan
            return "missing" if math.isnan(x) else ("+" if x > 0 else "-") + "infinite"
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
        + "filtered out by --where: "
        f"{summary['filtered_out']}; runs kept: {summary['runs']}",
        "excluded: " + (", ".join(f"{v} {k}" for k, v in summary["excluded"].items()) or "none"),
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


def render_ci(results, payload: dict) -> str:
    d = payload["data"]
    lines = [
        f"data: {d['path']} (sha256 {(d['sha256'] or '')[:12]}); metric {d['metric']}; "
        f"baseline {results[0].baseline}",
        "",
    ]
    pct = round(100 * results[0].level)
    rows = []
    for r in results:
        blo, bhi = r.bootstrap_interval
        rows.append(
            {
                "treatment": r.treatment,
                "n": r.n,
                "mean": r.mean_diff,
                "pct": r.pct_of_baseline,
                "sd": r.sd_diff,
                "t_lo": r.t_interval[0],
                "t_hi": r.t_interval[1],
                "b_lo": blo,
                "b_hi": bhi,
                "t_p": fmt_p(r.t_p),
                "w_p": fmt_p(r.wilcoxon_p),
                "sf_p": fmt_p(r.signflip_p),
                "holm": fmt_p(r.holm_t_p) if r.holm_t_p is not None else "-",
            }
        )
    cols = [
        ("treatment", "treatment", ""),
        ("n", "pairs", "d"),
        ("mean", "mean diff", "+.4f"),
        ("pct", "% of base", "+.2f"),
        ("sd", "sd", ".4f"),
        ("t_lo", f"t {pct}% lo", "+.4f"),
        ("t_hi", "t hi", "+.4f"),
        ("b_lo", f"BCa {pct}% lo", "+.4f"),
        ("b_hi", "BCa hi", "+.4f"),
        ("t_p", "t p", ""),
        ("w_p", "Wilcoxon p", ""),
        ("sf_p", "sign-flip p", ""),
        ("holm", "Holm t p", ""),
    ]
    lines.append(table(pd.DataFrame(rows), cols))
    lines.append("")
    for r in results:
        lines.append(r.sentence())
        dropped = [f"{k.replace('_', ' ')}: {v}" for k, v in r.dropped_seeds.items() if v]
        if dropped:
            lines.append(f"  seeds dropped: {'; '.join(dropped)}")
        lines += [f"  warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def render_scores(scores, data: dict | None = None) -> str:
    rows = []
    for r in scores.to_dict("records"):
        where = ", ".join(f"{k}={v:g}" for k, v in r["point"].items())
        rows.append(
            {
                "id": r["id"],
                "form": r["form"],
                "cell": where,
                "predicted": r["prediction"],
                "observed": r["observed"],
                "error": r["error_pct"],
                "runs": r["runs"],
                "interval": "-"
                if r["inside_interval"] is None
                else ("inside" if r["inside_interval"] else "outside"),
                "tolerance": "-"
                if r["within_tolerance"] is None
                else ("within" if r["within_tolerance"] else "missed"),
                "status": r["status"]
                + (
                    f" ({r['fitted_runs_left_out']} fitted run(s) left out)"
                    if r.get("fitted_runs_left_out")
                    else ""
                ),
            }
        )
    cols = [
        ("id", "id", "d"),
        ("form", "form", ""),
        ("cell", "cell", ""),
        ("predicted", "predicted", ".4f"),
        ("observed", "observed", ".4f"),
        ("error", "error %", "+.3f"),
        ("runs", "runs", "d"),
        ("interval", "interval", ""),
        ("tolerance", "tolerance", ""),
        ("status", "status", ""),
    ]
    out = table(pd.DataFrame(rows), cols)
    notes = table_notes(data) if data else []
    return "\n".join(notes + [out]) if notes else out


def render_coverage(coverage) -> str:
    """'recorded intervals that covered the new cell's observed mean: ...', per kind."""
    lines = []
    for kind, part in coverage.groupby("interval_kind", sort=False):
        total = part[part["form"] == "all"].iloc[0]
        forms = "; ".join(
            f"{r['form']} {r['covered']} of {r['scored']}"
            for r in part[part["form"] != "all"].to_dict("records")
        )
        lines.append(
            f"recorded intervals ({kind}) that covered the observed mean: "
            f"{total['covered']} of {total['scored']} ({forms})"
        )
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


def render_scored_pairs(pairs) -> str:
    """Paired tests of forms over the new runs at cells both predicted."""
    lines = [
        "Forms compared on the new runs (predictions fixed before the runs): mean over cells "
        "of the squared error of the first minus the second at the cell means; the units are "
        "the cells and the seed ids they share (a seed's effect moves every cell it ran at), "
        "Holm across pairs:"
    ]
    for r in pairs.to_dict("records"):
        if not r["runs"]:
            lines.append(f"  {r['a']} vs {r['b']}: no cell predicted by both has runs yet")
            continue
        lo, hi = r["ci"]
        if r["p"] is None:
            verdict = "too few runs for a test"
        elif r["p_holm"] is not None and r["p_holm"] < 0.05:
            verdict = f"{r['a'] if r['mean_sq_diff'] < 0 else r['b']} predicted the new runs better"
        else:
            verdict = "the new runs do not separate them"
        ci = "" if lo is None else f" (interval {lo:+.3g} to {hi:+.3g})"
        lines.append(
            f"  {r['a']} vs {r['b']} on {r['cells']} cells, {r['runs']} runs: {verdict}; mean "
            f"squared-error difference {r['mean_sq_diff']:+.3g}{ci}, p = {fmt_p(r['p'])}, Holm "
            f"{fmt_p(r['p_holm'])}; {r['a']} closer at {r['a_closer_cells']} of {r['cells']} "
            "cells" + (f"; units: {r['units']}" if r.get("units") else "")
        )
    return "\n".join(lines)


def render_forms(forms: dict) -> str:
    """One line a form: its name with its variables, its expression, where it comes from."""
    heads = {
        n: n + (f"({', '.join(f.variables)})" if f.variables else "") for n, f in forms.items()
    }
    w = max(len(h) for h in heads.values())
    return "\n".join(
        f"{heads[name].ljust(w)}  {f.expression}    [{f.source}]" for name, f in forms.items()
    )
