"""Bad values generated from each option's declared check (issue 43; scikit-learn draws invalid
values from each parameter's declared constraint the same way).

A pool of hostile values (wrong types, negative, huge, NaN and infinities, empty and unicode
text, containers) is put through every declared ``check``; each value a check refuses is then
handed to the command's Python function on an otherwise valid call, which must refuse it with
a documented one-line exception before writing anything. So an option is tested the day it is
declared with a check, and a check that the function forgets to apply fails here.
"""

from __future__ import annotations

import math

import pytest
from declared import COMMAND_FUNCTIONS as FUNCTIONS
from declared import checked_options, refused_by_check
from declared import valid_call as _declared_call

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError


def _valid_call(cmd: str, folder) -> dict:
    """Arguments that make a small, valid call of ``cmd`` in ``folder``."""
    table = folder / "g.csv"
    if not table.exists():
        composition_grid().to_csv(table, index=False)
    return _declared_call(cmd, folder)


def _refused_by_check(option) -> list:
    """The hostile values ``option.check`` refuses; a check that raises anything but a
    documented one-line FitrulesError fails the test here."""
    bad, problems = refused_by_check(option)
    assert not problems, problems
    return bad


CASES = checked_options()


def test_the_generated_cases_reach_every_command_with_declared_checks():
    """The declarations give cases for compare, search and simulate at least (a refactor that
    dropped the checks would make this test vacuous, and fail here instead)."""
    assert {cmd for cmd, _ in CASES} >= {"compare", "search", "simulate", "fit", "ci"}
    assert len(CASES) >= 30


@pytest.mark.parametrize("cmd, option", CASES, ids=[f"{c}-{o.name}" for c, o in CASES])
def test_a_value_the_declared_check_refuses_is_refused_by_the_function(cmd, option, tmp_path):
    """Every value the check refuses, given to the function: FitrulesError in one line, and no
    file written or changed."""
    bad = _refused_by_check(option)
    assert bad, f"{cmd} {option.name}: the check refused none of the hostile values"
    if cmd in ("score", "ledger verify"):
        fr.predict(**_valid_call("predict", tmp_path))
    if cmd == "forms remove":
        fr.add_form(**_valid_call("forms add", tmp_path))
    for value in bad:
        call = {**_valid_call(cmd, tmp_path), option.name: value}
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        with pytest.raises(FitrulesError) as info:
            FUNCTIONS[cmd](**call)
        shown = "nan" if isinstance(value, float) and math.isnan(value) else repr(value)
        assert len(str(info.value).splitlines()) == 1, (option.name, shown, str(info.value))
        after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        assert after == before, f"{cmd} {option.name}={shown}: refused but wrote files"


@pytest.mark.slow
@pytest.mark.parametrize("cmd", sorted(FUNCTIONS))
def test_the_valid_calls_run(cmd, tmp_path):
    """Each base call is valid, so that a refusal of a generated case is the option's (the
    forms add line once declared a variable it did not read: every case was refused for it)."""
    if cmd in ("score", "ledger verify"):
        fr.predict(**_valid_call("predict", tmp_path))
    if cmd == "forms remove":
        fr.add_form(**_valid_call("forms add", tmp_path))
    FUNCTIONS[cmd](**_valid_call(cmd, tmp_path))
