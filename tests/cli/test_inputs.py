"""Input files checked before they are read: pipes and devices, directories, files that are
not UTF-8, nested grammars."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fitrules as fr
from helpers import refused, write_file


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


def test_grammar_fifo_is_refused_unread(grid_csv, tmp_path, capsys):
    """A FIFO given as --grammar is refused unread: not a regular file."""
    os.mkfifo(tmp_path / "g.toml")
    refused(["search", "--data", grid_csv, "--grammar", tmp_path / "g.toml"],
            capsys, tmp_path, r"--grammar .*g\.toml: is not a regular file")  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_grammar_device_is_refused_unread(grid_csv, tmp_path, capsys):
    """A device (/dev/zero) given as --grammar is refused unread: not a regular file."""
    refused(["search", "--data", grid_csv, "--grammar", "/dev/zero"],
            capsys, tmp_path, r"--grammar /dev/zero: is not a regular file")  # fmt: skip


def test_deeply_nested_grammar_is_refused(grid_csv, tmp_path, capsys):
    """A grammar nested 3,000 deep is refused in one line giving the limit of 64."""
    p = tmp_path / "g.toml"
    p.write_text("variables = " + "[" * 3000 + "]" * 3000 + "\n")
    refused(["search", "--data", grid_csv, "--grammar", p],
            capsys, tmp_path, r"nested 3,000 deep; at most 64")  # fmt: skip


def test_directories_where_files_are_expected(grid_csv, tmp_path, capsys, monkeypatch):
    """A directory given where a table, ledger, spec, output or forms.toml goes is refused."""
    d = tmp_path / "d"
    d.mkdir()
    refused(["validate", d], capsys, tmp_path, "is a directory")
    refused(
        [
            "compare",
            "--split",
            "transfer",
            "--fit-data",
            grid_csv,
            "--test-data",
            d,
        ],
        capsys,
        tmp_path,
        "is a directory",
    )
    refused(["score", "--ledger", d, "--data", grid_csv], capsys, tmp_path, "is a directory")
    refused(["simulate", d, "--out", tmp_path / "x.csv"], capsys, tmp_path, "is a directory")
    refused(["simulate", "--cell", "H=1", "--out", d], capsys, tmp_path, "is a directory")
    (d / "forms.toml").mkdir()
    monkeypatch.chdir(d)
    refused(["forms", "list"], capsys, tmp_path, "forms.toml: is a directory")


def test_files_that_are_not_utf8(grid_csv, tmp_path, capsys, monkeypatch):
    """A ledger, spec or forms.toml that is not UTF-8 is refused in one line."""
    bad = write_file(tmp_path / "bad.bin", b"\xff\xfe = 1\n")
    refused(["score", "--ledger", bad, "--data", grid_csv], capsys, tmp_path, "not UTF-8")
    refused(["simulate", bad, "--out", tmp_path / "x.csv"], capsys, tmp_path, "not UTF-8")
    (tmp_path / "w").mkdir()
    write_file(tmp_path / "w" / "forms.toml", b"\xff\xfe = 1\n")
    monkeypatch.chdir(tmp_path / "w")
    refused(["forms", "list"], capsys, tmp_path, "not UTF-8")


@pytest.mark.parametrize("where", ["data", "ledger", "staging"])
def test_a_named_pipe_never_blocks(tmp_path, grid_csv, where):
    """A FIFO as table or ledger is refused unread; one named like a staging file is left alone."""
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
