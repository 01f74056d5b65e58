"""The verdict's false positives under box-weighted held-out cells against equal ones, on the
same null grids (issue 42, item 5): bench_calibration.py's additive null.

    python benchmarks/calib_heldout_weights.py --grids 600 --weights box
    python benchmarks/calib_heldout_weights.py --grids 600 --weights equal
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_calibration as bc  # noqa: E402

from fitrules.jobs import compare as compare_job  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=600)
    ap.add_argument("--splits", type=int, default=300)
    ap.add_argument("--weights", choices=["box", "equal"], default="box")
    ap.add_argument("--seed", type=int, default=100, help="grids apart from bench_calibration's")
    args = ap.parse_args()
    base = compare_job.compare

    def compare(*a, **k):
        return base(*a, heldout_weights=args.weights, **k)

    bc.compare = compare  # the benchmark's compare, with these held-out weights
    print(f"held-out weights: {args.weights}; {args.grids} null grids, {args.splits} splits each; "
          "machine: 2-core AMD EPYC VM, 24 GiB", flush=True)  # fmt: skip
    bc.null_rates(
        "additive null, 20 cells, train 1/3",
        lambda rng: bc.synthetic_grid(rng, lambda x1, x2: 2 + 0.05 * x1 + 0.05 * x2),
        bc.FORMS, args.grids, args.splits, 1 / 3, seed=args.seed,
    )  # fmt: skip


if __name__ == "__main__":
    main()
