"""The text of results (fitrules.views.text): the conclusion and verdict sentences, set-aside
warnings."""

from __future__ import annotations

import pandas as pd

from fitrules.views.text import conclusion


def test_no_pair_with_the_best_form():
    """With no paired verdicts the conclusion is two lines; with no valid split it says so."""
    summary = [{"form": "a", "median": 1.0, "splits_used": 9},
               {"form": "b", "median": 2.0, "splits_used": 9}]  # fmt: skip
    assert len(conclusion(summary, [])) == 2
    assert conclusion([{"form": "a", "median": None, "splits_used": 0}], [])[0].startswith(
        "No form has a valid split"
    )


def test_a_verdict_resting_on_few_splits_warns_and_says_why():
    """With 261 of 300 splits set aside the warning and the verdict say how many and why."""
    from fitrules.jobs.compare.summaries import set_aside_warnings
    from fitrules.views.text import verdict_sentence

    summary = pd.DataFrame([{"form": "noE", "splits_used": 39}])
    (w,) = set_aside_warnings(summary, {"noE": {"optimiser did not converge": 261}}, 300)
    assert "261 of 300 splits set aside (261 x optimiser did not converge)" in w
    row = {"a": "chin", "b": "noE", "n": 39, "splits": 300, "a_better": 39, "b_better": 0,
           "ties": 0, "median_diff": -0.7, "p": None}  # fmt: skip
    assert "Warning: 261 of 300 splits were set aside" in verdict_sentence(row)


def test_the_too_few_cells_sentence_says_who_set_the_picks_size():
    """The search's sentence on forms set aside for too few fitted cells says the pick's size
    was set by the split only when the pick sits at the largest size the splits rank; when
    the outer errors chose a smaller size, it says that instead (it said "set by how few
    cells the splits fit" either way)."""
    from types import SimpleNamespace

    from fitrules.views.search import _too_few_cells_sentence

    def sentence(best):
        settings = {"too_few_cells": {"min_train": 5, "set_aside": 12}, "best_budget": best}
        return _too_few_cells_sentence(SimpleNamespace(settings=settings, n_generated=40))

    assert "set by how few cells the splits fit" in sentence(4)
    low = sentence(2)
    assert "The outer errors chose 2 constants, below that ceiling" in low
    assert "set by how few cells" not in low
    assert "12 of the 40 proposed forms" in low
