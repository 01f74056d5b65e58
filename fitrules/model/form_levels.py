"""Per-level constants and groups: ``L0[H]`` becomes one constant per level of H
(``L0[H=1]``, ``L0[H=4]``, ...), and ``--by`` makes every constant not shared one per group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fitrules.base.errors import FormError, LimitError, param
from fitrules.base.limits import MAX_CONSTANTS
from fitrules.model import expr as ex

if TYPE_CHECKING:
    from fitrules.model.form_class import Form


def base_name(constant: str) -> str:
    """``L0`` for the per-level constant ``L0[H=16]``; other names unchanged."""
    return constant.split("[", 1)[0] if constant.endswith("]") else constant


def level_name(constant: str, levels: Sequence[tuple[str, float]]) -> str:
    """The name of one per-level constant: ``L0[H=16]``, ``a[M=2,H=16]``."""
    return f"{constant}[{','.join(f'{c}={format_level(v)}' for c, v in levels)}]"


def format_level(v: float) -> str:
    """A level as short as it reads back exactly: ``16``, ``0.25``, ``0.123456789``."""
    short = f"{v:g}"
    return short if float(short) == v else repr(float(v))


def level_of(constant: str) -> tuple[tuple[str, float], ...]:
    """``(("H", 16.0),)`` for ``L0[H=16]``; ``()`` for a constant shared by all levels."""
    if not constant.endswith("]") or "[" not in constant:
        return ()
    inside = constant[constant.index("[") + 1 : -1]
    out = []
    for part in inside.split(","):
        col, _, v = part.rpartition("=")
        out.append((col, float(v)))
    return tuple(out)


def _check_level_usage(tree: ex.Node, form: Form) -> None:
    """A per-level constant ``c[COL]`` is always written with the same COL, never bare."""
    how: dict[str, set] = {}
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.op == "at":
            how.setdefault(n.value, set()).add(n.args[0].value)
        elif n.op == "name":
            how.setdefault(n.value, set()).add(None)
        if n.op != "at":
            stack.extend(n.args)
    for c, cols in how.items():
        if len(cols) > 1 and any(col is not None for col in cols):
            shown = ", ".join(c if col is None else f"{c}[{col}]" for col in sorted(cols, key=str))
            raise FormError(
                f"form {form.name!r}: {c!r} is written as {shown}; a per-level constant "
                "takes one column and is always written with it"
            )


def _level_columns(tree: ex.Node) -> tuple[str, ...]:
    out: list[str] = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.op == "at" and n.args[0].value not in out:
            out.append(n.args[0].value)
        stack.extend(n.args)
    return tuple(sorted(out))


def _replace_constants(tree: ex.Node, values: Mapping[str, ex.Node]) -> ex.Node:
    """Replace names and per-level constants ``c[COL]`` named in ``values``."""
    if tree.op in ("name", "at") and tree.value in values:
        return values[tree.value]
    if not tree.args or tree.op == "at":
        return tree
    return ex.substitute(
        ex.Node(tree.op, tuple(_replace_constants(a, values) for a in tree.args), tree.value), {}
    )


def _group(tree: ex.Node, by: str, shared: Sequence[str], form: Form) -> ex.Node:
    """Every constant not in ``shared`` becomes one constant per level of ``by``."""
    if _level_columns(tree):
        raise FormError(
            f"form {form.name!r} already has per-level constants; group it with {param('by')} or "
            "write the per-level constants, not both"
        )
    names = ex.names(tree)
    variables = set(form.variables or ()) | {by}
    for c in shared:
        if c not in names or c in variables:
            raise FormError(
                f"form {form.name!r}: shared constant {c!r} is not a constant of "
                f"{form.expression!r}"
            )
    col = ex.Node("name", value=by)
    per_group = {}
    for c in names:
        if c in shared or c in variables:
            continue
        per_group[c] = ex.Node("at", (col,), c)
    return _replace_constants(tree, per_group)


def _expand(tree: ex.Node, levels: Mapping[str, Sequence[float]], form: Form) -> ex.Node:
    """Write each per-level constant ``c[COL]`` as one constant per level.

    Each term of the sum that reads per-level constants becomes one term per combination of
    their columns' levels, multiplied by an indicator of that combination: so
    ``L0[H] + a*omega`` becomes ``L0[H=1]*[H == 1] + ... + a*omega``, where every
    ``L0[H=...]`` still multiplies one term and stays linear (variable projection keeps it).
    """
    out = ex.ZERO
    for sign, term in ex.terms(tree):
        signed = term if sign > 0 else ex.neg(term)
        cols = _level_columns(term)
        if not cols:
            out = ex.add(out, signed)
            continue
        combos: list[list[tuple[str, float]]] = [[]]
        for col in cols:
            combos = [[*c, (col, v)] for c in combos for v in levels[col]]
            if len(combos) > MAX_CONSTANTS:
                raise LimitError(
                    f"form {form.name!r}: per-level constants over {', '.join(cols)} give "
                    f"more than {MAX_CONSTANTS} constants; at most {MAX_CONSTANTS} are allowed"
                )
        for combo in combos:
            at = dict(combo)
            values = {}
            stack = [term]
            while stack:
                n = stack.pop()
                if n.op == "at":
                    c = n.value
                    own = [(k, at[k]) for k in (n.args[0].value,)]
                    values[c] = ex.Node("name", value=level_name(c, own))
                stack.extend(n.args)
            piece = _replace_constants(signed, values)
            for col, v in combo:
                piece = ex.mul(ex.Node("is", (ex.Node("name", value=col),), float(v)), piece)
            out = ex.add(out, piece)
    return out
