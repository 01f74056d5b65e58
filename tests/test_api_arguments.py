"""Every bad argument through the API is a documented FitrulesError, never a raw one.

Each case came from the third hostile audit (issue 31, major): 13 raw TypeErrors and
ValueErrors from inside, and some minor ones (a bound of three numbers accepted, API errors
naming ``--report``).
"""

from __future__ import annotations

import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError, FormError, ReportError


@pytest.fixture(scope="module")
def g():
    return fr.load_grid(composition_grid().assign(M=lambda d: d["seed"] % 2))


SEARCH = dict(terms=1, max_constants=3, splits=3, inner_splits=2, references=[])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(objective="log_huber", delta=None), "delta None: must be a number"),
        (dict(guard_span="x"), "guard_span 'x': must be a number"),
        (dict(guard_span=None), "guard_span None: must be a number"),
        (dict(guard_se="x"), "guard_se 'x'"),
        (dict(guard_excursion=[1]), "guard_excursion"),
        (dict(on_plan="x"), "on_plan 'x': must be callable"),
        (dict(on_progress=5), "on_progress 5: must be callable"),
        (dict(yes="yes"), "yes 'yes': must be True or False"),
        (dict(rule=5), "rule 5: must be text"),
        (dict(inner_splits=100_001), "inner_splits 100,001"),
    ],
)
def test_search_arguments(g, kwargs, match):
    with pytest.raises(FitrulesError, match=match):
        fr.search(g, **{**SEARCH, **kwargs})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(factors=None), "factors: must be a list of names"),
        (dict(variables=5), "variables: must be a list of names"),
    ],
)
def test_grammar_arguments(kwargs, match):
    with pytest.raises(FormError, match=match):
        fr.Grammar(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(fix=5), r"fix 5: give NAME=VALUE"),
        (dict(fix={"b": "x"}), r"fix \{'b': 'x'\}: each constant name must map to a finite"),
        (dict(bounds={"b": 5}), r"bounds \{'b': 5\}: each constant name must map to two"),
        (dict(bounds={"b": ("a", "b")}), r"bounds .*two numbers"),
        (dict(bounds={"b": None}), r"bounds .*two numbers"),
        (dict(bounds={"b": (0, 1, 2)}), r"bounds .*two numbers"),
        (dict(bounds=5), r"bounds 5: give NAME=LOW..HIGH"),
        (dict(by=5), r"by 5: must be text"),
    ],
)
def test_fit_arguments(g, kwargs, match):
    with pytest.raises(FitrulesError, match=match):
        fr.fit(g, "composition", **kwargs)


def test_shared_of_the_wrong_kind(g):
    with pytest.raises(FitrulesError, match="shared 5: must be text or a list of texts"):
        fr.fit(g, "additive", by="M", shared=5)


def test_form_variables_of_the_wrong_kind():
    with pytest.raises(FormError, match="variables must be a sequence of column names"):
        fr.Form("m", "L0+a*omega", variables=5)
    with pytest.raises(FormError, match="bounds must be a mapping"):
        fr.Form("m", "L0+a*omega", bounds=5)


def test_open_bounds_are_accepted(g):
    """Audit minor: ``--bound b=-inf..inf`` was refused by a message saying "(inf and -inf
    allowed)"."""
    f = fr.fit(g, "composition", bounds=["b=-inf..inf"])
    assert 0.3 < f.constants["b"] < 0.7


def test_report_errors_name_the_parameter(g, tmp_path):
    """Audit minor: API errors named ``--report`` instead of the parameter."""
    f = fr.fit(g, "composition")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x").write_text("x")
    with pytest.raises(ReportError, match=r"^target .*exists; pass force to replace it"):
        f.report(str(tmp_path / "r"))
    try:
        f.report(str(tmp_path / "r"))
    except ReportError as err:
        assert "--report" not in str(err)
