"""Report directories: every file and valid figures, numbers equal to the JSON, no date,
units, set-aside splits, vector figures."""

from __future__ import annotations

import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from conftest import DATA, ROOT, composition_grid
from fitrules.cli import main
from helpers import png_ok, refused, run


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


SPLITS = ["--splits", "5"]


REPORTS = ROOT / "reports"


@pytest.fixture(scope="module")
def fresh_report(tmp_path_factory):
    """A report made now on a small synthetic grid."""
    from conftest import composition_grid

    d = tmp_path_factory.mktemp("rep")
    csv = d / "g.csv"
    composition_grid().to_csv(csv, index=False)
    assert (
        main(
            [
                "compare",
                "--data",
                str(csv),
                "--splits",
                "10",
                "--report",
                str(d / "out"),
                "--forms",
                "composition,additive,omega_only",
            ]
        )
        == 0
    )
    return d / "out"


SUMMARY_KEYS = (
    "common_median",
    "median",
    "trimmed_mean",
    "p90",
    "worst_split",
    "worst_cell",
    "noise_floor",
)


def _summary_table(md: str) -> dict[str, list[str]]:
    rows = {}
    section = md.split("## Answer")[1].split("##")[0]  # the ranked table leads the report
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 12 and cells[0] not in ("form",) and not cells[0].startswith("-"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_vector_figures_beside_every_png(tmp_path, capsys):
    """--figure-format png,svg writes an undated SVG beside each PNG; tiff is refused."""
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


@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_a_report_where_two_forms_tie_in_every_split(grid_csv, tmp_path, capsys):
    """Two forms that tie in every split get "no interval" for their ratio in the report."""
    code, out, err = run(
        ["compare", "--data", grid_csv, "--splits", "2", "--forms", "composition",
         "--form", "twin = L0 + a*omega*(H/16)**b", "--report", tmp_path / "R"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert (
        "no interval (the ratio is the same in every split)"
        in (tmp_path / "R" / "report.md").read_text()
    )


def test_a_report_with_no_usable_split_draws_no_empty_legend(grid_csv, tmp_path, capsys):
    """A report with no usable split is written with no warning (no empty legend)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = run(
            ["compare", "--data", grid_csv, *SPLITS, "--forms", "composition",
             "--train-frac", "0.15", "--report", tmp_path / "R"],
            capsys,
        )  # fmt: skip
    assert code == 0 and err == "", err
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []


def test_a_report_whose_fit_on_all_cells_failed(grid_csv, tmp_path, capsys, monkeypatch):
    """The report's table of constants fitted on all cells says n/a for a failed fit."""
    from fitrules.engine.fit import FitResult
    from fitrules.jobs.compare import scoring as cmp  # where compare looks the full fit up

    real = cmp.fit

    def full_fit_fails(form, X, y, *a, **k):  # the fit on every cell
        out = real(form, X, y, *a, **k)
        nan = {c: float("nan") for c in out.constants}
        return FitResult(form.name, nan, float("inf"), len(y), False, np.inf, ["no fit"])

    monkeypatch.setattr(cmp, "fit", full_fit_fails)
    argv = ["compare", "--data", grid_csv, *SPLITS, "--forms", "composition"]
    code, _, err = run([*argv, "--report", tmp_path / "R"], capsys)
    assert code == 0, err
    assert (
        "| composition | L0 = n/a, a = n/a, b = n/a |" in (tmp_path / "R" / "report.md").read_text()
    )


def test_report_has_every_file_and_valid_figures(fresh_report):
    """A report has its tables and each figure per form and variable; every linked figure exists."""
    names = {p.name for p in fresh_report.iterdir()}
    assert {"report.md", "results.json", "splits.csv", "heldout_ecdf.png"} <= names
    for form in ("composition", "additive", "omega_only"):
        assert f"observed_vs_predicted_{form}.png" in names
        assert f"residual_map_{form}.png" in names
        # fitted curves against every variable the form reads (omega_only: omega alone)
        assert f"curves_{form}_vs_omega.png" in names
    assert {"curves_composition_vs_H.png", "residuals_vs_H.png", "residuals_vs_omega.png"} <= names
    assert "curves_omega_only_vs_H.png" not in names
    assert "paired_composition_vs_additive.png" in names
    for png in fresh_report.glob("*.png"):
        png_ok(png)
    # every figure the markdown links exists
    md = (fresh_report / "report.md").read_text()
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (fresh_report / link).exists()


@pytest.mark.parametrize("report", ["fresh", "default", "wide"])
def test_report_numbers_equal_the_json(report, fresh_report):
    """The numbers in report.md's tables equal those in its results.json, fresh or committed."""
    d = fresh_report if report == "fresh" else REPORTS / report
    doc = json.loads((d / "results.json").read_text())
    table = _summary_table((d / "report.md").read_text())
    assert set(table) == {r["form"] for r in doc["summary"]}
    for r in doc["summary"]:
        row = table[r["form"]]
        assert int(row[2]) == r["splits_used"] and int(row[3]) == r["degenerate_splits"]
        assert int(row[4]) == r["wild_splits"]
        for cell, key in zip(row[5:], SUMMARY_KEYS, strict=True):
            assert float(cell) == pytest.approx(r[key], rel=1e-3, abs=5e-4)
    md = (d / "report.md").read_text()
    for p in doc["paired"]:
        row = f"| {p['a']} | {p['b']} | {p['verdict']} | {p['n']} | {p['a_better']} | "
        assert row + f"{p['b_better']} |" in md
        assert md.count(f"| {p['a']} | {p['b']} |") == 1  # each verdict once


def test_reports_carry_no_date_and_survive_backticks_in_the_command(tmp_path, capsys):
    """A report carries no date, and a command with backticks is fenced intact in its table."""
    csv = tmp_path / "g.csv"
    composition_grid().drop(columns="omega").rename(columns={"keep": "keep frac"}).to_csv(
        csv, index=False
    )
    rep = tmp_path / "rep"
    derive = "omega = 1/`keep frac` - 1"
    code, _, err = run(["compare", "--data", csv, "--derive", derive, "--splits", 10,
                        "--forms", "composition", "--report", rep], capsys)  # fmt: skip
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert "| date |" not in md
    (row,) = [line for line in md.splitlines() if line.startswith("| command |")]
    assert row.count("``") == 2 and "`keep frac`" in row  # a longer fence around the backticks


def test_units_come_from_the_grid_or_unit_and_are_never_invented(tmp_path, capsys):
    """Units come from the harness's table or --unit; a report on wall_s says s, never nats."""
    from fitrules.model.grids import load_grid

    assert load_grid(DATA / "smoke.csv").unit == "nats"  # written by fitrules simulate
    assert load_grid(DATA / "smoke.csv", metric="wall_s").unit == "s"
    assert load_grid("t.csv", frame=composition_grid()).unit is None
    assert load_grid("t.csv", frame=composition_grid(), unit="bits").unit == "bits"
    rep = tmp_path / "rep"
    code, _, err = run(["fit", "--data", DATA / "smoke.csv", "--metric", "wall_s",
                        "--form", "composition", "--report", rep], capsys)  # fmt: skip
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert "nats" not in md
    # the axis says seconds, the unit of wall_s in a harness table, not nats
    from fitrules import api
    from fitrules.views import figures

    f = api.fit(api.as_grid(DATA / "smoke.csv", metric="wall_s"), "composition")
    ax = f.plot_fit()
    assert ax.get_ylabel() == "observed wall_s (s)"
    figures.plt.close("all")


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_set_aside_section_covers_failed_fits(synthetic_csv, tmp_path, capsys):
    """The report's section of splits set aside lists fits that did not converge."""
    rep = tmp_path / "rep"
    assert run(["compare", "--data", synthetic_csv, "--splits", 10, "--report", rep],
               capsys)[0] == 0  # fmt: skip
    md = (rep / "report.md").read_text()
    assert "## Splits set aside" in md and "the optimiser did not converge" in md
