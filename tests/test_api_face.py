"""The Python API beside lmfit and statsmodels (issue 32): ``fr.version`` was importlib's
function, ``help(fr.compare)`` said "Help on module", ``predict()`` returned a plain dict
(the only result that did not render), and compare ran 20 s in a notebook with no progress."""

from __future__ import annotations

import importlib.metadata
import json
import pydoc

import pytest

import fitrules as fr
from helpers import run


def test_version_is_a_string_and_version_is_no_function():
    assert fr.__version__ == importlib.metadata.version("fitrules")
    assert not hasattr(fr, "version")


@pytest.mark.parametrize("name", ["compare", "fit", "tune", "design", "search"])
def test_help_shows_the_function(name):
    func = getattr(fr, name)
    text = pydoc.render_doc(func, "Help on %s:", renderer=pydoc.plaintext)
    assert "Help on module" not in text
    first = [ln for ln in func.__wrapped__.__doc__.splitlines() if ln.strip()][0].strip()
    assert text.splitlines()[2].startswith(f"{name}(")  # the signature, then the docstring
    assert first in text.splitlines()[3]


def test_a_public_name_is_a_function_or_a_class_never_a_module():
    """Issue 30: fitrules.compare was a module made callable; the jobs' modules now live
    under fitrules.jobs, and every public name is what it says."""
    import types

    import fitrules.jobs.compare as module
    from fitrules.jobs.compare import Comparison

    assert module.Comparison is Comparison is fr.Comparison
    for name in fr.__all__:
        assert not isinstance(getattr(fr, name), types.ModuleType), name


def test_predict_returns_a_result_that_renders(tmp_path):
    f = fr.fit(fr.load_example("smoke"), "composition")
    p = f.predict(H=8, keep=0.25)
    assert isinstance(p, fr.Prediction) and isinstance(p, dict)
    assert p["prediction"] == pytest.approx(p.to_dict()["prediction"])
    assert str(p).startswith("composition: prediction at H=8, keep=0.25: ")
    assert p.summary() == str(p)
    assert repr(p).startswith("Prediction(composition at H=8, keep=0.25: ")
    assert "fitrules prediction" in p._repr_html_()
    doc = json.loads(p.to_json(tmp_path / "p.json"))
    assert doc["form"] == "composition" and doc["point"] == {"H": 8.0, "omega": 3.0}
    assert json.loads((tmp_path / "p.json").read_text()) == doc


def test_compare_progress_counts_splits_and_says_when_a_report_is_written(tmp_path, capsys):
    """The bar counted fits ("5632/120000" for 10,000 splits) with an ETA swinging from 0:27
    to 14:45; nothing showed while a report was written."""
    code, _, err = run(["compare", "--splits", 12, "--forms", "composition,omega_only",
                        "--progress", "--report", tmp_path / "r"], capsys)  # fmt: skip
    assert code == 0, err
    assert "fitting 2 forms" in err and "/12 splits" in err and "/48" not in err
    assert f"writing the report (tables and figures) to {tmp_path / 'r'}" in err


def test_progress_bar_uses_the_mean_rate():
    """The ETA is the mean rate since the start (smoothing 0), so unequal pieces of work
    (forms of unequal cost, the verdict's fits) do not swing it; the bar counts splits."""
    from fitrules.base.util import split_progress

    with split_progress(300, 12, "fitting 6 forms", True) as step:
        bar = step.bar
        assert bar.smoothing == 0 and bar.total == 300
        for _ in range(6 * 2):
            step(300)  # a form's 300 fits of one pass
        assert bar.n == pytest.approx(300)


def test_a_bad_progress_argument_is_refused():
    with pytest.raises(fr.FitrulesError, match="progress 'yes': must be True, False or None"):
        fr.compare(splits=3, forms="composition", progress="yes")
