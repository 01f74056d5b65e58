"""Input files through the Python functions: pipes and nesting in forms files, manifests
that are pipes, compressed and oversized tables; what a cell may hold (huge integers,
numbers mixed with text, fullwidth digits) and data files that are no regular file."""

from __future__ import annotations

import gzip
import json
import os
import time

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError, FormError, GridError
from helpers import refused


def test_forms_file_fifo_and_nesting(tmp_path, monkeypatch, grid_csv):
    """A forms.toml that is a pipe, or nested 3,000 deep, is refused by fr.fit."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "forms.toml")
    with pytest.raises(FormError, match="is not a regular file"):
        fr.fit(str(grid_csv), "composition")
    os.remove(tmp_path / "forms.toml")
    (tmp_path / "forms.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(FormError, match="nested 3,000 deep"):
        fr.fit(str(grid_csv), "composition")


def test_manifest_fifo_is_not_read(tmp_path, grid_csv, capsys):
    """A table's harness manifest that is a pipe is not a manifest (reading it would hang)."""
    df = composition_grid().assign(spec="t", spec_sha256="0" * 64)
    df.to_csv(tmp_path / "h.csv", index=False)
    os.mkfifo(tmp_path / "h.manifest.json")
    g = fr.load_grid(str(tmp_path / "h.csv"))
    assert not g.harness


def test_gzip_bomb_is_refused_while_streaming(tmp_path, capsys, monkeypatch):
    """The bomb's shape, scaled down by lowering the limit: the text is counted block by
    block and the read stops at the limit."""
    import fitrules.base.inputs as inputs

    path = tmp_path / "bomb.csv.gz"
    row = b"1,0.5,1,2.2\n"
    with gzip.open(path, "wb") as fh:
        fh.write(b"H,keep,seed,loss\n")
        for _ in range(64):
            fh.write(row * 65_536)  # 48 MiB of text, a few hundred kB on disk
    assert path.stat().st_size < 2**20
    monkeypatch.setattr(inputs, "MAX_TABLE_BYTES", 8 * 2**20)
    refused(["validate", "--data", path], capsys, tmp_path,
            r"bomb\.csv\.gz: decompresses to more than 8 MiB of text")  # fmt: skip
    with pytest.raises(GridError, match="decompresses to more than"):
        fr.load_grid(str(path))


def test_small_gzip_table_still_reads(tmp_path):
    """A small gzipped CSV table reads, all 60 runs."""
    path = tmp_path / "g.csv.gz"
    composition_grid().to_csv(path, index=False)
    assert len(fr.load_grid(str(path)).runs) == 60


def test_plain_table_beyond_the_limit(tmp_path, monkeypatch):
    """An uncompressed table larger than the byte limit is refused, naming the limit."""
    import fitrules.base.inputs as inputs

    path = tmp_path / "big.csv"
    composition_grid().to_csv(path, index=False)
    monkeypatch.setattr(inputs, "MAX_TABLE_BYTES", 100)
    with pytest.raises(GridError, match="of text; a results table may have at most 100 bytes"):
        fr.load_grid(str(path))


# ---------------------------------------------------------------- what a cell may hold
# Issue 61 (round five): values a reader took that crashed a later step, and files that were
# read as missing. Each table below is the composition grid with one column changed.
BIG = "9" * 400  # a 400-digit integer: no double holds it, pandas keeps it as a Python int
SHOWN_BIG = r"9{20}\.\.\.9{20}"  # as a message shows it, its digits elided


def _jsonl(path, records) -> str:
    """``records`` written one JSON object a line at ``path``; the path as text."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _with_opt(values):
    """The composition grid with a factor 'opt' no form reads, alternating two levels."""
    df = composition_grid()
    df["opt"] = pd.Series([values[i % 2] for i in range(len(df))], dtype=object)
    return df


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_400_digit_integer_in_a_factor_is_refused_at_reading(tmp_path, suffix):
    """A 400-digit integer in a factor column passed validate and crashed fit (OverflowError,
    issue 61); load_grid, validate and fit refuse it naming file, column, value, line and
    what is allowed."""
    df = _with_opt([1, int(BIG)])
    path = tmp_path / f"g{suffix}"
    if suffix == ".csv":
        df.to_csv(path, index=False)
        line = 3  # the second run, after the header
    else:
        _jsonl(path, df.to_dict("records"))
        line = 2
    match = (rf"^g\{suffix}: column 'opt' has {SHOWN_BIG} in line {line}, beyond the largest "
             r"double; allowed: numbers within \+-1\.8e308$")  # fmt: skip
    with pytest.raises(GridError, match=match):
        fr.load_grid(str(path))
    with pytest.raises(GridError, match=match):
        fr.validate(str(path))
    with pytest.raises(GridError, match=match):
        fr.fit(str(path), "composition", by="opt")


def test_integers_beyond_64_bits_are_read_exactly_or_refused(tmp_path):
    """An integer beyond 64 bits is read as the double that is exactly it (2**70); one that no
    double holds (2**70 + 1) is refused with the exponent form to write instead; 1e400 in a
    column of decimals, which pandas reads as inf, is refused as written."""
    exact = _with_opt([2**70, 2**71])
    exact.to_csv(tmp_path / "exact.csv", index=False)
    g = fr.load_grid(str(tmp_path / "exact.csv"))
    assert g.runs["opt"].dtype == float
    assert set(g.runs["opt"]) == {float(2**70), float(2**71)}
    assert fr.validate(g).facts["levels"]["opt"] == [float(2**70), float(2**71)]
    _with_opt([2**70, 2**70 + 1]).to_csv(tmp_path / "inexact.csv", index=False)
    with pytest.raises(GridError, match=r"^inexact\.csv: column 'opt' has 1180591620717411303425 "
                       r"in line 3, an integer beyond 64 bits that no double holds exactly; "
                       r"allowed: .*\(1\.180592e\+21\)"):  # fmt: skip
        fr.load_grid(str(tmp_path / "inexact.csv"))
    text = composition_grid().to_csv(index=False).splitlines()
    fields = text[5].split(",")  # the fifth run, line 6: its keep written as 1e400
    text[5] = ",".join([fields[0], "1e400", *fields[2:]])
    (tmp_path / "over.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(GridError, match=r"^over\.csv: column 'keep' has '1e400' in line 6, "
                       "beyond the largest double"):  # fmt: skip
        fr.load_grid(str(tmp_path / "over.csv"))


def test_a_json_lines_column_of_1_and_quoted_1_is_read_as_numbers(tmp_path):
    """A JSON-lines column mixing 1 and "1" crashed validate (TypeError in summary, issue 61);
    a column whose every value is a number or a number written as text is read as numbers,
    said in one line, and fits as the all-numbers table does."""
    records = composition_grid().to_dict("records")
    plain = _jsonl(tmp_path / "plain.jsonl", records)
    for i, r in enumerate(records):
        if i % 2:
            r["H"] = str(r["H"])
    mixed = _jsonl(tmp_path / "mixed.jsonl", records)
    v = fr.validate(mixed)
    assert v.facts["levels"]["H"] == [1, 4, 16, 64]
    assert v.facts["numbers_from_text"] == ["H"] and v.grid.numbers_from_text == ("H",)
    assert "read as numbers: H" in str(v)
    assert fr.fit(mixed, "composition").constants == fr.fit(plain, "composition").constants


@pytest.mark.parametrize("source", ["jsonl", "frame"])
def test_numbers_mixed_with_text_are_refused_by_column_and_value(tmp_path, source):
    """A condition column mixing numbers and text that is not a number (1 and "sync") is
    refused naming the column, a number, the text and their lines; the metric so mixed is
    refused in the metric's words, and true/false beside text likewise."""

    def table(column, value):
        df = composition_grid().astype({column: object})
        df.loc[4, column] = value
        if source == "frame":
            return df
        return _jsonl(tmp_path / f"{column}.jsonl", df.to_dict("records"))

    where = "DataFrame" if source == "frame" else r"H\.jsonl"
    first, line = (2, 6) if source == "frame" else (1, 5)
    with pytest.raises(GridError, match=rf"^{where}: column 'H' mixes numbers \(1 in line "
                       rf"{first}\) and text that is not a number \('sync' in line {line}\); "
                       "a column holds one kind of value"):  # fmt: skip
        fr.load_grid(table("H", "sync"))
    with pytest.raises(GridError, match=rf"column 'loss' holds text \('x' in line {line}\); "
                       "the metric must be numeric"):  # fmt: skip
        fr.load_grid(table("loss", "x"))
    with pytest.raises(GridError, match=r"column 'diverged' mixes true/false \(False in line "
                       rf"{first}\) and text \('no' in line {line}\)"):  # fmt: skip
        fr.load_grid(table("diverged", "no"))


def test_parquet_text_columns_follow_the_same_rules(tmp_path):
    """Parquet text columns (as MLflow stores parameters): numbers written as text are read
    as numbers, a 400-digit one is refused by line, and fullwidth digits stay text."""
    pytest.importorskip("pyarrow")
    df = composition_grid()
    df["width"] = [str(64 * (1 + i % 2)) for i in range(len(df))]
    df.to_parquet(tmp_path / "ok.parquet")
    assert fr.load_grid(str(tmp_path / "ok.parquet")).runs["width"].dtype.kind == "i"
    df.loc[7, "width"] = BIG
    df.to_parquet(tmp_path / "big.parquet")
    with pytest.raises(GridError, match=r"^big\.parquet: column 'width' has '9+\.\.\.9+' "
                       "in line 9, beyond the largest double"):  # fmt: skip
        fr.load_grid(str(tmp_path / "big.parquet"))
    df.loc[7, "width"] = "１２８"
    df.to_parquet(tmp_path / "fw.parquet")
    g = fr.load_grid(str(tmp_path / "fw.parquet"))
    assert g.runs["width"].dtype.kind not in "iuf" and "１２８" in set(g.runs["width"])


def test_fullwidth_digits_are_text(tmp_path):
    """Digits of other scripts ('４', '１２') are text in every reader, never a number: the
    column is a text factor, and a form that reads it is refused naming the value and why
    (to_float, which checks harness columns, no longer takes float('１２') == 12 either)."""
    from fitrules.model.grids import to_float

    df = composition_grid().astype({"H": object})
    df.loc[df["H"] == 4, "H"] = "４"
    df.to_csv(tmp_path / "fw.csv", index=False)
    g = fr.load_grid(str(tmp_path / "fw.csv"))
    assert "４" in set(g.runs["H"]) and "H" not in g.numbers_from_text
    assert fr.validate(g).facts["levels"]["H"] == ["1", "16", "64", "４"]
    with pytest.raises(GridError, match=r"column 'H' is read by a form but is not numeric "
                       r"\('４' in line 17; digits of other scripts \(fullwidth '１２'\) are "
                       "text: write ASCII digits"):  # fmt: skip
        fr.fit(g, "composition")
    values = to_float(pd.Series(["１２", "3", 10**400], dtype=object)).tolist()
    assert np.isnan(values[0]) and values[1:] == [3.0, np.inf]


def test_a_text_column_with_an_empty_cell_is_summarised(tmp_path):
    """A text factor with an empty cell crashed validate (TypeError sorting 'adam' and nan);
    its levels are listed with the empty one last, as missing."""
    df = _with_opt(["adam", "sgd"])
    df.loc[3, "opt"] = None
    df.to_csv(tmp_path / "g.csv", index=False)
    v = fr.validate(str(tmp_path / "g.csv"))
    levels = v.facts["levels"]["opt"]
    assert levels[:2] == ["adam", "sgd"] and len(levels) == 3 and np.isnan(levels[2])
    assert "opt (3): adam, sgd, missing" in str(v)


NOT_A_FILE = {
    "directory": r"is a directory; give {what}$",
    "fifo": r"is not a regular file but a named pipe \(FIFO\), which a read would wait on for "
    r"ever; give {what}$",
    "device": r"is not a regular file but a device, which a read may never finish; give {what}$",
}


@pytest.mark.parametrize("kind", list(NOT_A_FILE))
def test_a_data_file_that_is_no_regular_file_is_refused_unread(tmp_path, kind):
    """A directory, a named pipe or a device given as a results table or a saved fit is
    refused before it is opened, each in its own words (load_fit said "no such file")."""
    if kind == "device":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero")
        path = "/dev/zero"
    else:
        path = str(tmp_path / "x")
        os.mkdir(path) if kind == "directory" else os.mkfifo(path)
    shown = "/dev/zero" if kind == "device" else path.rsplit("/", 1)[1]
    table = NOT_A_FILE[kind].format(what=r"a results table \(CSV, Parquet or JSON lines\)")
    with pytest.raises(GridError, match=f"{shown}: {table}"):
        fr.load_grid(path)
    with pytest.raises(GridError, match=f"{shown}: {table}"):
        fr.validate(path)
    fit = NOT_A_FILE[kind].format(what="the file FittedForm.to_json wrote")
    with pytest.raises(FitrulesError, match=f"{path}: {fit}"):
        fr.load_fit(path)


@pytest.mark.timing  # read off this process's CPU clock, which load does not stretch
def test_validate_of_a_wide_table_is_quick():
    """validate on 2,000 columns took 6.9 s of CPU (about 6 minutes at 20,000 on a loaded
    machine): every column property walked every column again; now each is worked out once."""
    df = composition_grid()
    rng = np.random.default_rng(0)
    extra = {f"x{i}": rng.standard_normal(len(df)) for i in range(1000)}
    extra |= {f"c{i}": np.full(len(df), i % 7) for i in range(1000)}
    g = fr.load_grid(pd.concat([df, pd.DataFrame(extra)], axis=1))
    t0 = time.process_time()
    v = fr.validate(g)
    assert time.process_time() - t0 < 2.0
    assert v.facts["cells"] == 20 and len(v.facts["outcome_like"]) == 1000
    assert len(v.facts["fixed"]) == 1000
