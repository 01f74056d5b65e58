"""Two directives that build the reference pages from the package itself, so that they
cannot drift from it:

``fitrules-api``
    an autosummary table and an autodoc entry for every public name of ``fitrules`` (its
    ``__all__``, less ``__version__``), grouped into functions, results and other classes,
    errors and data; a name added to ``fitrules/__init__.py`` appears without editing a page.
``fitrules-cli``
    a section per command and subcommand of ``fitrules.cli.build_parser()`` holding its
    ``--help`` exactly as the command line prints it (at 100 columns, so the page does not
    depend on the terminal of whoever builds it).
"""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

HELP_COLUMNS = "100"


def _public_names() -> list[str]:
    import fitrules

    return [n for n in fitrules.__all__ if n != "__version__"]


def _kind(name: str) -> str:
    import fitrules

    obj = getattr(fitrules, name)
    if isinstance(obj, type):
        return "errors" if issubclass(obj, Exception) else "classes"
    if callable(obj):
        return "functions"
    return "data"


GROUPS = {
    "functions": "Functions",
    "classes": "Results and other classes",
    "errors": "Errors",
    "data": "Data",
}
DIRECTIVE = {
    "functions": "autofunction",
    "classes": "autoclass",
    "errors": "autoexception",
    "data": "autodata",
}


class ApiDirective(SphinxDirective):
    """Every public name of ``fitrules``, documented from its docstring."""

    def run(self):
        names = _public_names()
        lines: list[str] = []
        for group, title in GROUPS.items():
            members = [n for n in names if _kind(n) == group]
            if not members:
                continue
            lines += [title, "-" * len(title), "", ".. autosummary::", ""]
            lines += [f"   fitrules.{n}" for n in members]
            lines.append("")
            for n in members:
                lines.append(f".. {DIRECTIVE[group]}:: fitrules.{n}")
                if group == "classes":
                    lines.append("   :members:")
                if group == "data":
                    lines.append("   :no-value:")
                lines.append("")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="fitrules-api"), node)
        return node.children


@contextmanager
def _columns(value: str):
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _commands(parser: argparse.ArgumentParser, name: str = "fitrules"):
    """(command line, parser) of ``parser`` and every subcommand below it, depth first."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")


class CliDirective(SphinxDirective):
    """The ``--help`` of every command, from the parser the command line uses."""

    def run(self):
        from fitrules.cli import build_parser

        with _columns(HELP_COLUMNS):
            parser = build_parser()
            helps = [(name, p.format_help()) for name, p in _commands(parser)]
        out = []
        for name, text in helps:
            names = [nodes.fully_normalize_name(name)]
            section = nodes.section(ids=[nodes.make_id(name)], names=names)
            section += nodes.title(text=name)
            block = nodes.literal_block(text.rstrip("\n"), text.rstrip("\n"))
            block["language"] = "text"
            section += block
            self.state.document.note_implicit_target(section, section)
            out.append(section)
        return out


def setup(app):
    app.add_directive("fitrules-api", ApiDirective)
    app.add_directive("fitrules-cli", CliDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

