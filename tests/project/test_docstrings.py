"""The docstrings the API reference renders are typed numpydoc: every parameter line holds a
short type (the description indented below it), the documented names are the signature's
(numpydoc's PR01 and PR02, which the docs build also checks), and Returns, Raises and
Attributes are typed too. Parsed with numpydoc's own parser, so that a regression fails the
fast suite and not only the docs build.

``python tests/project/test_docstrings.py`` prints how many parameter lines hold prose where
a type belongs.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc

import fitrules

MAX_TYPE = 60
# words and marks of a sentence, which a type never holds
PROSE = re.compile(
    r"[;=`]|\.\s|\.$|:\S|\b(the|a|an|is|are|per|each|when|if|default|e\.g|see|as)\b",
    re.IGNORECASE,
)
SECTIONS = ("Parameters", "Other Parameters", "Returns", "Raises", "Attributes")


def _methods(cls: type) -> list[tuple[str, object]]:
    """The members autodoc's ``:members:`` renders: public, defined in the class, documented."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, classmethod | staticmethod):
            value = value.__func__
        if isinstance(value, property) or inspect.isfunction(value):
            doc = value.__doc__ if not isinstance(value, property) else value.fget.__doc__
            if doc:
                out.append((f"{cls.__name__}.{name}", value))
    return out


def public_docstrings() -> list[tuple[str, object, object]]:
    """(name, object, parsed numpydoc) of every docstring the API reference renders."""
    out = []
    for name in fitrules.__all__:
        if name == "__version__":
            continue
        obj = getattr(fitrules, name)
        if isinstance(obj, type):
            out.append((name, obj, ClassDoc(obj, config={"show_class_members": False})))
            if not issubclass(obj, Exception):
                for mname, member in _methods(obj):
                    if isinstance(member, property):
                        out.append((mname, member, FunctionDoc(member.fget)))
                    else:
                        out.append((mname, member, FunctionDoc(member)))
        elif callable(obj):
            out.append((name, obj, FunctionDoc(obj)))
    return out


def is_result(obj: object) -> bool:
    """A class the package makes and a user reads (a dataclass without a Parameters section:
    its fields are documented as Attributes)."""
    return isinstance(obj, type) and dataclasses.is_dataclass(obj) and not _has_params(obj)


def _has_params(cls: type) -> bool:
    return bool(ClassDoc(cls, config={"show_class_members": False})["Parameters"])


def signature_names(obj: object) -> list[str]:
    """The parameters numpydoc compares with the documented ones (``*args`` starred)."""
    if isinstance(obj, property):
        return []
    try:
        sig = inspect.signature(obj)
    except ValueError:  # a builtin's, such as an exception's: numpydoc checks nothing either
        return []
    names = []
    for p in sig.parameters.values():
        star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        names.append(star + p.name)
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def documented(doc, section: str) -> list[str]:
    return [n.strip() for entry in doc[section] for n in entry.name.split(",") if n.strip()]


def is_prose(type_: str) -> bool:
    """A type slot that holds a sentence or more than a short type (the quoted values of a
    choice, such as ``{"none", "default"}``, are values, not words of a sentence)."""
    words = re.sub(r""""[^"]*"|'[^']*'""", '""', type_)
    return len(type_) > MAX_TYPE or bool(PROSE.search(words))


def entries():
    """(docstring name, section, entry) of every typed section entry the reference renders."""
    for name, _obj, doc in public_docstrings():
        for section in SECTIONS:
            for entry in doc[section]:
                yield name, section, entry


def prose_lines() -> tuple[int, int]:
    """(parameter lines with prose where the type belongs, parameter lines)."""
    params = [e for _n, s, e in entries() if s in ("Parameters", "Other Parameters")]
    return sum(is_prose(e.type) for e in params), len(params)


PUBLIC = public_docstrings()
IDS = [n for n, _o, _d in PUBLIC]


@pytest.mark.parametrize(("name", "obj", "doc"), PUBLIC, ids=IDS)
def test_every_parameter_has_a_short_type_and_a_description(name, obj, doc):
    """Each parameter line is ``name : type`` with a short type and a description below."""
    bad = []
    for section in ("Parameters", "Other Parameters"):
        for e in doc[section]:
            if not e.type or is_prose(e.type):
                bad.append(f"{e.name} : {e.type!r} (no type, or prose where the type belongs)")
            if not "".join(e.desc).strip():
                bad.append(f"{e.name}: no description")
    assert not bad, f"{name}: " + "; ".join(bad)


# a result class documents its fields as Attributes (test_result_attributes_are_its_fields)
CALLED = [p for p in PUBLIC if not is_result(p[1])]


@pytest.mark.parametrize(("name", "obj", "doc"), CALLED, ids=[n for n, _o, _d in CALLED])
def test_documented_parameters_are_the_signature(name, obj, doc):
    """The documented parameters are exactly the signature's (numpydoc's PR01 and PR02)."""
    expected = signature_names(obj)
    got = documented(doc, "Parameters") + documented(doc, "Other Parameters")
    missing = [n for n in expected if n not in got]
    unknown = [n for n in got if n not in expected]
    assert not missing and not unknown, f"{name}: undocumented {missing}, unknown {unknown}"


@pytest.mark.parametrize(("name", "obj", "doc"), PUBLIC, ids=IDS)
def test_returns_raises_and_attributes_are_typed(name, obj, doc):
    """Returns, Raises and Attributes entries carry a short type and a description."""
    bad = []
    for section in ("Returns", "Raises", "Attributes"):
        for e in doc[section]:
            # numpydoc reads an unnamed Returns/Raises line as the type, in e.name
            type_ = e.type if section == "Attributes" or e.name and e.type else e.name or e.type
            if not type_ or is_prose(type_):
                bad.append(f"{section}: {e.name} : {e.type!r}")
            if not "".join(e.desc).strip():
                bad.append(f"{section}: {e.name or e.type} has no description")
    assert not bad, f"{name}: " + "; ".join(bad)


RESULTS = [p for p in PUBLIC if is_result(p[1])]


@pytest.mark.parametrize(("name", "obj", "doc"), RESULTS, ids=[n for n, _o, _d in RESULTS])
def test_result_attributes_are_its_fields(name, obj, doc):
    """A result class documents every field as an attribute, and no attribute it lacks."""
    fields = [f.name for f in dataclasses.fields(obj)]
    got = documented(doc, "Attributes")
    missing = [n for n in fields if n not in got]
    unknown = [n for n in got if n not in fields and not hasattr(obj, n)]
    assert not missing and not unknown, f"{name}: undocumented {missing}, unknown {unknown}"


def test_the_prose_check_tells_a_type_from_a_sentence():
    """The helper counts a sentence in the type slot as prose and a short type as a type."""
    assert not is_prose("Grid, DataFrame, path or None, optional")
    assert not is_prose("sequence of str or str")
    assert not is_prose("fitrules.jobs.tune.Tuning")
    assert not is_prose("dict of str to (float, float), optional")
    assert is_prose('the column(s) to tune, e.g. ``["lr"]``.')
    assert is_prose("a Grid, a DataFrame or a path (None: the default grid)")
    assert is_prose("x" * (MAX_TYPE + 1))


if __name__ == "__main__":
    n_prose, n = prose_lines()
    print(f"parameter lines with prose in the type slot: {n_prose} of {n}")
    params = [e for _n, s, e in entries() if s in ("Parameters", "Other Parameters")]
    grouped = sum("," in e.name for e in params)
    print(f"parameter lines naming several parameters: {grouped}")
    for section in ("Returns", "Raises", "Attributes"):
        es = [e for _n, s, e in entries() if s == section]
        untyped = sum(not (e.type or e.name) or is_prose(e.type or e.name) for e in es)
        print(f"{section} entries without a short type: {untyped} of {len(es)}")
