"""fr.search: recovery of a known truth, outer errors and references, the front, staged
searches, limits counted before any fit, a search on a Dask cluster."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from tables import nd_runs
from truth import SMALL, truth_runs

import fitrules as fr
from conftest import EXTERNAL
from fitrules.base.errors import FitrulesError, LimitError
from fitrules.model.forms import Form
from helpers import refused

TRUTHS = [
    ("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.25}, "const + power(H)*linear(omega)"),
    (
        "L0 + a*omega + b*log(H/8)",
        {"L0": 2.15, "a": 0.008, "b": 0.03},
        "const + linear(omega) + log(H)",
    ),
]


@pytest.fixture(scope="module")
def small_search():
    return fr.search(None, **SMALL)


@pytest.fixture(scope="module")
def nd_search():
    """The log-factor search of nd_runs (LOG_ONLY), made once a test process: the tests that
    read it only render it."""
    return fr.search(fr.load_grid(nd_runs(), metric="loss"), references=[], **LOG_ONLY)


CHINCHILLA = EXTERNAL / "chinchilla_epoch_svg_extracted.csv"


LOG_ONLY = dict(terms=2, max_constants=3, factors="log", splits=6, inner_splits=4)


def _lowest_claims(text: str, budgets: pd.DataFrame) -> None:
    """No sentence calls a budget the lowest while another budget's outer median is lower."""
    for m in re.finditer(r"At (\d+) constants at most \(([^)]*)\)", text):
        k, why = int(m.group(1)), m.group(2)
        if "lowest" in why:
            here = float(budgets.set_index("max_constants").loc[k, "outer_median_pct"])
            assert (budgets["outer_median_pct"] >= here).all(), (why, budgets)


def s_markdown(s) -> str:
    from fitrules.views.search import search_markdown

    return search_markdown(s, None)


class Stop(Exception):
    pass


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_recovers_a_known_truth_in_most_grids():
    """Small case of the recovery benchmark (benchmarks/bench_search.py): 10 grids, 5 of each
    truth, the grid's realistic noise (0.5% per run, 3 seeds); the most-picked form across
    outer splits must be the truth in at least 8."""
    hits = []
    for g in range(10):
        expr, consts, key = TRUTHS[g % 2]
        s = fr.search(truth_runs(expr, consts, seed=100 + g), **SMALL, references=[], jobs=2)
        top = s.candidates.sort_values(["picked", "n_constants"], ascending=[False, True]).iloc[0]
        hits.append(top["key"] == key)
    assert sum(hits) >= 8, hits


def test_search_reports_outer_errors_optimism_and_references(small_search):
    """A search reports each budget's outer errors and optimism (outer/inner) and its references."""
    s = small_search
    b = s.budgets
    assert list(b.columns[:3]) == ["max_constants", "n_candidates", "outer_splits"]
    assert b["on_front"].iloc[0]
    assert (b["optimism"] > 0).all()
    assert set(s.references["form"]) == {"composition", "log_additive"}
    assert s.candidates["picked"].sum() == s.settings["n_outer"]
    text = str(s)
    assert "outer / inner" in text and "Against composition" in text
    doc = json.loads(s.to_json())
    assert doc["front"] and doc["n_fitted"] == len(s.candidates)
    # the optimism is the outer median over the inner median of the picks, per budget
    for r in b.to_dict("records"):
        c = s.choices[s.choices["budget"] == r["max_constants"]].dropna(subset=["form"])
        assert r["optimism"] == pytest.approx(c["outer_pct"].median() / c["inner_pct"].median())
    # the references carry the same ratio without selection
    assert s.references["outer_over_inner"].notna().all()


def test_front_forms_go_to_compare_which_names_their_origin(small_search, tmp_path, monkeypatch):
    """Front forms written by forms_toml() run in fr.compare, which says they came from a search."""
    toml = small_search.forms_toml()
    (tmp_path / "forms.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    name = toml.split("[")[1].split("]")[0]
    c = fr.compare(None, forms=["composition", name], splits=20)
    assert any("came from a search" in w for w in c.warnings)
    assert "came from a search" in str(c)


@pytest.mark.slow  # two searches, 6 s of CPU (a loaded machine): CI's slow step runs it
def test_results_do_not_depend_on_jobs():
    """A search with jobs=1 and jobs=2 gives the same budgets and choices."""
    runs = truth_runs("L0 + a*omega + b*log(H/8)", {"L0": 2.1, "a": 0.01, "b": 0.02}, seed=9)
    one = fr.search(runs, **SMALL, jobs=1, references=[])
    two = fr.search(runs, **SMALL, jobs=2, references=[])
    pd.testing.assert_frame_equal(one.budgets, two.budgets)
    pd.testing.assert_frame_equal(one.choices, two.choices)


def test_duplicates_on_the_grid_are_dropped():
    """Candidates equal on the grid's cells, or with a constant of no effect, are pruned."""
    # H at two levels: any one-variable function of H is the same as any other on these cells
    runs = truth_runs("L0 + a*omega + b*log(H/8)", {"L0": 2.1, "a": 0.01, "b": 0.02}, seed=2)
    runs = runs[runs["H"].isin([4, 16])]
    s = fr.search(
        runs,
        terms=1,
        max_constants=3,
        factors="linear,log,power",
        splits=4,
        inner_splits=3,
        references=[],
    )
    assert s.pruned.get("the same function on these cells", 0) >= 1
    assert s.pruned.get("a constant has no effect on the grid's cells", 0) >= 1
    exprs = list(s.candidates["expression"])
    assert "L0 + a1*(H/8)" in exprs and "L0 + a1*log(H/8)" not in exprs


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(variables="nope"), "'nope' is not a column"),
        (dict(split="transfer"), "outer protocol is random"),
        (dict(rule="worst"), "rule 'worst' is unknown"),
        (dict(inner_splits=1), "inner_splits 1"),
        (dict(train_frac=0.15), "every candidate has at least|too few"),
        (dict(references=["nosuchform"]), "unknown form 'nosuchform'"),
        (dict(grammar=3), "give a fitrules.Grammar"),
        (dict(jobs=0), "jobs 0"),
    ],
)
def test_bad_search_input(kwargs, match):
    """fr.search refuses a bad variable, split, rule, split count, reference, grammar or jobs."""
    with pytest.raises(FitrulesError, match=match):
        fr.search(None, **{**SMALL, **kwargs})


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
@pytest.mark.skipif(not CHINCHILLA.exists(), reason="shared/external data not present")
def test_chinchilla_search_finds_the_law_or_better():
    """On Epoch's Chinchilla runs the search picks the Chinchilla law or an outer error as low."""
    g = fr.load_grid(
        CHINCHILLA, derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"], where="loss < 3.42"
    )
    law = Form("chinchilla", "E + A/N**alpha + B/D**beta", ("N", "D"))
    s = fr.search(
        g,
        variables="N,D",
        terms=2,
        max_constants=5,
        factors="power,log",
        objective="log_huber",
        splits=4,
        inner_splits=3,
        references=[law],
        jobs=2,
    )
    ref = s.references.iloc[0]
    top = s.budgets.iloc[-1]
    picked = Counter(s.choices.query("budget == @top.max_constants")["form"])
    law_key = "const + power(D) + power(N)"
    found = any(s.candidates.set_index("name").loc[n, "key"] == law_key for n in picked)
    assert found or top["outer_median_pct"] <= ref["outer_median_pct"]


def test_public_names_and_a_grammar_object():
    """fr.search takes a fr.Grammar, its keyword options replacing the grammar's fields."""
    g = fr.Grammar(terms=1, max_constants=2, factors=("linear", "log"))
    s = fr.search(None, grammar=g, splits=3, inner_splits=2, references=[])
    # the grammar searched: the one given, its default interactions resolved for 2 variables
    assert isinstance(s, fr.Search) and s.grammar == replace(g, interactions=2)
    assert set(s.candidates["n_constants"]) == {2}
    # keyword options replace the object's fields
    t = fr.search(None, grammar=g, terms=2, max_constants=3, splits=3, inner_splits=2,
                  references=[])  # fmt: skip
    assert t.grammar.terms == 2 and t.n_generated > s.n_generated


def test_search_renders_in_a_notebook(small_search):
    """A search's HTML holds its table, the procedure and the chosen expression."""
    page = small_search._repr_html_()
    assert "<table" in page and "The procedure at each budget" in page
    assert small_search.chosen.expression.replace("*", "") in page.replace("*", "")


def test_one_outer_split_says_the_front_cannot_be_tested():
    """With one outer split (extrapolate:N) a search says its front cannot be tested.

    Issue 29: with --split extrapolate:N (one outer split) the front held only the
    2-constant row, and the text called it "the front's lowest outer error" beside lower
    outer errors at 3 and 4 constants."""
    g = fr.load_grid(nd_runs().query("N < 1e9"), metric="loss")  # 4 levels: one cut
    s = fr.search(g, split="extrapolate:N", references=[], **LOG_ONLY)
    assert s.settings["n_outer"] == 1 and s.settings["front_testable"] is False
    text = str(s)
    assert "the front cannot be tested" in text
    assert int(s.best["max_constants"]) == int(s.budgets["max_constants"].max())
    _lowest_claims(text, s.budgets)
    lower = s.budgets[s.budgets["outer_median_pct"] < s.best["outer_median_pct"]]
    if len(lower):
        assert "A lower outer median at another budget" in text


def test_front_text_never_calls_a_budget_lowest_when_another_is_lower(nd_search):
    """The text calls a budget lowest only if no other budget's outer median is lower."""
    s = nd_search
    text = str(s)
    _lowest_claims(text, s.budgets)
    best = float(s.best["outer_median_pct"])
    others = s.budgets[s.budgets["max_constants"] != s.best["max_constants"]]
    if (others["outer_median_pct"] < best).any():
        assert "A lower outer median at another budget" in text


def test_every_form_named_is_printed_with_its_expression(nd_search):
    """Each form a search names has its expression in the text, Markdown, JSON and HTML.

    Issue 29: a table line "(s0005, 100%)" named a form whose expression was printed
    nowhere."""
    s = nd_search
    text, md, html = str(s), s_markdown(s), s._repr_html_()
    named = set(s.budgets["most_picked"].dropna()) | set(s.budgets["final_choice"].dropna())
    payload = json.loads(s.to_json())
    for name in named:
        expr = s.forms[name].expression
        assert f"{name} = {expr}" in text
        assert name in md and expr in md
        assert payload["forms_named"][name] == expr
        assert f"{name} = {expr}" in html.replace("&quot;", '"')


def test_search_points_are_checked_before_any_fit(tmp_path, capsys):
    """A search point missing a variable (--at) or naming a non-variable (at=) is refused first."""
    path = tmp_path / "nd.csv"
    nd_runs().to_csv(path, index=False)
    refused(["search", "--data", path, "--metric", "loss", "--at", "N=1e13"], capsys, tmp_path,
            r"--at 'N=1e\+13': gives no value of D; a point gives every variable")  # fmt: skip
    with pytest.raises(FitrulesError, match="zz is not a variable of the search"):
        fr.search(fr.load_grid(nd_runs(), metric="loss"), at={"N": 1.0, "D": 1.0, "zz": 1.0})


def test_search_on_one_cell_per_level_extrapolates_rather_than_refusing():
    """extrapolate:D over one cell per level of D runs several outer splits instead of refusing."""
    D = 200.0 * 2.0 ** np.arange(12)
    rows = pd.DataFrame({"D": D, "loss": 2.0 + 30.0 / (50.0 + D**0.7)})
    s = fr.search(fr.load_grid(rows, metric="loss"), split="extrapolate:D", references=[],
                  terms=1, max_constants=3, factors="power", splits=3)  # fmt: skip
    assert s.settings["n_outer"] >= 2 and len(s.chosen.constants) >= 2


def test_too_few_levels_to_extrapolate_inside_falls_back_to_random_inner_splits_and_says_so():
    """With 3 levels of N, extrapolate:N uses random inner splits and says why.

    Found by bench_published --search: ParScale's training runs have 3 levels of P."""
    g = fr.load_grid(nd_runs().query("N < 1e8"), metric="loss")  # 3 levels of N
    s = fr.search(g, split="extrapolate:N", references=[], **LOG_ONLY)
    assert s.settings["n_outer"] == 1
    assert "too few levels of N to ask the outer question inside it" in str(s)
    assert "inner random splits" in s.settings["inner_protocol"]


def test_a_staged_search_picks_in_each_outer_split_among_what_its_screen_kept():
    """A staged search (screen=1) picks among its survivors and chooses as the full search does."""
    g = fr.load_grid(nd_runs(), metric="loss")
    full = fr.search(g, references=[], screen=0, **LOG_ONLY)
    staged = fr.search(g, references=[], screen=1, **LOG_ONLY)
    sc = staged.settings["screen"]
    assert full.settings["screen"] is None and sc["keep"] == 1
    assert sc["validated"] < sc["screened"] == len(staged.candidates)
    # those whose training fit is hopeless everywhere are not screened (jobs.search.hopeless)
    assert staged.pruned.get("its training fit is hopeless", 0) == 6 - sc["screened"]
    assert f"staged: {sc['screened']} candidates screened on 2 inner splits" in str(staged)
    # each split picked a form that some screen kept; with one survivor a class, the
    # candidates fitted in full are few, and the rest have no outer error at all
    validated = staged.candidates["outer_valid"] > 0
    assert int(validated.sum()) == sc["validated"]
    assert set(staged.choices["form"].dropna()) <= set(staged.candidates["name"][validated])
    assert staged.chosen.expression == full.chosen.expression


def test_a_prescreen_fits_each_kinds_best_training_fits_alone(monkeypatch):
    """A staged search that prunes prescreens: on each outer training set (and on all cells)
    only the PRESCREEN_KEEP lowest training RMS of each kind (constants, exponents) get inner
    fits there; a candidate outside them everywhere is dropped, with why. Asked about unseen
    levels (no pruning), or searched in full (screen=0), nothing is prescreened."""
    from fitrules.jobs.search import staging

    monkeypatch.setattr(staging, "PRESCREEN_KEEP", 2)
    g = fr.load_grid(nd_runs(), metric="loss")
    grammar = dict(terms=2, max_constants=3, factors="log,power", splits=6, inner_splits=4)
    staged = fr.search(g, references=[], screen=1, **grammar)
    why = "not among the best training fits of its kind"
    assert staged.pruned.get(why, 0) > 0
    kinds = Counter((len(f.constants), len(f.structure.nonlinear))
                    for f in staged.forms.values())  # fmt: skip
    # the forms kept: at most 2 of a kind on each outer training set and on all cells
    picked = staged.choices["form"].dropna()
    assert len(picked) and set(picked) <= set(staged.candidates["name"])
    assert max(kinds.values()) <= 2 * (staged.settings["n_outer"] + 1)
    full = fr.search(g, references=[], screen=0, **grammar)
    assert full.pruned.get(why, 0) == 0 and len(full.candidates) > len(staged.candidates)
    levels = fr.search(g, references=[], screen=1, split="extrapolate:N", **grammar)
    assert levels.pruned.get(why, 0) == 0


def test_screen_is_checked(capsys, tmp_path):
    """screen must be a whole number >= 0; --jobs with --scheduler local:N is refused."""
    g = fr.load_grid(nd_runs(), metric="loss")
    for bad in (-1, 2.5, "25", True):
        with pytest.raises(FitrulesError, match="screen"):
            fr.search(g, references=[], screen=bad, **LOG_ONLY)
    path = tmp_path / "nd.csv"
    nd_runs().to_csv(path, index=False)
    refused(["search", "--data", path, "--metric", "loss", "--screen", "many"], capsys, tmp_path,
            r"--screen 'many': give a whole number >= 0")  # fmt: skip
    refused(["search", "--data", path, "--metric", "loss", "--scheduler", "local:2",
             "--jobs", "2"], capsys, tmp_path, r"--jobs 2 with --scheduler local:2")  # fmt: skip


@pytest.mark.slow
def test_search_on_a_dask_cluster_gives_the_local_result():
    """A search on a local Dask cluster gives the local search's choice, budgets and choices."""
    pytest.importorskip("distributed")
    g = fr.load_grid(nd_runs(), metric="loss")
    local = fr.search(g, references=[], screen=2, **LOG_ONLY)
    remote = fr.search(g, references=[], screen=2, scheduler="local:2", **LOG_ONLY)
    assert remote.chosen.expression == local.chosen.expression
    cols = ["max_constants", "outer_median_pct", "final_choice", "on_front"]
    pd.testing.assert_frame_equal(remote.budgets[cols], local.budgets[cols])
    pd.testing.assert_frame_equal(remote.choices, local.choices)


def test_a_confirmed_search_prints_its_estimate_before_any_fit(grid_csv):
    """With yes=True (--yes) the long search runs; its plan and estimate come first (issue
    31, serious 1: the pilots used to run on every mask before the estimate)."""
    seen = {}

    def on_plan(plan, seconds):
        seen.update(plan=plan, seconds=seconds)
        raise Stop

    with pytest.raises(Stop):
        fr.search(str(grid_csv), splits=100_000, inner_splits=2, yes=True, on_plan=on_plan)
    plan = seen["plan"]
    assert plan.fits_per_candidate == 100_000 * 3 + 4 + 1
    assert seen["seconds"] > 15 * 60
    assert plan.n_candidates == sum(plan.by_nonlinear.values()) > 0


def test_a_growing_grammar_over_the_candidate_cap_raises_before_its_first_step():
    """fr.search raises LimitError, before on_plan and any fit and with yes=True too, when the
    steps a growing budget may take hold more candidates than the cap: from 4 constants up
    to 12 (terms 6, max_nonlinear 3), 767,539 forms in all (issue 61: the cap was checked
    one step at a time, and the first step, 1,380 forms, started)."""

    def on_plan(plan, seconds):
        raise Stop

    for yes in (False, True):
        with pytest.raises(LimitError, match=r"proposes 767,539 candidates up to 12 constants"):
            fr.search(None, variables="H,omega", terms=6, max_constants=12, max_nonlinear=3,
                      yes=yes, on_plan=on_plan)  # fmt: skip


def test_the_unconfirmed_time_limit_holds_for_every_step_the_budget_may_grow_to(monkeypatch):
    """A search whose first step fits in the 15 minutes a search runs unconfirmed, and each
    further step too, but not all of them (the plan line announces them all) raises LimitError
    before any fit, naming the whole estimate and ``yes``; with yes=True it starts (issue 61).
    Each pilot fit is made to cost 0.01 s a mask, and every nested fit counted (no training
    fit hopeless): about 8 min for the first step (3 constants) and 12 min more for the steps
    to 5."""
    from fitrules.jobs.search import plan as planning

    monkeypatch.setattr(planning, "_pilot_seconds", lambda *args, **kwargs: (0.0, 0.01))
    monkeypatch.setattr(planning, "_training_seconds", lambda *args, **kwargs: 0.0)
    monkeypatch.setattr(planning, "HOPELESS_SHARE", 1.0)
    plans = []

    def on_plan(plan, seconds):
        plans.append((plan, seconds))
        raise Stop

    grow = dict(terms=2, first_constants=3, max_constants=5, jobs=1, on_plan=on_plan)
    with pytest.raises(LimitError) as refusal:
        fr.search(None, **grow)
    assert not plans
    why = str(refusal.value)
    assert re.search(r"growing up to 5 constants .* would take about (19|20) min", why), why
    assert "more than the 15 min 00 s a search runs unconfirmed" in why and "pass yes" in why
    with pytest.raises(Stop):
        fr.search(None, **grow, yes=True)
    (plan, seconds), = plans
    assert seconds < 15 * 60 and all(t < 15 * 60 for _, _, t in plan.growth)
    assert seconds + plan.more_wall(1) > 15 * 60


def test_limit_error_is_a_documented_error():
    """LimitError is a FitrulesError."""
    assert issubclass(LimitError, fr.FitrulesError)


def test_a_budget_without_a_final_choice_renders(grid_csv):
    """A search with a budget that has no final choice (NaN) renders as text, JSON, TOML and HTML.

    Audit case: ``search --objective abs_ls`` on losses that change sign raised
    ``KeyError: nan`` in render_search (issue 31, major): a budget with no final choice next
    to one with a choice holds NaN once pandas mixes None with names."""
    # power and linear factors: two budgets (2 and 3 constants) at a third of the default's cost
    s = fr.search(str(grid_csv), terms=1, max_constants=3, factors="power,linear", splits=3,
                  inner_splits=2, references=[])  # fmt: skip
    budgets = s.budgets.to_dict("records")
    assert len(budgets) >= 2
    budgets[0]["final_choice"] = None
    s.budgets = pd.DataFrame(budgets)  # pandas turns the None into NaN here
    assert not isinstance(s.budgets["final_choice"].iloc[0], str)
    text = str(s)
    assert "none" in text
    s.to_json()
    s.forms_toml()
    s._repr_html_()


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_a_grid_too_small_to_rank_larger_forms_says_so():
    """Issue 41, a protocol for small grids: the over-training grid's 5 training runs, asked
    to extrapolate along N, leave nested splits of 3 cells, so only forms of 2 constants can
    be ranked; the output says that the pick's size was set by the grid, not chosen."""
    import pandas as pd

    N = np.array([1.06e7, 1.06e7, 7.9e7, 1.54e8, 4.12e8])
    M = np.array([20.0, 320.0, 20.0, 20.0, 20.0])
    loss = 1.9 + 80 * N**-0.25 + 60 * (M * N) ** -0.25
    grid = fr.load_grid(pd.DataFrame({"N": N, "M": M, "loss": loss}), metric="loss")
    s = fr.search(grid, split="extrapolate:N", references=[], jobs=1, terms=2)
    text = s.text()
    assert "Only forms of fewer than 3 constants could be ranked" in text, text
    assert set(s.candidates["n_constants"]) == {2}
    # an extrapolation states the shape-sense rule (fitrules.engine.guard.turns_back)
    assert "shape sense: a fit whose predictions beyond its top training level of N" in text
    # a grid whose splits fit enough cells, asked a random split, says neither
    big = fr.search(None, terms=1, max_constants=3, splits=3, inner_splits=2, references=[])
    assert "could be ranked" not in big.text() and "shape sense" not in big.text()


def test_a_search_asks_an_extrapolation_in_several_columns_inside_as_outside():
    """Found by bench_published --search: the data-constrained grid's held-out runs lie
    beyond the training runs in N or in D; asked along N alone, the search picked a form in
    U that the runs beyond in D refute (held-out R^2 0.30; asked along N and D, 0.88)."""
    g = fr.load_grid(nd_runs(), metric="loss")
    s = fr.search(g, split="extrapolate:N,D", references=[], **LOG_ONLY)
    assert s.settings["outer"]["protocol"] == "extrapolate:N,D"
    assert "inner rolling origin along N and D" in s.settings["inner_protocol"]
    assert s.settings["n_outer"] == 1  # 4 levels of D: one cut keeps 3 below it
    assert "asked at 1 cut point" in str(s)
    assert set(s.chosen.variables) == {"N", "D"}  # asked beyond in both, it reads both


def test_the_budget_table_names_the_pick_and_the_outer_splits_favourite_apart(nd_search):
    """Seen on the vocabulary grid: the row showed the pick from all cells beside another
    form's name and share, read as the pick's own."""
    s = nd_search
    text = str(s)
    assert "picked from all cells; most picked in the outer splits (share)" in text
    for r in s.budgets.to_dict("records"):
        final, most = r["final_choice"], r["most_picked"]
        shown = "the same" if most == final else most
        assert (f"{s.forms[final].expression} ({final}); {shown} "
                f"({r['most_picked_share']:.0%})") in text  # fmt: skip


@pytest.mark.slow  # a search, 9 s of CPU (a loaded machine): CI's slow step runs it
def test_search_draws_a_progress_bar_counting_candidates_when_asked(capsys):
    """Issue 44, item 6: fr.search had no progress= (fr.compare had): a four-minute search
    showed nothing in a notebook. progress=True draws a bar in candidates on stderr (the
    default in a notebook), progress=False or the caller's on_progress draws none."""
    g = fr.load_example("main", where="lr == 3e-4")
    small = dict(terms=1, max_constants=3, splits=3, inner_splits=2, references=[], jobs=1)
    fr.search(g, **small, progress=True)
    err = capsys.readouterr().err
    assert "searching:" in err and " fits [" in err
    fr.search(g, **small, progress=False)
    assert capsys.readouterr().err == ""
    seen: list[int] = []
    fr.search(g, **small, progress=True, on_progress=seen.append)
    assert capsys.readouterr().err == "" and sum(seen) > 0
    with pytest.raises(fr.FitrulesError, match="progress"):
        fr.search(g, **small, progress="yes")


@pytest.mark.slow  # a staged search, 5 s of CPU (a loaded machine): CI's slow step runs it
def test_a_staged_search_reports_its_survivors_and_its_bar_counts_fits_to_the_end(capsys):
    """Issue 44, item 6: a staged search's survivors' full fits reported no progress, so a
    bar in candidates reached its end early and its ETA said 35 s with 156 s to go. The
    survivors are reported now, and the bar counts the plan's fits, each phase at its cost,
    ending at its total."""
    g = fr.load_example("main", where="lr == 3e-4")
    small = dict(terms=1, max_constants=3, splits=3, inner_splits=2, references=[], jobs=1,
                 screen=1)  # fmt: skip
    seen: list[int] = []
    plans: list = []
    s = fr.search(g, **small, on_progress=seen.append, on_plan=lambda p, t: plans.append(p))
    note = s.settings["screen"]
    assert note and note["validated"] > 0
    assert sum(seen) == 2 * plans[0].n_candidates + note["validated"]
    fr.search(g, **small, progress=True)
    err = capsys.readouterr().err
    done, total = re.findall(r"(\d+)/(\d+) fits", err)[-1]
    assert done == total and int(total) > 3 * plans[0].n_candidates
