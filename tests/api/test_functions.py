"""The public Python functions, driven as a notebook would: names, version, help, cheap import,
a session on an in-memory DataFrame."""

from __future__ import annotations

import importlib.metadata
import pydoc

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import fitrules as fr
from conftest import TRUTH


def test_the_public_names_are_there_and_import_fitrules_alone_is_cheap():
    """fitrules exports load_grid, compare, fit, ci, tune, Form and Grid; the jobs are callable."""
    assert {"load_grid", "compare", "fit", "ci", "tune", "Form", "Grid"} <= set(dir(fr))
    assert callable(fr.compare) and callable(fr.fit) and callable(fr.tune)


def test_notebook_session_on_an_in_memory_dataframe(df):
    """A session on a DataFrame: compare, fit, ci and tune give tables, HTML and plots."""
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    assert g.label == "DataFrame" and len(g.sha256) == 64
    assert "<table" in g._repr_html_() and "80 runs in 20 cells" in repr(g)

    mine = fr.Form("mine", "L0 + a*omega**c", variables=("omega",))
    c = fr.compare(g, forms=["composition", "omega_only", mine], splits=40)
    for table in (c.summary, c.paired, c.results, c.cell_errors):
        assert isinstance(table, pd.DataFrame) and len(table)
    assert c.summary.set_index("form").loc["composition", "median"] < 0.5
    html = c._repr_html_()
    assert "<table" in html and "composition" in html and "Paired verdicts" in html
    assert "corrected resampled t" in str(c)
    for ax in (
        c.plot_heldout(),
        c.plot_paired("composition", "omega_only"),
        c.plot_fit("composition"),
        c.plot_residuals("H"),
        c.plot_curves("mine", "omega"),
    ):
        assert isinstance(ax, plt.Axes)
        plt.close(ax.figure)

    f = fr.fit(g, "composition", intervals=True, resamples=60)
    assert set(f.constants) == {"L0", "a", "b"}
    assert f.constants["b"] == pytest.approx(TRUTH["b"], abs=0.05)
    lo, hi = f.intervals["b"]
    assert lo < f.constants["b"] < hi and hi - lo > 0
    assert f.stderr["b"] > 0 and f.correlation.loc["a", "b"] != 0
    assert f.bootstrap.kind == "studentized"  # the default, whatever the runs per cell
    old = fr.fit(g, "composition", intervals=True, resamples=20, bootstrap="auto")
    assert old.bootstrap.kind == "seeds"  # every cell has repeats
    p = f.predict(H=8, keep=0.25)
    assert p["point"] == {"H": 8.0, "omega": 3.0}
    assert p["interval"][0] < p["prediction"] < p["interval"][1] and p["stderr"] > 0
    assert list(f.table.columns) == ["constant", "value", "stderr", "low", "high", "interval"]
    assert "<table" in f._repr_html_() and "standard errors: from the Jacobian" in str(f)
    ax = f.plot_residuals("omega")
    assert isinstance(ax, plt.Axes)
    plt.close(ax.figure)

    full = fr.load_grid(df, derive="omega = 1/keep - 1")
    p = fr.ci(full, baseline="H=16,keep=1", treatment="H=64,keep=0.0625", tune="lr",
              tune_seeds=[0, 1])  # fmt: skip
    (r,) = p.results
    assert r.n == 2 and r.mean_diff > 0  # tuned on seeds 0 and 1, measured on 2 and 3
    assert "both arms tuned" in r.sentence()
    assert isinstance(p.table, pd.DataFrame) and "<table" in p._repr_html_()
    ax = p.plot()
    assert isinstance(ax, plt.Axes)
    plt.close(ax.figure)
    t = fr.tune(full, "lr")
    assert set(t.grid.runs["tuned_lr"]) == {3e-4}  # the better learning rate everywhere


def test_fr_compare_still_works_after_its_module_was_imported(df):
    """fr.compare stays the function after fitrules.jobs.compare is imported."""
    import fitrules.jobs.compare as module  # sets fitrules.jobs.compare, not fitrules.compare

    assert module is not fr.compare and callable(fr.compare)
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    assert len(fr.compare(g, forms="composition", splits=5).results) == 5


def test_version_is_a_string_and_version_is_no_function():
    """fr.__version__ is the installed package's version, and there is no fr.version."""
    assert fr.__version__ == importlib.metadata.version("fitrules")
    assert not hasattr(fr, "version")


@pytest.mark.parametrize("name", ["compare", "fit", "tune", "design", "search"])
def test_help_shows_the_function(name):
    """help() on a public function shows its signature and docstring, not a module's help."""
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
