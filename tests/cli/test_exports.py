"""Tables as trackers export them (W&B, MLflow, JSON lines, wide tables) reach compare with one
documented option per quirk, or are refused with the fix named."""

from __future__ import annotations

import shlex

import numpy as np
import pandas as pd
import pytest
from exports import flattened_json, mlflow_runs, wandb_runs, wide_table, write_jsonl

import fitrules as fr
from fitrules.base.errors import GridError
from fitrules.model.grids import pooled_note
from helpers import refused, run

FAST = ["--forms", "composition,omega_only", "--splits", "4"]


def _chain(capsys, tmp_path, path, steps, command="compare"):
    """Run ``fitrules COMMAND --data PATH``; each step is (text the refusal must name, the
    options that fix it); after the last fix the command must succeed. Returns its output."""
    args = [command, "--data", path, *(FAST if command == "compare" else [])]
    for needle, fix in steps:
        line = refused(args, capsys, tmp_path, match=needle)
        assert "Traceback" not in line
        args += fix
    code, out, err = run(args, capsys)
    assert code == 0, err
    return out


def test_a_wandb_export_runs_in_two_commands(tmp_path, capsys):
    """The W&B runs export (metric ``val/loss``, ``inner_steps`` for H, the dotted
    ``compression.keep``, one run exported twice, two crashed runs with an empty loss) took
    five commands, one refusal at a time (issue 44): the first refusal now lists every
    option the table needs, in one line, and the command with them runs."""
    path = tmp_path / "wandb.csv"
    wandb_runs().to_csv(path, index=False)
    args = ["compare", "--data", path, *FAST]
    line = refused(args, capsys, tmp_path, match="wandb.csv: 4 options are needed")
    assert "\n" not in line.strip() and "Traceback" not in line
    fixes = ("--drop-duplicates --metric val/loss --rename inner_steps=H "
             "--derive 'omega = 1/`compression.keep` - 1'")  # fmt: skip
    assert f"run again adding {fixes} (because: " in line
    for why in ("line 24 repeats line 8", "'val/loss' looks like one", "variable 'H'",
                "variable 'omega'"):  # fmt: skip
        assert why in line
    code, out, err = run([*args, *shlex.split(fixes)], capsys)
    assert code == 0, err
    assert "58 runs in 20 cells; excluded: 2 State crashed" in out
    assert "dropped 1 exact copy of other rows (--drop-duplicates)" in out
    # run metadata (names, times, runtimes) is neither a factor nor pooled
    assert "looks like a factor" not in out


def test_one_refusal_with_a_known_fix_keeps_its_own_message(tmp_path, capsys):
    """A table that needs one option is refused as before, with that option named once."""
    path = tmp_path / "wandb.csv"
    df = wandb_runs().drop_duplicates().rename(columns={"inner_steps": "H"})
    df["keep"] = df.pop("compression.keep")
    df.assign(omega=1 / df["keep"] - 1).to_csv(path, index=False)
    line = refused(["compare", "--data", path, *FAST], capsys, tmp_path,
                   r"'val/loss' looks like one: give --metric val/loss")  # fmt: skip
    assert "options are needed" not in line


def test_a_form_reading_no_column_names_the_renames_its_variables_need(tmp_path, capsys):
    """An MLflow-style table with ``params.N`` and ``params.D`` and a Chinchilla ``--form``
    was told "reads no column of the grid" with no hint (issue 44): the renames are named,
    and the command with them runs."""
    rng = np.random.default_rng(0)
    N, D = np.meshgrid([1e7, 3e7, 1e8, 3e8], [1e9, 3e9, 1e10, 3e10])
    loss = 1.7 + 400 * N.ravel() ** -0.34 + 410 * D.ravel() ** -0.28
    path = tmp_path / "runs.csv"
    pd.DataFrame({"params.N": N.ravel(), "params.D": D.ravel(),
                  "loss": loss * (1 + 0.002 * rng.standard_normal(16))}).to_csv(path, index=False)
    form = "chin = E + A*N**(-alpha) + B*D**(-beta)"
    args = ["fit", "--data", path, "--form", form]
    line = refused(args, capsys, tmp_path, "reads no column of the grid")
    assert "add --rename params.N=N --rename params.D=D" in line
    code, out, err = run([*args, "--rename", "params.N=N", "--rename", "params.D=D"], capsys)
    assert code == 0, err


def test_a_wandb_export_with_train_and_val_loss_is_told_val_loss(tmp_path, capsys):
    """A W&B export logs train/loss beside val/loss: read without --metric it was refused with
    'train/loss looks like one' (hostile review); the held-out metric is named, as the docs
    (docs/input-formats.md) give it, and the other one after it."""
    path = tmp_path / "wandb.csv"
    df = wandb_runs().drop_duplicates()
    df.insert(df.columns.get_loc("val/loss"), "train/loss", df["val/loss"])
    df.to_csv(path, index=False)
    named = r"'val/loss' looks like one \(so does 'train/loss'\): give --metric val/loss;"
    refused(["compare", "--data", path], capsys, tmp_path, named)


def test_dotted_name_without_backticks_is_told_to_use_them(tmp_path, capsys):
    """A column name with a dot or slash, bare in --derive or --where, is refused: use backticks."""
    path = tmp_path / "wandb.csv"
    wandb_runs().to_csv(path, index=False)
    base = ["compare", "--data", path, "--drop-duplicates", "--metric", "val/loss"]
    refused([*base, "--derive", "k = compression.keep"], capsys, tmp_path,
            r"goes in backticks: `compression.keep`")  # fmt: skip
    refused([*base, "--where", "val/loss < 3"], capsys, tmp_path, r"in backticks: `val/loss`")


def test_validate_and_load_grid_refuse_what_compare_refuses(tmp_path, capsys):
    """validate and fr.load_grid refuse a run exported twice, as compare does, or drop it if told.

    validate said "58 cells, 1 run each" and fr.load_grid "59 runs in 58 cells" for the
    table compare refused: the run exported twice."""
    path = tmp_path / "wandb.csv"
    wandb_runs().to_csv(path, index=False)
    refused(["validate", path, "--metric", "val/loss"], capsys, tmp_path, "line 24 repeats")
    with pytest.raises(GridError, match="line 24 repeats line 8.*drop_duplicates"):
        fr.load_grid(path, metric="val/loss")
    code, out, _ = run(["validate", path, "--metric", "val/loss", "--drop-duplicates"], capsys)
    assert code == 0
    assert "exact copies dropped: 1" in out
    assert "cells: 20 (distinct combinations of inner_steps, compression.keep;" in out
    g = fr.load_grid(path, metric="val/loss", drop_duplicates=True, rename={"inner_steps": "H"})
    assert repr(g).startswith("Grid(wandb.csv: 58 runs in 20 cells")


def test_crashed_runs_are_never_kept_by_a_suggested_filter(tmp_path, capsys):
    """Crashed runs are excluded; the filter offered for a status-like factor keeps finished runs.

    Crashed runs that logged a last loss were pooled, and the suggested filter was
    ``State == 'crashed'`` (the first level in alphabetical order): it kept only them."""
    path = tmp_path / "wandb.csv"
    wandb_runs(crashed_loss=True).to_csv(path, index=False)
    code, out, err = run(["compare", "--data", path, *FAST, "--drop-duplicates", "--metric",
                          "val/loss", "--rename", "inner_steps=H", "--derive",
                          "omega = 1/`compression.keep` - 1"], capsys)  # fmt: skip
    assert code == 0, err
    assert "excluded: 2 State crashed" in out
    assert "crashed'" not in out
    # a status-like factor anywhere: the filter offered keeps the runs that finished
    note = pooled_note("State", ["crashed", "finished"])
    assert "State == 'finished'" in note and "'crashed'" not in note
    note = pooled_note("status", ["FAILED", "KILLED", "RUNNING"])
    assert "status != 'FAILED' and status != 'KILLED'" in note
    assert "== 'failed'" not in pooled_note("outcome", ["failed", "ok"]).lower()


def test_mlflow_export(tmp_path, capsys):
    """An MLflow export runs with the options its refusals name; its FAILED run is excluded.

    ``mlflow.search_runs().to_csv()``: metrics.*, params.* (as text), tags.*, a FAILED
    run."""
    path = tmp_path / "runs.csv"
    mlflow_runs().to_csv(path, index=False)
    out = _chain(
        capsys,
        tmp_path,
        path,
        [
            (r"give --metric metrics.val_loss", ["--metric", "metrics.val_loss"]),
            (
                r"'params.seed' looks like each run's seed.*--seed-col params.seed",
                ["--seed-col", "params.seed"],
            ),
            (r"--rename params.H=H", ["--rename", "params.H=H"]),
            (
                r"--derive 'omega = 1/`params.keep` - 1'",
                ["--derive", "omega = 1/`params.keep` - 1"],
            ),
        ],  # fmt: skip
    )
    assert "59 runs in 20 cells; excluded: 1 status FAILED" in out
    assert "looks like a factor" not in out


def test_wide_table_is_refused_with_the_reshape_that_works(tmp_path, capsys):
    """A wide table (one loss column per seed) is refused with a pandas reshape that makes it long.

    ``--metric loss_seed0`` ran on one seed ("20 runs in 20 cells", noise floor n/a) and
    dropped the other seeds' columns without a word."""
    path = tmp_path / "wide.csv"
    wide_table().to_csv(path, index=False)
    for extra in ([], ["--metric", "loss_seed0"]):
        line = refused(["compare", "--data", path, *FAST, *extra], capsys, tmp_path,
                       r"loss_seed0, loss_seed1, loss_seed2 hold one 'loss' per seed")  # fmt: skip
    refused(["validate", path, "--metric", "loss_seed1"], capsys, tmp_path, "a wide table")
    recipe = line.split("reshape with pandas, ", 1)[1]
    scope = {"df": pd.read_csv(path)}
    exec(recipe, scope)  # the step the message names makes the long table
    g = fr.load_grid(scope["df"], derive="omega = 1/keep - 1")
    assert g.summary()["seeds_per_cell"] == {"min": 3, "median": 3.0, "max": 3}
    assert len(g.cells(["H", "omega"])) == 20


def test_json_lines_read_as_json_with_nested_config(tmp_path, capsys):
    """A JSON-lines export is read as JSON, its nested config as dotted columns the refusals name.

    JSON lines were read as CSV: the error printed JSON fragments as "columns"."""
    path = write_jsonl(tmp_path / "runs.jsonl")
    out = _chain(
        capsys,
        tmp_path,
        path,
        [
            (
                r"columns: id, config.H, config.keep, config.seed, config.lr, summary.loss",
                ["--metric", "summary.loss"],
            ),
            (r"--seed-col config.seed", ["--seed-col", "config.seed"]),
            (r"--rename config.H=H", ["--rename", "config.H=H"]),
            (
                r"--derive 'omega = 1/`config.keep` - 1'",
                ["--derive", "omega = 1/`config.keep` - 1"],
            ),
        ],  # fmt: skip
    )
    assert "60 runs in 20 cells" in out


def test_nested_seed_is_never_a_factor_or_a_filter(tmp_path, capsys):
    """A flattened ``config.seed`` is named the runs' seed, with --seed-col, and no filter offered.

    A flattened export's ``config.seed`` was called "a factor" and the advice was to
    filter to ``config.seed == 0`` (one seed); the fix, --seed-col, was never named."""
    df = flattened_json().rename(columns={"config.H": "H", "config.keep": "keep",
                                          "summary.loss": "loss"})  # fmt: skip
    path = tmp_path / "flat.csv"
    df.to_csv(path, index=False)
    line = refused(["compare", "--data", path, *FAST, "--derive", "omega = 1/keep - 1"],
                   capsys, tmp_path, r"'config.seed' looks like each run's seed.*"
                   r"give --seed-col config.seed")  # fmt: skip
    assert "==" not in line
    with pytest.raises(GridError, match="seed_col config.seed"):
        fr.load_grid(df)
    g = fr.load_grid(df, seed_col="config.seed", derive="omega = 1/keep - 1")
    assert g.summary()["seeds_per_cell"]["min"] == 3
    # and where a seed-like column is pooled next to a named seed, no filter is offered
    assert "==" not in pooled_note("data.seed", [0, 1, 2])
