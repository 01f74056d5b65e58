"""Errors in the caller's terms (fitrules.base.errors)."""

from __future__ import annotations

import pytest

from fitrules.base.errors import (
    ReportError,
    SplitError,
    command_line,
    in_api_terms,
    in_words,
    param,
    report_parameter,
)


def test_in_api_terms():
    """in_api_terms rewrites --flags as parameter names (--fit-data as grid), leaving a-b alone."""
    assert in_api_terms("--tune-seeds needs --tune FACTOR") == "tune_seeds needs tune FACTOR"
    assert in_api_terms("--fit-data A --test-data B") == "grid A test_grid B"
    assert in_api_terms("a-b --x") == "a-b x"


def test_param_in_python_words():
    """A parameter named with param() reads as the parameter's name to a Python caller."""
    err = SplitError(f"{param('splits')} 0: must be an integer >= 1")
    assert str(err) == "splits 0: must be an integer >= 1"
    assert in_words(f"{param('test_grid')} B", {"test_grid": "--test-data"}) == "--test-data B"
    assert in_words(f"{param('tune_seeds')} x", {}) == "--tune-seeds x"  # undeclared: dashes


def test_report_parameter_names_the_target():
    """report_parameter says the method's parameter for a marked report, in Python only."""
    with pytest.raises(ReportError, match="^target x: exists; pass force to replace it$"):
        with report_parameter("target"):
            raise ReportError(f"{param('report')} x: exists; pass {param('force')} to replace it")
    with command_line(), pytest.raises(ReportError, match="^--report x: exists$"):
        with report_parameter("target"):
            raise ReportError(f"{param('report')} x: exists")
