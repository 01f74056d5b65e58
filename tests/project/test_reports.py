"""The committed reports: reproduced from their commands, figures valid, and the rebuild tool
that makes them."""

import json

import pytest

from conftest import ROOT
from helpers import png_ok
from tools.golden import REL

REPORTS = ROOT / "reports"


def _same(now, committed) -> bool:
    """Equal, floats to the golden files' ``REL`` (what a fit's stop rule leaves of its
    constants and what derives from them), recursively; keys added since the commit are
    ignored."""
    if isinstance(committed, float) and isinstance(now, float):
        return now == pytest.approx(committed, rel=REL)
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
    # same counts exactly; training objectives to 1e-9 (the optimiser's promise), the numbers
    # derived from the constants to REL (another BLAS may move them within it). Every
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
            assert a["heldout_error"] == pytest.approx(b["heldout_error"], rel=REL)


@pytest.mark.parametrize("name", ["default", "wide", "paired-ci", "fit-composition"])
def test_committed_report_figures_are_valid(name):
    """Each committed report has its report.md and at least one valid PNG."""
    d = REPORTS / name
    assert (d / "report.md").exists()
    pngs = list(d.glob("*.png"))
    assert pngs
    for png in pngs:
        png_ok(png)


def test_committed_chinchilla_report_has_errors_correlations_intervals_and_residuals():
    """Made by `python -m tools.rebuild chinchilla` from the real runs."""
    d = REPORTS / "chinchilla"
    doc = json.loads((d / "results.json").read_text())
    md = (d / "report.md").read_text()
    assert {"residuals_vs_N.png", "residuals_vs_D.png"} <= {p.name for p in d.iterdir()}
    for png in d.glob("*.png"):
        png_ok(png)
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
    """Rebuilding a report whose input data is absent skips it with a message and exits 0."""
    from tools import rebuild

    monkeypatch.setitem(rebuild.NEEDS, "chinchilla", "../no/such/file.csv")
    monkeypatch.chdir(ROOT)  # rebuild changes to the project root; restored afterwards
    assert rebuild.rebuild(["chinchilla"]) == 0
    assert "skipping chinchilla" in capsys.readouterr().err
