"""Rewrite ``--flag`` words in string literals as :func:`fitrules.base.errors.param` marks.

    python tools/param_words.py [--dry-run] PATHS...

Each ``--flag`` in a string literal of the given files (folders: their ``*.py``) becomes
``{param('name')}`` (a plain string becomes an f-string; a string that is only the flag
becomes ``param('name')``), where ``name`` is the parameter the Python face names today
(:data:`fitrules.base.errors._PARAMETERS`, else the flag with ``_`` for ``-``) and the command
line renders it as that same flag in every command that declares it. Each change is printed
as ``path:line: old -> new``; ``path:line: left: reason`` lists what is left for hand review:

- a flag no command declares (``dask worker --nthreads``);
- a parameter some command shows under another flag (``--form`` is ``forms``, whose flag is
  ``--forms`` in compare; ``--seed`` where fit says ``--bootstrap-seed``);
- a flag alone as the first item of a pair (a refusal's fix, which the command line applies);
- a literal outside a ``raise`` statement (a mark reads as a name only in an error's
  message: a report's text, or a name handed to a check, is for the reader to judge);
- a literal the scanner cannot rewrite (bytes, ``\\N{...}``, a nested quote).

Left alone, and not listed: docstrings, the help of declarations (``help=``, ``summary=``,
``description=``, ``epilog=``, ``examples=``), and literals on a line with a ``# flag words``
comment, or right below such a comment line (text deliberately about the command line).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitrules.base.errors import _PARAMETERS  # noqa: E402
from fitrules.cli.flags import command_flags  # noqa: E402
from fitrules.jobs.options import COMMANDS  # noqa: E402

FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
PRAGMA = "# flag words"
HELP_KEYWORDS = {"help", "summary", "description", "epilog", "examples"}
IMPORT = "from fitrules.base.errors import param"


def _known() -> tuple[set[str], list[dict[str, str]]]:
    """Every declared flag, and each command's parameter -> flag."""
    flags = {o.option_string for d in COMMANDS for o in d.options if o.option_string}
    return flags, [command_flags(d.cmd) for d in COMMANDS]


FLAGS, MAPS = _known()


def parameter(flag: str) -> tuple[str | None, str]:
    """The parameter of ``--flag`` when every command renders it as ``--flag``, else None
    and why."""
    if "--" + flag not in FLAGS:
        return None, f"--{flag}: no command declares it"
    name = _PARAMETERS.get(flag, flag.replace("-", "_"))
    shown = {m[name] for m in MAPS if name in m} or {"--" + name.replace("_", "-")}
    if shown != {"--" + flag}:
        return None, f"--{flag} is {name!r}, shown as {', '.join(sorted(shown))}"
    return name, ""


# ------------------------------------------------------------------ which literals to rewrite
def _skipped(tree: ast.AST) -> set[int]:
    """ids of the nodes left alone: docstrings and the help of declarations, with all below."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            out |= {id(n) for n in ast.walk(node.value)}
    return out


def _pairs(tree: ast.AST) -> set[int]:
    """ids of strings that are the first item of a pair (a fix: ``("--metric", "loss")``)."""
    return {
        id(node.elts[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple) and len(node.elts) == 2
    }


def _below(tree: ast.AST, kind: type) -> set[int]:
    """ids of the nodes below a node of ``kind``."""
    return {id(n) for k in ast.walk(tree) if isinstance(k, kind) for n in ast.walk(k) if n is not k}


def literals(source: str) -> list[tuple[ast.expr, str]]:
    """The outermost string literals with a flag word, each with why it is left ("" if not)."""
    tree = ast.parse(source)
    skipped, pairs, lines = _skipped(tree), _pairs(tree), source.splitlines()
    # below an f-string: 3.11 gives its format specs the whole string's place
    inner, raised = _below(tree, ast.JoinedStr), _below(tree, ast.Raise)
    out = []
    for node in ast.walk(tree):
        if id(node) in skipped or id(node) in inner:
            continue
        if not isinstance(node, ast.JoinedStr | ast.Constant):
            continue
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            continue
        text = ast.get_source_segment(source, node) or ""
        span = lines[node.lineno - 1 : node.end_lineno]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""  # a comment line
        if FLAG.search(text) and not (
            above.startswith(PRAGMA) or any(PRAGMA in line for line in span)
        ):
            why = "a fix's flag" if id(node) in pairs else ""
            if not why and id(node) not in raised:
                why = "not in a raise statement: does it reach an error's message?"
            out.append((node, why))
    return sorted(out, key=lambda item: (item[0].lineno, item[0].col_offset))


# ------------------------------------------------------------------ rewriting one literal
def _pieces(segment: str) -> list[tuple[int, int]]:
    """(start, end) of each string token of an (implicitly concatenated) literal."""
    tokens = tokenize.generate_tokens(io.StringIO(segment).readline)
    starts = [0] + [i + 1 for i, c in enumerate(segment) if c == "\n"]
    return [
        (starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1])
        for t in tokens
        if t.type == tokenize.STRING
    ]


def _top_level(body: str, is_f: bool) -> list[tuple[int, int]]:
    """Spans of ``body`` outside an f-string's replacement fields."""
    if not is_f:
        return [(0, len(body))]
    spans, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if depth == 0 and c in "{}" and body[i : i + 2] in ("{{", "}}"):
            i += 2
            continue
        if c == "{":
            if depth == 0:
                spans.append((start, i))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        i += 1
    spans.append((start, len(body)))
    return spans


def rewrite_piece(token: str, whole_flag: bool) -> tuple[str, list[str]]:
    """``token`` (one string token) with its flags as marks, and the flags left, with why."""
    m = re.match(r"([A-Za-z]*)('''|\"\"\"|'|\")", token)
    assert m is not None
    prefix, quote = m[1], m[2]
    body = token[len(m[0]) : len(token) - len(quote)]
    other = '"' if quote[0] == "'" else "'"
    if "b" in prefix.lower() or "u" in prefix.lower() or "\\N{" in body:
        return token, [f"{token}: cannot rewrite this literal"]
    left: list[str] = []
    if whole_flag and FLAG.fullmatch(body) and not prefix:
        name, why = parameter(body[2:])
        if name is None:
            return token, [why]
        return f'param("{name}")', []
    is_f = "f" in prefix.lower()
    out, changed, outside = [], False, _top_level(body, is_f)
    for start, end in _iter_all(body, outside):
        text = body[start:end]
        if (start, end) in outside:

            def mark(m: re.Match) -> str:
                nonlocal changed
                name, why = parameter(m[1])
                if name is None:
                    left.append(why)
                    return m[0]
                changed = True
                return "\0" + name + "\0"

            text = FLAG.sub(mark, text)
            if not is_f:
                text = text.replace("{", "{{").replace("}", "}}")
            text = re.sub("\0(\\w+)\0", lambda m: f"{{param({other}{m[1]}{other})}}", text)
        out.append(text)
    if not changed:
        return token, left
    return ("" if is_f else "f") + prefix + quote + "".join(out) + quote, left


def _iter_all(body: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` and the gaps between them, in order, covering ``body``."""
    out, at = [], 0
    for start, end in spans:
        if start > at:
            out.append((at, start))
        out.append((start, end))
        at = end
    if at < len(body):
        out.append((at, len(body)))
    return out


# ------------------------------------------------------------------ one file
def rewrite(path: Path, write: bool) -> int:
    """Rewrite ``path``, printing each change and each flag left; the number of changes."""
    source = path.read_text()
    lines = source.splitlines(keepends=True)
    edits, changes = [], 0
    for node, why in literals(source):
        where = f"{path}:{node.lineno}"
        if why:
            print(f"{where}: left: {_short(ast.get_source_segment(source, node))}: {why}")
            continue
        start = _char(lines, node.lineno, node.col_offset)
        end = _char(lines, node.end_lineno, node.end_col_offset)
        segment = source[start:end]
        new_segment, at = [], 0
        whole = isinstance(node, ast.Constant) and len(_pieces(segment)) == 1
        for a, b in _pieces(segment):
            new, left = rewrite_piece(segment[a:b], whole)
            new_segment += [segment[at:a], new]
            at = b
            for why in left:
                print(f"{where}: left: {why}")
        new_text = "".join(new_segment) + segment[at:]
        if new_text != segment:
            print(f"{where}: {segment} -> {new_text}")
            edits.append((start, end, new_text))
            changes += 1
    if edits and write:
        for start, end, new_text in reversed(edits):
            source = source[:start] + new_text + source[end:]
        path.write_text(_with_import(source))
    return changes


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) < 70 else text[:66] + " ..."


def _char(lines: list[str], line: int, col: int) -> int:
    """The character offset of ``(line, col)``, ``col`` counted in UTF-8 bytes as by ast."""
    return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1].encode()[:col].decode())


def _with_import(source: str) -> str:
    """``source`` importing ``param`` (added to its import of fitrules.base.errors, if any)."""
    if re.search(r"^\s*(from fitrules\.base\.errors import .*\bparam\b|" + IMPORT + ")", source,
                 re.M):  # fmt: skip
        return source
    m = re.search(r"^from fitrules\.base\.errors import (\(?)", source, re.M)
    if m:
        return source[: m.end()] + ("\n    param," if m[1] else "param, ") + source[m.end() :]
    tree = ast.parse(source)
    last = max((n.end_lineno for n in tree.body if isinstance(n, ast.ImportFrom | ast.Import)),
               default=0)  # fmt: skip
    lines = source.splitlines(keepends=True)
    return "".join(lines[:last] + [IMPORT + "\n"] + lines[last:])


def main(argv: list[str]) -> int:
    write = "--dry-run" not in argv
    paths = [Path(a) for a in argv if a != "--dry-run"]
    if not paths:
        print(__doc__)
        return 2
    files = [f for p in paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    total = sum(rewrite(f, write) for f in files)
    print(f"{total} literals rewritten in {len(files)} files" + ("" if write else " (dry run)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
