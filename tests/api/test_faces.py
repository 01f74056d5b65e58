"""The two faces of every command, made from one declaration (fitrules.jobs.options), agree.

Each declared option of a command is a parameter of its ``fr.*`` function with the same
default, and a flag of its command whose value, when not given, is the declared one; neither
face has an option the declaration lacks; and no signature or parser states a declared
default again.
"""

import argparse
import ast
import inspect
import re
from pathlib import Path

import pytest
from declared import COMMAND_FUNCTIONS

import fitrules as fr
from fitrules.base.options import Command, Option, add_command
from fitrules.cli import build_parser
from fitrules.jobs import options as declared

PACKAGE = Path(fr.__file__).parent

FUNCTIONS = COMMAND_FUNCTIONS
# what a function takes that the command line reads from its data options instead
GRID = {"grid"}
WITH_FUNCTION = [d for d in declared.COMMANDS if d.cmd in FUNCTIONS] + [declared.LOAD_GRID]
ON_COMMAND_LINE = [d for d in declared.COMMANDS if d.cmd not in ("forms", "ledger")]


def _subparser(cmd: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in cmd.split():
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


def _minimal_line(decl: Command) -> list[str]:
    """The command with a value for each required option and nothing else."""
    line = decl.cmd.split()
    for o in decl.options:
        if o.on_command_line and o.cli.get("required"):
            line += [o.option_string, "x"]
        elif o.on_command_line and not o.option_string.startswith("-") and "nargs" not in o.cli:
            line += ["x"]
    return line


@pytest.mark.parametrize("decl", WITH_FUNCTION, ids=lambda d: d.cmd)
def test_every_python_option_is_a_parameter_with_the_declared_default(decl):
    """Each declared Python option is a parameter of the fr function with the declared default."""
    params = inspect.signature(FUNCTIONS[decl.cmd]).parameters
    for o in decl.python:
        assert o.name in params, f"fr function of {decl.cmd!r} lacks {o.name}"
        default = params[o.name].default
        assert default is not inspect.Parameter.empty or o.value is None, o.name
        if default is not inspect.Parameter.empty:
            assert default == o.value, f"{decl.cmd} {o.name}: {default!r} != {o.value!r}"
    undeclared = set(params) - {o.name for o in decl.python} - GRID
    assert not undeclared, f"{decl.cmd}: parameters not declared: {sorted(undeclared)}"


@pytest.mark.parametrize("decl", ON_COMMAND_LINE, ids=lambda d: d.cmd)
def test_every_flag_is_declared_and_defaults_to_the_declared_value(decl):
    """A command's flags are exactly its declared options, each defaulting to the declared value."""
    parser = _subparser(decl.cmd)
    dests = {a.dest for a in parser._actions} - {"help", "quiet"}
    flagged = {o.name for o in decl.options if o.on_command_line}
    assert dests == flagged
    args = build_parser().parse_args(_minimal_line(decl))
    for o in decl.options:
        if o.on_command_line and not o.cli.get("required") and o.option_string.startswith("-"):
            assert getattr(args, o.name) == o.cli_value, f"{decl.cmd} {o.option_string}"


def test_the_python_default_is_what_the_command_line_gets():
    """A default written as text is parsed as a user's text is: 1/3, 1e-3, 300."""
    assert declared.COMPARE.train_frac == 1 / 3
    assert declared.COMPARE.delta == 1e-3
    assert declared.CI.resamples == 10_000
    args = build_parser().parse_args(["compare"])
    assert args.train_frac == declared.COMPARE.train_frac


def test_a_declaration_refuses_an_option_twice_or_named_as_its_fields():
    """A Command refuses an option declared twice or named like one of its own fields."""
    with pytest.raises(ValueError, match="declared twice: seed"):
        Command("x", "x", (Option("seed"), Option("seed")))
    with pytest.raises(ValueError, match="named as fields: summary"):
        Command("x", "x", (Option("summary"),))


def test_a_generated_command_shows_defaults_as_written_and_flags_by_their_names():
    """A generated command's help shows a default as written (1e-3) and a flag by its own name."""
    sub = argparse.ArgumentParser(prog="p").add_subparsers()
    decl = Command("c", "c", (Option("delta", "1e-3", help="(default %(default)s)",
                                     cli=dict(type=float)),
                              Option("bounds", flag="--bound", help="b")))  # fmt: skip
    text = add_command(sub, decl, [], None).format_help()
    assert "(default 1e-3)" in text and "--bound BOUND" in text


def _defaults_in_signatures_of(node: ast.FunctionDef):
    """(function, parameter, default text) of every literal default of ``node``."""
    a = node.args
    pos = a.posonlyargs + a.args
    pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True))
    pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
    for p, d in pairs:
        if isinstance(d, ast.Constant | ast.BinOp | ast.UnaryOp | ast.Tuple):
            yield node.name, p.arg, ast.unparse(d)


def _defaults_in_signatures(path: Path):
    """(function, parameter, default text) of every literal default in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            yield from _defaults_in_signatures_of(node)


def test_no_public_function_repeats_a_declared_default():
    """fr.compare(train_frac=COMPARE.train_frac): the literal is written once, declared."""
    repeated = []
    files = {Path(inspect.getsourcefile(inspect.unwrap(f))) for f in FUNCTIONS.values()}
    assert PACKAGE / "jobs" / "public" / "compare.py" in files
    signatures = [s for path in sorted(files) for s in _defaults_in_signatures(path)]
    for name, param, text in signatures:
        if text in ("None", "False", "True", "()"):
            continue
        decl = next((d for d in WITH_FUNCTION if FUNCTIONS[d.cmd].__name__ == name), None)
        if decl is not None and param in {o.name for o in decl.python}:
            repeated.append(f"{name}({param}={text})")
    assert not repeated


def test_the_command_line_declares_no_option_of_its_own():
    """Only -q (every command's) is added by hand; the rest comes from the declarations."""
    for path in (PACKAGE / "cli").glob("*.py"):
        calls = re.findall(r"add_argument\(\s*\"(-[-\w]+)", path.read_text())
        assert set(calls) <= {"-q", "--version"}, path.name


# the same name and value by coincidence, not the option's default: a simulated grid's seeds
# per cell, and a sign-flip test's level
COINCIDENCES = {("runs_from_form", "seeds"), ("units_verdict", "alpha")}


def test_no_function_or_field_in_the_package_repeats_a_declared_default():
    """Each default is written once: the jobs, the engine and the model refer to the
    declaration or to the constant in fitrules.base.limits that it is made from."""
    declared_values: dict[str, set] = {}
    for decl in [*declared.COMMANDS, declared.LOAD_GRID]:
        for o in decl.options:
            if o.value not in (None, False, True, (), []):
                declared_values.setdefault(o.name, set()).add(repr(o.value))
    repeated = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            found = []
            if isinstance(node, ast.FunctionDef):
                found = [(node.name, p, t) for _, p, t in _defaults_in_signatures_of(node)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if isinstance(node.value, ast.Constant):
                    found = [("field", node.target.id, ast.unparse(node.value))]
            for where, name, text in found:
                try:
                    value = repr(eval(text))  # a literal: a number, text, 1 / 3
                except Exception:
                    continue
                hit = value in declared_values.get(name, ())
                if hit and (where, name) not in COINCIDENCES:
                    repeated.append(f"{path.relative_to(PACKAGE)}: {where}({name}={text})")
    assert not repeated
