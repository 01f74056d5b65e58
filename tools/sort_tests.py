"""Re-file the tests by layer and feature: tests/test_*.py -> tests/<layer>/test_<feature>.py.

Run from the repository root, on the old layout (every test file directly in tests/):

    python tools/sort_tests.py --check    # is every test mapped? print the plan, write nothing
    python tools/sort_tests.py            # move the tests, then check with ruff

On a later tree (more tests, edited tests), bring this script and its mapping over, run
``--check``, add to the mapping what it names, and run it again without ``--check``.

The mapping, ``tools/test_layout.toml``, sends every test function or class of every
``tests/test_*.py`` to a destination ``<layer>/test_<feature>.py``: a default per source file
and per-test overrides (a source without a default lists each of its tests). The script
refuses, printing what to add or remove and writing nothing, when a test is not covered by
the mapping or the mapping names a source file or a test that does not exist; and when
tests/<layer>/ already holds moved tests (it sorts the old layout, once). Test files already
written in tests/<layer>/ by hand are left as they are (a destination may not be one).

Each test is copied as its source text, with its decorators and the comment lines directly
above it (not section rulers such as ``# ---- design``), and one change: its docstring ends
with ``(Moved from tests/test_x.py.)`` (a docstring is added where there is none). The
module-level statements a moved test needs are copied with it, transitively: imports,
constants, fixtures and helpers, and always a source's side effects (``pytest.importorskip``,
autouse fixtures). A helper imported from another test module (``from test_x import y``) is
copied from it. Two sources that bring different definitions of one name into one file are
refused unless the mapping's [same] table says which one to take. After writing, the unused
imports are removed and the imports sorted (``ruff check --select F401,I001 --fix``), and
each test is checked to be the text written for it. Module-level statements that find files
from ``Path(__file__)`` get one parent more; ``sys.path.insert(0, str(Path(__file__).parent))``
is dropped, and ``from tests.helpers import`` becomes ``from helpers import``.

The helpers in tests/ (conftest.py, helpers.py, ...) stay where they are; pyproject.toml's
pytest options get ``--import-mode=importlib`` (so that cli/test_fit.py and engine/test_fit.py
do not clash) and ``pythonpath = ["tests"]`` (so that ``from helpers import run`` still
works). References to old test files in the docs, benchmarks, CI, tools and the helpers are
rewritten where the mapping makes it mechanical (a file moved whole, ``file::test``, or a
split file the mapping's [references] points somewhere; prose lines made too long are
rewrapped), and listed otherwise.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import subprocess
import symtable
import sys
import tokenize
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

DEST = re.compile(r"^(?P<layer>[a-z]+)/test_[a-z0-9_]+\.py$")
MOVED = "(Moved from tests/"  # the start of the line each moved test's docstring gets
LINE = 100  # pyproject.toml's [tool.ruff] line-length
RULER = re.compile(r"^#\s*-{3,}.*|^#.*-{10,}\s*$")
# files whose references to tests/test_*.py are rewritten (relative to the root)
REFERENCE_ROOTS = ["README.md", "Makefile", "pyproject.toml", "docs", "benchmarks", ".ci", "tools"]
REFERENCE_SUFFIXES = {".md", ".py", ".toml", ".txt", ".cfg", ".ini", ".sh", ".yml", ".yaml", ""}
OLD_REF = re.compile(r"\btests/(test_[A-Za-z0-9_]+\.py)(::([A-Za-z_][A-Za-z0-9_]*))?")


class Refusal(Exception):
    """The tree or the mapping is not what the script can sort; the message says why."""


# ------------------------------------------------------------------ reading a source file
@dataclass
class Stmt:
    """A module-level statement of a source file."""

    source: str  # file name, e.g. test_cli.py
    index: int  # position in the module body
    node: ast.stmt
    text: str  # its lines, with the comment lines directly above it
    binds: set[str]
    refs: set[str]  # module-level names it may need
    kind: str  # "import", "future", "test", "def", "side" (always carried), "other", "doc"


@dataclass
class Source:
    name: str
    path: Path
    text: str
    stmts: list[Stmt] = field(default_factory=list)
    tests: dict[str, Stmt] = field(default_factory=dict)
    bindings: dict[str, list[Stmt]] = field(default_factory=dict)
    dropped_comments: list[str] = field(default_factory=list)


def _is_test(node: ast.stmt) -> bool:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return node.name.startswith("test")
    if isinstance(node, ast.ClassDef):
        return node.name.startswith("Test")
    return False


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name for a in node.names}
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            out.add(sub.id)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(sub.name)
        elif isinstance(sub, ast.alias):
            out.add((sub.asname or sub.name).split(".")[0])
    return out


def _names_loaded(nodes) -> set[str]:
    out = set()
    for node in nodes:
        if node is None:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                out.add(sub.id)
    return out


def _strings(node: ast.AST) -> set[str]:
    return {
        s.value
        for s in ast.walk(node)
        if isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value.isidentifier()
    }


def _globals_of(table: symtable.SymbolTable) -> set[str]:
    out = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
    for child in table.get_children():
        out |= _globals_of(child)
    return out


def _is_fixture(node: ast.stmt) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any("fixture" in ast.unparse(d) for d in decorators)


def _is_autouse(node: ast.stmt) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any("fixture" in ast.unparse(d) and "autouse=True" in ast.unparse(d) for d in decorators)


def _is_side_effect(node: ast.stmt) -> bool:
    """A statement a moved test needs whether or not it names it."""
    if _is_autouse(node):
        return True
    if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
        return True  # e.g. pytest.importorskip("x"), matplotlib.use("Agg")
    return "importorskip" in ast.unparse(node) and not isinstance(
        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    )


def _is_path_hack(node: ast.stmt) -> bool:
    """``sys.path.insert(0, str(Path(__file__).parent))``: tests/ is on the path anyway."""
    text = ast.unparse(node)
    return isinstance(node, ast.Expr) and text.startswith("sys.path.") and "__file__" in text


def read_source(path: Path) -> Source:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    table = symtable.symtable(text, str(path), "exec")
    children: dict[str, list[symtable.SymbolTable]] = {}
    for child in table.get_children():
        children.setdefault(child.get_name(), []).append(child)
    src = Source(path.name, path, text)
    if any(_bound_names(n) & {"pytestmark"} for n in tree.body):
        raise Refusal(
            f"tests/{path.name}: a module-level pytestmark is not supported (it would mark "
            "every test of the file it is copied into); put the marks on the tests"
        )
    used_lines: set[int] = set()
    for i, node in enumerate(tree.body):
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        end = node.end_lineno or node.lineno
        first = start
        while first > 1 and lines[first - 2].startswith("#"):
            if RULER.match(lines[first - 2]):
                break
            first -= 1
        used_lines.update(range(first, end + 1))
        body = "\n".join(lines[first - 1 : end])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and i == 0:
            kind = "doc"
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            kind = "future"
        elif isinstance(node, ast.Import | ast.ImportFrom):
            kind = "import"
        elif _is_test(node):
            kind = "test"
        elif _is_side_effect(node):
            kind = "side"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            kind = "def"
        else:
            kind = "other"
        if kind != "doc" and any(
            n.startswith(("pytest_", "setup_module", "teardown_module")) for n in _bound_names(node)
        ):
            raise Refusal(
                f"tests/{path.name}:{node.lineno}: module-level hooks (pytest_*, setup_module) "
                "are not supported; move the hook to a conftest.py first"
            )
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and any(
            n.startswith("test") for n in _bound_names(node)
        ):
            raise Refusal(
                f"tests/{path.name}:{node.lineno}: a test made by assignment is not supported"
            )
        refs: set[str] = set()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            outer = list(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                outer += node.bases + [k.value for k in node.keywords]
            else:
                a = node.args
                outer += a.defaults + [d for d in a.kw_defaults if d is not None]
                outer += [x.annotation for x in a.args + a.kwonlyargs + a.posonlyargs]
                outer.append(node.returns)
            refs |= _names_loaded(outer)
            candidates = children.get(node.name, [])
            if candidates:
                tab = min(candidates, key=lambda t: abs(t.get_lineno() - node.lineno))
                refs |= _globals_of(tab)
            if kind == "test" or _is_fixture(node):
                if not isinstance(node, ast.ClassDef):
                    a = node.args
                    refs |= {x.arg for x in a.args + a.kwonlyargs + a.posonlyargs}
                refs |= _strings(node)  # usefixtures("x"), request.getfixturevalue("x")
        else:
            refs |= _names_loaded([node])
        stmt = Stmt(path.name, i, node, body, _bound_names(node), refs, kind)
        src.stmts.append(stmt)
        if kind == "test":
            src.tests[node.name] = stmt
        elif kind != "doc":
            for name in stmt.binds:
                src.bindings.setdefault(name, []).append(stmt)
    for n, line in enumerate(lines, 1):
        if line.startswith("#") and n not in used_lines and not line.startswith("#!"):
            src.dropped_comments.append(f"tests/{path.name}:{n}: {line}")
    return src


# ------------------------------------------------------------------ the mapping
@dataclass
class Mapping:
    files: dict[str, str]  # destination -> module docstring
    sources: dict[str, dict[str, str]]  # source -> {"default": dest, test: dest}
    same: dict[str, str]  # "source.py:name" -> "other.py:name" or "module:name"
    layers: list[str]
    references: dict  # "tests/test_x.py" -> new path; "some/file" -> {old: new or [new, ...]}


def load_mapping(path: Path) -> Mapping:
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise Refusal(f"{path}: cannot read the mapping ({err})") from err
    return Mapping(
        files=doc.get("files", {}),
        sources=doc.get("sources", {}),
        same=doc.get("same", {}),
        layers=doc.get("layers", []),
        references=doc.get("references", {}),
    )


def plan(sources: dict[str, Source], mapping: Mapping) -> dict[str, list[tuple[str, str]]]:
    """Destination -> [(source, test)], after checking the mapping against the tree."""
    problems: list[str] = []
    for name in mapping.sources:
        if name not in sources:
            problems.append(f"the mapping names tests/{name}, which does not exist: remove "
                            f'[sources."{name}"]')  # fmt: skip
    out: dict[str, list[tuple[str, str]]] = {}
    order = [s for s in mapping.sources if s in sources] + sorted(
        s for s in sources if s not in mapping.sources
    )
    for name in order:
        src = sources[name]
        entry = mapping.sources.get(name)
        if entry is None:
            if src.tests:
                lines = "\n".join(f'"{t}" = "<layer>/test_<feature>.py"' for t in src.tests)
                problems.append(
                    f"tests/{name} ({len(src.tests)} tests) is not in the mapping; add\n"
                    f'[sources."{name}"]\ndefault = "<layer>/test_<feature>.py"\n'
                    f"or one line per test:\n{lines}"
                )
            continue
        default = entry.get("default")
        for test in entry:
            if test != "default" and test not in src.tests:
                problems.append(
                    f'the mapping names {test} in [sources."{name}"], but tests/{name} has no '
                    "such test: remove it (or rename it to the test's new name)"
                )
        missing = [t for t in src.tests if t not in entry and default is None]
        if missing:
            lines = "\n".join(f'"{t}" = "<layer>/test_<feature>.py"' for t in missing)
            problems.append(
                f'[sources."{name}"] has no default and does not name these tests of '
                f"tests/{name}; add under it:\n{lines}"
            )
        for test in src.tests:
            dest = entry.get(test, default)
            if dest is None:
                continue
            m = DEST.match(dest)
            if not m:
                problems.append(f"{name}::{test} -> {dest!r}: a destination is "
                                "'<layer>/test_<feature>.py'")  # fmt: skip
                continue
            if mapping.layers and m["layer"] not in mapping.layers:
                problems.append(f"{name}::{test} -> {dest}: layer {m['layer']!r} is not one of "
                                f"{', '.join(mapping.layers)}")  # fmt: skip
            if dest not in mapping.files:
                problems.append(f'{dest} has no docstring: add it under [files] ("{dest}" = '
                                '"...")')  # fmt: skip
            out.setdefault(dest, []).append((name, test))
    problems = list(dict.fromkeys(problems))
    if problems:
        raise Refusal("the mapping does not fit the tree:\n\n" + "\n\n".join(problems))
    return out


# ------------------------------------------------------------------ building a destination
def _resolve_same(key: str, sources: dict[str, Source], mapping: Mapping):
    """The statement [same] puts in place of ``key`` ("source.py:name"), or None."""
    target = mapping.same.get(key)
    if target is None:
        return None
    mod, _, name = target.partition(":")
    if not name:
        raise Refusal(f'[same] "{key}" = "{target}": write "file.py:name" or "module:name"')
    if mod.endswith(".py"):
        if mod not in sources or name not in sources[mod].bindings:
            raise Refusal(f'[same] "{key}" = "{target}": tests/{mod} defines no {name}')
        return sources[mod].bindings[name]
    return f"from {mod} import {name}"


def _cross_import(stmt: Stmt, name: str, sources: dict[str, Source]):
    """The definitions ``from test_x import name`` stands for, copied from test_x.py."""
    node = stmt.node
    if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("test_")):
        return None
    other = f"{node.module}.py"
    if other not in sources:
        raise Refusal(f"tests/{stmt.source} imports from {node.module}, which is not a test "
                      "file directly in tests/")  # fmt: skip
    original = next(a.name for a in node.names if (a.asname or a.name) == name)
    if original != name or original not in sources[other].bindings:
        raise Refusal(f"tests/{stmt.source}: cannot copy {name} from tests/{other}")
    return sources[other].bindings[original]


@dataclass
class Built:
    text: str
    sources: list[str]
    side_effects: list[str]
    tests: dict[str, str]  # test name -> its text as written (to check after ruff's fixes)


def _identity(stmt: Stmt | str, name: str) -> str:
    """What ``name`` is bound to by ``stmt``: two statements that bind it alike agree."""
    if isinstance(stmt, str):
        node = ast.parse(stmt).body[0]
    else:
        node = stmt.node
    if isinstance(node, ast.ImportFrom):
        for a in node.names:
            if (a.asname or a.name) == name:
                mod = _helper_module(node.module or "")
                return f"from {mod} import {a.name}"
    if isinstance(node, ast.Import):
        for a in node.names:
            if (a.asname or a.name).split(".")[0] == name:
                return f"import {a.name} as {a.asname}" if a.asname else f"import {a.name}"
    return stmt if isinstance(stmt, str) else stmt.text


def _helper_module(module: str) -> str:
    """``tests.helpers`` -> ``helpers``: tests/ is on the path, so one module, one name."""
    return module[len("tests.") :] if module.startswith("tests.") else module


def _fix_paths(text: str, where: str) -> str:
    """Statements that find files from ``__file__`` are one folder deeper now."""
    if "__file__" not in text:
        return text
    out = re.sub(
        r"Path\(__file__\)(\.resolve\(\))?\.parents\[(\d+)\]",
        lambda m: f"Path(__file__){m[1] or ''}.parents[{int(m[2]) + 1}]",
        text,
    )
    out = re.sub(
        r"Path\(__file__\)(\.resolve\(\))?\.parent\b(?!s)",
        lambda m: f"Path(__file__){m[1] or ''}.parents[1]",
        out,
    )
    rest = re.sub(r"Path\(__file__\)(\.resolve\(\))?\.parents\[\d+\]", "", out)
    if "__file__" in re.sub(r"\b\w+\.__file__", "", rest):
        raise Refusal(f"{where}: uses __file__ in a way the script cannot move; write it as "
                      "Path(__file__).parent or .parents[N]")  # fmt: skip
    return out


def _without_replaced(st: Stmt, mapping: Mapping) -> str:
    """An import without the names [same] replaces or that come from another test module."""
    node = st.node
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("test_"):
        return ""
    keep = [a for a in node.names
            if f"{st.source}:{(a.asname or a.name).split('.')[0]}" not in mapping.same]  # fmt: skip
    if len(keep) == len(node.names):
        return st.text
    if not keep:
        return ""
    if isinstance(node, ast.ImportFrom):
        return ast.unparse(ast.ImportFrom(node.module, keep, node.level))
    return ast.unparse(ast.Import(keep))


def _fix_imports(text: str) -> str:
    """``from tests.x import`` as ``from x import``; no ``noqa: E402``, imports come first."""
    text = re.sub(r"^(\s*)from tests\.(\w+) import", r"\1from \2 import", text, flags=re.M)
    return re.sub(r"\s+# noqa: E402$", "", text, flags=re.M)


def verify(path: Path, built: Built) -> list[str]:
    """Each test in ``path`` is the text that was written for it (ruff touched imports only)."""
    text = path.read_text()
    lines = text.split("\n")
    found = {}
    for node in ast.parse(text).body:
        if _is_test(node):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            while start > 1 and lines[start - 2].startswith("#"):
                start -= 1
            found[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    problems = [f"{path}: {name} is missing" for name in built.tests if name not in found]
    problems += [f"{path}: {name} is not the text written for it" for name, want
                 in built.tests.items() if name in found and found[name] != want]  # fmt: skip
    problems += [f"{path}: {name} was not written by this script" for name in found
                 if name not in built.tests]  # fmt: skip
    return problems


def _with_moved_line(stmt: Stmt, lines_before: int) -> str:
    """The test's text with "(Moved from tests/x.py.)" as the last line of its docstring."""
    note = f"{MOVED}{stmt.source}.)"
    node = stmt.node
    lines = stmt.text.split("\n")
    offset = node.lineno - 1 - lines_before  # 0-based line of the text's first line in the file
    body = node.body
    first = body[0]
    has_doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    if has_doc:
        end_line = first.end_lineno - 1 - offset
        end_col = first.end_col_offset
        raw = lines[end_line].encode()  # ast's columns count bytes
        head, quote = raw[: end_col - 3].decode(), raw[end_col - 3 : end_col].decode()
        tail = raw[end_col:].decode()
        if quote not in ('"""', "'''"):
            raise Refusal(f"tests/{stmt.source}:{first.lineno}: {node.name}'s docstring is not "
                          "triple-quoted; the script cannot add its origin")  # fmt: skip
        indent = " " * first.col_offset
        if head.strip() == "":  # closing quotes on their own line: note, then quotes
            lines[end_line] = f"\n{indent}{note}\n{indent}{quote}{tail}"
        else:
            lines[end_line] = f"{head}\n\n{indent}{note}{quote}{tail}"
        return "\n".join(lines)
    if first.lineno == node.lineno and not isinstance(node, ast.ClassDef):
        raise Refusal(f"tests/{stmt.source}:{node.lineno}: {node.name} has its body on the "
                      "line of its def; the script cannot add a docstring")  # fmt: skip
    at = first.lineno - 1 - offset
    # comments directly above the first statement stay with it; the docstring goes first
    while at > 0 and lines[at - 1].strip().startswith("#"):
        prev = lines[at - 1]
        if len(prev) - len(prev.lstrip()) != first.col_offset:
            break
        at -= 1
    indent = " " * first.col_offset
    lines.insert(at, f'{indent}"""{note}"""' + ("\n" if isinstance(node, ast.ClassDef) else ""))
    return "\n".join(lines)


def build(dest: str, items: list[tuple[str, str]], sources: dict[str, Source],
          mapping: Mapping) -> Built:  # fmt: skip
    """The text of ``dest`` holding ``items`` and what they need."""
    carried: dict[tuple[str, int], Stmt] = {}
    extra_imports: list[str] = []
    names: dict[str, tuple[str, str]] = {}  # name -> (identity, where it came from)
    problems: list[str] = []
    future = False
    used_sources = list(dict.fromkeys(s for s, _ in items))
    side_effects = []

    def bind(name: str, identity: str, where: str) -> None:
        if name in names and names[name][0] != identity:
            problems.append(
                f"{dest}: {name!r} is defined differently by {names[name][1]} and {where}; "
                f'put those tests in different files, or add to [same] "{where}:{name}" = '
                f'"{names[name][1]}:{name}" if they are interchangeable'
            )
        names.setdefault(name, (identity, where))

    todo: list[Stmt] = []
    for s in used_sources:
        src = sources[s]
        future |= any(st.kind == "future" for st in src.stmts)
        for st in src.stmts:
            if st.kind == "side" and not _is_path_hack(st.node):
                todo.append(st)
                side_effects.append(f"tests/{s}:{st.node.lineno}: {ast.unparse(st.node)[:80]}")
    for s, t in items:
        todo.append(sources[s].tests[t])
    seen: set[tuple[str, int]] = set()
    while todo:
        st = todo.pop()
        key = (st.source, st.index)
        if key in seen:
            continue
        seen.add(key)
        carried[key] = st
        src = sources[st.source]
        for name in sorted(st.refs):
            if name in st.binds and st.kind == "test":
                continue
            for definer in src.bindings.get(name, []):
                if definer is st or _is_path_hack(definer.node):
                    continue
                same = _resolve_same(f"{st.source}:{name}", sources, mapping)
                if same is None:
                    same = _cross_import(definer, name, sources)
                if same is None:
                    bind(name, _identity(definer, name), definer.source)
                    todo.append(definer)
                elif isinstance(same, str):
                    bind(name, _identity(same, name), same.split(" ")[1])
                    if same not in extra_imports:
                        extra_imports.append(same)
                else:
                    for other in same:
                        bind(name, _identity(other, name), other.source)
                        todo.append(other)
    for st in carried.values():
        if st.kind == "test":
            bind(st.node.name, f"test {st.source}", st.source)
    if problems:
        raise Refusal("\n".join(dict.fromkeys(problems)))

    # the files whose default this is come first, then the others in the mapping's order
    order = {s: (mapping.sources[s].get("default") != dest, i)
             for i, s in enumerate(mapping.sources)}  # fmt: skip
    last = (True, len(order))
    stmts = sorted(carried.values(), key=lambda st: (order.get(st.source, last), st.source,
                                                      st.index))  # fmt: skip
    items = sorted(items, key=lambda it: (order.get(it[0], last), it[0]))  # stable: file order
    imports, others, tests = [], [], []
    for st in stmts:
        where = f"tests/{st.source}:{st.node.lineno}"
        if st.kind == "import":
            text = _fix_imports(_without_replaced(st, mapping))
            if not text:
                continue
            if text not in imports:
                imports.append(text)
        elif st.kind == "test":
            pass
        else:
            text = _fix_paths(st.text, where)
            if text not in [o for o, _ in others]:
                simple = not isinstance(st.node, ast.FunctionDef | ast.AsyncFunctionDef
                                        | ast.ClassDef)  # fmt: skip
                others.append((text, simple))
    for s, t in items:
        st = sources[s].tests[t]
        tests.append(_fix_paths(_with_moved_line(st, _lines_before(st)), f"tests/{s}::{t}"))
    doc = mapping.files[dest].strip("\n")
    parts = [f'"""{doc}"""']
    if future:
        parts.append("from __future__ import annotations")
    block = "\n".join(imports + extra_imports)
    if block:
        parts.append(block)
    chunks = others + [(x, False) for x in tests]
    text = "\n\n".join(parts) + "\n"
    previous_simple = False
    for chunk, simple in chunks:
        # one blank line between constants, two around functions and classes
        text += ("\n" if simple and previous_simple else "\n\n") + chunk + "\n"
        previous_simple = simple
    expected = {t: x for (_, t), x in zip(items, tests, strict=True)}
    return Built(text, used_sources, side_effects if len(used_sources) > 1 else [], expected)


def _lines_before(st: Stmt) -> int:
    """How many lines of ``st.text`` come before the node's own line (comments, decorators)."""
    total = st.text.count("\n") + 1
    own = (st.node.end_lineno or st.node.lineno) - st.node.lineno + 1
    return total - own


# ------------------------------------------------------------------ references elsewhere
def _reference_files(root: Path) -> list[Path]:
    out = []
    for name in REFERENCE_ROOTS:
        p = root / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(
                q for q in p.rglob("*")
                if q.is_file() and q.suffix in REFERENCE_SUFFIXES and "__pycache__" not in q.parts
                and q.name not in ("sort_tests.py", "test_layout.toml")
            )  # fmt: skip
    # the helpers kept in tests/ (the moved tests keep their text)
    out += sorted(p for p in (root / "tests").glob("*.py") if not p.name.startswith("test_"))
    return out


def update_references(root: Path, where_to: dict[str, dict[str, str]], mapping: Mapping,
                      apply: bool):  # fmt: skip
    """Rewrite ``tests/test_x.py[::test]`` where the mapping says where it went: a file moved
    whole, a test by name, or a split file that [references] points somewhere."""
    changed, left, wrapped = [], [], []
    defaults = {k: v for k, v in mapping.references.items() if isinstance(v, str)}
    for key in defaults:
        if not OLD_REF.fullmatch(key) or key[len("tests/") :] not in where_to:
            raise Refusal(f'[references] "{key}": not a test file of the tree')
    for path in _reference_files(root):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root)
        overrides = mapping.references.get(str(rel), {})
        if not isinstance(overrides, dict):
            overrides = {}
        seen: dict[str, int] = {}
        counts = {old: len(re.findall(re.escape(old) + r"(?!::)\b", text)) for old in overrides}

        def new(m: re.Match, rel=rel, text=text, overrides=overrides, seen=seen,
                counts=counts) -> str:  # fmt: skip
            old, test = m[1], m[3]
            tests = where_to.get(old)
            line = text.count("\n", 0, m.start()) + 1
            if tests is None:
                return m[0]
            if test:
                if test in tests:
                    return f"tests/{tests[test]}::{test}"
                left.append(f"{rel}:{line}: {m[0]} (no such test in the mapping)")
                return m[0]
            dests = sorted(set(tests.values()))
            key = f"tests/{old}"
            target = overrides.get(key)
            if isinstance(target, list):
                i = seen.get(key, 0)
                seen[key] = i + 1
                if len(target) == counts[key]:
                    return target[i]
                left.append(f"{rel}:{line}: {key} ([references.\"{rel}\"] lists {len(target)} "
                            f"targets for {counts[key]} mentions)")  # fmt: skip
                return m[0]
            if isinstance(target, str):
                return target
            if len(dests) == 1:
                return f"tests/{dests[0]}"
            if key in defaults:
                return defaults[key]
            left.append(f"{rel}:{line}: {key} (split into {', '.join(dests)})")
            return m[0]

        out = OLD_REF.sub(new, text)
        if out != text and path.suffix in (".py", ".toml"):
            out = _rewrap(out, text, rel, wrapped)
        if out != text:
            changed.append(str(rel))
            if apply:
                path.write_text(out)
    return changed, left + [f"{w} (rewrapped: check it reads well)" for w in wrapped]


def _prose_lines(text: str, suffix: str) -> set[int]:
    """Line numbers (1-based) of comments and of lines inside triple-quoted strings."""
    lines = text.split("\n")
    out = {i for i, line in enumerate(lines, 1) if line.lstrip().startswith("#")}
    if suffix != ".py":
        return out
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and re.match(r"^[rRbBuUfF]*('\'\'|\"\"\")", tok.string):
                out |= set(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _rewrap(out: str, before: str, rel: Path, wrapped: list[str], limit: int = LINE) -> str:
    """Lines a rewritten reference made longer than ``limit``, broken at a space when they
    are prose (a comment or a docstring); others are left and listed."""
    old, new = before.split("\n"), out.split("\n")
    if len(old) != len(new):
        return out
    prose = _prose_lines(out, rel.suffix)
    result: list[str] = []
    carry = ""  # words pushed from the line before into this one
    for n, (a, b) in enumerate(zip(old, new, strict=True), 1):
        indent = b[: len(b) - len(b.lstrip())]
        prefix = indent + ("# " if b.lstrip().startswith("#") else "")
        if carry:
            body = b[len(prefix) :]
            if n in prose and body[:1].isalnum() and len(b) + len(carry) + 1 <= limit:
                b = prefix + carry + " " + body
            else:
                result.append(prefix + carry)
            carry = ""
        if a == b or len(b) <= limit or n not in prose:
            result.append(b)
            continue
        rest = b
        while len(rest) > limit:
            cut = rest.rfind(" ", len(prefix) + 1, limit + 1)
            if cut < 0:
                break
            result.append(rest[:cut].rstrip())
            rest = prefix + rest[cut + 1 :].lstrip()
        wrapped.append(f"{rel}:{n}")
        words = rest[len(prefix) :]
        if n + 1 <= len(new) and n + 1 in prose and not re.search(r"[\"']{3}", words):
            carry = words  # try to put the last words at the head of the next line
        else:
            result.append(rest)
    if carry:
        result.append(carry)
    return "\n".join(result)


# ------------------------------------------------------------------ pyproject.toml
PYTEST_NOTE = (
    "# The tests sit in tests/<layer>/test_<feature>.py (tools/sort_tests.py made that layout):\n"
    "# the importlib import mode lets two layers hold files of one name (cli/test_fit.py,\n"
    "# engine/test_fit.py), and tests/ on the path keeps `from helpers import ...` working.\n"
)


def update_pyproject(path: Path) -> bool:
    text = path.read_text()
    m = re.search(r"^\[tool\.pytest\.ini_options\]\n", text, re.M)
    if not m:
        raise Refusal(f"{path}: no [tool.pytest.ini_options] table to set the import mode in")
    section_end = re.search(r"^\[", text[m.end() :], re.M)
    end = m.end() + (section_end.start() if section_end else len(text) - m.end())
    section = text[m.end() : end]
    new = section
    add = re.search(r'^addopts = "([^"\n]*)"\n', new, re.M)
    if add is None:
        new = 'addopts = "--import-mode=importlib"\n' + new
        add = re.search(r'^addopts = "([^"\n]*)"\n', new, re.M)
    elif "--import-mode" not in add[1]:
        opts = f'addopts = "{add[1]} --import-mode=importlib"\n'
        new = new[: add.start()] + opts + new[add.end() :]
        add = re.search(r'^addopts = "([^"\n]*)"\n', new, re.M)
    if not re.search(r"^pythonpath\s*=", new, re.M):
        new = new[: add.end()] + PYTEST_NOTE + 'pythonpath = ["tests"]\n' + new[add.end() :]
    if new == section:
        return False
    path.write_text(text[: m.end()] + new + text[end:])
    return True


# ------------------------------------------------------------------ main
def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401

        return [sys.executable, "-m", "ruff"]
    except ImportError:
        exe = shutil.which("ruff")
        if exe is None:
            raise Refusal("ruff is not installed: pip install ruff") from None
        return [exe]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mapping", default="tools/test_layout.toml", help="the mapping (TOML)")
    ap.add_argument("--root", default=".", help="the repository root (default: .)")
    ap.add_argument("--check", action="store_true",
                    help="check the mapping against the tree and print the plan; write nothing")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    tests = root / "tests"
    try:
        if not tests.is_dir():
            raise Refusal(f"{tests}: no tests folder (run from the repository root)")
        mapping_path = Path(args.mapping)
        if not mapping_path.is_absolute():
            mapping_path = root / mapping_path
        mapping = load_mapping(mapping_path)
        in_folders = sorted(
            p for p in tests.glob("*/**/test_*.py") if p.relative_to(tests).parts[0] != "data"
        )  # fmt: skip
        moved = [str(p.relative_to(root)) for p in in_folders if MOVED in p.read_text()]
        if moved:
            raise Refusal(
                "tests/ already holds moved tests (" + ", ".join(moved[:5])
                + (", ..." if len(moved) > 5 else "") + "): this script sorts the old layout "
                "(every test file directly in tests/) once; run it on a tree before the sort"
            )  # fmt: skip
        # test files already written in the new layout by hand stay as they are
        kept = {str(p.relative_to(tests)) for p in in_folders}
        sources = {p.name: read_source(p) for p in sorted(tests.glob("test_*.py"))}
        if not sources:
            raise Refusal("tests/ holds no test_*.py files: nothing to sort")
        destinations = plan(sources, mapping)
        built = {}
        problems = []
        for dest, items in sorted(destinations.items()):
            try:
                built[dest] = build(dest, items, sources, mapping)
            except Refusal as err:
                problems.append(str(err))
        clash = sorted(set(destinations) & kept)
        if clash:
            problems.append(
                "the mapping writes to test files that already exist in the new layout: "
                + ", ".join(f"tests/{c}" for c in clash) + "; send those tests to other files"
            )  # fmt: skip
        if problems:
            raise Refusal("\n".join(problems))
    except Refusal as err:
        print(f"sort_tests: refused: {err}", file=sys.stderr)
        return 2

    where_to: dict[str, dict[str, str]] = {}
    for dest, items in destinations.items():
        for s, t in items:
            where_to.setdefault(s, {})[t] = dest
    n_tests = sum(len(s.tests) for s in sources.values())
    print(f"{n_tests} tests of {len(sources)} files -> {len(destinations)} files:")
    for k in sorted(kept):
        print(f"  tests/{k}: already in the new layout, left as it is")
    for dest, items in sorted(destinations.items()):
        froms = sorted({s for s, _ in items})
        print(f"  tests/{dest}: {len(items)} from {', '.join(froms)}")
    for f in sorted(set(mapping.files) - set(destinations)):
        print(f"  (tests/{f} is in [files] but gets no test: not written)")
    shared = [(d, b) for d, b in sorted(built.items()) if b.side_effects]
    if shared:
        print("module-level side effects now shared with tests of other files:")
        for d, b in shared:
            for line in b.side_effects:
                print(f"  tests/{d}: {line}")
    dropped = [c for s in sources.values() for c in s.dropped_comments]
    if dropped:
        print(f"{len(dropped)} comment lines not carried (section rulers, module comments):")
        for line in dropped:
            print(f"  {line}")
    if args.check:
        changed, left = update_references(root, where_to, mapping, apply=False)
        print("references to rewrite: " + (", ".join(changed) or "none"))
        for line in left:
            print(f"  not mechanical, to edit by hand: {line}")
        return 0

    for dest, b in built.items():
        target = tests / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(b.text)
    for s in sources.values():
        s.path.unlink()
    if update_pyproject(root / "pyproject.toml"):
        print("pyproject.toml: --import-mode=importlib and pythonpath = ['tests']")
    changed, left = update_references(root, where_to, mapping, apply=True)
    print("references rewritten in: " + (", ".join(changed) or "none"))
    for line in left:
        print(f"  not mechanical, to edit by hand: {line}")
    new_files = [str(tests / d) for d in sorted(built)]
    ruff = _ruff()
    fix = subprocess.run([*ruff, "check", "--select", "F401,I001", "--fix", "--quiet",
                          *new_files], cwd=root, capture_output=True, text=True)  # fmt: skip
    check = subprocess.run([*ruff, "check", "--quiet", *new_files], cwd=root,
                           capture_output=True, text=True)  # fmt: skip
    if check.returncode != 0:
        print("ruff still finds, in the new files:\n" + check.stdout + fix.stdout,
              file=sys.stderr)  # fmt: skip
        return 1
    problems = [x for d, b in sorted(built.items()) for x in verify(tests / d, b)]
    if problems:
        print("the tests' text changed after writing:\n" + "\n".join(problems), file=sys.stderr)
        return 1
    print(f"wrote {len(built)} files under tests/; removed {len(sources)}; ruff clean; every "
          "test is its old text with its origin added")
    return 0


if __name__ == "__main__":
    sys.exit(main())
