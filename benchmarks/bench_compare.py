"""Speed and optimum quality of fitrules against a naive multi-start baseline, same splits.

    python benchmarks/bench_compare.py            # all cases (several minutes)
    python benchmarks/bench_compare.py --quick    # fewer splits, for a smoke check
    python benchmarks/bench_compare.py --per-level  # only composition_per_h against composition

Per case it prints: the ratio baseline time / fitrules time, the fraction of fits where
fitrules' training objective is at or below the best the baseline found (within 1e-6,
relative), the same among the fits fitrules did not flag as degenerate, and fitrules' peak
memory (resident set of a child process that runs only the
fitrules part, minus its size after imports). Both sides use one BLAS thread.

The baseline is what a careful user writes by hand: per split, per form, scipy.optimize from
every point of a small grid of starts (least_squares for least-squares objectives,
L-BFGS-B with an analytic gradient for log-Huber), keeping the best.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import least_squares, minimize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fitrules.engine.fit import Objective, fit_splits  # noqa: E402
from fitrules.model.forms import BUILTIN_FORMS, Form  # noqa: E402
from fitrules.model.grids import default_grid, load_grid  # noqa: E402
from fitrules.model.splits import RandomSplit  # noqa: E402

# ------------------------------------------------------------------ the cases
# Hand-written numpy models for the baseline: it shares nothing with fitrules but the data.
MODELS = {
    "composition": (
        lambda X, p: p[0] + p[1] * X["omega"] * (X["H"] / 16) ** p[2],
        ["lin", "lin", "exp"],
    ),
    "additive": (
        lambda X, p: p[0] + p[1] * X["omega"] ** p[2] + p[3] * (X["H"] / 16) ** p[4],
        ["lin", "lin", "exp", "lin", "exp"],
    ),
    "free_omega": (
        lambda X, p: p[0] + p[1] * X["omega"] ** p[2] * (X["H"] / 16) ** p[3],
        ["lin", "lin", "exp", "exp"],
    ),
    "omega_only": (lambda X, p: p[0] + p[1] * X["omega"], ["lin", "lin"]),
    "log_additive": (
        lambda X, p: p[0] + p[1] * X["omega"] + p[2] * np.log(X["H"] / 16),
        ["lin", "lin", "lin"],
    ),
    # one intercept per level of H (1, 4, 16, 64 on the default grid)
    "composition_per_h": (
        lambda X, p: (
            np.choose(np.searchsorted([1, 4, 16, 64], X["H"]), p[:4])
            + p[4] * X["omega"] * (X["H"] / 16) ** p[5]
        ),
        ["lin", "lin", "lin", "lin", "lin", "exp"],
    ),
}
START = {"lin": (1.0,), "exp": (-1.0, 0.5, 2.0)}  # per kind of constant
BOUND = {"lin": (-np.inf, np.inf), "exp": (-10.0, 10.0)}  # fitrules' default bounds


def default_case():
    path, where = default_grid()
    grid = load_grid(path, where=where)
    cells = grid.cells(["H", "omega"])
    forms = [f.bind(grid.columns, grid.runs) for f in BUILTIN_FORMS.values()]
    return cells.X, cells.y, forms, Objective()


CHIN_TRUTH = (1.82, 482.01, 2085.43, 0.3478, 0.3658)


def chinchilla_case():
    """245 points shaped like Chinchilla's runs: E + A/N**alpha + B/D**beta, noisy."""
    rng = np.random.default_rng(0)
    N = np.geomspace(7e7, 1.6e10, 35)
    D_per_N = np.geomspace(2, 200, 7)
    NN, R = (a.ravel() for a in np.meshgrid(N, D_per_N))
    DD = NN * R
    E, A, B, al, be = CHIN_TRUTH
    y = (E + A / NN**al + B / DD**be) * np.exp(0.01 * rng.standard_normal(NN.size))
    form = Form(
        "chinchilla",
        "E + A/N**alpha + B/D**beta",
        ("N", "D"),
        start={"alpha": (0, 1.5), "beta": (0, 1.5)},
    )
    return {"N": NN, "D": DD}, y, [form], Objective("log_huber", 1e-3)


# ------------------------------------------------------------------ the baseline
def _huber(r, d):
    a = np.abs(r)
    return np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))


def baseline_chinchilla(X, y, masks, delta=1e-3):
    """L-BFGS-B on the summed log-Huber loss with an analytic gradient, 32 starts."""
    N, D = X["N"], X["D"]
    starts = list(
        itertools.product((1.5, 2.5), (100.0, 1000.0), (300.0, 3000.0), (0.2, 0.6), (0.2, 0.6))
    )
    best = []
    for m in masks:
        n, d, yy = N[m], D[m], y[m]
        ly = np.log(yy)

        def f(p, n=n, d=d, ly=ly):
            with np.errstate(all="ignore"):
                tn, td = n ** -p[3], d ** -p[4]
            pred = p[0] + p[1] * tn + p[2] * td
            if not np.all(np.isfinite(pred) & (pred > 0)):
                return 1e10, np.zeros(5)
            r = np.log(pred) - ly
            g = np.clip(r, -delta, delta) / pred  # d huber / d pred
            grad = np.array(
                [
                    g.sum(),
                    (g * tn).sum(),
                    (g * td).sum(),
                    (-g * p[1] * tn * np.log(n)).sum(),
                    (-g * p[2] * td * np.log(d)).sum(),
                ]
            )
            return _huber(r, delta).sum(), grad

        vals = [minimize(f, s, jac=True, method="L-BFGS-B").fun for s in starts]
        best.append(min(vals))
    return np.array(best)


def baseline_ls(form_name, X, y, masks):
    """least_squares (2-point Jacobian, scipy's default) from every start; relative LS.

    Exponents are bounded to [-10, 10] as in fitrules, so both solve the same problem.
    """
    model, kinds = MODELS[form_name]
    starts = list(itertools.product(*(START[k] for k in kinds)))
    bounds = ([BOUND[k][0] for k in kinds], [BOUND[k][1] for k in kinds])
    best = []
    for m in masks:
        Xm, ym = {k: v[m] for k, v in X.items()}, y[m]

        def res(p, Xm=Xm, ym=ym):
            with np.errstate(all="ignore"):
                r = (model(Xm, p) - ym) / ym
            return np.where(np.isfinite(r), r, 1e6)

        vals = []
        for s in starts:
            try:
                vals.append(2 * least_squares(res, np.array(s, float), bounds=bounds).cost)
            except ValueError:
                continue
        best.append(min(vals) if vals else np.inf)
    return np.array(best)


def run_baseline(case, masks):
    X, y, forms, obj = case
    out = {}
    for f in forms:
        if obj.kind == "log_huber":
            out[f.name] = baseline_chinchilla(X, y, masks, obj.delta)
        else:
            out[f.name] = baseline_ls(f.name, X, y, masks)
    return out


# ------------------------------------------------------------------ fitrules (in a child)
def run_fitrules(case, masks):
    X, y, forms, obj = case
    out = {}
    for f in forms:
        results = fit_splits(f, X, y, masks, obj)
        out[f.name] = np.array([r.objective for r in results])
        out[f.name + "/degenerate"] = np.array([r.degenerate for r in results])
    return out


def child(case_name: str, n_splits: int, out: str) -> None:
    case = CASES[case_name]()
    masks = RandomSplit(n_splits, 1 / 3, seed=0).masks(len(case[1]))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    objs = run_fitrules(case, masks)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.savez(out, **objs)
    print(json.dumps({"seconds": dt, "peak_mib": peak / 1024, "after_import_mib": rss0 / 1024}))


CASES = {"default": default_case, "chinchilla": chinchilla_case}


def measure(case_name: str, n_splits: int, baseline_splits: int) -> dict:
    out = Path(tempfile.gettempdir()) / f"fitrules_bench_{os.getpid()}_{case_name}.npz"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", case_name, str(n_splits), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    objs = dict(np.load(out))
    out.unlink()
    case = CASES[case_name]()
    masks = RandomSplit(n_splits, 1 / 3, seed=0).masks(len(case[1]))[:baseline_splits]
    t0 = time.perf_counter()
    base = run_baseline(case, masks)
    tb = (time.perf_counter() - t0) * n_splits / baseline_splits
    ok = total = ok_wp = total_wp = 0
    for name, b in base.items():
        f = objs[name][:baseline_splits]
        well_posed = ~objs[name + "/degenerate"][:baseline_splits]
        at_or_below = f <= b * (1 + 1e-6) + 1e-15
        ok += int(at_or_below.sum())
        total += len(b)
        ok_wp += int(at_or_below[well_posed].sum())
        total_wp += int(well_posed.sum())
    return {
        "case": case_name,
        "splits": n_splits,
        "baseline_splits": baseline_splits,
        "fitrules_s": info["seconds"],
        "baseline_s": tb,
        "ratio": tb / info["seconds"],
        "at_or_below": ok / total,
        "fits_compared": total,
        "at_or_below_well_posed": ok_wp / max(total_wp, 1),
        "well_posed_fits": total_wp,
        "peak_mib": info["peak_mib"] - info["after_import_mib"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="30 splits per case, for a smoke run")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument(
        "--per-level", action="store_true", help="only the per-level speed row (composition_per_h)"
    )
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return
    if args.per_level:
        main_per_level(args.quick)
        return
    plan = [("default", 300, 300), ("chinchilla", 300, 300), ("default", 10_000, 300)]
    if args.quick:
        plan = [("default", 30, 30), ("chinchilla", 30, 30), ("default", 1000, 30)]
    print(
        f"{'case':<11} {'splits':>6} {'fitrules s':>10} {'baseline s':>11} {'ratio':>7} "
        f"{'<= baseline':>11} {'(not flagged)':>13} {'peak MiB':>9}"
    )
    for name, n, nb in plan:
        r = measure(name, n, nb)
        note = "" if nb == n else f"  (baseline timed on {nb} splits, scaled to {n})"
        print(
            f"{r['case']:<11} {r['splits']:>6} {r['fitrules_s']:>10.2f} {r['baseline_s']:>11.1f} "
            f"{r['ratio']:>6.0f}x {100 * r['at_or_below']:>10.2f}% "
            f"{100 * r['at_or_below_well_posed']:>12.2f}% {r['peak_mib']:>9.0f}{note}",
            flush=True,
        )
    main_per_level(args.quick)


def per_level_speed(n_splits: int, repeats: int = 3) -> dict:
    """Seconds to fit composition and composition_per_h (one intercept per level of H) on
    the same splits of the default grid, best of ``repeats``, in this process."""
    X, y, forms, obj = default_case()
    by_name = {f.name: f for f in forms}
    masks = RandomSplit(n_splits, 1 / 3, seed=0).masks(len(y))
    out = {}
    for name in ("composition", "composition_per_h"):
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            fit_splits(by_name[name], X, y, masks, obj)
            best = min(best, time.perf_counter() - t0)
        out[name] = best
    return out


def main_per_level(quick: bool) -> None:
    print()
    print("per-level constants: composition_per_h (L0[H], 6 constants) against composition "
          "(3 constants), same splits, best of 3 runs each")  # fmt: skip
    print(f"{'splits':>6} {'composition s':>13} {'per-level s':>11} {'ratio':>6}")
    for n in (30, 300) if quick else (300, 3000):
        t = per_level_speed(n)
        ratio = t["composition_per_h"] / t["composition"]
        print(f"{n:>6} {t['composition']:>13.3f} {t['composition_per_h']:>11.3f} {ratio:>5.2f}x",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
