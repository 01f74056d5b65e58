"""LaTeX tables of results (fitrules.views.latex): a fit's constants, a comparison's summary
and an allocation, as plain tabulars with their numbers in 4 significant digits."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from fitrules.views.latex import number, tabular

LAW = "chin(N, D) = E + A/N**alpha + B/D**beta"


def _rows(latex: str) -> list[list[str]]:
    """The cells of each line of the tabular's body and head (between its rules)."""
    body = latex.split(r"\begin{tabular}", 1)[1].split(r"\end{tabular}", 1)[0]
    lines = [ln for ln in body.splitlines()[1:] if ln.endswith(r" \\")]
    return [[c.strip() for c in re.split(r"(?<!\\)&", ln[: -len(r" \\")])] for ln in lines]


def _well_formed(latex: str, columns: int) -> list[list[str]]:
    """Assert a tabular of ``columns`` aligned columns, every row as wide; return its rows."""
    (align,) = re.findall(r"\\begin\{tabular\}\{([lr]+)\}", latex)
    assert len(align) == columns
    assert latex.count(r"\hline") == 3 and latex.rstrip().endswith(r"\end{tabular}")
    rows = _rows(latex)
    assert all(len(r) == columns for r in rows), rows
    return rows


@pytest.fixture(scope="module")
def grid():
    return fr.load_example("main", where="lr == 3e-4")


def test_numbers_and_text_are_set_as_latex():
    """Cells: 4 significant digits g-style, powers of ten in math mode, integers whole, NaN
    and None as --, special characters escaped; a header given is used as written."""
    assert [number(v) for v in (2.147725, 0.0097779, 16527360.0, 1e23, 3, np.int64(7))] == [
        "2.148", "0.009778", r"$1.653\times10^{7}$", r"$1\times10^{23}$", "3", "7"]  # fmt: skip
    assert [number(v) for v in (float("nan"), None, "a_b & 5%", "")] == [
        "--", "--", r"a\_b \& 5\%", ""]  # fmt: skip
    t = tabular(pd.DataFrame({"x_1": ["a", "b"], "y": [1.5, 2.25]}), {"y": "$y$"}, ["a note"])
    assert t.startswith("% a note\n")
    assert _well_formed(t, 2) == [[r"x\_1", "$y$"], ["a", "1.5"], ["b", "2.25"]]


def test_a_fits_constants_table_to_latex(grid):
    """A fit's to_latex: one row per constant (value, standard error, and its interval when
    made), the form and the interval method in comments above."""
    f = fr.fit(grid, "composition", intervals=True, resamples=50)
    latex = f.to_latex()
    rows = _well_formed(latex, 5)
    assert rows[0] == ["constant", "value", "standard error", r"95\% low", r"95\% high"]
    assert [r[0] for r in rows[1:]] == list(f.constants)
    assert rows[1][1] == f"{f.constants['L0']:.4g}" and rows[1][2] == f"{f.stderr['L0']:.4g}"
    assert "% form composition = L0 + a*omega*(H/16)**b" in latex
    assert "% 95% intervals: studentized bootstrap" in latex
    plain = fr.fit(grid, "composition").to_latex()  # no intervals: three columns
    assert _well_formed(plain, 3)[0] == ["constant", "value", "standard error"]


def test_a_comparisons_summary_to_latex(grid):
    """A comparison's to_latex: one row per form in the ranking's order, error columns headed
    with the unit, the conclusion in comments; a column it lacks is refused by name."""
    c = fr.compare(grid, forms=["additive", "composition"], splits=20)
    latex = c.to_latex()
    rows = _well_formed(latex, 7)
    assert rows[0][:4] == ["form", "constants", r"splits\_used", r"median (\%)"]
    assert [r[0] for r in rows[1:]] == list(c.ranking["form"])
    best = c.ranking.iloc[0]
    assert rows[1][3] == f"{best['median']:.4g}"
    assert all(f"% {line}" in latex for line in c.conclusion)
    assert _well_formed(c.to_latex(["form", "p90"]), 2)[0] == ["form", r"p90 (\%)"]
    with pytest.raises(fr.FitrulesError, match="'nope'"):
        c.to_latex(["form", "nope"])


def test_an_allocation_to_latex():
    """An allocation's to_latex: one row per budget with each optimum, its interval when
    made, the ratio, the loss and the extrapolation; the text's head in comments."""
    rng = np.random.default_rng(0)
    N, D = (a.ravel() for a in np.meshgrid(np.geomspace(5e7, 5e9, 6), np.geomspace(1e9, 1e11, 6)))
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(0.01 * rng.standard_normal(36))
    runs = pd.DataFrame({"N": N, "D": D, "loss": loss})
    a = fr.allocate(runs, LAW, budgets="1e20,1e23")
    latex = a.to_latex()
    rows = _well_formed(latex, 10)
    assert rows[0] == ["budget $C$", "N*", "N* low", "N* high", "D*", "D* low", "D* high",
                       "D/N", "loss", "extrapolation"]  # fmt: skip
    assert rows[1][0] == r"$1\times10^{20}$" and rows[2][0] == r"$1\times10^{23}$"
    n = a.table["N"].iloc[1]
    mantissa, exponent = f"{n:.4g}".split("e")
    assert rows[2][1] == rf"${mantissa}\times10^{{{int(exponent)}}}$"
    assert rows[2][9] == a.table["extrapolation"].iloc[1] != ""
    assert "% exponents: N* ~ C^" in latex
    bare = fr.allocate(runs, LAW, budgets="1e20", intervals="none").to_latex()
    assert _well_formed(bare, 6)[0] == ["budget $C$", "N*", "D*", "D/N", "loss", "extrapolation"]
