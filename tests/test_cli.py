import json

import numpy as np
import pandas as pd
import pytest

from conftest import composition_grid
from fitrules.cli import main
from fitrules.model.forms import DEFAULT_FORMS
from helpers import harness, write_table


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_compare_prints_summary_and_paired_verdicts(synthetic_csv, capsys):
    code, out, err = run(
        [
            "compare",
            "--data",
            synthetic_csv,
            "--splits",
            30,
            "--forms",
            "composition,additive,omega_only",
        ],
        capsys,
    )
    assert code == 0, err
    assert "composition" in out and "valid for both" in out
    assert "corrected resampled t" in out and "Holm" in out and "Wilcoxon" not in out


def test_same_command_twice_gives_byte_identical_json(synthetic_csv, tmp_path, capsys):
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
    assert {"split", "form", "heldout_error_pct", "degenerate", "reasons", "constants"} <= set(row)
    assert {
        "splits_used",
        "degenerate_splits",
        "wild_splits",
        "median_pct",
        "trimmed_mean_pct",
        "p90_pct",
        "worst_split_pct",
        "worst_cell_pct",
    } <= set(doc["summary"][0])
    assert {"a", "b", "a_better", "b_better", "ties", "n", "p", "p_holm", "ratio_ci"} <= set(
        doc["paired"][0]
    )
    assert {"train_cells", "cond", "wild", "span_ratio", "max_rel_se"} <= set(row)
    assert {"path", "sha256", "runs", "cells"} <= set(doc["data"])
    assert len(doc["results"]) == 25 * len(DEFAULT_FORMS)


def test_every_form_is_scored_on_the_same_splits(synthetic_csv, tmp_path, capsys):
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
    code, out, err = run(
        [
            "compare",
            "--data",
            synthetic_csv,
            "--splits",
            10,
            "--form",
            "mine = L0 + a*omega**c*(H/16)**b",
            "--forms",
            "composition",
            "--keep-degenerate",
        ],
        capsys,
    )
    assert code == 0, err
    assert "mine" in out


def test_fit_prints_constants(synthetic_csv, capsys):
    code, out, err = run(["fit", "--data", synthetic_csv, "--form", "composition"], capsys)
    assert code == 0, err
    assert "L0" in out and "diagnostics: none" in out


def test_validate_summary(synthetic_csv, capsys):
    code, out, _ = run(["validate", synthetic_csv], capsys)
    assert code == 0
    assert "cells: 20" in out and "H (4): 1, 4, 16, 64" in out


def test_forms_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["forms", "add", "mine", "L0 + a*omega**c"], capsys)
    assert code == 0 and (tmp_path / "forms.toml").exists()
    code, out, _ = run(["forms", "list"], capsys)
    assert "mine" in out and "composition" in out
    code, out, _ = run(["forms", "show", "additive"], capsys)
    assert "nonlinear constants" in out and "c, d" in out


def _bad_grid(tmp_path, mutate):
    df = mutate(composition_grid())
    return write_table(df, tmp_path / "bad.csv")


def _text_metric(df):
    df["loss"] = df["loss"].astype(object)
    df.loc[2, "loss"] = "n/a?"
    return df


def _neg_keep(df):
    df.loc[1, "keep"] = -1
    return harness(df)


BAD = [
    (lambda t: ["--data", t / "missing.csv"], "missing.csv: file not found"),
    (lambda t: ["--data", _bad_grid(t, lambda d: d.drop(columns="loss"))], "no metric column"),
    (lambda t: ["--data", _bad_grid(t, _text_metric)], "holds text"),
    (lambda t: ["--data", _bad_grid(t, _neg_keep)], "keep must be in (0, 1]"),
    (
        lambda t: [
            "--data",
            _bad_grid(t, lambda d: d),
            "--form",
            "w(width) = L0 + a*width",
            "--forms",
            "composition",
        ],
        "reads variable 'width', which the grid lacks",
    ),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--form", "x = L0 + (("], "cannot parse"),
    (
        lambda t: ["--data", _bad_grid(t, lambda d: d), "--form", "x = __import__('os').getcwd()"],
        "not allowed",
    ),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--train-frac", "1.5"], "(0, 1)"),
    (
        lambda t: ["--data", _bad_grid(t, lambda d: d), "--train-frac", "0.15"],
        "has 5 constants but each split fits only 3",
    ),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--forms", "nope"], "unknown form 'nope'"),
    (
        lambda t: ["--data", _bad_grid(t, lambda d: d), "--where", "lr == 1"],
        "'lr', which is not a column",
    ),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--metric-range", "3,1"], "LO < HI"),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--metric-range", "a"], "expected LO,HI"),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--guard-span", "1"], "--guard-span 1"),
    (lambda t: ["--data", _bad_grid(t, lambda d: d), "--guard-se", "nan"], "--guard-se nan"),
]


@pytest.mark.parametrize("make_args, message", BAD)
def test_bad_input_one_line_exit_2_no_output(tmp_path, capsys, make_args, message):
    out = tmp_path / "out.json"
    code, stdout, err = run(["compare", "--splits", 5, "--json", out, *make_args(tmp_path)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert not out.exists()
    assert list(tmp_path.glob("*.partial")) == [] and list(tmp_path.glob(".*partial")) == []


def test_argument_errors_exit_2_with_one_line(capsys):
    code, _, err = run(["compare", "--splits", "many"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        "fitrules compare: error: argument --splits: invalid int value: 'many'"
    ]


def test_default_grid_is_used_without_data(capsys):
    code, out, err = run(["validate"], capsys)
    assert code == 0, err
    assert "data/main.csv" in out and np.isfinite(1.0)
