"""Every test says what it checks: each ``test_*`` function of tests/ (module-level or in a
class, sync or async) has a docstring that is neither empty nor a placeholder.

``python tests/project/test_test_docstrings.py [FOLDER ...]`` lists the offenders, under the
given folders of tests/ only if any are named.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# what tools/sort_tests.py left when it moved a test, with nothing said of the test itself
MOVED = re.compile(r"\(\s*moved from [^)]*\)", re.IGNORECASE)
# docstrings that stand in for one, compared lower-case with punctuation dropped
FILLERS = {"", "test", "tests", "a test", "test function", "test case", "docstring", "placeholder"}
TODO = re.compile(r"^\W*(todo|fixme|xxx|tbd)\b", re.IGNORECASE)


def _words(text: str) -> str:
    """Lower-case words of ``text``, punctuation and underscores as spaces."""
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def problem(name: str, doc: str | None) -> str | None:
    """Why the docstring ``doc`` of test ``name`` says nothing of the test, or None."""
    if doc is None:
        return "no docstring"
    if not doc.strip():
        return "empty docstring"
    if not MOVED.sub("", doc).strip():
        return "placeholder docstring (Moved from ...)"
    if TODO.match(doc):
        return "placeholder docstring (TODO)"
    words = _words(doc)
    if words in FILLERS:
        return f"placeholder docstring ({doc.strip()!r})"
    name_words = _words(name)
    bare = name_words.removeprefix("test ")
    if words in {name_words, bare, f"test that {bare}", f"tests that {bare}"}:
        return "docstring only repeats the function's name"
    return None


def _tests(body: list[ast.stmt], prefix: str = ""):
    """(qualified name, node) of each test function in ``body``, into classes too."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _tests(node.body, f"{prefix}{node.name}.")


def offenders(source: str, filename: str = "<snippet>") -> list[str]:
    """``filename:line name: problem`` for each test of ``source`` without a real docstring."""
    out = []
    for qualname, node in _tests(ast.parse(source, filename).body):
        why = problem(node.name, ast.get_docstring(node))
        if why:
            out.append(f"{filename}:{node.lineno} {qualname}: {why}")
    return out


def offenders_under(*folders: Path) -> list[str]:
    """The offenders of every tests/**/test_*.py under ``folders`` (all of tests/ if none)."""
    out = []
    for folder in folders or (TESTS,):
        for path in sorted(folder.rglob("test_*.py")):
            name = path.relative_to(TESTS.parent).as_posix()
            out += offenders(path.read_text(encoding="utf-8"), name)
    return out


def test_every_test_has_a_docstring_saying_what_it_checks():
    """No test function under tests/ lacks a docstring or has only a placeholder one."""
    found = offenders_under()
    assert not found, f"{len(found)} tests do not say what they check:\n" + "\n".join(found)


SNIPPETS = {
    "missing": ("def test_a():\n    assert True\n", "no docstring"),
    "empty": ('def test_a():\n    """"""\n', "empty docstring"),
    "blank": ('def test_a():\n    """   """\n', "empty docstring"),
    "moved": ('def test_a():\n    """(Moved from tests/test_x.py.)"""\n', "(Moved from"),
    "moved, two lines": (
        'def test_a():\n    """\n    (Moved from tests/x.py.)\n    """\n',
        "Moved",
    ),
    "todo": ('def test_a():\n    """TODO"""\n', "(TODO)"),
    "todo with words": ('def test_a():\n    """TODO: say what."""\n', "(TODO)"),
    "test.": ('def test_a():\n    """Test."""\n', "('Test.')"),
    "name": ('def test_cells_are_means():\n    """Cells are means."""\n', "repeats the function"),
    "whole name": ('def test_cells_are_means():\n    """test_cells_are_means"""\n', "repeats"),
    "in a class": ("class TestX:\n    def test_a(self):\n        pass\n", "TestX.test_a: no doc"),
    "async": ('async def test_a():\n    """Test"""\n', "placeholder docstring"),
    "async in a class": (
        'class TestX:\n    async def test_a(self):\n        """(moved from x)"""\n',
        "TestX.test_a: placeholder",
    ),
}


@pytest.mark.parametrize(("source", "expected"), SNIPPETS.values(), ids=SNIPPETS)
def test_the_check_names_each_kind_of_missing_or_placeholder_docstring(source, expected):
    """Each snippet's one test is named, with the reason its docstring does not count."""
    (found,) = offenders(source, "t.py")
    assert found.startswith("t.py:") and expected in found, found


def test_the_check_passes_a_real_docstring_and_ignores_other_functions():
    """A docstring saying what is checked passes, even beside a moved-from note; helpers and
    functions nested in a test need none."""
    source = (
        "def helper():\n    pass\n\n"
        "def test_a():\n"
        '    """A constant that appears twice in an expression is not linear."""\n'
        "    def inner():\n        pass\n\n"
        "class TestX:\n"
        "    def setup_method(self):\n        pass\n\n"
        "    async def test_b(self):\n"
        '        """Cells are seed means.\n\n        (Moved from tests/test_x.py.)"""\n'
    )
    assert offenders(source) == []


if __name__ == "__main__":
    found = offenders_under(*(TESTS / f for f in sys.argv[1:]))
    print("\n".join(found) or "every test says what it checks")
    print(f"{len(found)} offenders")
