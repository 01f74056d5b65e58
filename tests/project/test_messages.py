"""Each refusal message is written once in the package (issue 45): the same words raised from
two places drift apart, and one of them is then wrong on one face.

Every ``SomeError(...)`` made in fitrules/ (raised, or returned by a function that words one
refusal for several places) is read with ``ast``; its message is the text of its first
argument, an f-string's or a sum's literal parts with ``{}`` for each value (a parameter named
with ``param("name")`` reads ``--name``, as the command line shows it). A message
found at two places fails, unless :data:`ALLOWED` names it with the reason it stays.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import fitrules

PACKAGE = Path(fitrules.__file__).parent

# message -> why it is written twice still
_OTHERS = "in files another change of issue 45 owns (base, model, engine, views, sim)"
_SAME_WORDS = "the same pattern for unlike things, e.g. any file that cannot be read"
ALLOWED = {
    "{}: cannot be read ({})": _SAME_WORDS,
    "{} {}: give {}": _SAME_WORDS,
    # fr.compare's forms (jobs.inputs.as_forms) and the command line's --forms
    # (model.forms.select_forms) each refuse a repeated name: one check needs the model's
    "form {} is given twice": _OTHERS,
    "{} {}: must be a whole number": _OTHERS,
    "{} {}: {} is not a directory": _OTHERS,
    "--level {}: must be in (0, 1), e.g. 0.95": _OTHERS,
    "{}: cannot parse {} ({})": _OTHERS,
    'form {}: variables must be a sequence of column names, e.g. ("H", "omega"); got {}': _OTHERS,
    "form {}: {} must be a table of NAME = [LOW, HIGH], got {}": _OTHERS,
    "{}={} is unknown; allowed: {}": _OTHERS,
    "keep={} is outside (0, 1]": _OTHERS,
    "seed={} must be from 0 to 2**63 - 1": _OTHERS,
    "outer_momentum={} is outside [0, 1)": _OTHERS,
    "trim={} is outside [0, 0.5)": _OTHERS,
    "{}: exists and is not a results table ({}); refusing to touch it": _OTHERS,
    "omega={} must be a finite number >= 0": _OTHERS,
}


def _text(node: ast.expr) -> str | None:
    """The message of a raise's first argument: its literal parts, ``{}`` for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_part(v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    return None


def _part(node: ast.expr) -> str:
    """One part of an f-string: its text, ``--name`` for a ``param("name")`` (a parameter's
    words, which a message writes as its flag on the command line), else ``{}``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    call = getattr(node, "value", None)
    if (
        isinstance(call, ast.Call)
        and getattr(call.func, "id", None) == "param"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
    ):
        return "--" + str(call.args[0].value).replace("_", "-")
    return "{}"


def raised_messages() -> dict[str, list[str]]:
    """Message -> the places (``path:line``) that raise it, for every raise in the package."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if not name.endswith("Error") or not node.args:
                continue
            text = _text(node.args[0])
            if text is not None and text.strip("{} "):
                found[text].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_the_messages_are_found():
    """The collector reads hundreds of raises (a change that broke it would pass vacuously)."""
    assert len(raised_messages()) >= 400


def test_each_message_is_written_once():
    """No refusal message is raised from two places, but the allowed ones."""
    twice = {t: w for t, w in raised_messages().items() if len(w) > 1 and t not in ALLOWED}
    assert not twice, "\n".join(f"{t!r}: {', '.join(w)}" for t, w in twice.items())


def test_every_allowed_message_is_still_written_twice():
    """An allowed message that is now written once leaves the list."""
    found = raised_messages()
    stale = [t for t in ALLOWED if len(found.get(t, ())) < 2]
    assert not stale, stale
