"""The command line's help (issue 32): no subcommand showed an example, bare ``fitrules``
printed one error line, ``forms add --help`` listed options it ignores, a misspelt form name
got no "did you mean", and ``^`` was not diagnosed as a power."""

from __future__ import annotations

import argparse
import shlex

import pytest

from fitrules.cli import EXAMPLES, build_parser
from helpers import refused, run


def _parsers(parser, name=""):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}".strip())


def test_every_command_shows_examples_that_parse():
    parser = build_parser()
    names = []
    for name, p in _parsers(parser):
        text = p.format_help()
        assert "examples:\n  fitrules " in text, name
        names.append(name)
        for line in text.split("examples:\n", 1)[1].splitlines():
            line = line.strip()
            if not line.startswith("fitrules ") or "--help" in line:
                continue
            args = build_parser().parse_args(shlex.split(line)[1:])  # a valid command line
            assert args.command == line.split()[1], line
    assert set(EXAMPLES) <= set(names)
    assert {"compare", "forms add", "ledger verify", "simulate"} <= set(names)


def test_bare_fitrules_prints_the_help(capsys):
    code, out, err = run([], capsys)
    assert code == 0 and err == ""
    assert out.startswith("usage: fitrules") and "compare" in out and "examples:" in out


def test_forms_add_help_shows_only_what_it_uses():
    """forms add and show label nothing: --unit and --units are accepted, not listed."""
    parsers = dict(_parsers(build_parser()))
    for name in ("forms add", "forms show"):
        help_text = parsers[name].format_help()
        assert "--unit" not in help_text and "--units" not in help_text
        assert "--data" in help_text
    assert "--units" in parsers["compare"].format_help()


def test_a_misspelt_form_name_gets_did_you_mean(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused(["compare", "--forms", "compositon,additive"], capsys, tmp_path,
            r"unknown form 'compositon' \(did you mean 'composition'\?\)")  # fmt: skip
    refused(["fit", "--form", "log_addtive"], capsys, tmp_path, "did you mean 'log_additive'")


@pytest.mark.parametrize("where", ["--form", "fit"])
def test_caret_is_diagnosed(where, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = (["compare", "--form", "p = L0 + a*H^b"] if where == "--form"
            else ["fit", "--form", "p = L0 + a*omega^c"])  # fmt: skip
    refused(argv, capsys, tmp_path, r"\^ is not a power: use \*\* for a power")
