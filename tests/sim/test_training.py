"""The training the harness runs (fitrules.sim.diloco, model, corpus): gradients, compression,
seeds, the committed corpus slice."""

import json
import math
from dataclasses import asdict

import numpy as np
import pytest

from conftest import DATA
from fitrules.sim.corpus import load_corpus
from fitrules.sim.diloco import RunConfig, _Adam, _batches, _compress, train
from fitrules.sim.model import MLPShape, init_params, loss_and_grad


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def test_corpus_is_the_committed_slice(corpus):
    """The loaded corpus has the hash in main's manifest, 37 symbols and over 50,000 valid ones."""
    manifest = json.loads((DATA / "main.manifest.json").read_text())
    assert corpus.sha256 == manifest["corpus_sha256"]
    assert corpus.vocab_size == 37 and len(corpus.valid) > 50_000


def test_gradients_match_finite_differences():
    """The MLP's gradients match central finite differences on 40 parameters."""
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


def train_single(cfg: RunConfig, corpus) -> np.ndarray:
    """Plain single-worker training with the inner optimiser: the M=1, H=1 reference."""
    shape = cfg.shape(corpus.vocab_size)
    params = init_params(shape, np.random.default_rng([cfg.seed, 0]))[None, :].copy()
    opt = _Adam(cfg.inner_opt, cfg.lr, cfg.weight_decay, params.shape)
    grad = np.empty_like(params)
    for x, y in _batches(corpus, RunConfig(**{**asdict(cfg), "M": 1})):
        loss_and_grad(params, x, y, shape, grad)
        opt.step(params, grad)
    return params[0]


def test_one_worker_every_step_no_momentum_is_plain_training(corpus):
    """DiLoCo with one worker, H=1, no compression or momentum is plain training."""
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
    """Rand-k compression is unbiased and its variance factor is omega, at keep 0.5 to 0.0625."""
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
    """Top-k at keep 0.1 sends 10 of 100 entries per worker and keeps the rest as its error."""
    rng = np.random.default_rng(0)
    delta = rng.standard_normal((2, 100)).astype(np.float32)
    cfg = RunConfig(keep=0.1, compressor="topk")
    error = np.zeros_like(delta)
    sent = _compress(delta, cfg, rng, error)
    assert (np.count_nonzero(sent, axis=1) == 10).all()
    np.testing.assert_allclose(sent + error, delta, atol=1e-6)


def test_same_seed_same_start_and_batches(corpus):
    """Runs with the same seed draw the same batches whatever their H and keep."""
    a = RunConfig(H=4, keep=0.5, width=16, steps=8, seed=5)
    b = RunConfig(H=8, keep=1.0, width=16, steps=8, seed=5)
    from fitrules.sim.diloco import _batches

    for (xa, ya), (xb, yb) in zip(_batches(corpus, a), _batches(corpus, b), strict=True):
        assert (xa == xb).all() and (ya == yb).all()
