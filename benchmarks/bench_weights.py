"""Coverage of the bootstrap intervals of a weighted fit (``--weights``), by simulation.

    python benchmarks/bench_weights.py            # 200 simulated tables per weighting
    python benchmarks/bench_weights.py --quick    # 40, for a smoke check
    python benchmarks/bench_weights.py --bootstrap auto   # the seed bootstrap, as before

Each simulated table has 8 cells (x = 1 .. 34), 2 to 8 runs per cell and run noise whose
spread differs threefold between cells; the truth is the fitted form itself,
``2 + 0.8*x**0.5``. Per weighting (cells, runs, inverse-variance) it fits
``L0 + a*x**b`` with 95% bootstrap intervals (200 resamples; the default kind, or
``--bootstrap``: ``auto`` is the percentile interval of the seed bootstrap here, which
resamples each cell's runs, and of the residuals where a cell has one) and prints how often the
interval of ``b`` covers 0.5, with the number of simulated tables, and the median width of the
intervals: a weighting that matches the noise should give narrower intervals at the same
coverage.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fitrules as fr  # noqa: E402
from fitrules.base.limits import BOOTSTRAP_KINDS, DEFAULT_BOOTSTRAP  # noqa: E402

X = [1.0, 2, 3, 5, 8, 13, 21, 34]
TRUE_B = 0.5


def table(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for i, x in enumerate(X):
        runs = 2 + (i * 5) % 7  # 2 to 8 runs per cell
        sd = 0.01 * (1 + 2 * (i % 2))  # 0.01 or 0.03: threefold
        for s in range(runs):
            rows.append({"x": x, "seed": s, "loss": 2 + 0.8 * x**TRUE_B + sd * rng.normal()})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", choices=BOOTSTRAP_KINDS, default=DEFAULT_BOOTSTRAP)
    args = ap.parse_args()
    n = 40 if args.quick else 200
    rng = np.random.default_rng(args.seed)
    tables = [table(rng) for _ in range(n)]
    print(f"bootstrap: {args.bootstrap}")
    print(f"{'weights':<17} {'tables':>6} {'coverage of b (95%)':>20} {'median width':>13}")
    for weights in ("cells", "runs", "inverse-variance"):
        hits, widths = 0, []
        for i, t in enumerate(tables):
            f = fr.fit(
                t, "w = L0 + a*x**b", weights=weights, intervals=True, seed=i,
                bootstrap=args.bootstrap,
            )  # fmt: skip
            lo, hi = f.intervals["b"]
            hits += lo <= TRUE_B <= hi
            widths.append(hi - lo)
        print(f"{weights:<17} {n:>6} {hits / n:>20.3f} {np.median(widths):>13.4f}", flush=True)


if __name__ == "__main__":
    main()
