"""Each figure fault found by looking at every figure has a test that would have caught it:
offsets that moved points past neighbouring levels, titles that led with split counts,
legends over data, residuals squeezed into a line, labels outside the figure, axes without
units, raster-only output."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from test_figures import _cmp

from conftest import TRUTH, composition_grid
from fitrules import api
from fitrules.model.forms import Form
from fitrules.model.grids import load_grid
from fitrules.views import figures
from fitrules.views.design import design_figure
from helpers import refused, run


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


def _inside(ax, artist) -> bool:
    ax.figure.canvas.draw()
    box, page = artist.get_window_extent(), ax.figure.bbox
    return (
        box.x0 >= page.x0 - 1
        and box.x1 <= page.x1 + 1
        and box.y0 >= page.y0 - 1
        and (box.y1 <= page.y1 + 1)
    )


def test_residual_offsets_stay_within_half_the_gap_between_levels(cmp):
    """The offset that separated forms was +-2 units where omega levels are 1 apart."""
    ax = cmp.plot_residuals("omega")
    levels = np.unique(cmp.cells.table["omega"])
    gap = np.min(np.diff(levels))
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    nearest = levels[np.abs(xs[:, None] - levels[None, :]).argmin(1)]
    assert np.all(np.abs(xs - nearest) <= figures.DODGE / 2 * gap + 1e-9)
    assert xs.min() > levels.min() - gap / 2  # no point at omega = -2
    # each form keeps its side: the series are ordered the same way at every level
    firsts = [c.get_offsets()[:, 0] for c in ax.collections[:2]]
    assert np.all(firsts[0] < firsts[1])


def test_the_paired_title_leads_with_the_verdict(cmp):
    """It led with "lower in 174 of 212 splits", which the README calls not evidence."""
    title = cmp.plot_paired("composition", "additive").get_title()
    first = title.split("\n")[0]
    assert first.startswith("composition vs additive: ")
    flat = " ".join(title.split())  # the title is wrapped
    assert "corrected t p = " in flat and "Holm" in flat
    assert "lower in" not in first and "descriptive only: composition lower in" in title
    verdict = cmp.paired.iloc[0]
    assert f"p = {verdict['p']:.2g}"[:8] in title.replace("\n", " ")


def _figures_with_legends(cmp, design):
    yield "heldout_ecdf", cmp.plot_heldout()
    yield "heldout_ecdf, runaway split", figures.heldout_ecdf(_cmp())
    yield "paired", cmp.plot_paired("composition", "additive")
    yield "paired, off-chart split", figures.paired_scatter(_cmp(), "a", "b")
    yield "observed_vs_predicted", cmp.plot_fit("composition")
    yield "residuals", cmp.plot_residuals("H")
    yield "curves", cmp.plot_curves("composition", "omega")
    yield "design", design_figure(design)


def test_legends_sit_in_free_space(cmp, design):
    """Legends covered curves (heldout_ecdf), off-chart points and candidate points."""
    for name, ax in _figures_with_legends(cmp, design):
        assert ax.get_legend() is not None, name
        assert figures.legend_overlap(ax) == 0, name
        assert _inside(ax, ax.get_legend()), name


def test_the_design_figure_keeps_its_labels_inside(design):
    """The chosen cell at the top of the plane had its label clipped."""
    ax = design_figure(design)
    assert len(ax.texts) >= 2
    for t in [*ax.texts, ax.title]:
        assert _inside(ax, t), t.get_text()
        box = ax.get_window_extent()
        e = t.get_window_extent()
        if t is not ax.title:
            assert box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1, t.get_text()


def test_observed_vs_predicted_shows_residuals_at_their_scale(cmp):
    """On a 2 to 3.4 range, 0.5% residuals were squeezed into a line."""
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
    """x axes (N, D, H) never carried units."""
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
    from fitrules.base.errors import GridError

    with pytest.raises(GridError, match="has no column 'Q'"):
        load_grid(composition_grid(), units="Q=steps")
    with pytest.raises(GridError, match="expected NAME=UNIT pairs"):
        load_grid(composition_grid(), units="H")


def test_vector_figures_beside_every_png(tmp_path, capsys):
    out = tmp_path / "r"
    code, _, err = run(["compare", "--splits", 10, "--forms", "composition,additive",
                        "--report", out, "--figure-format", "png,svg", "-q"], capsys)  # fmt: skip
    assert code == 0, err
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").exists() for p in pngs)
    svg = pngs[0].with_suffix(".svg").read_text()
    assert "<svg" in svg and "<dc:date>" not in svg  # no date: remade byte for byte
    refused(
        ["compare", "--splits", 10, "--report", tmp_path / "x", "--figure-format", "png,tiff"],
        capsys,
        tmp_path,
        "figure format 'png,tiff': expected one or more of png, svg, pdf",
    )


def test_one_forms_small_residuals_do_not_push_a_rivals_off_the_chart():
    """On the four-factor sheet, a form that misses width had all 24 residuals off the chart:
    the range came from the pooled quartiles, set by the good form's near-zero residuals."""
    cells = load_grid(composition_grid()).cells(["H", "omega"])
    good = (Form("good", "L0 + a*omega*(H/16)**b", ("H", "omega")), TRUTH)
    flat = (Form("flat", "L0 + a*omega", ("omega",)), {"L0": 2.2, "a": 0.02})
    ax = figures.residuals_vs(cells, [good, flat], "omega")
    assert not [t for t in ax.texts if "off the chart" in t.get_text()]


def test_tuning_curves_with_many_configurations_keep_their_axes():
    """36 configurations gave a legend so tall that the axes shrank to a strip."""
    from fitrules.jobs.tune import tune
    from tools.contact import four_factor_table

    ax = tune(load_grid(four_factor_table()), "lr").plot_curves()
    ax.figure.draw_without_rendering()
    assert ax.get_position().height > 0.5 and ax.get_position().width > 0.5
    assert any("36 configurations" in t.get_text() for t in ax.texts)
