"""Coverage of profile-likelihood and Wald intervals on small simulated grids (issue 44).

Two laws on small grids where the Jacobian's quadratic picture may be poor (see LAWS):

- Chinchilla-shaped, ``E + A*(N/1e8)**-alpha + B*(D/1e10)**-beta``, 4 N x 4 D, one run a
  cell, 1% multiplicative Gaussian noise: Chinchilla's exponents, and small exponents
  (each term nearly a constant over the grid, the floor E far from identified);
- DiLoCo-shaped, ``L0 + a*omega*(H/16)**b``, 4 H x 4 omega, one run a cell, 0.5% noise,
  with the floor L0 near the data.

Each grid is fitted as ``fitrules fit`` fits it (the global fit, relative least squares);
the Wald interval is ``value +- t se`` with the Jacobian standard error on n - p degrees of
freedom, the profile interval is :func:`fitrules.engine.profile.profile_intervals`. Printed:
per constant, each kind's coverage of the true value, its mean width (finite intervals) and
how many were open, the number of simulated grids, and the machine.

    python benchmarks/bench_profile.py            # 200 grids of each law (about 10 min)
    python benchmarks/bench_profile.py --grids 20 # a quick look
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
from scipy import stats

from fitrules.engine.fit import Objective, fit
from fitrules.engine.intervals import jacobian_uncertainty
from fitrules.engine.profile import profile_intervals
from fitrules.model.forms import Form


def _chinchilla(alpha: float, beta: float, steps: list[float]) -> dict:
    """Chinchilla's form with exponents ``alpha`` and ``beta``, N and D at ``steps`` times
    1e8 and 1e10."""
    return dict(
        expr="E + A*(N/1e8)**(-alpha) + B*(D/1e10)**(-beta)",
        variables=("N", "D"),
        truth={"E": 1.69, "A": 0.775, "alpha": alpha, "B": 0.65, "beta": beta},
        axes={"N": 1e8 * np.array(steps), "D": 1e10 * np.array(steps)},
        noise=0.01,
        show=("alpha", "E"),
    )


LAWS = {
    # the brief's shape: Chinchilla's exponents, N and D over 15x each
    "chinchilla": _chinchilla(0.34, 0.28, [1.0, 2.5, 6.0, 15.0]),
    # small exponents: each power term is nearly a constant over the grid, so the floor E
    # trades off against A and B far along a curved valley (a pilot run, another seed, chose it)
    "chinchilla-small-exponents": _chinchilla(0.15, 0.12, [1.0, 4.0, 16.0, 64.0]),
    # the floor L0 near the data: the H term is at most 4% of the loss
    "diloco": dict(
        expr="L0 + a*omega*(H/16)**b",
        variables=("H", "omega"),
        truth={"L0": 3.0, "a": 0.02, "b": 0.5},
        axes={"H": np.array([1.0, 4.0, 16.0, 64.0]), "omega": np.array([0.25, 0.5, 1.0, 3.0])},
        noise=0.005,
        show=("b", "L0"),
    ),
}  # fmt: skip


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = math.nan
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def one_grid(law: dict, rng: np.random.Generator, level: float, objective: str = "rel_ls"):
    form = Form("law", law["expr"], law["variables"]).bind(list(law["variables"]))
    mesh = np.meshgrid(*(law["axes"][v] for v in law["variables"]), indexing="ij")
    X = {v: m.ravel() for v, m in zip(law["variables"], mesh, strict=True)}
    truth = law["truth"]
    mean = form_predict(form, X, truth)
    y = mean * (1 + law["noise"] * rng.standard_normal(len(mean)))
    obj = Objective(objective)
    r = fit(form, X, y, obj)
    if not math.isfinite(r.objective):
        return None
    u = jacobian_uncertainty(form, X, y, r.constants, obj)
    t = stats.t.ppf(0.5 + level / 2, max(u.dof, 1))
    wald = {c: (r.constants[c] - t * s, r.constants[c] + t * s) for c, s in u.stderr.items()}
    prof = profile_intervals(form, X, y, r.constants, obj, level)
    return truth, wald, prof.intervals


def form_predict(form, X, constants):
    from fitrules.model.compiled import predict

    return predict(form, X, constants)


def run(name: str, law: dict, grids: int, level: float, seed: int, objective: str = "rel_ls"):
    rng = np.random.default_rng(seed)
    tally = {k: {c: [] for c in law["truth"]} for k in ("wald", "profile")}
    failed = 0
    start = time.perf_counter()
    for _ in range(grids):
        out = one_grid(law, rng, level, objective)
        if out is None:
            failed += 1
            continue
        truth, wald, prof = out
        for kind, iv in (("wald", wald), ("profile", prof)):
            for c, (lo, hi) in iv.items():
                tally[kind][c].append((lo <= truth[c] <= hi, hi - lo))
    took = time.perf_counter() - start
    print(f"\n{name}: {law['expr']}, {len(next(iter(tally['wald'].values())))} grids "
          f"simulated and fitted ({failed} failed fits), "
          f"{' x '.join(str(len(a)) for a in law['axes'].values())} cells, one run a cell, "
          f"{100 * law['noise']:g}% noise, objective {objective}, level {level:g}; "
          f"{took:.0f} s")  # fmt: skip
    print("coverage over every grid (an open profile side covers what lies beyond it); "
          "mean widths over the grids where both intervals are closed; open: profile "
          "intervals with a side open")  # fmt: skip
    print(f"{'constant':>9} {'truth':>7} | {'Wald cover':>10} {'mean width':>10} | "
          f"{'profile cover':>13} {'mean width':>10} {'open':>5}")  # fmt: skip
    for c in law["truth"]:
        w, p = np.array(tally["wald"][c]), np.array(tally["profile"][c])
        pf = np.isfinite(p[:, 1])
        both = pf & np.isfinite(w[:, 1])
        mark = " *" if c in law["show"] else ""
        ww, pw = (w[both, 1].mean(), p[both, 1].mean()) if both.any() else (math.nan,) * 2
        print(f"{c:>9} {law['truth'][c]:>7g} | {w[:, 0].mean():>10.3f} "
              f"{ww:>10.4g} | {p[:, 0].mean():>13.3f} "
              f"{pw:>10.4g} {int((~pf).sum()):>5}{mark}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=200, help="simulated grids per law")
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--laws", default=",".join(LAWS))
    ap.add_argument("--objective", default="rel_ls", help="rel_ls (default) or log_huber")
    a = ap.parse_args()
    print(f"machine: {machine()}")
    for name in a.laws.split(","):
        run(name, LAWS[name], a.grids, a.level, a.seed, a.objective)
    print("\n* the constants the issue asks about (an exponent and a floor)")


if __name__ == "__main__":
    main()
