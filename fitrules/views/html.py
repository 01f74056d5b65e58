"""HTML views for notebooks (``_repr_html_``): the same tables and sentences as the text view."""

from __future__ import annotations

import html

import pandas as pd

from fitrules.base.htmlparts import html_list as _list
from fitrules.base.htmlparts import html_p as _p
from fitrules.base.htmlparts import html_table as _table


def _titled_list(title: str, items) -> str:
    """A bold title and the list of ``items`` under it."""
    return f"<b>{title}</b>" + _list(items)


def _closed(parts: list[str], tables: str) -> str:
    """The view's parts, closed by a line naming its tables and figures."""
    return "\n".join([*parts, _p(tables)])


def comparison_html(cmp) -> str:
    from fitrules.views.text import data_line, heldout_definition, paired_heading, verdict_sentence

    basis = cmp.settings.get("splits_used", "valid")
    metric = cmp.error_metric
    unit = metric["unit"]
    errors = ["common_median", "median", "trimmed_mean", "p90", "worst_split", "worst_cell",
              "noise_floor"]  # fmt: skip
    cols = ["form", "constants", "splits_used", "degenerate_splits", "wild_splits", *errors]
    parts = [
        f"<b>fitrules comparison</b> ({html.escape(cmp.settings['protocol'])} splits)",
        "<p class='fitrules-conclusion'>" + "<br>".join(html.escape(x) for x in cmp.conclusion)
        + "</p>",
        _table(cmp.ranking[cols]),
        _p("errors: " + heldout_definition(cmp.settings.get("heldout_weights"), metric=metric)),
        _p(data_line(cmp.data)),
    ]  # fmt: skip
    if cmp.warnings:
        parts.append(_titled_list("Warnings", cmp.warnings))
    if len(cmp.paired):
        parts.append("<b>Paired verdicts</b>")
        parts.append(_p(paired_heading(cmp.settings, len(cmp.paired), cmp.data["cells"])))
        parts.append(_list(verdict_sentence(r, basis, unit) for r in cmp.paired.to_dict("records")))
    return _closed(parts, "Tables: .summary, .paired, .results, .cell_errors; figures: "
                   ".plot_heldout(), .plot_paired(a, b), .plot_fit(form), .plot_residuals(x), "
                   ".plot_curves(form, x)")  # fmt: skip


def fitted_html(f) -> str:
    from fitrules.views.text import data_line, information_line, uncertainty_lines

    head = f"<b>{html.escape(f.form.name)}</b> = <code>{html.escape(f.form.expression)}</code>"
    if f.form.constant_notes:
        head += f" ({html.escape(f.form.constant_notes)})"
    te = f.train_error
    parts = [
        head,
        _p(data_line(f.data)),
        _table(f.table, {"value": "{:.6g}".format}),
        _list(uncertainty_lines(f)),
        _p(
            f"training error: mean {te['heldout_error_pct']:.3f}%, worst cell "
            f"{te['worst_cell_pct']:.3f}%; diagnostics: {'; '.join(f.reasons) or 'well posed'}"
        ),
        _p(f"weights {f.weights}; " + information_line(f)),
    ]
    if f.predictions:
        parts.append(_table(pd.DataFrame(
            [{"point": ", ".join(f"{k}={v:g}" for k, v in p["given"].items()),
              "prediction": p["prediction"], "stderr": p["stderr"],
              "low": (p["interval"] or [None, None])[0],
              "high": (p["interval"] or [None, None])[1]} for p in f.predictions]
        )))  # fmt: skip
    return "\n".join(parts)


def intervals_html(res) -> str:
    rows = pd.DataFrame(
        [{"treatment": r.treatment, "pairs": r.n, "mean diff": r.mean_diff,
          "% of baseline": r.pct_of_baseline, "t low": r.t_interval[0],
          "t high": r.t_interval[1], "t p": r.t_p, "sign-flip p": r.signflip_p}
         for r in res.results]
    )  # fmt: skip
    return "\n".join(
        [
            f"<b>Paired-seed intervals</b> against <code>{html.escape(res.results[0].baseline)}"
            "</code>",
            _table(rows),
            _list(r.sentence() for r in res.results),
            _list(w for r in res.results for w in r.warnings),
        ]
    )


def design_html(d) -> str:
    from fitrules.views.text import data_line

    names = ", ".join(f.name for f in d.forms)
    what = (
        f"cells that tell {html.escape(names)} apart"
        if d.settings.get("mode") == "discriminate"
        else f"cells that pin down {html.escape(names)} at the target"
    )
    chosen = d.chosen.drop(columns=[c for c in d.chosen.columns if c.startswith("_")])
    parts = [
        f"<b>fitrules design</b>: {what}, budget {d.settings.get('budget')} runs",
        _p(data_line(d.data)),
        "<b>Chosen batch</b>",
        _table(chosen) if len(chosen) else _p("no cell chosen"),
    ]
    if d.notes:
        parts.append(_titled_list("Notes", d.notes))
    if d.commands:
        parts.append("<b>The loop</b><pre>" + html.escape("\n".join(d.commands)) + "</pre>")
    return _closed(parts, "Tables: .chosen, .candidates; figure: .plot(); JSON: .to_dict()")


def tuning_html(t) -> str:
    d = t.describe()
    levels = "; ".join(
        f"{k} from {{{', '.join(f'{v:g}' for v in vs)}}}" for k, vs in d["levels"].items()
    )
    parts = [
        f"<b>Tuning</b> of {html.escape(', '.join(t.factors))} ({html.escape(t.scheme)}) per "
        f"configuration of {html.escape(', '.join(t.configuration) or 'the whole grid')}: "
        f"{html.escape(levels)}; {len(t.runs)} runs out",
        _table(t.flattery),
    ]
    if t.warnings:
        parts.append(_titled_list("Warnings", t.warnings))
    return _closed(parts, "Tables: .choices, .curves, .flattery; the tuned grid: .grid; "
                   "figures: .plot_curves(), .plot_chosen(x, y)")  # fmt: skip


def search_html(s) -> str:
    from fitrules.views.search import _named, _sentences

    cols = ["max_constants", "n_candidates", "outer_median_pct", "outer_p90_pct",
            "inner_median_pct", "optimism", "final_choice", "on_front"]  # fmt: skip
    budgets = s.budgets[cols].copy()
    budgets["final_choice"] = [
        s.forms[n].expression if isinstance(n, str) else None for n in budgets["final_choice"]
    ]
    picked = s.candidates[s.candidates["picked"] > 0].sort_values("picked", ascending=False)
    parts = [
        f"<b>fitrules search</b>: {html.escape(s.grid_label)}: {s.n_generated:,} forms proposed, "
        f"{len(s.candidates):,} fitted",
        _list(_sentences(s)),
        "<b>The procedure at each budget</b>",
        _table(budgets),
        "<b>Forms picked across outer splits</b>",
        _table(picked[["name", "expression", "n_constants", "picked"]]),
        "<b>Forms named</b>",
        _list([f"{n} = {e}" for n, e in _named(s).items()]),
    ]
    if len(s.references):
        refs = s.references[["form", "expression", "n_constants", "outer_median_pct",
                             "outer_over_inner", "search_lower", "paired_splits"]]  # fmt: skip
        parts += ["<b>Hand-written references</b>", _table(refs)]
    return _closed(parts, "Tables: .budgets, .candidates, .choices, .references, .dropped; "
                   "figure: .plot_front(); forms: .forms_toml(); JSON: .to_dict()")  # fmt: skip
