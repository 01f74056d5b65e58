"""A ledger's scores in plain text: each prediction against the new runs, the intervals' coverage
and the forms compared on the new runs."""

from __future__ import annotations

import pandas as pd

from fitrules.views.text_parts import fmt_p, table, table_notes


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
