"""Figures that survive outliers and other grids: axes from quantiles with off-chart points
drawn and counted, titles that fit, one colour scale for the residual maps, no forced zero,
no legend for what is not drawn."""

import re
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from fitrules.model.forms import Form
from fitrules.views import figures


def _cmp(names=("a", "b"), n=200, runaway=1e6, degenerate=False, protocol="random"):
    """A comparison-like object: lognormal errors around 1 to 2%, one runaway split of a."""
    rng = np.random.default_rng(0)
    rows = []
    for i, name in enumerate(names):
        e = np.exp(rng.normal(np.log(1 + i), 0.3, n))
        if i == 0 and runaway:
            e[7] = runaway
        for s in range(n):
            rows.append({"split": s, "split_label": f"split {s}", "form": name,
                         "heldout_error_pct": e[s], "degenerate": degenerate,
                         "noise_floor_pct": 0.3})  # fmt: skip
    return SimpleNamespace(
        results=pd.DataFrame(rows),
        forms=[SimpleNamespace(name=x) for x in names],
        settings={"keep_degenerate": False, "n_splits": n, "protocol": protocol},
    )


def _inside_figure(ax) -> bool:
    fig = ax.figure
    fig.canvas.draw()
    box, page = ax.title.get_window_extent(), fig.bbox
    return box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y1 <= page.y1 + 1


def test_a_runaway_split_does_not_stretch_the_paired_scatter():
    ax = figures.paired_scatter(_cmp(), "a", "b")
    lo, hi = ax.get_xlim()
    assert hi < 100, "one split at 1e6 % set the axis"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(re.match(r"\d+ splits? off the chart.*largest 1e\+06", t) for t in labels)
    plt.close("all")


def test_the_ecdf_shows_that_curves_continue_beyond_the_edge():
    ax = figures.heldout_ecdf(_cmp())
    assert ax.get_xlim()[1] < 100
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("1 beyond the edge, up to 1e+06%" in t for t in labels)
    arrows = [c for c in ax.get_children() if getattr(c, "arrow_patch", None) is not None]
    assert arrows
    plt.close("all")


def test_titles_fit_in_the_figure():
    long = ("composition_with_a_free_exponent_on_omega", "additive_with_five_constants_fitted")
    assert _inside_figure(figures.paired_scatter(_cmp(long), *long))
    assert _inside_figure(figures.heldout_ecdf(_cmp(long)))
    plt.close("all")


def test_no_hatching_legend_without_hatched_bars():
    ax = figures.errors_by_split(_cmp(n=1, runaway=0, protocol="extrapolate:H>=64"))
    assert "hatched" not in ax.get_title()
    ax = figures.errors_by_split(_cmp(n=1, runaway=0, degenerate=True, protocol="extrapolate"))
    assert "hatched: degenerate" in ax.get_title()
    plt.close("all")


def test_paired_differences_axis_is_not_forced_to_zero():
    """11 differences of -0.2 +- 0.003 sat in a thin strip when the axis had to reach 0."""
    d = -0.2 + 0.003 * np.random.default_rng(1).standard_normal(11)
    ci = SimpleNamespace(diffs=d.tolist(), seeds=list(range(11)), mean_diff=float(d.mean()),
                         level=0.95, t_interval=(float(d.mean()) - 0.002, float(d.mean()) + 0.002),
                         bootstrap_interval=(None, None), units="nats", metric="loss",
                         treatment="diloco", baseline="sync")  # fmt: skip
    ax = figures.paired_differences(ci)
    lo, hi = ax.get_ylim()
    assert hi < -0.15 and hi - lo < 0.05
    assert any("zero difference is above the chart" in t.get_text() for t in ax.texts)
    assert ax.get_ylabel() == "difference in loss (nats)"
    plt.close("all")


def test_residual_maps_of_all_forms_share_one_colour_scale():
    from conftest import composition_grid
    from fitrules import api
    from fitrules.views.markdown import _fit_figures

    c = api.compare(composition_grid(), ["composition", "omega_only", "additive"], 5)
    drawn = {}
    _fit_figures(c.cells, c.forms, c.full_fits, None,
                 lambda sec, name, ax, cap: drawn.__setitem__(name, ax))  # fmt: skip
    maps = [ax for name, ax in drawn.items() if name.startswith("residual_map_")]
    assert len(maps) == 3
    limits = {ax.images[0].get_clim() for ax in maps}
    assert len(limits) == 1, limits
    # residuals and curves against every variable each form reads
    assert {"residuals_vs_H.png", "residuals_vs_omega.png", "curves_omega_only_vs_omega.png",
            "curves_additive_vs_H.png"} <= set(drawn)  # fmt: skip
    plt.close("all")


def test_curves_against_a_continuous_variable_bin_the_other():
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7.5, 10, 80), 10 ** rng.uniform(9, 11.5, 80)
    table = pd.DataFrame({"N": N, "D": D, "value": 1.8 + 480 / N**0.35 + 2000 / D**0.37,
                          "n_seeds": 1, "std": np.nan, "sem": np.nan})  # fmt: skip
    cells = SimpleNamespace(table=table, X={"N": N, "D": D}, y=table["value"].to_numpy(),
                            metric="loss", variables=("N", "D"))  # fmt: skip
    form = Form("chin", "E + A/N**alpha + B/D**beta", ("N", "D"))
    c = {"E": 1.8, "A": 480.0, "alpha": 0.35, "B": 2000.0, "beta": 0.37}
    ax = figures.curves_vs(cells, form, c, "N")
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "loss; one run per cell"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 4 and all(t.startswith("D ") for t in labels)
    assert figures.residuals_vs(cells, [(form, c)], "D").get_xscale() == "log"
    plt.close("all")


@pytest.mark.parametrize(
    "values, log",
    [(np.r_[np.linspace(1, 3, 99), 1e6], False), (np.geomspace(0.1, 1e3, 50), True)],
)
def test_robust_range(values, log):
    lo, hi, is_log = figures.robust_range(values)
    assert is_log == log
    assert hi < 10 if not log else hi > 900


def test_one_residual_sign_in_every_figure_and_table():
    """Issue 32: the same cell was -2.2 in the residual map and +2.2 under observed against
    predicted. Now every view shows observed - predicted, in % of observed, and says so."""
    from conftest import composition_grid
    from fitrules import api

    df = composition_grid()
    raised = (df["H"] == 64) & (df["omega"] == 0)
    df.loc[raised, "loss"] *= 1.03  # this cell sits above any smooth fit
    f = api.fit(df, "composition")
    cells, form, consts = f.cells, f.form, f.constants
    t = cells.table
    i = int(np.flatnonzero(((t["H"] == 64) & (t["omega"] == 0)).to_numpy())[0])
    expected = 100 * (cells.y[i] - f.residuals["predicted"].iloc[i]) / cells.y[i]
    assert expected > 1
    assert f.residuals["residual_pct"].iloc[i] == pytest.approx(expected)
    assert figures.residuals_pct(cells, form, consts)[i] == pytest.approx(expected)
    # the residual map's label of the cell
    ax = figures.residual_map(cells, form, consts, "H", "omega")
    texts = [float(x.get_text()) for x in ax.texts if x.get_text()[:1] in "+-"]
    assert round(expected, 1) in texts
    assert figures.RESIDUAL_LABEL in ax.figure.axes[-1].get_ylabel()
    # the panel under observed against predicted
    ax = figures.observed_vs_predicted(cells, form, consts)
    panel = ax.figure.axes[1]
    ys = np.asarray(panel.containers[0].lines[0].get_ydata(), float)  # the points, not caps
    res = figures.residuals_pct(cells, form, consts)
    assert len(ys) >= 10 and np.isclose(ys[:, None], res[None, :]).any(axis=1).all()
    assert not np.isclose(ys[:, None], -res[None, :]).any(axis=1).all()  # not the other sign
    assert panel.get_ylabel().replace("\n", " ") == figures.RESIDUAL_LABEL
    # residuals against a variable
    ax = figures.residuals_vs(cells, [(form, consts)], "H")
    inside = np.asarray(ax.collections[0].get_offsets()[:, 1], float)  # not the clipped ones
    assert len(inside) >= 10 and np.isclose(inside[:, None], res[None, :]).any(axis=1).all()
    assert not np.isclose(inside[:, None], -res[None, :]).any(axis=1).all()
    assert ax.get_ylabel() == figures.RESIDUAL_LABEL
    plt.close("all")


def test_log_axes_are_ticked_at_the_levels_and_labels_replace_names():
    from conftest import composition_grid
    from fitrules import api

    f = api.fit(composition_grid(), "composition")
    with figures.axis_labels("H=sync interval,loss=validation loss"):
        ax = f.plot_curves("H")
    assert ax.get_xscale() == "log"
    assert [t for t in ax.get_xticks() if 1 <= t <= 64] == [1, 4, 16, 64]
    assert ax.get_xlabel().startswith("sync interval") and "validation loss" in ax.get_ylabel()
    plt.close("all")
    with pytest.raises(Exception, match="expected COLUMN=LABEL"):
        figures.parse_labels("val/loss")


def test_the_ecdf_marks_the_noise_floor():
    ax = figures.heldout_ecdf(_cmp(runaway=0))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("noise floor 0.3%") for t in labels)
    plt.close("all")
