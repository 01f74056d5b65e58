"""The README's examples, read from the README itself, for the tests that run them."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(lang: str) -> list[str]:
    """The README's fenced code blocks in ``lang``."""
    text = (ROOT / "README.md").read_text()
    return [body for kind, body in FENCE.findall(text) if kind == lang]


def from_python() -> str:
    """The block of the section "From Python"."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    (body,) = [b for kind, b in FENCE.findall(section) if kind == "python"]
    return body


def statements(code: str) -> list[str]:
    """``code`` cut into notebook cells: one per line of top-level statements (statements
    on one line, joined by ';', stay together, as a user would type them)."""
    tree = ast.parse(code)
    lines = code.splitlines()
    cells: list[tuple[int, int]] = []
    for node in tree.body:
        start, end = node.lineno, node.end_lineno or node.lineno
        if cells and start <= cells[-1][1]:
            cells[-1] = (cells[-1][0], max(end, cells[-1][1]))
        else:
            cells.append((start, end))
    return ["\n".join(lines[a - 1 : b]) for a, b in cells]
