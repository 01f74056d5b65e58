"""--tune on the command line: compare, fit, validate and ci reduce the grid honestly."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import DATA, composition_grid
from helpers import run


@pytest.fixture
def lr_grid(tmp_path):
    """The composition grid at three lrs; the best lr is 1e-3 except at H=64 (1e-2: edge)."""
    base = composition_grid(seeds=4)
    rng = np.random.default_rng(7)
    parts = []
    for lr in (1e-4, 1e-3, 1e-2):
        d = base.copy()
        best = np.where(d["H"] == 64, 1e-2, 1e-3)
        d["loss"] += 0.02 * np.log10(lr / best) ** 2 + 0.001 * rng.standard_normal(len(d))
        d["lr"] = lr
        parts.append(d)
    path = tmp_path / "lr.csv"
    pd.concat(parts).to_csv(path, index=False)
    return path


def test_compare_with_tune_reports_choices_and_edges(lr_grid, tmp_path, capsys):
    """compare --tune lr names the choices at the sweep's edge and saves the choices in JSON."""
    out = tmp_path / "c.json"
    code, text, err = run(
        ["compare", "--data", lr_grid, "--tune", "lr", "--splits", 20, "--json", out], capsys
    )
    assert code == 0, err
    assert text.startswith("tuning: lr tuned per configuration")
    (line,) = [ln for ln in text.splitlines() if "best lr is the largest tried (0.01)" in ln]
    assert "H=64" in line and "widen the sweep" in line
    doc = json.loads(out.read_text())
    assert doc["tuning"]["scheme"] == "cross-fit" and doc["tuning"]["choices_at_edge"] >= 5
    assert {r["chosen_lr"] for r in doc["tuning"]["choices"] if r["H"] == 4} == {0.001}


def test_fit_and_validate_take_tune(lr_grid, capsys):
    """fit and validate take --tune; validate names the seeds left for measuring."""
    code, text, err = run(
        ["fit", "--data", lr_grid, "--tune", "lr", "--form", "composition"], capsys
    )
    assert code == 0, err and "tuning:" in text
    code, text, err = run(["validate", lr_grid, "--tune", "lr", "--tune-seeds", "0,1"], capsys)
    assert code == 0, err
    assert "measured on seeds 2, 3" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tune-seeds", "0,1"], "--tune-seeds needs --tune FACTOR"),
        (["--tune", "nope"], "nope"),
        (["--tune", "lr", "--tune-seeds", "a,b"], "expected integers"),
        (["--tune", "lr", "--tune-seeds", "0,1,2,3"], "no evaluation seed"),
    ],
)
def test_bad_tuning_one_line_exit_2(lr_grid, tmp_path, capsys, args, message):
    """--tune-seeds without --tune, an unknown factor, bad or all seeds: one line, exit 2."""
    out = tmp_path / "x.json"
    code, _, err = run(["compare", "--data", lr_grid, "--splits", 5, "--json", out, *args], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_default_ci_tunes_each_arm_on_seeds_not_used_for_the_interval(tmp_path, capsys):
    """The default ci tunes lr per arm on seeds 0-2 and gives the t interval over seeds 3-13."""
    out = tmp_path / "ci.json"
    code, text, err = run(["ci", "--json", out], capsys)
    assert code == 0, err
    doc = json.loads(out.read_text())
    (r,) = doc["results"]
    assert r["seeds"] == list(range(3, 14))
    assert "both arms tuned" in r["sentence"] and "chosen per arm on seeds 0, 1, 2" in r["sentence"]
    # by hand from the CSV: each arm's lr by its mean over seeds 0-2, t interval over 3-13
    runs = pd.read_csv(DATA / "paired_tuned.csv")
    arms = {"sync": runs[runs["algo"] == "sync"], "diloco": runs[runs["algo"] == "diloco"]}
    values = {}
    for name, d in arms.items():
        best = d[d["seed"] <= 2].groupby("lr")["loss"].mean().idxmin()
        values[name] = d[(d["lr"] == best) & (d["seed"] >= 3)].set_index("seed")["loss"]
        assert f"lr {best:g}" in r["sentence"]
    diff = (values["diloco"] - values["sync"]).to_numpy()
    lo, hi = stats.t.interval(0.95, len(diff) - 1, loc=diff.mean(), scale=stats.sem(diff))
    assert r["t_interval"] == pytest.approx([lo, hi], rel=1e-9)
