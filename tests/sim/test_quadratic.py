"""The quadratic backend of the harness: specs, runs, agreement with the theory, attackers, and
the same table from local processes and a Dask cluster."""

import json
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest

from fitrules.base.errors import SimError
from fitrules.sim import common, quadratic, runner, theory
from fitrules.sim.quadratic import QuadConfig
from fitrules.sim.runner import simulate
from fitrules.sim.spec import cell_spec, load_spec, parse_spec

SPEC = """
name = "q"
model = "quadratic"
seeds = [0, 1]
[fixed]
dim = 200
M = 8
lr = 0.1
rounds = 300
burn_in = 100
[[block]]
[block.factors]
H = [1, 4]
keep = [1.0, 0.25]
"""


def test_a_quadratic_spec_makes_quadratic_runs():
    """model = quadratic, at the top or in [fixed], makes the spec's 8 runs QuadConfigs."""
    spec = parse_spec(SPEC, "q.toml")
    assert len(spec.runs) == 8 and all(isinstance(r, QuadConfig) for r in spec.runs)
    assert {(r.H, r.keep) for r in spec.runs} == {(1, 1.0), (1, 0.25), (4, 1.0), (4, 0.25)}
    # model in [fixed] is the same thing
    fixed = SPEC.replace('model = "quadratic"\n', "")
    fixed = fixed.replace("[fixed]", '[fixed]\nmodel = "quadratic"')
    assert parse_spec(fixed, "q.toml").runs == spec.runs


@pytest.mark.parametrize(
    "text, match",
    [
        ('model = "cnn"\n', r"model='cnn' is unknown; allowed: mlp, quadratic"),
        ('model = "quadratic"\n[fixed]\nwidth = 4\n', r"unknown factor 'width' in \[fixed\]"),
        ('model = "quadratic"\n[[block]]\n[block.factors]\nmodel = ["mlp"]\n',
         "a spec runs one model, named once"),
        ('model = "quadratic"\n[fixed]\nmodel = "mlp"\n', "model is 'quadratic' at the top"),
        ('model = "quadratic"\n[fixed]\nlr = 0.0\n', "lr=0.0 must be > 0"),
        ('model = "quadratic"\n[fixed]\ndim = 0\n', "dim=0 must be from 1"),
        ('model = "quadratic"\n[fixed]\nburn_in = 1000\n', "burn_in=1000 must be from 0"),
        ('model = "quadratic"\n[fixed]\nattackers = 17\n', "attackers=17 must be from 0 to M"),
        ('model = "quadratic"\n[fixed]\nspectrum = "flat"\n', "spectrum='flat' is unknown"),
        ('model = "quadratic"\n[fixed]\ninner = "aggregate"\naggregator = "median"\n',
         "inner='aggregate' needs aggregator='mean'"),
        ('model = "quadratic"\n[fixed]\nrounds = 10000000\ndim = 10000000\n',
         "coordinate updates would take about .* h on one core, more than the 1 h"),
        ('model = "quadratic"\n[fixed]\ncondition = 0.5\n', "condition=0.5 must be from 1"),
        ('model = "quadratic"\n[fixed]\nnesterov = "yes"\n', "nesterov='yes' must be of type bool"),
    ],
)  # fmt: skip
def test_bad_quadratic_specs_are_named(text, match):
    """parse_spec refuses each bad quadratic setting, naming it and what is allowed."""
    with pytest.raises(SimError, match=match):
        parse_spec(text, "q.toml")


def test_cell_names_the_model():
    """cell_spec takes model=quadratic, refuses an unknown or clashing model; the default is MLP."""
    spec = cell_spec("model=quadratic,H=4,dim=50")
    assert isinstance(spec.runs[0], QuadConfig) and spec.runs[0].H == 4
    assert spec.name == "cell:model=quadratic,H=4,dim=50"
    assert isinstance(cell_spec("model=quadratic").runs[0], QuadConfig)
    # on top of a quadratic spec, the model is the spec's
    base = parse_spec(SPEC, "q.toml")
    assert cell_spec("H=2", base).runs[0] == replace(base.runs[0], H=2, keep=1.0, seed=0)
    with pytest.raises(SimError, match="the spec given runs another model"):
        cell_spec("model=mlp,H=2", base)
    with pytest.raises(SimError, match="model='x' is unknown"):
        cell_spec("model=x,H=2")
    # the MLP's cells are as before
    assert type(cell_spec("H=2").runs[0]).__name__ == "RunConfig"


def test_simulate_writes_the_table_and_a_rerun_changes_nothing(tmp_path):
    """simulate writes the runs and a manifest; a rerun changes nothing, a resume adds the same."""
    spec = parse_spec(SPEC, "q.toml")
    out = tmp_path / "q.csv"
    table = simulate(spec, out, show_progress=False)
    assert len(table) == 8 and not table["diverged"].any()
    assert {"model", "loss", "loss_final", "omega", "rounds_run"} <= set(table.columns)
    manifest = json.loads((tmp_path / "q.manifest.json").read_text())
    assert manifest["runs"] == 8 and manifest["spec_sha256"] == spec.sha256
    before = out.read_bytes()
    simulate(spec, out, show_progress=False)
    assert out.read_bytes() == before
    # resume: a table missing its last runs gets them back, the same
    pd.read_csv(out).iloc[:5].to_csv(out, index=False)
    (tmp_path / "q.manifest.json").unlink()
    again = simulate(spec, out, show_progress=False)
    pd.testing.assert_frame_equal(
        again.drop(columns="wall_s"), table.drop(columns="wall_s"), check_exact=True
    )


def test_the_same_seed_gives_the_same_run_and_seeds_differ():
    """A quadratic run is the same for the same seed and differs for another seed."""
    cfg = QuadConfig(dim=100, M=4, H=2, keep=0.5, rounds=50, burn_in=10)
    a, b = quadratic.run(cfg), quadratic.run(cfg)
    assert a["loss"] == b["loss"]
    assert quadratic.run(replace(cfg, seed=1))["loss"] != a["loss"]


@pytest.mark.parametrize("inner", ["aggregate", "exact", "steps"])
@pytest.mark.parametrize(
    "settings",
    [
        dict(H=1, keep=0.25, M=8),
        dict(H=4, keep=0.5, M=4, outer_lr=0.7, outer_momentum=0.5),
        dict(H=2, keep=0.25, M=4, masks="shared", spectrum="linear", condition=4.0),
    ],
)
def test_every_way_of_drawing_a_run_meets_the_exact_loss(inner, settings):
    """Each draw of the same process (the mean message at once, each worker's displacement at
    once, every SGD step) against fitrules.sim.theory's expectation of the run's own average."""
    cfg = QuadConfig(dim=500, lr=0.1, rounds=1200, burn_in=200, inner=inner, **settings)
    expected = theory.exact_loss(asdict(cfg), (cfg.burn_in, cfg.rounds))
    assert quadratic.run(cfg)["loss"] / expected == pytest.approx(1.0, abs=0.05)


def test_inner_steps_have_the_exact_law_of_one_draw():
    """The displacement after H SGD steps: mean (a**H - 1) x, variance lr^2 V sum a^(2k)."""
    cfg = QuadConfig(dim=20_000, M=2, H=5, lr=0.2, noise=1.5)
    s = quadratic.curvatures("constant", cfg.dim, 1.0, 1.0)
    x = np.full(cfg.dim, 2.0)
    rng = np.random.default_rng(0)
    d = quadratic._inner_steps(x, s, cfg, rng)
    a = 1 - 0.2
    assert d.mean() == pytest.approx((a**5 - 1) * 2.0, abs=0.01)
    var = 0.2**2 * 1.5 * sum(a ** (2 * k) for k in range(5))
    assert d.var() == pytest.approx(var, rel=0.03)


def test_a_step_beyond_the_limit_diverges_and_is_recorded():
    """lr=2.5 on unit curvature diverges: the run stops early with diverged set and loss NaN."""
    cfg = QuadConfig(dim=50, M=1, lr=2.5, rounds=2000, burn_in=0, init=1.0)
    row = quadratic.run(cfg)
    assert row["diverged"] and np.isnan(row["loss"]) and row["rounds_run"] < 2000


def test_the_median_holds_below_half_attackers_and_breaks_at_half():
    """The median holds against 3 of 8 sign-flip attackers and diverges at 4; trimmed at 3."""
    base = QuadConfig(dim=200, M=8, H=2, lr=0.1, rounds=400, burn_in=100, aggregator="median",
                      attack="signflip", attack_scale=10.0, attack_mode="coordinated")  # fmt: skip
    held = [quadratic.run(replace(base, attackers=n)) for n in range(4)]
    assert not any(r["diverged"] for r in held)
    assert quadratic.run(replace(base, attackers=4))["diverged"]
    # the trimmed mean (trim 0.25 cuts 2 of 8 each side) breaks earlier
    assert quadratic.run(replace(base, attackers=3, aggregator="trimmed"))["diverged"]
    # independent attackers and plain scaling run too
    row = quadratic.run(replace(base, attackers=2, attack="scale", attack_mode="independent"))
    assert np.isfinite(row["loss"])


def test_topk_runs_with_error_feedback():
    """A top-k compressor at keep 0.1 runs to a finite loss with omega 9."""
    row = quadratic.run(QuadConfig(dim=100, M=4, keep=0.1, compressor="topk", rounds=100,
                                   burn_in=10))  # fmt: skip
    assert np.isfinite(row["loss"]) and row["omega"] == pytest.approx(9.0)


def test_local_cluster_gives_the_local_table(tmp_path, distributed):
    """A quadratic grid on a local:2 Dask cluster gives exactly the table made locally."""
    spec = parse_spec(SPEC, "q.toml")
    here = simulate(spec, tmp_path / "here.csv", show_progress=False)
    there = simulate(spec, tmp_path / "there.csv", scheduler="local:2", show_progress=False)
    pd.testing.assert_frame_equal(
        here.drop(columns="wall_s"), there.drop(columns="wall_s"), check_exact=True
    )
    manifest = json.loads((tmp_path / "there.manifest.json").read_text())
    assert manifest["scheduler"] == "local:2" and sum(manifest["workers"].values()) == 8
    assert runner._row_key(there.iloc[0].to_dict()) == runner.run_key(spec.runs[0])


def test_the_committed_quadratic_grid_is_its_spec():
    """data/quadratic.csv holds its spec's runs in order; its first run remade has the same loss."""
    from conftest import DATA

    spec = load_spec(DATA / "specs" / "quadratic.toml")
    table = pd.read_csv(DATA / "quadratic.csv")
    assert [runner._row_key(r) for r in table.to_dict("records")] == [
        runner.run_key(c) for c in spec.runs
    ]
    # one run remade here gives the committed loss
    row = quadratic.run(spec.runs[0])
    assert row["loss"] == pytest.approx(table["loss"].iloc[0], rel=1e-9)


@pytest.mark.parametrize("M", [15, 16])
def test_the_median_from_the_sort_is_numpys_median(M):
    """The aggregator sorts once for the median and the trimmed mean (faster than np.median);
    the values must be np.median's, bit for bit, so committed grids stay reproducible."""
    c = np.random.default_rng(M).standard_normal((M, 300))
    got = common.aggregate(c, QuadConfig(M=M, aggregator="median"))
    np.testing.assert_array_equal(got, np.median(c, axis=0))
