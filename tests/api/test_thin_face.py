"""The Python face is thin (issue 45): fitrules/api.py re-exports each job's function, and each
public function checks its options once (its job's ``check``) and then calls the job.

api.py stays under 500 lines, each public function's body (its docstring aside) under 16, and
the command line calls each job's ``check`` rather than checking options itself.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

import fitrules
from fitrules import api

PACKAGE = Path(fitrules.__file__).parent
PUBLIC = [n for n in api.__all__ if inspect.isfunction(getattr(api, n))]


def test_api_py_is_short():
    """api.py holds the module's docstring and the re-exports, not the functions."""
    assert len((PACKAGE / "api.py").read_text().splitlines()) <= 500


def _body_lines(func) -> int:
    """The lines of ``func``'s body, its docstring aside."""
    node = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(func)))).body[0]
    body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body[-1].end_lineno - body[0].lineno + 1


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_function_is_short(name):
    """A public function checks its options and calls its job: at most 15 lines."""
    assert _body_lines(getattr(api, name)) <= 15


# what the command line used to check itself, before each job had its check
CHECKS = ("Objective(", "parse_fix(", "parse_bounds(", "check_bootstrap_options(",
          "check_ci_options(", "check_design_options(", "parse_protocol(", "parse_budgets(",
          "check_verdict_train_frac(", "parse_pairs(", "GuardOptions(")  # fmt: skip


def test_the_command_line_checks_no_option_itself():
    """The commands hand their options to the job's check; none calls a check of its own."""
    for path in (PACKAGE / "cli").glob("*.py"):
        text = path.read_text()
        assert not [c for c in CHECKS if c in text], path.name
