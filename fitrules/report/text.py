"""Plain-text views for the terminal."""

from __future__ import annotations

import math

import pandas as pd

from fitrules.fit import FitResult


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def fmt_pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def verdict_sentence(row: dict) -> str:
    """'composition beat additive in 288 of 300 splits ...' for one paired row."""
    a, b, n = row["a"], row["b"], row["n"]
    if n == 0:
        return f"{a} vs {b}: no split is valid for both"
    if row["b_better"] > row["a_better"]:
        win, lose, wins, losses = b, a, row["b_better"], row["a_better"]
        med = -row["median_diff_pct"]
    else:
        win, lose, wins, losses = a, b, row["a_better"], row["b_better"]
        med = row["median_diff_pct"]
    ties = f", {row['ties']} tied" if row["ties"] else ""
    return (
        f"{win} beat {lose} in {wins} of {n} valid splits ({losses} lost{ties}); "
        f"median paired difference {med:+.3f} points; Wilcoxon p = {fmt_p(row['wilcoxon_p'])}"
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


SUMMARY_COLUMNS = [
    ("form", "form", ""),
    ("constants", "constants", "d"),
    ("valid_splits", "valid", "d"),
    ("degenerate_splits", "degenerate", "d"),
    ("mean_pct", "mean %", ".3f"),
    ("median_pct", "median %", ".3f"),
    ("p90_pct", "p90 %", ".3f"),
    ("max_pct", "max %", ".3f"),
    ("noise_floor_pct", "noise floor %", ".3f"),
]


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
    return out


def protocol_line(settings: dict, n_train_min: int, cells: int) -> str:
    proto = settings["protocol"]
    if proto == "random":
        return (
            f"splits: {settings['n_splits']} random, {n_train_min} of {cells} cells fitted "
            f"(train fraction {settings['train_frac']:.3g}), seed {settings['seed']}"
        )
    return f"protocol: {proto}"


def render_comparison(cmp) -> str:
    s = cmp.settings
    n_train = int(cmp.results["n_train"].min()) if len(cmp.results) else 0
    lines = [
        data_line(cmp.data),
        f"{protocol_line(s, n_train, cmp.data['cells'])}; objective {s['objective']}; "
        "held-out error = mean |relative error| over held-out cells, in %; noise floor = the "
        "error of a predictor that knew each cell's true mean (from the seed spread)",
    ]
    if s["protocol"] != "random":
        for lab, g in cmp.results.groupby("split", sort=True):
            lines.append(f"  split {lab}: {g['split_label'].iloc[0]}")
    lines += [
        "",
        table(cmp.summary, SUMMARY_COLUMNS),
        "",
        "Paired, on splits valid for both forms:",
    ]
    lines += [f"  {verdict_sentence(r)}" for r in cmp.paired.to_dict("records")]
    flagged = {k: v for k, v in cmp.reasons.items() if v}
    if flagged:
        lines += [
            "",
            "Degenerate (split, form) pairs"
            + (
                " (kept: --keep-degenerate)"
                if s["keep_degenerate"]
                else " set aside (--keep-degenerate keeps them)"
            )
            + ":",
        ]
        for form, counts in flagged.items():
            lines.append(f"  {form}: " + "; ".join(f"{c} x {r}" for r, c in counts.items()))
    return "\n".join(lines)


def render_fit(form, result: FitResult, cells, train_error: dict) -> str:
    lines = [
        f"form {form.name} = {form.expression}",
        f"fitted on all {len(cells)} cells; objective {result.objective:.6g}; "
        f"condition number {result.cond:.3g}",
        "",
        "constants:",
    ]
    w = max(len(c) for c in result.constants)
    lines += [f"  {c.ljust(w)} = {v:.6g}" for c, v in result.constants.items()]
    lines += [
        "",
        f"training error: mean {train_error['heldout_error_pct']:.3f}%, max "
        f"{train_error['max_pct']:.3f}%, rmse {train_error['rmse']:.4g}",
    ]
    lines += [
        "diagnostics: " + ("none (well posed)" if not result.reasons else "; ".join(result.reasons))
    ]
    return "\n".join(lines)


def render_summary(summary: dict) -> str:
    lines = [
        f"{summary['path']}: sha256 {summary['sha256']}",
        f"rows read: {summary['rows_read']}; filtered out by --where: "
        f"{summary['filtered_out']}; runs kept: {summary['runs']}",
        "excluded: " + (", ".join(f"{v} {k}" for k, v in summary["excluded"].items()) or "none"),
        f"metric: {summary['metric']} (range {summary['metric_range'][0]:.4g} to "
        f"{summary['metric_range'][1]:.4g}); seed column: {summary['seed_column']}",
        f"cells: {summary['cells']}; runs per cell: min {summary['seeds_per_cell']['min']}, "
        f"median {summary['seeds_per_cell']['median']:g}, max "
        f"{summary['seeds_per_cell']['max']}",
        "levels of the varying factors:",
    ]
    for k, v in summary["levels"].items():
        shown = ", ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
        lines.append(f"  {k} ({len(v)}): {shown}")
    if summary["fixed"]:
        lines.append("fixed: " + ", ".join(f"{k}={v}" for k, v in summary["fixed"].items()))
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


def render_intervals(boot, preds) -> str:
    pct = round(100 * boot.level)
    lines = [
        f"{pct}% bootstrap intervals ({boot.resamples} resamples of the runs within each "
        f"cell, seed {boot.seed}; {boot.failed} failed refits; "
        f"{boot.single_run_cells} cells with one run cannot vary):"
    ]
    for c, (lo, hi) in boot.constant_intervals().items():
        lines.append(f"  {c} = {boot.fit.constants[c]:.6g}  [{lo:.6g}, {hi:.6g}]")
    for p in preds:
        where = ", ".join(f"{k}={v:g}" for k, v in p["given"].items())
        lo, hi = p["interval"]
        lines.append(f"  prediction at {where}: {p['prediction']:.5g}  [{lo:.5g}, {hi:.5g}]")
    return "\n".join(lines)


def render_scores(scores) -> str:
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
                "status": r["status"],
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
    return table(pd.DataFrame(rows), cols)
