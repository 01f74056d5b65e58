"""Paired-seed confidence intervals (treatment against baseline) in plain text."""

from __future__ import annotations

import pandas as pd

from fitrules.views.text_parts import fmt_p, table


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
