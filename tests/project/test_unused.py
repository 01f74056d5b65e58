"""No unused function or class: every function and class defined at a module's top level in
``fitrules/`` is used by the package, or is public API.

The rule, by name (a use of a name counts for every definition of that name):

- A use is a reference to the name anywhere in ``fitrules/`` outside the definition's own body:
  a name (``f(x)``, an annotation, a base class, a decorator), an attribute (``x.f``), an
  import (``from .m import f``), or a string that is the name or a dotted path ending in it
  (``"f"`` for ``getattr``, ``"fitrules.cli:main"``, a string annotation; docstrings do not
  count); or an entry point in pyproject.toml's ``[project.scripts]``; or an autodoc directive
  in ``docs/`` (``.. autofunction:: fitrules.f``).
- Exempt: the public API (``fitrules.__all__``, which the docs' ``fitrules-api`` directive
  documents), dunder names, and test hooks (``pytest_*``, or a name holding ``_for_test``).
- Names used only by tests, benchmarks or tools count as unused: they are not public API, so
  the package should not carry them for their sake.
- A name used only inside another unused definition counts as used until that one goes.
- Methods are not checked (only module-level functions and classes): a method is reached by
  overriding, protocols and duck typing, which a by-name check cannot see.

``ALLOWED`` lists the unused names kept on purpose, each with why.
"""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT

TO_REMOVE_AFTER_FACES = "to remove after the face restructuring (issue 45)"
THEORY = (
    "the exact reference that tests/sim/test_theory.py and benchmarks/bench_theory.py hold the "
    "quadratic harness to: fitrules.sim.theory exists for them (docs/development.md, sim/)"
)
# (module path relative to the repository, name) -> why it stays although nothing uses it
ALLOWED: dict[tuple[str, str], str] = {
    ("fitrules/jobs/design/candidates.py", "cell_label"): TO_REMOVE_AFTER_FACES,
    ("fitrules/sim/corpus.py", "build_slice"): (
        "the recipe of the committed corpus slice, which data/README.md names; run by hand"
    ),
    ("fitrules/sim/theory.py", "second_moment_radius"): THEORY,
    ("fitrules/sim/theory.py", "variance_gain"): THEORY,
    ("fitrules/sim/theory.py", "mode_covariance"): THEORY,
    ("fitrules/sim/theory.py", "compressed_sync_variance"): THEORY,
    ("fitrules/sim/theory.py", "stable_step"): THEORY,
    ("fitrules/sim/theory.py", "exact_loss"): THEORY,
}

AUTODOC = re.compile(r"\.\.\s+auto\w+::\s*(fitrules(?:\.\w+)+)")
DOTTED = re.compile(r"^[A-Za-z_][\w.]*(:\w+)?$")


def _definitions(tree: ast.Module):
    """The module-level functions and classes of ``tree``, also under a top-level if or try."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            stack += node.body + node.orelse + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                stack += handler.body


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (they do not use a name)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.body and isinstance(node.body[0], ast.Expr):
                value = node.body[0].value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.add(id(value))
    return out


def _uses(tree: ast.Module):
    """(name, line) of every use of a name in ``tree``: names, attributes, imports, strings."""
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and DOTTED.match(node.value):
                yield re.split(r"[.:]", node.value)[-1], node.lineno


def _outside_uses(root: Path) -> set[str]:
    """Names used outside the package's own modules: entry points and autodoc directives."""
    names = set()
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        scripts = tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {})
        names |= {target.rsplit(":", 1)[-1] for target in scripts.values()}
    docs = root / "docs"
    for path in sorted(docs.rglob("*")) if docs.is_dir() else []:
        if path.suffix in (".md", ".rst", ".py") and path.is_file():
            names |= {m.rsplit(".", 1)[-1] for m in AUTODOC.findall(path.read_text())}
    return names


def _public(root: Path) -> set[str]:
    """``fitrules.__all__``, read and not imported: the strings of its literal and of the
    ``_PUBLIC`` table it is made from."""
    tree = ast.parse((root / "fitrules" / "__init__.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict | ast.List):
            if any(
                isinstance(t, ast.Name) and t.id in ("_PUBLIC", "__all__") for t in node.targets
            ):
                items = node.value.keys if isinstance(node.value, ast.Dict) else node.value.elts
                names |= {k.value for k in items if isinstance(k, ast.Constant)}
    return names


def _exempt(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    return dunder or name.startswith("pytest_") or "_for_test" in name


def unused(root: Path) -> list[tuple[str, str, int]]:
    """(module path, name, line) of every module-level function and class under
    ``root/fitrules`` that nothing uses by the rule of this module's docstring."""
    defined = []  # (path, name, first line, last line)
    used: dict[str, list[tuple[str, int]]] = {}  # name -> [(path, line)]
    for path in sorted((root / "fitrules").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        for node in _definitions(tree):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defined.append((rel, node.name, first, node.end_lineno))
        for name, line in _uses(tree):
            used.setdefault(name, []).append((rel, line))
    kept = _public(root) | _outside_uses(root)
    out = []
    for rel, name, first, last in defined:
        if name in kept or _exempt(name):
            continue
        if any(not (p == rel and first <= line <= last) for p, line in used.get(name, [])):
            continue
        out.append((rel, name, first))
    return sorted(out, key=lambda d: (d[0], d[2]))


def test_no_module_level_function_or_class_is_unused():
    """Every module-level function and class of the package is used, public, exempt or allowed
    with a reason; and every allowed name is still defined and still unused."""
    found = {(rel, name): line for rel, name, line in unused(ROOT)}
    fresh = [f"{r}:{line} {name}" for (r, name), line in found.items() if (r, name) not in ALLOWED]
    assert not fresh, "unused (remove, or allow with a reason):\n" + "\n".join(fresh)
    stale = [f"{rel} {name}" for rel, name in ALLOWED if (rel, name) not in found]
    assert not stale, "allowed but used or gone (drop from ALLOWED):\n" + "\n".join(stale)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "fitrules"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('_PUBLIC = {"api_name": "fitrules.m"}\n')
    for name, text in files.items():
        (pkg / name).write_text(text)
    return tmp_path


def test_the_check_finds_an_unused_function_in_a_snippet(tmp_path):
    """A function used only by itself is found; uses by name, attribute, import, string,
    entry point and public API are seen."""
    root = _package(tmp_path, {
        "m.py": (
            '"""doc naming lonely and Lonely."""\n'
            "import fitrules.n as n\n"
            "def lonely(k):\n    return lonely(k - 1) if k else 0\n"
            "class Lonely:\n    pass\n"
            "def by_name():\n    pass\n"
            "def by_attribute():\n    pass\n"
            "def by_string():\n    pass\n"
            "def main():\n    pass\n"
            "def api_name():\n    pass\n"
            "def __getattr__(name):\n    return getattr(n, 'by_string')\n"
            "x = by_name\n"
        ),
        "n.py": "import fitrules.m as m\nfrom fitrules.m import by_name\ny = m.by_attribute\n",
    })  # fmt: skip
    (root / "pyproject.toml").write_text('[project.scripts]\nx = "fitrules.m:main"\n')
    assert [(rel, name) for rel, name, _ in unused(root)] == [
        ("fitrules/m.py", "lonely"),
        ("fitrules/m.py", "Lonely"),
    ]


@pytest.mark.slow  # a copy of the package checked, 6 s of CPU (a loaded machine): CI's slow step runs it
def test_the_check_finds_a_function_made_unused_in_a_copy(tmp_path):
    """In a copy of the package, a function added with no caller is found by name."""
    shutil.copytree(ROOT / "fitrules", tmp_path / "fitrules",
                    ignore=shutil.ignore_patterns("__pycache__", "_data"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "fitrules" / "base" / "util.py"
    path.write_text(path.read_text() + "\n\ndef _nobody_calls_this():\n    return 1\n")
    assert ("fitrules/base/util.py", "_nobody_calls_this") in {
        (rel, name) for rel, name, _ in unused(tmp_path)
    }
