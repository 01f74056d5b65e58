"""Bad values generated from each option's declaration, on the command line (issue 43).

Each option that takes a value is given texts its own declaration refuses (its ``type``,
``choices``, ``parse`` or ``check``, judged by ``tests/declared.py``) on an otherwise valid,
small command line: the command must exit 2 with one line and leave every file as it was.
``benchmarks/fuzz_cli.py`` draws the same cases at random (``declared_cases``).
"""

from __future__ import annotations

import pytest
from declared import CLI_BASE, HOSTILE_TEXTS, allocate_runs, cli_options, cli_refusal

from fuzzing import Case, _frames, check

GRID = _frames()["df"].to_csv(index=False).encode()
# the files the base lines read: the DiLoCo grid, and allocate's Chinchilla-shaped runs
FILES = {"g.csv": GRID, "n.csv": allocate_runs().to_csv(index=False).encode()}


def _refused_texts(option, n: int = 2) -> list[str]:
    """Up to ``n`` hostile texts the declaration of ``option`` refuses, spread over the pool."""
    refused = [t for t in HOSTILE_TEXTS if cli_refusal(option, t)]
    step = max(1, len(refused) // n)
    return refused[::step][:n]


CASES = [(cmd, o) for cmd in CLI_BASE for o in cli_options(cmd) if _refused_texts(o)]


def test_every_command_with_a_value_option_has_generated_cases():
    """The generator reaches every command of the base lines (a refactor that dropped the
    declarations would make the next test vacuous, and fails here instead)."""
    assert {cmd for cmd, _ in CASES} >= {"compare", "design", "search", "fit", "ci", "predict",
                                         "simulate"}  # fmt: skip
    assert len(CASES) >= 60


@pytest.mark.parametrize("cmd, option", CASES, ids=[f"{c}-{o.option_string}" for c, o in CASES])
def test_a_text_the_declaration_refuses_is_refused_in_one_line(cmd, option):
    """Texts an option's declaration refuses are refused in one line, every file unchanged."""
    for text in _refused_texts(option):
        argv = [*CLI_BASE[cmd], f"{option.option_string}={text}"]
        outcome = check(Case(argv, dict(FILES), must_refuse=cli_refusal(option, text)))
        assert outcome.kind == "refused", (argv, outcome.kind, outcome.detail)


@pytest.mark.slow
@pytest.mark.parametrize("cmd", sorted(CLI_BASE))
def test_the_base_lines_run(cmd):
    """Each base line is valid, so that a refusal of a generated case is the option's."""
    outcome = check(Case(list(CLI_BASE[cmd]), dict(FILES)))
    assert outcome.kind == "ok", (cmd, outcome.detail)
