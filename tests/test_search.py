"""fitrules search: the grammar, pruning, nested validation, recovery of a known truth."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import EXTERNAL
from fitrules.base.errors import FitrulesError, FormError
from fitrules.cli import main
from fitrules.engine.fit import Objective
from fitrules.engine.grammar import (
    Grammar,
    VariableInfo,
    generate,
    load_grammar,
    structural_rank_ok,
)
from fitrules.engine.guard import GuardOptions
from fitrules.engine.truth import runs_from_form
from fitrules.jobs.search import SEARCH_FIT_OPTIONS, front_flags, nested_masks, score_form, select
from fitrules.model.forms import Form
from fitrules.model.splits import RandomSplit

H = (1, 4, 16, 64)
OMEGA = (0.0, 1.0, 3.0, 7.0, 15.0)
SMALL = dict(terms=2, max_constants=3, factors="power,linear,log", splits=6, inner_splits=5)


def truth_runs(expr: str, constants: dict, seed: int, cv: float = 0.005) -> pd.DataFrame:
    form = Form("truth", expr, ("H", "omega"))
    return runs_from_form(form, constants, {"H": H, "omega": OMEGA}, seeds=3, cv=cv, seed=seed)


# ------------------------------------------------------------------------------ grammar
def test_grammar_counts_constants_and_orders_simplest_first():
    cands = generate(
        Grammar(terms=2, max_constants=4), {"H": np.array(H, float), "omega": np.array(OMEGA)}
    )
    assert cands, "no candidates"
    k = [c.n_constants for c in cands]
    assert k == sorted(k) and max(k) <= 4
    for c in cands:  # the count the grammar claims is the form's own count
        assert len(c.form.constants) == c.n_constants
        assert len(c.form.structure.nonlinear) == c.n_nonlinear
    exprs = [c.expression for c in cands]
    assert len(set(exprs)) == len(exprs)
    # omega has zeros: no inverse, log(1 + omega); H is positive: scaled by a power of 2
    assert not any("/omega" in e for e in exprs)
    assert "L0 + a1*log(1 + omega)" in exprs and "L0 + a1*log(H/8)" in exprs
    assert "L0 + a1*(H/8)**e1*omega" in exprs  # the composition rule's family


def test_references_of_variables():
    assert VariableInfo.of("H", np.array(H, float)).reference == 8  # powers of 2
    assert VariableInfo.of("N", np.array([4e8, 1e9, 7e9])).reference == 1e9
    v = VariableInfo.of("x", np.array([-1.0, 2.0]))
    assert v.allows("linear") and not v.allows("log") and not v.allows("power")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(terms=0), "terms 0"),
        (dict(max_constants=99), "max-constants 99"),
        (dict(max_nonlinear=True), "max-nonlinear True"),
        (dict(factors=("power", "cubic")), "allowed kinds"),
        (dict(factors=()), "allowed kinds"),
        (dict(variables="H"), "list of names"),
        (dict(variables=()), "at least one"),
    ],
)
def test_bad_grammar_is_refused(kwargs, match):
    with pytest.raises(FormError, match=match):
        Grammar(**kwargs)


def test_grammar_file(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text('terms = 2\nfactors = ["power", "log"]\n')
    g = load_grammar(p, max_constants=4)
    assert (g.terms, g.factors, g.max_constants) == (2, ("power", "log"), 4)
    p.write_text("terms = 2\ncolour = 1\n")
    with pytest.raises(FormError, match="unknown key.*colour"):
        load_grammar(p)
    p.write_text("terms = [\n")
    with pytest.raises(FormError, match="not valid TOML"):
        load_grammar(p)
    with pytest.raises(FormError, match="cannot be read"):
        load_grammar(tmp_path / "missing.toml")


def test_structural_rank_finds_constants_without_effect():
    rng = np.random.default_rng(0)
    two = {"H": np.array([1.0, 1.0, 4.0, 4.0])}
    f = Form("f", "L0 + a1*(H/2)**e1", ("H",), bounds={"e1": (-3, 3)}, start={"e1": (-3, 3)})
    assert not structural_rank_ok(f, two, rng)  # two levels: a1 and e1 trade off
    four = {"H": np.array([1.0, 2.0, 4.0, 8.0])}
    assert structural_rank_ok(f, four, rng)


# ------------------------------------------------------------------------------ selection
def test_twin_index_finds_the_same_first_twin_as_a_full_scan():
    from fitrules.engine.grammar import TwinIndex

    rng = np.random.default_rng(3)
    rtol = 1e-6
    base = 1 + 0.01 * rng.standard_normal((100, 40))
    prints = []
    for _ in range(1200):  # twins within rtol, near misses just past it, and new functions
        kind = rng.integers(3)
        if kind == 2 or not prints:
            prints.append(1 + 0.01 * rng.standard_normal(40))
        else:
            src = prints[rng.integers(len(prints))]
            step = rtol * (0.999 if kind == 0 else 1.01)
            shift = np.where(rng.random(40) < 0.5, step, -step) * (rng.random(40) < 0.3)
            prints.append(src + shift)
    prints += list(base)
    index, kept = TwinIndex(rtol), []
    for fp in prints:
        full = np.flatnonzero((np.abs(np.array(kept) - fp) <= rtol).all(axis=1)) if kept else []
        expected = int(full[0]) if len(full) else None
        assert index.twin(fp) == expected
        if expected is None:
            kept.append(fp)
            index.add(fp)
    assert 0 < len(index) < len(prints)


def test_one_se_rule_prefers_fewer_constants_within_noise():
    rng = np.random.default_rng(1)
    base = 1 + 0.1 * rng.standard_normal(10)
    # 2 constants: 1% worse on average, with split-to-split scatter far larger than that
    close = base * np.exp(0.01 + 0.1 * rng.standard_normal(10))
    inner = np.vstack([close, base, base * 1.5])  # 2, 4 and 3 constants
    k = np.array([2, 4, 3])
    every = np.ones(3, bool)
    assert select(inner, k, every, 12, 4, "best")[0] == int(np.argmin(np.median(inner, axis=1)))
    assert select(inner, k, every, 12, 4, "one-se")[0] == 0
    failed = inner.copy()
    failed[0, :6] = np.nan  # fails in more than half its splits: cannot be picked
    assert select(failed, k, every, 12, 4, "one-se")[0] == 1
    assert select(inner, k, np.zeros(3, bool), 12, 4)[0] == -1


def test_one_se_uses_the_corrected_standard_error():
    """A cheaper form whose mean paired log difference to the best lies between the naive
    standard error (1/J) and the corrected one (1/J + n_test/n_train) is picked; one beyond
    the corrected one is not."""
    rng = np.random.default_rng(3)
    J = 10
    best = np.exp(rng.normal(0, 0.1, J))
    noise = rng.normal(0, 1, J)
    noise = (noise - noise.mean()) / noise.std(ddof=1)  # mean 0, sd 1 exactly
    sd = 0.1
    naive = sd * np.sqrt(1 / J)
    corrected = sd * np.sqrt(1 / J + 4 / 12)
    between = best * np.exp((naive + corrected) / 2 + sd * noise)
    beyond = best * np.exp(1.5 * corrected + sd * noise)
    k = np.array([4, 2])
    every = np.ones(2, bool)
    assert select(np.vstack([best, between]), k, every, 12, 4)[0] == 1
    assert select(np.vstack([best, beyond]), k, every, 12, 4)[0] == 0


def test_front_needs_more_than_one_standard_error():
    rng = np.random.default_rng(5)
    base = np.exp(rng.normal(0, 0.2, 20))
    clear = base * 0.5 * np.exp(rng.normal(0, 0.05, 20))
    noise = rng.normal(0, 1, 20)
    same = clear * np.exp(-0.01 + 0.2 * (noise - noise.mean()))  # lower median, within noise
    flags = front_flags(np.vstack([base, clear, same]), 16, 4)
    assert flags == [True, True, False]
    assert front_flags(np.vstack([np.full(20, np.nan), base]), 16, 4) == [False, True]


def test_the_outer_error_is_the_picks_own_error():
    """Each outer split's outer error is that of the form picked there, fitted on the outer
    training cells alone (checked against an independent fit)."""
    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = fr.search(runs, **SMALL, references=[], seeds="cells")
    assert s.settings["outer_error"].startswith("cells:")
    grid = fr.load_grid(runs)
    cells = grid.cells(["H", "omega"], True)
    masks = nested_masks(RandomSplit(6, 0.8, 0), cells.table, 5, 0.75, 0)
    top = s.budgets["max_constants"].max()
    picks = s.choices[s.choices["budget"] == top].reset_index(drop=True)
    outer = {
        name: score_form(f.bind(grid.columns, grid.runs), cells.X, cells.y, masks, Objective(),
                         SEARCH_FIT_OPTIONS, GuardOptions(), rows=masks.outer).error
        for name, f in s.forms.items()
    }  # fmt: skip
    for o in range(6):
        assert outer[picks.loc[o, "form"]][o] == pytest.approx(picks.loc[o, "outer_pct"], rel=1e-9)
    # the pick is not the form that did best on the held-out cells (which would be a leak)
    best = np.nanmin(np.array(list(outer.values())), axis=0)
    assert (best < picks["outer_pct"].to_numpy() - 1e-9).any()


def test_nested_masks_stay_inside_outer_training_sets():
    table = pd.DataFrame({"x": np.arange(20.0)})
    m = nested_masks(RandomSplit(5, 0.8, 3), table, 4, 0.75, 3)
    outer = m.train[m.outer]
    inner_train = m.train[m.inner].reshape(5, 4, -1)
    inner_test = m.test[m.inner].reshape(5, 4, -1)
    for o in range(5):
        assert not (inner_train[o] & ~outer[o]).any()
        assert not (inner_test[o] & ~outer[o]).any()
        assert ((inner_train[o] | inner_test[o]) == outer[o]).all()
    again = nested_masks(RandomSplit(5, 0.8, 3), table, 4, 0.75, 3)
    assert (again.train == m.train).all()


def test_the_pick_never_reads_the_outer_held_out_values():
    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = fr.search(runs, **SMALL, references=[])
    outer = RandomSplit(6, 0.8, 0).masks(20)
    cells = fr.load_grid(runs).cells(["H", "omega"], True).table
    held = ~outer[0]
    # scramble the values of outer split 0's held-out cells
    key = cells.loc[held, ["H", "omega"]].apply(tuple, axis=1)
    changed = runs.copy()
    hit = changed[["H", "omega"]].apply(tuple, axis=1).isin(set(key))
    changed.loc[hit, "loss"] *= 1.3
    t = fr.search(changed, **SMALL, references=[])
    top = s.budgets["max_constants"].max()
    pick = s.choices[s.choices["budget"] == top].iloc[0]
    pick2 = t.choices[t.choices["budget"] == top].iloc[0]
    assert pick["form"] == pick2["form"] and pick["inner_pct"] == pick2["inner_pct"]
    assert pick["outer_pct"] != pick2["outer_pct"]  # the outer error does read them


# ------------------------------------------------------------------------------ recovery
TRUTHS = [
    ("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.25}, "const + power(H)*linear(omega)"),
    (
        "L0 + a*omega + b*log(H/8)",
        {"L0": 2.15, "a": 0.008, "b": 0.03},
        "const + linear(omega) + log(H)",
    ),
]


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


# ------------------------------------------------------------------------------ the result
@pytest.fixture(scope="module")
def small_search():
    return fr.search(None, **SMALL)


def test_search_reports_outer_errors_optimism_and_references(small_search):
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
    toml = small_search.forms_toml()
    (tmp_path / "forms.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    name = toml.split("[")[1].split("]")[0]
    c = fr.compare(None, forms=["composition", name], splits=20)
    assert any("came from a search" in w for w in c.warnings)
    assert "came from a search" in str(c)


def test_results_do_not_depend_on_jobs():
    runs = truth_runs("L0 + a*omega + b*log(H/8)", {"L0": 2.1, "a": 0.01, "b": 0.02}, seed=9)
    one = fr.search(runs, **SMALL, jobs=1, references=[])
    two = fr.search(runs, **SMALL, jobs=2, references=[])
    pd.testing.assert_frame_equal(one.budgets, two.budgets)
    pd.testing.assert_frame_equal(one.choices, two.choices)


def test_duplicates_on_the_grid_are_dropped():
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
    with pytest.raises(FitrulesError, match=match):
        fr.search(None, **{**SMALL, **kwargs})


# ------------------------------------------------------------------------------ command line
def test_cli_search_writes_report_and_forms(tmp_path, capsys):
    out = tmp_path / "r"
    forms = tmp_path / "found.toml"
    code = main(
        [
            "search",
            "--terms",
            "2",
            "--max-constants",
            "3",
            "--factors",
            "power,linear",
            "--splits",
            "4",
            "--inner-splits",
            "3",
            "--jobs",
            "1",
            "--report",
            str(out),
            "--forms-out",
            str(forms),
        ]
    )
    assert code == 0
    printed = capsys.readouterr()
    assert "estimated" in printed.err and "outer / inner" in printed.out
    assert {"report.md", "front.png", "forms.toml", "results.json", "candidates.csv"} <= {
        p.name for p in out.iterdir()
    }
    assert forms.read_text() == (out / "forms.toml").read_text()
    assert "origin =" in forms.read_text()


def test_cli_search_progress_bar_starts_after_the_plan_line(capsys):
    # a bar opened before the plan was printed left a stray "searching: 0it" line above it
    code = main(["search", "--terms", "1", "--max-constants", "3", "--factors", "power",
                 "--splits", "2", "--inner-splits", "2", "--jobs", "1", "--progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0
    plan = err.index("fitrules search:")
    assert "searching" in err[plan:] and "searching" not in err[:plan], err
    assert "0it" not in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--terms", "0"], "terms 0"),
        (["--variables", "H,nope"], "'nope' is not a column"),
        (["--factors", "cubic"], "allowed kinds"),
        (["--split", "leave-one-level-out:nope"], "nope"),
        (["--grammar", "missing.toml"], "cannot be read"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(argv, match, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "search",
            *argv,
            "--splits",
            "3",
            "--inner-splits",
            "2",
            "--jobs",
            "1",
            "--forms-out",
            "f.toml",
            "--report",
            "r",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert __import__("re").search(match, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ real data
CHINCHILLA = EXTERNAL / "chinchilla_epoch_svg_extracted.csv"


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
@pytest.mark.skipif(not CHINCHILLA.exists(), reason="shared/external data not present")
def test_chinchilla_search_finds_the_law_or_better():
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
    g = fr.Grammar(terms=1, max_constants=2, factors=("linear", "log"))
    s = fr.search(None, grammar=g, splits=3, inner_splits=2, references=[])
    assert isinstance(s, fr.Search) and s.grammar == g
    assert set(s.candidates["n_constants"]) == {2}
    # keyword options replace the object's fields
    t = fr.search(None, grammar=g, terms=2, max_constants=3, splits=3, inner_splits=2,
                  references=[])  # fmt: skip
    assert t.grammar.terms == 2 and t.n_generated > s.n_generated


def test_search_renders_in_a_notebook(small_search):
    page = small_search._repr_html_()
    assert "<table" in page and "The procedure at each budget" in page
    assert small_search.chosen.expression.replace("*", "") in page.replace("*", "")


def test_the_outer_error_holds_out_seed_ids_by_default():
    """Issue 28: the outer error held out cells only, so the grid's seed offset (which new
    runs at new seed ids show) was missing from it. By default outer split o now fits the
    runs outside seed fold o mod 3 and scores the fold's runs (checked against an
    independent fit), rescaled by one factor for the mean of 3 new runs at fresh ids."""
    from fitrules.jobs.search import _score

    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = fr.search(runs, **SMALL, references=[])
    assert s.settings["outer_error"].startswith("cells and seeds: the seed ids in 3 folds")
    grid = fr.load_grid(runs)
    cells = grid.cells(["H", "omega"], True)
    masks = nested_masks(RandomSplit(6, 0.8, 0), cells.table, 5, 0.75, 0)
    from fitrules.jobs.search import _seed_holdout

    held, _ = _seed_holdout(grid, cells, masks, Objective(), "cells-and-seeds", 0)
    top = s.budgets["max_constants"].max()
    picks = s.choices[s.choices["budget"] == top].reset_index(drop=True)
    state = dict(X=cells.X, y=cells.y, masks=masks, objective=Objective(),
                 options=SEARCH_FIT_OPTIONS, guard=GuardOptions(), seeds=held)  # fmt: skip
    for o in range(6):
        f = s.forms[picks.loc[o, "form"]].bind(grid.columns, grid.runs)
        mine = _score(f, state, stop=masks.inner.stop).error[o]
        assert mine == pytest.approx(picks.loc[o, "outer_pct"], rel=1e-9)
        # the fold's runs, not the cells' means, were scored: the raw error differs
        raw = score_form(f, cells.X, held["folds"][o % 3]["y_fit"], masks, Objective(),
                         SEARCH_FIT_OPTIONS, GuardOptions(), rows=np.array([o]),
                         y_test=held["folds"][o % 3]["y_test"]).error[0]  # fmt: skip
        assert raw != pytest.approx(mine, rel=1e-6)
    with pytest.raises(FitrulesError, match="seeds .bogus. is unknown"):
        fr.search(runs, **SMALL, references=[], seeds="bogus")
