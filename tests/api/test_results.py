"""Results: summaries, HTML views, JSON and reports written from Python."""

from __future__ import annotations

import json
import pydoc

import pytest

import fitrules as fr


def test_summary_on_every_result():
    """summary() of a fit and of a ci result is its text."""
    g = fr.load_example("smoke")
    f = fr.fit(g, "composition")
    assert f.summary() == str(f)
    p = fr.ci(fr.load_example("paired"), baseline="algo=sync",
              treatment="algo=diloco,H=16,keep=1", resamples=1000)  # fmt: skip
    assert p.summary() == str(p)


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_results_write_json_and_reports(df, tmp_path):
    """A comparison writes JSON and a report; a fit writes a report."""
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    c = fr.compare(g, forms=["composition", "omega_only"], splits=20)
    c.to_json(tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text().startswith("{")
    assert (c.report(tmp_path / "rep") / "report.md").exists()
    f = fr.fit(g, "composition")
    assert (f.report(tmp_path / "fit") / "report.md").exists()


def test_predict_returns_a_result_that_renders(tmp_path):
    """FittedForm.predict gives a Prediction dict with its text, repr, HTML and JSON."""
    f = fr.fit(fr.load_example("smoke"), "composition")
    p = f.predict(H=8, keep=0.25)
    assert isinstance(p, fr.Prediction) and isinstance(p, dict)
    assert p["prediction"] == pytest.approx(p.to_dict()["prediction"])
    assert str(p).startswith("composition: prediction at H=8, keep=0.25: ")
    assert p.summary() == str(p)
    assert repr(p).startswith("Prediction(composition at H=8, keep=0.25: ")
    assert "fitrules prediction" in p._repr_html_()
    assert p.to_json(tmp_path / "p.json") is None  # issue 66: a notebook cell prints nothing
    doc = json.loads(p.to_json())
    assert doc["form"] == "composition" and doc["point"] == {"H": 8.0, "omega": 3.0}
    assert json.loads((tmp_path / "p.json").read_text()) == doc


def test_html_views_and_help():
    """Grids, tunings and designs render HTML tables; help on fit and compare shows their docs."""
    g = fr.load_example("main", where="lr == 3e-4")
    t = fr.tune(fr.load_example("main"), "lr")
    d = fr.design(g, forms=["composition", "additive"], budget=6, splits=20, resamples=20)
    for obj in (g, t, d):
        assert "<table" in obj._repr_html_()
    assert str(d).startswith("data: data/main.csv") and repr(d).startswith("Design(")
    assert "Fit one form on every cell of a grid" in pydoc.render_doc(fr.fit)
    assert "Fit every form on the same splits" in pydoc.render_doc(fr.compare)
