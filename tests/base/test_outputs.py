"""Outputs made safely (fitrules.base.outputs): two directories exchanged in one step."""

from __future__ import annotations


def test_exchange_swaps_two_directories(tmp_path):
    """exchange(a, b) swaps the contents of two directories."""
    from fitrules.base.outputs import exchange

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    exchange(a, b)
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"
