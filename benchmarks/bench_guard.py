"""The wild-extrapolation guard on the default grid: runaways named, false alarms.

    python benchmarks/bench_guard.py              # 15 split seeds x 300 splits, 5 forms
    python benchmarks/bench_guard.py --seeds 3    # quicker

A runaway is a (split, form) fit whose held-out error is more than 10 times the form's median
held-out error (over every split with a finite error, flagged or not: a flagged fit is set
aside, but a guard that misses it would miss it when --keep-degenerate keeps it). The guard
sees only the training fit and the grid's design. Printed per form: splits, runaways, those
the guard missed (with their errors), and the false-alarm rate among the other fits; then
the same for the guard without its excursion rule (the rules before issue 18).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitrules.engine.guard import GuardOptions  # noqa: E402
from fitrules.jobs.compare import compare  # noqa: E402
from fitrules.model.forms import select_forms  # noqa: E402
from fitrules.model.grids import default_grid, load_grid  # noqa: E402
from fitrules.model.splits import RandomSplit  # noqa: E402

FIVE = ["composition", "additive", "free_omega", "omega_only", "log_additive"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=15, help="split seeds (15)")
    ap.add_argument("--splits", type=int, default=300, help="splits per seed (300)")
    args = ap.parse_args(argv)
    path, where = default_grid()
    grid = load_grid(path, where=where)
    forms = select_forms(FIVE)
    t0 = time.perf_counter()
    parts = []
    for seed in range(args.seeds):
        # no verdict needed: a verdict fraction giving no more training cells skips its fits
        r = compare(grid, forms, RandomSplit(args.splits, 1 / 3, seed), verdict_train_frac=0.34)
        parts.append(r.results.assign(seed=seed))
    res = pd.concat(parts, ignore_index=True)
    res = res[res["heldout_error_pct"].notna()]
    old = (res["span_ratio"] > GuardOptions().max_span) | (
        res["max_rel_se"] > GuardOptions().max_rel_se
    )
    print(
        f"guard on the default grid: {args.seeds} split seeds x {args.splits} random thirds "
        f"({time.perf_counter() - t0:.0f} s); runaway = held-out error > 10 x the form's median"
    )
    print("| form | splits | runaways | missed | false alarms | missed without excursion rule "
          "| false alarms without |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst_fa, missed_any = 0.0, 0
    for form, d in res.groupby("form", sort=False):
        run = d["heldout_error_pct"] > 10 * d["heldout_error_pct"].median()
        missed = run & ~d["wild"]
        fa = float((d["wild"] & ~run).sum() / max((~run).sum(), 1))
        o = old.loc[d.index]
        fa_old = float((o & ~run).sum() / max((~run).sum(), 1))
        worst_fa, missed_any = max(worst_fa, fa), missed_any + int(missed.sum())
        errs = ", ".join(f"{e:.0f}%" for e in d.loc[missed, "heldout_error_pct"])
        miss = f"{int(missed.sum())}" + (f" ({errs})" if errs else "")
        print(
            f"| {form} | {len(d)} | {int(run.sum())} | {miss} | {fa:.3f} | "
            f"{int((run & ~o).sum())} | {fa_old:.3f} |"
        )
    ok = missed_any == 0 and worst_fa <= 0.05
    print(f"target: no runaway missed, false alarms at most 5%: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
