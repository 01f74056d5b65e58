"""Splits and protocols (fitrules.model.splits): random splits, leave-one-level-out,
extrapolation cuts, rolling origins, seed hold-outs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from fitrules.base.errors import SplitError
from fitrules.model.grids import load_grid
from fitrules.model.splits import (
    Extrapolate,
    LeaveOneLevelOut,
    RandomSplit,
    RollingOrigin,
    SeedHoldout,
    parse_protocol,
)


def _table(levels=(1, 2, 4, 8, 16, 32), other=(0.0, 1.0)) -> pd.DataFrame:
    return pd.DataFrame([(a, b) for a in levels for b in other], columns=["N", "x"])


@pytest.fixture
def grid(synthetic_csv):
    return load_grid(synthetic_csv)


@pytest.mark.parametrize("n_cells, frac", [(20, 1 / 3), (7, 0.5), (100, 0.9), (3, 0.34)])
def test_splits_are_disjoint_cover_and_have_the_right_size(n_cells, frac):
    """Each random split's training and held-out cells are disjoint, cover all, and size right."""
    sp = RandomSplit(50, frac, seed=3)
    for train, test in sp.split(n_cells):
        assert len(np.intersect1d(train, test)) == 0
        assert sorted(np.concatenate([train, test])) == list(range(n_cells))
        assert len(train) == sp.n_train(n_cells)


def test_same_seed_same_splits_other_seed_other_splits():
    """The same seed gives the same random splits; another seed gives others."""
    a = RandomSplit(30, 1 / 3, seed=0).masks(20)
    b = RandomSplit(30, 1 / 3, seed=0).masks(20)
    c = RandomSplit(30, 1 / 3, seed=1).masks(20)
    assert (a == b).all()
    assert not (a == c).all()


def test_splits_vary():
    """Over 90 of 100 random splits of 20 cells are distinct."""
    masks = RandomSplit(100, 1 / 3, seed=0).masks(20)
    assert len({m.tobytes() for m in masks}) > 90


@pytest.mark.parametrize(
    "kwargs, n, match",
    [
        ({"train_frac": 0.0}, 20, r"\(0, 1\)"),
        ({"train_frac": 1.0}, 20, r"\(0, 1\)"),
        ({"train_frac": 0.01}, 20, "at least 1"),
        ({"train_frac": 0.99}, 20, "at least 1"),
        ({"n_splits": 0}, 20, ">= 1"),
    ],
)
def test_impossible_splits(kwargs, n, match):
    """A training fraction outside (0, 1), one leaving a side empty, or no splits is refused."""
    with pytest.raises(SplitError, match=match):
        list(RandomSplit(**kwargs).split(n))


def test_extrapolate_has_a_spelling_without_a_shell_redirect(synthetic_csv, capsys):
    """extrapolate:H:16 means extrapolate:H>=16, and the docs quote every >= spelling."""
    from fitrules.model.splits import Extrapolate, parse_protocol

    assert parse_protocol("extrapolate:H:16") == Extrapolate("H", 16.0)
    assert parse_protocol("extrapolate:H>=16") == Extrapolate("H", 16.0)
    # every extrapolate:COL>=VALUE the README and the docs print is quoted
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for line in (line for p in pages for line in p.read_text().splitlines()):
        for m in re.finditer(r"extrapolate:\w+>=", line):
            before = line[: m.start()]
            assert before.count("'") % 2 == 1 or before.count('"') % 2 == 1, line


def test_rolling_origin_asks_the_extrapolation_at_several_cuts_with_its_horizon():
    """A rolling origin fits below each of several cuts and scores the levels within its horizon."""
    t = _table()
    top = RollingOrigin("N")  # the top level held out: horizon 1
    assert top.labels(t) == ["fit N < 32, score N 32", "fit N < 16, score N 16",
                             "fit N < 8, score N 8"]  # fmt: skip
    tr, te = top.masks_for(t), top.tests_for(t)
    assert (tr.sum(axis=1) == [10, 8, 6]).all() and (te.sum(axis=1) == 2).all()
    cut = RollingOrigin("N", threshold=16)  # two levels held out: horizon 2
    assert cut.labels(t)[:2] == ["fit N < 16, score N 16 to 32", "fit N < 8, score N 8 to 16"]
    assert RollingOrigin("N", origins=5).masks_for(t).shape[0] == 3  # 3 levels below each cut


def test_seed_holdout_folds_and_refusals():
    """Seed folds cover every seed id; one id or a test fraction over 1 is refused."""
    assert sorted(sum(SeedHoldout(seed=1).folds(["0", "1", "2"]), [])) == ["0", "1", "2"]
    folds = SeedHoldout().folds([str(i) for i in range(7)])
    assert all(0 < len(f) < 7 for f in folds)
    assert sorted(sum(folds, [])) == [str(i) for i in range(7)]
    with pytest.raises(SplitError, match="at least 2 distinct seed ids"):
        SeedHoldout().folds(["0"])
    with pytest.raises(SplitError, match="must be in"):
        SeedHoldout(test_frac=1.5)


def test_seed_holdout_excess_matches_a_direct_simulation_of_a_level_fit():
    """Issue 28 asked whether the excess is right with 3 seed ids. A level fit (the mean of
    the training cells' runs at the kept ids) on many cells, so that its own per-run noise,
    which the excess leaves out, is negligible: the held-out mean square (1 of 3 ids) less
    the target's (a fit on every id against the mean of 3 new runs at fresh ids) is the
    excess, within Monte Carlo error (about 1%)."""
    rng = np.random.default_rng(28)
    s_sd, r_sd, cells, reps = 0.005, 0.003, 100, 10000
    held, target = [], []
    for _ in range(10):
        u = s_sd * rng.standard_normal((reps, 1, 3))
        y = u + r_sd * rng.standard_normal((reps, cells, 3))  # relative deviations
        fit = y[:, : cells // 2, :2].mean(axis=(1, 2))  # ids 0, 1 kept; id 2 held out
        held.append(((fit[:, None] - y[:, cells // 2 :, 2]) ** 2).mean(axis=1))
        new = s_sd * rng.standard_normal((reps, cells // 2, 3))
        new = (new + r_sd * rng.standard_normal((reps, cells // 2, 3))).mean(axis=2)
        whole = y[:, : cells // 2].mean(axis=(1, 2))
        target.append(((whole[:, None] - new) ** 2).mean(axis=1))
    excess = SeedHoldout.excess(s_sd**2, r_sd**2, kept=2, held=1, ids=3, runs=3)
    assert np.mean(held) - np.mean(target) == pytest.approx(excess, rel=0.03)
    # a wrong count (the fit's offset over the held-out ids) is far off
    assert SeedHoldout.excess(s_sd**2, r_sd**2, 1, 1, 3, 3) > 1.1 * excess


def test_leave_one_level_out_holds_out_each_level(grid):
    """Leave-one-level-out makes one split per H level, holding out exactly that level."""
    table = grid.cells(["H", "omega"]).table
    masks = LeaveOneLevelOut("H").masks_for(table)
    assert masks.shape == (4, 20)
    for m, level in zip(masks, (1, 4, 16, 64), strict=True):
        assert set(table.loc[~m, "H"]) == {level}
        assert level not in set(table.loc[m, "H"])


def test_extrapolate_holds_out_the_top(grid):
    """Extrapolate holds out the top level of H, or every level from a given threshold."""
    table = grid.cells(["H", "omega"]).table
    (m,) = Extrapolate("H").masks_for(table)
    assert set(table.loc[~m, "H"]) == {64} and set(table.loc[m, "H"]) == {1, 4, 16}
    (m,) = Extrapolate("H", 16).masks_for(table)
    assert set(table.loc[~m, "H"]) == {16, 64}


@pytest.mark.parametrize(
    "text, match",
    [
        ("sideways", "unknown"),
        ("extrapolate:H>=x", "not a number"),
        ("transfer", "--fit-data"),
        ("leave-one-level-out:", "unknown"),
    ],
)
def test_bad_protocols(text, match):
    """An unknown protocol, a non-numeric cut or transfer without --fit-data is refused."""
    with pytest.raises(SplitError, match=match):
        parse_protocol(text)


def test_protocol_on_unknown_column_or_impossible_cut(grid):
    """A protocol on a column that is not a variable, or a cut leaving no training, is refused."""
    table = grid.cells(["H", "omega"]).table
    with pytest.raises(SplitError, match="not a variable"):
        LeaveOneLevelOut("width").masks_for(table)
    with pytest.raises(SplitError, match="no training"):
        Extrapolate("H", 1).masks_for(table)


def _square(levels=(1, 2, 4, 8, 16, 32)) -> pd.DataFrame:
    return pd.DataFrame([(a, b) for a in levels for b in levels], columns=["N", "D"])


def test_an_extrapolation_in_several_columns_fits_below_every_cut_and_scores_beyond_any():
    """Extrapolating in several columns fits below every cut and scores cells beyond any."""
    from fitrules.model.splits import Extrapolate, parse_protocol

    t = _square()
    split = parse_protocol("extrapolate:N:16,D>=32")
    assert split == Extrapolate("N", 16.0, (("D", 32.0),))
    assert split.columns == ("N", "D")
    (train,) = split.masks_for(t)
    assert (train == ((t.N < 16) & (t.D < 32)).to_numpy()).all()  # 4 x 5 cells fitted
    assert train.sum() == 20
    assert split.labels(t) == ["fit N < 16 and D < 32, score N >= 16 or D >= 32"]
    assert split.describe()["protocol"] == "extrapolate:N>=16,D>=32"
    assert parse_protocol("extrapolate:N,D").masks_for(t).sum() == 25  # the top level of each
    with pytest.raises(SplitError, match="named twice"):
        parse_protocol("extrapolate:N,N:4")
    with pytest.raises(SplitError, match="column name is missing"):
        parse_protocol("extrapolate:N,")
    with pytest.raises(SplitError, match="'x' is not a number"):
        parse_protocol("extrapolate:N,D:x")
    with pytest.raises(SplitError, match="leaves no training cells"):
        parse_protocol("extrapolate:N,D:1").masks_for(t)


def test_a_rolling_origin_in_several_columns_steps_every_cut_down_together():
    """A rolling origin in several columns lowers every cut together and scores the band beyond."""
    t = _square()
    both = RollingOrigin("N", also=(("D", None),))
    assert both.labels(t) == ["fit N < 32 and D < 32, score N 32 or D 32",
                              "fit N < 16 and D < 16, score N 16 or D 16",
                              "fit N < 8 and D < 8, score N 8 or D 8"]  # fmt: skip
    tr, te = both.masks_for(t), both.tests_for(t)
    assert (tr.sum(axis=1) == [25, 16, 9]).all()
    # scored: the L-shaped band of one level beyond, within the horizon of each column
    assert (te.sum(axis=1) == [11, 9, 7]).all() and not (tr & te).any()
    # one column's rolling origin is the same as before the columns became a tuple
    one = RollingOrigin("N")
    assert (one.masks_for(t) == np.stack([(t.N < v).to_numpy() for v in (32, 16, 8)])).all()


def test_the_inner_splits_of_several_columns_ask_the_same_question_inside():
    """Inner splits of a several-column rolling origin cut every column inside the outer set."""
    from fitrules.model.splits import inner_masks

    t = _square()
    outer = RollingOrigin("N", also=(("D", None),))
    within = outer.masks_for(t)[0]  # N < 32 and D < 32: 5 levels of each
    train, test = inner_masks(outer, t, within, 10, 0)
    # cuts at the top two of 5 levels (each fit reads at least half the levels, and 2)
    assert train.shape[0] == 2 and (train.sum(axis=1) == [16, 9]).all()
    assert (test.sum(axis=1) == [9, 7]).all()
    assert not (train & ~within).any() and not (test & ~within).any()


def test_several_columns_refuse_a_cut_that_asks_nothing_and_drop_steps_that_score_nothing():
    """Found in review: a cut above one column's levels crashed the rolling origin
    (IndexError), and on a partly filled design a lower step scored no cell (a 0% split)."""
    from fitrules.model.splits import Extrapolate, inner_masks, parse_protocol

    with pytest.raises(SplitError, match="N>=64 holds out no level of N"):
        parse_protocol("extrapolate:N:64,D").masks_for(_square())
    with pytest.raises(SplitError, match="named twice"):
        Extrapolate("N", None, (("N", 4.0),))
    with pytest.raises(SplitError, match="named twice"):
        RollingOrigin("D", also=(("D", None),))
    cells = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)] + [(4, 5), (5, 4), (5, 5)]
    t = pd.DataFrame(cells, columns=["N", "D"])
    both = RollingOrigin("N", also=(("D", None),))
    tr, te = both.masks_for(t), both.tests_for(t)
    assert tr.shape[0] == 1 and tr.sum() == 9 and te.sum() == 3  # the empty step left out
    assert len(both.labels(t)) == 1
    fit, scored = inner_masks(both, t, np.ones(len(t), bool), 10, 0)
    assert fit.any(axis=1).all() and scored.any(axis=1).all()
