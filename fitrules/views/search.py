"""Views of a search: terminal text, JSON, forms.toml entries, the front figure, a report."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fitrules import __version__
from fitrules.base.util import json_ready
from fitrules.views import figures
from fitrules.views.directory import write_report_dir
from fitrules.views.text import heldout_definition

if TYPE_CHECKING:
    import pandas as pd


def _pct(x) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.3f}%"


def _ratio(x) -> str:
    return "n/a" if x is None or not math.isfinite(float(x)) else f"{float(x):.2f}"


def _inner_text(s) -> str:
    st = s.settings
    return st.get("inner_protocol") or (
        f"{st.get('n_inner')} inner random splits fitting {st.get('inner_train_frac', 0):.3g} "
        "of its cells"
    )


def _shape_text(s) -> str | None:
    """The shape-sense rule of a question that extrapolates along a column (issue 41)."""
    rule = s.settings.get("shape_sense")
    if not rule:
        return None
    return (
        f"shape sense: a fit whose predictions beyond its top training level of "
        f"{rule['column']} move back, on average, by more than {rule['turn_step']:g} of the "
        "median step between its "
        f"training levels' means, when those all move one way, counts as failed, as a wild "
        "fit does (training values and design only)"
    )


def _outer_text(s) -> str:
    o = s.settings.get("outer", {})
    if o.get("protocol") == "random":
        return (
            f"{o.get('n_splits')} random outer splits fitting {o.get('train_frac', 0):.3g} of "
            f"the cells (seed {o.get('seed')})"
        )
    if o.get("rolling_origin"):
        n = s.settings.get("n_outer")
        return (
            f"outer protocol {o.get('protocol')} asked at {n} cut point{'s' if n != 1 else ''} "
            "(a rolling origin: fit below each, score the levels from it on)"
        )
    return f"outer protocol {o.get('protocol')} ({s.settings.get('n_outer')} outer splits)"


def _named(s) -> dict[str, str]:
    """Every form the budget table names (most picked, picked from all cells), with its
    expression, so that no name is printed without what it is."""
    names = [*s.budgets["final_choice"], *s.budgets["most_picked"]]
    return {n: s.forms[n].expression for n in dict.fromkeys(names) if isinstance(n, str)}


def _growth_sentence(g: dict) -> str:
    """How far a growing budget went, and why it stopped there."""
    if g["reached"] > g["first_constants"]:
        return (
            f"The budget grew from {g['first_constants']} to {g['reached']} constants while each "
            f"new budget beat the one before by more than a standard error; it stopped at "
            f"{g['reached']}: {g['stopped']}."
        )
    return (
        f"The budget stayed at {g['first_constants']} constants (it may grow to "
        f"{g['max_constants']} while that pays): {g['stopped']}."
    )


def _ceiling_sentence(c: dict, few: dict | None = None) -> str:
    """The front was still falling at the largest budget: say so, and what to raise (the
    grammar's limits, or, where the nested splits' cells stopped it (``few``: the settings'
    ``too_few_cells``), the runs)."""
    if few and few.get("set_aside") and c["largest_budget"] >= few["min_train"] - 1:
        return (
            f"The front was still falling at its largest budget, {c['largest_budget']} "
            f"constants, the most a form may have to be ranked on splits that fit "
            f"{few['min_train']} cells: the cells, not the grammar, stopped it, and more runs "
            "(more levels along the question's column) would let larger forms be ranked."
        )
    if c.get("stopped") and c["largest_budget"] < c["max_constants"]:
        return (
            f"The front was still falling at its largest budget, {c['largest_budget']} "
            f"constants, where the budget stopped growing: {c['stopped']}."
        )
    now = " or ".join(f"{name} (now {c[name]})" for name in c["raise"])
    return (
        f"The front was still falling at its largest budget, {c['largest_budget']} constants: "
        "that budget beat the one before it by more than a standard error, so a form with more "
        f"constants may predict better still. Raise {now} and search again; the plan line "
        "gives the cost before anything runs."
    )


def _too_few_cells_sentence(s) -> str | None:
    """Issue 41: when the nested splits fit so few cells that most of the grammar could not
    be ranked, say that the pick's size was set by the grid, not chosen by outer error."""
    few = s.settings.get("too_few_cells") or {}
    if not few.get("set_aside"):
        return None
    n_fit = few["min_train"]
    best = s.settings.get("best_budget")
    why = (
        "The pick's size is set by how few cells the splits fit, not chosen by outer error"
        if best is None or best >= n_fit - 1
        else f"The outer errors chose {best} constants, below that ceiling, but the larger "
        "forms were never tried"
    )
    return (
        f"Only forms of fewer than {n_fit} constants could be ranked: the smallest nested "
        f"split fits {n_fit} cells, and {few['set_aside']:,} of the {s.n_generated:,} proposed "
        f"forms have more constants than that (set aside unfitted). {why}; a grid with more "
        "levels along the question's column, or a protocol whose splits fit more cells, can "
        "rank the larger forms."
    )


BAND_MIN_SPLITS = 5  # fewest outer errors whose middle 80% is quoted as a band


def _expected_error_sentence(s, k: int) -> str | None:
    """The outer error read as what it estimates (issue 42): with box-weighted held-out cells,
    the error to expect at new configurations spread across the grid's range; the band is
    the middle 80% of the outer splits' errors at the budget, what one new batch of
    configurations may show (its coverage over grids: benchmarks/bench_search.py)."""
    if s.settings.get("heldout_weights") != "box" or s.choices is None or not len(s.choices):
        return None
    e = s.choices.loc[s.choices["budget"] == k, "outer_pct"].to_numpy(float)
    e = e[np.isfinite(e)]
    if len(e) < BAND_MIN_SPLITS:
        return None
    lo, mid, hi = np.percentile(e, [10, 50, 90])
    fresh = str(s.settings.get("outer_error", "")).startswith("cells and seeds")
    return (
        "Read as an expected error: new configurations spread across the grid's range"
        + (", run at new seed ids," if fresh else "")
        + f" should miss by about {_pct(mid)} on average (held-out cells weighted by their "
        f"share of the grid's box); one new batch may show {_pct(lo)} to {_pct(hi)} (the middle "
        f"80% of the {len(e)} outer splits)."
    )


def _abstention_sentences(s, k: int) -> list[str]:
    """Issue 62: why the search abstains, and the user's forms fitted on all cells."""
    a, b = s.abstention, s.best
    out = ["The search abstains: the runs cannot rank the forms this question needs, so it "
           "picks none."]  # fmt: skip
    if a["unchecked"]:
        out.append(
            f"The runs cannot inform {' or '.join(a['unchecked'])}: "
            + "; ".join(f"for {v}, {text}" for v, text in a["unchecked"].items())
            + ". A split checks a variable when it fits two or more of its values and scores a "
            "cell at a value that at most half of its fitted cells share; without one, how "
            "each candidate's predictions move with it (or that they do not) is fitted and "
            "never scored."
        )
    if isinstance(b["final_choice"], str):
        pick = f"{s.forms[b['final_choice']].expression!r} ({b['final_choice']})"
        out.append(
            f"The procedure's choice from all cells at {k} constants at most, {pick}, is "
            + (a["size"] if a["size"] else "not a law of these runs")
            + "."
        )
    out += [_recommended_sentence(r, a) for r in a["forms"]]
    if not a["forms"]:
        # flag words: advice shown on both faces
        out.append("Give your own form (--form, or references in Python) to have it fitted "
                   "on all cells and recommended.")  # fmt: skip
    return out


def _recommended_sentence(r: dict, a: dict) -> str:
    """One of the user's forms fitted on all cells, recommended or not, with its outer error
    where it could be computed."""
    consts = ", ".join(
        f"{c} = {v:.6g}" if math.isfinite(v) else f"{c} = n/a" for c, v in r["constants"].items()
    )
    head = (
        f"Recommended: your form {r['form']} ({r['expression']})"
        if r["form"] == a["recommended"]
        else f"Your form {r['form']} ({r['expression']})"
    )
    fit = (
        f", fitted on all cells: {consts}; it misses them by {_pct(r['train_mean_pct'])} on "
        "average"
    )
    if r["reasons"]:
        fit += (
            f", but that fit is not well posed ({'; '.join(r['reasons'])}), so it is not "
            "recommended"
        )
    outer = (
        f"outer median {_pct(r['outer_median_pct'])} over the {r['outer_splits']} of "
        f"{a['n_outer']} outer splits where its fit was valid"
        if r["outer_splits"]
        else "no outer split gave it a valid fit "
        + (
            f"(it has {len(r['constants'])} constants; the smallest outer training set fits "
            f"{a['outer_train_cells']} cells)"
            if len(r["constants"]) >= a["outer_train_cells"]
            else "(degenerate or named wild in each)"
        )
        + ", so it has no outer error"
    )
    return f"{head}{fit}; {outer} (no selection: it was given, not chosen)."


def _sentences(s) -> list[str]:
    b = s.best
    k = int(b["max_constants"])
    abstains = bool(getattr(s, "abstention", {}).get("abstains"))
    if abstains:
        out = _abstention_sentences(s, k)
    elif s.chosen is None:
        out = [
            f"No form could be picked from all cells at {k} constants at most: every "
            "candidate's fits failed (degenerate or named wild) in half the final splits or "
            "more, or on all cells."
        ]
    else:
        if s.settings.get("front_testable", True):
            why = (
                "the largest budget on the front: each budget on it has a lower outer error "
                "than the one before by more than a standard error over the outer splits"
            )
        else:
            why = (
                f"the unrestricted budget: with {int(s.settings.get('n_outer', 1))} outer split "
                "the front cannot be tested (a budget joins it by more than a standard error "
                "over outer splits), so no budget is chosen by outer error"
            )
        out = [
            f"At {k} constants at most ({why}), the search picks {s.chosen.expression!r} "
            f"({b['final_choice']}) from all cells; the same form was picked in "
            f"{b['final_choice_share']:.0%} of the outer splits at that budget."
        ]
        lower = [
            r
            for r in s.budgets.to_dict("records")
            if int(r["max_constants"]) != k
            and math.isfinite(float(r["outer_median_pct"]))
            and float(r["outer_median_pct"]) < float(b["outer_median_pct"])
        ]
        if lower:
            out.append(
                "A lower outer median at another budget: "
                + ", ".join(
                    f"{int(r['max_constants'])} constants {_pct(r['outer_median_pct'])}"
                    for r in lower
                )
                + f" (against {_pct(b['outer_median_pct'])} here)"
                + (
                    ", not lower by more than a standard error over the outer splits."
                    if s.settings.get("front_testable", True)
                    else "; one outer split cannot say whether it is lower beyond chance."
                )
            )
    small = _too_few_cells_sentence(s)
    if small:
        out.append(small)
    if s.settings.get("growth"):
        out.append(_growth_sentence(s.settings["growth"]))
    if s.settings.get("front_at_ceiling") and not (abstains and s.abstention["size"]):
        out.append(_ceiling_sentence(s.settings["ceiling"], s.settings.get("too_few_cells")))
    if b["outer_splits"]:
        base = "; ".join(
            f"{r['form']} alone, no selection: {_ratio(r['outer_over_inner'])}"
            for r in s.references.to_dict("records")
        )
        out.append(
            f"That procedure's outer error, over {int(b['outer_splits'])} outer splits, has "
            f"median {_pct(b['outer_median_pct'])}; the forms it picked inside had a median "
            f"inner error of {_pct(b['inner_median_pct'])}: outer / inner "
            f"{_ratio(b['optimism'])}"
            + (
                f" ({base}: the protocol's own ratio, against which selection shows)"
                if base
                else ""
            )
            + ". The budget was put on the front by these outer errors, so this median is "
            "itself slightly optimistic."
        )
        band = _expected_error_sentence(s, k)
        if band:
            out.append(band)
    else:
        out.append("No outer split could pick a form: the procedure has no outer error here.")
    for r in s.references.to_dict("records"):
        out.append(
            f"Against {r['form']} ({r['n_constants']} constants, written by hand; outer median "
            f"{_pct(r['outer_median_pct'])}): the "
            + ("procedure's choice in each outer split" if abstains else "search's pick")
            + f" at {k} constants at most was lower in {r['search_lower']} of "
            f"{r['paired_splits']} outer splits (median ratio "
            f"{_ratio(r['median_ratio'])}; descriptive, not a test: run compare for a verdict)."
        )
    return out


def _budget_values(s) -> list[dict[str, str]]:
    """Each budget's row as the text and markdown tables show it: counts, outer and inner
    errors, optimism, the front, the most picked form and the pick from all cells."""
    out = []
    for r in s.budgets.to_dict("records"):
        name = r["final_choice"]
        out.append(
            {
                "k": f"{r['max_constants']}",
                "n": f"{r['n_candidates']}",
                "median": _pct(r["outer_median_pct"]),
                "p90": _pct(r["outer_p90_pct"]),
                "inner": _pct(r["inner_median_pct"]),
                "optimism": _ratio(r["optimism"]),
                "front": "yes" if r["on_front"] else "",
                "most": f"{r['most_picked']}",
                "share": f"{r['most_picked_share']:.0%}",
                "final": s.forms[name].expression if isinstance(name, str) else "none",
                "final_name": name if isinstance(name, str) else "",
            }
        )
    return out


def _picked(s) -> pd.DataFrame:
    """The forms picked by some outer split, most picked first (then fewest constants)."""
    return s.candidates[s.candidates["picked"] > 0].sort_values(
        ["picked", "n_constants"], ascending=[False, True]
    )


def render_search(s) -> str:
    """The terminal view."""
    st = s.settings
    lines = [
        f"fitrules search: {s.grid_label}",
        f"variables {', '.join(st.get('variables', []))}; objective "
        f"{st.get('objective', '')}; rule {st.get('rule')}",
        f"candidates: {s.n_generated:,} proposed, {len(s.candidates):,} fitted; dropped: "
        + (", ".join(f"{v} {k}" for k, v in s.pruned.items()) or "none"),
    ]
    if st.get("screen"):
        sc = st["screen"]
        lines.append(
            f"staged: {sc['screened']:,} candidates screened on {sc['splits']} inner splits of "
            f"each outer split; {sc['validated']:,} given the full nested fits (the best "
            f"{sc['keep']} of each number of constants in some outer split or the final "
            "choice; each split picks among its own)"
        )
    if st.get("left_out"):
        lines.append(
            "left out of the variables as other outcomes of each run: "
            + ", ".join(f"{c} ({why})" for c, why in st["left_out"].items())
            # flag words: advice shown on both faces
            + "; name one in --variables to search over it"
        )
    shape = _shape_text(s)
    lines += [
        f"protocol: {_outer_text(s)}; inside each, {_inner_text(s)} rank the candidates",
        *([shape] if shape else []),
        "",
        "Outer error of the procedure at each budget (at most k constants):",
        f"{'k':>3} {'forms':>6} {'outer median':>13} {'p90':>9} {'inner median':>13} "
        f"{'optimism':>9} {'front':>6}  picked from all cells; most picked in the outer "
        "splits (share)",
    ]
    lines += [
        f"{v['k']:>3} {v['n']:>6} {v['median']:>13} {v['p90']:>9} {v['inner']:>13} "
        f"{v['optimism']:>9} {v['front']:>6}  {v['final']}"
        + (f" ({v['final_name']})" if v["final_name"] else "")
        # the outer splits' favourite is often another form: named as such, not as the pick's
        + f"; {'the same' if v['most'] == v['final_name'] else v['most']} ({v['share']})"
        for v in _budget_values(s)
    ]
    lines += ["forms named in the table:"]
    lines += [f"  {n} = {e}" for n, e in _named(s).items()]
    lines += ["", "How often each form was picked (unrestricted budget):"]
    picked = _picked(s)
    n_outer = int(st.get("n_outer", 0))
    for r in picked.head(8).to_dict("records"):
        lines.append(
            f"  {r['picked']:>3} of {n_outer}  {r['name']}  outer median "
            f"{_pct(r['outer_median_when_picked_pct'])} over those {r['picked']}  "
            f"{r['expression']}"
        )
    if s.references is not None and len(s.references):
        lines += ["", "Hand-written references on the same outer splits (no selection):"]
        for r in s.references.to_dict("records"):
            lines.append(
                f"  {r['form']:<16} {r['n_constants']} constants  outer median "
                f"{_pct(r['outer_median_pct'])}  p90 {_pct(r['outer_p90_pct'])}"
            )
    lines += [""] + _sentences(s)
    lines += [f"warning: {w}" for w in s.warnings]
    return "\n".join(lines)


def search_dict(s) -> dict:
    return json_ready(
        {
            "grid": s.grid_label,
            "settings": s.settings,
            "n_proposed": s.n_generated,
            "n_fitted": len(s.candidates),
            "dropped": s.pruned,
            "budgets": s.budgets.to_dict("records"),
            "front": [
                {
                    "max_constants": int(r["max_constants"]),
                    "form": r["final_choice"],
                    "expression": s.forms[r["final_choice"]].expression,
                    "outer_median_pct": r["outer_median_pct"],
                }
                for r in s.front.to_dict("records")
                if isinstance(r["final_choice"], str)
            ],
            "references": s.references.to_dict("records"),
            "forms_named": _named(s),
            "picked": s.candidates[s.candidates["picked"] > 0][
                ["name", "expression", "n_constants", "picked"]
            ].to_dict("records"),
            "choices": s.choices.to_dict("records"),
            "warnings": s.warnings,
            "pick_guard": getattr(s, "pick_guard", {}),
            "abstention": getattr(s, "abstention", {}),
            "fitrules": __version__,
        }
    )


def forms_toml(s, prefix: str = "searched") -> str:
    """``forms.toml`` entries for the forms on the front, each saying where it came from."""
    lines = [
        f"# Forms picked by `fitrules search` on {s.grid_label} (rule {s.settings.get('rule')},",
        "# nested validation): one per budget on the front of outer error against constants.",
        "# They were chosen on these cells: a comparison on the same cells is not independent",
        "# of that choice, and `compare` says so.",
    ]
    if getattr(s, "abstention", {}).get("abstains"):  # issue 62
        lines.append("# The search abstained (the runs cannot rank the forms the question needs):")
        lines.append("# these are the procedure's choices at each budget, not a pick.")
    # one entry per form: a form picked at several budgets is named after the smallest
    budgets: dict[str, list[dict]] = {}
    for r in s.front.to_dict("records"):
        if isinstance(r["final_choice"], str):
            budgets.setdefault(r["final_choice"], []).append(r)
    for name, rows in budgets.items():
        f = s.forms[name]
        at = "; ".join(
            f"<= {int(r['max_constants'])} constants ({int(r['n_candidates'])} candidates; the "
            f"procedure's outer median there {_pct(r['outer_median_pct'])} over "
            f"{int(r['outer_splits'])} outer splits)"
            for r in rows
        )
        origin = (
            f"fitrules search on {s.grid_label}: picked from all cells at {at}; "
            "budgets joined the front by their outer errors"
        )
        lines += [
            "",
            f"[{prefix}_k{int(rows[0]['max_constants'])}]",
            f"expr = {json.dumps(f.expression)}",
            f"variables = {json.dumps(list(f.variables or ()))}",
        ]
        if f.bounds:
            inner = ", ".join(f"{k} = [{lo:.12g}, {hi:.12g}]" for k, (lo, hi) in f.bounds.items())
            lines.append(f"bounds = {{ {inner} }}")
            starts = ", ".join(f"{k} = [{lo:.12g}, {hi:.12g}]" for k, (lo, hi) in f.start.items())
            lines.append(f"start = {{ {starts} }}")
        lines.append(f"origin = {json.dumps(origin)}")
    return "\n".join(lines) + "\n"


def plot_front(s, ax=None):
    """Outer error against number of constants: every candidate's own outer median (grey,
    descriptive), the procedure at each budget (with its quartiles over outer splits), the
    front, and the hand-written references."""
    ax = figures._ax(ax)
    c = s.candidates
    rng = np.random.default_rng(0)
    jitter = rng.uniform(-0.18, 0.18, len(c))
    ax.scatter(
        c["n_constants"] + jitter,
        c["own_outer_median_pct"],
        s=6,
        color="0.75",
        label="each candidate alone (descriptive)",
        zorder=1,
    )
    b = s.budgets
    q = s.choices.groupby("budget")["outer_pct"]
    lo, hi = q.quantile(0.25), q.quantile(0.75)
    k = b["max_constants"].to_numpy()
    m = b["outer_median_pct"].to_numpy(float)
    ax.errorbar(
        k,
        m,
        yerr=[m - lo.reindex(k).to_numpy(), hi.reindex(k).to_numpy() - m],
        fmt="o-",
        color="C0",
        capsize=3,
        zorder=3,
        label="search at <= k constants (nested: median, quartiles)",
    )
    f = b[b["on_front"]]
    ax.scatter(
        f["max_constants"],
        f["outer_median_pct"],
        s=90,
        facecolors="none",
        edgecolors="C3",
        linewidths=1.5,
        zorder=4,
        label="front",
    )
    for i, r in enumerate(s.references.to_dict("records")):
        ax.scatter(
            [r["n_constants"]],
            [r["outer_median_pct"]],
            marker="s",
            s=40,
            color=f"C{i + 1}",
            zorder=5,
            label=f"{r['form']} (hand-written)",
        )
    finite = c["own_outer_median_pct"].to_numpy(float)
    finite = finite[np.isfinite(finite)]
    if len(finite):
        top = max(np.nanmax(m) * 3, np.percentile(finite, 75) * 1.5)
        ax.set_ylim(0, top)
    ax.set_xticks(sorted(set(int(v) for v in b["max_constants"])))
    ax.set_xlabel("constants (at most k, for the search)")
    ax.set_ylabel("outer held-out error, median over outer splits (%)")
    # the grid's label (often a path) is in the report and the text, not the title
    figures._title(ax, "Search: outer held-out error against constants")
    figures._legend(ax, fontsize=7)
    return ax


def search_markdown(s, command: str | None) -> str:
    from fitrules.views.markdown import code

    st = s.settings
    lines = [
        f"# fitrules search: {s.grid_label}",
        "",
        *[f"- {x}" for x in _sentences(s)],
        "",
        "| | |",
        "|---|---|",
        f"| command | {code(command or '')} |",
        f"| variables | {', '.join(st.get('variables', []))} |",
        f"| grammar | {code(json.dumps(st.get('grammar')))} |",
        f"| candidates | {s.n_generated:,} proposed, {len(s.candidates):,} fitted |",
        "| dropped before the nested fits | "
        + ("; ".join(f"{k}: {v}" for k, v in s.pruned.items()) or "none")
        + " |",
        f"| outer protocol | {_outer_text(s)} |",
        f"| inner protocol | {_inner_text(s)} |",
        *([f"| shape sense | {shape} |"] if (shape := _shape_text(s)) else []),
        f"| selection rule | {st.get('rule')} |",
        f"| objective | {st.get('objective')} |",
        f"| fitrules | {__version__} |",
        "",
        "## The procedure at each budget",
        "",
        "Outer error: the held-out error ("
        + heldout_definition(st.get("heldout_weights"), "the outer held-out cells")
        + ") "
        "of whatever the inner step picked, per outer split. Inner: the median inner error the "
        "winner was picked by. Optimism: outer median / inner median.",
        "",
        "| at most k constants | candidates | outer median | outer p90 | inner median | "
        "optimism | most picked (share) | picked from all cells | front |",
        "|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    lines += [
        f"| {v['k']} | {v['n']} | {v['median']} | {v['p90']} | {v['inner']} | {v['optimism']} "
        f"| {v['most']} ({v['share']}) | {code(v['final'])} | {v['front']} |"
        for v in _budget_values(s)
    ]
    lines += ["", "Forms named in the table:", ""]
    lines += [f"- {n}: {code(e)}" for n, e in _named(s).items()]
    lines += [
        "",
        "![front](front.png)",
        "",
        "## Forms picked across outer splits",
        "",
        "| picked (at the largest budget) | form | constants | outer median when picked | "
        "expression |",
        "|---:|---|---:|---:|---|",
    ]
    picked = _picked(s)
    for r in picked.to_dict("records"):
        lines.append(
            f"| {r['picked']} of {st.get('n_outer')} | {r['name']} | {r['n_constants']} | "
            f"{_pct(r['outer_median_when_picked_pct'])} over those {r['picked']} | "
            f"{code(r['expression'])} |"
        )
    if len(s.references):
        lines += [
            "",
            "## Hand-written references (no selection)",
            "",
            "| form | constants | outer median | outer p90 | search lower in | "
            "median ratio (search / form) |",
            "|---|---:|---:|---:|---|---:|",
        ]
        for r in s.references.to_dict("records"):
            lines.append(
                f"| {r['form']} {code(r['expression'])} | {r['n_constants']} | "
                f"{_pct(r['outer_median_pct'])} | {_pct(r['outer_p90_pct'])} | "
                f"{r['search_lower']} of {r['paired_splits']} | {_ratio(r['median_ratio'])} |"
            )
        lines += [
            "",
            "The references were written by people who had seen grids like this one; "
            "their outer errors carry no selection by this search, but not none at all.",
        ]
    lines += [
        "",
        "## Forms for compare",
        "",
        "`forms.toml` here holds the front's forms; copy them into a `forms.toml` and run "
        # flag words: advice shown on both faces
        "`fitrules compare --forms ...`, which states that they came from a search.",
        "",
    ]
    lines += [f"- {w}" for w in s.warnings]
    return "\n".join(lines) + "\n"


def write_search_report(s, target: Path, command: str | None = None, force: bool = False) -> Path:
    """``report.md``, ``front.png``, ``forms.toml``, ``results.json``, ``candidates.csv``,
    ``dropped.csv``."""

    def build(d: Path) -> None:
        figures.save(plot_front(s), d / "front.png")
        (d / "report.md").write_text(search_markdown(s, command))
        (d / "forms.toml").write_text(forms_toml(s))
        (d / "results.json").write_text(
            json.dumps(search_dict(s), indent=1, allow_nan=False) + "\n"
        )
        s.candidates.to_csv(d / "candidates.csv", index=False, float_format="%.12g")
        s.dropped.to_csv(d / "dropped.csv", index=False)

    return write_report_dir(target, build, force)


def estimate_text(seconds: float | None) -> str:
    """A duration as people say it: ``45 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def plan_sentence(plan, seconds: float | None, jobs: int) -> str:
    """The line a search prints before its fits: how many, how staged, how long."""
    if not plan.screen_keep:
        fits = f"{plan.fits_per_candidate:,} fits each"
    else:
        fits = (
            f"staged: {plan.screen_fits:,} screening fits each, then "
            f"{plan.fits_per_candidate:,} for the best {plan.screen_keep} of each number "
            f"of constants in each outer split (at most {plan.survivors_max:,})"
        )
    p = f"process{'es' if jobs > 1 else ''}"
    head = "fitrules search" if plan.step is None else (
        f"fitrules search, the front still falling: growing to {plan.step} constants"
    )
    out = (
        f"{head}: {plan.n_generated:,} forms proposed"
        + (f" and {plan.n_references} reference(s)" if plan.n_references else "")
        + f", {plan.n_candidates:,} fittable "
        f"on the fewest cells a split fits; {fits}; estimated {estimate_text(seconds)} on "
        f"{jobs} {p}"
    )
    if plan.growth:
        out += (
            f"; while the front keeps falling, up to {plan.growth[-1][0]} constants: "
            f"{plan.more_candidates:,} more forms, about {estimate_text(plan.more_wall(jobs))} "
            "more"
        )
    return out
