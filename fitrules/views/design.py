"""Views of a :class:`~fitrules.jobs.design.Design`: text, a figure of the candidate plane, and a
report directory holding the batch spec and the commands of the loop."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from fitrules import __version__
from fitrules.views import figures
from fitrules.views.directory import write_report_dir
from fitrules.views.text import data_line, table


def _cell(r: dict, variables) -> str:
    return ", ".join(f"{v}={r[v]:.4g}" for v in variables)


def render_design(d, max_rows: int = 12) -> str:
    s = d.settings
    names = [f.name for f in d.forms]
    lines = [
        data_line(d.data),
        f"seed noise of one run: {100 * s['seed_cv']:.3f}% of the value (robust, pooled over "
        f"the grid's cells); form uncertainty: the larger of {s['splits']} random-split "
        f"refits and {s['resamples']} seed-bootstrap refits, plus the form's misfit on "
        "held-out cells (leave-one-cell-out), in quadrature; a pair's separation counts "
        "both forms' constants and the misfit of the better-fitting one",
        "new runs: fresh seed ids at every cell of the spec (a seed's effect is shared by "
        "every cell it runs at; fresh ids make it noise that averages over the new cells, "
        "which gives score's test its power; a tuned spec keeps one set of ids, since tuning "
        "chooses on named seeds)",
    ]
    cand = d.candidates
    if s["mode"] == "discriminate":
        lines.append(
            f"candidates: {len(cand)} ({s['candidates']}); score: lack of fit of each form's "
            "rival, refitted to the grid plus the form's predictions at the new cells, in "
            "units of the combined uncertainty (T-optimal, summed over ordered pairs); seeds "
            f"needed: to detect the difference at power {s['power']:g}, two-sided "
            f"{s['alpha']:g}"
        )
        top = cand.sort_values("score", ascending=False, kind="stable").head(max_rows).copy()
        top["cell"] = [_cell(r, d.variables) for r in top.to_dict("records")]
        top["need"] = ["never" if not np.isfinite(x) else str(int(x)) for x in top["seeds_needed"]]
        cols = [("cell", "cell", "")]
        cols += [(f"pred_{n}", f"{n}", ".4f") for n in names]
        cols += [(f"sd_{n}", f"sd {n}", ".4f") for n in names]
        cols += [
            ("seed_sd", "seed sd", ".4f"),
            ("separation", f"separation at {s['seeds']} seeds", ".2f"),
            ("need", "seeds needed", ""),
            ("score", "score", ".3g"),
        ]
        lines += ["", f"Top {len(top)} candidate cells, each alone:", table(top, cols)]
    else:
        lines.append(
            f"target {s['target']}: delta-method sd of {names[0]}'s prediction there now "
            f"{cand['target_sd_now'].iloc[0]:.4g}; cells ranked by how much {s['seeds']} "
            "seeds would shrink it"
        )
    ch = d.chosen
    if len(ch):
        ch = ch.copy()
        ch["cell"] = [_cell(r, d.variables) for r in ch.to_dict("records")]
        cols = [("order", "#", "d"), ("cell", "cell", ""), ("seeds", "seeds", "d")]
        cols += [(f"pred_{n}", n, ".4f") for n in names]
        if s["mode"] == "discriminate":
            cols += [("batch_score", "batch score", ".3g"), ("gain", "gain", ".3g")]
        else:
            cols += [("target_sd_after", "target sd after", ".4g")]
        lines += [
            "",
            f"Batch under a budget of {s['budget']} runs ({int(ch['runs'].sum())} used), "
            "chosen greedily, each cell given the ones before it:",
            table(ch, cols),
        ]
    else:
        lines += ["", "No cell adds evidence within the budget."]
    lines += [f"note: {n}" for n in d.notes]
    if d.commands:
        lines += ["", "The loop: predictions to the ledger first, then the runs, then the score:"]
        lines += [f"  {c}" for c in d.commands]
    return "\n".join(lines)


def design_figure(d, ax=None):
    """The candidate plane coloured by score, the grid's cells and the chosen batch."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 5.0), layout="constrained")
    v = list(d.variables)
    cand = d.candidates
    score = np.maximum(cand["score"].to_numpy(float), 1e-12)
    x = cand[v[0]].to_numpy(float)
    y = cand[v[1]].to_numpy(float) if len(v) > 1 else score
    norm = LogNorm(vmin=score.min(), vmax=max(score.max(), score.min() * 10))
    sc = ax.scatter(x, y, c=score, cmap="viridis", norm=norm, s=60, label="candidate")
    if d.grid_cells is not None and len(v) > 1:
        ax.scatter(
            d.grid_cells[v[0]],
            d.grid_cells[v[1]],
            marker="x",
            color="grey",
            s=30,
            label="already in the grid",
        )
    plt.colorbar(
        sc,
        ax=ax,
        label="score (discrimination)"
        if d.settings["mode"] == "discriminate"
        else "variance reduction at the target",
    )
    ch = d.chosen
    if len(ch):
        cx = ch[v[0]].to_numpy(float)
        cy = ch[v[1]].to_numpy(float) if len(v) > 1 else ch["batch_score"].to_numpy(float)
        ax.scatter(cx, cy, s=220, facecolors="none", edgecolors="red", linewidths=2, label="chosen")
        labels = [
            ax.annotate(
                f"{r['order']} ({r['seeds']})",
                (xx, yy),
                xytext=(6, 6),
                textcoords="offset points",
                color="red",
                fontsize=8,
            )
            for r, xx, yy in zip(ch.to_dict("records"), cx, cy, strict=True)
        ]
    for axis, name, vals in (("x", v[0], x), ("y", v[1] if len(v) > 1 else None, y)):
        if name is None:
            continue
        setter = ax.set_xscale if axis == "x" else ax.set_yscale
        if vals.min() > 0 and vals.max() / vals.min() > 10:
            setter("log")
            figures.level_ticks(ax, vals, axis)  # at the levels, not at powers of ten
        elif vals.min() >= 0 and vals.max() > 10:
            setter("symlog", linthresh=1)
    units = d.data.get("units") or {}
    ax.set_xlabel(figures.unit_label(v[0], units.get(v[0])))
    ax.set_ylabel(figures.unit_label(v[1], units.get(v[1])) if len(v) > 1 else "score")
    figures._title(
        ax,
        f"fitrules design: {' vs '.join(f.name for f in d.forms)}\n"
        "candidate cells coloured by score; red: chosen batch (seeds)",
    )
    figures._legend(ax, fontsize=8)
    if len(ch):
        _keep_inside(ax, labels)
    return ax


def _keep_inside(ax, labels) -> None:
    """Turn a chosen cell's label to the other side of its point where it would leave the
    axes (a cell at the top or right edge of the candidate plane)."""
    ax.figure.draw_without_rendering()
    box = ax.get_window_extent()
    for label in labels:
        ext = label.get_window_extent()
        dx, dy = 6, 6
        if ext.x1 > box.x1:
            dx = -6
            label.set_horizontalalignment("right")
        if ext.y1 > box.y1:
            dy = -6
            label.set_verticalalignment("top")
        label.xyann = (dx, dy)


def design_report(d, target: Path, command: str, spec_text: str | None, force=False) -> Path:
    """report.md, design.png, design.json, runs.toml (the batch spec) and commands.sh."""

    def build(p: Path) -> None:
        figures.save(design_figure(d), p / "design.png")
        if spec_text is not None:
            (p / "runs.toml").write_text(spec_text)
        (p / "commands.sh").write_text("\n".join(d.commands) + "\n")
        (p / "design.json").write_text(json.dumps(d.to_dict(), indent=1, allow_nan=False) + "\n")
        lines = [
            f"# fitrules design: {', '.join(f.name for f in d.forms)}",
            "",
            f"Command: `{command}`; fitrules {__version__}; "
            f"{datetime.now(UTC).strftime('%Y-%m-%d')}.",
            "",
            "```",
            render_design(d, max_rows=20),
            "```",
            "",
            "![candidate cells and the chosen batch](design.png)",
            "",
            "Files: `design.json` (every candidate and the batch), `runs.toml` (the batch as a "
            "`fitrules simulate` spec, fresh seeds), `commands.sh` (the loop).",
            "",
        ]
        (p / "report.md").write_text("\n".join(lines))

    return write_report_dir(target, build, force)
