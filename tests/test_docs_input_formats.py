"""Every example of docs/input-formats.md runs on exports made as the page describes them
(tests/exports.py): the commands (with a few splits, to stay fast) and the Python blocks."""

from __future__ import annotations

import re
import shlex

import pytest
from exports import mlflow_runs, wandb_runs, wide_table, write_jsonl

from conftest import ROOT
from helpers import run

PAGE = ROOT / "docs" / "input-formats.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
FAST = ["--splits", "4", "--forms", "composition,omega_only"]


@pytest.fixture
def exports(tmp_path, monkeypatch):
    wandb_runs().to_csv(tmp_path / "wandb_export.csv", index=False)
    mlflow_runs().to_csv(tmp_path / "mlflow_runs.csv", index=False)
    wide_table().to_csv(tmp_path / "wide.csv", index=False)
    write_jsonl(tmp_path / "runs.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _blocks(lang):
    return [b for kind, b in FENCE.findall(PAGE.read_text()) if kind == lang]


def test_the_commands_run(exports, capsys):
    commands = [c.replace("\\\n", " ") for c in _blocks("sh")]
    assert len(commands) == 3
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "fitrules"
        code, out, err = run([*argv[1:], *FAST], capsys)
        assert code == 0, (command, err)
        assert "in 20 cells" in out


def test_the_python_blocks_run(exports):
    blocks = _blocks("python")
    assert len(blocks) == 3
    scope: dict = {}
    for code in blocks:
        exec(code, scope)
    assert len(scope["c"].summary) == 2
    assert scope["g"].summary()["seeds_per_cell"] == {"min": 3, "median": 3.0, "max": 3}
