"""Markdown report directories for comparisons and paired-seed intervals."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pandas as pd

from fitrules import __version__
from fitrules.base.util import json_ready
from fitrules.views import figures
from fitrules.views.directory import write_report_dir
from fitrules.views.text import (
    data_line,
    fmt_p,
    guard_line,
    heldout_definition,
    paired_heading,
    protocol_line,
    rank_value,
    table_notes,
    verdict_sentence,
    worst_notes,
)
from fitrules.views.text_parts import headed, with_unit


def summary_header(basis: str = "valid", unit: str = "%") -> str:
    """The summary table's header, its error columns headed in ``unit``."""
    errors = " | ".join(
        headed(label, unit)
        for label in ("common median", "median", "trimmed mean", "p90", "worst split",
                      "worst cell", "noise floor")
    )  # fmt: skip
    return (
        f"| form | constants | {basis} splits | degenerate | wild | {errors} |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )


def error_unit(doc: dict) -> str:
    """The unit of a comparison's errors, from its JSON (``%`` for one written before
    results recorded their metric)."""
    return (doc.get("error_metric") or {}).get("unit", "%")


# Reports are meant to be byte-identical when remade from the same command and data: no date
# (git and the fitrules version say when), and floats to 12 significant digits, so that a
# different BLAS or thread count, which moves the last of 17 digits, does not rewrite them.
FLOAT_FORMAT = "%.12g"


def code(text: str) -> str:
    """``text`` as a markdown code span that survives backticks inside it (CommonMark: a run
    of backticks longer than any inside, padded with spaces)."""
    text = str(text)
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _num(x, f=".3f") -> str:
    return "n/a" if x is None else format(x, f)


def _cell(text: str) -> str:
    """``text`` in a markdown table's cell: its pipes (``|relative error|``) escaped."""
    return text.replace("|", "\\|")


def _unit_num(x, unit: str, f=".3f") -> str:
    return "n/a" if x is None else with_unit(x, f, unit)


def summary_rows(summary: list[dict]) -> list[str]:
    return [
        f"| {r['form']} | {r['constants']} | {r['splits_used']} | {r['degenerate_splits']} | "
        f"{r['wild_splits']} | {_num(r.get('common_median'))} | {_num(r['median'])} | "
        f"{_num(r['trimmed_mean'])} | "
        f"{_num(r['p90'])} | {_num(r['worst_split'], '.4g')} | "
        f"{_num(r['worst_cell'], '.4g')} | {_num(r.get('noise_floor'))} |"
        for r in summary
    ]


def tame_rows(summary: list[dict], unit: str = "%") -> list[str]:
    labels = ("median", "without wild: median", "trimmed mean", "without wild: trimmed", "p90",
              "without wild: p90")  # fmt: skip
    head = [
        "| form | wild splits | " + " | ".join(headed(x, unit) for x in labels) + " |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    return head + [
        f"| {r['form']} | {r['wild_splits']} | {_num(r['median'])} | "
        f"{_num(r['tame_median'])} | {_num(r['trimmed_mean'])} | "
        f"{_num(r['tame_trimmed_mean'])} | {_num(r['p90'])} | {_num(r['tame_p90'])} |"
        for r in summary
    ]


def noise_sentences(summary: list[dict], unit: str = "%") -> list[str]:
    out = []
    for r in summary:
        if r["median"] is None:
            continue
        floor = r.get("noise_floor")
        against = (
            f" against a noise floor of {with_unit(floor, '.3f', unit)}"
            if floor is not None
            else (" (no noise estimate: cells with one seed)")
        )
        out.append(
            f"- {r['form']}: median held-out error {with_unit(r['median'], '.3f', unit)}{against}"
        )
    return out


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _tuning_figures(tuning, fig) -> None:
    from fitrules.views import tuning as tfig

    others = [c for c in tuning.configuration if c in ("H", "keep", "omega")]
    if len(tuning.factors) == 1 and {"H", "keep"} <= set(others):
        fig(
            "tuning",
            "chosen_levels.png",
            tfig.chosen_levels_map(tuning, "H", "keep"),
            f"{tuning.factors[0]} chosen per configuration (outlined: at the edge of the sweep).",
        )
    fig(
        "tuning",
        "tuning_curves.png",
        tfig.lr_curves(tuning, by="H" if "H" in others and len(others) > 1 else None),
        f"mean {tuning.grid.metric} against {', '.join(tuning.factors)}; rings mark the "
        "levels chosen.",
    )


def _tuning_section(tuning) -> list[str]:
    from fitrules.views.text import render_tuning
    from fitrules.views.text_parts import sentence

    text = render_tuning(tuning, max_rows=40).splitlines()
    return [
        "## Tuning",
        "",
        sentence([text[0]]),
        "",
        *[f"- {line.strip()}" for line in text[1:]],
        "",
        "Choosing a level and measuring it on the same seeds flatters the winner (the minimum "
        "of noisy means is biased low, more so the more levels are tried); here every value "
        "was measured on seeds that did not choose its level, and the flattery avoided is "
        "shown per configuration.",
        "",
    ]


def comparison_report(
    cmp,
    payload: dict,
    target: Path,
    command: str,
    force: bool = False,
    tuning=None,
    max_pairs: int = 10,
) -> Path:
    """Write ``report.md``, figures, ``results.json`` and ``splits.csv`` for a comparison."""
    doc = payload

    def build(d: Path) -> None:
        figs: list[tuple[str, str, str]] = []  # (section, file, caption)

        def fig(section, name, ax, caption):
            figures.save(ax, d / name)
            figs.append((section, name, caption))

        if tuning is not None:
            _tuning_figures(tuning, fig)

        fig(
            "errors",
            "heldout_ecdf.png",
            figures.heldout_ecdf(cmp),
            "Held-out error per split, as an empirical CDF: further left is better.",
        )
        pairs = _figure_pairs(cmp)
        for a, b in pairs[:max_pairs]:
            fig(
                "paired",
                f"paired_{_slug(a)}_vs_{_slug(b)}.png",
                figures.paired_scatter(cmp, a, b),
                f"{a} against {b}, one point per split valid for both.",
            )
        if len(pairs) > max_pairs:  # the rest are counted and named, never dropped silently
            rest = ", ".join(f"{a} vs {b}" for a, b in pairs[max_pairs:])
            figs.append(("paired-note", "", (
                f"{max_pairs} of the {len(pairs)} paired figures are drawn (the pairs of the "
                f"best form first); "
                + ("the other is not: " if len(pairs) - max_pairs == 1
                   else f"the other {len(pairs) - max_pairs} are not: ")
                + f"{rest} "
                "(`Comparison.plot_paired(a, b)` draws any pair)."
            )))  # fmt: skip
        _fit_figures(cmp.cells, cmp.forms, cmp.full_fits, cmp.unit, fig)
        (d / "results.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        flat = cmp.results.copy()
        flat["reasons"] = flat["reasons"].map(lambda r: "; ".join(r))
        flat["constants"] = flat["constants"].map(
            lambda c: json.dumps(json_ready(c), sort_keys=True)
        )
        flat.to_csv(d / "splits.csv", index=False, float_format=FLOAT_FORMAT)
        md = _comparison_md(doc, figs, command)
        if tuning is not None:
            head, sep, rest = md.partition("## Forms")
            tfigs = [f"![{cap}]({n})\n\n*{cap}*\n" for sec, n, cap in figs if sec == "tuning"]
            md = head + "\n".join(_tuning_section(tuning) + tfigs) + "\n" + sep + rest
        (d / "report.md").write_text(md)

    return write_report_dir(target, build, force)


def _fit_figures(cells, forms, full_fits, unit, fig, bands=None) -> None:
    """Observed against predicted per form; residuals against every variable (all forms on
    one scale); residual heat maps over two variables when the cells form a grid (one colour
    scale for all forms); fitted curves of every form against each of its variables."""
    # a form whose fit on all cells failed has nothing to draw (the table says n/a)
    forms = [
        f
        for f in forms
        if all(v is not None and math.isfinite(v) for v in full_fits[f.name].constants.values())
    ]
    if not forms:
        return
    consts = {f.name: full_fits[f.name].constants for f in forms}
    for f in forms:
        fig(
            "fit",
            f"observed_vs_predicted_{_slug(f.name)}.png",
            figures.observed_vs_predicted(cells, f, consts[f.name], unit),
            f"{f.name} fitted on all cells: observed against predicted.",
        )
    variables = list(cells.variables)
    for x in variables:
        blind = [f.name for f in forms if x not in f.bound_variables]
        fig(
            "residuals",
            f"residuals_vs_{_slug(x)}.png",
            figures.residuals_vs(cells, [(f, consts[f.name]) for f in forms], x),
            f"Residuals (observed - predicted, % of observed) of the full-grid fits against {x}"
            + (f" (forms that do not read {x}: {', '.join(blind)})." if blind else "."),
        )
    if len(variables) == 2 and figures.can_map(cells, variables[0], variables[1]):
        lim = figures.residual_limit(
            [figures.residuals_pct(cells, f, consts[f.name]) for f in forms]
        )
        for f in forms:
            fig(
                "residuals",
                f"residual_map_{_slug(f.name)}.png",
                figures.residual_map(cells, f, consts[f.name], variables[0], variables[1], lim),
                f"{f.name}: observed - predicted (% of observed) over {variables[0]} and "
                f"{variables[1]} (one "
                "colour scale for every form).",
            )
    for f in forms:
        for x in f.bound_variables:
            fig(
                "curves",
                f"curves_{_slug(f.name)}_vs_{_slug(x)}.png",
                figures.curves_vs(
                    cells, f, consts[f.name], x, unit, band=(bands or {}).get(f.name)
                ),
                f"{f.name}: data and fitted curves against {x}"
                + (
                    ", shaded: the prediction interval for the configuration's mean at the "
                    "grid's one seed id (one seed id in every cell: none covers new seed ids)."
                    if getattr(
                        getattr((bands or {}).get(f.name), "__self__", None), "one_id", False
                    )  # fmt: skip
                    else ", shaded: the prediction interval for the configuration's mean over "
                    "new seed ids (misfit and the grid's seed offset included)."
                    if (bands or {}).get(f.name)
                    else "."
                ),
            )


MANY_FLOORS = 3  # "every form misses by several times the noise floor" from this ratio


def _winner_paragraph(best: dict, doc: dict) -> str:
    """The form with the lowest median error, against the noise floor and the guard (its
    verdicts are in the Answer and the paired table, once each)."""
    name = best["form"]
    basis = doc["settings"].get("splits_used", "valid")
    unit = error_unit(doc)
    within_floor = []
    floor = best.get("noise_floor")
    for r in doc["paired"]:
        if name not in (r["a"], r["b"]) or not r["n"]:
            continue
        other = r["b"] if r["a"] == name else r["a"]
        if floor is not None and abs(r["median_diff"]) < floor:
            within_floor.append(other)
    on = "valid" if basis == "valid" else "(all, degenerate kept)"
    # the verdicts themselves are in the Answer and once each in the paired table
    if best.get("ranked_on") == "common" and len(doc["summary"]) > 1:
        text = (
            f"**{name}** has the lowest median held-out error, "
            f"{with_unit(best['common_median'], '.3f', unit)} over the {best['common_splits']} "
            f"splits valid for every form ({with_unit(best['median'], '.3f', unit)} over its "
            f"own {best['splits_used']} {on} splits, 90th percentile "
            f"{with_unit(best['p90'], '.3f', unit)}). "
        )
    else:
        text = (
            f"**{name}** has the lowest median held-out error, "
            f"{with_unit(best['median'], '.3f', unit)} over {best['splits_used']} {on} splits "
            f"(90th percentile {with_unit(best['p90'], '.3f', unit)}). "
        )
    if within_floor:
        text += (
            f"Its median edge over {', '.join(within_floor)} is smaller than the noise floor "
            f"({with_unit(floor, '.3f', unit)}). "
        )
    ratios = [
        r["median"] / r["noise_floor"]
        for r in doc["summary"]
        if r.get("noise_floor") and r["median"] is not None
    ]
    if ratios and min(ratios) >= MANY_FLOORS:
        text += (
            f"Every form misses by {min(ratios):.1f} to {max(ratios):.1f} times the noise "
            "floor: none of these rules predicts the held-out cells to within seed noise. "
        )
    heavy = [r["form"] for r in doc["summary"] if r.get("wild_splits")]
    if heavy:
        text += (
            f"The guard names wild extrapolations of {', '.join(heavy)} (below); they stay in "
            "the distribution and the summaries are shown with and without them."
        )
    return text.strip()


def _comparison_md(doc: dict, figs, command: str) -> str:
    s, data = doc["settings"], doc["data"]
    n_train = doc["results"][0]["n_train"] if doc["results"] else 0
    from fitrules.views.text import conclusion

    ranked = sorted(doc["summary"], key=rank_value)
    unit, metric = error_unit(doc), doc.get("error_metric")
    held_out = heldout_definition(s.get("heldout_weights"), metric=metric)
    lines = [
        f"# fitrules comparison: {', '.join(f['name'] for f in doc['forms'])}",
        "",
        "## Answer",
        "",
        *[f"{x}  " for x in conclusion(doc["summary"], doc["paired"], unit)],
        "",
        summary_header(s.get("splits_used", "valid"), unit),
        *summary_rows(ranked),
        "",
        *[
            f"{note}\n"
            for note in worst_notes(ranked[:1], pd.DataFrame(doc["results"]), unit)
            if doc["results"]
        ],
        "Forms ranked by median held-out error"
        + (
            " over the splits valid for every form (common median)"
            if ranked and ranked[0].get("ranked_on") == "common"
            else " over each form's own valid splits (too few are valid for every form)"
        )
        + "; what each column means is under Summary.",
        "",
        "## Data and protocol",
        "",
        *_data_rows(data),
        f"| runs, cells | {data['runs']} runs in {data['cells']} cells "
        f"(excluded: {', '.join(f'{v} {k}' for k, v in data['excluded'].items()) or 'none'}) |",
        *[f"| table | {n} |" for n in table_notes(data)],
        f"| protocol | {protocol_line(s, n_train, data['cells'])} |",
        f"| held-out error | {_cell(held_out)} |",
        f"| objective | {s['objective']} |",
        f"| degenerate pairs | {'kept' if s['keep_degenerate'] else 'set aside'} |",
        f"| command | {code(command)} |",
        f"| fitrules | {__version__} |",
        "",
        f"Held-out error: {heldout_definition(None, 'the held-out cells of a split', metric)}. "
        "Each form is fitted on the same splits.",
        "",
        "## Forms",
        "",
    ]
    lines += [
        f"- **{f['name']}** = `{f['expression']}`"
        + (f" ({f['constant_notes']})" if f.get("constant_notes") else "")
        for f in doc["forms"]
    ]
    basis = s.get("splits_used", "valid")
    lines += [
        "",
        "## Summary",
        "",
        "The table under Answer: per-split held-out errors: the common median (over the "
        "splits valid for every form, what the ranking uses when there are at least 30), "
        "then over each form's own valid splits the median, 10% trimmed mean, 90th "
        "percentile and the worst split; worst cell is the largest error at a single "
        "held-out cell. The mean is left out of the table (results.json keeps it): one "
        "runaway split can own it.",
        "",
    ]
    if doc.get("warnings"):
        lines += ["**Warnings:**", "", *[f"- {w}" for w in doc["warnings"]], ""]
    if any(r["wild_splits"] for r in doc["summary"]):
        lines += ["With and without the fits the guard names:", "", *tame_rows(ranked, unit), ""]
    lines += [
        "Noise floor: the held-out error a predictor would show if it knew every cell's "
        "true mean, from the spread of the seeds (median over splits).",
        "",
    ]
    lines += noise_sentences(doc["summary"], unit) + [""]
    best = min(
        (r for r in doc["summary"] if math.isfinite(rank_value(r))),
        key=rank_value,
        default=None,
    )
    if best:
        lines += ["## Which form wins", "", _winner_paragraph(best, doc), ""]
    lines += [f"![held-out error distribution]({n})" for sec, n, _ in figs if sec == "errors"]
    lines += _paired_md(doc, basis) if doc["paired"] else []
    lines += _guard_md(doc, figs)
    lines += _set_aside_md(doc)
    lines += _full_fit_md(doc, figs)
    lines += [
        "",
        "Files: `results.json` (everything above, as numbers), `splits.csv` (one row "
        "per split and form).",
        "",
    ]
    return "\n".join(lines)


def _paired_md(doc: dict, basis: str) -> list[str]:
    s = doc["settings"]
    unit = error_unit(doc)
    lines = [
        "",
        "## Paired verdicts",
        "",
        paired_heading(s, len(doc["paired"]), doc["data"]["cells"]),
        "",
    ]
    if s["protocol"] == "random":
        lines += [
            "| a | b | verdict | descriptive splits | a lower | b lower | ties | median a - b | "
            "verdict splits | error ratio a/b | unadjusted interval | p | Holm p |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        lines += [
            f"| {r['a']} | {r['b']} | {r.get('verdict', '')} | {r['n']} | {r['a_better']} | "
            f"{r['b_better']} | "
            f"{r['ties']} | {_num(r['median_diff'], '+.3f')} | {r.get('verdict_n', r['n'])} "
            f"| {_num(r['ratio'], '.3g')} | {_interval_cell(r)} | "
            f"{fmt_p(r['p'])} | {fmt_p(r.get('p_holm'))} |"
            for r in doc["paired"]
        ]
        warned = [verdict_sentence(r, basis, unit).partition(". Warning: ") for r in doc["paired"]]
        lines += [
            f"- {r['a']} vs {r['b']}: warning: {w[2]}"
            for r, w in zip(doc["paired"], warned, strict=True)
            if w[1]
        ]
    else:
        lines += [f"- {verdict_sentence(r, basis, unit)}" for r in doc["paired"]]
    lines += [
        "",
        "The p-value asks whether the forms' held-out errors differ by more than the cells of "
        "this grid can tell: random splits reuse the same cells, so the corrected test "
        "inflates the variance by n_test/n_train and its p-value does not shrink as splits "
        "are added. It is computed on the verdict protocol (a high train fraction, where the "
        "test has power); the counts of splits won and the summaries describe the descriptive "
        "protocol. Its false-positive rate on simulated null grids and its power at 2 to 6x "
        "error ratios are printed by `benchmarks/bench_calibration.py`.",
        "",
        "Cells that decide each verdict (median held-out error at the cell over the splits "
        "that held it out, first form / second form):",
        "",
    ]
    for r in doc["paired"]:
        cells_ = ", ".join(
            f"{c['cell']} ({_unit_num(c['a'], unit)} / {_unit_num(c['b'], unit)})"
            for c in r.get("deciding_cells", [])
        )
        lines.append(f"- {r['a']} vs {r['b']}: {cells_ or 'n/a'}")
    return lines


def _guard_md(doc: dict, figs) -> list[str]:
    s = doc["settings"]
    lines: list[str] = []
    wild = {k: v for k, v in doc.get("wild_fits", {}).items() if v}
    lines += ["", "## Wild extrapolation", "", guard_line(s) + ".", ""]
    if wild:
        for form, items in wild.items():
            lines.append(f"- **{form}**: {len(items)} splits")
            lines += [f"  - {x}" for x in items[:10]]
            if len(items) > 10:
                lines.append(f"  - ... and {len(items) - 10} more (results.json: wild_fits)")
    else:
        lines.append("No fit tripped the guard.")
    lines += [""] + [f"![{cap}]({n})" for sec, n, cap in figs if sec == "paired"]
    lines += [f"\n*{cap}*" for sec, _, cap in figs if sec == "paired-note"]
    return lines


def _interval_cell(r: dict) -> str:
    lo, hi = r.get("ratio_ci") or (None, None)
    if lo is None or hi is None:
        if r.get("ratio") is not None:  # the log ratio did not vary over the splits
            return "no interval (the ratio is the same in every split)"
        return "n/a"
    return f"{_num(lo, '.3g')} to {_num(hi, '.3g')}"


def _figure_pairs(cmp) -> list[tuple[str, str]]:
    """The pairs the paired figures show: those tested (all pairs without a test), the best
    form's first."""
    if len(cmp.paired):
        pairs = list(zip(cmp.paired["a"], cmp.paired["b"], strict=True))
    else:
        pairs = list(itertools.combinations([f.name for f in cmp.forms], 2))
    ranked = cmp.ranking["form"].tolist()
    best = ranked[0] if ranked else None
    return sorted(pairs, key=lambda p: best not in p)  # stable: the tested order otherwise


def _set_aside_md(doc: dict) -> list[str]:
    s = doc["settings"]
    lines = [
        "",
        "## Splits set aside",
        "",
        "A (split, form) pair is flagged when its fit does not stand for the form on that "
        "split, for one of two kinds of reason: the constants cannot be identified from the "
        "split's training cells (a variable with one value, too few cells, a rank-deficient "
        "or badly conditioned Jacobian, a constant at its bound), or the fit itself failed "
        "(the optimiser did not converge, or the prediction is not finite). "
        + (
            # flag words: advice shown on both faces
            "Flagged pairs are kept in the numbers above (--keep-degenerate)."
            if s["keep_degenerate"]
            else "Flagged pairs are left out of the summary and the paired verdicts."
        ),
        "",
    ]
    any_flag = False
    for form, counts in doc["degenerate_reasons"].items():
        if counts:
            any_flag = True
            lines.append(f"- **{form}**: " + "; ".join(f"{c} x {r}" for r, c in counts.items()))
    if not any_flag:
        lines.append("None.")
    return lines


def _pm(value, se) -> str:
    if value is None:  # a full fit that failed: its constants are null in the JSON
        return "n/a"
    return f"{value:.4g} ± {se:.2g}" if se is not None else f"{value:.4g}"


def _full_fit_md(doc: dict, figs) -> list[str]:
    lines = [
        "",
        "## Constants fitted on all cells",
        "",
        "Value ± standard error from the Jacobian at the fit, scaled by the residual variance "
        "(so it carries the form's misfit as well as seed noise); the strongest correlation "
        "between two constants.",
        "",
        "| form | constants | strongest correlation | training objective | diagnostics |",
        "|---|---|---|---:|---|",
    ]
    for name, r in doc["full_fit"].items():
        se = r.get("stderr") or {}
        consts = ", ".join(f"{k} = {_pm(v, se.get(k))}" for k, v in r["constants"].items())
        corr = r.get("strongest_correlation")
        corr_text = f"C({corr[0]}, {corr[1]}) = {corr[2]:+.4f}" if corr else "n/a"
        diag = "; ".join(r["reasons"]) or "well posed"
        if r.get("uncertainty_note"):
            diag += f"; errors: {r['uncertainty_note']}"
        lines.append(
            f"| {name} | {consts} | {corr_text} | {_num(r['train_objective'], '.4g')} | {diag} |"
        )
    sections = (("fit", None), ("residuals", "### Residuals"), ("curves", "### Fitted curves"))
    for sec, title in sections:
        chosen = [(n, cap) for s_, n, cap in figs if s_ == sec]
        if chosen and title:
            lines += ["", title]
        lines += [""] + [f"![{cap}]({n})\n\n*{cap}*\n" for n, cap in chosen]
    return lines


def ci_report(
    results, payload: dict, target: Path, command: str, force: bool = False, tuning=None
) -> Path:
    """Write ``report.md``, one figure per treatment, and ``results.json`` for ``fitrules ci``."""

    def build(d: Path) -> None:
        data = payload["data"]
        tuning_lines: list[str] = []
        if tuning is not None:
            from fitrules.views import tuning as tfig

            figures.save(tfig.lr_curves(tuning), d / "tuning_curves.png")
            tuning_lines = [
                *_tuning_section(tuning),
                "![each arm's metric against the tuned level](tuning_curves.png)",
                "",
                "*Each arm's mean over all seeds against the tuned level; rings mark the "
                "levels chosen on the tuning seeds.*",
                "",
            ]
        else:
            tuning_lines = [
                "## Not tuned",
                "",
                "No factor was tuned for this comparison: each arm ran at the settings the "
                "grid fixed for it. If either arm's learning rate (or another setting the "
                "comparison depends on) was not tuned for that arm, the difference may be an "
                "effect of that setting, not of the method: a difference at one shared "
                "learning rate answers 'at this learning rate', not 'in general'. Sweep it in "
                # flag words: advice shown on both faces
                "the grid and pass `--tune lr` (with `--tune-seeds` so that the interval is "
                "measured on seeds that did not choose the level).",
                "",
            ]
        lines = [
            "# fitrules paired-seed intervals",
            "",
            "| | |",
            "|---|---|",
            f"| data | {code(data['path'])} |",
            f"| sha256 | `{data['sha256']}` |",
            f"| metric | {data['metric']} (lower is better) |",
            f"| baseline | `{results[0].baseline}` |",
            f"| level | {results[0].level:g} |",
            f"| bootstrap | BCa, {payload['settings']['resamples']} resamples, seed "
            f"{payload['settings']['seed']} |",
            f"| command | {code(command)} |",
            f"| fitrules | {__version__} |",
            "",
            *tuning_lines,
        ]
        for i, r in enumerate(results):
            name = f"differences_{i + 1}.png"
            figures.save(figures.paired_differences(r), d / name)
            pct = round(100 * r.level)
            blo, bhi = r.bootstrap_interval
            boot = f"{blo:+.4g} to {bhi:+.4g}" if blo is not None else "n/a"
            lines += [
                f"## {r.treatment}",
                "",
                f"**{r.sentence()}**",
                "",
                "| quantity | value |",
                "|---|---|",
                f"| pairs | {r.n} (seeds {', '.join(map(str, r.seeds))}) |",
                f"| mean difference | {r.mean_diff:+.4g}{' ' + r.units if r.units else ''} "
                f"({r.pct_of_baseline:+.3f}% of baseline) |",
                f"| sd of differences | {r.sd_diff:.4g} |",
                f"| {pct}% paired-t interval | {r.t_interval[0]:+.4g} to {r.t_interval[1]:+.4g} |",
                f"| {pct}% bootstrap (BCa) interval | {boot} |",
                f"| paired t p | {fmt_p(r.t_p)} |",
                f"| Wilcoxon signed-rank p | {fmt_p(r.wilcoxon_p)} |",
                f"| sign-flip permutation p | {fmt_p(r.signflip_p)} "
                f"({'exact' if r.signflip_exact else 'Monte Carlo'}) |",
            ]
            if r.holm_t_p is not None:
                lines += [
                    f"| Holm-adjusted t p | {fmt_p(r.holm_t_p)} |",
                    f"| Holm-adjusted Wilcoxon p | {fmt_p(r.holm_wilcoxon_p)} |",
                ]
            dropped = [f"{k.replace('_', ' ')}: {v}" for k, v in r.dropped_seeds.items() if v]
            lines += [
                "",
                f"Seeds dropped (present on one side only): {'; '.join(dropped) or 'none'}.",
            ]
            lines += [f"> warning: {w}" for w in r.warnings]
            lines += ["", f"![per-seed differences]({name})", ""]
        (d / "report.md").write_text("\n".join(lines))
        (d / "results.json").write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")

    return write_report_dir(target, build, force)


def fit_report(fitted, target: Path, command: str, force: bool = False, cells: bool = True) -> Path:
    """Report of one form fitted on all cells: constants with standard errors and intervals,
    correlations, predictions, diagnostics, and figures against every variable of the form."""
    f = fitted
    doc = f.to_dict(cells)

    def build(d: Path) -> None:
        figs: list[tuple[str, str, str]] = []

        def fig(section, name, ax, caption):
            figures.save(ax, d / name)
            figs.append((section, name, caption))

        bands = {f.form.name: f.heldout.band} if f.heldout is not None else None
        _fit_figures(f.cells, [f.form], {f.form.name: f.result}, f.unit, fig, bands)
        lines = _fit_header_md(f, doc, command)
        lines += _constants_md(f)
        if f.predictions:
            lines += _predictions_md(f)
        lines += _fit_section_md(f, figs)
        (d / "report.md").write_text("\n".join(lines))
        (d / "results.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")

    return write_report_dir(target, build, force)


def allocation_report(a, target: Path, command: str, force: bool = False) -> Path:
    """Report of an allocation: the text the command line prints, its table, the frontier
    figure (the optimum marked with its interval at every budget) and results.json."""
    doc = json_ready(a.to_dict())

    def build(d: Path) -> None:
        figures.save(a.plot_frontier(), d / "frontier.png")
        lines = [f"# Allocation of {a.fit.form.name}", ""]
        if command:
            lines += [f"command: {code(command)}", ""]
        lines += ["```", a.text(), "```", "",
                  f"![the loss-optimal frontier of {a.fit.form.name}](frontier.png)", "",
                  "Results: `results.json`.", ""]  # fmt: skip
        (d / "report.md").write_text("\n".join(lines))
        (d / "results.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")

    return write_report_dir(target, build, force)


def _data_rows(data: dict) -> list[str]:
    """The head of a report's table of what it read: the file, its hash, filters, derived."""
    where = " and ".join(data["where"]) or "none"
    derived = code("; ".join(data["derive"])) if data.get("derive") else "none"
    return [
        "| | |",
        "|---|---|",
        f"| data | {code(data['path'])} |",
        f"| sha256 | `{data['sha256']}` |",
        f"| filter | {code(where)} |",
        f"| derived | {derived} |",
    ]


def _fit_header_md(f, doc: dict, command: str) -> list[str]:
    """The fit report's title, the form, and the table of what was fitted and how."""
    data = doc["data"]
    return [
        f"# fitrules fit: {f.form.name}",
        "",
        code(f"{f.form.name} = {f.form.expression}")
        + (f" ({f.form.constant_notes})" if f.form.constant_notes else ""),
        "",
        *_data_rows(data),
        f"| runs, cells | {data['runs']} runs in {data['cells']} cells |",
        f"| objective | {doc['objective']} |",
        f"| command | {code(command)} |",
        f"| fitrules | {__version__} |",
        "",
        "## Constants",
        "",
    ]


def _constants_md(f) -> list[str]:
    """The constants with standard errors (and bootstrap intervals), and their correlations."""
    from fitrules.views.text import uncertainty_lines

    m = f.interval_method
    has_iv = m is not None
    pct = round(100 * m.level) if m is not None else 95
    kind = "bootstrap" if m is None or m is f.bootstrap else m.interval_kind
    lines = [
        "| constant | value | standard error (Jacobian) |"
        + (f" {pct}% {kind} interval |" if has_iv else ""),
        "|---|---:|---:|" + ("---|" if has_iv else ""),
    ]
    for r in f.table.to_dict("records"):
        row = f"| {r['constant']} | {r['value']:.6g} | {_num(r['stderr'], '.3g')} |"
        if has_iv:
            row += f" {r['low']:.6g} to {r['high']:.6g} |"
        lines.append(row)
    lines += ["", *[f"- {x}" for x in uncertainty_lines(f)], ""]
    corr = f.correlation
    if f.uncertainty.ok and len(corr) > 1:
        names = list(corr.columns)
        lines += [
            "Correlations of the constants (Jacobian):",
            "",
            "| | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        lines += [
            f"| {a} | " + " | ".join(f"{corr.loc[a, b]:+.4f}" for b in names) + " |" for a in names
        ]
        lines.append("")
    return lines


def _predictions_md(f) -> list[str]:
    """The predictions asked for, with standard errors, intervals and how far outside."""
    has_iv = f.heldout is not None
    pct = round(100 * f.heldout.level) if f.heldout is not None else 95
    lines = ["## Predictions", "",
             "| point | prediction | standard error |"
             + (f" {pct}% interval, the configuration's mean over new seed ids "
                "(misfit and seed offset included) |"
                f" {pct}% interval, constants only (at the grid's seed ids) |"
                if has_iv else "")
             + " outside the fitted cells |",
             "|---|---:|---:|" + ("---|---|" if has_iv else "") + "---|"]  # fmt: skip
    for p in f.predictions:
        row = (
            f"| {', '.join(f'{k}={v:g}' for k, v in p['given'].items())} | "
            f"{p['prediction']:.5g} | {p['stderr']:.3g} |"
        )
        if has_iv:
            for key in ("interval", "constants_interval"):
                iv = p.get(key)
                row += f" {iv[0]:.5g} to {iv[1]:.5g} |" if iv else " - |"
        far = p.get("extrapolation") or {}
        row += " " + (", ".join(f"{k} {v:.3g}x" for k, v in far.items()) or "no") + " |"
        lines.append(row)
    lines.append("")
    if f.heldout is not None:
        lines += [
            f"Prediction intervals: {f.heldout.describe()}. The constants-only "
            "interval treats the form as exactly true and covers the mean at the "
            "grid's seed ids; the other adds its misfit as held-out cells show it and "
            "covers the configuration's mean over new seed ids. Neither covers a "
            "change of regime outside the fitted cells.",
            "",
        ]
    return lines


def _fit_section_md(f, figs: list[tuple[str, str, str]]) -> list[str]:
    """The training error, the diagnostics, and the fit's figures by section."""
    te = f.train_error
    lines = [
        "## Fit",
        "",
        f"Training error: mean {te['heldout_error_pct']:.3f}%, "
        f"{te['worst_cell_pct']:.3f}% at the worst cell, rmse {te['rmse']:.4g}.",
        "",
        "Diagnostics: " + ("; ".join(f.reasons) or "well posed") + ".",
        "",
    ]
    sections = (("fit", None), ("residuals", "### Residuals"), ("curves", "### Fitted curves"))
    for sec, title in sections:
        chosen = [(n, cap) for s_, n, cap in figs if s_ == sec]
        if chosen and title:
            lines += [title, ""]
        lines += [f"![{cap}]({n})\n\n*{cap}*\n" for n, cap in chosen]
    return lines


def protocols_report(cmps, payloads, target: Path, command: str, force: bool = False) -> Path:
    """One report, one section per split protocol; numbers of different protocols are never
    pooled."""

    def build(d: Path) -> None:
        first = payloads[0]
        lines = [
            f"# fitrules validation: {', '.join(f['name'] for f in first['forms'])}",
            "",
            f"Command: {code(command)}; fitrules {__version__}; objective "
            f"{first['settings']['objective']}.",
            "",
            "Each section is one split protocol. The held-out error of a split is the "
            + heldout_definition(
                first["settings"].get("heldout_weights"),
                "its held-out cells",
                first.get("error_metric"),
            )
            + "; the noise floor is the error a predictor would show if it knew every held-out "
            "cell's true mean (from the seed spread). Numbers of different protocols are never "
            "pooled.",
            "",
        ]
        for i, (cmp, doc) in enumerate(zip(cmps, payloads, strict=True)):
            s = doc["settings"]
            slug = f"{i + 1}_{_slug(s['protocol'].split(':')[0])}"
            n_train = min(r["n_train"] for r in doc["results"])
            lines += [
                f"## {s['protocol']}",
                "",
                f"- {data_line(doc['data'])}",
                f"- {protocol_line(s, n_train, doc['data']['cells'])}",
                "",
            ]
            basis, unit = s.get("splits_used", "valid"), error_unit(doc)
            lines += [summary_header(basis, unit), *summary_rows(doc["summary"]), ""]
            lines += noise_sentences(doc["summary"], unit) + [""]
            lines += [paired_heading(s, len(doc["paired"]), doc["data"]["cells"]), ""]
            lines += [f"- {verdict_sentence(r, basis, unit)}" for r in doc["paired"]] + [""]
            if s["protocol"] == "random":
                name = f"{slug}_ecdf.png"
                figures.save(figures.heldout_ecdf(cmp), d / name)
            else:
                name = f"{slug}_by_split.png"
                figures.save(figures.errors_by_split(cmp), d / name)
                lines += [
                    "| split | " + " | ".join(f["name"] for f in doc["forms"]) + " | noise floor |",
                    "|---|" + "---:|" * (len(doc["forms"]) + 1),
                ]
                for _split, g in cmp.results.groupby("split", sort=True):
                    cells_ = []
                    for f in doc["forms"]:
                        r = g[g["form"] == f["name"]].iloc[0]
                        v = _num(r["heldout_error"])
                        cells_.append(f"{v}{' (degenerate)' if r['degenerate'] else ''}")
                    lines.append(
                        f"| {g['split_label'].iloc[0]} | "
                        + " | ".join(cells_)
                        + f" | {_num(g['noise_floor'].iloc[0])} |"
                    )
                lines.append("")
            lines += [f"![{s['protocol']}]({name})", ""]
            flagged = {k: v for k, v in doc["degenerate_reasons"].items() if v}
            if flagged:
                lines += [
                    "Degenerate pairs: "
                    + "; ".join(
                        f"{form}: " + ", ".join(f"{c} x {r}" for r, c in counts.items())
                        for form, counts in flagged.items()
                    ),
                    "",
                ]
            (d / f"results_{slug}.json").write_text(
                json.dumps(doc, indent=1, allow_nan=False) + "\n"
            )
        (d / "report.md").write_text("\n".join(lines))
        (d / "results.json").write_text(
            json.dumps({"protocols": payloads}, indent=1, allow_nan=False) + "\n"
        )

    return write_report_dir(target, build, force)
