"""The examples of the README and of the docs pages, read from the pages themselves, for the
tests that run them (tests/project/test_readme.py, tests/project/test_docs.py,
tests/api/test_notebook.py)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
from pathlib import Path

from conftest import ROOT

FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
README = ROOT / "README.md"
QUICKSTART = ROOT / "docs" / "quickstart.md"
# the pages whose examples run as tests: the quick start and every tutorial
# (docs/input-formats.md runs in tests/project/test_docs.py, on exports made for it)
PAGES = [QUICKSTART, *sorted(p for p in (ROOT / "docs" / "tutorials").glob("*.md")
                             if p.name != "index.md")]  # fmt: skip

# Lines of the pages' sh blocks that set up an environment or develop fitrules itself, not
# examples of using it; any other line must be a fitrules command, and is run.
SETUP = (
    "python3 -m venv",
    ". .venv/bin/activate",
    "pip install",
    "python -m pytest",
    "dask scheduler",
    "dask worker",
    "mkdir -p ~/.config/dask",
    "printf 'distributed:",
    "ruff check",
    "mypy ",
    "make ",
    "python benchmarks/",
)


def blocks(lang: str, page: Path = README) -> list[str]:
    """The fenced code blocks of ``page`` (default: the README) in ``lang``."""
    return [body for kind, body in FENCE.findall(page.read_text()) if kind == lang]


def from_python(page: Path = QUICKSTART) -> str:
    """The python block of the section "From Python" (of the quick start)."""
    text = page.read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    (body,) = [b for kind, b in FENCE.findall(section) if kind == "python"]
    return body


def shell_commands(block: str) -> tuple[list[list[str]], list[str]]:
    """(the fitrules commands of an sh block, in order; the lines not run). A line that is
    neither a fitrules command nor set-up fails: every example line is accounted for."""
    commands, skipped = [], []
    for line in block.replace("\\\n", " ").splitlines():
        for part in (p.strip() for p in line.split("&&")):
            if not part:
                continue
            argv = shlex.split(part, comments=True)
            if argv[0] == "fitrules" and "HOST" not in part:
                commands.append(argv)
            else:
                assert argv[0] == "fitrules" or part.startswith(SETUP), (
                    f"line neither a fitrules command nor set-up: {part!r}"
                )
                skipped.append(part)
    return commands, skipped


def examples(page: Path) -> list[tuple[str, object]]:
    """The examples of ``page`` in the order a reader meets them: ("sh", argv) for each
    fitrules command of its sh blocks, ("python", code) for each python block (a block is
    a whole script: it imports what it uses)."""
    out: list[tuple[str, object]] = []
    for kind, body in FENCE.findall(page.read_text()):
        if kind == "sh":
            out += [("sh", argv) for argv in shell_commands(body)[0]]
        elif kind == "python":
            out.append(("python", body))
    return out


def skipped_lines(page: Path) -> list[str]:
    """The lines of ``page``'s sh blocks that are not run (set-up, or need another machine)."""
    return [s for b in blocks("sh", page) for s in shell_commands(b)[1]]


def run_ok(cmd, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    """Run ``cmd``; fail the test with its output unless it exits 0."""
    res = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, f"{cmd}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res


def run_examples(page: Path, bin_: Path, work: Path, scripts: Path, env) -> dict[str, str]:
    """Run every example of ``page`` in ``work`` with the installed ``bin_/fitrules`` and
    ``bin_/python`` (python blocks are written to ``scripts``, not into ``work``); return
    each command's (without ``fitrules``) or block's stdout, by its text."""
    outputs: dict[str, str] = {}
    for i, (kind, example) in enumerate(examples(page)):
        if kind == "sh" and needs_missing_torch(example):
            continue
        if kind == "sh":
            out = run_ok([bin_ / "fitrules", *example[1:]], work, env).stdout
            outputs.setdefault(shlex.join(example[1:]), out)
        else:
            script = scripts / f"{page.stem}_{i}.py"
            script.write_text(example)
            outputs.setdefault(example, run_ok([bin_ / "python", script], work, env).stdout)
    return outputs


def needs_missing_torch(argv: list[str]) -> bool:
    """A command of the gpt backend where PyTorch, its optional extra, is not installed (the
    test extra leaves it out: its wheels are large); its refusal is tested elsewhere."""
    return any("model=gpt" in a for a in argv) and importlib.util.find_spec("torch") is None


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
