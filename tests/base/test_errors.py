"""Errors in the caller's terms (fitrules.base.errors)."""

from __future__ import annotations

from fitrules.base.errors import in_api_terms


def test_in_api_terms():
    """in_api_terms rewrites --flags as parameter names (--fit-data as grid), leaving a-b alone."""
    assert in_api_terms("--tune-seeds needs --tune FACTOR") == "tune_seeds needs tune FACTOR"
    assert in_api_terms("--fit-data A --test-data B") == "grid A test_grid B"
    assert in_api_terms("a-b --x") == "a-b x"
