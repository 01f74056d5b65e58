"""The Python functions under random hostile arguments (tests/fuzzing.py, api_cases)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import fuzzing


def test_the_python_api_never_crashes():
    """Issue 20: every public function with arguments of every type (fuzzing.api_cases):
    a documented fitrules.base.errors exception in one line, or a result of the documented type
    (15 cases; the slow run draws 50, benchmarks/fuzz_api.py as many as asked)."""
    _fuzz(15)


@pytest.mark.slow
def test_the_python_api_never_crashes_on_50_cases():
    """As :func:`test_the_python_api_never_crashes`, on 50 cases."""
    _fuzz(50)


def _fuzz(examples: int) -> None:
    @settings(
        max_examples=examples,  # the long run: benchmarks/fuzz_api.py
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=fuzzing.api_cases())
    def run(case):
        outcome = fuzzing.check_api(case)
        assert not outcome.failed, f"{outcome.kind} for {case.argv}:\n{outcome.detail}"

    run()


def test_the_api_checker_tells_each_outcome_apart(monkeypatch):
    """fuzzing.check_api tells ok, a bad value accepted, a refusal and a raw exception apart."""
    import fitrules as fr

    ok = fuzzing.check_api(fuzzing.ApiCase("Form", ("mine", "L0 + a*omega**c")))
    assert ok.kind == "ok"
    accepted = fuzzing.ApiCase("Form", ("mine", "L0 + a*H"), {"description": "fine"})
    accepted.kwargs["description"] = fuzzing.Bad("fine", "a value that must be refused")
    assert fuzzing.check_api(accepted).kind == "accepted"
    refused = fuzzing.check_api(fuzzing.ApiCase("Form", ("mine", "L0 + a*H"), {"bounds": 5}))
    assert refused.kind == "refused"

    def crashes(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(fr, "Form", crashes)
    assert fuzzing.check_api(fuzzing.ApiCase("Form", ("mine", "L0 + a*H"))).kind == "raw"
