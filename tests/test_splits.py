import numpy as np
import pytest

from fitrules.base.errors import SplitError
from fitrules.model.splits import RandomSplit


@pytest.mark.parametrize("n_cells, frac", [(20, 1 / 3), (7, 0.5), (100, 0.9), (3, 0.34)])
def test_splits_are_disjoint_cover_and_have_the_right_size(n_cells, frac):
    sp = RandomSplit(50, frac, seed=3)
    for train, test in sp.split(n_cells):
        assert len(np.intersect1d(train, test)) == 0
        assert sorted(np.concatenate([train, test])) == list(range(n_cells))
        assert len(train) == sp.n_train(n_cells)


def test_same_seed_same_splits_other_seed_other_splits():
    a = RandomSplit(30, 1 / 3, seed=0).masks(20)
    b = RandomSplit(30, 1 / 3, seed=0).masks(20)
    c = RandomSplit(30, 1 / 3, seed=1).masks(20)
    assert (a == b).all()
    assert not (a == c).all()


def test_splits_vary():
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
    with pytest.raises(SplitError, match=match):
        list(RandomSplit(**kwargs).split(n))
