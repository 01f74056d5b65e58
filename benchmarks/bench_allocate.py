"""How often ``fr.allocate``'s intervals cover the true compute-optimal allocation, by
simulation.

    python benchmarks/bench_allocate.py                  # 200 grids (covariance), 40 (bootstrap)
    python benchmarks/bench_allocate.py --grids 50 --bootstrap-grids 10   # quicker

Each grid is drawn from Hoffmann et al. 2022's law ``1.69 + 406.4/N**0.34 + 410.7/D**0.28``
on a Chinchilla-shaped design: 6 x 6 cells, N from 5e7 to 5e9 and D from 1e9 to 1e11 (both
log-spaced), 3 runs a cell with ``--noise`` (0.35%) log-normal noise; the same form is fitted
(correctly specified: the intervals carry the constants' uncertainty, which is all there is).
For C = 6*N*D at a budget inside the grid's range (1e19) and one beyond it (1e23: N* and D*
about 3x past the largest N and D), printed: how often the interval of N*, of D* and of the
exponent a = beta/(alpha+beta) covers the truth, for ``intervals="covariance"`` (delta method
on the Jacobian covariance) and ``intervals="bootstrap"`` (the fit's default studentized
bootstrap, ``--resamples`` refits). With n grids a coverage has a binomial standard error of
sqrt(p(1-p)/n): 1.5 points at n = 200 and p = 0.95, 3.4 points at n = 40.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
import pandas as pd

import fitrules as fr

TRUTH = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
LAW = "chin(N, D) = E + A/N**alpha + B/D**beta"
BUDGETS = (1e19, 1e23)


def true_allocation(budget: float) -> tuple[float, float, float]:
    """N*, D* and a of the truth for C = 6*N*D (Hoffmann et al.'s equation 4)."""
    t = TRUTH
    a = t["beta"] / (t["alpha"] + t["beta"])
    G = (t["alpha"] * t["A"] / (t["beta"] * t["B"])) ** (1 / (t["alpha"] + t["beta"]))
    n = G * (budget / 6) ** a
    return n, budget / (6 * n), a


def grid(rng: np.random.Generator, noise: float) -> pd.DataFrame:
    rows = []
    for n in np.geomspace(5e7, 5e9, 6):
        for d in np.geomspace(1e9, 1e11, 6):
            mu = TRUTH["E"] + TRUTH["A"] / n ** TRUTH["alpha"] + TRUTH["B"] / d ** TRUTH["beta"]
            for s in range(3):
                rows.append({"N": n, "D": d, "seed": s,
                             "loss": mu * math.exp(noise * rng.standard_normal())})  # fmt: skip
    return pd.DataFrame(rows)


def coverage(method: str, grids: int, noise: float, resamples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hits = {f"{what} at C={b:g}": 0 for b in BUDGETS for what in ("N*", "D*")}
    hits["exponent a"] = 0
    failed = 0
    widths = []
    for _ in range(grids):
        g = fr.load_grid(grid(rng, noise))
        try:
            # the bootstrap's refits only with its intervals (allocate refuses them otherwise)
            boot = {"resamples": resamples} if method == "bootstrap" else {}
            a = fr.allocate(g, LAW, budgets=list(BUDGETS), intervals=method, **boot)
        except fr.FitrulesError:
            failed += 1
            continue
        for b in BUDGETS:
            n, d, _ = true_allocation(b)
            r = a.at(b)
            hits[f"N* at C={b:g}"] += r["N_low"] <= n <= r["N_high"]
            hits[f"D* at C={b:g}"] += r["D_low"] <= d <= r["D_high"]
        e = a.exponents["N"]
        hits["exponent a"] += e["low"] <= true_allocation(1e20)[2] <= e["high"]
        widths.append(e["high"] - e["low"])
    done = grids - failed
    return {"grids": grids, "refused": failed,
            "coverage": {k: v / done for k, v in hits.items()},
            "width": float(np.median(widths))}  # fmt: skip


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as fh:
            kib = int(fh.readline().split()[1])
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{memory}, Python {platform.python_version()}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grids", type=int, default=200, help="grids for the covariance intervals")
    p.add_argument("--bootstrap-grids", type=int, default=40, help="grids for the bootstrap")
    p.add_argument("--resamples", type=int, default=200, help="bootstrap refits per grid")
    p.add_argument("--noise", type=float, default=0.0035)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print(f"machine: {machine()}; fitrules {fr.__version__}")
    truth = {b: true_allocation(b) for b in BUDGETS}
    print("truth: " + "; ".join(f"C={b:g}: N*={n:.4g}, D*={d:.4g}" for b, (n, d, _) in
                                truth.items()) + f"; a = {truth[BUDGETS[0]][2]:.4f}")  # fmt: skip
    for method, n in (("covariance", args.grids), ("bootstrap", args.bootstrap_grids)):
        if n <= 0:
            continue
        start = time.perf_counter()
        out = coverage(method, n, args.noise, args.resamples, args.seed)
        took = time.perf_counter() - start
        print(f"\n{method}: {out['grids']} simulated grids ({out['refused']} refused), "
              f"95% intervals, {took:.0f} s")  # fmt: skip
        for k, v in out["coverage"].items():
            print(f"  coverage of {k}: {100 * v:.1f}%")
        print(f"  median width of the interval of a: {out['width']:.4f}")


if __name__ == "__main__":
    main()
