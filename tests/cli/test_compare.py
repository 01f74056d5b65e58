"""fitrules compare: the ranked table and conclusion, paired verdicts, identical JSON,
inline forms, protocols, transfer, families, progress."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.cli import main
from fitrules.model.forms import DEFAULT_FORMS
from fitrules.model.grids import default_grid, load_grid
from fitrules.views.text import rank_value
from helpers import refused, run

SPLITS = 30  # the default grid and forms; few splits, to stay fast

COMP_H = "comp_h = L0[H] + a*omega*(H/16)**b"

FIVE = ["composition", "additive", "free_omega", "omega_only", "log_additive"]


@pytest.fixture(scope="module")
def grid():
    path, where = default_grid()
    return load_grid(path, where=where)


def test_compare_prints_summary_and_paired_verdicts(synthetic_csv, capsys):
    """compare prints the ranked forms and paired verdicts by corrected resampled t with Holm."""
    forms = ["--forms", "composition,additive,omega_only"]
    code, out, err = run(["compare", "--data", synthetic_csv, "--splits", 30, *forms], capsys)
    assert code == 0, err
    assert "composition" in out and "valid for both" in out
    assert "corrected resampled t" in out and "Holm" in out and "Wilcoxon" not in out


def test_same_command_twice_gives_byte_identical_json(synthetic_csv, tmp_path, capsys):
    """The same compare twice writes byte-identical JSON holding every documented key."""
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p in paths:
        code, _, err = run(
            ["compare", "--data", synthetic_csv, "--splits", 25, "--json", p], capsys
        )
        assert code == 0, err
    assert paths[0].read_bytes() == paths[1].read_bytes()
    doc = json.loads(paths[0].read_text())
    assert {"results", "summary", "paired", "data"} <= set(doc)
    row = doc["results"][0]
    assert {"split", "form", "heldout_error", "degenerate", "reasons", "constants"} <= set(row)
    assert {
        "splits_used",
        "degenerate_splits",
        "wild_splits",
        "median",
        "trimmed_mean",
        "p90",
        "worst_split",
        "worst_cell",
    } <= set(doc["summary"][0])
    assert {"a", "b", "a_better", "b_better", "ties", "n", "p", "p_holm", "ratio_ci"} <= set(
        doc["paired"][0]
    )
    assert {"train_cells", "cond", "wild", "span_ratio", "max_rel_se"} <= set(row)
    assert {"path", "sha256", "runs", "cells"} <= set(doc["data"])
    assert len(doc["results"]) == 25 * len(DEFAULT_FORMS)


def test_every_form_is_scored_on_the_same_splits(synthetic_csv, tmp_path, capsys):
    """Every form is scored on the same splits; paired wins, losses and ties add up to n."""
    out = tmp_path / "r.json"
    run(
        [
            "compare",
            "--data",
            synthetic_csv,
            "--splits",
            10,
            "--forms",
            "composition,omega_only",
            "--json",
            out,
        ],
        capsys,
    )
    res = pd.DataFrame(json.loads(out.read_text())["results"])
    # paired verdict counts add up to the splits valid for both
    doc = json.loads(out.read_text())
    p = doc["paired"][0]
    assert p["a_better"] + p["b_better"] + p["ties"] == p["n"]
    assert sorted(res.groupby("form")["split"].apply(list).iloc[0]) == list(range(10))


def test_inline_form_and_keep_degenerate(synthetic_csv, capsys):
    """An inline --form runs beside a named one with --keep-degenerate and is listed."""
    code, out, err = run(
        ["compare", "--data", synthetic_csv, "--splits", 10, "--form",
         "mine = L0 + a*omega**c*(H/16)**b", "--forms", "composition", "--keep-degenerate"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "mine" in out


def test_the_first_twelve_lines_hold_the_ranked_table_and_the_conclusion(capsys):
    """The first twelve lines hold the conclusion and every form ranked by median held-out error."""
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
    medians = [rank_value(r) for r in c.ranking.to_dict("records")]
    assert medians == sorted(medians)
    assert head[0].startswith(f"{rows[0]} predicts the held-out cells best")


def test_forms_from_forms_toml_left_out_are_named(tmp_path, monkeypatch, capsys):
    """Forms in forms.toml that --forms leaves out are named in the output, not compared."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text('mine = "L0 + a*omega"\n')
    code, out, err = run(["compare", "--splits", 4, "--forms", "composition,omega_only"], capsys)
    assert code == 0, err
    assert "forms.toml defines mine, not compared here: name it with --forms" in out
    c = fr.compare(forms=["composition", "mine"], splits=4)
    assert not any("forms.toml defines" in w for w in c.warnings)


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_compare_progress_counts_splits_and_says_when_a_report_is_written(tmp_path, capsys):
    """compare --progress counts splits, not fits, and says when it is writing the report.

    The bar counted fits ("5632/120000" for 10,000 splits) with an ETA swinging from 0:27
    to 14:45; nothing showed while a report was written."""
    code, _, err = run(["compare", "--splits", 12, "--forms", "composition,omega_only",
                        "--progress", "--report", tmp_path / "r"], capsys)  # fmt: skip
    assert code == 0, err
    assert "fitting 2 forms" in err and "/12 splits" in err and "/48" not in err
    assert f"writing the report (tables and figures) to {tmp_path / 'r'}" in err


def test_seeds_option_holds_out_seed_ids_and_says_so(capsys):
    """``compare --seeds cells-and-seeds`` holds out seed ids too, and the protocol says so.

    Issue 28 left the cells-and-seeds protocol without a command-line flag."""
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


def test_the_issue_command_runs_and_flags_unfitted_levels(capsys):
    """A form with a constant per level of H runs and says which levels no training cell fits."""
    from fitrules.cli import main

    code = main(["compare", "--form", COMP_H, "--forms", "composition,comp_h", "--splits", "30"])
    out = capsys.readouterr().out
    assert code == 0
    assert "comp_h" in out and "composition" in out
    assert "has no training cell" in out and "cannot be predicted" in out


def test_compare_with_a_name_that_is_no_column_is_answered(capsys, tmp_path):
    """A form naming a variable that is no column is answered with an exit code, no traceback."""
    code, out, err = run(["compare", "--rename", "omega=w", "--splits", "2",
                          "--form", "x = L0 + a*omega*(Hc/H)**b"], capsys)  # fmt: skip
    assert "Traceback" not in err
    assert code in (0, 2), err


def test_one_form_prints_no_empty_paired_section(synthetic_csv, capsys):
    """compare of one form prints no paired section."""
    code, out, err = run(
        ["compare", "--data", synthetic_csv, "--splits", 10, "--forms", "composition"], capsys
    )
    assert code == 0, err
    assert "Paired" not in out


def test_splits_with_a_structured_protocol_is_refused(synthetic_csv, capsys):
    """--splits with a structured --split protocol is refused: it applies to random splits only."""
    args = ["compare", "--data", synthetic_csv, "--split", "leave-one-level-out:H"]
    code, _, err = run([*args, "--splits", 50], capsys)
    assert code == 2 and "applies to random splits only" in err
    assert run(args, capsys)[0] == 0


def test_transfer_refuses_grids_of_different_metrics(tmp_path, capsys):
    """A transfer fitted on 'loss' and scored on 'val_loss' is refused in one line."""
    composition_grid().to_csv(tmp_path / "a.csv", index=False)
    composition_grid(rng_seed=1).rename(columns={"loss": "val_loss"}).to_csv(
        tmp_path / "b.csv", index=False
    )
    refused(
        ["compare", "--split", "transfer", "--fit-data", tmp_path / "a.csv", "--test-data",
         tmp_path / "b.csv", "--forms", "composition"],
        capsys, tmp_path, "fitted on 'loss' but .* scored on 'val_loss'",
    )  # fmt: skip


def test_transfer_fits_one_grid_and_scores_another(tmp_path, capsys):
    """--split transfer fits one grid and scores the other: a 0.2 offset gives about 10% error."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    composition_grid(rng_seed=1).to_csv(a, index=False)
    composition_grid(rng_seed=2, truth={"L0": 2.0, "a": 0.012, "b": 0.5}).to_csv(b, index=False)
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "compare",
                "--split",
                "transfer",
                "--fit-data",
                str(a),
                "--test-data",
                str(b),
                "--forms",
                "composition",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    (row,) = doc["results"]
    # the test grid sits 0.2 below the fitted one: the error is about 0.2 / 2.0 = 10%
    assert row["heldout_error"] == pytest.approx(10, rel=0.05)
    assert doc["settings"]["protocol"].startswith("transfer:")
    assert doc["data"]["test"]["cells"] == 20


def test_several_protocols_are_reported_separately(synthetic_csv, tmp_path, capsys):
    """Several --split protocols each get their own JSON entry and report sections."""
    out, rep = tmp_path / "p.json", tmp_path / "rep"
    assert (
        main(
            [
                "compare",
                "--data",
                str(synthetic_csv),
                "--splits",
                "20",
                "--split",
                "random",
                "--split",
                "leave-one-level-out:H",
                "--split",
                "extrapolate:H",
                "--forms",
                "composition,omega_only",
                "--json",
                str(out),
                "--report",
                str(rep),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert [p["settings"]["protocol"] for p in doc["protocols"]] == [
        "random",
        "leave-one-level-out:H",
        "extrapolate:H",
    ]
    md = (rep / "report.md").read_text()
    assert md.count("noise floor of") >= 6
    for png in rep.glob("*.png"):
        assert png.stat().st_size > 10_000


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_against_shrinks_the_family(grid, capsys):
    """--against compares one form with each other, so Holm corrects over 4 pairs, not 10."""
    code, out, err = run(
        ["compare", "--splits", "300", "--forms", ",".join(FIVE), "--against", "composition",
         "--json", "-", "-q"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["comparisons"] == 4 and doc["settings"]["family"] == "named pairs"
    rows = {(r["a"], r["b"]): r for r in doc["paired"]}
    assert set(rows) == {("composition", n) for n in FIVE[1:]}
    # against log_additive: Holm over 4 instead of 10 lets p = 0.016 through
    assert rows[("composition", "log_additive")]["p_holm"] < 0.05


def test_text_says_how_many_comparisons(capsys):
    """The text names the number of comparisons Holm covers and the cells fitted per protocol."""
    code, out, _ = run(
        ["compare", "--splits", "20", "--pairs", "composition:additive,omega_only:composition"],
        capsys,
    )
    assert code == 0
    assert "Holm across 2 comparisons (named pairs)" in out
    assert "verdict protocol, 20 random splits, 18 of 20 cells fitted" in out
    assert "splits (descriptive protocol): 20 random, 7 of 20 cells fitted" in out


@pytest.mark.parametrize(
    "args, match",
    [
        (["--pairs", "composition:nope"], "no form 'nope'"),
        (["--against", "nope"], "--against 'nope'"),
        (["--pairs", "composition:additive", "--against", "composition"], "give one"),
        (["--verdict-train-frac", "1.2"], "verdict-train-frac"),
    ],
)
def test_bad_families_are_refused(args, match, tmp_path, capsys):
    """An unknown form in --pairs or --against, both at once, or a bad train fraction: refused."""
    refused(
        ["compare", "--splits", "10", *args, "--json", tmp_path / "o.json"],
        capsys,
        tmp_path,
        match,
    )


def test_keep_degenerate_labels_say_all(grid, capsys):
    """With --keep-degenerate the table and pairs say "all" splits; without, "valid"."""
    code = main(
        ["compare", "--splits", "20", "--keep-degenerate", "--forms", "composition,additive"]
    )
    out = capsys.readouterr().out
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("form "))
    assert " all " in header and " valid " not in header
    assert "valid for both" not in out and "all splits (degenerate kept)" in out
    code = main(["compare", "--splits", "20", "--forms", "composition,additive"])
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("form "))
    assert " valid " in header and "valid for both" in out


def test_forms_may_name_an_inline_form(capsys):
    """--forms may name an inline --form; the pairs follow the order --forms gives."""
    code, out, err = run(["compare", "--splits", 10, "--form", "x = L0 + a*omega*(H/16)**b",
                          "--forms", "composition,x"], capsys)  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    dashes = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    rows = [ln.split()[0] for ln in lines[dashes + 1 : dashes + 3]]
    assert set(rows) == {"composition", "x"}  # the table ranks them by held-out error
    assert "  composition vs x: " in out  # the pairs follow the order --forms gives
