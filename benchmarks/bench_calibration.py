"""Calibration of the tests fitrules prints, by simulation.

    python benchmarks/bench_calibration.py             # 200 null + 200 alternative grids
    python benchmarks/bench_calibration.py --grids 50  # quicker

1. The paired comparison of two forms over random splits. Null grids: 20 cells with
   covariates x1, x2 drawn afresh for each grid, truth ``2 + 0.05*x1 + 0.05*x2``, 3 seeds
   per cell with Gaussian noise, and the forms ``L0 + a*x1`` against ``L0 + b*x2``: equally
   good by construction, so any rejection is a false positive. Alternative grids: truth
   ``2 + 0.1*x1``, same forms; the first is the truth (and a weak alternative,
   ``2 + 0.05*x1 + 0.025*x2``, where the first is only closer). Each grid is compared on 300 random
   thirds (its own split seed), exactly as ``fitrules compare`` does. Printed: the rate at
   which p < 0.05 for the corrected resampled t test on log error ratios (what fitrules
   reports), the same test on raw differences, and the Wilcoxon signed-rank test over splits
   that fitrules used to print (pseudo-replicated).
2. Paired-seed intervals (``fitrules ci``): coverage of the 95% t interval and of the BCa
   bootstrap interval on normal differences, by number of pairs.
3. The test ``fitrules score`` makes between two forms' predictions on new runs
   (:func:`fitrules.ledger.compare_scored`): 5 new cells x 4 seeds, Gaussian seed noise;
   null: the two fixed predictions equally far from each cell's true mean (one above, one
   below); alternative: one prediction at the truth, the other 1.5 noise sd off.

Every rate is printed with its number of simulated grids or draws.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitrules.compare import compare  # noqa: E402
from fitrules.forms import Form  # noqa: E402
from fitrules.grids import load_grid  # noqa: E402
from fitrules.ledger import compare_scored  # noqa: E402
from fitrules.splits import RandomSplit  # noqa: E402
from fitrules.stats import corrected_resampled_t  # noqa: E402

FORMS = [Form("on_x1", "L0 + a*x1", ("x1",)), Form("on_x2", "L0 + b*x2", ("x2",))]


def synthetic_grid(rng, truth, cells: int = 20, seeds: int = 3, noise: float = 0.005):
    x1, x2 = rng.uniform(0, 1, cells), rng.uniform(0, 1, cells)
    mean = truth(x1, x2)
    rows = [
        {"x1": x1[i], "x2": x2[i], "seed": s, "loss": mean[i] + noise * rng.standard_normal()}
        for i in range(cells)
        for s in range(seeds)
    ]
    return load_grid("synthetic.csv", frame=pd.DataFrame(rows))


def one_grid(rng, truth, splits: int, split_seed: int) -> dict:
    cmp = compare(synthetic_grid(rng, truth), FORMS, RandomSplit(splits, 1 / 3, split_seed))
    row = cmp.paired.iloc[0]
    wide = cmp.results.pivot(index="split", columns="form", values="heldout_error_pct")
    d = (wide["on_x1"] - wide["on_x2"]).to_numpy()
    n_train, n_test = int(cmp.results["n_train"].iloc[0]), int(cmp.results["n_test"].iloc[0])
    nz = d[np.abs(d) > 1e-9]
    return {
        "log": row["p"],
        "raw": corrected_resampled_t(d, n_train, n_test)["p"],
        "wilcoxon": float(stats.wilcoxon(nz).pvalue) if len(nz) else 1.0,
        "first_better": row["ratio"] < 1,
    }


def rates(name: str, truth, n_grids: int, splits: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    out = [one_grid(rng, truth, splits, split_seed=i) for i in range(n_grids)]
    ps = pd.DataFrame(out)
    r = {k: float((ps[k] < 0.05).mean()) for k in ("log", "raw", "wilcoxon")}
    r["right_direction"] = float((ps["first_better"] & (ps["log"] < 0.05)).mean())
    print(
        f"{name}: {n_grids} grids x {splits} splits ({time.perf_counter() - t0:.0f} s)\n"
        f"  rejects at 0.05: corrected t on log ratios (fitrules) {r['log']:.3f}; "
        f"corrected t on raw differences {r['raw']:.3f}; Wilcoxon over splits (old) "
        f"{r['wilcoxon']:.3f}",
        flush=True,
    )
    return r


def interval_coverage(n_pairs: list[int], draws: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    print(f"paired-seed 95% intervals on normal differences, {draws} draws per row:")
    print("  pairs  t coverage  BCa coverage")
    for n in n_pairs:
        cov_t = cov_b = 0
        for _ in range(draws):
            d = rng.standard_normal(n)
            half = stats.t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)
            cov_t += abs(d.mean()) <= half
            ci = stats.bootstrap(
                (d,), np.mean, n_resamples=2000, method="BCa", random_state=rng
            ).confidence_interval
            cov_b += ci.low <= 0 <= ci.high
        print(f"  {n:5d}  {cov_t / draws:10.3f}  {cov_b / draws:12.3f}", flush=True)


def scored_rates(draws: int, seed: int = 2, cells: int = 5, seeds: int = 4) -> dict:
    """Rejection rates of compare_scored's t test under a null and an alternative."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, (off_a, off_b) in {"null": (-1.0, 1.0), "alternative": (0.0, 1.5)}.items():
        rejected = 0
        for _ in range(draws):
            truth = 2 + 0.1 * rng.standard_normal(cells)
            rows = []
            for c in range(cells):
                values = (truth[c] + 0.01 * rng.standard_normal(seeds)).tolist()
                for form, off in (("a", off_a), ("b", off_b)):
                    rows.append(
                        {"form": form, "point": {"x": float(c)}, "status": "scored",
                         "prediction": truth[c] + 0.01 * off, "values": values}
                    )  # fmt: skip
            p = compare_scored(pd.DataFrame(rows))["p"].iloc[0]
            rejected += p < 0.05
        out[name] = rejected / draws
    print(
        f"score's paired test on new runs ({cells} cells x {seeds} seeds, {draws} draws each): "
        f"rejects at 0.05 in {out['null']:.3f} under the null and {out['alternative']:.3f} "
        "under the alternative",
        flush=True,
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=200, help="grids per scenario (200)")
    ap.add_argument("--splits", type=int, default=300, help="random splits per grid (300)")
    ap.add_argument("--draws", type=int, default=400, help="draws per interval row (400)")
    args = ap.parse_args(argv)
    null = rates(
        "null (forms equally good)",
        lambda x1, x2: 2 + 0.05 * x1 + 0.05 * x2,
        args.grids,
        args.splits,
        seed=0,
    )
    alt = rates(
        "alternative (first form is the truth)",
        lambda x1, x2: 2 + 0.1 * x1,
        args.grids,
        args.splits,
        seed=1,
    )
    print(
        f"  of which the true form named better: {alt['right_direction']:.3f} ({args.grids} grids)"
    )
    weak = rates(
        "weak alternative (truth 2 + 0.05*x1 + 0.025*x2: the first form is closer)",
        lambda x1, x2: 2 + 0.05 * x1 + 0.025 * x2,
        args.grids,
        args.splits,
        seed=2,
    )
    print(
        f"  of which the closer form named better: {weak['right_direction']:.3f} "
        f"({args.grids} grids)"
    )
    ok = null["log"] <= 0.08 and alt["log"] > 0.5
    print(
        f"target: null rate <= 0.08 and alternative rate > 0.5: "
        f"{'met' if ok else 'NOT met'} ({null['log']:.3f}, {alt['log']:.3f})"
    )
    interval_coverage([3, 5, 11, 20, 30], args.draws)
    scored = scored_rates(5 * args.draws)
    ok = ok and scored["null"] <= 0.08
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
