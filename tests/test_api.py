"""The public Python API, driven as a notebook would: an in-memory DataFrame, no file."""

import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import TRUTH, composition_grid


@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    """Two learning rates of the composition grid; lr 1e-3 is 0.01 worse everywhere."""
    a = composition_grid(seeds=4, rng_seed=1).assign(lr=3e-4)
    b = composition_grid(seeds=4, rng_seed=2).assign(lr=1e-3)
    b["loss"] += 0.01
    return pd.concat([a, b], ignore_index=True).drop(columns="omega")


def test_the_public_names_are_there_and_import_fitrules_alone_is_cheap():
    assert {"load_grid", "compare", "fit", "ci", "tune", "Form", "Grid"} <= set(dir(fr))
    assert callable(fr.compare) and callable(fr.fit) and callable(fr.tune)


def test_notebook_session_on_an_in_memory_dataframe(df):
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    assert g.label == "DataFrame" and len(g.sha256) == 64
    assert "<table" in g._repr_html_() and "80 runs in 20 cells" in repr(g)

    mine = fr.Form("mine", "L0 + a*omega**c", variables=("omega",))
    c = fr.compare(g, forms=["composition", "omega_only", mine], splits=40)
    for table in (c.summary, c.paired, c.results, c.cell_errors):
        assert isinstance(table, pd.DataFrame) and len(table)
    assert c.summary.set_index("form").loc["composition", "median_pct"] < 0.5
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
    assert list(f.table.columns) == ["constant", "value", "stderr", "low", "high"]
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
    import fitrules.jobs.compare as module  # sets fitrules.jobs.compare, not fitrules.compare

    assert module is not fr.compare and callable(fr.compare)
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    assert len(fr.compare(g, forms="composition", splits=5).results) == 5


def test_results_write_json_and_reports(df, tmp_path):
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    c = fr.compare(g, forms=["composition", "omega_only"], splits=20)
    c.to_json(tmp_path / "c.json")
    assert (tmp_path / "c.json").read_text().startswith("{")
    assert (c.report(tmp_path / "rep") / "report.md").exists()
    f = fr.fit(g, "composition")
    assert (f.report(tmp_path / "fit") / "report.md").exists()


def test_load_grid_from_a_dataframe_names_it_and_hashes_its_content(df):
    a = fr.load_grid(df)
    b = fr.load_grid(df.copy())
    c = fr.load_grid(df.assign(loss=df["loss"] + 1e-9))
    assert a.sha256 == b.sha256 != c.sha256
    assert fr.load_grid("named.csv", frame=df).sha256 == a.sha256  # no longer empty
    with pytest.raises(fr.GridError, match="DataFrame: no column 'nope'"):
        a.cells(["nope"])


def test_api_refuses_bad_input_with_clear_errors(df):
    g = fr.load_grid(df, where="lr == 3e-4", derive="omega = 1/keep - 1")
    with pytest.raises(fr.FormError, match="unknown form 'nope'"):
        fr.compare(g, forms=["nope"])
    with pytest.raises(fr.FitrulesError, match="^splits 10 applies to random splits only"):
        fr.compare(g, forms="composition", splits=10, split="leave-one-level-out:H")
    with pytest.raises(fr.FormError, match="reads H, omega, not 'keep'"):
        fr.fit(g, "composition").plot_curves("keep")


def test_python_dash_m_fitrules():
    res = subprocess.run(
        [sys.executable, "-m", "fitrules", "--version"], capture_output=True, text=True
    )
    assert res.returncode == 0 and res.stdout.startswith("fitrules ")


def test_one_run_per_cell_gets_a_residual_bootstrap_and_nonzero_intervals():
    """With one run per cell the seed bootstrap cannot move anything: intervals had zero width
    ("E = 1.81722 [1.81722, 1.81722]")."""
    rng = np.random.default_rng(3)
    N = 10 ** rng.uniform(7.5, 10, 60)
    D = 10 ** rng.uniform(9, 11.5, 60)
    loss = (1.8 + 480 / N**0.35 + 2000 / D**0.37) * np.exp(0.01 * rng.standard_normal(60))
    g = fr.load_grid(pd.DataFrame({"N": N, "D": D, "loss": loss}))
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50)  # fmt: skip
    assert f.bootstrap.kind == "studentized"  # the default resamples residuals
    for c, (lo, hi) in f.intervals.items():
        assert hi - lo > 0, c
        assert f.stderr[c] > 0
    assert abs(f.correlation.loc["B", "beta"]) > 0.9
    assert "studentized bootstrap" in str(f) and "bootstrap-t" in str(f)
    f = fr.fit(g, "chin(N, D) = E + A/N**alpha + B/D**beta", objective="log_huber",
               intervals=True, resamples=50, bootstrap="auto")  # fmt: skip
    assert f.bootstrap.kind == "residuals" and "single run" in f.bootstrap.reason
    assert all(hi - lo > 0 for lo, hi in f.intervals.values())
    assert "residuals bootstrap" in str(f)
