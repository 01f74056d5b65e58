import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import DATA
from fitrules.base.errors import SimError
from fitrules.cli import main
from fitrules.sim.corpus import load_corpus
from fitrules.sim.diloco import RunConfig, _compress, train, train_single
from fitrules.sim.model import MLPShape, init_params, loss_and_grad
from fitrules.sim.runner import simulate
from fitrules.sim.spec import cell_spec, load_spec, parse_spec


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def test_corpus_is_the_committed_slice(corpus):
    manifest = json.loads((DATA / "main.manifest.json").read_text())
    assert corpus.sha256 == manifest["corpus_sha256"]
    assert corpus.vocab_size == 37 and len(corpus.valid) > 50_000


def test_gradients_match_finite_differences():
    shape = MLPShape(vocab=11, context=3, embed=4, hidden=7)
    rng = np.random.default_rng(0)
    flat = np.stack([init_params(shape, rng) for _ in range(2)]).astype(np.float64)
    flat += 0.1 * rng.standard_normal(flat.shape)
    x = rng.integers(0, 11, size=(2, 5, 3))
    y = rng.integers(0, 11, size=(2, 5))
    _, grad = loss_and_grad(flat, x, y, shape)
    for j in rng.choice(shape.n_params, size=40, replace=False):
        up, down = flat.copy(), flat.copy()
        up[:, j] += 1e-6
        down[:, j] -= 1e-6
        fd = (loss_and_grad(up, x, y, shape)[0] - loss_and_grad(down, x, y, shape)[0]) / 2e-6
        assert grad[:, j] == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_one_worker_every_step_no_momentum_is_plain_training(corpus):
    cfg = RunConfig(
        M=1,
        H=1,
        keep=1.0,
        outer_lr=1.0,
        outer_momentum=0.0,
        nesterov=False,
        width=32,
        steps=40,
        seed=3,
    )
    params, _, diverged = train(cfg, corpus)
    assert not diverged
    np.testing.assert_allclose(params, train_single(cfg, corpus), rtol=0, atol=1e-6)


def test_randk_is_unbiased_with_variance_factor_omega():
    rng = np.random.default_rng(0)
    delta = rng.standard_normal((1, 2000)).astype(np.float32)
    for keep in (0.5, 0.25, 0.0625):
        cfg = RunConfig(keep=keep, compressor="randk")
        draws = np.stack([_compress(delta, cfg, rng, None)[0] for _ in range(4000)])
        mean_err = np.abs(draws.mean(axis=0) - delta[0]).mean() / np.abs(delta).mean()
        assert mean_err < 0.1 * math.sqrt(cfg.omega / 4000 * 100)
        var_factor = ((draws - delta[0]) ** 2).mean() / (delta**2).mean()
        assert var_factor == pytest.approx(cfg.omega, rel=0.03)


def test_topk_error_feedback_sends_everything_eventually():
    rng = np.random.default_rng(0)
    delta = rng.standard_normal((2, 100)).astype(np.float32)
    cfg = RunConfig(keep=0.1, compressor="topk")
    error = np.zeros_like(delta)
    sent = _compress(delta, cfg, rng, error)
    assert (np.count_nonzero(sent, axis=1) == 10).all()
    np.testing.assert_allclose(sent + error, delta, atol=1e-6)


def test_same_seed_same_start_and_batches(corpus):
    a = RunConfig(H=4, keep=0.5, width=16, steps=8, seed=5)
    b = RunConfig(H=8, keep=1.0, width=16, steps=8, seed=5)
    from fitrules.sim.diloco import _batches

    for (xa, ya), (xb, yb) in zip(_batches(corpus, a), _batches(corpus, b), strict=True):
        assert (xa == xb).all() and (ya == yb).all()


def test_smoke_grid_regenerates_to_the_committed_numbers(tmp_path):
    spec = load_spec(DATA / "specs" / "smoke.toml")
    out = tmp_path / "smoke.csv"
    table = simulate(spec, out, jobs=1, show_progress=False)
    committed = pd.read_csv(DATA / "smoke.csv")
    assert len(table) == len(committed) == len(spec.runs)
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)
    manifest = json.loads((tmp_path / "smoke.manifest.json").read_text())
    assert manifest["spec_sha256"] == spec.sha256 and len(manifest["wall_s_per_run"]) == 12


def test_interrupted_grid_resumes(tmp_path):
    spec = load_spec(DATA / "specs" / "smoke.toml")
    committed = pd.read_csv(DATA / "smoke.csv")
    out = tmp_path / "smoke.csv"
    committed.iloc[:5].to_csv(out, index=False)
    simulate(spec, out, jobs=1, show_progress=False)
    manifest = json.loads((tmp_path / "smoke.manifest.json").read_text())
    assert manifest["runs_this_invocation"] == 7
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)


def test_a_failing_run_is_named_and_the_others_kept(tmp_path, monkeypatch):
    from fitrules.sim import runner

    spec = load_spec(DATA / "specs" / "smoke.toml")
    victim = next(r for r in spec.runs if (r.H, r.keep, r.seed) == (4, 0.25, 1))
    real_run = runner.run
    monkeypatch.setattr(
        runner, "run", lambda cfg, corpus: 1 / 0 if cfg == victim else real_run(cfg, corpus)
    )
    out = tmp_path / "smoke.csv"
    with pytest.raises(SimError, match=r"1 run\(s\) failed: H=4,keep=0.25,seed=1: ZeroDivision"):
        simulate(spec, out, show_progress=False)
    assert len(pd.read_csv(out)) == 11 and not (tmp_path / "smoke.manifest.json").exists()
    monkeypatch.undo()
    simulate(spec, out, show_progress=False)
    committed = pd.read_csv(DATA / "smoke.csv")
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)


def test_output_of_another_spec_is_refused(tmp_path):
    out = tmp_path / "g.csv"
    pd.read_csv(DATA / "smoke.csv").to_csv(out, index=False)
    before = out.read_bytes()
    other = parse_spec('name = "other"\nseeds = [0]\n[fixed]\nsteps = 4\nwidth = 8\n')
    with pytest.raises(SimError, match="different spec"):
        simulate(other, out, show_progress=False)
    assert out.read_bytes() == before


def test_cell_runs_one_configuration(tmp_path):
    spec = cell_spec("H=8,keep=0.25", load_spec(DATA / "specs" / "smoke.toml"), "0")
    assert [(r.H, r.keep, r.seed, r.width) for r in spec.runs] == [(8, 0.25, 0, 32)]


@pytest.mark.parametrize(
    "text, match",
    [
        ("[fixed]\nbogus = 1\n", "unknown factor 'bogus'"),
        ("[fixed]\nkeep = 1.5\n", r"keep=1.5 is outside \(0, 1\]"),
        ("[fixed]\nkeep = 0.0\n", r"outside \(0, 1\]"),
        ("[fixed]\nH = 0\n", "H=0 must be >= 1"),
        ("[fixed]\nM = 0\n", "M=0 must be >= 1"),
        ("[fixed]\ncompressor = 'zip'\n", "compressor='zip' is unknown"),
        ("[fixed]\naggregator = 'max'\n", "aggregator='max' is unknown"),
        ("[[block]]\n[block.factors]\nH = []\n", "non-empty list"),
        ("seeds = [-1]\n", "seeds"),
        ("[fixed\n", "not valid TOML"),
    ],
)
def test_bad_specs(text, match):
    with pytest.raises(SimError, match=match):
        parse_spec(text)


def test_bad_spec_on_cli_exits_2_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text("[fixed]\nkeep = -0.5\n")
    out = tmp_path / "out.csv"
    assert main(["simulate", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "keep=-0.5" in err[0]
    assert not out.exists()


def test_a_committed_spec_is_found_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_spec("smoke").name == "smoke"
    assert load_spec("smoke.toml").name == "smoke"
    with pytest.raises(SimError, match="committed specs, usable by name: .*main"):
        load_spec("nosuch")
