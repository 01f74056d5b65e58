"""Documented limits refused at once with one line, and memory estimates checked before
anything large is allocated."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import LimitError
from helpers import refused, run

pytestmark = pytest.mark.timing  # "at once" is read off the CPU clock (_quick)


def _quick(argv, capsys, tmp_path, match, seconds=5.0):
    """``refused``, and within ``seconds`` of this process's CPU time: work, not the wall clock,
    which a loaded machine stretches (the suite runs on every core)."""
    t0 = time.process_time()
    line = refused(argv, capsys, tmp_path, match)
    assert time.process_time() - t0 < seconds, "refused only after doing work"
    return line


def test_a_billion_splits(grid_csv, tmp_path, capsys):
    """compare --splits 10**9 is refused at once, giving the range 1 to 100,000."""
    _quick(
        ["compare", "--data", grid_csv, "--splits", 10**9],
        capsys,
        tmp_path,
        "--splits 1,000,000,000: must be from 1 to 100,000",
    )


def test_a_billion_ci_resamples(grid_csv, tmp_path, capsys):
    """ci --resamples 10**9 is refused at once, giving the range 1,000 to 1,000,000."""
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
    """fit --intervals --resamples 10**9 is refused at once, giving the range 20 to 100,000."""
    _quick(
        ["fit", "--data", grid_csv, "--form", "composition", "--intervals", "--resamples", 10**9],
        capsys,
        tmp_path,
        "--resamples 1,000,000,000: must be from 20 to 100,000",
    )


def test_fifteen_nonlinear_constants(grid_csv, tmp_path, capsys):
    """A form with 15 nonlinear constants is refused at once: at most 8."""
    expr = "L0 + a*omega**c0" + "".join(f"*(H/16)**c{i}" for i in range(1, 15))
    _quick(
        ["fit", "--data", grid_csv, "--form", f"x = {expr}"],
        capsys,
        tmp_path,
        "15 nonlinear constants .* at most 8",
    )


def test_six_nonlinear_constants_are_searched_without_3_to_the_6(grid_csv, capsys):
    """Beyond three nonlinear constants the local window grows as 2q+1, not 3^q."""
    from fitrules.engine.fit.search import _stencil

    assert len(_stencil(3)[0]) == 27 and len(_stencil(6)[0]) == 13 and len(_stencil(8)[0]) == 17
    expr = "L0 + a*omega**c1*(H/16)**c2 + b*omega**c3*(H/16)**c4 + d*omega**c5*(H/16)**c6"
    t0 = time.process_time()  # CPU time: the work, whatever the machine's load
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
    assert time.process_time() - t0 < 60


@pytest.mark.parametrize(
    "cell, match",
    [
        ("width=1000000000", "width=1000000000 is above the limit of 16,384"),
        ("steps=100000000000000000", "steps=100000000000000000 is above the limit"),
        ("M=1024,batch=16384,width=16384", "would need about .* of memory"),
    ],
)
def test_simulate_sizes(tmp_path, capsys, cell, match):
    """A simulate cell too wide, too long or needing too much memory is refused at once."""
    _quick(["simulate", "--cell", cell, "--out", tmp_path / "o.csv"], capsys, tmp_path, match)


def test_simulate_jobs(tmp_path, capsys):
    """simulate --jobs 100,000 is refused at once, giving the range 1 to 256."""
    _quick(
        ["simulate", "--cell", "H=1", "--jobs", 10**5, "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        "--jobs 100,000: must be from 1 to 256",
    )


def test_spec_run_count_is_checked_before_the_runs_are_made(tmp_path, capsys):
    """A spec of a million runs is refused before the runs are made: more than 100,000."""
    levels = ", ".join(str(i) for i in range(1, 101))
    spec = tmp_path / "s.toml"
    spec.write_text(
        f"[[block]]\n[block.factors]\nH = [{levels}]\nM = [{levels}]\nbatch = [{levels}]\n"
    )
    _quick(
        ["simulate", spec, "--out", tmp_path / "o.csv"], capsys, tmp_path, "more than 100,000 runs"
    )


def test_memory_estimate_is_checked_before_fitting(grid_csv, tmp_path, capsys, monkeypatch):
    """A compare whose memory estimate passes the cap is refused before fitting."""
    from fitrules.base import limits

    monkeypatch.setattr(limits, "MEMORY_CAP_BYTES", 2**20)
    _quick(
        ["compare", "--data", grid_csv, "--splits", "300"],
        capsys,
        tmp_path,
        "would need about .* of memory, more than the 1 MiB allowed",
    )


def test_bootstrap_memory_is_checked_before_resampling(tmp_path, capsys):
    """The audit's shape: 5,000 cells, 100,000 resamples: refused at once."""
    rng = np.random.default_rng(0)
    n = 5000
    df = pd.DataFrame({"H": np.arange(n) % 100 + 1.0, "omega": (np.arange(n) // 100) * 1.0,
                       "seed": 0})  # fmt: skip
    df["loss"] = 2.2 + 0.01 * df["omega"] * (df["H"] / 16) ** 0.5 + 1e-3 * rng.standard_normal(n)
    path = tmp_path / "big.csv"
    df.to_csv(path, index=False)
    refused(
        ["fit", "--data", path, "--form", "composition", "--intervals", "--resamples", "100000"],
        capsys, tmp_path, r"bootstrap .*100,000 resamples of 5,000 cells.*--resamples",
    )  # fmt: skip
    with pytest.raises(LimitError, match="lower resamples"):
        fr.fit(str(path), "composition", intervals=True, resamples=100_000)


def test_simulate_local_cluster_is_capped_as_jobs_are(tmp_path, capsys):
    """local:N had no upper bound (hostile review): refused at once, naming the limit of --jobs,
    before any cluster starts."""
    _quick(
        ["simulate", "--cell", "H=1", "--scheduler", "local:100000", "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        r"--scheduler 'local:100000': local:N starts N worker processes, N from 1 to 256",
    )
    _quick(
        ["search", "--scheduler", "local:257", "--splits", "3", "--inner-splits", "2"],
        capsys,
        tmp_path,
        r"--scheduler 'local:257': local:N starts N worker processes, N from 1 to 256",
    )


def test_simulate_memory_counts_the_local_cluster_s_workers(tmp_path, capsys, monkeypatch):
    """The memory check counted one process under a scheduler (hostile review): local:N counts N
    worker processes of LOCAL_WORKER_BYTES (100 MiB) each, refused before the cluster starts."""
    pytest.importorskip("distributed")
    from fitrules.base import limits

    monkeypatch.setattr(limits, "MEMORY_CAP_BYTES", 200 * 2**20)
    tiny = "H=1,steps=2,width=4,embed=2,context=2,batch=2,eval_windows=8,M=1"
    _quick(
        ["simulate", "--cell", tiny, "--scheduler", "local:4", "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        r"a local cluster of 4 worker process\(es\) would need about 0.39. GiB of memory, more "
        r"than the 200 MiB allowed .*use a smaller local:N",
    )


def test_search_memory_counts_its_worker_processes(tmp_path, capsys, monkeypatch):
    """The search's memory check counted this process alone under --jobs and --scheduler: it
    now counts each worker's copy of the state, and local:N's worker processes, refused before
    any cluster starts (the same search in one process fits the budget)."""
    pytest.importorskip("distributed")
    from fitrules.base import limits

    monkeypatch.setattr(limits, "MEMORY_CAP_BYTES", 200 * 2**20)
    line = ["search", "--splits", "3", "--inner-splits", "2", "--terms", "1"]
    _quick(
        [*line, "--scheduler", "local:4"],
        capsys,
        tmp_path,
        r"on a local cluster of 4 worker process\(es\) would need about 0.4[6-9]\d* GiB of memory, "
        r"more than the 200 MiB allowed.*use fewer --jobs or a smaller local:N",
    )
    from fitrules.jobs.search.plan import Plan, search_memory

    plan = Plan(1, 1, 10, 20, {}, memory=1e6, worker_memory=2e6)
    assert search_memory(plan, 1) == (1e6, "in one process")
    assert search_memory(plan, 3)[0] == 1e6 + 3 * 2e6
    assert search_memory(plan, 1, "tcp://127.0.0.1:1")[0] == 1e6


@pytest.mark.parametrize(
    "cell",
    [
        # 1e12 coordinate updates each: hours on one core, accepted before (hostile review)
        "model=quadratic,dim=1000000,M=1,rounds=1000000,burn_in=0",
        "model=quadratic,dim=100000,M=10,rounds=1000000,burn_in=0,inner=exact",
        "model=quadratic,dim=10000,M=100,H=1000,rounds=1000,burn_in=0,inner=steps",
    ],
)
def test_a_quadratic_run_estimated_past_the_time_limit_is_refused(tmp_path, capsys, cell):
    """One quadratic run's time is estimated from the updates it draws, and a run estimated
    past MAX_SIM_RUN_SECONDS (1 h) is refused at once, naming the estimate and the limit."""
    _quick(
        ["simulate", "--cell", cell, "--out", tmp_path / "o.csv"],
        capsys,
        tmp_path,
        r"--cell: a quadratic run of .*1e\+12 coordinate updates would take about [\d.]+ h on "
        r"one core, more than the 1 h one run may take \(MAX_SIM_RUN_SECONDS\); use fewer",
    )


def test_the_committed_quadratic_specs_are_far_within_the_time_limit():
    """The limit is far above real use: the committed specs' runs are estimated in seconds."""
    from fitrules.base.paths import data_dir
    from fitrules.sim.spec import load_spec

    for name in ("quadratic", "quadratic_attack"):
        runs = load_spec(data_dir() / "specs" / f"{name}.toml").runs
        assert max(r.seconds() for r in runs) < 10
