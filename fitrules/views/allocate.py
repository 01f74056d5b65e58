"""Text, HTML and the frontier figure of an allocation (``fr.allocate``); they compute
nothing."""

from __future__ import annotations

import html

import numpy as np


def _iv(lo, hi) -> str:
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return f"[{lo:.3g}, {hi:.3g}]"


def _exp_line(a) -> str:
    x, y = a.variables
    pct = round(100 * a.level)
    parts = []
    for v in (x, y):
        e = a.exponents[v]
        iv = _iv(e["low"], e["high"])
        value = f"{e['value']:.4f}" if np.isfinite(e["value"]) else "n/a (no optimum)"
        parts.append(f"{v}* ~ C^{value}" + (f" ({pct}% {iv})" if iv else ""))
    where = "" if a.method == "closed form" else f" (local, at C = {a.reference_budget:.3g})"
    return "exponents: " + ", ".join(parts) + where


def method_line(a) -> str:
    x, y = a.variables
    c = a.cost
    if a.method == "closed form":
        s = "alpha + beta" if c.p == c.q == 1 else f"{c.q:g}*alpha + {c.p:g}*beta"
        return (f"optimum in closed form: the fit is E + A*{x}**-alpha + B*{y}**-beta, so "
                f"{x}* ~ C^a with a = beta/({s})")  # fmt: skip
    return (f"optimum found numerically along the cost (log scale, bounded: up to 1e6 times "
            f"beyond the grid's range of {x} and {y})")  # fmt: skip


def render_allocation(a) -> str:
    """The allocation in words and a table, as the command line prints it."""
    f = a.fit
    x, y = a.variables
    pct = round(100 * a.level)
    lines = [
        f"allocate: {f.form.name} = {f.form.expression}",
        f"fitted on {f.data.get('cells')} cells of {f.data.get('path')} "
        f"({f.objective.describe()}); "
        + ", ".join(f"{k} = {v:.6g}" for k, v in f.constants.items()),
        f"cost: {a.cost.text} = budget C; " + method_line(a),
        _exp_line(a),
    ]
    if a.intervals != "none":
        extra = f", {a.draws} refits" if a.intervals == "bootstrap" else ""
        lines.append(f"intervals ({pct}%{extra}): {a.interval_kind}")
        if a.refits:
            lines.append(f"refits: {a.refits}")
    lines.append("")
    head = ["budget C", f"{x}*", f"{pct}% interval", f"{y}*", f"{pct}% interval",
            f"{y}/{x}", f"{pct}% interval", "loss", "extrapolation"]  # fmt: skip
    body = []
    for r in a.table.to_dict("records"):
        if r["reason"]:
            body.append([f"{r['budget']:.3g}", "-", "", "-", "", "-", "", "-", r["reason"]])
            continue
        body.append([
            f"{r['budget']:.3g}",
            f"{r[x]:.4g}", _iv(r[f"{x}_low"], r[f"{x}_high"]),
            f"{r[y]:.4g}", _iv(r[f"{y}_low"], r[f"{y}_high"]),
            f"{r['ratio']:.4g}", _iv(r["ratio_low"], r["ratio_high"]),
            f"{r['loss']:.4f}", r["extrapolation"] or "-",
        ])  # fmt: skip
    widths = [max(len(str(row[i])) for row in [head, *body]) for i in range(len(head))]
    for row in [head, *body]:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    (xl, xh), (yl, yh) = a.grid_range[x], a.grid_range[y]
    lines += [
        "",
        f"grid's range: {x} {xl:.3g} to {xh:.3g}, {y} {yl:.3g} to {yh:.3g}; an optimum outside "
        "it is an extrapolation of the form (its intervals do not carry the form's misfit)",
    ]
    lines += _family_lines(a)
    lines += a.notes
    return "\n".join(lines)


def _family_lines(a) -> list[str]:
    """Each candidate form's answer at each budget, and the interval over those kept."""
    if a.forms is None:
        return []
    x, _ = a.variables
    pct = round(100 * a.level)
    out = ["", f"candidate forms ({x}* at each budget; kept: the grid does not tell it apart "
           "from the best-fitting form):"]  # fmt: skip
    for name, t in a.forms.groupby("form", sort=False):
        answers = ", ".join(f"{r[x]:.4g} {_iv(r[f'{x}_low'], r[f'{x}_high'])}".rstrip()
                            for r in t.to_dict("records"))  # fmt: skip
        kept = "kept" if t["kept"].iloc[0] else "told apart"
        out.append(f"  {name} ({kept}, {t['constants'].iloc[0]} constants): {answers}; "
                   f"{x}* ~ C^{t['exponent'].iloc[0]:.4f}")  # fmt: skip
    over = ", ".join(f"C={r['budget']:.3g}: {_iv(r[f'{x}_forms_low'], r[f'{x}_forms_high'])}"
                     for r in a.table.to_dict("records"))  # fmt: skip
    e = a.family_exponents[x]
    out.append(f"{pct}% interval of {x}* over the kept forms (the union of their intervals): "
               f"{over}; exponent {_iv(e['low'], e['high'])}")  # fmt: skip
    return out


def allocation_html(a) -> str:
    from fitrules.base.htmlparts import html_p, html_table

    x, y = a.variables
    head = (f"<b>allocate</b> {html.escape(a.fit.form.name)} = "
            f"<code>{html.escape(a.fit.form.expression)}</code>, cost "
            f"<code>{html.escape(a.cost.text)}</code>")  # fmt: skip
    cols = ["budget", x, f"{x}_low", f"{x}_high", y, f"{y}_low", f"{y}_high", "ratio", "loss",
            "extrapolation", "reason"]  # fmt: skip
    parts = [
        f"<p>{head}</p>",
        html_p(method_line(a)),
        html_p(_exp_line(a)),
        html_p(f"intervals ({round(100 * a.level)}%): {a.interval_kind}"),
        html_table(a.table[cols], {c: "{:.4g}".format for c in cols[:-2]}),
        *[html_p(n.strip()) for n in _family_lines(a) if n],
        *[html_p(n) for n in a.notes],
    ]
    return "\n".join(parts)


def frontier(a, ax=None):
    """Each variable's optimum against the budget, log axes, its interval shaded; dashed
    where the optimum lies outside the grid's range."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 4.5), layout="constrained")
    t = a.table
    C = t["budget"].to_numpy(float)
    pct = round(100 * a.level)
    for v, colour in zip(a.variables, ("C0", "C1"), strict=True):
        val = t[v].to_numpy(float)
        lo, hi = a.grid_range[v]
        inside = (val >= lo * (1 - 1e-9)) & (val <= hi * (1 + 1e-9))
        low, high = t[f"{v}_low"].to_numpy(float), t[f"{v}_high"].to_numpy(float)
        ends = np.isfinite(low) & np.isfinite(high)
        if len(C) == 1:  # one budget: a line of one point draws nothing, so mark it
            err = np.array([[val[0] - low[0]], [high[0] - val[0]]]) if ends[0] else None
            ax.errorbar(C, val, yerr=err, fmt="o", color=colour, ms=7, capsize=4,
                        mfc=colour if inside[0] else "white",
                        label=f"{v}* = {val[0]:.3g}" + (f" ({pct}% interval)" if ends[0] else "")
                        + ("" if inside[0] else ", beyond the grid's range"))  # fmt: skip
        else:
            ax.plot(C, val, color=colour, ls="--", lw=1.2)
            shown = np.where(inside, val, np.nan)
            ax.plot(C, shown, color=colour, lw=2.2,
                    label=f"{v}* (solid: within the grid's range)")  # fmt: skip
            if ends.any():
                ax.fill_between(C, low, high, color=colour, alpha=0.2, lw=0,
                                label=f"{v}* {pct}% interval")  # fmt: skip
        cells = a.fit.cells.X
        ax.scatter(a.cost.of(cells[a.cost.x], cells[a.cost.y]), cells[v], s=8, color=colour,
                   alpha=0.35, label=f"fitted cells: {v} against their cost")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"budget C = {a.cost.text}")
    ax.set_ylabel("optimal value")
    ex = ", ".join(f"{v}* ~ C^{a.exponents[v]['value']:.3f}" for v in a.variables
                   if np.isfinite(a.exponents[v]["value"]))  # fmt: skip
    ax.set_title(f"loss-optimal frontier of {a.fit.form.name}: {ex}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return ax
