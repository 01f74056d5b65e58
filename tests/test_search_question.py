"""A search that answers the question asked (issue 29): the front's text, the guard on the
pick, and every form it names printed with its expression."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import FitrulesError
from fitrules.jobs.search import nested_masks
from fitrules.model.splits import LeaveOneLevelOut, RollingOrigin
from tests.helpers import refused, run


def _nd_runs() -> pd.DataFrame:
    """A 5 x 4 grid of N x D from a Chinchilla-like law, 0.3% noise, no seeds."""
    rng = np.random.default_rng(29)
    rows = []
    for N in (1e7, 3e7, 1e8, 3e8, 1e9):
        for D in (1e9, 3e9, 1e10, 3e10):
            loss = 1.8 + 400 * N**-0.34 + 900 * D**-0.28
            rows.append({"N": N, "D": D, "loss": loss * (1 + 0.003 * rng.standard_normal())})
    return pd.DataFrame(rows)


LOG_ONLY = dict(terms=2, max_constants=3, factors="log", splits=6, inner_splits=4)


def _lowest_claims(text: str, budgets: pd.DataFrame) -> None:
    """No sentence calls a budget the lowest while another budget's outer median is lower."""
    for m in re.finditer(r"At (\d+) constants at most \(([^)]*)\)", text):
        k, why = int(m.group(1)), m.group(2)
        if "lowest" in why:
            here = float(budgets.set_index("max_constants").loc[k, "outer_median_pct"])
            assert (budgets["outer_median_pct"] >= here).all(), (why, budgets)


def test_one_outer_split_says_the_front_cannot_be_tested():
    """Issue 29: with --split extrapolate:N (one outer split) the front held only the
    2-constant row, and the text called it "the front's lowest outer error" beside lower
    outer errors at 3 and 4 constants."""
    g = fr.load_grid(_nd_runs().query("N < 1e9"), metric="loss")  # 4 levels: one cut
    s = fr.search(g, split="extrapolate:N", references=[], **LOG_ONLY)
    assert s.settings["n_outer"] == 1 and s.settings["front_testable"] is False
    text = str(s)
    assert "the front cannot be tested" in text
    assert int(s.best["max_constants"]) == int(s.budgets["max_constants"].max())
    _lowest_claims(text, s.budgets)
    lower = s.budgets[s.budgets["outer_median_pct"] < s.best["outer_median_pct"]]
    if len(lower):
        assert "A lower outer median at another budget" in text


def test_front_text_never_calls_a_budget_lowest_when_another_is_lower():
    g = fr.load_grid(_nd_runs(), metric="loss")
    s = fr.search(g, references=[], **LOG_ONLY)
    text = str(s)
    _lowest_claims(text, s.budgets)
    best = float(s.best["outer_median_pct"])
    others = s.budgets[s.budgets["max_constants"] != s.best["max_constants"]]
    if (others["outer_median_pct"] < best).any():
        assert "A lower outer median at another budget" in text


def test_every_form_named_is_printed_with_its_expression():
    """Issue 29: a table line "(s0005, 100%)" named a form whose expression was printed
    nowhere."""
    g = fr.load_grid(_nd_runs(), metric="loss")
    s = fr.search(g, references=[], **LOG_ONLY)
    text, md, html = str(s), s_markdown(s), s._repr_html_()
    named = set(s.budgets["most_picked"].dropna()) | set(s.budgets["final_choice"].dropna())
    payload = json.loads(s.to_json())
    for name in named:
        expr = s.forms[name].expression
        assert f"{name} = {expr}" in text
        assert name in md and expr in md
        assert payload["forms_named"][name] == expr
        assert f"{name} = {expr}" in html.replace("&quot;", '"')


def s_markdown(s) -> str:
    from fitrules.views.search import search_markdown

    return search_markdown(s, None)


def test_a_pick_the_guard_names_is_shown_with_its_warning(tmp_path, capsys):
    """Issue 29: the pick's extrapolation was called wild by compare and by nothing in the
    search. Log forms fitted on N <= 1e9 run away by N = 1e13."""
    path = tmp_path / "nd.csv"
    _nd_runs().to_csv(path, index=False)
    argv = ["search", "--data", path, "--metric", "loss", "--terms", "2",
            "--max-constants", "3", "--factors", "log", "--splits", "6", "--inner-splits", "4",
            "--reference", "none"]  # fmt: skip
    code, out, err = run([*argv, "--at", "N=1e13,D=1e9"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("warning: the pick"))
    assert "named wild by the extrapolation guard" in line and "--at N=1e+13,D=1e+09" in line
    code, out, err = run(argv, capsys)  # no point beyond the grid: nothing to name
    assert code == 0, err and "warning: the pick" not in out


def test_search_points_are_checked_before_any_fit(tmp_path, capsys):
    path = tmp_path / "nd.csv"
    _nd_runs().to_csv(path, index=False)
    refused(["search", "--data", path, "--metric", "loss", "--at", "N=1e13"], capsys, tmp_path,
            r"--at 'N=1e\+13': gives no value of D; a point gives every variable")  # fmt: skip
    with pytest.raises(FitrulesError, match="zz is not a variable of the search"):
        fr.search(fr.load_grid(_nd_runs(), metric="loss"), at={"N": 1.0, "D": 1.0, "zz": 1.0})


# ------------------------------------------------------------------ the question asked
def _table(levels=(1, 2, 4, 8, 16, 32), other=(0.0, 1.0)) -> pd.DataFrame:
    return pd.DataFrame([(a, b) for a in levels for b in other], columns=["N", "x"])


def test_rolling_origin_asks_the_extrapolation_at_several_cuts_with_its_horizon():
    t = _table()
    top = RollingOrigin("N")  # the top level held out: horizon 1
    assert top.labels(t) == ["fit N < 32, score N 32", "fit N < 16, score N 16",
                             "fit N < 8, score N 8"]  # fmt: skip
    tr, te = top.masks_for(t), top.tests_for(t)
    assert (tr.sum(axis=1) == [10, 8, 6]).all() and (te.sum(axis=1) == 2).all()
    cut = RollingOrigin("N", threshold=16)  # two levels held out: horizon 2
    assert cut.labels(t)[:2] == ["fit N < 16, score N 16 to 32", "fit N < 8, score N 8 to 16"]
    assert RollingOrigin("N", origins=5).masks_for(t).shape[0] == 3  # 3 levels below each cut


def test_inner_splits_extrapolate_inside_each_outer_training_set():
    t = _table()
    m = nested_masks(RollingOrigin("N"), t, inner_splits=10, inner_train_frac=0.75, seed=0)
    N = t["N"].to_numpy()
    for tr, te in zip(m.train, m.test, strict=True):
        if tr.all():
            continue  # the fit on every cell
        assert te.any() and N[te].min() > N[tr].max()  # every split scores above its fit
    inner = m.train[m.inner]
    outer_of = np.repeat(np.arange(m.n_outer), m.n_inner)
    assert all(not (inner[i] & ~m.train[o]).any() for i, o in enumerate(outer_of))


def test_inner_extrapolation_cuts_fit_at_least_half_the_training_levels():
    """Found by bench_published --search: on sft_rectified_lin (one cell per level of D, 12
    levels) the inner cuts reached down to a fit on 2 cells, and the search refused the grid."""
    t = pd.DataFrame({"D": 2.0 ** np.arange(12)})
    m = nested_masks(RollingOrigin("D"), t, inner_splits=20, inner_train_frac=0.75, seed=0)
    inner, outer_of = m.train[m.inner], np.repeat(np.arange(m.n_outer), m.n_inner)
    for tr, o in zip(inner, outer_of, strict=True):
        assert 2 * tr.sum() >= m.train[o].sum()
    assert m.n_inner >= 3 and m.min_train >= 5


def test_search_on_one_cell_per_level_extrapolates_rather_than_refusing():
    D = 200.0 * 2.0 ** np.arange(12)
    rows = pd.DataFrame({"D": D, "loss": 2.0 + 30.0 / (50.0 + D**0.7)})
    s = fr.search(fr.load_grid(rows, metric="loss"), split="extrapolate:D", references=[],
                  terms=1, max_constants=3, factors="power", splits=3)  # fmt: skip
    assert s.settings["n_outer"] >= 2 and len(s.chosen.constants) >= 2


def test_leave_one_level_out_inside_each_training_set():
    t = _table()
    m = nested_masks(LeaveOneLevelOut("N"), t, inner_splits=3, inner_train_frac=0.75, seed=0)
    N = t["N"].to_numpy()
    assert m.n_outer == 6 and m.n_inner == 3
    for tr, te in zip(m.train[m.inner], m.test[m.inner], strict=True):
        assert len(set(N[te])) == 1 and not set(N[te]) & set(N[tr])


def test_too_few_levels_to_extrapolate_inside_falls_back_to_random_inner_splits_and_says_so():
    """Found by bench_published --search: ParScale's training runs have 3 levels of P."""
    g = fr.load_grid(_nd_runs().query("N < 1e8"), metric="loss")  # 3 levels of N
    s = fr.search(g, split="extrapolate:N", references=[], **LOG_ONLY)
    assert s.settings["n_outer"] == 1
    assert "too few levels of N to ask the outer question inside it" in str(s)
    assert "inner random splits" in s.settings["inner_protocol"]


# ------------------------------------------------------------------ staged, and on a cluster
def test_survivors_keep_the_best_of_each_number_of_constants_per_split():
    from fitrules.jobs.search import survivors

    m = nested_masks(RollingOrigin("N"), _table(), inner_splits=2, inner_train_frac=0.75, seed=0)
    errors = np.full((4, len(m.train)), 5.0)
    errors[1] = 1.0  # the best 2-constant candidate everywhere
    errors[3] = np.nan  # a 3-constant candidate whose every fit failed
    k = np.array([2, 2, 3, 3])
    outer, final = survivors(errors, k, m, 2, keep=1)
    assert outer.shape == (4, m.n_outer)
    assert outer[1].all() and not outer[0].any()  # one kept per class: the better one
    assert outer[2].all() and not outer[3].any()  # a candidate that failed is never kept
    assert final.tolist() == [False, True, True, False]


def test_a_staged_search_picks_in_each_outer_split_among_what_its_screen_kept():
    g = fr.load_grid(_nd_runs(), metric="loss")
    full = fr.search(g, references=[], screen=0, **LOG_ONLY)
    staged = fr.search(g, references=[], screen=1, **LOG_ONLY)
    sc = staged.settings["screen"]
    assert full.settings["screen"] is None and sc["keep"] == 1
    assert sc["validated"] < sc["screened"] == len(staged.candidates)
    assert "staged: 6 candidates screened on 2 inner splits" in str(staged)
    # each split picked a form that some screen kept; with one survivor a class, the
    # candidates fitted in full are few, and the rest have no outer error at all
    validated = staged.candidates["outer_valid"] > 0
    assert int(validated.sum()) == sc["validated"]
    assert set(staged.choices["form"].dropna()) <= set(staged.candidates["name"][validated])
    assert staged.chosen.expression == full.chosen.expression


def test_screen_is_checked(capsys, tmp_path):
    g = fr.load_grid(_nd_runs(), metric="loss")
    for bad in (-1, 2.5, "25", True):
        with pytest.raises(FitrulesError, match="screen"):
            fr.search(g, references=[], screen=bad, **LOG_ONLY)
    path = tmp_path / "nd.csv"
    _nd_runs().to_csv(path, index=False)
    refused(["search", "--data", path, "--metric", "loss", "--screen", "many"], capsys, tmp_path,
            r"--screen 'many': give a whole number >= 0")  # fmt: skip
    refused(["search", "--data", path, "--metric", "loss", "--scheduler", "local:2",
             "--jobs", "2"], capsys, tmp_path, r"--jobs 2 with --scheduler local:2")  # fmt: skip


@pytest.mark.slow
def test_search_on_a_dask_cluster_gives_the_local_result():
    pytest.importorskip("distributed")
    g = fr.load_grid(_nd_runs(), metric="loss")
    local = fr.search(g, references=[], screen=2, **LOG_ONLY)
    remote = fr.search(g, references=[], screen=2, scheduler="local:2", **LOG_ONLY)
    assert remote.chosen.expression == local.chosen.expression
    cols = ["max_constants", "outer_median_pct", "final_choice", "on_front"]
    pd.testing.assert_frame_equal(remote.budgets[cols], local.budgets[cols])
    pd.testing.assert_frame_equal(remote.choices, local.choices)
