"""Does fitrules reach the global optimum? A corpus of (form, grid, bounds) cases against an
independent 200-start scipy reference (issue 27).

Each case: a grid simulated from a known law with seeded noise (or a published grid when it is
present), a form fitted on all its cells by ``fitrules.engine.fit.fit`` with its default ranges (or
with bounds), and the same problem given to ``benchmarks/reference.py``: scipy's
``least_squares`` (trust-region reflective, inside the bounds) from 200 random starts. The case
passes when fitrules' objective is within 1e-9 relative of the reference's, or below it.

    python benchmarks/bench_fit_corpus.py                  # every case (about 250)
    python benchmarks/bench_fit_corpus.py --quick          # one seed of each family
    python benchmarks/bench_fit_corpus.py --starts 50 --out corpus.csv

Prints the count of cases within tolerance, the worst ratio, and the total time ratio
(scipy's time over fitrules', both measured in this run on this machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import multistart  # noqa: E402

from fitrules.engine.fit import Objective, fit  # noqa: E402
from fitrules.model.forms import parse_form_line  # noqa: E402

TOL = 1e-9


@dataclass
class Case:
    family: str
    form: str  # "name(vars) = expr"
    table: pd.DataFrame
    objective: str = "rel_ls"
    bounds: dict = field(default_factory=dict)
    start_box: dict = field(default_factory=dict)  # the reference's starting box (its user)
    metric: str = "loss"


def _split(form: str):
    head, expr = form.split("=", 1)
    variables = head[head.index("(") + 1 : head.index(")")].replace(" ", "").split(",")
    return expr.strip(), variables


# ------------------------------------------------------------------ grids
def _diloco(seed: int, truth: str, noise: float = 0.005) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    h, keep = np.meshgrid([1.0, 4.0, 16.0, 64.0], [1.0, 0.5, 0.25, 0.125, 0.0625])
    h, keep = h.ravel(), keep.ravel()
    w = 1 / keep - 1
    law = {
        "composition": 2.0 + 0.012 * w * (h / 16) ** 0.55,
        "additive": 2.0 + 0.01 * w**0.8 + 0.02 * (h / 16) ** 0.4,
        "free_omega": 2.0 + 0.012 * w**0.7 * (h / 16) ** 0.5,
        "log_additive": 2.0 + 0.01 * w + 0.01 * np.log(h / 16),
    }[truth]
    y = law * (1 + noise * rng.standard_normal(h.shape))
    return pd.DataFrame({"H": h, "omega": w, "loss": y})


def _chinchilla(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n, d = np.meshgrid(np.geomspace(7e7, 1.6e10, 8), np.geomspace(5e9, 5e11, 7))
    n, d = n.ravel(), d.ravel()
    y = 1.82 + 482.0 / n**0.348 + 2085.0 / d**0.366
    return pd.DataFrame({"N": n, "D": d, "loss": y * (1 + 0.004 * rng.standard_normal(n.shape))})


def _kaplan(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.geomspace(1e7, 1.5e9, 14)
    y = (8.8e13 / n) ** 0.076
    return pd.DataFrame({"N": n, "loss": y * (1 + 0.002 * rng.standard_normal(n.shape))})


def _parscale(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n, p = np.meshgrid([5.4e8, 1.0e9, 1.8e9, 2.8e9, 4.4e9], [1.0, 2.0, 4.0, 8.0])
    n, p = n.ravel(), p.ravel()
    a = 10 ** rng.uniform(7, 8.3)
    y = 1.2 + (a / (n * (0.39 * np.log(p) + 1))) ** 0.2
    return pd.DataFrame({"N": n, "P": p, "loss": y * (1 + 0.002 * rng.standard_normal(n.shape))})


def _saturating(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    h, keep = np.meshgrid([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], [1.0, 0.5, 0.25, 0.125])
    h, keep = h.ravel(), keep.ravel()
    w = 1 / keep - 1
    y = 2.0 + 0.02 * w * h / (h + 6.0)
    return pd.DataFrame(
        {"H": h, "omega": w, "loss": y * (1 + 0.003 * rng.standard_normal(h.shape))}
    )


def _rectified(seed: int) -> pd.DataFrame:
    """The SFT rectified law's shape (Lin et al. 2024): B/(Dl + D**beta) + E."""
    rng = np.random.default_rng(seed)
    d = 200.0 * 2.0 ** np.arange(12)
    y = 320.0 / (1300.0 + d**0.68) + 1.75
    return pd.DataFrame({"D": d, "loss": y * (1 + 0.002 * rng.standard_normal(d.shape))})


DC_FILE = (
    Path(__file__).resolve().parents[1].parent / "shared/external/data_constrained_muennighoff.csv"
)
MUEN = (
    "muen(UN, RN, U, RD) = E + A*(UN*(1 + rn*(1 - exp(-RN/rn))))**(-alpha)"
    " + B*(U*(1 + rd*(1 - exp(-RD/rd))))**(-beta)"
)


def _data_constrained() -> pd.DataFrame | None:
    path = DC_FILE
    local = Path(__file__).resolve().parents[1] / "data/external/data_constrained_muennighoff.csv"
    if local.exists():
        path = local
    if not path.exists():
        return None
    d = pd.read_csv(path)
    d["UN"] = (0.051 * d.U + d.N - np.sqrt((0.051 * d.U - d.N) ** 2)) / 2
    d["RN"] = d.N / d.UN - 1
    d["RD"] = d.D / d.U - 1
    return d.query("D < 6e11 and N < 4.2e9").reset_index(drop=True)


# ------------------------------------------------------------------ the corpus
DILOCO_FORMS = {
    "composition": "composition(H, omega) = L0 + a*omega*(H/16)**b",
    "additive": "additive(H, omega) = L0 + a*omega**c + b*(H/16)**d",
    "free_omega": "free_omega(H, omega) = L0 + a*omega**c*(H/16)**b",
    "omega_only": "omega_only(omega) = L0 + a*omega",
    "log_additive": "log_additive(H, omega) = L0 + a*omega + b*log(H/16)",
}
EXPONENT_BOX = (-3.0, 3.0)  # the reference's starting box for an exponent


def corpus(seeds: range) -> list[Case]:
    truths = ["composition", "additive", "free_omega", "log_additive"]
    cases: list[Case] = []
    for s in seeds:
        table = _diloco(s, truths[s % 4])
        for name, form in DILOCO_FORMS.items():
            for obj in ("rel_ls", "abs_ls", "log_huber"):
                cases.append(Case(f"diloco/{name}", form, table, obj))
        # bounded: a bound that binds, and bounds that keep exponents in a physical range
        cases.append(Case("diloco/composition b<=0.3", DILOCO_FORMS["composition"], table,
                          bounds={"b": (0.0, 0.3)}))  # fmt: skip
        cases.append(Case("diloco/additive bounded", DILOCO_FORMS["additive"], table,
                          bounds={"c": (0.5, 2.0), "d": (-2.0, 0.3)}))  # fmt: skip
        cases.append(Case("diloco/free_omega bounded", DILOCO_FORMS["free_omega"], table,
                          bounds={"c": (0.9, 1.1), "b": (0.0, 2.0)}))  # fmt: skip
    chin = "chinchilla(N, D) = E + A/N**alpha + B/D**beta"
    kap = "kaplan(N) = (Nc/N)**alphaN"
    par = "parscale(N, P) = E + (A/(N*(k*log(P) + 1)))**alpha"
    sat = "saturating(H, omega) = L0 + a*omega*H/(H + s)"
    rect = "rectified(D) = B/(Dl + D**beta) + E"
    for s in seeds:
        t = _chinchilla(s)
        for obj in ("abs_ls", "log_huber"):
            cases.append(Case("chinchilla", chin, t, obj))
        cases.append(Case("chinchilla bounded", chin, t, "log_huber",
                          bounds={"alpha": (0.0, 1.0), "beta": (0.0, 1.0)}))  # fmt: skip
        t = _kaplan(s)
        cases.append(Case("kaplan", kap, t, "rel_ls", start_box={"Nc": (1e10, 1e16)}))
        cases.append(Case("kaplan bounded", kap, t, "rel_ls", bounds={"Nc": (1e10, 1e16)}))
        t = _parscale(s)
        cases.append(Case("parscale", par, t, "abs_ls", start_box={"A": (1e3, 1e12)}))
        cases.append(Case("parscale bounded", par, t, "abs_ls", bounds={"A": (1.0, 1e12)}))
        cases.append(Case("saturating", sat, _saturating(s), "rel_ls",
                          start_box={"s": (0.1, 100.0)}))  # fmt: skip
        # bounded from 0 over decades, its optimum near 1e3 (as in the SFT grid's groups)
        cases.append(Case("rectified bounded", rect, _rectified(s), "abs_ls",
                          bounds={"Dl": (0.0, 1e8), "beta": (0.0, 3.0)},
                          start_box={"B": (1.0, 1e4), "E": (0.0, 4.0)}))  # fmt: skip
    dc = _data_constrained()
    if dc is not None:
        box = {"E": (0, 5), "A": (1, 1e4), "B": (1, 1e5), "alpha": (0, 1), "beta": (0, 1)}
        cases.append(Case("data-constrained", MUEN, dc, "abs_ls",
                          start_box={**box, "rn": (-10, 50), "rd": (-10, 50)}))  # fmt: skip
        for hi in (1000.0, 30.0, 10.0):
            b = {"rn": (0.1, 1000.0), "rd": (0.1, hi)}
            cases.append(Case(f"data-constrained rd<={hi:g}", MUEN, dc, "abs_ls", bounds=b,
                              start_box=box))  # fmt: skip
    return cases


def case_inputs(case: Case):
    """The case's bound form (its bounds applied), its variables' columns and its metric:
    what ``fit(form, X, y, objective)`` takes (also bench_engine.py's objectives)."""
    _, variables = _split(case.form)
    form = parse_form_line(case.form)
    if case.bounds:
        from dataclasses import replace

        form = replace(form, bounds=case.bounds)
    form = form.bind(case.table.columns, case.table)
    X = {v: case.table[v].to_numpy(float) for v in variables}
    return form, X, case.table[case.metric].to_numpy(float)


def reference_inputs(case: Case, form) -> dict:
    """The case as the reference reads it: expression, variables, constants, bounds and
    starting box (the arguments of ``reference.multistart`` and ``reference.Problem``)."""
    expr, variables = _split(case.form)
    s = form.structure
    bounds = {c: (lo, hi) for c, lo, hi in zip(s.constants, s.lower, s.upper, strict=True)
              if c in case.bounds}  # fmt: skip
    box = {c: case.start_box.get(c, EXPONENT_BOX) for c in s.nonlinear}
    box.update({c: case.start_box[c] for c in s.linear if c in case.start_box})
    box.update({c: b for c, b in bounds.items()})
    return {"expression": expr, "variables": variables, "constants": list(s.constants),
            "kind": case.objective, "bounds": bounds, "start_box": box}  # fmt: skip


def run_case(case: Case, starts: int, seed: int) -> dict:
    form, X, y = case_inputs(case)
    t0 = time.perf_counter()
    r = fit(form, X, y, Objective(case.objective))
    t_fr = time.perf_counter() - t0
    ref = multistart(X=X, y=y, n_starts=starts, seed=seed, **reference_inputs(case, form))
    ratio = r.objective / ref.objective if ref.objective > 0 else np.nan
    ok = bool(r.objective <= ref.objective * (1 + TOL) or not np.isfinite(ref.objective))
    return {
        "family": case.family,
        "objective": case.objective,
        "bounded": bool(case.bounds),
        "fitrules": r.objective,
        "reference": ref.objective,
        "ratio": ratio,
        "ok": ok,
        "fitrules_s": t_fr,
        "reference_s": ref.seconds,
        "reasons": "; ".join(r.reasons),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed of each family")
    ap.add_argument("--seeds", type=int, default=10, help="grid seeds per family (default 10)")
    ap.add_argument("--starts", type=int, default=200, help="reference starts (default 200)")
    ap.add_argument("--out", help="write one row per case to this CSV")
    args = ap.parse_args(argv)
    cases = corpus(range(1 if args.quick else args.seeds))
    rows = []
    for i, case in enumerate(cases):
        with np.errstate(all="ignore"):
            rows.append(run_case(case, args.starts, seed=i))
        if not rows[-1]["ok"]:
            print(f"  case {i} {case.family} {case.objective}: fitrules {rows[-1]['fitrules']:.10g}"
                  f" > reference {rows[-1]['reference']:.10g}", flush=True)  # fmt: skip
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    n_ok = int(df["ok"].sum())
    t_fr, t_ref = df["fitrules_s"].sum(), df["reference_s"].sum()
    print(f"{len(df)} cases ({int(df['bounded'].sum())} bounded), reference: scipy least_squares "
          f"from {args.starts} starts each")  # fmt: skip
    print(f"fitrules within {TOL:g} relative of the reference or below it: {n_ok} of {len(df)}")
    print(f"worst ratio fitrules / reference: {df['ratio'].max():.12g}")
    print(f"below the reference by more than 1e-6 relative: {int((df['ratio'] < 1 - 1e-6).sum())}")
    print(f"time: fitrules {t_fr:.1f} s, reference {t_ref:.1f} s, ratio {t_ref / t_fr:.1f}x")
    by = df.groupby("family").agg(cases=("ok", "size"), ok=("ok", "sum"),
                                  worst=("ratio", "max"))  # fmt: skip
    print(by.to_string())
    return 0 if n_ok == len(df) else 1


if __name__ == "__main__":
    raise SystemExit(main())
