"""Memory estimates against measured peaks: compare and fit at growing numbers of cells.

    python benchmarks/bench_memory.py              # 1,000 / 6,000 / 20,000 cells
    python benchmarks/bench_memory.py --cells 1000 --splits 50

fitrules refuses a request whose estimated memory exceeds its budget (see
fitrules.base.limits.check_memory) before anything large is allocated; the estimate is only
useful if it holds. Each case runs in a child process on a synthetic grid (one run per cell
at random H in [1, 64] and omega in [0.1, 15], losses from the composition rule plus seeded
noise): the child loads the grid, resets its peak resident set size (Linux: writing 5 to
/proc/self/clear_refs), runs ``fr.compare`` (default: composition and log_additive, 300
splits; ``--forms composition,additive`` for a two-exponent form, whose shared grid of 41 x 41
points makes 20,000 cells exceed the 8 GiB cap) or ``fr.fit`` (default: composition), and
reports its peak RSS minus its RSS before the call. Printed per case: the estimate
(``compare_memory`` / ``fit_memory``), the measured
peak, their ratio (target: within 1.5x either way) and the wall time. Last, a request far
over the budget (``fit`` of additive on 200,000 cells: its shared grid alone is 41 x 41
points x 200,000 cells x 3 x 3) must be refused before it allocates: printed are the
estimate, the time to the refusal and the RSS it added.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
FORMS = ["composition", "log_additive"]  # one and no nonlinear constant: 20,000 cells fit
FIT_FORM = "composition"


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _grid(n: int, seed: int):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    H = rng.uniform(1, 64, n)
    omega = rng.uniform(0.1, 15, n)
    loss = 2.2 + 0.012 * omega * (H / 16) ** 0.5 + 0.002 * rng.standard_normal(n)
    return pd.DataFrame({"H": H, "omega": omega, "seed": 0, "loss": loss})


def child(kind: str, n: int, splits: int, seed: int, forms_arg: str, fit_form: str) -> dict:
    import fitrules as fr
    from fitrules.base.errors import LimitError
    from fitrules.engine.fit import fit_memory
    from fitrules.jobs.compare.job import compare_memory
    from fitrules.model.forms import BUILTIN_FORMS
    from fitrules.model.splits import RandomSplit

    FORMS, FIT_FORM = forms_arg.split(","), fit_form
    g = fr.load_grid(_grid(n, seed))
    if kind == "compare":
        # the same estimate compare makes before fitting: its splits fit a third of the cells
        forms = [BUILTIN_FORMS[f].bind(g.columns) for f in FORMS]
        n_train = int(RandomSplit(1, 1 / 3, seed).masks(n).sum())
        estimate = compare_memory(forms, n, splits, n_train=n_train)
    else:
        estimate = fit_memory(BUILTIN_FORMS[FIT_FORM].bind(g.columns), n, 1)
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets the peak (VmHWM) to the current RSS
    t0 = time.perf_counter()
    refused = None
    try:
        if kind == "compare":
            fr.compare(g, list(FORMS), splits, seed=seed)
        else:
            fr.fit(g, FIT_FORM)
    except LimitError as err:
        refused = str(err)
    return {
        "kind": kind,
        "cells": n,
        "splits": splits if kind == "compare" else 1,
        "estimate": estimate,
        "peak": _status("VmHWM") - before,
        "seconds": time.perf_counter() - t0,
        "refused": refused,
    }


def run_case(kind: str, n: int, splits: int, seed: int, forms: str, fit_form: str) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            kind,
            str(n),
            str(splits),
            str(seed),
            forms,
            fit_form,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} at {n} cells failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[1_000, 6_000, 20_000])
    ap.add_argument("--splits", type=int, default=300, help="random splits of compare (300)")
    ap.add_argument("--refuse-cells", type=int, default=200_000)
    ap.add_argument("--refuse-form", default="additive", help="form of the refused fit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--forms", default=",".join(FORMS), help="forms compared")
    ap.add_argument("--fit-form", default=FIT_FORM, help="form fitted")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, n, splits, seed, forms, fit_form = args.child
        print(json.dumps(child(kind, int(n), int(splits), int(seed), forms, fit_form)))
        return 0

    from fitrules.base.limits import memory_budget

    print(f"memory budget now: {_mib(memory_budget())} MiB; compare: {args.forms}; "
          f"fit: {args.fit_form}")  # fmt: skip
    print("| command | cells | splits | estimate MiB | measured peak MiB | estimate / peak | s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst = 1.0
    for n in args.cells:
        for kind in ("compare", "fit"):
            r = run_case(kind, n, args.splits, args.seed, args.forms, args.fit_form)
            if r["refused"]:
                print(f"| {kind} | {n:,} | {r['splits']} | {_mib(r['estimate'])} | refused: "
                      f"{r['refused']} | | {r['seconds']:.1f} |")  # fmt: skip
                continue
            ratio = r["estimate"] / max(r["peak"], 1)
            worst = max(worst, ratio, 1 / ratio)
            print(
                f"| {kind} | {n:,} | {r['splits']} | {_mib(r['estimate'])} | {_mib(r['peak'])} "
                f"| {ratio:.2f} | {r['seconds']:.1f} |",
                flush=True,
            )
    r = run_case("fit", args.refuse_cells, 1, args.seed, args.forms, args.refuse_form)
    print(
        f"\nfit of {args.refuse_form} on {args.refuse_cells:,} cells: estimate "
        f"{_mib(r['estimate'])} MiB; "
        + (
            f"refused after {r['seconds']:.2f} s, RSS grew {_mib(r['peak'])} MiB: {r['refused']}"
            if r["refused"]
            else f"NOT refused (peak {_mib(r['peak'])} MiB)"
        )
    )
    print(f"worst ratio either way: {worst:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
