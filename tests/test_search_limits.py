"""The cost of a search, counted from its grammar and options before any fit.

Every case here came from the third hostile audit (issue 31): searches that ran for minutes
with no plan line, a grammar that reached 8 GiB, and the checks that now refuse them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FormError, LimitError
from fitrules.base.limits import MAX_SEARCH_CANDIDATES
from fitrules.engine.grammar import Grammar, count_candidates, generate, load_grammar
from helpers import refused, run


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "grid.csv"
    composition_grid().to_csv(path, index=False)
    return path


@pytest.fixture
def wide_csv(tmp_path):
    """Eight numeric columns varying over the cells (the audit's wide table)."""
    rng = np.random.default_rng(0)
    n = 40
    df = pd.DataFrame({f"x{i}": rng.integers(1, 6, n).astype(float) for i in range(8)})
    df["seed"] = 0
    df["loss"] = 2 + 0.01 * df["x0"] + 0.001 * rng.standard_normal(n)
    path = tmp_path / "wide.csv"
    df.to_csv(path, index=False)
    return path


def test_large_grammar_is_refused_before_any_candidate_is_made(grid_csv, tmp_path, capsys):
    """Audit case: terms 6, max_constants 12, max_nonlinear 3 on 2 variables ran 125 s with
    no plan line (issue 31, serious 1)."""
    line = refused(
        ["search", "--data", grid_csv, "--variables", "H,omega", "--terms", "6",
         "--max-constants", "12", "--max-nonlinear", "3"],
        capsys, tmp_path, rf"proposes 767,539 candidates, more than the {MAX_SEARCH_CANDIDATES:,}",
    )  # fmt: skip
    assert "--terms" in line and "--max-nonlinear" in line


def test_default_grammar_on_a_wide_table_is_refused(wide_csv, tmp_path, capsys):
    """Audit case: the default grammar on a table of 8 numeric columns (issue 31, serious 1)."""
    refused(
        ["search", "--data", wide_csv], capsys, tmp_path, r"proposes [\d,]+ candidates.*--variables"
    )


def test_many_outer_splits_are_refused_by_their_estimate(grid_csv, tmp_path, capsys):
    """Audit case: --splits 100000 --inner-splits 2 (issue 31, serious 1): refused by the
    time estimate, which names --yes and the options that shrink it."""
    line = refused(
        ["search", "--data", grid_csv, "--splits", "100000", "--inner-splits", "2"],
        capsys, tmp_path, r"would take about .* more than the 15 min .*--yes",
    )  # fmt: skip
    assert "--splits (100,000)" in line


def test_many_inner_splits_are_refused_by_their_memory(grid_csv, tmp_path, capsys):
    """Audit case: --splits 3000 --inner-splits 3000 (issue 31, serious 1): nine million
    nested masks; the search never called the memory check the other commands make."""
    refused(
        ["search", "--data", grid_csv, "--splits", "3000", "--inner-splits", "3000", "--yes"],
        capsys, tmp_path, r"would need about .* of memory",
    )  # fmt: skip


class Stop(Exception):
    pass


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


def test_the_count_is_what_the_grammar_makes():
    """The cost model counts candidates without making them; the count must be exact."""
    X = {"H": np.array([1.0, 4, 16, 64] * 5), "omega": np.repeat([0.0, 1, 3, 7, 15], 4)}
    for g in (Grammar(), Grammar(terms=3, max_constants=6), Grammar(max_nonlinear=3)):
        made = generate(g, X)
        counted = count_candidates(g, X)
        by = {}
        for c in made:
            by[(c.n_constants, c.n_nonlinear)] = by.get((c.n_constants, c.n_nonlinear), 0) + 1
        assert by == counted


def test_repeated_grammar_entries_are_collapsed(tmp_path):
    """Audit case: a factors list repeating one kind 100,000 times reached 8.25 GiB (issue 31,
    serious 2): repeats are one entry."""
    g = Grammar(factors=["power"] * 100_000, variables=["H", "H", "omega"])
    assert g.factors == ("power",) and g.variables == ("H", "omega")
    p = tmp_path / "g.toml"
    p.write_text("factors = [" + ", ".join(['"log"'] * 100_000) + "]\n")
    assert load_grammar(p).factors == ("log",)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(factors=None), "factors: must be a list of names, got None"),
        (dict(variables=5), "variables: must be a list of names, got 5"),
        (dict(levels={"H": 1}), "levels: must be a list of names"),
    ],
)
def test_grammar_fields_of_the_wrong_kind(kwargs, match):
    """Audit cases: fr.Grammar(factors=None), fr.Grammar(variables=5) raised TypeError; a
    grammar file's ``levels = { H = 1 }`` was read as ["H"] (issue 31)."""
    with pytest.raises(FormError, match=match):
        Grammar(**kwargs)


def test_inner_splits_beyond_the_limit_name_their_option(grid_csv, tmp_path, capsys):
    """Audit minor: --inner-splits 100001 was refused as "--splits 100,001" (issue 31); the
    final choice makes twice as many splits, so the limit is half that of --splits."""
    refused(
        ["search", "--data", grid_csv, "--inner-splits", "100001"],
        capsys, tmp_path, r"--inner-splits 100,001: must be from 2 to 50,000",
    )  # fmt: skip


def test_small_search_still_runs(grid_csv, capsys):
    code, out, err = run(
        ["search", "--data", grid_csv, "--terms", "1", "--max-constants", "3", "--splits", "4",
         "--inner-splits", "3", "--jobs", "1", "--reference", "none"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "estimated" in err


def test_limit_error_is_a_documented_error():
    assert issubclass(LimitError, fr.FitrulesError)


def test_a_budget_without_a_final_choice_renders(grid_csv):
    """Audit case: ``search --objective abs_ls`` on losses that change sign raised
    ``KeyError: nan`` in render_search (issue 31, major): a budget with no final choice next
    to one with a choice holds NaN once pandas mixes None with names."""
    s = fr.search(str(grid_csv), terms=1, max_constants=3, splits=4, inner_splits=3,
                  references=[])  # fmt: skip
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


def test_a_reference_the_search_cannot_read_is_refused_before_the_plan(grid_csv, tmp_path,
                                                                       capsys):  # fmt: skip
    """Found by the CLI fuzzer's long run on this change: the refusal came after the plan
    line, so it was two lines (issue 31)."""
    refused(["search", "--data", grid_csv, "--variables", "omega", "--terms", "1",
             "--reference", "log_additive"], capsys, tmp_path, "reads \\['H'\\]")  # fmt: skip
