"""Cost per cell of a fit on many cells (issue 27).

``fitrules fit`` of the three-constant form ``L0 + a*x**b`` on tables of 2,000, 20,000 and
200,000 one-run cells, each in a fresh process, beside a baseline made in the same run: a fresh
process that reads the same table with pandas and evaluates the form over its cells with numpy
once. Printed per size: wall time and peak resident memory of each, per cell, and their ratio.

    python benchmarks/bench_cells.py
    python benchmarks/bench_cells.py --sizes 2000,200000 --repeat 3

The target (issue 27): 200,000 cells in under 10 s and 1.5 GiB, cost linear in the cells.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

FIT = """
import json, resource, sys, time
t0 = time.perf_counter()
from fitrules.cli import main
code = main(["fit", "--data", sys.argv[1], "--form", "f = L0 + a*x**b", "-q"])
t = time.perf_counter() - t0
print(json.dumps({"code": code, "seconds": t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
BASELINE = """
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np, pandas as pd
d = pd.read_csv(sys.argv[1])
x = d["x"].to_numpy(float)
pred = 2.0 + 0.5 * x ** -0.3
sse = float(((pred - d["loss"].to_numpy(float)) ** 2).sum())
t = time.perf_counter() - t0
print(json.dumps({"code": 0, "seconds": t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(1, 100, n))
    return pd.DataFrame({"x": x, "loss": 2 + 0.5 * x**-0.3 * (1 + 0.01 * rng.standard_normal(n))})


def run(code: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000,200000")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest is shown")
    args = ap.parse_args(argv)
    print(f"{'cells':>8}  {'fit s':>7}  {'fit MiB':>8}  {'us/cell':>8}  {'KiB/cell':>8}  "
          f"{'numpy s':>8}  {'numpy MiB':>9}  {'time x':>7}  {'mem x':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"cells_{n}.csv"
            table(n).to_csv(path, index=False)
            fit = min((run(FIT, path) for _ in range(args.repeat)), key=lambda r: r["seconds"])
            base = min((run(BASELINE, path) for _ in range(args.repeat)),
                       key=lambda r: r["seconds"])  # fmt: skip
            if fit["code"] != 0:
                print(f"fit on {n} cells exited {fit['code']}")
                return 1
            print(
                f"{n:>8}  {fit['seconds']:>7.2f}  {fit['peak_mib']:>8.0f}  "
                f"{1e6 * fit['seconds'] / n:>8.1f}  {1024 * fit['peak_mib'] / n:>8.2f}  "
                f"{base['seconds']:>8.2f}  {base['peak_mib']:>9.0f}  "
                f"{fit['seconds'] / base['seconds']:>7.1f}  "
                f"{fit['peak_mib'] / base['peak_mib']:>6.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
