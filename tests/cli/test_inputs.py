"""Input files checked before they are read: pipes and devices, directories, files that are
not UTF-8, nested grammars; tables whose cells hold huge integers, numbers mixed with text or
fullwidth digits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from helpers import ONE_LINE, refused, run, snapshot, write_file


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


# ---------------------------------------------------------------- what a cell may hold
# Issue 61 (round five), on the command line: each refusal is exit 2, one line on stderr,
# no traceback, nothing on stdout and no file written.
def _refused_alone(argv, capsys, root, match) -> str:
    """``fitrules ARGV`` exits 2 with one line matching ``match``, prints nothing else and
    changes nothing under ``root``; the line."""
    before = snapshot(root)
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ONE_LINE.match(lines[0]) and "Traceback" not in err, err
    assert re.search(match, lines[0]), (match, lines[0])
    assert snapshot(root) == before
    return lines[0]


def _table(tmp_path, name, column, values) -> Path:
    """The composition grid with ``column`` set to ``values`` in turn, as CSV or JSON lines."""
    df = composition_grid().astype({column: object} if column in ("H", "keep") else {})
    df[column] = pd.Series([values[i % len(values)] for i in range(len(df))], dtype=object)
    path = tmp_path / name
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in df.to_dict("records")))
    else:
        df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("name", ["g.csv", "g.jsonl"])
def test_a_400_digit_integer_in_a_factor_on_the_command_line(tmp_path, capsys, name):
    """A 400-digit integer in a factor: validate passed and fit --by crashed with an
    OverflowError; both now refuse it in one line naming file, column, value and line."""
    path = _table(tmp_path, name, "opt", [1, int("9" * 400)])
    match = r"g\.(csv|jsonl): column 'opt' has 9+\.\.\.9+ in line \d, beyond the largest double"
    _refused_alone(["validate", "--data", path], capsys, tmp_path, match)
    _refused_alone(["fit", "--data", path, "--form", "composition", "--by", "opt"],
                   capsys, tmp_path, match)  # fmt: skip


def test_numbers_and_text_in_one_json_lines_column(tmp_path, capsys):
    """1 and "1" in one JSON-lines column crashed validate (TypeError); they are now read as
    numbers and said; 1 and "sync" are refused in one line naming both."""
    records = composition_grid().to_dict("records")
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps({**r, "H": str(r["H"]) if i % 2 else r["H"]}) + "\n"
                            for i, r in enumerate(records)))  # fmt: skip
    code, out, err = run(["validate", "--data", path], capsys)
    assert code == 0 and err == "", err
    assert "read as numbers: H" in out and "H (4): 1, 4, 16, 64" in out
    path = _table(tmp_path, "bad.jsonl", "H", [1, 4, "sync"])
    _refused_alone(["validate", "--data", path], capsys, tmp_path,
                   r"bad\.jsonl: column 'H' mixes numbers \(1 in line 1\) and text that is not a "
                   r"number \('sync' in line 3\)")  # fmt: skip


def test_fullwidth_digits_on_the_command_line(tmp_path, capsys):
    """Fullwidth digits are text: validate lists them as text levels, and a form reading the
    column is refused naming the value and why."""
    path = _table(tmp_path, "fw.csv", "H", ["１", "４", "１６", "６４"])
    code, out, err = run(["validate", "--data", path], capsys)
    assert code == 0 and "H (4): １, １６, ４, ６４" in out, err
    _refused_alone(["fit", "--data", path, "--form", "composition"], capsys, tmp_path,
                   r"column 'H' is read by a form but is not numeric \('１' in line 2; digits "
                   "of other scripts")  # fmt: skip


def test_a_text_factor_with_an_empty_cell_on_the_command_line(tmp_path, capsys):
    """A text factor with an empty cell crashed validate (TypeError); its empty level is
    listed as missing."""
    path = _table(tmp_path, "g.csv", "opt", ["adam", "sgd", None])
    code, out, err = run(["validate", "--data", path], capsys)
    assert code == 0 and err == "" and "opt (3): adam, sgd, missing" in out, err


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_data_file_that_is_no_regular_file_on_the_command_line(tmp_path, capsys, kind):
    """A directory, a named pipe or /dev/zero as --data, as a saved --fit or as a corpus is
    refused unread, each in its own line (the saved fit and the corpus said "no such file")."""
    if kind == "device":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path, shown = "/dev/zero", "/dev/zero"
        why = "is not a regular file but a device, which a read may never finish"
    else:
        path = tmp_path / "x"
        os.mkdir(path) if kind == "directory" else os.mkfifo(path)
        shown = "x"
        why = (
            "is a directory"
            if kind == "directory"
            else r"is not a regular file but a named pipe \(FIFO\), which a read would wait on"
        )
    _refused_alone(["validate", "--data", path], capsys, tmp_path,
                   rf"validate: error: {shown}: {why}.*; give a results table")  # fmt: skip
    _refused_alone(["predict", "--fit", path, "--at", "H=8,keep=0.25", "--ledger",
                    tmp_path / "l.jsonl"], capsys, tmp_path,
                   rf"predict: error: .*{shown}: {why}.*; give the file FittedForm\.to_json "
                   "wrote")  # fmt: skip
    _refused_alone(["simulate", "--cell", f"model=gpt,corpus={path}", "--out",
                    tmp_path / "o.csv"], capsys, tmp_path,
                   rf"corpus='.*{shown}': {why}.*; give a UTF-8 text file")  # fmt: skip
