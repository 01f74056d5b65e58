"""Every declared option reaches its result (issue 45, item 2).

For each command's Python function, each option it takes is set to a value other than its
default and the result is compared with the same call at the default: the result's JSON (its
settings or its numbers) must differ. An option declared without a probe here fails the
coverage test, so a new option is checked the day it is declared.

The probes live in :data:`PROBES` (tests/reach.py); ``test_a_dropped_option_is_caught`` drops one
option's forwarding in a copy of the package and shows this check failing on it.
"""

from __future__ import annotations

import pytest
import reach

CASES = reach.cases()


def test_every_declared_option_has_a_probe_or_a_stated_reason():
    """Each option a command's Python function takes has a probe or a reason it cannot reach."""
    missing = reach.unprobed()
    assert not missing, f"options with no probe in tests/reach.py: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize(("command", "option"), CASES, ids=[f"{c}-{o}" for c, o in CASES])
def test_each_declared_option_changes_its_result(command, option, tmp_path, monkeypatch):
    """Setting one declared option away from its default changes the command's result."""
    monkeypatch.chdir(tmp_path)
    base, probed = reach.outputs(command, option, tmp_path)
    assert probed != base, (
        f"{command}: {option}={reach.probe(command, option).value!r} left the result unchanged"
    )


@pytest.mark.parametrize(("command", "option"), reach.FAST, ids=[f"{c}-{o}" for c, o in reach.FAST])
def test_a_few_options_change_their_result(command, option, tmp_path, monkeypatch):
    """A quick sample of the reach check (the whole of it runs in the slow step)."""
    monkeypatch.chdir(tmp_path)
    base, probed = reach.outputs(command, option, tmp_path)
    value = reach.probe(command, option).value
    assert probed != base, f"{command}: {option}={value!r} left the result unchanged"


@pytest.mark.slow  # the reach check run on a changed copy, 9 s of CPU (a loaded machine): CI's slow step runs it
def test_a_dropped_option_is_caught(tmp_path):
    """In a copy of the package whose compare forgets heldout_weights, the reach check fails."""
    assert reach.dropped_option_fails(tmp_path)
