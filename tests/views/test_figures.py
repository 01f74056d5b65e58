"""Figures (fitrules.views.figures and friends): axes from quantiles with off-chart points
counted, titles and legends that fit, one colour scale, residuals at their scale, units,
tuning curves."""

from __future__ import annotations

import re
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from tables import as_grid, bowl, lr_frame

from conftest import TRUTH, composition_grid
from fitrules import api
from fitrules.base.errors import GridError
from fitrules.jobs.tune import tune
from fitrules.model.forms import Form
from fitrules.model.grids import load_grid
from fitrules.views import figures
from fitrules.views.design import design_figure
from fitrules.views.text import fmt_p
from fitrules.views.tuning import chosen_levels_map, lr_curves


@pytest.fixture(scope="module")
def cmp():
    """The default grid (a harness table: units known) with every built-in form."""
    return api.compare(splits=40)


@pytest.fixture(scope="module")
def design():
    return api.design(forms=["composition", "additive"], budget=24, splits=20, resamples=20)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _inside(ax, artist, draw: bool = True) -> bool:
    """``artist`` lies inside the figure of ``ax`` after a layout of the figure (without
    rendering pixels; ``draw=False`` when the figure is laid out already)."""
    if draw:
        ax.figure.draw_without_rendering()
    box, page = artist.get_window_extent(), ax.figure.bbox
    return (
        box.x0 >= page.x0 - 1
        and box.x1 <= page.x1 + 1
        and box.y0 >= page.y0 - 1
        and (box.y1 <= page.y1 + 1)
    )


def _figures_with_legends(cmp, design):
    yield "heldout_ecdf", cmp.plot_heldout()
    yield "heldout_ecdf, runaway split", figures.heldout_ecdf(_cmp())
    yield "paired", cmp.plot_paired("composition", "additive")
    yield "paired, off-chart split", figures.paired_scatter(_cmp(), "a", "b")
    yield "observed_vs_predicted", cmp.plot_fit("composition")
    yield "residuals", cmp.plot_residuals("H")
    yield "curves", cmp.plot_curves("composition", "omega")
    yield "design", design_figure(design)


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
                         "heldout_error": e[s], "degenerate": degenerate,
                         "noise_floor": 0.3})  # fmt: skip
    return SimpleNamespace(
        results=pd.DataFrame(rows),
        forms=[SimpleNamespace(name=x) for x in names],
        settings={"keep_degenerate": False, "n_splits": n, "protocol": protocol},
        error_metric={"name": "relative", "unit": "%", "quantity": "|relative error|"},
    )


def _inside_figure(ax) -> bool:
    fig = ax.figure
    fig.draw_without_rendering()
    box, page = ax.title.get_window_extent(), fig.bbox
    return box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y1 <= page.y1 + 1


@pytest.fixture
def h_keep_tuning():
    rng = np.random.default_rng(3)
    best = {1: 3e-3, 4: 1e-3, 16: 1e-3, 64: 1e-2}  # H=64: the largest lr tried
    frames = [
        lr_frame(
            lambda h, lr, s, k=keep: (
                bowl(best, 0.01)(h, lr, s) + 0.1 * (1 / k - 1) + 0.004 * rng.standard_normal()
            ),
            keep=keep,
        )
        for keep in (1.0, 0.25)
    ]
    yield tune(as_grid(pd.concat(frames, ignore_index=True)), ["lr"])
    plt.close("all")


def test_forms_residuals_share_their_cells_x_told_apart_by_marker(cmp):
    """Every form's residual at a cell is drawn at the cell's own x (issue 66: two forms were
    dodged by half a log step, off the level they belong to), each form with its marker."""
    ax = cmp.plot_residuals("omega")
    levels = set(np.round(cmp.cells.table["omega"].to_numpy(float), 12))
    drawn = [c for c in ax.collections if c.get_label() in {f.name for f in cmp.forms}]
    assert len(drawn) == len(cmp.forms) > 1
    for c in drawn:
        assert set(np.round(c.get_offsets()[:, 0], 12)) <= levels, c.get_label()
    xs = [tuple(np.sort(c.get_offsets()[:, 0])) for c in drawn]
    assert len(set(xs)) == 1  # every form at the same x positions
    paths = [c.get_paths()[0].vertices.round(6).tobytes() for c in drawn]
    assert len(set(paths)) == len(drawn)  # one marker a form


def test_grouped_curves_name_their_bins_by_levels():
    """A variable of many levels, binned, is named in the legend by the lowest and highest
    level each bin holds (issue 66: "experts 1.995 to 7.998", qcut's edges, no level)."""
    rng = np.random.default_rng(0)
    H, experts = (a.ravel() for a in np.meshgrid([1, 4, 16, 64], [2, 3, 4, 5, 6, 7, 8]))
    loss = 2 + 0.1 * H**0.3 / experts * np.exp(0.005 * rng.standard_normal(H.size))
    f = api.fit(pd.DataFrame({"H": H, "experts": experts, "loss": loss}),
                "moe(H, experts) = L0 + a*H**b/experts")  # fmt: skip
    ax = f.plot_curves("H")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    groups = [t for t in labels if t.startswith("experts")]  # beside "data" and the fit's
    assert len(groups) >= 3, labels
    for label in groups:
        m = re.fullmatch(r"experts (?:= (\S+)|(\S+) to (\S+))", label)
        assert m, label
        assert all(v in {"2", "3", "4", "5", "6", "7", "8"} for v in m.groups() if v), label


def test_the_paired_caption_leads_with_the_verdict(cmp):
    """It led with "lower in 174 of 212 splits", which the README calls not evidence; the
    verdict is now the caption under the axes (issue 44: a six-line title), the title one line."""
    ax = cmp.plot_paired("composition", "additive")
    assert ax.get_title() == "composition against additive: held-out error per split"
    (note,) = figures.captions(ax)
    text = note.get_text()
    first = text.split("\n")[0]
    assert first.startswith("composition vs additive: ")
    flat = " ".join(text.split())  # the caption is wrapped
    assert "corrected t p = " in flat and "Holm" in flat
    assert "lower in" not in first and "Descriptive only: composition lower in" in flat
    verdict = cmp.paired.iloc[0]
    assert f"p = {fmt_p(verdict['p'])}" in flat
    assert _inside(ax, note)


def test_legends_sit_in_free_space(cmp, design):
    """No figure's legend overlaps what is plotted, and each legend stays inside its figure.

    Legends covered curves (heldout_ecdf), off-chart points and candidate points."""
    for name, ax in _figures_with_legends(cmp, design):
        assert ax.get_legend() is not None, name
        assert figures.legend_overlap(ax) == 0, name
        assert _inside(ax, ax.get_legend()), name


def test_the_design_figure_keeps_its_labels_inside(design):
    """The design figure's title and labels stay inside the figure, cell labels inside the axes.

    The chosen cell at the top of the plane had its label clipped."""
    ax = design_figure(design)
    assert len(ax.texts) >= 2
    ax.figure.draw_without_rendering()  # once: checking a text changes no layout
    for t in [*ax.texts, ax.title]:
        assert _inside(ax, t, draw=False), t.get_text()
        box = ax.get_window_extent()
        e = t.get_window_extent()
        if t is not ax.title and t not in figures.captions(ax):  # a caption is under the axes
            assert box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1, t.get_text()


def test_observed_vs_predicted_shows_residuals_at_their_scale(cmp):
    """Observed against predicted has a residual panel in % of observed, filled by the residuals.

    On a 2 to 3.4 range, 0.5% residuals were squeezed into a line."""
    ax = cmp.plot_fit("composition")
    panels = ax.figure.axes
    assert len(panels) == 2
    panel = panels[1]
    assert "% of observed" in panel.get_ylabel()  # the residuals' one convention (issue 32)
    f = cmp.full_fits["composition"]
    y = cmp.cells.y
    from fitrules.model.compiled import predict

    pred = predict(cmp.form("composition"), cmp.cells.X, f.constants)
    r = 100 * (y - pred) / y
    lo, hi = panel.get_ylim()
    assert lo <= r.min() and r.max() <= hi
    assert hi - lo < 2 * (max(r.max(), 0) - min(r.min(), 0))  # the residuals fill the panel
    # the main panel's range is the data's, many times the residuals' spread in % terms
    dlo, dhi = ax.get_ylim()
    assert 100 * (dhi - dlo) / np.mean(y) > 3 * (r.max() - r.min())


def test_axes_carry_units(cmp):
    """Axes carry the harness's units (H in inner steps, loss in nats) and those given by units=.

    x axes (N, D, H) never carried units."""
    assert cmp.plot_curves("composition", "H").get_xlabel() == "H (inner steps)"
    assert cmp.plot_residuals("H").get_xlabel() == "H (inner steps)"
    assert "loss (nats)" in cmp.plot_fit("composition").get_ylabel()
    assert cmp.plot_curves("composition", "omega").get_xlabel() == "omega"  # no unit
    # a user's table: units where given
    df = composition_grid().rename(columns={"H": "N"})
    g = load_grid(df, units="N=parameters", unit="nats")
    f = api.fit(g, "mine(N, omega) = L0 + a*omega*(N/16)**b")
    assert f.plot_curves("N").get_xlabel() == "N (parameters)"
    assert f.plot_residuals("N").get_xlabel() == "N (parameters)"
    assert f.plot_fit().figure.axes[1].get_xlabel() == "predicted loss (nats)"


def test_bad_units_are_refused():
    """load_grid refuses units= naming no column or not written as NAME=UNIT pairs."""
    from fitrules.base.errors import GridError

    with pytest.raises(GridError, match="has no column 'Q'"):
        load_grid(composition_grid(), units="Q=steps")
    with pytest.raises(GridError, match="expected NAME=UNIT pairs"):
        load_grid(composition_grid(), units="H")


def test_one_forms_small_residuals_do_not_push_a_rivals_off_the_chart():
    """A poor form's residuals stay on the chart beside a good form's near-zero ones.

    On the four-factor sheet, a form that misses width had all 24 residuals off the chart:
    the range came from the pooled quartiles, set by the good form's near-zero residuals."""
    cells = load_grid(composition_grid()).cells(["H", "omega"])
    good = (Form("good", "L0 + a*omega*(H/16)**b", ("H", "omega")), TRUTH)
    flat = (Form("flat", "L0 + a*omega", ("omega",)), {"L0": 2.2, "a": 0.02})
    ax = figures.residuals_vs(cells, [good, flat], "omega")
    assert not [t for t in ax.texts if "off the chart" in t.get_text()]


def test_tuning_curves_with_many_configurations_keep_their_axes():
    """Tuning curves of 36 configurations keep axes over half the figure and name the count.

    36 configurations gave a legend so tall that the axes shrank to a strip."""
    from fitrules.jobs.tune import tune
    from tools.contact import four_factor_table

    ax = tune(load_grid(four_factor_table()), "lr").plot_curves()
    ax.figure.draw_without_rendering()
    assert ax.get_position().height > 0.5 and ax.get_position().width > 0.5
    assert any("36 configurations" in t.get_text() for t in ax.texts)


def test_a_runaway_split_does_not_stretch_the_paired_scatter():
    """A split at 1e6% leaves the paired scatter's axis below 100, counted off the chart."""
    ax = figures.paired_scatter(_cmp(), "a", "b")
    lo, hi = ax.get_xlim()
    assert hi < 100, "one split at 1e6 % set the axis"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(re.match(r"\d+ splits? off the chart.*largest 1e\+06", t) for t in labels)
    plt.close("all")


def test_the_ecdf_shows_that_curves_continue_beyond_the_edge():
    """A split at 1e6% leaves the ECDF's axis below 100, with an arrow and a legend entry for it."""
    ax = figures.heldout_ecdf(_cmp())
    assert ax.get_xlim()[1] < 100
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("1 beyond the edge, up to 1e+06%" in t for t in labels)
    arrows = [c for c in ax.get_children() if getattr(c, "arrow_patch", None) is not None]
    assert arrows
    plt.close("all")


def test_titles_fit_in_the_figure():
    """Titles of the paired scatter and the ECDF with long form names stay inside the figure."""
    long = ("composition_with_a_free_exponent_on_omega", "additive_with_five_constants_fitted")
    assert _inside_figure(figures.paired_scatter(_cmp(long), *long))
    assert _inside_figure(figures.heldout_ecdf(_cmp(long)))
    plt.close("all")


def test_no_hatching_legend_without_hatched_bars():
    """The errors-by-split legend lists 'degenerate' only when a bar is degenerate (hatched)."""
    ax = figures.errors_by_split(_cmp(n=1, runaway=0, protocol="extrapolate:H>=64"))
    assert "degenerate" not in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = figures.errors_by_split(_cmp(n=1, runaway=0, degenerate=True, protocol="extrapolate"))
    assert "degenerate" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_paired_differences_axis_is_not_forced_to_zero():
    """Paired differences far from zero get an axis around them and a note that zero is above.

    11 differences of -0.2 +- 0.003 sat in a thin strip when the axis had to reach 0."""
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
    """A report's residual maps share one colour scale; each form's variables get their plots."""
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
    """Curves against N on scattered N, D runs group D in 4 bins, on log axes, keys after groups."""
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
    assert labels[4:] == ["data", "fit on all cells"]  # the keys after the groups
    assert all(t.startswith("D ") for t in labels[:4])
    assert figures.residuals_vs(cells, [(form, c)], "D").get_xscale() == "log"
    plt.close("all")


@pytest.mark.parametrize(
    "values, log",
    [(np.r_[np.linspace(1, 3, 99), 1e6], False), (np.geomspace(0.1, 1e3, 50), True)],
)
def test_robust_range(values, log):
    """robust_range leaves a lone outlier out of a linear range and makes a geometric spread log."""
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
    """H's log axis is ticked at its levels; axis_labels renames axes, refusing text without =."""
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
    """The held-out ECDF's legend marks the noise floor (0.3%)."""
    ax = figures.heldout_ecdf(_cmp(runaway=0))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("noise floor 0.3%") for t in labels)
    plt.close("all")


def test_residual_map_of_a_fit_with_no_finite_prediction():
    """A residual map of constants with no finite prediction says so instead of crashing.

    A transfer report whose fit on all cells failed crashed in nanmax of nothing."""
    from fitrules.model.forms import BUILTIN_FORMS
    from fitrules.model.grids import load_grid
    from fitrules.views import figures

    grid = load_grid("g.csv", frame=composition_grid())
    form = BUILTIN_FORMS["additive"].bind(grid.columns)
    nan = {c: float("nan") for c in ("L0", "a", "c", "b", "d")}
    ax = figures.residual_map(grid.cells(["H", "omega"]), form, nan, "H", "omega")
    assert "no finite prediction" in ax.texts[0].get_text()


def test_figure_labels_are_true_to_the_data():
    """With one run per cell and no unit known, labels say 'one run' and invent no unit."""
    from fitrules import api
    from fitrules.views import figures

    g = api.as_grid(composition_grid(seeds=1))
    f = api.fit(g, "composition")
    ax = figures.observed_vs_predicted(f.cells, f.form, f.constants, None)
    assert ax.get_ylabel() == "observed loss"  # no unit invented
    assert "one run each" in [t.get_text() for t in ax.get_legend().get_texts()][-1]
    ax = figures.curves_vs(f.cells, f.form, f.constants, "H", "nats")
    assert ax.get_ylabel() == "loss (nats); one run per cell"
    figures.plt.close("all")


def test_lr_curves(h_keep_tuning):
    """lr_curves draws a log-lr curve per configuration (or by= level) and refuses a non-factor."""
    t = h_keep_tuning
    ax = lr_curves(t)
    assert ax.get_xscale() == "log"
    assert len(ax.containers) == 8  # one error-bar line per configuration
    assert "lr" in ax.get_title() and ax.get_xlabel() == "lr"
    assert "\n" not in ax.get_title()  # one line; the rings' key is the caption
    assert "rings: level chosen" in figures.captions(ax)[0].get_text()
    ax = lr_curves(t, by="H")
    assert len(ax.containers) == 4
    with pytest.raises(GridError, match=r"by='width' is not a configuration factor; allowed: H"):
        lr_curves(t, by="width")


def test_chosen_levels_map(h_keep_tuning):
    """chosen_levels_map rings edge choices, labels every configuration, refuses a non-factor."""
    t = h_keep_tuning
    ax = chosen_levels_map(t, x="H", y="keep")
    ab = t.choices[t.choices["fold"] == "A->B"]
    assert len(ax.patches) == int(ab["at_edge"].sum()) >= 2  # H=64 at both keeps
    assert "\n" not in ax.get_title()
    texts = [x.get_text() for x in ax.texts if x not in figures.captions(ax)]
    assert len(texts) == 8
    assert sum("B->A:" in x for x in texts) == int((~t.flattery["folds_agree"]).sum())
    with pytest.raises(GridError, match=r"x='lr' is not a configuration factor"):
        chosen_levels_map(t, x="lr", y="keep")


def test_a_residual_that_rounds_to_zero_is_labelled_without_a_sign():
    """Issue 44, item 7: the residual map printed "-0.0" for a residual of -0.04%."""
    f = api.fit(composition_grid(noise=0.0), "composition")
    ax = figures.residual_map(f.cells, f.form, f.constants, "H", "omega")
    texts = [t.get_text() for t in ax.texts]
    assert texts and "-0.0" not in texts and "+0.0" not in texts and "0.0" in texts
    plt.close(ax.figure)
