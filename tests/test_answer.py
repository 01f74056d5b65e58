"""compare leads with the answer: the forms ranked by held-out error and a conclusion of at
most three lines, the same in the terminal, the notebook and report.md (issue 32: 68 lines,
forms in built-in order, no conclusion; the report's "Which form wins" paragraph was in no
other view; an interval unadjusted for 15 comparisons beside a verdict that was)."""

from __future__ import annotations

import html

import pytest

import fitrules as fr
from fitrules.views.text import conclusion, verdict_of
from helpers import run

SPLITS = 30  # the default grid and forms; few splits, to stay fast


@pytest.fixture(scope="module")
def default_comparison():
    return fr.compare(splits=SPLITS)


def test_the_first_twelve_lines_hold_the_ranked_table_and_the_conclusion(capsys):
    code, out, err = run(["compare", "--splits", SPLITS], capsys)
    assert code == 0, err
    c = fr.compare(splits=SPLITS)
    head = out.splitlines()[:12]
    assert 1 <= len(c.conclusion) <= 3
    assert head[: len(c.conclusion)] == c.conclusion
    dashes = next(i for i, ln in enumerate(head) if ln.startswith("-----"))
    assert head[dashes - 1].startswith("form ") and "median %" in head[dashes - 1]
    rows = [ln.split()[0] for ln in head[dashes + 1 :]]
    assert rows == c.ranking["form"].tolist()  # every form, ranked
    assert len(rows) == len(c.forms) == 6
    medians = c.ranking["median_pct"].tolist()
    assert medians == sorted(medians)
    assert head[0].startswith(f"{rows[0]} predicts the held-out cells best")


def test_the_conclusion_follows_the_verdicts(default_comparison):
    c = default_comparison
    best = c.ranking["form"].iloc[0]
    text = " ".join(c.conclusion)
    for r in c.paired.to_dict("records"):
        if best not in (r["a"], r["b"]):
            continue
        other = r["b"] if r["a"] == best else r["a"]
        assert other in text
        if r["verdict"] == f"{best} predicts better":
            assert other in c.conclusion[1]
        elif r["verdict"] == "not distinguishable":
            assert other in c.conclusion[-1] and "cannot be told apart" in c.conclusion[-1]


def test_the_same_conclusion_in_the_notebook_and_the_report(tmp_path):
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


def test_the_pairwise_detail_states_the_interval_adjustment(default_comparison):
    text = str(default_comparison)
    assert "not adjusted for the 15 comparisons; the verdict is (Holm p < 0.05)" in text
    assert "(unadjusted interval " in text


def test_verdict_column(default_comparison):
    """c.paired had no verdict column; the words follow the Holm-adjusted p and the ratio."""
    c = default_comparison
    for r in c.paired.to_dict("records"):
        if r["p_holm"] < 0.05:
            better = r["a"] if r["ratio"] < 1 else r["b"]
            assert r["verdict"] == f"{better} predicts better"
        else:
            assert r["verdict"] == "not distinguishable"
    assert verdict_of({"a": "x", "b": "y", "p": None, "p_holm": None}) == "no test"
    assert verdict_of({"a": "x", "b": "y", "p": 0.01, "p_holm": 0.02, "median_diff_pct": 0.3,
                       "ratio": None}) == "y predicts better"  # fmt: skip


def test_summary_is_the_table_and_called_the_text(default_comparison):
    c = default_comparison
    assert list(c.summary.columns)[:2] == ["form", "constants"]
    assert type(c.summary.iloc[:2]).__name__ == "DataFrame"
    s = c.summary()
    assert s == str(c) and repr(s) == str(c)
    assert s._repr_html_().startswith("<pre>")


def test_summary_on_every_result():
    g = fr.load_example("smoke")
    f = fr.fit(g, "composition")
    assert f.summary() == str(f)
    p = fr.ci(fr.load_example("paired"), baseline="algo=sync",
              treatment="algo=diloco,H=16,keep=1", resamples=1000)  # fmt: skip
    assert p.summary() == str(p)


def test_forms_from_forms_toml_left_out_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text('mine = "L0 + a*omega"\n')
    code, out, err = run(["compare", "--splits", 4, "--forms", "composition,omega_only"], capsys)
    assert code == 0, err
    assert "forms.toml defines mine, not compared here: name it with --forms" in out
    c = fr.compare(forms=["composition", "mine"], splits=4)
    assert not any("forms.toml defines" in w for w in c.warnings)


def test_no_pair_with_the_best_form():
    summary = [{"form": "a", "median_pct": 1.0, "splits_used": 9},
               {"form": "b", "median_pct": 2.0, "splits_used": 9}]  # fmt: skip
    assert len(conclusion(summary, [])) == 2
    assert conclusion([{"form": "a", "median_pct": None, "splits_used": 0}], [])[0].startswith(
        "No form has a valid split"
    )
