"""Input files are checked for what they are before they are read.

From the third hostile audit (issue 31): ``--grammar`` on a FIFO with no writer waited
forever and on ``/dev/zero`` read without end (serious 3); a grammar with an array nested
3,000 deep raised RecursionError; a gzip table of 4 MB holding 2 GiB of rows was
decompressed whole before anything was checked (major).
"""

from __future__ import annotations

import gzip
import os

import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FormError, GridError, SimError
from fitrules.base.inputs import load_toml, nesting_depth, read_text
from fitrules.engine.grammar import load_grammar
from helpers import refused


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "grid.csv"
    composition_grid().to_csv(path, index=False)
    return path


def test_grammar_fifo_is_refused_unread(grid_csv, tmp_path, capsys):
    os.mkfifo(tmp_path / "g.toml")
    refused(["search", "--data", grid_csv, "--grammar", tmp_path / "g.toml"],
            capsys, tmp_path, r"--grammar .*g\.toml: is not a regular file")  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_grammar_device_is_refused_unread(grid_csv, tmp_path, capsys):
    refused(["search", "--data", grid_csv, "--grammar", "/dev/zero"],
            capsys, tmp_path, r"--grammar /dev/zero: is not a regular file")  # fmt: skip


def test_deeply_nested_grammar_is_refused(grid_csv, tmp_path, capsys):
    p = tmp_path / "g.toml"
    p.write_text("variables = " + "[" * 3000 + "]" * 3000 + "\n")
    refused(["search", "--data", grid_csv, "--grammar", p],
            capsys, tmp_path, r"nested 3,000 deep; at most 64")  # fmt: skip


def test_huge_grammar_file_is_refused(tmp_path):
    p = tmp_path / "g.toml"
    p.write_bytes(b"# " + b"x" * (17 * 2**20) + b"\n")
    with pytest.raises(FormError, match="more than the 16 MiB"):
        load_grammar(p)


def test_forms_file_fifo_and_nesting(tmp_path, monkeypatch, grid_csv):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "forms.toml")
    with pytest.raises(FormError, match="is not a regular file"):
        fr.fit(str(grid_csv), "composition")
    os.remove(tmp_path / "forms.toml")
    (tmp_path / "forms.toml").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(FormError, match="nested 3,000 deep"):
        fr.fit(str(grid_csv), "composition")


def test_spec_fifo_and_nesting(tmp_path):
    from fitrules.sim.spec import load_spec

    os.mkfifo(tmp_path / "s.toml")
    with pytest.raises(SimError, match="is not a regular file"):
        load_spec(tmp_path / "s.toml")
    (tmp_path / "t.toml").write_text("name = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SimError, match="nested 3,000 deep"):
        load_spec(tmp_path / "t.toml")


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
    path = tmp_path / "g.csv.gz"
    composition_grid().to_csv(path, index=False)
    assert len(fr.load_grid(str(path)).runs) == 60


def test_plain_table_beyond_the_limit(tmp_path, monkeypatch):
    import fitrules.base.inputs as inputs

    path = tmp_path / "big.csv"
    composition_grid().to_csv(path, index=False)
    monkeypatch.setattr(inputs, "MAX_TABLE_BYTES", 100)
    with pytest.raises(GridError, match="of text; a results table may have at most 100 bytes"):
        fr.load_grid(str(path))


def test_nesting_depth_ignores_strings_and_comments():
    assert nesting_depth('a = "[[[[" # {{{{\nb = [[1], {c = 2}]\n') == 2
    assert nesting_depth("x = '''[[[\n[[['''\n") == 0


def test_read_text_refuses_a_directory(tmp_path):
    with pytest.raises(FormError, match="is a directory"):
        read_text(tmp_path, str(tmp_path), FormError)
    with pytest.raises(FormError, match=r"cannot be read \(no such file\)"):
        load_toml(tmp_path / "none.toml", "none.toml", FormError)
