"""Tables on the command line: bad, odd, wide and extreme tables refused in one line or read,
users' tables, Parquet, names, scales."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from tables import user_table

import fitrules as fr
from conftest import MICRO, MU, composition_grid
from fitrules.model.grids import load_grid
from helpers import (
    bad_table,
    negative_keep,
    refused,
    run,
    snapshot,
    text_metric,
    write_file,
)

BAD = [
    (lambda t: ["--data", t / "missing.csv"], "missing.csv: file not found"),
    (lambda t: ["--data", bad_table(t, lambda d: d.drop(columns="loss"))], "no metric column"),
    (lambda t: ["--data", bad_table(t, text_metric(2, "n/a?"))], "holds text"),
    (lambda t: ["--data", bad_table(t, negative_keep(1, -1))], "keep must be in (0, 1]"),
    (
        lambda t: [
            "--data",
            bad_table(t, lambda d: d),
            "--form",
            "w(width) = L0 + a*width",
            "--forms",
            "composition",
        ],
        "reads variable 'width', which the grid lacks",
    ),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--form", "x = L0 + (("], "cannot parse"),
    (
        lambda t: ["--data", bad_table(t, lambda d: d), "--form", "x = __import__('os').getcwd()"],
        "not allowed",
    ),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--train-frac", "1.5"], "(0, 1)"),
    (
        lambda t: ["--data", bad_table(t, lambda d: d), "--train-frac", "0.15"],
        "has 5 constants but each split fits only 3",
    ),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--forms", "nope"], "unknown form 'nope'"),
    (
        lambda t: ["--data", bad_table(t, lambda d: d), "--where", "lr == 1"],
        "'lr', which is not a column",
    ),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--metric-range", "3,1"], "LO < HI"),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--metric-range", "a"], "expected LO,HI"),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--guard-span", "1"], "--guard-span 1"),
    (lambda t: ["--data", bad_table(t, lambda d: d), "--guard-se", "nan"], "--guard-se nan"),
]

SPLITS = ["--splits", "5"]


def _two_lrs() -> pd.DataFrame:
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] + 0.5)
    return pd.concat([a, b], ignore_index=True)


IGNORED = "ignored per-run columns (no form reads them; they label runs, not cells): "


@pytest.mark.parametrize("make_args, message", BAD)
def test_bad_input_one_line_exit_2_no_output(tmp_path, capsys, make_args, message):
    """Bad tables, forms or options make compare exit 2 in one line, writing no JSON or partial."""
    out = tmp_path / "out.json"
    code, stdout, err = run(["compare", "--splits", 5, "--json", out, *make_args(tmp_path)], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert not out.exists()
    assert list(tmp_path.glob("*.partial")) == [] and list(tmp_path.glob(".*partial")) == []


@pytest.mark.parametrize("old, new", [("seed", "loss"), ("keep", "H")])
def test_duplicated_header_is_refused(grid_csv, tmp_path, capsys, old, new):
    """A header naming a column twice is refused by fit and validate, naming that column."""
    lines = grid_csv.read_text().splitlines()
    lines[0] = lines[0].replace(old, new)
    write_file(grid_csv, "\n".join(lines) + "\n")
    line = refused(["fit", "--data", grid_csv, "--form", "composition"], capsys, tmp_path, "twice")
    assert repr(new) in line
    refused(["validate", grid_csv], capsys, tmp_path, "names column .* twice")


@pytest.mark.parametrize(
    "column, value, match",
    [
        ("H", np.inf, "'H' has inf in line 2; a condition of a run must be finite"),
        ("omega", 1e308, "'omega' has 1e\\+308 in line 2; a variable a form reads must be finite"),
        ("loss", -1.0, "'loss' has -1 in line 2; relative and log objectives need"),
        ("loss", 0.0, "'loss' has 0 in line 2"),
        ("loss", 1e308, "a finite metric must lie within"),
    ],
)
def test_impossible_values_in_a_grid(tmp_path, capsys, column, value, match):
    """An inf condition, a huge variable, or a metric <= 0 or huge is refused naming its line."""
    df = composition_grid()
    df[column] = df[column].astype(float)
    df.loc[0, column] = value
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    refused(["compare", "--data", path, *SPLITS, "--forms", "composition"], capsys, tmp_path, match)


@pytest.mark.parametrize("scale", [1e-300, 1e-30, 1e30])
def test_rel_ls_does_not_notice_the_scale(tmp_path, capsys, scale):
    """Losses times 1e-300 give the same fits (constants scaled) and no warning."""
    base, scaled = composition_grid(), composition_grid()
    scaled["loss"] *= scale
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    base.to_csv(a, index=False)
    scaled.to_csv(b, index=False)
    docs = []
    for path in (a, b):
        out = tmp_path / f"{path.stem}.json"
        code, _, err = run(
            [
                "compare",
                "--data",
                path,
                "--splits",
                "20",
                "--forms",
                "composition,omega_only",
                "--json",
                out,
            ],
            capsys,
        )
        assert code == 0 and err == "", err
        docs.append(json.loads(out.read_text()))
    ra, rb = docs[0]["results"], docs[1]["results"]
    assert [r["degenerate"] for r in ra] == [r["degenerate"] for r in rb]
    ea = [r["heldout_error"] for r in ra]
    eb = [r["heldout_error"] for r in rb]
    np.testing.assert_allclose(eb, ea, rtol=1e-5)
    L0a = docs[0]["full_fit"]["composition"]["constants"]["L0"]
    L0b = docs[1]["full_fit"]["composition"]["constants"]["L0"]
    assert L0b == pytest.approx(L0a * scale, rel=1e-6)


def test_parquet_without_an_engine_is_one_line(tmp_path, capsys, monkeypatch):
    """Parquet with no engine installed is refused in one line naming pyarrow."""

    def no_engine(*a, **k):
        raise ImportError("Unable to find a usable engine;\ntried using: 'pyarrow'.\nmore\nlines")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    path = write_file(tmp_path / "g.parquet", b"PAR1")
    refused(["validate", path], capsys, tmp_path, "cannot read Parquet here .*pyarrow")


def test_tokenizer_error_is_one_line(tmp_path, capsys):
    """A CSV line with too many fields is refused in one line saying how many."""
    path = write_file(tmp_path / "t.csv", "a,b\n1,2\n1,2,3\n")
    refused(["validate", path], capsys, tmp_path, "Expected 2 fields in line 3, saw 3\\)$")


@pytest.mark.parametrize(
    "cells, match",
    [(3, "the grid has only 3 cells"), (6, r"--train-frac 0\.75 or more")],
)
def test_train_frac_advice_is_possible(tmp_path, capsys, cells, match):
    """A grid too small for the splits is refused with advice that can be followed."""
    rows = [{"H": 2**i, "omega": i % 3, "seed": 0, "loss": 2 + 0.01 * i} for i in range(cells)]
    path = tmp_path / "g.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    line = refused(
        ["compare", "--data", path, "--forms", "additive", *SPLITS], capsys, tmp_path, match
    )
    assert "1.48" not in line and "1.50" not in line


def test_no_warning_reaches_stderr_for_extreme_values(tmp_path, capsys):
    """Losses near 1e90 run compare with nothing on stderr and no file written."""
    df = composition_grid()
    df["loss"] = df["loss"] * 1e90
    path = tmp_path / "g.csv"
    df.to_csv(path, index=False)
    before = snapshot(tmp_path)
    code, _, err = run(["compare", "--data", path, *SPLITS], capsys)
    assert code == 0 and err == "", err
    assert snapshot(tmp_path) == before
    assert not os.environ.get("PYTHONWARNINGS")


def test_an_integer_beyond_double_precision_in_a_grid(tmp_path, capsys):
    """An integer beyond double precision is refused in a short line, its digits elided."""
    head = "H,keep,loss,spec,spec_sha256\n1,1,2,t,0\n"
    path = write_file(tmp_path / "g.csv", head + "9" * 400 + ",1,2,t,0\n")
    (tmp_path / "g.manifest.json").write_text('{"spec_sha256": "0"}')  # a harness table
    line = refused(["validate", path], capsys, tmp_path, "column 'H' has 9+\\.\\.\\.9+ in line 3")
    assert len(line) < 200


def test_a_derived_column_must_be_finite(grid_csv, tmp_path, capsys):
    """A --derive giving nan is refused in one line naming the line it fails on."""
    refused(
        ["validate", grid_csv, "--derive", "z = log(-H)"],
        capsys,
        tmp_path,
        "gives nan in line 2 .* must be finite",
    )


def test_values_on_scales_too_far_apart_for_one_unit(tmp_path, capsys):
    """A transfer from a grid at 1e-300 to one at 1e90: no common unit; no warning either."""
    import warnings

    tiny, huge = composition_grid(), composition_grid()
    tiny["loss"] *= 1e-300
    huge["loss"] *= 1e90
    huge = huge[huge["H"] <= 4]  # fewer cells: the median, and the unit, come from the tiny ones
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    tiny.to_csv(a, index=False)
    huge.to_csv(b, index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = run(
            ["compare", "--split", "transfer", "--fit-data", a, "--test-data", b]
            + ["--data", a, "--forms", "additive"],
            capsys,
        )
    assert code == 0 and err == "", err
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []


def test_micro_sign_column_is_read_as_typed(micro_csv, capsys):
    """The audit's command: the column is read, not pooled, and no constant μ appears."""
    code, out, err = run(
        ["fit", "--data", micro_csv, "--form", f"m = L0 + a*omega*({MICRO}/16)**b"], capsys
    )
    assert code == 0, err
    assert "in 20 cells" in out and "pooled" not in out
    f = fr.fit(str(micro_csv), f"m = L0 + a*omega*({MICRO}/16)**b")
    assert set(f.constants) == {"L0", "a", "b"}
    assert f.form.bound_variables == ("omega", MICRO)
    assert abs(f.constants["b"] - 0.5) < 0.05


def test_greek_mu_against_a_micro_sign_column_names_both(micro_csv, tmp_path, capsys):
    """A form's Greek mu against a micro-sign column is refused, naming both code points."""
    line = refused(
        ["fit", "--data", micro_csv, "--form", f"m = L0 + a*omega*({MU}/16)**b"],
        capsys, tmp_path, "look alike",
    )  # fmt: skip
    assert "U+03BC GREEK SMALL LETTER MU" in line and "U+00B5 MICRO SIGN" in line


def test_a_parquet_index_is_a_column(tmp_path, capsys):
    """A Parquet file's named index is read as a column (here one that looks like a factor)."""
    pytest.importorskip("pyarrow")
    _two_lrs().set_index("lr").to_parquet(tmp_path / "g.parquet")
    code, out, err = run(["fit", "--data", tmp_path / "g.parquet", "--form", "composition"],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "'lr' varies within cells and looks like a factor" in out


def test_levels_that_differ_by_rounding_are_reported(tmp_path, capsys):
    """Levels of lr that differ only by rounding are refused in one line naming lr."""
    df = _two_lrs()
    df["lr"] = df["lr"] * (1 + 1e-9 * np.arange(len(df)))
    df.to_csv(tmp_path / "g.csv", index=False)
    line = refused(["fit", "--data", tmp_path / "g.csv", "--form", "composition"], capsys,
                   tmp_path, "differ only by rounding")  # fmt: skip
    assert "differ in 'lr'" in line


def test_parquet_float16_columns_are_read(tmp_path, capsys):
    """Parquet columns of float16 are read and fitted."""
    pytest.importorskip("pyarrow")
    df = composition_grid().astype({"H": "float16", "keep": "float16", "omega": "float16"})
    df.to_parquet(tmp_path / "g.parquet")
    code, _, err = run(["fit", "--data", tmp_path / "g.parquet", "--form", "composition"], capsys)
    assert code == 0, err


def test_parquet_list_columns_are_refused(tmp_path, capsys):
    """A Parquet column holding lists is refused in one line: one value per cell."""
    pytest.importorskip("pyarrow")
    composition_grid().assign(tags=[[1, 2]] * 60).to_parquet(tmp_path / "g.parquet")
    refused(["validate", tmp_path / "g.parquet"], capsys, tmp_path,
            "column 'tags' holds a .* in line 2; a results table holds one value")  # fmt: skip


def test_line_numbers_count_quoted_newlines_and_blank_lines(tmp_path, capsys):
    """A refusal's line number counts quoted newlines and blank lines as the file's lines."""
    path = tmp_path / "q.csv"
    path.write_text('H,omega,seed,loss,note\n1,0,0,2.1,"a\nb"\n\n4,1,0,oops,c\n')
    refused(["validate", path], capsys, tmp_path, r"'oops' in line 5\)")


def test_mixing_errors_name_a_bounded_number_of_levels(grid_csv, tmp_path, capsys):
    """A per-run label and a refusal over 60 levels of lr are each named in a bounded line."""
    df = composition_grid().assign(job_id=range(60))
    df["job_id"] = df["job_id"].astype(str)
    df.to_csv(grid_csv, index=False)
    # a per-run label is ignored and named once (issue 21), on a line of bounded length
    code, out, err = run(["fit", "--data", grid_csv, "--form", "composition"], capsys)
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if "job_id" in x]
    assert "ignored" in line and len(line) < 400
    # a mixing refusal lists a bounded number of levels
    df["lr"] = 3e-4 * (1 + 1e-9 * np.arange(60))
    df.drop(columns="job_id").to_csv(grid_csv, index=False)
    line = refused(["fit", "--data", grid_csv, "--form", "composition"], capsys, tmp_path,
                   r"differ in 'lr' \(.*\.\.\. \(60 levels\)\)")  # fmt: skip
    assert len(line) < 400


def test_a_wide_table_gives_no_pandas_warning(tmp_path, capsys):
    """A table of 120 columns runs compare with --derive and no pandas warning."""
    df = composition_grid()
    extra = pd.DataFrame({f"x{i}": np.full(len(df), i) for i in range(115)})
    pd.concat([df, extra], axis=1).to_csv(tmp_path / "w.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, _, err = run(["compare", "--data", tmp_path / "w.csv", "--splits", "5",
                            "--derive", "z = H*2", "-q"], capsys)  # fmt: skip
    assert code == 0, err


def test_a_table_whose_every_run_is_set_aside_is_one_line(tmp_path, capsys):
    """A table whose every run has a non-finite metric is refused: no run left to use."""
    # found by the fuzzer: validate raised IndexError when no run was left
    path = tmp_path / "g.csv"
    path.write_text("H,omega,seed,loss\n1,0,0,inf\n2,1,0,nan\n")
    refused(["validate", path], capsys, tmp_path, r"no run left to use: .* \(2 non-finite metric\)")


def test_an_infinite_condition_is_refused(grid_csv, tmp_path, capsys):
    """An inf in a condition column is refused by validate, naming the column and line."""
    # found by the long fuzz run: validate printed a level 'inf'
    df = composition_grid().assign(lr=3e-4)
    df.loc[5, "lr"] = np.inf
    df.to_csv(grid_csv, index=False)
    refused(["validate", grid_csv], capsys, tmp_path, r"column 'lr' has inf in line 7")


def test_every_command_runs_on_a_users_table(user_csv, tmp_path, capsys, monkeypatch):
    """Every command runs on a user's table with --seed-col, naming the per-run columns ignored."""
    monkeypatch.chdir(tmp_path)
    data = ["--data", user_csv, "--seed-col", "run_seed"]
    ignored = IGNORED + "run_name, timestamp, path"
    code, out, err = run(["validate", *data], capsys)
    assert code == 0, err
    assert "seed column: run_seed" in out and "M=0.07" in out
    assert (
        "per-run columns (a different label in every run; ignored): run_name, timestamp, path"
        in out
    )
    forms = ["--forms", "composition,additive"]
    code, out, err = run(["compare", *data, *forms, "--splits", 20, "--json", "c.json"], capsys)
    assert code == 0, err
    assert ignored in out
    saved = json.loads((tmp_path / "c.json").read_text())["data"]
    assert saved["ignored_columns"] == ["run_name", "timestamp", "path"]
    assert saved["seed_column"] == "run_seed" and saved["filtered_out"] == 0
    code, out, err = run(["fit", *data, "--form", "composition"], capsys)
    assert code == 0, err
    assert ignored in out
    code, out, err = run(
        ["design", *data, *forms, "--budget", 6, "--design-splits", 20, "--resamples", 20],
        capsys,
    )
    assert code == 0, err
    assert ignored in out and "--seed-col run_seed" in out  # the loop's commands carry it
    ledger = tmp_path / "l.jsonl"
    for at in ("H=16,keep=0.25", "H=4,keep=0.5"):
        predict = ["predict", *data, "--form", "composition", "--at", at, "--ledger", ledger]
        code, out, err = run([*predict, "--resamples", 20], capsys)
        assert code == 0, err
        assert ignored in out
    code, out, err = run(["score", *data, "--ledger", ledger], capsys)
    assert code == 0, err
    assert ignored in out and "fitted on this data: not a test" in out


def test_a_factor_like_column_is_pooled_and_reported(tmp_path, capsys):
    """A column varying within cells is pooled, reported, and its suggested filter works."""
    a, b = user_table(), user_table()
    a["opt name"], b["opt name"] = "adam", "lion"
    b["run_name"] = b["run_name"] + "-b"
    path = tmp_path / "two.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    grid = load_grid(path, seed_col="run_seed")
    cols = grid.run_columns(["H", "omega"])
    assert cols["pooled"] == {"opt name": ["adam", "lion"]}
    assert "keep" not in cols["pooled"]  # a function of omega: never varies within a cell
    code, out, err = run(
        ["fit", "--data", path, "--seed-col", "run_seed", "--form", "composition"], capsys
    )
    assert code == 0, err
    (note,) = [line for line in out.splitlines() if "looks like a factor" in line]
    assert "'opt name' varies within cells" in note and "each cell pools its levels" in note
    # the suggested filter is a valid expression (the name has a space: backticks)
    suggestion = note.split('filter with where "')[1].split('"')[0]
    assert suggestion == "`opt name` == 'adam'"
    code, out, err = run(["validate", path, "--seed-col", "run_seed", "--where", suggestion],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert "filtered out by --where: 60; runs kept: 60" in out


def test_rows_filtered_out_are_counted_in_text_and_json(user_csv, tmp_path, capsys):
    """Rows that --where filters out are counted in the text and in the JSON."""
    j = tmp_path / "f.json"
    code, out, err = run(
        ["fit", "--data", user_csv, "--seed-col", "run_seed", "--where", "H > 1",
         "--form", "composition", "--json", j], capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(j.read_text())["data"]["filtered_out"] == 15
    code, out, err = run(
        ["fit", "--data", user_csv, "--seed-col", "run_seed", "--where", "H > 1",
         "--form", "composition"], capsys)  # fmt: skip
    assert "filtered out by where: 15 rows" in out
