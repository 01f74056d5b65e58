"""Shared fixtures: synthetic grids made from known rules with seeded noise."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import site
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
EXTERNAL = ROOT.parent / "shared" / "external"

H_LEVELS = (1, 4, 16, 64)
KEEP_LEVELS = (1.0, 0.5, 0.25, 0.125, 0.0625)
TRUTH = {"L0": 2.2, "a": 0.012, "b": 0.5}

MICRO, MU, FULL_H = "\u00b5", "\u03bc", "\uff28"  # micro sign, Greek mu, fullwidth H


def composition_grid(
    noise: float = 0.002, seeds: int = 3, rng_seed: int = 0, h_levels=H_LEVELS, truth=TRUTH
) -> pd.DataFrame:
    """Runs of L0 + a*omega*(H/16)**b plus seeded Gaussian noise (sd ``noise``) per run."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for H in h_levels:
        for keep in KEEP_LEVELS:
            omega = 1 / keep - 1
            mean = truth["L0"] + truth["a"] * omega * (H / 16) ** truth["b"]
            for s in range(seeds):
                rows.append(
                    {
                        "H": H,
                        "keep": keep,
                        "omega": omega,
                        "seed": s,
                        "loss": mean + noise * rng.standard_normal(),
                        "diverged": False,
                    }
                )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- signals
# What a process does with SIGINT is inherited: pytest started as a background job of a script,
# under nohup or by some CI runners starts with SIGINT ignored, and Python then keeps it ignored.
# A test that sends itself SIGINT therefore asks for the handler it relies on (``interruptible``),
# and every test gets back the handlers it found, so that no test (ipykernel's notebook tests
# install Python's default handler) changes what a later test on the same worker sees.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """Each test ends with the signal handlers it started with."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    yield
    for sig, handler in before.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


@pytest.fixture
def interruptible():
    """SIGINT raises KeyboardInterrupt during the test, as in a terminal, whatever the runner
    inherited (the autouse fixture above puts the inherited handler back)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def distributed():
    """The ``distributed`` module (the test is skipped without it), its logger quiet."""
    distributed = pytest.importorskip("distributed")
    # A killed worker or a closing cluster is reported at WARNING by Dask; expected here.
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield distributed
    logger.setLevel(level)


@pytest.fixture
def synthetic_csv(tmp_path) -> Path:
    path = tmp_path / "grid.csv"
    composition_grid().to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """(the wheel, the fresh environment's bin folder, an empty working directory, env): a
    wheel built from the checkout offline and installed into a fresh virtual environment (see
    tests/project/test_wheel.py), shared by the tests that run the README's and the docs'
    examples."""
    from readme import run_ok

    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # build from a copy: no build/ or stale files in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.partial")
    for name in ("fitrules", "data"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FITRULES_DATA")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    run_ok(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", tmp / "dist"],
        src,
        env,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("fitrules-*.whl")
    venv = tmp / "venv"
    run_ok([sys.executable, "-m", "venv", "--without-pip", venv], tmp, env)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    py = venv / "bin" / "python"
    run_ok(
        [py, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
         "--no-warn-script-location", wheel],
        tmp,
        env,
    )  # fmt: skip
    work = tmp / "empty"
    work.mkdir()
    return wheel, venv / "bin", work, env


# ---------------------------------------------------------------- tables several test files use
@pytest.fixture(scope="module")
def df() -> pd.DataFrame:
    """Two learning rates of the composition grid; lr 1e-3 is 0.01 worse everywhere."""
    a = composition_grid(seeds=4, rng_seed=1).assign(lr=3e-4)
    b = composition_grid(seeds=4, rng_seed=2).assign(lr=1e-3)
    b["loss"] += 0.01
    return pd.concat([a, b], ignore_index=True).drop(columns="omega")


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "g.csv"
    composition_grid().to_csv(path, index=False)
    return path


@pytest.fixture
def micro_csv(tmp_path):
    """The composition grid with H named by the micro sign."""
    df = composition_grid().rename(columns={"H": MICRO})
    path = tmp_path / "micro.csv"
    df.to_csv(path, index=False)
    return path


@pytest.fixture
def one_run_csv(tmp_path):
    path = tmp_path / "one.csv"
    composition_grid(seeds=1).to_csv(path, index=False)
    return path


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "x.csv"
    composition_grid().to_csv(path, index=False)
    return path


@pytest.fixture
def user_csv(tmp_path):
    from tables import user_table  # tables imports this module

    path = tmp_path / "my runs.csv"
    user_table().to_csv(path, index=False)
    return path
