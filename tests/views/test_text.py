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
