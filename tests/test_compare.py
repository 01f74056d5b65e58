import numpy as np
import pytest
from scipy import stats

from conftest import TRUTH
from fitrules.engine.stats import paired_verdict
from fitrules.jobs.compare import compare
from fitrules.model.forms import BUILTIN_FORMS
from fitrules.model.grids import load_grid
from fitrules.model.splits import RandomSplit


def test_true_rule_beats_a_wrong_one_on_held_out_cells(synthetic_csv):
    grid = load_grid(synthetic_csv)
    cmp = compare(
        grid,
        [BUILTIN_FORMS["composition"], BUILTIN_FORMS["omega_only"]],
        RandomSplit(60, 1 / 3, seed=1),
    )
    row = cmp.paired.iloc[0]
    assert row["a"] == "composition"
    assert row["a_better"] > 0.9 * row["n"]
    summary = cmp.summary.set_index("form")
    assert summary.loc["composition", "median_pct"] < summary.loc["omega_only", "median_pct"]
    full = cmp.full_fits["composition"].constants
    assert abs(full["b"] - TRUTH["b"]) < 0.05


def test_heldout_error_is_recomputable_from_constants(synthetic_csv):
    grid = load_grid(synthetic_csv)
    cmp = compare(grid, [BUILTIN_FORMS["composition"]], RandomSplit(5, 1 / 3, seed=0))
    masks = RandomSplit(5, 1 / 3, seed=0).masks(len(cmp.cells))
    t = cmp.cells.table
    for _, row in cmp.results.iterrows():
        c = row["constants"]
        test = t[~masks[row["split"]]]
        pred = c["L0"] + c["a"] * test.omega * (test.H / 16) ** c["b"]
        want = 100 * np.mean(np.abs(pred - test.value) / test.value)
        assert abs(row["heldout_error_pct"] - want) < 1e-9


def test_paired_verdict_counts_and_corrected_t():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    b = np.array([1.5, 2.5, 3.0, 3.0, 6.0])
    v = paired_verdict(a, b, n_train=7, n_test=13)
    assert (v["a_better"], v["b_better"], v["ties"], v["n"]) == (3, 1, 1, 5)
    assert v["median_diff_pct"] == -0.5
    # by hand: log ratios, variance inflated by 1/J + n_test/n_train, t with J - 1 df
    d = np.log(a / b)
    se = np.sqrt(d.var(ddof=1) * (1 / 5 + 13 / 7))
    assert v["t"] == pytest.approx(d.mean() / se, rel=1e-12)
    assert v["p"] == pytest.approx(2 * stats.t.sf(abs(d.mean() / se), 4), rel=1e-12)
    q = stats.t.ppf(0.975, 4)
    assert v["ratio_ci"] == pytest.approx(np.exp([d.mean() - q * se, d.mean() + q * se]))
    assert v["ratio"] == pytest.approx(np.exp(d.mean()))
    # without split sizes (structured protocols) no test over splits is made
    assert paired_verdict(a, b)["p"] is None


def test_compare_can_hold_out_seed_ids_and_names_both_protocols():
    """Issue 28: held out by cells alone, held-out error misses the grid's seed offset; the
    cells-and-seeds option fits split s outside seed fold s mod 3 and scores the fold."""
    import pytest

    from fitrules.base.errors import SplitError
    from fitrules.jobs.compare import compare
    from fitrules.model.forms import BUILTIN_FORMS
    from fitrules.model.grids import default_grid, load_grid
    from fitrules.model.splits import RandomSplit

    path, where = default_grid()
    g = load_grid(path, where=where)
    forms = [BUILTIN_FORMS["composition"], BUILTIN_FORMS["additive"]]
    a = compare(g, forms, RandomSplit(12, 1 / 3, 0))
    b = compare(g, forms, RandomSplit(12, 1 / 3, 0), seeds="cells-and-seeds")
    assert a.settings["descriptive_protocol"]["held_out"].startswith("cells: every run")
    assert b.settings["descriptive_protocol"]["held_out"].startswith("cells and seeds: 3 folds")
    assert not np.allclose(a.results["heldout_error_pct"], b.results["heldout_error_pct"])
    # the verdict protocol stays on cells: the same test either way
    assert a.paired["p"].iloc[0] == b.paired["p"].iloc[0]
    with pytest.raises(SplitError, match="--seeds 'bogus' is unknown"):
        compare(g, forms, RandomSplit(4, 1 / 3, 0), seeds="bogus")


def test_seeds_option_holds_out_seed_ids_and_says_so(capsys):
    """Issue 28 left the cells-and-seeds protocol without a command-line flag."""
    from fitrules.cli import main

    assert main(["compare", "--splits", "12", "--forms", "composition,omega_only", "--seeds",
                 "cells-and-seeds", "--json", "-"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert '"held_out": "cells and seeds: 3 folds of 1 of 3 seed ids' in out
    assert main(["compare", "--splits", "12", "--forms", "composition,omega_only"]) == 0

    def protocol_line(out: str) -> str:
        return next(x for x in out.splitlines() if x.startswith("splits (descriptive protocol)"))

    assert "held out by" not in protocol_line(capsys.readouterr().out)
    assert main(["compare", "--splits", "12", "--forms", "composition", "--seeds",
                 "cells-and-seeds"]) == 0  # fmt: skip
    assert "held out by cells and seeds" in protocol_line(capsys.readouterr().out)
