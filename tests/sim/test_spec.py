"""Specs (fitrules.sim.spec): blocks, cells, committed specs by name, bad specs named."""

from __future__ import annotations

import os

import pytest

from conftest import DATA
from fitrules.base.errors import SimError
from fitrules.sim.spec import cell_spec, load_spec, parse_spec


def test_spec_blocks_take_their_own_seeds():
    """A block's seeds replace the spec's; a block without seeds uses the spec's."""
    spec = parse_spec(
        'name = "x"\nseeds = [0]\n[fixed]\nwidth = 32\n[[block]]\nseeds = [5, 6]\n'
        "[block.fixed]\nH = 4\n[[block]]\n[block.fixed]\nH = 8\n"
    )
    assert [(r.H, r.seed) for r in spec.runs] == [(4, 5), (4, 6), (8, 0)]


def test_spec_fifo_and_nesting(tmp_path):
    """load_spec refuses a spec that is a pipe or is nested 3,000 deep."""
    from fitrules.sim.spec import load_spec

    os.mkfifo(tmp_path / "s.toml")
    with pytest.raises(SimError, match="is not a regular file"):
        load_spec(tmp_path / "s.toml")
    (tmp_path / "t.toml").write_text("name = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SimError, match="nested 3,000 deep"):
        load_spec(tmp_path / "t.toml")


def test_cell_runs_one_configuration(tmp_path):
    """cell_spec on the smoke spec gives one run with the cell's H and keep, seed 0, its width."""
    spec = cell_spec("H=8,keep=0.25", load_spec(DATA / "specs" / "smoke.toml"), "0")
    assert [(r.H, r.keep, r.seed, r.width) for r in spec.runs] == [(8, 0.25, 0, 32)]


@pytest.mark.parametrize(
    "text, match",
    [
        ("[fixed]\nbogus = 1\n", "unknown factor 'bogus'"),
        ("[fixed]\nkeep = 1.5\n", r"keep=1.5 is outside \(0, 1\]"),
        ("[fixed]\nkeep = 0.0\n", r"outside \(0, 1\]"),
        ("[fixed]\nH = 0\n", "H=0 must be >= 1"),
        ("[fixed]\nM = 0\n", "M=0 must be >= 1"),
        ("[fixed]\ncompressor = 'zip'\n", "compressor='zip' is unknown"),
        ("[fixed]\naggregator = 'max'\n", "aggregator='max' is unknown"),
        ("[[block]]\n[block.factors]\nH = []\n", "non-empty list"),
        ("seeds = [-1]\n", "seeds"),
        ("[fixed\n", "not valid TOML"),
    ],
)
def test_bad_specs(text, match):
    """parse_spec refuses unknown factors, values out of range, empty lists, bad seeds or TOML."""
    with pytest.raises(SimError, match=match):
        parse_spec(text)


def test_a_committed_spec_is_found_by_name(tmp_path, monkeypatch):
    """load_spec finds a committed spec by name, with or without .toml, and lists them if not."""
    monkeypatch.chdir(tmp_path)
    assert load_spec("smoke").name == "smoke"
    assert load_spec("smoke.toml").name == "smoke"
    with pytest.raises(SimError, match="committed specs, usable by name: .*main"):
        load_spec("nosuch")
