import json
import re

import matplotlib.image as mpimg
import pytest

from conftest import ROOT
from fitrules.cli import main

REPORTS = ROOT / "reports"


def _png_ok(path):
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    img = mpimg.imread(path)
    assert img.shape[0] > 200 and img.shape[1] > 200, path
    assert img[..., :3].std() > 0.02, f"{path} looks blank"


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
                "40",
                "--report",
                str(d / "out"),
                "--forms",
                "composition,additive,omega_only",
            ]
        )
        == 0
    )
    return d / "out"


def test_report_has_every_file_and_valid_figures(fresh_report):
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
        _png_ok(png)
    # every figure the markdown links exists
    md = (fresh_report / "report.md").read_text()
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (fresh_report / link).exists()


SUMMARY_KEYS = (
    "median_pct",
    "trimmed_mean_pct",
    "p90_pct",
    "worst_split_pct",
    "worst_cell_pct",
    "noise_floor_pct",
)


def _summary_table(md: str) -> dict[str, list[str]]:
    rows = {}
    section = md.split("## Answer")[1].split("##")[0]  # the ranked table leads the report
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 11 and cells[0] not in ("form",) and not cells[0].startswith("-"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("report", ["fresh", "default", "wide"])
def test_report_numbers_equal_the_json(report, fresh_report):
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


def _same(now, committed) -> bool:
    """Equal, floats to 1e-9 relative, recursively; keys added since the commit are ignored."""
    if isinstance(committed, float) and isinstance(now, float):
        return now == pytest.approx(committed, rel=1e-9)
    if isinstance(committed, dict) and isinstance(now, dict):
        return all(k in now and _same(now[k], v) for k, v in committed.items())
    if isinstance(committed, list) and isinstance(now, list):
        return len(now) == len(committed) and all(map(_same, now, committed))
    return now == committed


def test_committed_default_report_is_reproduced():
    """Regenerating the default comparison gives the committed numbers."""
    from fitrules.engine.fit import Objective
    from fitrules.jobs.compare import compare
    from fitrules.model.forms import select_forms
    from fitrules.model.grids import default_grid, load_grid
    from fitrules.model.splits import RandomSplit

    committed = json.loads((REPORTS / "default" / "results.json").read_text())
    path, where = default_grid()
    s = committed["settings"]
    cmp = compare(
        load_grid(path, where=where),
        # the committed report's forms (the built-in set may have grown since it was made)
        select_forms([f["name"] for f in committed["forms"]]),
        RandomSplit(s["n_splits"], s["train_frac"], s["seed"]),
        Objective(),
    )
    now = cmp.to_dict()
    assert now["data"]["sha256"] == committed["data"]["sha256"]
    # same counts exactly; floats to 1e-9 (another BLAS may change the last digits). Every
    # committed column is reproduced; columns added since may be new (until the reports are
    # remade)
    for key in ("summary", "paired"):
        assert len(now[key]) == len(committed[key])
        for a, b in zip(now[key], committed[key], strict=True):
            assert b.keys() <= a.keys()
            for k in b:
                assert _same(a[k], b[k]), (key, k, a[k], b[k])
    for a, b in zip(now["results"], committed["results"], strict=True):
        assert (a["split"], a["form"], a["degenerate"]) == (b["split"], b["form"], b["degenerate"])
        assert a["train_objective"] == pytest.approx(b["train_objective"], rel=1e-9)
        # a degenerate pair's constants are not identified: its predictions may move along
        # the unidentified direction at equal training objective, so only valid pairs' held-out
        # errors are compared
        if not a["degenerate"]:
            assert a["heldout_error_pct"] == pytest.approx(b["heldout_error_pct"], rel=1e-9)


@pytest.mark.parametrize("name", ["default", "wide", "paired-ci", "fit-composition"])
def test_committed_report_figures_are_valid(name):
    d = REPORTS / name
    assert (d / "report.md").exists()
    pngs = list(d.glob("*.png"))
    assert pngs
    for png in pngs:
        _png_ok(png)


def test_failed_report_leaves_nothing(tmp_path, monkeypatch, synthetic_csv):
    from fitrules.views import figures

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(figures, "save", boom)
    target = tmp_path / "rep"
    with pytest.raises(RuntimeError):
        main(["compare", "--data", str(synthetic_csv), "--splits", "5", "--report", str(target)])
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [synthetic_csv.name]


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_existing_report_needs_force(tmp_path, synthetic_csv, capsys):
    target = tmp_path / "rep"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    assert (
        main(["compare", "--data", str(synthetic_csv), "--splits", "5", "--report", str(target)])
        == 2
    )
    assert "--force" in capsys.readouterr().err
    assert (target / "keep.txt").read_text() == "mine"
    assert (
        main(
            [
                "compare",
                "--data",
                str(synthetic_csv),
                "--splits",
                "5",
                "--report",
                str(target),
                "--force",
            ]
        )
        == 0
    )
    assert not (target / "keep.txt").exists() and (target / "report.md").exists()


def test_committed_chinchilla_report_has_errors_correlations_intervals_and_residuals():
    """Made by `python -m tools.rebuild chinchilla` from the real runs."""
    d = REPORTS / "chinchilla"
    doc = json.loads((d / "results.json").read_text())
    md = (d / "report.md").read_text()
    assert {"residuals_vs_N.png", "residuals_vs_D.png"} <= {p.name for p in d.iterdir()}
    for png in d.glob("*.png"):
        _png_ok(png)
    se = doc["uncertainty"]["stderr"]
    assert set(se) == {"E", "A", "alpha", "B", "beta"} and all(v > 0 for v in se.values())
    assert doc["uncertainty"]["correlation"]["B"]["beta"] > 0.99
    assert "standard error (Jacobian)" in md and "Correlations of the constants" in md
    iv = doc["bootstrap"]["constants"]
    # the default bootstrap since issue 19: residuals resampled, each refit studentized
    assert doc["bootstrap"]["kind"] == "studentized"
    assert all(hi > lo for lo, hi in iv.values()), iv  # no zero-width interval
    assert "cells" not in doc  # the external runs are not copied into the project


def test_rebuild_skips_a_report_whose_data_is_absent(monkeypatch, capsys):
    from tools import rebuild

    monkeypatch.setitem(rebuild.NEEDS, "chinchilla", "../no/such/file.csv")
    monkeypatch.chdir(ROOT)  # rebuild changes to the project root; restored afterwards
    assert rebuild.rebuild(["chinchilla"]) == 0
    assert "skipping chinchilla" in capsys.readouterr().err
