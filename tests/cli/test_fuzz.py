"""The command line under random hostile input (tests/fuzzing.py), and the fuzzer's checker."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import fuzzing

FAMILIES = {
    "compare": (fuzzing.compare_cases(), 50),
    # design's cases fit every form on every candidate cell (a minute each on a loaded
    # machine since issue 27's global fits): few here, the long run in fuzz_cli.py
    "design": (fuzzing.design_cases(), 10),
    "fit": (fuzzing.fit_cases(), 40),
    "allocate": (fuzzing.allocate_cases(), 40),
    "validate": (fuzzing.validate_cases(), 40),
    "ci": (fuzzing.ci_cases(), 40),
    "ledger": (fuzzing.ledger_cases(), 100),
    "forms": (fuzzing.forms_cases(), 60),
    "simulate": (fuzzing.simulate_cases(), 80),
    # search's cases with a reference form fit it in every nested split (about 40 s each
    # under the log-Huber objective since references compete, issue 41): 40 cases took 318 s
    # alone, so few here, the long run in fuzz_cli.py
    "search": (fuzzing.search_cases(), 12),
}


def _property(case: fuzzing.Case) -> None:
    outcome = fuzzing.check(case)
    assert not outcome.failed, f"{outcome.kind} for fitrules {case.argv}:\n{outcome.detail}"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_command_line_never_crashes(family):
    """Generated hostile command lines of each command run or are refused cleanly, never crash
    (the first half of each family's cases; the slow run draws them all)."""
    _fuzz(family, max(1, FAMILIES[family][1] // 2))


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_command_line_never_crashes_on_every_case(family):
    """As :func:`test_the_command_line_never_crashes`, on all of each family's cases."""
    _fuzz(family, FAMILIES[family][1])


def _fuzz(family: str, examples: int) -> None:
    strategy = FAMILIES[family][0]

    @settings(
        max_examples=examples,
        derandomize=True,  # the same cases on every run and machine
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # a failure is shown as drawn, not shrunk
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case):
        _property(case)

    run()


def test_the_checker_tells_each_outcome_apart(monkeypatch):
    """The property is only as good as its checker: each failure must be seen."""
    from fitrules.base.errors import FitrulesError
    from fitrules.cli import commands

    refused = fuzzing.check(fuzzing.Case(["validate", "--data=missing.csv"]))
    assert refused.kind == "refused" and "file not found" in refused.detail
    assert fuzzing.check(fuzzing.Case(["forms", "list"])).kind == "ok"

    def leaves_a_file(args):
        open("left.txt", "w").close()
        raise FitrulesError("refused after writing")

    def crashes(args):
        raise ZeroDivisionError("a bug")

    def prints_nan(args):
        print("median 2.2, p90 nan")
        return 0

    def two_lines(args):
        raise FitrulesError("first line\nsecond line") from None

    expected = {leaves_a_file: "leftover", crashes: "traceback", prints_nan: "nonfinite"}
    for func, kind in expected.items():
        monkeypatch.setitem(commands.HANDLERS, "validate", func)
        assert fuzzing.check(fuzzing.Case(["validate"])).kind == kind, func.__name__
    monkeypatch.setitem(commands.HANDLERS, "validate", two_lines)
    assert fuzzing.check(fuzzing.Case(["validate"])).kind == "refused"  # main joins lines


def test_the_checker_allows_the_note_of_a_shadowing_form_only(monkeypatch):
    """At exit 0 the note of a form named like a built-in is allowed on stderr; another line
    there is a failure."""
    from fitrules.cli import commands

    shadowing = fuzzing.Case(["fit", "--form=composition = L0 + a*omega"])
    assert fuzzing.check(shadowing).kind == "ok"

    def says_more(args):
        print("fitrules validate: note: something else", file=sys.stderr)
        return 0

    monkeypatch.setitem(commands.HANDLERS, "validate", says_more)
    assert fuzzing.check(fuzzing.Case(["validate"])).kind == "stderr"
