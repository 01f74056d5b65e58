"""Input files through the Python functions: pipes and nesting in forms files, manifests
that are pipes, compressed and oversized tables."""

from __future__ import annotations

import gzip
import os

import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FormError, GridError
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
