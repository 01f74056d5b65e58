"""Every bad argument through the Python functions is a documented FitrulesError in one
line, naming the parameter, never a raw exception."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import (
    FitrulesError,
    FormError,
    GridError,
    ReportError,
)


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
    """fr.search refuses each bad option value (delta, guards, callbacks, yes, rule) by name."""
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
    """fr.Grammar refuses factors or variables that are not a list of names."""
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
    """fr.fit refuses malformed fix, bounds and by values, quoting each value."""
    with pytest.raises(FitrulesError, match=match):
        fr.fit(g, "composition", **kwargs)


def test_shared_of_the_wrong_kind(g):
    """fr.fit refuses a shared= that is neither text nor a list of texts."""
    with pytest.raises(FitrulesError, match="shared 5: must be text or a list of texts"):
        fr.fit(g, "additive", by="M", shared=5)


def test_form_variables_of_the_wrong_kind():
    """fr.Form refuses variables that are not a list of names and bounds not a mapping."""
    with pytest.raises(FormError, match="variables must be a sequence of column names"):
        fr.Form("m", "L0+a*omega", variables=5)
    with pytest.raises(FormError, match="bounds must be a mapping"):
        fr.Form("m", "L0+a*omega", bounds=5)


def test_open_bounds_are_accepted(g):
    """fr.fit accepts bounds=['b=-inf..inf'] and fits b near 0.5.

    Audit minor: ``--bound b=-inf..inf`` was refused by a message saying "(inf and -inf
    allowed)"."""
    f = fr.fit(g, "composition", bounds=["b=-inf..inf"])
    assert 0.3 < f.constants["b"] < 0.7


def test_report_errors_name_the_parameter(g, tmp_path):
    """FittedForm.report onto an occupied folder is refused naming target, never --report.

    Audit minor: API errors named ``--report`` instead of the parameter."""
    f = fr.fit(g, "composition")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x").write_text("x")
    with pytest.raises(ReportError, match=r"^target .*exists; pass force to replace it"):
        f.report(str(tmp_path / "r"))
    try:
        f.report(str(tmp_path / "r"))
    except ReportError as err:
        assert "--report" not in str(err)


def test_api_refuses_bad_input_with_clear_errors(df):
    """compare and fit refuse an unknown form, splits with a level split, a curve in keep."""
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    with pytest.raises(fr.FormError, match="unknown form 'nope'"):
        fr.compare(g, forms=["nope"])
    with pytest.raises(fr.FitrulesError, match="^splits 10 applies to random splits only"):
        fr.compare(g, forms="composition", splits=10, split="leave-one-level-out:H")
    with pytest.raises(fr.FormError, match="reads H, omega, not 'keep'"):
        fr.fit(g, "composition").plot_curves("keep")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fr.predict(None, "composition", "H=8,keep=0.25", ledger=5), "ledger 5"),
        (lambda: fr.predict(None, "composition", 5, ledger="l.jsonl"), "at 5"),
        (lambda: fr.predict(None, "composition", "H=8", ledger="l.jsonl", runs=0), "runs 0"),
        (lambda: fr.predict(None, "composition", "H=8", ledger="l.jsonl", tolerance=-1),
         "tolerance -1"),
        (lambda: fr.simulate("main", "x.csv", cell=""), "cell ''"),
        (lambda: fr.simulate("main", None), "needs"),
        (lambda: fr.remove_form(5), "name 5"),
        # hostile review: a raw AttributeError, and values accepted as if right
        (lambda: fr.simulate(cell="H=1", out="x.csv", scheduler=2),
         r"^scheduler 2: must be text or None"),
        (lambda: fr.simulate(cell="H=1", out="x.csv", jobs=2.0), r"^jobs 2\.0: must be an integer"),
        (lambda: fr.simulate(cell="H=1", out="x.csv", progress="yes"),
         r"^progress 'yes': must be True, False or None"),
        (lambda: fr.simulate(cell="H=1", out="x.csv", scheduler="local:1000"),
         r"^scheduler 'local:1000': .*from 1 to 256"),
        (lambda: fr.simulate(cell="H=1", out="x.csv", scheduler="bogus://x"),
         r"^scheduler 'bogus://x': .*local:N .*tcp://host:8786"),
        (lambda: fr.search(scheduler="local:1000", **SEARCH), r"^scheduler 'local:1000'"),
        (lambda: fr.search(scheduler=2, **SEARCH), r"^scheduler 2: must be text or None"),
        (lambda: fr.search(jobs=2.0, **SEARCH), r"^jobs 2\.0: must be an integer"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_in_one_line(call, match, tmp_path, monkeypatch):
    """Bad predict, simulate, remove_form and search arguments: one line, no file written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FitrulesError, match=match) as err:
        call()
    assert "\n" not in str(err.value) and not list(tmp_path.iterdir())


def test_a_bad_progress_argument_is_refused():
    """fr.compare refuses progress='yes': only True, False or None are allowed."""
    with pytest.raises(fr.FitrulesError, match="progress 'yes': must be True, False or None"):
        fr.compare(splits=3, forms="composition", progress="yes")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda g: fr.fit(g, "composition", predict="H=8"), r"^predict 'H=8' does not give"),
        (lambda g: fr.compare(g, splits=10, objective="x"), r"^objective 'x' is unknown"),
        (lambda g: fr.load_grid(fr.example_path("main"), where="H +"), r"^where 'H \+'"),
        (lambda g: fr.load_example("main", seed_col="rs"), r"no column 'rs' for seed_col"),
        (lambda g: fr.load_example("mian"), r"no shipped example 'mian' \(did you mean main"),
    ],
)
def test_api_errors_name_parameters_not_flags(call, match):
    """Errors from fit, compare, load_grid and load_example name parameters, never --flags."""
    g = fr.load_example("main", where="lr == 3e-4")
    with pytest.raises(FitrulesError, match=match) as info:
        call(g)
    assert "--" not in str(info.value)


def test_numpy_integers_are_numbers():
    """A numpy integer counts as an integer: splits=np.int64(5) gives 5 splits per form."""
    c = fr.compare(fr.load_grid(composition_grid()), ["composition", "omega_only"],
                   splits=np.int64(5))  # fmt: skip
    assert len(c.results) == 10


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: fr.fit(composition_grid(), "composition").predict(H="a", keep=0.5), FitrulesError),
        (lambda: fr.load_grid(None), GridError),
        (lambda: fr.load_grid(composition_grid().assign(loss=lambda d: d["loss"] + 0j)), GridError),
        (lambda: fr.load_grid(composition_grid().assign(loss=lambda d: d["loss"] > 2.2)),
         GridError),
        (lambda: fr.Form("mine", "L0 + a*H", description=5), FormError),
        (lambda: fr.tune(fr.load_grid(pd.concat([composition_grid().assign(lr=1.0),
                         composition_grid().assign(lr=2.0)])), "lr", tune_seeds=[0, 0]),
         GridError),
        (lambda: fr.compare(composition_grid(), "composition", splits=5.5), FitrulesError),
        (lambda: fr.design(forms=["composition", "additive"], budget=6.5), FitrulesError),
        (lambda: fr.fit(composition_grid(), ["composition", "additive"]), FitrulesError),
    ],
)  # fmt: skip
def test_api_errors_are_documented_exceptions(call, error):
    """Bad values to fit, load_grid, Form, tune, compare and design raise a documented error."""
    with pytest.raises(error) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text, match",
    [
        ("0,1,", "an empty seed between commas"),
        ("0,,1", "an empty seed between commas"),
        ("\uff11", "expected integers separated by commas"),
        ("+-1", "expected integers separated by commas"),
    ],
)
def test_seed_lists_refuse_empty_items_and_digits_that_are_not_ascii(text, match):
    """--tune-seeds, like simulate's --seeds (hostile review), refuses '0,1,' instead of
    dropping the empty item, and a fullwidth digit that int() would read."""
    from fitrules.base import arguments as arg

    with pytest.raises(FitrulesError, match=match):
        arg.seed_list(text, "--tune-seeds")
    assert arg.seed_list(" 0 , 1 ", "--tune-seeds") == [0, 1]
