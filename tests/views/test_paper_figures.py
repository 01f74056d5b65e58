"""Figures a paper can use (issue 44, item 5): log axes at the levels of every positive scale
variable, one-line titles, legends off the data, labels and units from Python."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import ReportError
from fitrules.views import figures

N_LEVELS = (2e7, 4e7, 8e7, 1.6e8, 3.2e8)  # 16 times: the old rule drew them linear
D_LEVELS = (2e9, 4e9, 8e9, 1.6e10, 3.2e10)
CHINCHILLA = fr.Form("chinchilla", "E + A*(N/1e8)**-a + B*(D/1e10)**-b", variables=("N", "D"))
N_ONLY = fr.Form("n_only", "E + A*(N/1e8)**-a", variables=("N",))


def chinchilla_grid(seed: int = 0) -> pd.DataFrame:
    """Two seeds a cell of E + A*(N/1e8)**-a + B*(D/1e10)**-b with 0.3% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in N_LEVELS:
        for d in D_LEVELS:
            mean = 1.7 + 0.5 * (n / 1e8) ** -0.34 + 0.6 * (d / 1e10) ** -0.28
            for s in range(2):
                rows.append({"N": n, "D": d, "seed": s,
                             "loss": mean * (1 + 0.003 * rng.standard_normal())})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def grid():
    return fr.load_grid(chinchilla_grid(), metric="loss", seed_col="seed")


@pytest.fixture(scope="module")
def cmp(grid):
    return fr.compare(grid, forms=[CHINCHILLA, N_ONLY], splits=30, progress=False)


@pytest.fixture(scope="module")
def fitted(grid):
    return fr.fit(grid, CHINCHILLA, intervals=True)


@pytest.fixture(scope="module")
def search():
    g = fr.load_example("main", where="lr == 3e-4")
    return fr.search(g, max_constants=3, splits=3, inner_splits=2, progress=False, jobs=1)


@pytest.fixture(scope="module")
def every_figure(cmp, fitted, search):
    """(name, axes) of every figure a result draws (tuning's are left out: views/tuning.py
    keeps its own two-line titles), drawn once for the tests that read them."""
    made = [
        ("heldout", cmp.plot_heldout()),
        ("paired", cmp.plot_paired("chinchilla", "n_only")),
        ("fit", cmp.plot_fit("chinchilla")),
    ]
    for x in ("N", "D"):
        made += [
            (f"residuals {x}", cmp.plot_residuals(x)),
            (f"curves {x}", cmp.plot_curves("chinchilla", x)),
            (f"fit curves {x} (interval band)", fitted.plot_curves(x)),
        ]
    full = cmp.full_fits["chinchilla"].constants
    made += [
        ("fit residuals", fitted.plot_residuals("D")),
        ("errors by split", figures.errors_by_split(cmp)),
        ("residual map", figures.residual_map(cmp.cells, cmp.form("chinchilla"), full, "N", "D")),
        ("front", search.plot_front()),
        ("ci", fr.ci().plot()),
        ("design", fr.design(fr.load_example("main", where="lr == 3e-4"),
                             forms=["composition", "additive"], budget=12).plot()),
    ]  # fmt: skip
    yield made
    for _, ax in made:
        plt.close(ax.figure)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _visible_points(ax) -> np.ndarray:
    """Display coordinates of every plotted point (line vertices, scatter and errorbar
    markers, the top corners of bars) that lies inside the axes."""
    pts = []
    for bar in ax.patches:
        if bar.get_visible() and hasattr(bar, "get_bbox") and bar.get_transform() is not None:
            b = bar.get_bbox()  # in data coordinates for ax.bar
            xy = np.array([[b.x0, b.y1], [(b.x0 + b.x1) / 2, b.y1], [b.x1, b.y1]])
            pts.append(ax.transData.transform(xy))
    for line in ax.lines:
        if line.get_visible() and line.get_transform() is ax.transData:
            pts.append(ax.transData.transform(np.asarray(line.get_xydata(), float)))
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), float)
        if coll.get_visible() and len(offsets) and coll.get_offset_transform() is ax.transData:
            pts.append(ax.transData.transform(offsets))
    if not pts:
        return np.empty((0, 2))
    p = np.concatenate(pts)
    p = p[np.isfinite(p).all(1)]
    box = ax.get_window_extent()
    inside = (p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)
    return p[inside]


def test_n_and_d_get_log_axes_ticked_at_their_levels(cmp, fitted):
    """N and D (16 times from end to end) are drawn on log axes ticked at each level, labelled
    2e7 rather than with a 1e8 offset; the other variable's legend reads "D = 2e9"."""
    expected = {"N": ["2e7", "4e7", "8e7", "1.6e8", "3.2e8"],
                "D": ["2e9", "4e9", "8e9", "1.6e10", "3.2e10"]}  # fmt: skip
    for x, levels in (("N", N_LEVELS), ("D", D_LEVELS)):
        text = expected[x]
        other = "D" if x == "N" else "N"
        curves = cmp.plot_curves("chinchilla", x)
        for ax in (curves, cmp.plot_residuals(x), fitted.plot_curves(x)):
            ax.figure.draw_without_rendering()  # the tick labels are set at a draw
            assert ax.get_xscale() == "log", x
            assert list(ax.get_xticks()) == list(levels), x
            assert [t.get_text() for t in ax.get_xticklabels()] == text, x
            assert ax.xaxis.get_offset_text().get_text() == "", x
        legend = [t.get_text() for t in curves.get_legend().get_texts()]
        first = N_LEVELS[0] if other == "N" else D_LEVELS[0]
        assert f"{other} = {figures.level_text(first)}" in legend, legend


@pytest.mark.slow  # every paper figure drawn, a search among them: 20 s of CPU
def test_every_title_is_one_line_of_at_most_60_characters(every_figure):
    """No figure's title wraps or runs long: the verdict and the keys went elsewhere."""
    assert len(every_figure) == 15
    for name, ax in every_figure:
        title = ax.get_title()
        assert title and "\n" not in title and len(title) <= 60, (name, title)


@pytest.mark.slow  # every paper figure drawn, a search among them: 20 s of CPU
def test_no_legend_covers_a_plotted_point(every_figure):
    """After a draw (the layout of one, without rendering pixels), no plotted point inside the
    axes lies within the legend's box."""
    assert len(every_figure) == 15
    for name, ax in every_figure:
        legend = ax.get_legend()
        if legend is None:
            continue
        ax.figure.draw_without_rendering()
        box = legend.get_window_extent()
        p = _visible_points(ax)
        assert len(p), name
        under = (p[:, 0] > box.x0) & (p[:, 0] < box.x1) & (p[:, 1] > box.y0) & (p[:, 1] < box.y1)
        assert not under.any(), (name, p[under][:3])


def test_captions_and_legends_stay_inside_the_figure(cmp):
    """The paired verdict under the axes and a legend moved below them are both drawn
    within the figure, the caption below the legend."""
    ax = cmp.plot_paired("chinchilla", "n_only")
    ax.figure.canvas.draw()
    page = ax.figure.bbox
    (note,) = figures.captions(ax)
    for artist in (note, ax.get_legend()):
        e = artist.get_window_extent()
        assert page.x0 - 1 <= e.x0 and e.x1 <= page.x1 + 1 and page.y0 - 1 <= e.y0, artist
    legend = ax.get_legend().get_window_extent()
    if legend.y1 < ax.get_window_extent().y0:  # the legend went below the axes
        assert note.get_window_extent().y1 <= legend.y0 + 1


def test_labels_and_units_from_python_name_the_axes_and_legends(cmp, fitted):
    """labels= and units= of plot_* name columns and give them units on the axes and in
    the legend, and only for that figure."""
    names = {"N": "parameters", "D": "training tokens"}
    ax = cmp.plot_curves("chinchilla", "N", labels=names, units={"loss": "nats"})
    assert ax.get_xlabel() == "parameters"
    assert ax.get_ylabel().startswith("loss (nats)")
    assert "training tokens = 2e9" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = fitted.plot_residuals("D", labels="D=tokens seen", units="D=tokens")
    assert ax.get_xlabel() == "tokens seen (tokens)"
    ax = cmp.plot_fit("chinchilla", units={"loss": "nats"})
    assert ax.get_ylabel() == "observed loss (nats)"
    assert cmp.plot_residuals("N").get_xlabel() == "N"  # nothing left in force


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [({"labels": 5}, "labels"), ({"labels": "N"}, "labels"), ({"units": {"N": 3}}, "units"),
     ({"units": "N=,D=tokens"}, "units")],  # fmt: skip
)
def test_bad_labels_or_units_are_refused_in_one_line_naming_them(cmp, kwargs, word):
    """A label or unit mapping that is not COLUMN=TEXT pairs is a ReportError naming it."""
    with pytest.raises(ReportError, match=word) as info:
        cmp.plot_curves("chinchilla", "N", **kwargs)
    assert "\n" not in str(info.value)


def test_scale_variables_are_told_from_others():
    """Geometric levels (N, H, keep, lr) get a log axis; levels including zero, evenly spaced
    ones and a narrow span do not."""
    assert figures.scale_log([2e7, 6e7, 2e8, 6e8])
    assert figures.scale_log([0.25, 0.5, 1.0])
    assert figures.scale_log([1e-4, 3e-4, 1e-3])
    assert not figures.scale_log([0, 1, 3])
    assert not figures.scale_log([1, 2, 3, 4, 5])
    assert not figures.scale_log([1.0, 1.5, 2.0])


@pytest.mark.parametrize(
    ("value", "text"),
    [(2e7, "2e7"), (1.5e9, "1.5e9"), (6e10, "6e10"), (3e-4, "3e-4"), (64, "64"), (0.25, "0.25"),
     (0, "0")],  # fmt: skip
)
def test_levels_are_written_as_people_write_them(value, text):
    """Levels read 2e7 and 3e-4, not 2e+07 or 0.0003."""
    assert figures.level_text(value) == text


def test_the_frontier_at_one_budget_marks_each_optimum_with_its_interval():
    """Issue 66: plot_frontier(budgets=one) drew only the runs (a line of one point is
    invisible) although its legend promised N* and D*; now each optimum is a marker with its
    interval, and the legend names the runs' scatter too."""
    from declared import ALLOCATE_LAW, allocate_runs

    a = fr.allocate(allocate_runs(), ALLOCATE_LAW, budgets=1e21)
    ax = a.plot_frontier()
    for v in ("N", "D"):
        (drawn,) = [c for c in ax.containers if c.get_label().startswith(f"{v}* = ")]
        marker = drawn.lines[0]
        assert marker.get_marker() == "o"
        assert list(marker.get_xdata()) == [1e21]
        assert marker.get_ydata()[0] == pytest.approx(a.table[v][0])
        assert "95% interval" in drawn.get_label()
    # the interval's bars: one vertical segment per optimum, from low to high
    bars = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    spans = sorted(tuple(seg[:, 1]) for c in bars for seg in c.get_segments())
    expected = sorted((a.table[f"{v}_low"][0], a.table[f"{v}_high"][0]) for v in ("N", "D"))
    assert spans == [pytest.approx(e) for e in expected]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fitted cells: N against their cost" in labels
    plt.close(ax.figure)


def test_a_label_equal_to_its_unit_is_not_repeated():
    """Issue 66: a column labelled by its own unit read "experts (experts)"; now "experts",
    while a label that differs from its unit keeps it."""
    with figures.axis_labels({"M": "experts"}, {"M": "experts", "N": "parameters"}):
        assert figures.unit_label("M", None) == "experts"
        assert figures.unit_label("N", None) == "N (parameters)"
