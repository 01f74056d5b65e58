"""The search job (fitrules.jobs.search): selection by the one-standard-error rule, the front,
nested masks inside the outer training sets, the outer error of the pick."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from truth import (
    OMEGA,
    ONE_OFF,
    ONE_OFF_TRUTH,
    SMALL,
    H,
    one_off_runs,
    runs_from_form,
    truth_runs,
)

import fitrules as fr
from fitrules.base.errors import FitrulesError
from fitrules.engine.fit import Objective
from fitrules.engine.guard import GuardOptions
from fitrules.engine.metrics import box_weights
from fitrules.jobs.search.protocol import nested_masks
from fitrules.jobs.search.scoring import SEARCH_FIT_OPTIONS, score_form
from fitrules.jobs.search.selection import front_flags, select
from fitrules.model.forms import Form
from fitrules.model.splits import LeaveOneLevelOut, RandomSplit, RollingOrigin


_COMPOSITION = ("L0 + a*omega*(H/8)**b", (("L0", 2.15), ("a", 0.01), ("b", 0.3)))


@functools.lru_cache(maxsize=4)
def _small_search(formula: str, truth: tuple, seed: int):
    """``fr.search(truth_runs(...), **SMALL, references=[])``, made once a test process: several
    tests read the same search and none changes it."""
    return fr.search(truth_runs(formula, dict(truth), seed=seed), **SMALL, references=[])


def _table(levels=(1, 2, 4, 8, 16, 32), other=(0.0, 1.0)) -> pd.DataFrame:
    return pd.DataFrame([(a, b) for a in levels for b in other], columns=["N", "x"])


def test_one_se_rule_prefers_fewer_constants_within_noise():
    """The one-se rule picks the form with fewer constants when its error is within the noise."""
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
    """A form joins the front only when it beats fewer constants by over one standard error."""
    rng = np.random.default_rng(5)
    base = np.exp(rng.normal(0, 0.2, 20))
    clear = base * 0.5 * np.exp(rng.normal(0, 0.05, 20))
    noise = rng.normal(0, 1, 20)
    same = clear * np.exp(-0.01 + 0.2 * (noise - noise.mean()))  # lower median, within noise
    flags = front_flags(np.vstack([base, clear, same]), 16, 4)
    assert flags == [True, True, False]
    assert front_flags(np.vstack([np.full(20, np.nan), base]), 16, 4) == [False, True]


@pytest.mark.parametrize("kind", ["box", "equal"])
def test_the_outer_error_is_the_picks_own_error(kind):
    """Each outer split's outer error is that of the form picked there, fitted on the outer
    training cells alone, its held-out cells weighted by their share of the grid's box (or
    each once): checked against an independent fit."""
    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = fr.search(runs, **SMALL, references=[], seeds="cells", heldout_weights=kind)
    assert s.settings["outer_error"].startswith("cells:")
    assert s.settings["heldout_weights"] == kind
    grid = fr.load_grid(runs)
    cells = grid.cells(["H", "omega"], True)
    masks = nested_masks(RandomSplit(6, 0.8, 0), cells.table, 5, 0.75, 0)
    top = s.budgets["max_constants"].max()
    picks = s.choices[s.choices["budget"] == top].reset_index(drop=True)
    w = box_weights({"H": cells.X["H"], "omega": cells.X["omega"]}, kind)
    outer = {
        name: score_form(f.bind(grid.columns, grid.runs), cells.X, cells.y, masks, Objective(),
                         SEARCH_FIT_OPTIONS, GuardOptions(), rows=masks.outer, weights=w).error
        for name, f in s.forms.items()
    }  # fmt: skip
    for o in range(6):
        assert outer[picks.loc[o, "form"]][o] == pytest.approx(picks.loc[o, "outer_pct"], rel=1e-9)
    # the pick is not the form that did best on the held-out cells (which would be a leak)
    best = np.nanmin(np.array(list(outer.values())), axis=0)
    assert (best < picks["outer_pct"].to_numpy() - 1e-9).any()


def test_nested_masks_stay_inside_outer_training_sets():
    """Inner splits exactly divide their outer training set, and the same seed repeats them."""
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


@pytest.mark.slow  # two searches, 9.5 s of CPU (a loaded machine): CI's slow step runs it
def test_the_pick_never_reads_the_outer_held_out_values():
    """Changing the outer held-out values changes the outer error but not the pick."""
    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = _small_search(*_COMPOSITION, 4)
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


def test_the_outer_error_holds_out_seed_ids_by_default():
    """Issue 28: the outer error held out cells only, so the grid's seed offset (which new
    runs at new seed ids show) was missing from it. By default outer split o now fits the
    runs outside seed fold o mod 3 and scores the fold's runs (checked against an
    independent fit), rescaled by one factor for the mean of 3 new runs at fresh ids."""
    from fitrules.jobs.search.scoring import _score

    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    s = _small_search(*_COMPOSITION, 4)
    assert s.settings["outer_error"].startswith("cells and seeds: the seed ids in 3 folds")
    grid = fr.load_grid(runs)
    cells = grid.cells(["H", "omega"], True)
    masks = nested_masks(RandomSplit(6, 0.8, 0), cells.table, 5, 0.75, 0)
    from fitrules.jobs.search.protocol import _seed_holdout

    held, _ = _seed_holdout(grid, cells, masks, Objective(), "cells-and-seeds", 0)
    top = s.budgets["max_constants"].max()
    picks = s.choices[s.choices["budget"] == top].reset_index(drop=True)
    state = dict(X=cells.X, y=cells.y, masks=masks, objective=Objective(),
                 options=SEARCH_FIT_OPTIONS, guard=GuardOptions(), seeds=held,
                 heldout=box_weights({v: cells.X[v] for v in ("H", "omega")}))  # fmt: skip
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
    with pytest.raises(FitrulesError, match="heldout_weights 'corners' is unknown"):
        fr.search(runs, **SMALL, references=[], heldout_weights="corners")


def test_cells_and_seeds_inner_splits_read_every_run_of_the_training_cells():
    """Issue 28: the inner splits ranked the candidates on the kept seed ids' runs (2 of 3 a
    cell), a noisier choice than the one from all cells, so the outer error of the picks was
    too high. The inner rows now read every run, as under the cells protocol; the outer rows
    still fit the kept ids and score the held-out fold."""
    from fitrules.jobs.search.protocol import _seed_holdout
    from fitrules.jobs.search.scoring import _score

    runs = truth_runs("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.3}, seed=4)
    grid = fr.load_grid(runs)
    cells = grid.cells(["H", "omega"], True)
    masks = nested_masks(RandomSplit(6, 0.8, 0), cells.table, 5, 0.75, 0)
    held, note = _seed_holdout(grid, cells, masks, Objective(), "cells-and-seeds", 0)
    assert held is not None and "every run of its training cells" in note
    f = Form("f", "L0 + a*omega*(H/8)**b", ("H", "omega")).bind(grid.columns, grid.runs)
    state = dict(X=cells.X, y=cells.y, masks=masks, objective=Objective(),
                 options=SEARCH_FIT_OPTIONS, guard=GuardOptions())  # fmt: skip
    seeds = _score(f, state | {"seeds": held})
    plain = _score(f, state | {"seeds": None})
    inner = np.arange(masks.n_outer, masks.inner.stop)
    np.testing.assert_allclose(seeds.error[inner], plain.error[inner], rtol=1e-12)
    # fitted on the kept ids' runs instead, they differ
    kept = score_form(f, cells.X, held["folds"][0]["y_fit"], masks, Objective(),
                      SEARCH_FIT_OPTIONS, GuardOptions(), rows=inner[:5]).error  # fmt: skip
    assert not np.allclose(kept, seeds.error[inner[:5]], rtol=1e-6)
    assert not np.allclose(seeds.error[: masks.n_outer], plain.error[: masks.n_outer])


def test_inner_splits_extrapolate_inside_each_outer_training_set():
    """Under a rolling origin each inner split scores above its fit, inside its outer set."""
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


def test_leave_one_level_out_inside_each_training_set():
    """Under leave-one-level-out each inner split holds out one level absent from its training."""
    t = _table()
    m = nested_masks(LeaveOneLevelOut("N"), t, inner_splits=3, inner_train_frac=0.75, seed=0)
    N = t["N"].to_numpy()
    assert m.n_outer == 6 and m.n_inner == 3
    for tr, te in zip(m.train[m.inner], m.test[m.inner], strict=True):
        assert len(set(N[te])) == 1 and not set(N[te]) & set(N[tr])


def test_survivors_keep_the_best_of_each_number_of_constants_per_split():
    """Survivors keep the best candidate of each constant count per split, never a failed one."""
    from fitrules.jobs.search.staging import survivors

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


@pytest.mark.slow  # searches, 10 s of CPU (a loaded machine): CI's slow step runs it
def test_a_front_still_falling_at_the_largest_budget_says_so_and_what_to_raise():
    """Issue 41: a truth of 3 constants beyond the first searched at 3 constants at most: the
    largest budget beats the one before, so the output says the front was still falling and
    names the limit to raise; a truth the smaller budget already holds says nothing of it."""
    truth = {"L0": 2.15, "a": 0.02, "b": 0.03}
    runs = truth_runs("L0 + a*omega**0.7 + b*(H/16)**0.5", truth, seed=4)
    s = fr.search(runs, **SMALL, references=[])
    assert s.budgets["on_front"].tolist() == [True, True]
    assert s.settings["front_at_ceiling"]
    assert s.settings["ceiling"]["raise"] == ["max_constants"]
    assert "still falling at its largest budget, 3 constants" in str(s)
    assert "Raise max_constants (now 3)" in str(s)
    null = truth_runs("L0 + a*omega + 0*log(H)", {"L0": 2.15, "a": 0.02}, seed=0)
    t = fr.search(null, **SMALL, references=[])
    assert not t.settings["front_at_ceiling"]
    assert "still falling" not in str(t)


@pytest.mark.slow  # searches, 8 s of CPU (a loaded machine): CI's slow step runs it
def test_the_budget_grows_while_the_front_falls_and_says_where_it_stopped():
    """Issue 41: started at 2 constants, a truth of 3 makes the budget grow to 3, where the
    ceiling stops it; the output says how far it grew, why it stopped, and that the front
    was still falling there. A truth of 2 constants stops it at 3, which did not beat 2."""
    truth = {"L0": 2.15, "a": 0.02, "b": 0.03}
    runs = truth_runs("L0 + a*omega**0.7 + b*(H/16)**0.5", truth, seed=4)
    s = fr.search(runs, **SMALL, first_constants=2, references=[])
    g = s.settings["growth"]
    assert (g["first_constants"], g["reached"]) == (2, 3)
    assert [r["max_constants"] for r in g["steps"]] == [2, 3]
    assert g["stopped"] == "the ceiling, max_constants 3"
    assert "The budget grew from 2 to 3 constants" in str(s)
    assert s.settings["front_at_ceiling"] and "Raise max_constants (now 3)" in str(s)
    null = truth_runs("L0 + a*omega + 0*log(H)", {"L0": 2.15, "a": 0.02}, seed=0)
    t = fr.search(null, **SMALL, first_constants=2, references=[])
    assert t.settings["growth"]["reached"] == 3
    assert t.settings["growth"]["stopped"].startswith("3 constants did not beat 2 constants")
    assert not t.settings["front_at_ceiling"]


@pytest.mark.slow  # four searches, 10 s of CPU: CI's slow step runs it
def test_a_grown_budget_equals_every_budget_searched_at_once():
    """The steps of a growing budget prune, name, screen and pick as one search of the
    budgets it reached: the same candidates, errors, budgets and choice."""
    runs = truth_runs("L0 + a*omega**0.7 + b*(H/16)**0.5", {"L0": 2.15, "a": 0.02, "b": 0.03}, 4)
    for screen in (0, 3):
        grown = fr.search(runs, **SMALL, first_constants=2, references=[], screen=screen)
        once = fr.search(runs, **SMALL, first_constants=3, references=[], screen=screen)
        assert grown.settings["growth"]["reached"] == 3 and once.settings["growth"] is None
        pd.testing.assert_frame_equal(grown.candidates, once.candidates)
        pd.testing.assert_frame_equal(grown.budgets, once.budgets)
        pd.testing.assert_frame_equal(grown.dropped, once.dropped)
        assert grown.chosen.expression == once.chosen.expression


def test_a_next_budget_beyond_the_limits_stops_the_growth_and_says_which_limit():
    """A step past the candidates a search makes is not run: the growth stops, naming it."""
    from types import SimpleNamespace

    from fitrules.base.limits import MAX_SEARCH_CANDIDATES
    from fitrules.engine.grammar import Grammar
    from fitrules.jobs.search.growth import _step_refusal
    from fitrules.jobs.search.plan import Plan

    spec = SimpleNamespace(grammar=Grammar(), outer=RandomSplit(4, 0.8, 0), inner_splits=3)
    big = Plan(MAX_SEARCH_CANDIDATES + 1, 10, 20, 40, {1: 10}, min_train=20, step=6)
    why = _step_refusal(big, 6, spec, ["H"], 1, False, None)
    assert why.startswith("the next budget, 6 constants, is beyond the limits")
    assert f"more than the {MAX_SEARCH_CANDIDATES:,}" in why
    none = Plan(0, 0, 20, 40, {}, min_train=20, step=6)
    assert "no form of 6 constants" in _step_refusal(none, 6, spec, ["H"], 1, False, None)
    small = Plan(100, 100, 20, 40, {1: 100}, seconds=1.0, min_train=20, step=6)
    assert _step_refusal(small, 6, spec, ["H"], 1, False, None) is None


@pytest.mark.slow  # two searches, 6 s of CPU (a loaded machine): CI's slow step runs it
def test_a_reference_form_competes_with_the_grammar_and_can_win():
    """Issue 41: a user's form the grammar cannot write, and the truth, is picked by the
    same outer errors as the grammar's forms; without it a grammar form is."""
    truth = Form("mine", "L0 + a/(1 + omega)", ("omega",))
    runs = runs_from_form(truth, {"L0": 2.0, "a": 0.3}, {"H": H, "omega": OMEGA}, seeds=3,
                          cv=0.002, seed=1)  # fmt: skip
    s = fr.search(runs, **SMALL, references=[truth])
    assert s.chosen.name == "mine" and "mine" in s.candidates["name"].tolist()
    assert s.references["form"].tolist() == ["mine"]  # still reported without selection too
    t = fr.search(runs, **SMALL, references=[])
    assert t.chosen.name != "mine" and t.chosen.name.startswith("s")


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_a_step_of_a_large_search_is_staged_by_the_candidates_so_far(monkeypatch):
    """``screen="auto"`` counts the earlier steps' candidates: a step small on its own is
    staged once the search as a whole is past the threshold, as one search of every budget
    would be."""
    import fitrules.jobs.search.staging as search_job

    monkeypatch.setattr(search_job, "SCREEN_ABOVE", 36)  # first step 10, the next 34: 44 in all
    runs = truth_runs("L0 + a*omega**0.7 + b*(H/16)**0.5", {"L0": 2.15, "a": 0.02, "b": 0.03}, 4)
    plans = []
    s = fr.search(runs, **SMALL, first_constants=2, on_plan=lambda p, sec: plans.append(p))
    assert [p.step for p in plans] == [None, 3]
    assert plans[0].screen_keep == 0 and plans[1].screen_keep == search_job.SCREEN_KEEP
    assert s.settings["growth"]["reached"] == 3
    assert s.settings["screen"]["screened"] == s.settings["growth"]["steps"][1]["kept"]


@pytest.mark.parametrize(
    "x, train, test, expected",
    [
        ([20, 20, 20, 20, 320], [1, 1, 1, 1, 0], [0, 0, 0, 0, 1], False),  # one value fitted
        ([20, 20, 20, 20, 320], [1, 1, 1, 0, 1], [0, 0, 0, 1, 0], False),  # scored at the mode
        ([20, 20, 20, 320, 320], [1, 1, 1, 0, 1], [0, 0, 0, 1, 0], True),  # scored off it
        ([1, 2, 4, 8, 16], [1, 1, 1, 1, 0], [0, 0, 0, 0, 1], True),  # a new value scored
        ([1, 1, 2, 2, 3], [1, 0, 1, 1, 1], [0, 1, 0, 0, 0], True),  # at a value half share
    ],
)
def test_a_split_checks_a_variable_it_fits_at_two_values_and_scores_off_the_mode(
    x, train, test, expected
):
    """A split checks a variable when it fits two or more of its values and scores a cell at a
    value that at most half of its fitted cells share."""
    from fitrules.jobs.search.abstention import checks

    assert checks(np.array(x, float), np.array(train, bool), np.array(test, bool)) is expected


def test_the_search_abstains_when_no_split_checks_a_variable_and_recommends_the_users_form():
    """A variable with one cell off its common level (the over-training grid's M) is checked by
    no split: the search picks nothing, names the variable, and fits the user's form on all
    cells, recommending it with its constants near the truth's."""
    s = fr.search(one_off_runs(), **SMALL, references=[ONE_OFF], jobs=1)
    a = s.abstention
    assert a["abstains"] and list(a["unchecked"]) == ["M"] and s.chosen is None
    assert s.recommended is not None and s.recommended.name == "mine"
    (mine,) = a["forms"]
    assert mine["constants"] == pytest.approx(ONE_OFF_TRUTH, rel=0.01) and not mine["reasons"]
    text = str(s)
    assert "The search abstains" in text and "cannot inform M" in text
    assert "Recommended: your form mine" in text and "the search picks" not in text
    assert s.to_dict()["abstention"]["recommended"] == "mine"
    assert "The search abstains" in s._repr_html_() and "abstains" in s.to_json()
    assert "# The search abstained" in s.forms_toml()


def test_an_abstaining_search_recommends_no_default_reference():
    """Without forms of the user's the abstention recommends none (the built-in references are
    not the user's theory) and says how to give one."""
    s = fr.search(one_off_runs(), **SMALL, jobs=1)
    assert s.abstention["abstains"] and s.abstention["forms"] == [] and s.recommended is None
    assert "Give your own form" in str(s)


def test_the_search_does_not_abstain_on_a_grid_that_can_decide():
    """The same truth over N x three levels of M: every variable is checked, the size is not set
    by the split, and the search picks."""
    s = fr.search(one_off_runs((20, 80, 320)), **SMALL, references=[ONE_OFF], jobs=1)
    assert not s.abstention["abstains"] and s.abstention["forms"] == []
    assert s.chosen is not None and s.recommended is None
    assert "abstains" not in str(s)


def test_a_pick_whose_size_no_outer_error_chose_is_not_a_law():
    """When the only size the nested splits can rank (they fit 3 cells: 2 constants) is the
    pick's and the grammar holds larger forms, the pick's size is set by the split: the
    search abstains and says so. With one more level the splits rank 2 and 3 constants, 3
    beats 2 on the outer errors, and the search picks."""
    truth = Form("t", "L0 + a*(H/4)**-0.5", ("H",))

    def runs(levels):
        return runs_from_form(truth, {"L0": 2.0, "a": 0.5}, {"H": levels}, seeds=2, cv=0.003,
                              seed=1)  # fmt: skip

    s = fr.search(runs((1, 2, 4, 8, 16)), **SMALL, jobs=1)
    few = s.settings["too_few_cells"]
    assert few["set_aside"] > 0 and s.settings["best_budget"] == few["min_train"] - 1
    assert s.abstention["abstains"] and not s.abstention["unchecked"] and s.chosen is None
    assert "not a law: its size is set by the split" in str(s)
    t = fr.search(runs((1, 2, 4, 8, 16, 32)), **(SMALL | dict(max_constants=4)), jobs=1)
    few = t.settings["too_few_cells"]
    assert few["set_aside"] > 0 and t.settings["best_budget"] == few["min_train"] - 1
    assert not t.abstention["abstains"] and t.chosen is not None
    # the front still falling at the largest size the splits rank: the cells stopped it, and
    # the advice is more runs, not a larger grammar
    assert t.settings["front_at_ceiling"]
    assert "the cells, not the grammar, stopped it" in str(t) and "Raise" not in str(t)


def test_the_default_search_on_the_default_grid_checks_every_variable():
    """``fitrules search`` with its defaults on the default grid: every outer and final split
    design checks a variable, and the splits rank forms of the grammar's largest size, so
    neither reason to abstain can hold (read from the design, no fit made)."""
    from fitrules.engine.grammar import Grammar
    from fitrules.engine.intervals import robust_cells
    from fitrules.jobs.options import SEARCH
    from fitrules.jobs.search import default_variables
    from fitrules.jobs.search.abstention import unchecked_variables
    from fitrules.model.grid_reading import DEFAULT_WHERE
    from fitrules.model.splits import parse_protocol

    g = fr.load_example("main", where=" and ".join(DEFAULT_WHERE))  # the command's default grid
    variables = default_variables(g)
    cells = robust_cells(g, variables)
    outer = parse_protocol(SEARCH.split, int(SEARCH.splits), float(SEARCH.train_frac), 0)
    masks = nested_masks(outer, cells.table, int(SEARCH.inner_splits),
                         float(SEARCH.inner_train_frac), 0)  # fmt: skip
    assert unchecked_variables(variables, cells.X, masks) == {}
    assert masks.min_train > Grammar().max_constants


def test_a_prescreen_keeps_each_kinds_lowest_training_rms_on_each_set():
    """prescreened: per kind and per set, the ``keep`` lowest RMS stay (NaN counts as the
    worst, ties go to the earlier candidate); a kind of at most ``keep`` candidates keeps all."""
    from fitrules.jobs.search.hopeless import prescreened

    rms = np.array(
        [[3.0, 1.0], [1.0, np.nan], [2.0, 2.0], [2.0, 0.5], [9.0, 9.0]]
    )  # 4 candidates of kind (4, 1), then 1 of kind (3, 0)
    kinds = np.array([(4, 1), (4, 1), (4, 1), (4, 1), (3, 0)])
    out = prescreened(rms, kinds, keep=2)
    # set 0: 1.0 (row 1) and the first 2.0 (row 2) stay; set 1: 0.5 (row 3) and 1.0 (row 0)
    assert out.tolist() == [[True, False], [False, True], [False, True], [True, False],
                            [False, False]]  # fmt: skip
    assert not prescreened(rms, kinds, keep=4).any()
    assert prescreened(rms[:0], kinds[:0], keep=2).shape == (0, 2)
