"""The command line's help: examples that parse, help for every option, did-you-mean, a caret
diagnosed."""

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


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner, subsub in _subparsers(sub):
                    yield f"{name} {inner}", subsub


def _help(command: str) -> str:
    return dict(_subparsers(build_parser()))[command].format_help()


def test_every_command_shows_examples_that_parse():
    """Every command's help ends with examples, and each example parses as that command."""
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
    """fitrules with no arguments prints the help with its examples and exits 0."""
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
    """A misspelt form name in --forms or --form is refused with a did-you-mean."""
    monkeypatch.chdir(tmp_path)
    refused(["compare", "--forms", "compositon,additive"], capsys, tmp_path,
            r"unknown form 'compositon' \(did you mean 'composition'\?\)")  # fmt: skip
    refused(["fit", "--form", "log_addtive"], capsys, tmp_path, "did you mean 'log_additive'")


@pytest.mark.parametrize("where", ["--form", "fit"])
def test_caret_is_diagnosed(where, tmp_path, capsys, monkeypatch):
    """A caret in a form is refused, saying ** is the power, in compare and fit."""
    monkeypatch.chdir(tmp_path)
    argv = (["compare", "--form", "p = L0 + a*H^b"] if where == "--form"
            else ["fit", "--form", "p = L0 + a*omega^c"])  # fmt: skip
    refused(argv, capsys, tmp_path, r"\^ is not a power: use \*\* for a power")


def test_form_option_help_says_what_it_does():
    """compare's --form help says the form runs alone unless --forms is given."""
    text = " ".join(_help("compare").split())
    assert "on its own when --forms is not given (the built-in set is then left out)" in text


def test_every_option_of_every_command_has_help():
    """Every option of every command and subcommand has a help text."""
    missing = []
    for name, sub in _subparsers(build_parser()):
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {action.option_strings or action.dest}")
    assert not missing, missing


def test_ci_help_names_one_default_grid_and_tolerance_states_its_default():
    """ci's help names its one default grid; predict's help states --tolerance's default."""
    ci = " ".join(_help("ci").split())
    assert "paired_tuned.csv" in ci and "main grid" not in ci
    assert "default: none" in " ".join(_help("predict").split())
