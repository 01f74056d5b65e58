"""No ``--flag`` word in a string literal below the command line (issue 45): a message names
a parameter with :func:`fitrules.base.errors.param`, and only ``fitrules/cli/`` makes flags.

Exempt, by rule: docstrings; the help of declarations (the values of ``help=``,
``summary=``, ``description=``, ``epilog=``, ``examples=``); and a literal on a line that
carries a ``# flag words`` comment, or right below such a comment line, which says why the
text is deliberately about the command line (a report's advice, a refusal's fix that the
command line applies).

``python tools/param_words.py PATHS`` rewrites what it can and lists the rest.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fitrules"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
PRAGMA = "# flag words"
HELP_KEYWORDS = {"help", "summary", "description", "epilog", "examples"}

# TEMPORARY: a flag whose parameter some command shows under another flag (seed is
# --bootstrap-seed in fit, splits --design-splits in design; --form is `forms`, whose flag
# is --forms; --fit-data is `grid`, shown as --data): each needs the reachable commands
# checked before it becomes a param()
AMBIGUOUS = {
    ("fitrules/model/splits.py", "--splits"),
    ("fitrules/model/splits.py", "--seed"),
    ("fitrules/model/splits.py", "--fit-data"),
    ("fitrules/model/forms.py", "--form"),
    ("fitrules/engine/stats.py", "--seed"),
    ("fitrules/engine/intervals/bootstrap.py", "--bootstrap-seed"),
}


def _exempt(tree: ast.AST) -> set[int]:
    """ids of docstrings, declarations' help, and every node below an f-string."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            out |= {id(n) for n in ast.walk(node.value)}
    return out


def _text(node: ast.AST) -> str | None:
    """The literal text of a string literal (an f-string's text outside its fields)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return None


def flag_words(source: str) -> list[tuple[int, str]]:
    """(line, flag) of each flag word in a string literal of ``source`` no rule exempts."""
    tree, lines = ast.parse(source), source.splitlines()
    exempt = _exempt(tree)
    found = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or id(node) in exempt:
            continue
        if isinstance(node, ast.JoinedStr):  # its parts share its place (Python 3.11)
            exempt |= {id(n) for n in ast.walk(node)}
        span = lines[node.lineno - 1 : node.end_lineno]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""  # a comment line
        if above.startswith(PRAGMA) or any(PRAGMA in line for line in span):
            continue
        found += [(node.lineno, flag) for flag in FLAG.findall(text)]
    return found


def test_no_flag_words_below_the_command_line():
    """Every string literal of fitrules/ outside cli/ names parameters, not flags, unless a
    stated rule exempts it (or it is on the temporary list)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("fitrules/cli/"):
            continue
        offenders += [
            f"{rel}:{line}: {flag}"
            for line, flag in flag_words(path.read_text())
            if (rel, flag) not in AMBIGUOUS
        ]
    assert not offenders, "flag words below the command line:\n" + "\n".join(offenders)


def test_the_rules_find_flags():
    """The check sees a flag in a plain string and in an f-string's text, and not in a
    docstring, a declaration's help or a line marked # flag words."""
    import textwrap

    source = textwrap.dedent(
        '''
        """--doc"""
        a = "--plain"
        b = f"{x} --formatted"
        c = Option("x", help="--help-text")
        d = "--marked"  # flag words: a report's advice
        # flag words: a fix the command line applies
        e = ("--above", None)
        '''
    )
    assert [flag for _, flag in flag_words(source)] == ["--plain", "--formatted"]
