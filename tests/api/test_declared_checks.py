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

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError
from fitrules.jobs import options as declared
from helpers import COMMAND_FUNCTIONS

HOSTILE = (-1, 0, 1.5, 2.0, -0.0, 10**30, -(10**30), float("nan"), float("inf"), float("-inf"),
           True, False, None, "", " ", "x", "3", "１６", "yes", [], [1, 2], {}, (0.5,), b"1",
           object())  # fmt: skip

FUNCTIONS = COMMAND_FUNCTIONS


def _valid_call(cmd: str, folder) -> dict:
    """Arguments that make a small, valid call of ``cmd`` in ``folder``."""
    table = folder / "g.csv"
    if not table.exists():
        composition_grid().to_csv(table, index=False)
    g = str(table)
    ledger = str(folder / "p.jsonl")
    small = {"splits": 5}
    return {
        "compare": dict(grid=g, forms=["composition"], **small),
        "design": dict(grid=g, forms=["composition", "additive"], budget=4, splits=10,
                       resamples=20),
        "search": dict(grid=g, terms=1, max_constants=3, splits=3, inner_splits=2,
                       references=[], jobs=1),
        "fit": dict(grid=g, form="composition"),
        "validate": dict(grid=g),
        "ci": dict(grid=g, baseline="H=1,keep=1", treatment="H=4,keep=1"),
        "predict": dict(grid=g, form="composition", at="H=8,keep=0.25", ledger=ledger,
                        resamples=20),
        "score": dict(grid=g, ledger=ledger),
        "ledger verify": dict(ledger=ledger),
        "forms add": dict(line="mine(H, omega) = L0 + a*omega", folder=str(folder)),
        "forms remove": dict(name="mine", folder=str(folder)),
        "simulate": dict(cell="H=1,steps=8", out=str(folder / "o.csv")),
        "load_grid": dict(source=g),
    }[cmd]  # fmt: skip


def _refused_by_check(option) -> list:
    """The hostile values ``option.check`` refuses; a check that raises anything but a
    documented one-line FitrulesError fails the test here."""
    bad = []
    for value in HOSTILE:
        try:
            option.check(value, option.name)
        except FitrulesError as err:
            assert len(str(err).splitlines()) == 1, (option.name, value, str(err))
            bad.append(value)
        except Exception as err:  # noqa: BLE001 - the defect this test exists to find
            pytest.fail(f"{option.name}: check({value!r}) raised {type(err).__name__}: {err}")
    return bad


CASES = [
    (decl.cmd, o)
    for decl in [*declared.COMMANDS, declared.LOAD_GRID]
    if decl.cmd in FUNCTIONS
    for o in decl.options
    if o.check is not None and o.python
]


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
