"""Wall time of one committed grid on the local process pool and on a Dask LocalCluster.

    python benchmarks/bench_cluster.py                                  # smoke grid, seconds
    python benchmarks/bench_cluster.py --spec data/specs/workers.toml --repeat 1   # minutes

Both sides run the same grid with the same number of processes (``--jobs``, one thread
each), from scratch, into a temporary directory (never into ``data/``):

- pool: ``simulate(spec, out, jobs=N)``, a ``ProcessPoolExecutor`` started by the call;
- cluster: the ``LocalCluster`` of N processes that ``--scheduler local:N`` starts
  (``fitrules.sim.cluster.local_cluster``) is started, timed as start-up; then
  ``simulate(spec, out, scheduler=ADDRESS)`` runs the grid on it, timed as grid (connect,
  worker check, one task a run). ``--scheduler local:N`` spends start-up + grid.

Each time is the best of ``--repeat`` rounds. The ratios are the cluster's overhead: grid /
pool, and (start-up + grid) / pool. "Runs' own time" sums the ``wall_s`` of every run (first
round), which tells runs that are slower apart from time lost between runs. The two tables'
losses are compared as a sanity check.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fitrules.sim.cluster import local_cluster  # noqa: E402
from fitrules.sim.runner import simulate  # noqa: E402
from fitrules.sim.spec import load_spec  # noqa: E402


def pool_and_cluster(spec, tmp: Path, jobs: int, repeat: int):
    """The grid ``spec`` run from scratch ``repeat`` times on ``jobs`` local processes and on a
    LocalCluster of ``jobs`` workers (started apart): the best pool, start-up and grid times,
    and the first round's two tables."""
    pool_s, start_s, grid_s = [], [], []
    for i in range(repeat):
        t0 = time.perf_counter()
        pool = simulate(spec, tmp / f"pool-{i}.csv", jobs=jobs, show_progress=False)
        pool_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with local_cluster(jobs) as cluster:
            t1 = time.perf_counter()
            out = tmp / f"cluster-{i}.csv"
            dask = simulate(spec, out, scheduler=cluster.scheduler_address, show_progress=False)
            t2 = time.perf_counter()
        start_s.append(t1 - t0)
        grid_s.append(t2 - t1)
        if i == 0:
            tables = pool, dask
    return (min(pool_s), min(start_s), min(grid_s), *tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "data" / "specs" / "smoke.toml")
    parser.add_argument("--jobs", type=int, default=2, help="processes on each side (2)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best is kept (3)")
    args = parser.parse_args()

    spec = load_spec(args.spec)
    with tempfile.TemporaryDirectory(prefix="fitrules-bench-cluster-") as tmp:
        pool, start, grid, pool_table, cluster_table = pool_and_cluster(
            spec, Path(tmp), args.jobs, args.repeat
        )

    diff = np.nanmax(np.abs(cluster_table["loss"] / pool_table["loss"] - 1))
    print(
        f"grid {spec.name!r}: {len(spec.runs)} runs, {args.jobs} processes, best of {args.repeat}"
    )
    print_overhead(args.jobs, pool, start, grid, pool_table, cluster_table, "  ")
    print(f"  largest relative loss difference, cluster vs pool: {diff:.1e}")


def print_overhead(jobs, pool, start, grid, pool_table, cluster_table, indent: str) -> None:
    """The pool's and the cluster's times, the cluster's overhead as ratios, and each side's
    runs' own time summed (which tells slower runs apart from scheduling overhead)."""
    rows = [
        (f"pool (jobs={jobs})", f"{pool:.2f} s"),
        (f"cluster (local:{jobs}) start-up", f"{start:.2f} s"),
        (f"cluster (local:{jobs}) grid", f"{grid:.2f} s"),
        ("ratio grid / pool", f"{grid / pool:.2f}"),
        ("ratio (start-up + grid) / pool", f"{(start + grid) / pool:.2f}"),
        ("runs' own time, pool", f"{pool_table['wall_s'].sum():.2f} s"),
        ("runs' own time, cluster", f"{cluster_table['wall_s'].sum():.2f} s"),
    ]
    for label, value in rows:
        print(f"{indent}{label:<32} {value:>9}")


if __name__ == "__main__":
    main()
