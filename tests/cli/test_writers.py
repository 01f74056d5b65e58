"""Every writing option of the command line refuses, in one line and before any work, a target
that is the command's input, a symbolic or hard link to it, a FIFO or a link to nothing, and
leaves every file as it was (issue 43; ``predict --ledger`` wrote through a dangling link and
was refused on its own table only because a CSV is not JSON)."""

from __future__ import annotations

import os

import pytest

from helpers import refused

FORMS = ["--forms", "composition,additive", "--splits", "5"]
SEARCH = ["--terms", "1", "--max-constants", "3", "--splits", "3", "--inner-splits", "2",
          "--jobs", "1"]  # fmt: skip
WRITERS = {
    "compare --json": ["compare", "--data", "{G}", *FORMS, "--json", "{T}"],
    "compare --report": ["compare", "--data", "{G}", *FORMS, "--report", "{T}", "--force"],
    "fit --json": ["fit", "--data", "{G}", "--form", "composition", "--json", "{T}"],
    "fit --report": ["fit", "--data", "{G}", "--form", "composition", "--report", "{T}",
                     "--force"],
    "ci --json": ["ci", "--data", "{G}", "--baseline", "H=1,keep=1", "--treatment", "H=4,keep=1",
                  "--json", "{T}"],
    "validate --json": ["validate", "{G}", "--json", "{T}"],
    "design --json": ["design", "--data", "{G}", "--forms", "composition,additive", "--budget",
                      "4", "--json", "{T}"],
    "design --spec-out": ["design", "--data", "{G}", "--forms", "composition,additive",
                          "--budget", "4", "--spec-out", "{T}"],
    "predict --ledger": ["predict", "--data", "{G}", "--form", "composition", "--at",
                         "H=8,keep=0.25", "--ledger", "{T}"],
    "search --json": ["search", "--data", "{G}", *SEARCH, "--json", "{T}"],
    "search --forms-out": ["search", "--data", "{G}", *SEARCH, "--forms-out", "{T}"],
    "search --report": ["search", "--data", "{G}", *SEARCH, "--report", "{T}", "--force"],
}  # fmt: skip
TARGETS = ("the input", "a link to it", "a hard link to it", "a FIFO", "a link to nothing")


def _target(kind: str, folder, table):
    if kind == "the input":
        return table
    path = folder / "out.json"
    if kind == "a link to it":
        path.symlink_to(table)
    elif kind == "a hard link to it":
        os.link(table, path)
    elif kind == "a FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to(folder / "nowhere.json")
    return path


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_writer_never_replaces_its_input_or_writes_through_a_link(
    writer, kind, grid_csv, tmp_path, capsys, monkeypatch
):
    """Refused with one line, exit 2, every file under the folder unchanged (``refused``)."""
    monkeypatch.chdir(tmp_path)
    target = _target(kind, tmp_path, grid_csv)
    argv = [str(target) if a == "{T}" else str(grid_csv) if a == "{G}" else a
            for a in WRITERS[writer]]  # fmt: skip
    before = grid_csv.read_bytes()
    refused(argv, capsys, tmp_path, r"\S")
    assert grid_csv.read_bytes() == before
