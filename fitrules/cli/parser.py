"""The command line's parser, made from the declarations of :mod:`fitrules.jobs.options`."""

from __future__ import annotations

import argparse

from fitrules.base.errors import UsageError
from fitrules.base.options import add_command
from fitrules.jobs.options import COMMANDS

# examples at the end of each command's --help (tests/cli/test_help.py parses every one)
EXAMPLES = {decl.cmd: list(decl.examples) for decl in COMMANDS if decl.examples}


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr and exit 2, like every error."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {' '.join(message.split())}")


def _common() -> argparse.ArgumentParser:
    """Options every command takes."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        # SUPPRESS: a -q given before a subcommand (ledger -q verify) is not reset by the
        # subcommand's own default
        default=argparse.SUPPRESS,
        help="print nothing but errors (files asked for are still written; on a command with "
        "--json, --json - still prints the JSON)",
    )
    return p


class _ExamplesFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the examples keep their lines (commands are not rewrapped)."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    """``fitrules`` and its subcommands, each ending its help with examples."""
    from fitrules import __version__

    parser = _Parser(
        prog="fitrules",
        description="Decide honestly whether a closed-form rule predicts a grid of experiments.",
        epilog="examples:\n  fitrules compare --splits 300\n  fitrules compare --help"
        "\n\nfitrules COMMAND --help shows a command's options and examples",
        formatter_class=_ExamplesFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fitrules {__version__}")
    subcommands = {"": parser.add_subparsers(dest="command", required=True, metavar="COMMAND")}
    common = _common()
    for decl in COMMANDS:
        group = decl.cmd.rpartition(" ")[0]
        groups = ("forms", "ledger")  # groups of actions: no command of their own
        shown = {}
        if decl.examples:
            lines = "\n".join(f"  {line}" for line in decl.examples)
            shown = dict(epilog=f"examples:\n{lines}", formatter_class=_ExamplesFormatter)
        func = None if decl.cmd in groups else decl.cmd
        p = add_command(subcommands[group], decl, [common], func, **shown)
        if decl.cmd in groups:
            subcommands[decl.cmd] = p.add_subparsers(
                dest=f"{decl.cmd}_command", required=True, metavar="ACTION"
            )
    return parser
