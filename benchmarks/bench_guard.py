"""The wild-extrapolation guard on the default grid: runaways named, false alarms.

    python benchmarks/bench_guard.py              # 15 split seeds x 300 splits, 5 forms
    python benchmarks/bench_guard.py --seeds 3    # quicker
    python benchmarks/bench_guard.py --published  # also the public grids' extrapolations

A runaway is a (split, form) fit whose held-out error is more than 10 times the form's median
held-out error (over every split with a finite error, flagged or not: a flagged fit is set
aside, but a guard that misses it would miss it when --keep-degenerate keeps it). The guard
sees only the training fit and the grid's design. Printed per form: splits, runaways, those
the guard missed (with their errors), and the false-alarm rate among the other fits; then
the same for the guard without its excursion rule (the rules before issue 18).

``--published``: the public grids of ``data/external/published.toml`` whose question is an
extrapolation (``search.split`` ``extrapolate:COL``), read from ``../shared/external`` when
present: each published law, fitted as the plain route fits it (one fit per group where the
authors fitted per group) at every rolling-origin cut of its training runs, the held-out
levels scored. The law is right there, so a fit named wild that is not a runaway is a false
alarm of an extrapolation that carries a real trend on.
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
ROOT = Path(__file__).resolve().parents[1]


def published_rows() -> pd.DataFrame:
    """One row per (grid, group, cut): the published law's held-out error and the guard's
    verdict on its training fit (see the module)."""
    import tomllib

    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_published as bp

    from fitrules.engine.fit import Objective
    from fitrules.engine.guard import turns_back
    from fitrules.model.compiled import CompiledForm
    from fitrules.model.forms import Form
    from fitrules.model.splits import RollingOrigin

    catalogue = tomllib.loads(bp.CATALOGUE.read_text())
    dirs = [ROOT / "data" / "external", ROOT.parent / "shared" / "external"]
    rows = []
    for name, entry, path in bp.present(list(catalogue), catalogue, dirs):
        split = entry.get("search", {}).get("split", "")
        head, expr = entry["form"].split("=", 1)
        variables = tuple(head[head.index("(") + 1 : head.index(")")].replace(" ", "").split(","))
        column = split.partition(":")[2]
        if not split.startswith("extrapolate:") or column not in variables:
            continue  # a law of derived variables cannot be cut along the asked column
        opts = bp.plain_fit_options(entry, entry["form"])
        form = Form(head[: head.index("(")].strip(), expr.strip(), variables,
                    bounds=opts.get("bounds", {}))  # fmt: skip
        table = bp._table(entry, path).query(entry["train"])
        group = entry.get("group")
        for g in [None] if not group else sorted(table[group].unique().tolist()):
            part = table if g is None else table[table[group] == g]
            grid = load_grid(part, metric=entry["metric"],
                             seed_col="run" if "run" in part else None)  # fmt: skip
            with np.errstate(all="ignore"):
                r = compare(grid, [form], RollingOrigin(column),
                            objective=Objective(opts["objective"]))  # fmt: skip
            res = r.results[r.results["form"] == form.name]
            # shape sense (issue 41) on the same fits: a right law should not turn back
            bound = form.bind(grid.columns, grid.runs)
            cells = grid.cells(list(bound.bound_variables))
            cf = CompiledForm(bound)
            params = np.array([[c.get(k, np.nan) for k in cf.s.constants]
                               for c in res["constants"]], float)  # fmt: skip
            split = RollingOrigin(column)
            turned = turns_back(cf, cells.X, cells.y, split.masks_for(cells.table),
                                split.tests_for(cells.table), params, column)  # fmt: skip
            cols = zip(res["heldout_error"], res["wild"], turned, strict=True)
            rows += [dict(grid=name, group=g, error=e, wild=w, turned=bool(t)) for e, w, t in cols]
    return pd.DataFrame(rows)


def main_published() -> None:
    d = published_rows()
    if d.empty:
        print("published grids: none present (../shared/external); skipped")
        return
    print("\npublished laws at rolling-origin cuts of their grids' extrapolation (the law is right"
          " there; runaway = held-out error > 10 x the grid's median):")  # fmt: skip
    print("| grid | fits | named wild | runaways | missed | false alarms | turned back (shape "
          "sense, a false alarm on a right law) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, g in d.groupby("grid", sort=False):
        run = g["error"] > 10 * g["error"].median()
        fa = int((g["wild"] & ~run).sum())
        rate = fa / max(int((~run).sum()), 1)
        print(f"| {name} | {len(g)} | {int(g['wild'].sum())} | {int(run.sum())} | "
              f"{int((run & ~g['wild']).sum())} | {fa} ({rate:.3f}) | "
              f"{int(g['turned'].sum())} |")  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=15, help="split seeds (15)")
    ap.add_argument("--splits", type=int, default=300, help="splits per seed (300)")
    ap.add_argument("--published", action="store_true",
                    help="also the published laws on the public grids' extrapolations")  # fmt: skip
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
    res = res[res["heldout_error"].notna()]
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
        run = d["heldout_error"] > 10 * d["heldout_error"].median()
        missed = run & ~d["wild"]
        fa = float((d["wild"] & ~run).sum() / max((~run).sum(), 1))
        o = old.loc[d.index]
        fa_old = float((o & ~run).sum() / max((~run).sum(), 1))
        worst_fa, missed_any = max(worst_fa, fa), missed_any + int(missed.sum())
        errs = ", ".join(f"{e:.0f}%" for e in d.loc[missed, "heldout_error"])
        miss = f"{int(missed.sum())}" + (f" ({errs})" if errs else "")
        print(
            f"| {form} | {len(d)} | {int(run.sum())} | {miss} | {fa:.3f} | "
            f"{int((run & ~o).sum())} | {fa_old:.3f} |"
        )
    ok = missed_any == 0 and worst_fa <= 0.05
    print(f"target: no runaway missed, false alarms at most 5%: {'met' if ok else 'NOT met'}")
    if args.published:
        main_published()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
