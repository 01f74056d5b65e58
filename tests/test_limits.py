"""Issue 12, item 6: documented limits, refused at once with one line, and a memory estimate
checked before anything large is allocated. Real use stays well inside them."""

from __future__ import annotations

import time

import pytest

from conftest import DATA, composition_grid
from helpers import refused, run


@pytest.fixture
def grid_csv(tmp_path):
    path = tmp_path / "g.csv"
    composition_grid().to_csv(path, index=False)
    return path


def _quick(argv, capsys, tmp_path, match, seconds=5.0):
    t0 = time.perf_counter()
    line = refused(argv, capsys, tmp_path, match)
    assert time.perf_counter() - t0 < seconds, "refused only after doing work"
    return line


def test_a_billion_splits(grid_csv, tmp_path, capsys):
    _quick(
        ["compare", "--data", grid_csv, "--splits", 10**9],
        capsys,
        tmp_path,
        "--splits 1,000,000,000: must be from 1 to 100,000",
    )


def test_a_billion_ci_resamples(grid_csv, tmp_path, capsys):
    _quick(
        [
            "ci",
            "--data",
            grid_csv,
            "--baseline",
            "H=1,keep=1",
            "--treatment",
            "H=4,keep=1",
            "--resamples",
            10**9,
        ],
        capsys,
        tmp_path,
        "--resamples 1,000,000,000: must be from 1,000 to 1,000,000",
    )


def test_a_billion_bootstrap_resamples(grid_csv, tmp_path, capsys):
    _quick(
        ["fit", "--data", grid_csv, "--form", "composition", "--intervals", "--resamples", 10**9],
        capsys,
        tmp_path,
        "--resamples 1,000,000,000: must be from 20 to 100,000",
    )


def test_fifteen_nonlinear_constants(grid_csv, tmp_path, capsys):
    expr = "L0 + a*omega**c0" + "".join(f"*(H/16)**c{i}" for i in range(1, 15))
    _quick(
        ["fit", "--data", grid_csv, "--form", f"x = {expr}"],
        capsys,
        tmp_path,
        "15 nonlinear constants .* at most 8",
    )


def test_six_nonlinear_constants_are_searched_without_3_to_the_6(grid_csv, capsys):
    """Beyond three nonlinear constants the local window grows as 2q+1, not 3^q."""
    from fitrules.engine.fit import _stencil

    assert len(_stencil(3)[0]) == 27 and len(_stencil(6)[0]) == 13 and len(_stencil(8)[0]) == 17
    expr = "L0 + a*omega**c1*(H/16)**c2 + b*omega**c3*(H/16)**c4 + d*omega**c5*(H/16)**c6"
    t0 = time.perf_counter()
    code, out, err = run(
        [
            "compare",
            "--data",
            grid_csv,
            "--splits",
            3,
            "--form",
            f"x = {expr}",
            "--train-frac",
            "0.6",
        ],
        capsys,
    )
    assert code == 0, err
    assert time.perf_counter() - t0 < 60


@pytest.mark.parametrize(
    "cell, match",
    [
        ("width=1000000000", "width=1000000000 is above the limit of 16,384"),
        ("steps=100000000000000000", "steps=100000000000000000 is above the limit"),
        ("M=1024,batch=16384,width=16384", "would need about .* of memory"),
    ],
)
def test_simulate_sizes(tmp_path, capsys, cell, match):
    _quick(["simulate", "--cell", cell, "--out", tmp_path / "o.csv"], capsys, tmp_path, match)


def test_simulate_jobs(tmp_path, capsys):
    _quick(
        ["simulate", "--cell", "H=1", "--jobs", 10**5, "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        "--jobs 100,000: must be from 1 to 256",
    )


def test_spec_run_count_is_checked_before_the_runs_are_made(tmp_path, capsys):
    levels = ", ".join(str(i) for i in range(1, 101))
    spec = tmp_path / "s.toml"
    spec.write_text(
        f"[[block]]\n[block.factors]\nH = [{levels}]\nM = [{levels}]\nbatch = [{levels}]\n"
    )
    _quick(
        ["simulate", spec, "--out", tmp_path / "o.csv"], capsys, tmp_path, "more than 100,000 runs"
    )


def test_memory_estimate_is_checked_before_fitting(grid_csv, tmp_path, capsys, monkeypatch):
    from fitrules.base import limits

    monkeypatch.setattr(limits, "MEMORY_CAP_BYTES", 2**20)
    _quick(
        ["compare", "--data", grid_csv, "--splits", "300"],
        capsys,
        tmp_path,
        "would need about .* of memory, more than the 1 MiB allowed",
    )


def test_the_default_grid_at_ten_thousand_splits_is_within_the_limits():
    from fitrules.engine.fit import fit_memory
    from fitrules.model.forms import BUILTIN_FORMS, DEFAULT_FORMS
    from fitrules.model.splits import RandomSplit

    RandomSplit(10_000)  # accepted
    worst = max(fit_memory(BUILTIN_FORMS[f], 20, 10_000) for f in DEFAULT_FORMS)
    assert worst < 2**30  # well inside the cap
    assert (DATA / "main.csv").exists()


def test_limits_are_documented():
    from fitrules.base import limits

    doc = limits.__doc__ or ""
    assert "10,000 splits" in doc
    for name in ("MAX_SPLITS", "MAX_BOOTSTRAP_RESAMPLES", "MAX_CI_RESAMPLES", "MAX_NONLINEAR"):
        assert isinstance(getattr(limits, name), int)
