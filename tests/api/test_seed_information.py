"""Outside information about seed noise (issue 64, item 3): a seed sd the user gives, and the
seed variance pooled over slices the user names, checked for equal noise."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from conftest import composition_grid
from fitrules.base.errors import FitrulesError

POINT = {"H": 8, "keep": 0.25}


def _shared_seeds(rng_seed: int = 0, seeds: int = 3, sd: float = 0.005) -> pd.DataFrame:
    """composition_grid's runs with one effect per seed id shared by every cell."""
    t = composition_grid(noise=0.002, seeds=seeds, rng_seed=rng_seed)
    u = sd * np.random.default_rng(rng_seed + 100).standard_normal(seeds)
    return t.assign(loss=t["loss"] * (1 + u[t["seed"].to_numpy()]))


def _slices(tmp_path, scale: float = 1.0) -> fr.Grid:
    """Two slices of the same design in one file (the second's noise ``scale`` times the
    first's), read at slice 0."""
    a = _shared_seeds(0)
    b = _shared_seeds(1)
    b = b.assign(loss=b["loss"].mean() + (b["loss"] - b["loss"].mean()) * 1.0)
    if scale != 1.0:
        b = _shared_seeds(1, sd=0.005 * scale)
        b = b.assign(loss=b["loss"] + 0.002 * (scale - 1) * np.random.default_rng(5)
                     .standard_normal(len(b)))  # fmt: skip
    path = tmp_path / "slices.csv"
    pd.concat([a.assign(slice=0), b.assign(slice=1)]).to_csv(path, index=False)
    return fr.load_grid(path, where="slice == 0")


def _width(p) -> float:
    lo, hi = p["interval"]
    return hi - lo


def test_a_given_seed_sd_replaces_the_few_ids_estimate():
    """With 3 seed ids the seed offset's t quantile is 4.3; a seed sd given is taken as known
    (a normal quantile): the interval over new seed ids changes, the one at the grid's seed
    ids barely, and the text says where the sd came from."""
    g = fr.load_grid("g.csv", frame=_shared_seeds())
    alone = fr.fit(g, "composition", intervals=True, resamples=20).predict(POINT)
    given = fr.fit(g, "composition", intervals=True, resamples=20, seed_sd=0.005).predict(POINT)
    assert _width(given) < _width(alone)
    assert given["few_seed_ids"] is None and alone["few_seed_ids"] is not None
    f = fr.fit(g, "composition", seed_sd=0.005)
    assert "as the user gave it" in f.prediction_heldout.describe()
    assert f.predict(POINT)["interval"] == pytest.approx(given["interval"])


def test_a_given_seed_sd_gives_one_id_grids_an_interval_over_new_ids():
    """One seed id in every cell: no interval covers new seed ids (issue 42); with the seed
    sd given from outside, one does, wider than the one at the grid's seed id."""
    g = fr.load_grid("g.csv", frame=_shared_seeds(seeds=1))
    bare = fr.fit(g, "composition").predict(POINT)
    assert bare["interval"] is None
    p = fr.fit(g, "composition", seed_sd=0.005).predict(POINT)
    lo, hi = p["interval"]
    glo, ghi = p["interval_grid_seeds"]
    assert lo < glo and hi > ghi


def test_a_seed_sd_needs_a_seed_effect_shared_across_cells():
    """A seed sd given for a grid without seed ids shared across cells is refused: there is
    no seed effect for it to stand for."""
    g = fr.load_grid("g.csv", frame=_shared_seeds().drop(columns="seed"))
    with pytest.raises(FitrulesError, match="no seed effect for it to stand for"):
        fr.fit(g, "composition", seed_sd=0.005)


@pytest.mark.parametrize("bad", [0, -0.01, float("nan"), "0.005"])
def test_a_seed_sd_must_be_a_positive_number(bad):
    """Zero, negative, NaN and text seed sds are refused naming seed_sd."""
    with pytest.raises(FitrulesError, match="seed_sd"):
        fr.fit(composition_grid(), "composition", seed_sd=bad)


def test_slices_alike_are_pooled_and_a_saved_fit_keeps_it(tmp_path):
    """Two slices of the same design and noise: the seed variance is pooled (2 + 2 degrees of
    freedom), the interval over new seed ids narrows, and a saved fit records the option."""
    g = _slices(tmp_path)
    alone = fr.fit(g, "composition", intervals=True, resamples=20)
    pooled = fr.fit(g, "composition", intervals=True, resamples=20, seed_pool="slice == 1")
    assert pooled.seed_offset.df == 4 and alone.seed_offset.df == 2
    assert _width(pooled.predict(POINT)) < _width(alone.predict(POINT))
    assert "pooled with the slices named" in pooled.heldout.describe()
    doc = json.loads(pooled.to_json())
    assert doc["call"]["seed_pool"] == ["slice == 1"]
    again = fr.load_fit(pooled.to_json(), data=g)
    assert again.predict(POINT)["interval"] == pytest.approx(pooled.predict(POINT)["interval"])


def test_slices_whose_seed_noise_differs_are_refused(tmp_path):
    """data/main.csv's two learning-rate slices have per-run sds about 3x apart: pooling them
    is refused in words, as is a slice 4x noisier than the grid."""
    g = fr.load_example("main", where="lr == 3e-4")
    with pytest.raises(FitrulesError, match=r"seed_pool 'lr == 1e-3': its per-run seed "
                       r"variance is [\d.]+ times this grid's"):  # fmt: skip
        fr.fit(g, "composition", seed_pool="lr == 1e-3")
    with pytest.raises(FitrulesError, match="cannot be pooled"):
        fr.fit(_slices(tmp_path, scale=4.0), "composition", seed_pool="slice == 1")


def test_a_pool_needs_the_grid_in_a_file():
    """Pooling reads the other slices from the grid's file; a table in memory is refused in
    words."""
    g = fr.load_grid("g.csv", frame=_shared_seeds())
    with pytest.raises(FitrulesError, match="a table in memory"):
        fr.fit(g, "composition", seed_pool="slice == 1")


def test_the_command_line_takes_both(tmp_path, capsys):
    """--seed-sd and --seed-pool reach fit's text on the command line."""
    from fitrules.cli import main

    g = _slices(tmp_path)
    code = main(["fit", "--data", str(g.source), "--where", "slice == 0", "--form",
                 "composition", "--predict", "H=8,keep=0.25", "--resamples", "20",
                 "--seed-pool", "slice == 1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "pooled with the slices named" in out
    code = main(["fit", "--data", str(g.source), "--where", "slice == 0", "--form",
                 "composition", "--predict", "H=8,keep=0.25", "--resamples", "20",
                 "--seed-sd", "0.005"])  # fmt: skip
    assert code == 0 and "as the user gave it" in capsys.readouterr().out


@pytest.mark.parametrize("options", [{"seed_sd": 0.005}, {"seed_pool": "slice == 1"}])
def test_every_prediction_route_takes_the_seed_options_alike(tmp_path, options):
    """fr.predict, with and without a ledger, gives the interval fr.fit(...).predict gives
    with the same seed option (one code path), and the ledger records the option."""
    g = _slices(tmp_path)
    fitted = fr.fit(g, "composition", resamples=20, **options).predict(POINT)
    plain = fr.fit(g, "composition", resamples=20).predict(POINT)
    assert fitted["interval"] != pytest.approx(plain["interval"])  # the option matters here
    bare = fr.predict(g, "composition", POINT, resamples=20, **options)
    assert bare["interval"] == pytest.approx(fitted["interval"])
    entry = fr.predict(g, "composition", POINT, resamples=20, ledger=tmp_path / "l.jsonl",
                       **options)  # fmt: skip
    assert entry.record["interval"] == pytest.approx(fitted["interval"])
    (name, value), = options.items()
    assert entry.record[name] == (value if name == "seed_sd" else [value])


def test_a_seed_option_beside_a_saved_fit_is_refused(tmp_path):
    """A saved fit records its own seed options: one given beside it would be ignored, so
    fr.predict refuses it in words naming the flag."""
    g = _slices(tmp_path)
    path = tmp_path / "fit.json"
    fr.fit(g, "composition").to_json(path)
    with pytest.raises(FitrulesError, match="seed.sd would be ignored"):
        fr.predict(g, None, POINT, saved_fit=path, seed_sd=0.005)


def test_predict_on_the_command_line_takes_the_seed_options(tmp_path, capsys):
    """fitrules predict --seed-sd prints the interval fr.fit(..., seed_sd=...) gives; a bad
    sd is one line naming it, exit 2."""
    from fitrules.cli import main

    g = _slices(tmp_path)
    argv = ["predict", "--data", str(g.source), "--where", "slice == 0", "--form",
            "composition", "--at", "H=8,keep=0.25", "--resamples", "20"]  # fmt: skip
    assert main([*argv, "--seed-sd", "0.005"]) == 0
    out = capsys.readouterr().out
    lo, hi = fr.fit(g, "composition", resamples=20, seed_sd=0.005).predict(POINT)["interval"]
    assert f"{lo:.4f} to {hi:.4f}" in out
    assert main([*argv, "--seed-sd", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed-sd" in err[0]
