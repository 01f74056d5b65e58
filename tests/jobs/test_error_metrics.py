"""Held-out error metrics carry their name and unit as data (issue 45, item 3)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fitrules as fr
from fitrules.base.error_metrics import ERROR_METRICS, ErrorMetric, error_metric
from fitrules.base.errors import FitrulesError
from fitrules.model.compiled import predict

FORMS = ["composition", "omega_only"]


@pytest.fixture(scope="module")
def by_metric():
    """The default grid compared twice on the same splits: in relative and absolute error."""
    return {m: fr.compare(forms=FORMS, splits=12, error_metric=m) for m in ("relative", "absolute")}


def test_the_result_records_its_metric_and_the_grids_unit(by_metric):
    """The result and its JSON hold the metric's name, unit and quantity, not a column suffix."""
    rel, ab = by_metric["relative"], by_metric["absolute"]
    assert rel.error_metric == {"name": "relative", "unit": "%", "quantity": "|relative error|"}
    assert ab.error_metric == {"name": "absolute", "unit": "nats", "quantity": "|error|"}
    assert ab.to_dict()["error_metric"]["unit"] == "nats"
    assert ab.settings["error_metric"] == "absolute"
    assert not [c for c in ab.summary.columns if c.endswith("_pct")]


def test_an_absolute_error_is_the_weighted_mean_of_the_cells_misses(by_metric):
    """Each split's absolute error is the box-weighted mean |prediction - value| of its cells."""
    from fitrules.engine.metrics import box_weights

    c = by_metric["absolute"]
    row = c.results[c.results["used"]].iloc[0]
    form = c.form(row["form"])
    test = np.ones(len(c.cells), bool)
    test[row["train_cells"]] = False
    X = {v: np.asarray(a) for v, a in c.cells.X.items()}
    pred = predict(form, {v: a[test] for v, a in X.items()}, row["constants"])
    w = box_weights(X)[test]
    want = np.sum(w * np.abs(pred - c.cells.y[test])) / np.sum(w)
    assert row["heldout_error"] == pytest.approx(want, rel=1e-12)


def test_both_metrics_fit_the_same_splits_and_differ_only_in_scoring(by_metric):
    """The metric changes the scores, not the fits: the same constants on every split."""
    rel, ab = by_metric["relative"].results, by_metric["absolute"].results
    assert rel["train_objective"].tolist() == ab["train_objective"].tolist()
    assert not np.allclose(rel["heldout_error"], ab["heldout_error"])


@pytest.mark.slow  # every view of every metric, 8 s of CPU (a loaded machine): CI's slow step runs it
def test_the_views_write_the_metrics_unit(by_metric, tmp_path):
    """Text, HTML and the report say nats where the errors are in nats, and % where in %."""
    ab, rel = by_metric["absolute"], by_metric["relative"]
    text = str(ab)
    assert "median nats" in text and "median %" not in text
    assert "mean |error| over held-out cells" in text
    assert "median %" in str(rel)
    assert "|error|" in ab._repr_html_()
    md = ab.report(tmp_path / "r").joinpath("report.md").read_text()
    assert "| median nats |" in md and "in nats" in md


def test_an_unknown_metric_is_refused_with_the_allowed_names():
    """A name the registry lacks, or a value that is not a name, is refused by name."""
    for bad in ("percent", 5, None, ["relative"]):
        with pytest.raises(FitrulesError, match="error_metric .* allowed: relative, absolute"):
            error_metric(bad)


def test_a_metric_object_of_ones_own_is_taken_as_it_is():
    """An ErrorMetric made by the caller scores a comparison without touching the package."""
    squared = ErrorMetric("squared", "nats^2", "squared error", lambda v, r: r * r)
    c = fr.compare(forms=["composition"], splits=6, error_metric=squared)
    assert c.error_metric["unit"] == "nats^2"
    assert "median nats^2" in str(c)


NEW_METRIC = """
ERROR_METRICS["squared"] = ErrorMetric("squared", "loss^2", "squared error", lambda v, r: r * r)
"""


def test_a_new_metric_is_one_entry_in_one_file(tmp_path):
    """Adding a non-percentage metric in a copy of the package changes one file, and compare
    then offers it on both faces, scores in it and prints its unit."""
    src = Path(fr.__file__).parent
    copy = tmp_path / "pkg" / "fitrules"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "base" / "error_metrics.py").open("a") as fh:
        fh.write(NEW_METRIC)
    changed = _changed_files(src, copy)
    assert changed == ["base/error_metrics.py"]
    root = src.parent
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "FITRULES_DATA": str(root / "data")}
    out = tmp_path / "out.json"
    argv = [sys.executable, "-m", "fitrules", "compare", "--forms", "composition",
            "--splits", "6", "--error-metric", "squared", "--json", str(out)]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "median loss^2" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["error_metric"] == {"name": "squared", "unit": "loss^2", "quantity": "squared error"}
    squares = {r["split"]: r["heldout_error"] for r in doc["results"] if r["used"]}
    absolute = fr.compare(forms=["composition"], splits=6, error_metric="absolute").results
    misses = dict(zip(absolute["split"], absolute["heldout_error"], strict=True))
    assert squares
    # a (weighted) mean of squares is at least the square of the mean
    assert all(e >= misses[s] ** 2 * (1 - 1e-9) for s, e in squares.items())
    helped = subprocess.run([*argv[:4], "--help"], cwd=tmp_path, env=env, capture_output=True,
                            text=True)  # fmt: skip
    assert "squared: squared error, in loss^2" in " ".join(helped.stdout.split())


def _changed_files(a: Path, b: Path) -> list[str]:
    """The files that differ between two package trees, relative to their roots."""
    out = []
    for path in sorted(b.rglob("*.py")):
        rel = path.relative_to(b)
        if not (a / rel).exists() or not filecmp.cmp(a / rel, path, shallow=False):
            out.append(rel.as_posix())
    return out


def test_every_registered_metric_has_a_unit_and_a_quantity():
    """Each metric of the registry says what it averages and in what unit (None: the grid's)."""
    for name, m in ERROR_METRICS.items():
        assert m.name == name and m.quantity
        assert m.unit is None or isinstance(m.unit, str)
