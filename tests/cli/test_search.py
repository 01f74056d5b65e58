"""fitrules search: the report and forms it writes, its progress, limits counted before any
fit, refusals in one line."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from tables import nd_runs

from conftest import composition_grid
from fitrules.base.limits import MAX_SEARCH_CANDIDATES
from fitrules.cli import main
from helpers import refused, run


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
    """A grammar of too many candidates is refused before any is made, naming the options to cut.

    Audit case: terms 6, max_constants 12, max_nonlinear 3 on 2 variables ran 125 s with
    no plan line (issue 31, serious 1)."""
    line = refused(
        ["search", "--data", grid_csv, "--variables", "H,omega", "--terms", "6",
         "--max-constants", "12", "--max-nonlinear", "3", "--first-constants", "12"],
        capsys, tmp_path, rf"proposes 767,539 candidates, more than the {MAX_SEARCH_CANDIDATES:,}",
    )  # fmt: skip
    assert "--terms" in line and "--max-nonlinear" in line


@pytest.mark.timing  # "before it starts" is read off this process's CPU clock
@pytest.mark.parametrize("yes", [[], ["--yes"]], ids=["unconfirmed", "yes"])
def test_a_growing_grammar_over_the_cap_is_refused_before_its_first_step(
    grid_csv, tmp_path, capsys, monkeypatch, yes
):
    """Every step a growing budget may take counts towards the candidate cap, before anything
    runs and whatever --yes: from 4 constants up to 12 (--terms 6 --max-nonlinear 3), 767,539
    forms, is refused in one line, exit 2, within 20 s of CPU.

    Issue 61: the cap was checked one step at a time, and this search started its first step
    (1,380 forms), its plan line announcing 766,159 more."""
    from fitrules.jobs.search import job

    def started(*args, **kwargs):
        raise AssertionError("the search started")

    monkeypatch.setattr(job, "nested_masks", started)
    t0 = time.process_time()
    line = refused(
        ["search", "--data", grid_csv, "--variables", "H,omega", "--terms", "6",
         "--max-constants", "12", "--max-nonlinear", "3", *yes], capsys, tmp_path,
        rf"proposes 767,539 candidates up to 12 constants, more than the {MAX_SEARCH_CANDIDATES:,}",
    )  # fmt: skip
    assert time.process_time() - t0 < 20
    assert "--max-constants (12)" in line and "--first-constants" not in line


def test_default_grammar_on_a_wide_table_is_refused(wide_csv, tmp_path, capsys):
    """Product terms over a wide table's numeric columns are refused by count, naming --variables.

    Audit case: the default grammar on a table of 8 numeric columns (issue 31, serious 1),
    with product terms of two variables (since issue 41 the default for three or more
    variables is additive forms: 6,016 of them here, which run)."""
    refused(
        ["search", "--data", wide_csv, "--interactions", "2"], capsys, tmp_path,
        r"proposes [\d,]+ candidates.*--variables",
    )  # fmt: skip


def test_many_outer_splits_are_refused_by_their_estimate(grid_csv, tmp_path, capsys):
    """Audit case: --splits 100000 --inner-splits 2 (issue 31, serious 1): refused by the
    time estimate, which names --yes and the options that shrink it."""
    line = refused(
        ["search", "--data", grid_csv, "--splits", "100000", "--inner-splits", "2"],
        capsys, tmp_path, r"would take about .* more than the 15 min .*--yes",
    )  # fmt: skip
    assert "--splits (100,000)" in line


def test_many_inner_splits_are_refused_by_their_memory(grid_csv, tmp_path, capsys):
    """Nested splits needing too much memory are refused by the memory check, even with --yes.

    Audit case: --splits 3000 --inner-splits 3000 (issue 31, serious 1): nine million
    nested masks; the search never called the memory check the other commands make."""
    refused(
        ["search", "--data", grid_csv, "--splits", "3000", "--inner-splits", "3000", "--yes"],
        capsys, tmp_path, r"would need about .* of memory",
    )  # fmt: skip


def test_inner_splits_beyond_the_limit_name_their_option(grid_csv, tmp_path, capsys):
    """--inner-splits over 50,000 is refused by that name and limit.

    Audit minor: --inner-splits 100001 was refused as "--splits 100,001" (issue 31); the
    final choice makes twice as many splits, so the limit is half that of --splits."""
    refused(
        ["search", "--data", grid_csv, "--inner-splits", "100001"],
        capsys, tmp_path, r"--inner-splits 100,001: must be from 2 to 50,000",
    )  # fmt: skip


def test_small_search_still_runs(grid_csv, capsys):
    """A small search within the limits runs and prints its estimate."""
    code, out, err = run(
        ["search", "--data", grid_csv, "--terms", "1", "--max-constants", "3", "--factors",
         "linear,log", "--splits", "4", "--inner-splits", "3", "--jobs", "1", "--reference",
         "none"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "estimated" in err


def test_a_reference_the_search_cannot_read_is_refused_before_the_plan(grid_csv, tmp_path,
                                                                       capsys):  # fmt: skip
    """A --reference reading a variable not searched is refused in one line, before the plan line.

    Found by the CLI fuzzer's long run on this change: the refusal came after the plan
    line, so it was two lines (issue 31)."""
    refused(["search", "--data", grid_csv, "--variables", "omega", "--terms", "1",
             "--reference", "log_additive"], capsys, tmp_path, "reads \\['H'\\]")  # fmt: skip


@pytest.mark.parametrize("scheduler", ["0.5,", "tcp://127.0.0.1:1"])
def test_an_unreachable_scheduler_is_refused_before_the_plan(scheduler, grid_csv, tmp_path,
                                                             capsys):  # fmt: skip
    """Found by the CLI fuzzer's declared-value cases (issue 43): nothing answers at the
    address, and the refusal came after the plan line, so it was two lines."""
    pytest.importorskip("distributed")
    refused(["search", "--data", grid_csv, "--terms", "1", "--max-constants", "3",
             "--splits", "3", "--inner-splits", "2", "--reference", "none",
             "--scheduler", scheduler], capsys, tmp_path, "cannot connect")  # fmt: skip


def test_search_variable_with_one_value(tmp_path, capsys):
    """A search variable with one value is refused as such, naming the value, not as a seed.

    ``search --variables width`` (one value) was refused as a duplicate seed."""
    path = tmp_path / "w.csv"
    composition_grid().assign(width=64).to_csv(path, index=False)
    refused(["search", "--data", path, "--variables", "width"], capsys, tmp_path,
            "'width' has one value .*64.*columns that vary")  # fmt: skip


def test_levels_with_more_levels_than_the_budget(tmp_path, capsys):
    """--levels on a factor with too many levels for --max-constants is refused, naming both.

    ``--levels G`` with 500 levels ran without saying no such form fits the budget."""
    df = pd.DataFrame({"H": [1.0, 4.0, 16.0, 64.0] * 125, "G": range(500), "seed": 0})
    df["loss"] = 2 + 0.01 * df["H"]
    path = tmp_path / "lev.csv"
    df.to_csv(path, index=False)
    refused(["search", "--data", path, "--variables", "H", "--levels", "G"], capsys, tmp_path,
            "'G' has 500 levels.*--max-constants 7")  # fmt: skip


def test_cli_search_writes_report_and_forms(tmp_path, capsys):
    """search writes its report and the found forms, with their origin, to --forms-out."""
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


@pytest.mark.timing
def test_cli_search_progress_bar_starts_after_the_plan_line(capsys):
    """search --progress shows its bar only after the plan line, with no stray empty bar."""
    # a bar opened before the plan was printed left a stray "searching: 0it" line above it
    code = main(["search", "--terms", "1", "--max-constants", "3", "--factors", "power",
                 "--splits", "2", "--inner-splits", "2", "--jobs", "1", "--progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0
    plan = err.index("fitrules search:")
    assert "searching" in err[plan:] and "searching" not in err[:plan], err
    assert "searching: 0it" not in err  # not "10.0it/s", a rate that ends in 0


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
    """Bad terms, variables, factors, split or grammar: exit 2 in one line, nothing written."""
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


def test_a_pick_the_guard_names_is_shown_with_its_warning(tmp_path, capsys):
    """search warns when the extrapolation guard names its pick wild at --at; not without --at.

    Issue 29: the pick's extrapolation was called wild by compare and by nothing in the
    search. Log forms fitted on N <= 1e9 run away by N = 1e13."""
    path = tmp_path / "nd.csv"
    nd_runs().to_csv(path, index=False)
    argv = ["search", "--data", path, "--metric", "loss", "--terms", "2",
            "--max-constants", "3", "--factors", "log", "--splits", "6", "--inner-splits", "4",
            "--reference", "none"]  # fmt: skip
    code, out, err = run([*argv, "--at", "N=1e13,D=1e9"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("warning: the pick"))
    assert "named wild by the extrapolation guard" in line and "--at N=1e+13,D=1e+09" in line
    code, out, err = run(argv, capsys)  # no point beyond the grid: nothing to name
    assert code == 0, err and "warning: the pick" not in out


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_tie_exponents_reaches_the_grammar_from_the_line_and_from_a_file(grid_csv, tmp_path,
                                                                           capsys):  # fmt: skip
    """Issue 41: --tie-exponents adds the tied forms (free powers of H and omega, one term
    each: L0 + a1*(H/8)**e1 + a2*omega**e1 beside the two untied forms); a grammar file's
    tie_exponents is read, --no-tie-exponents overrides it, and a value that is not true or
    false is refused in one line."""
    import json

    base = ["search", "--data", grid_csv, "--splits", "2", "--inner-splits", "2", "--jobs",
            "1", "--reference", "none", "--json", "-", "--factors", "power", "--terms", "2",
            "--interactions", "1"]  # fmt: skip
    counts = {}
    toml = tmp_path / "g.toml"
    toml.write_text("tie_exponents = true\n")
    for name, extra in [("plain", []), ("tied", ["--tie-exponents"]),
                        ("file", ["--grammar", toml]),
                        ("overridden", ["--grammar", toml, "--no-tie-exponents"])]:  # fmt: skip
        code, out, err = run([*base, *extra], capsys)
        assert code == 0, err
        doc = json.loads(out)
        counts[name] = (doc["n_proposed"], doc["settings"]["grammar"]["tie_exponents"])
    assert counts == {"plain": (2, False), "tied": (3, True), "file": (3, True),
                      "overridden": (2, False)}  # fmt: skip
    toml.write_text('tie_exponents = "yes"\n')
    refused([*base, "--grammar", toml], capsys, tmp_path, "tie-exponents 'yes': must be true")


# the small search of tests/truth.py's SMALL, in flags
SMALL_FLAGS = ["--terms", "2", "--max-constants", "3", "--factors", "power,linear,log",
               "--splits", "6", "--inner-splits", "5", "--jobs", "1"]  # fmt: skip


def test_cli_form_is_a_candidate_and_is_picked_when_it_predicts_best(tmp_path, capsys):
    """A --form the grammar cannot write, and the truth, competes with the grammar's forms on
    the same outer errors and is picked; the search does not abstain on this grid."""
    from truth import OMEGA, H, runs_from_form

    from fitrules.model.forms import Form

    truth = Form("mine", "L0 + a/(1 + omega)", ("omega",))
    path = tmp_path / "runs.csv"
    runs_from_form(truth, {"L0": 2.0, "a": 0.3}, {"H": H, "omega": OMEGA}, seeds=3, cv=0.002,
                   seed=1).to_csv(path, index=False)  # fmt: skip
    code, out, _ = run(["search", "--data", path, "--variables", "H,omega", *SMALL_FLAGS,
                        "--form", "mine = L0 + a/(1 + omega)"], capsys)  # fmt: skip
    assert code == 0
    assert "the search picks 'L0 + a/(1 + omega)' (mine)" in out and "abstains" not in out


def test_cli_search_abstains_and_recommends_the_form_given(tmp_path, capsys):
    """On a grid with one cell off M's common level the command picks nothing, names M, and
    recommends the --form given, fitted on all cells; its JSON says the same."""
    from truth import ONE_OFF, one_off_runs

    path, out_json = tmp_path / "runs.csv", tmp_path / "s.json"
    one_off_runs().to_csv(path, index=False)
    code, out, _ = run(["search", "--data", path, "--variables", "N,M", *SMALL_FLAGS, "--form",
                        f"mine = {ONE_OFF.expression}", "--json", out_json], capsys)  # fmt: skip
    assert code == 0
    assert "The search abstains" in out and "cannot inform M" in out
    assert "Recommended: your form mine" in out and "the search picks" not in out
    a = json.loads(out_json.read_text())["abstention"]
    assert a["abstains"] and a["recommended"] == "mine" and list(a["unchecked"]) == ["M"]
