"""Safe arithmetic expressions: parsed by an AST whitelist, evaluated by walking the tree.

User strings (forms, ``--derive``, ``--where``) are never passed to ``eval``. Python's own
parser turns the text into a syntax tree; only the node types below are accepted, and
anything else (attributes, calls other than log/exp/sqrt, subscripts, lambdas, ...) is
refused with the offending piece named. Names with spaces are written in backticks, as in
``pandas.eval``.

The tree also supports what fitting needs: the list of names, symbolic derivatives, and the
split of a sum into terms so that constants entering linearly can be projected out.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import xlogy

from fitrules.base.errors import ExpressionError
from fitrules.base.limits import MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH

FUNCTIONS = ("log", "exp", "sqrt")


@dataclass(frozen=True)
class Node:
    """A node of the expression tree: ``op`` and its children ``args`` (or a leaf value)."""

    op: str  # num, str, name, add, sub, mul, div, pow, neg, log, exp, sqrt, cmp:<op>, and, or, not
    args: tuple = ()
    value: Any = None

    def __str__(self) -> str:
        return unparse(self)


def num(v: float) -> Node:
    return Node("num", value=float(v))


ZERO, ONE = num(0.0), num(1.0)

_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _backticks(text: str) -> tuple[str, dict[str, str]]:
    names: dict[str, str] = {}

    def repl(m: re.Match) -> str:
        key = f"__bt{len(names)}__"
        names[key] = m.group(1)
        return key

    out = re.sub(r"`([^`]*)`", repl, text)
    if "`" in out:
        raise ExpressionError(f"unbalanced backtick in {text!r}")
    return out, names


_STRING = re.compile(r"(\"[^\"]*\"|'[^']*')")
_WORD = re.compile(r"\w+")


def _keep_spelling(src: str, names: dict[str, str]) -> str:
    """Names as typed: Python's parser folds identifiers by NFKC (MICRO SIGN to GREEK MU,
    FULLWIDTH H to H), which would make a column ``µ`` a constant ``μ``; such names are set
    aside like backticked ones, so the form reads the spelling it was given (strings of a
    ``--where`` are left alone)."""
    pieces = _STRING.split(src)
    for i in range(0, len(pieces), 2):  # even pieces are outside quotes

        def repl(m: re.Match) -> str:
            w = m.group(0)
            if not w.isidentifier() or unicodedata.normalize("NFKC", w) == w:
                return w
            key = f"__bt{len(names)}__"
            names[key] = w
            return key

        pieces[i] = _WORD.sub(repl, pieces[i])
    return "".join(pieces)


def parse(text: str, *, logical: bool = False, what: str = "expression") -> Node:
    """Parse ``text`` into a :class:`Node`.

    Parameters
    ----------
    text : the expression, e.g. ``"L0 + a*omega*(H/16)**b"``.
    logical : also allow comparisons, ``and``/``or``/``not``, ``&``/``|`` and strings
        (for ``--where`` filters).
    what : how to name the expression in error messages.

    Raises
    ------
    ExpressionError
        If the text is not valid syntax, uses anything outside the grammar, holds a number
        that is not finite in double precision, or is longer than
        :data:`~fitrules.base.limits.MAX_EXPRESSION_CHARS` characters or nested deeper than
        :data:`~fitrules.base.limits.MAX_EXPRESSION_DEPTH` (a sum of n terms is n deep).
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"{what}: empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(
            f"{what}: {len(text):,} characters; an expression may have at most "
            f"{MAX_EXPRESSION_CHARS:,}"
        )
    if "\x00" in text:
        raise ExpressionError(f"{what}: holds a NUL character")
    src, ticks = _backticks(text.strip())
    src = _keep_spelling(src, ticks)
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"{what}: cannot parse {_short(text)} ({err.msg})") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(
            f"{what}: nested too deeply to parse (at most {MAX_EXPRESSION_DEPTH} levels)"
        ) from None
    except ValueError as err:  # e.g. an integer literal beyond Python's digit limit
        raise ExpressionError(f"{what}: cannot parse {_short(text)} ({err})") from None
    try:
        node = _Converter(text, src, ticks, logical, what).conv(tree.body)
    except RecursionError:
        raise ExpressionError(
            f"{what}: nested too deeply (at most {MAX_EXPRESSION_DEPTH} levels)"
        ) from None
    if depth(node) > MAX_EXPRESSION_DEPTH:  # chains of and/or and comparisons nest too
        raise ExpressionError(
            f"{what}: nested more than {MAX_EXPRESSION_DEPTH} levels deep; simplify {_short(text)}"
        )
    return node


@dataclass(frozen=True)
class _Converter:
    """Turns Python's syntax tree of an expression into a :class:`Node`, node by node,
    refusing what the grammar does not allow."""

    text: str  # as given, for messages
    src: str  # as parsed: backticked names set aside
    ticks: dict[str, str]  # the names set aside
    logical: bool
    what: str

    def bad(self, node: ast.AST, why: str = "") -> ExpressionError:
        """The error naming ``node``'s piece of the text and what is allowed."""
        piece = ast.get_source_segment(self.src, node) or type(node).__name__
        allowed = "numbers, names, + - * / **, unary minus, log(), exp(), sqrt()"
        if not self.logical:
            allowed += ", c[COLUMN] (one constant c per level of COLUMN)"
        if self.logical:
            allowed += ", comparisons, and/or/not, strings"
        return ExpressionError(
            f"{self.what}: {_short(piece)} is not allowed in {_short(self.text)}{why}; "
            f"allowed: {allowed}"
        )

    def conv(self, n: ast.AST, depth: int = 1) -> Node:
        """``n`` as a Node; refused beyond the depth allowed."""
        if depth > MAX_EXPRESSION_DEPTH:
            raise ExpressionError(
                f"{self.what}: nested more than {MAX_EXPRESSION_DEPTH} levels deep (a sum of n "
                f"terms is n levels); simplify {_short(self.text)}"
            )
        return self._node(n, depth)

    def _node(self, n: ast.AST, depth: int) -> Node:
        """One node of the tree, by its kind."""
        ticks = self.ticks
        if isinstance(n, ast.Constant):
            return self._constant(n)
        if isinstance(n, ast.Name):
            return Node("name", value=ticks.get(n.id, n.id))
        if (
            not self.logical
            and isinstance(n, ast.Subscript)
            and isinstance(n.value, ast.Name)
            and isinstance(n.slice, ast.Name)
        ):
            # c[COL]: one constant c per level of the column COL (see fitrules.model.forms)
            col = Node("name", value=ticks.get(n.slice.id, n.slice.id))
            return Node("at", (col,), ticks.get(n.value.id, n.value.id))
        if isinstance(n, ast.Attribute):  # a tracker's flattened name: compression.keep
            piece = ast.get_source_segment(self.src, n) or "NAME.PART"
            raise self.bad(n, f" (a column name with dots goes in backticks: `{piece}`)")
        if isinstance(n, ast.BinOp):
            return self._binop(n, depth + 1)
        if isinstance(n, ast.UnaryOp):
            return self._unaryop(n, depth + 1)
        if isinstance(n, ast.Call):
            if (
                isinstance(n.func, ast.Name)
                and n.func.id in FUNCTIONS
                and len(n.args) == 1
                and not n.keywords
            ):
                return Node(n.func.id, (self.conv(n.args[0], depth + 1),))
            raise self.bad(n, " (only log(x), exp(x), sqrt(x) may be called)")
        if self.logical and isinstance(n, ast.Compare):
            return self._compare(n, depth + 1)
        if self.logical and isinstance(n, ast.BoolOp):
            joiner = "and" if isinstance(n.op, ast.And) else "or"
            out = self.conv(n.values[0], depth + 1)
            for v in n.values[1:]:
                out = Node(joiner, (out, self.conv(v, depth + 1)))
            return out
        raise self.bad(n)

    def _constant(self, n: ast.Constant) -> Node:
        """A number (finite in double precision) or, in a condition, a string."""
        if isinstance(n.value, bool) or not isinstance(n.value, int | float | str):
            raise self.bad(n)
        if isinstance(n.value, str):
            if not self.logical:
                raise self.bad(n)
            return Node("str", value=n.value)
        try:
            value = float(n.value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            piece = ast.get_source_segment(self.src, n) or str(n.value)
            raise ExpressionError(
                f"{self.what}: the number {_short(piece)} is beyond double precision (largest "
                "about 1.8e308)"
            )
        return num(value)

    def _binop(self, n: ast.BinOp, depth: int) -> Node:
        """+ - * / **, and in a condition & and |."""
        if isinstance(n.op, ast.BitXor):
            raise self.bad(n, " (^ is not a power: use ** for a power, e.g. H**b)")
        if type(n.op) in _BIN:
            return Node(_BIN[type(n.op)], (self.conv(n.left, depth), self.conv(n.right, depth)))
        if self.logical and isinstance(n.op, ast.BitAnd | ast.BitOr):
            op = "and" if isinstance(n.op, ast.BitAnd) else "or"
            return Node(op, (self.conv(n.left, depth), self.conv(n.right, depth)))
        raise self.bad(n)

    def _unaryop(self, n: ast.UnaryOp, depth: int) -> Node:
        """Unary minus and plus, and in a condition not and ~."""
        if isinstance(n.op, ast.USub):
            return Node("neg", (self.conv(n.operand, depth),))
        if isinstance(n.op, ast.UAdd):
            return self.conv(n.operand, depth)
        if self.logical and isinstance(n.op, ast.Not | ast.Invert):
            return Node("not", (self.conv(n.operand, depth),))
        raise self.bad(n)

    def _compare(self, n: ast.Compare, depth: int) -> Node:
        """A chain of comparisons, as the ``and`` of its links."""
        parts, left = [], self.conv(n.left, depth)
        for op, right in zip(n.ops, n.comparators, strict=True):
            if type(op) not in _CMP:
                raise self.bad(n)
            r = self.conv(right, depth)
            parts.append(Node("cmp:" + _CMP[type(op)], (left, r)))
            left = r
        out = parts[0]
        for p in parts[1:]:
            out = Node("and", (out, p))
        return out


def depth(node: Node) -> int:
    """Levels of the tree (a leaf is 1), counted without recursion."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((a, d + 1) for a in n.args)
    return best


def _short(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut in the middle when long, for one-line messages."""
    r = repr(text)
    return r if len(r) <= limit else r[: limit // 2] + "..." + r[-limit // 2 :]


def names(node: Node) -> list[str]:
    """Names the expression reads, in order of first appearance."""
    out: list[str] = []

    def walk(n: Node) -> None:
        if n.op in ("name", "at") and n.value not in out:
            out.append(n.value)
        for a in n.args:
            walk(a)

    walk(node)
    return out


def count(node: Node, name: str) -> int:
    own = int(node.op in ("name", "at") and node.value == name)
    return own + sum(count(a, name) for a in node.args)


_NUMPY: dict[str, Callable] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "neg": np.negative,
    "log": np.log,
    "exp": np.exp,
    "sqrt": np.sqrt,
    "cmp:==": np.equal,
    "cmp:!=": np.not_equal,
    "cmp:<": np.less,
    "cmp:<=": np.less_equal,
    "cmp:>": np.greater,
    "cmp:>=": np.greater_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
}


def evaluate(node: Node, env: Mapping[str, Any]) -> Any:
    """Evaluate with numpy broadcasting; ``env`` maps each name to a scalar or array."""
    if node.op == "num" or node.op == "str":
        return node.value
    if node.op == "name":
        return env[node.value]
    if node.op == "xlogy":  # only made by diff(): x*log(y), 0 where x == 0
        return xlogy(evaluate(node.args[0], env), evaluate(node.args[1], env))
    if node.op == "is":  # only made by level expansion: 1.0 where COLUMN == level, else 0.0
        return np.equal(evaluate(node.args[0], env), node.value).astype(float)
    if node.op == "at":
        raise _unexpanded(node)
    return _NUMPY[node.op](*(evaluate(a, env) for a in node.args))


def _unexpanded(node: Node) -> ExpressionError:
    """The error of evaluating ``c[COLUMN]`` before the form was bound to a grid."""
    return ExpressionError(
        f"{node.value}[{node.args[0].value}] must be expanded over the levels of "
        f"{node.args[0].value} before it is evaluated (bind the form to a grid)"
    )


def _indicator(a: Any, level: float) -> Any:
    return np.equal(a, level).astype(float)


def compile_nodes(nodes: Sequence[Node], label: str = "expression") -> Callable[..., tuple]:
    """One Python function that evaluates every node of ``nodes`` on an environment.

    ``compile_nodes(nodes)(env)`` returns the tuple ``(evaluate(n, env) for n in nodes)``
    with the same values: the generated code makes the same numpy calls on the same operands,
    but each distinct subexpression once (a Jacobian's columns share the form's powers), with
    no walk of the tree, and each intermediate array freed after its last use.

    The source is generated from the parsed tree only: names become string keys of ``env``
    (``env['H']``), numbers their ``repr`` (which reads back as the same double), operations
    the numpy functions :func:`evaluate` calls. Nothing of the user's text is compiled, so
    this keeps the guarantee of the AST whitelist.
    """
    return _compiled(tuple(nodes), label)


@functools.lru_cache(maxsize=512)
def _compiled(nodes: tuple[Node, ...], label: str) -> Callable[..., tuple]:
    lines: list[str] = []
    temps: dict[Node, str] = {}
    named: set[str] = set()
    uses: dict[str, int] = {}  # temp -> index of the line that reads it last

    def ref(node: Node) -> str:
        if node.op in ("num", "str"):
            return repr(node.value)
        if node in temps:
            return temps[node]
        if node.op == "name":
            code = f"env[{node.value!r}]"
        elif node.op == "at":
            raise _unexpanded(node)
        else:
            args = [ref(a) for a in node.args]
            if node.op == "xlogy":
                code = f"_xlogy({args[0]}, {args[1]})"
            elif node.op == "is":
                code = f"_indicator({args[0]}, {float(node.value)!r})"
            elif node.op in _NUMPY:
                code = f"_F[{node.op!r}]({', '.join(args)})"
            else:
                raise ExpressionError(f"cannot evaluate {node.op!r}")
        name = f"t{len(temps)}"
        for a in args if node.op != "name" else ():
            if a in named:
                uses[a] = len(lines)  # the line about to be added reads it
        temps[node] = name
        named.add(name)
        lines.append(f"{name} = {code}")
        return name

    outs = [ref(n) for n in nodes]
    body = []
    kept = set(outs)
    for i, line in enumerate(lines):
        body.append(line)
        done = [t for t, last in uses.items() if last == i and t not in kept]
        if done:
            body.append("del " + ", ".join(done))
    body.append(f"return ({''.join(o + ', ' for o in outs)})")
    src = "def compiled(env):\n" + "".join(f"    {b}\n" for b in body)
    namespace: dict[str, Any] = {"_F": _NUMPY, "_xlogy": xlogy, "_indicator": _indicator}
    exec(compile(src, f"<compiled {label}>", "exec"), namespace)  # source made from the tree
    fn = namespace["compiled"]
    fn.source = src
    return fn


# ------------------------------------------------------------------ simplification
def _is(n: Node, v: float) -> bool:
    return n.op == "num" and n.value == v


def add(a: Node, b: Node) -> Node:
    if _is(a, 0):
        return b
    if _is(b, 0):
        return a
    return Node("add", (a, b))


def sub(a: Node, b: Node) -> Node:
    if _is(b, 0):
        return a
    if _is(a, 0):
        return neg(b)
    return Node("sub", (a, b))


def mul(a: Node, b: Node) -> Node:
    if _is(a, 0) or _is(b, 0):
        return ZERO
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    return Node("mul", (a, b))


def div(a: Node, b: Node) -> Node:
    if _is(a, 0):
        return ZERO
    if _is(b, 1):
        return a
    return Node("div", (a, b))


def neg(a: Node) -> Node:
    if _is(a, 0):
        return ZERO
    if a.op == "neg":
        return a.args[0]
    return Node("neg", (a,))


def power(a: Node, b: Node) -> Node:
    if _is(b, 1):
        return a
    if _is(b, 0):
        return ONE
    return Node("pow", (a, b))


def diff(node: Node, x: str) -> Node:
    """Symbolic derivative of ``node`` with respect to the name ``x``."""
    op, args = node.op, node.args
    if op in ("num", "str", "is"):  # a level indicator is constant in every constant
        return ZERO
    if op in ("name", "at"):  # c[COL] before expansion: as the constant c, for structure
        return ONE if node.value == x else ZERO
    if op == "add":
        return add(diff(args[0], x), diff(args[1], x))
    if op == "sub":
        return sub(diff(args[0], x), diff(args[1], x))
    if op == "neg":
        return neg(diff(args[0], x))
    if op == "mul":
        a, b = args
        return add(mul(diff(a, x), b), mul(a, diff(b, x)))
    if op == "div":
        a, b = args
        da, db = diff(a, x), diff(b, x)
        return sub(div(da, b), div(mul(a, db), power(b, num(2))))
    if op == "pow":
        a, b = args
        da, db = diff(a, x), diff(b, x)
        out = ZERO
        if not _is(da, 0):  # b * a**(b-1) * da
            out = mul(mul(b, power(a, sub(b, ONE))), da)
        if not _is(db, 0):  # a**b * log(a) * db, with 0*log(0) = 0 (e.g. omega**c at omega=0)
            out = add(out, mul(Node("xlogy", (node, a)), db))
        return out
    if op == "log":
        return div(diff(args[0], x), args[0])
    if op == "exp":
        return mul(node, diff(args[0], x))
    if op == "sqrt":
        return div(diff(args[0], x), mul(num(2), node))
    raise ExpressionError(f"cannot differentiate {op!r}")


def substitute(node: Node, mapping: Mapping[str, Node]) -> Node:
    if node.op in ("name", "at") and node.value in mapping:
        return mapping[node.value]
    if not node.args:
        return node
    args = tuple(substitute(a, mapping) for a in node.args)
    simplify: dict[str, Callable[..., Node]] = {
        "add": add,
        "sub": sub,
        "mul": mul,
        "div": div,
        "neg": neg,
        "pow": power,
    }
    if node.op in simplify:
        return simplify[node.op](*args)
    return Node(node.op, args, node.value)


# ------------------------------------------------------------------ linear structure
def terms(node: Node, sign: float = 1.0) -> list[tuple[float, Node]]:
    """Split a sum into signed terms: ``a - b*c + d`` -> [(+1, a), (-1, b*c), (+1, d)]."""
    if node.op == "add":
        return terms(node.args[0], sign) + terms(node.args[1], sign)
    if node.op == "sub":
        return terms(node.args[0], sign) + terms(node.args[1], -sign)
    if node.op == "neg":
        return terms(node.args[0], -sign)
    return [(sign, node)]


def numerator_names(node: Node) -> list[str]:
    """Names that multiply the whole term (appear as plain factors, not under / or **)."""
    if node.op in ("name", "at"):  # c[COL] (before expansion) multiplies as c does
        return [node.value]
    if node.op == "mul":
        return numerator_names(node.args[0]) + numerator_names(node.args[1])
    if node.op == "div":
        return numerator_names(node.args[0])
    if node.op == "neg":
        return numerator_names(node.args[0])
    return []


_PREC = {"add": 1, "sub": 1, "mul": 2, "div": 2, "neg": 3, "pow": 4}
_SYM = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "pow": "**"}


def unparse(node: Node) -> str:
    """Text of the expression, with the parentheses it needs."""
    op = node.op
    if op == "num":
        v = node.value
        return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(v)
    if op == "str":
        return repr(node.value)
    if op == "name":
        v = node.value
        return v if v.isidentifier() else f"`{v}`"
    if op in FUNCTIONS:
        return f"{op}({unparse(node.args[0])})"
    if op == "at":
        return f"{unparse(Node('name', value=node.value))}[{unparse(node.args[0])}]"
    if op == "is":
        return f"[{unparse(node.args[0])} == {node.value:g}]"
    if op == "xlogy":
        return f"xlogy({unparse(node.args[0])}, {unparse(node.args[1])})"
    if op == "neg":
        inner = unparse(node.args[0])
        return f"-({inner})" if _PREC.get(node.args[0].op, 9) < 4 else f"-{inner}"
    if op in _SYM:
        p = _PREC[op]
        a, b = node.args
        sa, sb = unparse(a), unparse(b)
        if _PREC.get(a.op, 9) < p or (op == "pow" and _PREC.get(a.op, 9) <= p):
            sa = f"({sa})"
        if _PREC.get(b.op, 9) < p or (_PREC.get(b.op, 9) == p and op in ("sub", "div", "pow")):
            sb = f"({sb})"
        return sa + _SYM[op] + sb
    if op.startswith("cmp:"):
        return f"{unparse(node.args[0])} {op[4:]} {unparse(node.args[1])}"
    if op in ("and", "or"):
        return f"({unparse(node.args[0])}) {op} ({unparse(node.args[1])})"
    if op == "not":
        return f"not ({unparse(node.args[0])})"
    raise ExpressionError(f"cannot print {op!r}")
