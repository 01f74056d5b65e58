"""The Python API in its own terms: errors name parameters, not flags; predictions outside a
form's domain are refused; results render as HTML; help() shows the function; no backend
is forced on import; the shipped grids by name."""

from __future__ import annotations

import pydoc
import subprocess
import sys

import pytest
from test_rough_edges import _chinchilla_like

import fitrules as fr
from conftest import ROOT
from fitrules.base.errors import FitrulesError, GridError, in_api_terms
from helpers import run


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda g: fr.fit(g, "composition", predict="H=8"), r"^predict 'H=8' does not give"),
        (lambda g: fr.compare(g, splits=10, objective="x"), r"^objective 'x' is unknown"),
        (lambda g: fr.load_grid(fr.example_path("main"), where="H +"), r"^where 'H \+'"),
        (lambda g: fr.load_example("main", seed_col="rs"), r"no column 'rs' for seed_col"),
        (lambda g: fr.load_example("mian"), r"no shipped example 'mian'; examples: main"),
    ],
)
def test_api_errors_name_parameters_not_flags(call, match):
    g = fr.load_example("main", where="lr == 3e-4")
    with pytest.raises(FitrulesError, match=match) as info:
        call(g)
    assert "--" not in str(info.value)


def test_the_command_line_keeps_its_flags(capsys):
    code, _, err = run(["fit", "--form", "composition", "--predict", "H=8"], capsys)
    assert code == 2 and "error: --predict 'H=8' does not give omega" in err


def test_in_api_terms():
    assert in_api_terms("--tune-seeds needs --tune FACTOR") == "tune_seeds needs tune FACTOR"
    assert in_api_terms("--fit-data A --test-data B") == "grid A test_grid B"
    assert in_api_terms("a-b --x") == "a-b x"


def test_a_prediction_outside_the_domain_is_refused():
    g = fr.load_grid(_chinchilla_like(40), derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"])
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta")
    with pytest.raises(FitrulesError, match=r"no finite prediction at N=-1, D=1e\+12"):
        f.predict(N=-1, D=1e12)
    assert f.predict(N=1e9, D=1e12)["prediction"] > 0


def test_html_views_and_help():
    g = fr.load_example("main", where="lr == 3e-4")
    t = fr.tune(fr.load_example("main"), "lr")
    d = fr.design(g, forms=["composition", "additive"], budget=6, splits=20, resamples=20)
    for obj in (g, t, d):
        assert "<table" in obj._repr_html_()
    assert str(d).startswith("data: data/main.csv") and repr(d).startswith("Design(")
    assert "Fit one form on every cell of a grid" in pydoc.render_doc(fr.fit)
    assert "Fit every form on the same splits" in pydoc.render_doc(fr.compare)


def test_shipped_grids_by_name(capsys):
    assert {"main", "wide", "paired_tuned"} <= set(fr.list_examples())
    assert fr.example_path("main", "spec").name == "main.toml"
    with pytest.raises(GridError, match="kind 'x'"):
        fr.example_path("main", "x")
    code, out, err = run(["validate", "--data", "wide"], capsys)
    assert code == 0 and out.startswith("data/wide.csv: sha256"), err


def test_no_backend_is_forced_on_import():
    code = (
        "import matplotlib; matplotlib.use('pdf'); import fitrules as fr; "
        "from fitrules.views import figures, design, tuning; "
        "print(matplotlib.get_backend())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "pdf", out.stderr
