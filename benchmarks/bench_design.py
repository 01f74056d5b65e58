"""Do designed cells pick the true form more often than the same runs at random cells?

    python benchmarks/bench_design.py              # 60 synthetic grids
    python benchmarks/bench_design.py --grids 20   # quicker

Each synthetic grid is the default grid's design (H 1, 4, 16, 64 x omega 0, 1, 3, 7, 15,
3 seeds) with losses from one of two forms, alternately the truth: composition
``L0 + a*omega*(H/16)**b`` and log_additive ``L0 + a*omega + b*log(H/16)``, each with the
constants it has on the committed default grid, plus Gaussian seed noise of the size seen
there. Both forms are fitted to the grid; then ``budget`` new runs are added either at the
cells ``fitrules design`` chooses (with the seeds it plans) or at candidate cells drawn at
random (3 seeds each, same number of runs), and simulated from the truth. The form whose
predictions (fixed before the new runs) have the smaller squared error on the new runs is
"picked". Printed: the rate at which the true form is picked each way, and the rate at which
the paired test on the new runs (``fitrules score``) says so at 0.05, with the number of
grids.
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

from fitrules.engine.fit import fit  # noqa: E402
from fitrules.jobs.design import design  # noqa: E402
from fitrules.jobs.design.candidates import candidate_cells  # noqa: E402
from fitrules.model.compiled import predict  # noqa: E402
from fitrules.model.forms import BUILTIN_FORMS  # noqa: E402
from fitrules.model.grids import default_grid, load_grid  # noqa: E402

FORMS = [BUILTIN_FORMS["composition"], BUILTIN_FORMS["log_additive"]]
H, OMEGA = (1, 4, 16, 64), (0, 1, 3, 7, 15)


def truths():
    path, where = default_grid()
    cells = load_grid(path, where=where).cells(["H", "omega"])
    out = {}
    for f in FORMS:
        out[f.name] = (f, fit(f, cells.X, cells.y).constants)
    sd = float(np.sqrt(np.mean(cells.table["std"] ** 2)))
    return out, sd


def runs_at(rng, form, consts, cells: list[tuple[float, float, int]], sd, first_seed=0):
    rows = []
    for h, om, n in cells:
        mu = predict(form, {"H": np.array([h]), "omega": np.array([om])}, consts)[0]
        rows += [
            {"H": h, "omega": om, "seed": first_seed + s, "loss": mu + sd * rng.standard_normal()}
            for s in range(n)
        ]
    return pd.DataFrame(rows)


def verdict(grid, new: pd.DataFrame, truth: str) -> tuple[bool, bool]:
    cells = grid.cells(["H", "omega"])
    X = {"H": new["H"].to_numpy(float), "omega": new["omega"].to_numpy(float)}
    y = new["loss"].to_numpy(float)
    err = {}
    for f in FORMS:
        p = predict(f, X, fit(f, cells.X, cells.y).constants)
        err[f.name] = (y - p) ** 2
    a, b = (f.name for f in FORMS)
    d = err[a] - err[b]
    picked = a if d.mean() < 0 else b
    p = stats.ttest_1samp(d, 0).pvalue if d.std() > 0 else 1.0
    return picked == truth, bool(picked == truth and p < 0.05)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=60)
    ap.add_argument("--budget", type=int, default=12)
    args = ap.parse_args(argv)
    forms, sd = truths()
    rng = np.random.default_rng(0)
    hits = {"designed": [0, 0], "random": [0, 0]}
    empty = 0
    t0 = time.perf_counter()
    for g in range(args.grids):
        truth = FORMS[g % 2].name
        form, consts = forms[truth]
        grid = load_grid(
            "synthetic.csv",
            frame=runs_at(rng, form, consts, [(h, o, 3) for h in H for o in OMEGA], sd),
        )
        d = design(grid, FORMS, budget=args.budget, splits=50, resamples=40, seed=g)
        chosen = [(r["H"], r["omega"], int(r["seeds"])) for r in d.chosen.to_dict("records")]
        used = sum(n for _, _, n in chosen)
        empty += not chosen
        cand = candidate_cells(grid.cells(["H", "omega"]), ("H", "omega"))
        # the same number of runs (at least one cell) at random candidates, 3 seeds each
        picks = rng.permutation(len(cand))[: max(1, round(used / 3))]
        random_cells = [(cand["H"].iloc[i], cand["omega"].iloc[i], 3) for i in picks]
        for name, cells in (("designed", chosen), ("random", random_cells)):
            if not cells:
                continue  # the design found no cell worth a run: counted as a miss
            new = runs_at(rng, form, consts, cells, sd, first_seed=3)
            right, significant = verdict(grid, new, truth)
            hits[name][0] += right
            hits[name][1] += significant
        if (g + 1) % 10 == 0:
            print(f"  {g + 1} grids ({time.perf_counter() - t0:.0f} s)", flush=True)
    n = args.grids
    print(
        f"{n} synthetic grids (truth alternately composition and log_additive), "
        f"a budget of {args.budget} new runs each (random cells get as many runs as the "
        f"design used), seed noise sd {sd:.4f}; {empty} grids where the design chose no cell:"
    )
    for name, (right, sig) in hits.items():
        se = np.sqrt(right / n * (1 - right / n) / n)
        print(
            f"  {name:8s} cells: true form picked in {right}/{n} = {right / n:.3f} "
            f"(s.e. {se:.3f}); picked and the paired test on the new runs p < 0.05: "
            f"{sig}/{n} = {sig / n:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
