"""The report's markdown (fitrules.views.markdown): the answer first, the figures counted."""

from __future__ import annotations

import html

import pytest

import fitrules as fr

SPLITS = 30  # the default grid and forms; few splits, to stay fast


@pytest.mark.slow  # a notebook and a report, 7 s of CPU (a loaded machine): CI's slow step runs it
def test_the_same_conclusion_in_the_notebook_and_the_report(tmp_path):
    """The HTML and the report open with the same conclusion; undrawn paired figures are counted."""
    # three forms: a report's figures are the slow part
    c = fr.compare(forms=["composition", "log_additive", "omega_only"], splits=SPLITS)
    page = c._repr_html_()
    for line in c.conclusion:
        assert html.escape(line) in page
    assert page.index(html.escape(c.conclusion[0])) < page.index("<table")
    from fitrules.views.markdown import comparison_report

    # two of the three paired figures drawn: the third is counted and named, not dropped
    d = comparison_report(c, c.to_dict(), tmp_path / "r", "", max_pairs=2)
    md = (d / "report.md").read_text()
    answer = md.split("## Answer", 1)[1].split("\n## ", 1)[0]
    for line in c.conclusion:
        assert line in answer
    assert md.index("## Answer") < md.index("## Data and protocol")
    drawn = sorted(p.name for p in d.glob("paired_*.png"))
    assert len(drawn) == 2 and all(f"({n})" in md for n in drawn)
    best = c.ranking["form"].iloc[0]
    assert all(best in n for n in drawn)  # the best form's pairs first
    assert "2 of the 3 paired figures are drawn" in md and "the other is not: " in md
