"""Issue 20: the minor defects, each reproduced first (see test_round_two.py for the nine
serious ones)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError, FormError, GridError
from helpers import refused, run

FAST_DESIGN = ["--design-splits", "10", "--resamples", "20"]


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "g.csv"
    composition_grid().to_csv(path, index=False)
    return path


# ------------------------------------------------------------------ design
def test_spec_out_on_a_grid_the_harness_did_not_write_is_refused(grid_csv, tmp_path, capsys):
    refused(["design", "--data", grid_csv, "--forms", "composition,additive", "--spec-out",
             tmp_path / "s.toml", *FAST_DESIGN], capsys, tmp_path,
            "--spec-out .* not written by fitrules simulate")  # fmt: skip
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_design_takes_forms_that_read_fewer_variables(tmp_path, capsys):
    code, out, err = run(["design", "--forms", "omega_only,composition", *FAST_DESIGN,
                          "--json", "-"], capsys)  # fmt: skip
    assert code == 0, err
    assert [f["name"] for f in json.loads(out)["forms"]] == ["omega_only", "composition"]


def test_an_inline_form_must_be_named_in_forms(tmp_path, capsys):
    refused(["design", "--forms", "composition,additive", "--form", "x = L0 + a*omega",
             *FAST_DESIGN], capsys, tmp_path, "'x' is not named in --forms")  # fmt: skip


def test_design_target_errors_name_target(tmp_path, capsys):
    refused(["design", "--forms", "composition", "--target", "H=256,bogus=3", *FAST_DESIGN],
            capsys, tmp_path, r"--target 'H=256,bogus=3'")  # fmt: skip


# ------------------------------------------------------------------ odd tables
def test_parquet_float16_columns_are_read(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    df = composition_grid().astype({"H": "float16", "keep": "float16", "omega": "float16"})
    df.to_parquet(tmp_path / "g.parquet")
    code, _, err = run(["fit", "--data", tmp_path / "g.parquet", "--form", "composition"], capsys)
    assert code == 0, err


def test_parquet_list_columns_are_refused(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    composition_grid().assign(tags=[[1, 2]] * 60).to_parquet(tmp_path / "g.parquet")
    refused(["validate", tmp_path / "g.parquet"], capsys, tmp_path,
            "column 'tags' holds a .* in line 2; a results table holds one value")  # fmt: skip


def test_line_numbers_count_quoted_newlines_and_blank_lines(tmp_path, capsys):
    path = tmp_path / "q.csv"
    path.write_text('H,omega,seed,loss,note\n1,0,0,2.1,"a\nb"\n\n4,1,0,oops,c\n')
    refused(["validate", path], capsys, tmp_path, r"'oops' in line 5\)")


def test_mixing_errors_name_a_bounded_number_of_levels(grid_csv, tmp_path, capsys):
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
    df = composition_grid()
    extra = pd.DataFrame({f"x{i}": np.full(len(df), i) for i in range(115)})
    pd.concat([df, extra], axis=1).to_csv(tmp_path / "w.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, _, err = run(["compare", "--data", tmp_path / "w.csv", "--splits", "5",
                            "--derive", "z = H*2", "-q"], capsys)  # fmt: skip
    assert code == 0, err


# ------------------------------------------------------------------ forms
def test_declaring_no_variables_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text('x = { expr = "L0 + a*H", variables = [] }\n')
    refused(["forms", "list"], capsys, tmp_path, "declares no variables")
    refused(["fit", "--form", "x"], capsys, tmp_path, "declares no variables")


def test_the_readme_bounds_example_is_accepted(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text(
        '[mine]\nexpr = "L0 + a*omega**b"\nbounds = { b = [-2, 2] }\n'
    )
    code, out, err = run(["forms", "show", "mine"], capsys)
    assert code == 0, err
    assert "starting grid over [-2, 2]" in out


def test_a_start_outside_the_bounds_is_refused_by_list_and_show(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "forms.toml").write_text(
        '[mine]\nexpr = "L0 + a*omega**b"\nbounds = { b = [0, 4] }\nstart = { b = [5, 6] }\n'
    )
    refused(["forms", "list"], capsys, tmp_path, "start of 'b' .* not a range inside")
    refused(["forms", "show", "mine"], capsys, tmp_path, "start of 'b' .* not a range inside")


# ------------------------------------------------------------------ ledger
def test_head_zero_says_record_numbers_start_at_one(grid_csv, tmp_path, capsys):
    ledger = tmp_path / "l.jsonl"
    argv = ["predict", "--data", grid_csv, "--form", "composition", "--at", "H=8,keep=0.25"]
    code, _, err = run([*argv, "--ledger", ledger, "--resamples", "20"], capsys)
    assert code == 0, err
    line = refused(["ledger", "verify", "--ledger", ledger, "--head", "0:" + "a" * 12], capsys,
                   tmp_path, "record numbers start at 1")  # fmt: skip
    assert "removed" not in line


# ------------------------------------------------------------------ pipes
def _no_hang(argv, cwd, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fitrules", *map(str, argv)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,  # before the fix each of these waited forever
        env={**os.environ, "PYTHONPATH": str(Path(fr.__file__).resolve().parents[1])},
        check=False,
    )


@pytest.mark.parametrize("where", ["data", "ledger", "staging"])
def test_a_named_pipe_never_blocks(tmp_path, grid_csv, where):
    fifo = tmp_path / "p"
    if where == "staging":
        fifo = tmp_path / ".out.json.abcdefgh.partial"
    os.mkfifo(fifo)
    if where == "data":
        argv = ["validate", fifo]
    elif where == "ledger":
        argv = ["score", "--ledger", fifo, "--data", grid_csv]
    else:
        argv = ["validate", grid_csv, "--json", tmp_path / "out.json"]
    res = _no_hang(argv, tmp_path)
    if where == "staging":
        assert res.returncode == 0, res.stderr
        assert fifo.exists()  # not ours: left alone
    else:
        assert res.returncode == 2 and "not a regular file" in res.stderr, res.stderr


# ------------------------------------------------------------------ tuning
def test_a_level_without_runs_on_the_tuning_seeds_is_named(tmp_path):
    a = composition_grid().assign(lr=3e-4)
    b = composition_grid(rng_seed=1).assign(lr=1e-3, loss=lambda d: d["loss"] - 0.1)
    b = b[b["seed"] != 0]  # lr 1e-3 has no run on seed 0, the tuning seed
    g = fr.load_grid(pd.concat([a, b], ignore_index=True))
    t = fr.tune(g, "lr", tune_seeds=[0])
    assert any("no run on the choosing seeds" in w for w in t.warnings), t.warnings


# ------------------------------------------------------------------ the Python API
def test_numpy_integers_are_numbers():
    c = fr.compare(fr.load_grid(composition_grid()), ["composition", "omega_only"],
                   splits=np.int64(5))  # fmt: skip
    assert len(c.results) == 10


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: fr.fit(composition_grid(), "composition").predict(H="a", keep=0.5), FitrulesError),
        (lambda: fr.load_grid(None), GridError),
        (lambda: fr.load_grid(composition_grid().assign(loss=lambda d: d["loss"] + 0j)), GridError),
        (lambda: fr.load_grid(composition_grid().assign(loss=lambda d: d["loss"] > 2.2)),
         GridError),
        (lambda: fr.Form("mine", "L0 + a*H", description=5), FormError),
        (lambda: fr.tune(fr.load_grid(pd.concat([composition_grid().assign(lr=1.0),
                         composition_grid().assign(lr=2.0)])), "lr", tune_seeds=[0, 0]),
         GridError),
        (lambda: fr.compare(composition_grid(), "composition", splits=5.5), FitrulesError),
        (lambda: fr.design(forms=["composition", "additive"], budget=6.5), FitrulesError),
        (lambda: fr.fit(composition_grid(), ["composition", "additive"]), FitrulesError),
    ],
)  # fmt: skip
def test_api_errors_are_documented_exceptions(call, error):
    with pytest.raises(error) as info:
        call()
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ Ctrl-C on a cluster
@pytest.mark.slow
def test_ctrl_c_on_a_local_cluster_is_one_line(tmp_path):
    """Ctrl-C reaches the whole process group: the cluster's nannies and workers printed 63
    lines with 4 KeyboardInterrupt tracebacks. Now the command's one line, runs kept."""
    import signal
    import time

    pytest.importorskip("distributed")
    out = tmp_path / "o.csv"
    spec = Path(fr.__file__).resolve().parents[1] / "data" / "specs" / "smoke.toml"
    if not spec.exists():
        pytest.skip("needs the checkout's smoke spec")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fitrules", "simulate", str(spec), "--out", str(out),
         "--scheduler", "local:2"],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(spec.parents[2])},
    )  # fmt: skip
    t0 = time.monotonic()
    while time.monotonic() - t0 < 180:
        if out.exists() and len(out.read_text().splitlines()) >= 3:  # header and two runs
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["fitrules simulate: interrupted"], err
    table = pd.read_csv(out)
    assert len(table) >= 2 and not table.duplicated().any()


def test_a_table_whose_every_run_is_set_aside_is_one_line(tmp_path, capsys):
    # found by the fuzzer: validate raised IndexError when no run was left
    path = tmp_path / "g.csv"
    path.write_text("H,omega,seed,loss\n1,0,0,inf\n2,1,0,nan\n")
    refused(["validate", path], capsys, tmp_path, r"no run left to use: .* \(2 non-finite metric\)")


def test_the_seed_column_is_not_a_metric(grid_csv, tmp_path, capsys):
    # found by the fuzzer: ci with --metric seed raised ValueError from pandas
    refused(["ci", "--data", grid_csv, "--metric", "seed", "--baseline", "H=4,keep=0.5",
             "--treatment-sweep", "keep", "--resamples", "1000"], capsys, tmp_path,
            "is the seed column")  # fmt: skip


def test_design_with_no_form_named_is_one_line(tmp_path, capsys):
    # found by the fuzzer: --forms '' took the built-in set, then raised ValueError
    refused(["design", "--forms", "", *FAST_DESIGN], capsys, tmp_path, "name the forms")


def test_a_refused_predict_leaves_a_shared_ledgers_folder_untouched(grid_csv, tmp_path, capsys):
    # found by the fuzzer: the writability probe changed the time of the linked folder
    (tmp_path / "shared").mkdir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "link.jsonl").symlink_to("../shared/l.jsonl")
    grid_csv.write_bytes(b"\xff\xfe" + grid_csv.read_bytes())
    refused(["predict", "--data", grid_csv, "--form", "composition", "--at", "H=4,keep=1",
             "--ledger", tmp_path / "mine" / "link.jsonl"], capsys, tmp_path,
            "not a readable results table")  # fmt: skip


@pytest.mark.parametrize("scale, ok", [(1e-300, False), (1e90, True)])
def test_design_at_extreme_scales(tmp_path, capsys, scale, ok):
    # found by the fuzzer: 'inf' separations (no measurable seed noise at 1e-300) and
    # overflow warnings (squares of 1e90)
    df = composition_grid().assign(loss=lambda d: d["loss"] * scale)
    df.to_csv(tmp_path / "g.csv", index=False)
    argv = ["design", "--data", tmp_path / "g.csv", "--forms", "composition,log_additive"]
    argv += [*FAST_DESIGN, "--budget", "6"]
    if ok:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            code, out, err = run(argv, capsys)
        assert code == 0, err
        assert "inf" not in out and "nan" not in out
    else:
        refused(argv, capsys, tmp_path, "no measurable spread")


def test_an_empty_json_path_beside_a_report_is_one_line(grid_csv, tmp_path, capsys):
    # found by the suite's fuzzer: --json= with --report raised AttributeError
    refused(["validate", grid_csv, "--json="], capsys, tmp_path, "empty path")
    refused(["ci", "--data", grid_csv, "--baseline", "H=4,keep=0.5", "--treatment",
             "H=16,keep=0.5", "--resamples", "1000", "--json=", "--report", tmp_path / "R"],
            capsys, tmp_path, "empty path")  # fmt: skip


def test_outputs_are_undone_last_taken_first(grid_csv, tmp_path, capsys, monkeypatch):
    # found by the long fuzz run: --json sub/dir/out.json then --spec-out sub/s.toml; the
    # refusal removed the first one's folders before the second's staging file, leaving sub/
    monkeypatch.chdir(tmp_path)
    refused(["design", "--data", grid_csv, "--forms", "composition,additive", *FAST_DESIGN,
             "--json", "sub/dir/out.json", "--spec-out", "sub/s.toml"], capsys, tmp_path,
            "--spec-out")  # fmt: skip
    assert not (tmp_path / "sub").exists()


def test_an_infinite_condition_is_refused(grid_csv, tmp_path, capsys):
    # found by the long fuzz run: validate printed a level 'inf'
    df = composition_grid().assign(lr=3e-4)
    df.loc[5, "lr"] = np.inf
    df.to_csv(grid_csv, index=False)
    refused(["validate", grid_csv], capsys, tmp_path, r"column 'lr' has inf in line 7")


def test_a_grid_of_zeros_has_no_relative_training_error(grid_csv, tmp_path, capsys):
    # found by the long fuzz run: float16 Parquet turned 1e-30 losses into 0; abs_ls fitted
    # them and printed 'mean nan%'
    composition_grid().assign(loss=0.0).to_csv(grid_csv, index=False)
    code, out, err = run(["fit", "--data", grid_csv, "--form", "composition", "--objective",
                          "abs_ls"], capsys)  # fmt: skip
    assert code == 0, err
    assert "nan" not in out and "relative error not defined" in out


def test_an_overflowing_standard_error_is_not_printed_as_inf(monkeypatch):
    # found by the long fuzz run (seed 2): the guard's reason read "standard error inf times"
    from fitrules.engine import guard
    from fitrules.engine.fit import Objective, fit_splits
    from fitrules.model.forms import BUILTIN_FORMS

    g = fr.load_grid(composition_grid())
    f = BUILTIN_FORMS["composition"].bind(g.columns)
    cells = g.cells(f.bound_variables)
    masks = np.ones((1, len(cells)), bool)
    fits = fit_splits(f, cells.X, cells.y, masks)
    rel_se = np.full((1, len(cells)), np.inf)
    rel_se[0, 0] = 0.1  # one finite, the others overflowed
    monkeypatch.setattr(guard, "_delta_rel_se", lambda *a: rel_se)
    (res,) = guard.check_fits(
        f, cells.X, cells.y, masks, fits, Objective(), guard.GuardOptions(20.0, 0.5, None)
    )
    text = "; ".join(res.reasons)
    assert "beyond any multiple of the prediction" in text and "inf" not in text


def test_ci_against_a_baseline_that_averages_zero_is_one_line(grid_csv, tmp_path, capsys):
    # found by the long fuzz run (seed 2): float16 Parquet rounded the losses to 0 and ci
    # divided by the baseline's mean (ZeroDivisionError)
    composition_grid().assign(loss=0.0).to_csv(grid_csv, index=False)
    refused(["ci", "--data", grid_csv, "--baseline", "H=4,keep=1", "--treatment-sweep", "keep",
             "--resamples", "1500"], capsys, tmp_path, "average 0")  # fmt: skip
