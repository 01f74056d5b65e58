"""Tables as experiment trackers export them, made from the committed 4 x 5 x 3 DiLoCo grid
(``data/main.csv`` at lr 3e-4): what a new user has in hand before running fitrules.

Issue 32 ("First contact") describes each export and its quirks; the tests in
``tests/cli/test_exports.py`` check that each reaches ``compare`` with at most one documented
option per quirk, or is refused with a message naming the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fitrules.base.paths import data_dir


def main_grid() -> pd.DataFrame:
    """The 60 runs of the committed main grid at lr 3e-4 (4 H x 5 keep x 3 seeds)."""
    df = pd.read_csv(data_dir() / "main.csv")
    return df[df["lr"] == 3e-4].reset_index(drop=True)


def wandb_runs(crashed_loss: bool = False) -> pd.DataFrame:
    """A Weights & Biases runs table ("Export CSV" of a project's runs).

    Run metadata (Name, State, Notes, User, Tags, Created, Runtime, Sweep), config columns
    with their nested names flattened (``inner_steps``, ``compression.keep``,
    ``optimizer.lr``, ``seed``) and summary columns (``val/loss``, ``_step``, ``_runtime``).
    Two runs crashed: their loss is empty (or, with ``crashed_loss``, the last loss logged);
    one run is exported twice (line 24 repeats line 8).
    """
    g = main_grid()
    n = len(g)
    df = pd.DataFrame(
        {
            "Name": [f"run-{i:03d}" for i in range(n)],
            "State": "finished",
            "Notes": "",
            "User": "someone",
            "Tags": "diloco",
            "Created": [f"2026-11-0{1 + i // 20}T{i % 24:02d}:00:00.000Z" for i in range(n)],
            "Runtime": g["wall_s"].round(0).astype(int),
            "Sweep": "abc123",
            "inner_steps": g["H"],
            "compression.keep": g["keep"],
            "optimizer.lr": g["lr"],
            "seed": g["seed"],
            "val/loss": g["loss"],
            "_step": 2048,
            "_runtime": g["wall_s"],
        }
    )
    crashed = [10, 41]
    df.loc[crashed, "State"] = "crashed"
    if crashed_loss:  # the last loss logged before the crash: far from converged
        df.loc[crashed, "val/loss"] = df.loc[crashed, "val/loss"] + 1.5
    else:
        df["val/loss"] = df["val/loss"].astype(object)
        df.loc[crashed, "val/loss"] = ""
    df.loc[crashed, "_step"] = 700
    # one run exported twice: the copy is line 24 (row 22), the original line 8 (row 6)
    return pd.concat([df.iloc[:22], df.iloc[[6]], df.iloc[22:]], ignore_index=True)


def mlflow_runs() -> pd.DataFrame:
    """``mlflow.search_runs(...).to_csv()``: run ids, status, times, ``params.*`` (written as
    text by MLflow), ``metrics.*`` and ``tags.*`` columns; one run FAILED with no metric."""
    g = main_grid()
    n = len(g)
    df = pd.DataFrame(
        {
            "run_id": [f"{i:032x}" for i in range(n)],
            "experiment_id": "1",
            "status": "FINISHED",
            "artifact_uri": [f"mlruns/1/{i:032x}/artifacts" for i in range(n)],
            "start_time": [f"2026-11-01 10:{i % 60:02d}:00+00:00" for i in range(n)],
            "end_time": [f"2026-11-01 11:{i % 60:02d}:00+00:00" for i in range(n)],
            "metrics.val_loss": g["loss"],
            "metrics.train_loss": g["train_loss"],
            "params.H": g["H"].astype(str),
            "params.keep": g["keep"].astype(str),
            "params.seed": g["seed"].astype(str),
            "params.lr": g["lr"].astype(str),
            "tags.mlflow.runName": [f"run-{i}" for i in range(n)],
            "tags.mlflow.user": "someone",
        }
    )
    df.loc[5, "status"] = "FAILED"
    df.loc[5, ["metrics.val_loss", "metrics.train_loss"]] = float("nan")
    return df


def wide_table() -> pd.DataFrame:
    """One row a cell, the metric of each seed in its own column (``loss_seed0..2``)."""
    g = main_grid()
    wide = g.pivot_table(index=["H", "keep"], columns="seed", values="loss").reset_index()
    wide.columns = ["H", "keep", *(f"loss_seed{s}" for s in wide.columns[2:])]
    return wide


def json_runs() -> list[dict]:
    """Runs as JSON objects with a nested config (one a line in a JSON-lines file)."""
    g = main_grid()
    return [
        {
            "id": f"r{i}",
            "config": {"H": int(r.H), "keep": float(r.keep), "seed": int(r.seed), "lr": r.lr},
            "summary": {"loss": float(r.loss)},
        }
        for i, r in enumerate(g.itertuples())
    ]


def write_jsonl(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in json_runs()))
    return path


def flattened_json() -> pd.DataFrame:
    """``pandas.json_normalize`` of :func:`json_runs`: ``config.seed`` and friends."""
    return pd.json_normalize(json_runs())
