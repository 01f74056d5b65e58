"""Memory of a local Dask cluster: the estimate of ``--scheduler local:N`` against its peak.

    python benchmarks/bench_cluster_memory.py                  # local:2 and local:8, smoke grid
    python benchmarks/bench_cluster_memory.py --workers 2,8,16 --spec data/specs/smoke.toml
    python benchmarks/bench_cluster_memory.py --job search      # a search on the default grid

``fitrules simulate --scheduler local:N`` checks its memory before any run (see
fitrules.sim.runner._memory_estimate): N worker processes of
``fitrules.sim.cluster.LOCAL_WORKER_BYTES`` each before they run anything, plus the runs they
hold at once. For each N this starts the cluster that ``local:N`` starts
(``fitrules.sim.cluster.local_cluster``), runs the grid on it into a temporary directory, and
samples every 100 ms the resident set size (RSS) summed over the cluster's processes: every
descendant of this process (the workers, and multiprocessing's helper). RSS counts the pages
the processes share (the interpreter, numpy's libraries) once per process, so the unique set
size (USS, the pages only that process holds) is summed too: the memory the cluster takes
lies between the two. Printed per N: the processes, the peaks of both sums, the estimate, the
ratios (target: within 1.5x either way), and this process's own RSS growth (the scheduler and
the nannies live here; the budget is measured with this process running, so the estimate
leaves it out).

``--job search`` does the same for ``fitrules search --scheduler local:N`` on the default
grid (``fitrules.jobs.search.plan.search_memory``): each worker's part of the estimate is
``fitrules.jobs.search.plan.SEARCH_WORKER_BYTES`` plus ``Plan.worker_memory`` (its copy of the
candidates and masks, and its largest fit); the search's own part (``Plan.memory``) lives in
this process and is left out of the ratios as the scheduler is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402  (installed with Dask's distributed)

from fitrules.base.errors import SimError  # noqa: E402
from fitrules.sim.cluster import LOCAL_WORKER_BYTES, local_cluster  # noqa: E402
from fitrules.sim.corpus import load_corpus  # noqa: E402
from fitrules.sim.runner import _memory_estimate, simulate  # noqa: E402
from fitrules.sim.spec import load_spec  # noqa: E402

MIB = 2**20


class Peak:
    """The largest RSS summed over this process's descendants, sampled in a thread."""

    def __init__(self, every: float = 0.1):
        self.every, self.peak, self.peak_uss, self.processes = every, 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total, unique, n = 0, 0, 0
            for child in me.children(recursive=True):
                try:
                    info = child.memory_full_info()
                except psutil.Error:  # ended between the listing and the reading
                    continue
                total, unique, n = total + info.rss, unique + info.uss, n + 1
            if total > self.peak:
                self.peak, self.processes = total, n
            self.peak_uss = max(self.peak_uss, unique)
            self._stop.wait(self.every)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def one(spec, n: int, tmp: Path) -> dict:
    vocab = load_corpus().vocab_size
    estimate, _, _ = _memory_estimate(list(spec.runs), 1, n, vocab)
    own0 = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    with Peak() as peak, local_cluster(n) as cluster:
        simulate(spec, tmp / f"local-{n}.csv", scheduler=cluster.scheduler_address,
                 show_progress=False)  # fmt: skip
    own = psutil.Process().memory_info().rss - own0
    return dict(n=n, processes=peak.processes, peak=peak.peak, uss=peak.peak_uss,
                estimate=estimate, own=own, wall=time.perf_counter() - t0)  # fmt: skip


def one_search(n: int, terms: int) -> dict:
    import fitrules as fr
    from fitrules.jobs.search.plan import search_memory

    plans = []
    kwargs = dict(splits=5, inner_splits=4, terms=terms, seed=0, yes=True)
    fr.search(on_plan=lambda plan, _s: plans.append(plan), **kwargs)
    (plan,) = plans
    total, _ = search_memory(plan, 1, f"local:{n}")
    estimate = total - plan.memory
    own0 = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    with Peak() as peak, local_cluster(n) as cluster:
        fr.search(scheduler=cluster.scheduler_address, **kwargs)
    own = psutil.Process().memory_info().rss - own0
    return dict(n=n, processes=peak.processes, peak=peak.peak, uss=peak.peak_uss,
                estimate=estimate, own=own, wall=time.perf_counter() - t0,
                worker=plan.worker_memory, candidates=plan.n_candidates)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "data" / "specs" / "smoke.toml")
    parser.add_argument("--workers", default="2,8", help="comma-separated N (2,8)")
    parser.add_argument("--job", choices=("simulate", "search"), default="simulate")
    parser.add_argument("--terms", type=int, default=2, help="search --terms (2)")
    args = parser.parse_args()
    if args.job == "search":
        return main_search([int(x) for x in args.workers.split(",")], args.terms)
    spec = load_spec(args.spec)
    sizes = [int(x) for x in args.workers.split(",")]
    run_mib = max(r.memory(load_corpus().vocab_size) for r in spec.runs) / MIB
    print(f"spec {spec.name}: {len(spec.runs)} runs, the largest estimated at {run_mib:.3g} MiB; "
          f"LOCAL_WORKER_BYTES {LOCAL_WORKER_BYTES / MIB:.0f} MiB")  # fmt: skip
    print(f"{'local:N':>8}  {'processes':>9}  {'peak RSS MiB':>12}  {'peak USS MiB':>12}  "
          f"{'estimate MiB':>12}  {'RSS/estimate':>12}  {'USS/estimate':>12}  "
          f"{'this process +MiB':>17}  {'wall s':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="fitrules-bench-cluster-memory-") as tmp:
        for n in sizes:
            try:
                r = one(spec, n, Path(tmp))
            except SimError as err:
                print(f"local:{n}: {err}")
                continue
            est = r["estimate"]
            row = f"{'local:' + str(n):>8}  {r['processes']:>9}  {r['peak'] / MIB:>12,.0f}  "
            row += f"{r['uss'] / MIB:>12,.0f}  {est / MIB:>12,.0f}  {r['peak'] / est:>12.2f}  "
            print(row + f"{r['uss'] / est:>12.2f}  {r['own'] / MIB:>17,.0f}  {r['wall']:>6.1f}")
    return 0


def main_search(sizes: list[int], terms: int) -> int:
    from fitrules.jobs.search.plan import SEARCH_WORKER_BYTES

    print(f"search of the default grid, --splits 5 --inner-splits 4 --terms {terms}; "
          f"SEARCH_WORKER_BYTES {SEARCH_WORKER_BYTES / MIB:.0f} MiB")  # fmt: skip
    print(f"{'local:N':>8}  {'candidates':>10}  {'worker +MiB':>11}  {'processes':>9}  "
          f"{'peak RSS MiB':>12}  {'peak USS MiB':>12}  {'estimate MiB':>12}  "
          f"{'RSS/estimate':>12}  {'USS/estimate':>12}  {'wall s':>6}")  # fmt: skip
    for n in sizes:
        r = one_search(n, terms)
        est = r["estimate"]
        row = f"{'local:' + str(n):>8}  {r['candidates']:>10,}  {r['worker'] / MIB:>11.1f}  "
        row += f"{r['processes']:>9}  {r['peak'] / MIB:>12,.0f}  {r['uss'] / MIB:>12,.0f}  "
        print(row + f"{est / MIB:>12,.0f}  {r['peak'] / est:>12.2f}  {r['uss'] / est:>12.2f}  "
              f"{r['wall']:>6.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
