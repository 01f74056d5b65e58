"""Calibration of the tests fitrules prints, by simulation.

    python benchmarks/bench_calibration.py                  # everything, 200 grids per row
    python benchmarks/bench_calibration.py --grids 40       # quicker, noisier
    python benchmarks/bench_calibration.py --only score     # one section: verdict, power,
                                                            # score or ci

1. ``verdict``: false positives of the paired verdict ``fitrules compare`` prints (the
   corrected resampled t test on log error ratios over the verdict protocol, random splits
   fitting 0.9 of the cells), on three nulls, each grid compared exactly as ``compare`` does
   (300 splits, its own split seed):
   - additive: 20 cells with covariates x1, x2 drawn afresh per grid, truth
     ``2 + 0.05*x1 + 0.05*x2``, forms ``L0 + a*x1`` and ``L0 + b*x2`` (equal by symmetry);
   - multiplicative: 30 cells, truth ``2*(1 + 0.1*x1)*(1 + 0.1*x2)``, the same forms, the
     descriptive protocol at train fraction 0.5;
   - fixed design: the default grid's 20 cells (H 1/4/16/64 x omega 0/1/3/7/15, 3 seeds,
     per-run sd 0.0131), truth ``w*composition + (1 - w)*log_additive`` (each fitted to
     ``data/main.csv`` at lr 3e-4) with ``w`` chosen on separate calibration grids so that
     the two forms' expected log error ratio under the verdict protocol is zero: both forms
     misspecified, by the same amount.
   The same rates for the test on the descriptive splits (random thirds: the old verdict)
   are printed beside them.
1b. ``small``: the verdict on a 12-cell grid (3 H x 4 keep, 3 seeds) under shared-seed noise
   (a seed effect sd 0.506% shared by every cell with that seed id plus per-run sd 0.323%):
   its verdict protocol leaves one cell out, and the test is the exact sign-flip over the 12
   cells. Null: ``w*composition + (1 - w)*log_additive`` with ``w`` the zero of the mean log
   error ratio under that protocol (calibration grids apart); 400 null grids; power at
   ``w`` = 0.88, 0.9, 0.95 with each one's true error ratio (dense cells of the grid's range).
2. ``power``: default-grid-shaped truths (the mixture above at several ``w``), all five
   built-in forms compared as ``fitrules compare`` does. The true error ratio of a truth is
   the geometric mean, over grids and the descriptive splits, of log_additive's over
   composition's mean |relative error| on 169 dense new cells (H 1 to 64 x keep 1/16 to 1,
   geometric) against the noise-free truth, each form fitted on the split's training cells.
   Printed: rate of p < 0.05 naming the truly better form, for composition vs log_additive
   compared alone (its raw p), under Holm over the ten pairs of the five forms, and for the
   old test on random thirds.
3. ``score``: the test ``fitrules score`` makes between two forms' fixed predictions on new
   runs (:func:`fitrules.jobs.ledger.compare_scored`), with a per-seed effect shared across cells
   as the harness shows (seed sd 0.011, per-run sd 0.0071; ``fitrules validate`` on the
   default grid measures it), new runs at shared seed ids (what ``design`` used to plan) or
   fresh ones (what it plans now); null: one form above every cell's true mean and the other
   below by the same amount; alternative: one at the truth, the other 1.5 noise sd off.
   The old test (a t test over runs, as independent) is printed beside it.
4. ``ci``: coverage of the paired-seed intervals of ``fitrules ci`` on normal differences.

Every rate is printed with its number of simulated grids or draws.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fitrules.base.error_metrics import ERROR_METRICS  # noqa: E402
from fitrules.engine.stats import paired_verdict  # noqa: E402
from fitrules.jobs.compare import compare  # noqa: E402
from fitrules.jobs.ledger import compare_scored  # noqa: E402
from fitrules.model.compiled import predict  # noqa: E402
from fitrules.model.forms import BUILTIN_FORMS, Form  # noqa: E402
from fitrules.model.grids import load_grid  # noqa: E402
from fitrules.model.splits import RandomSplit  # noqa: E402

FORMS = [Form("on_x1", "L0 + a*x1", ("x1",)), Form("on_x2", "L0 + b*x2", ("x2",))]
FIVE = ["composition", "additive", "free_omega", "omega_only", "log_additive"]

# the default grid's design and the two forms fitted to data/main.csv at lr 3e-4 (fr.fit)
H_LEVELS = np.array([1.0, 4.0, 16.0, 64.0])
OMEGA_LEVELS = np.array([0.0, 1.0, 3.0, 7.0, 15.0])
RUN_SD = 0.0131  # per-run sd of the default grid (pooled over its cells)
# the standard noise models beside iid (relative to the value): a seed effect shared by every
# cell with the same seed id plus per-run noise, as the default grid shows them
SHARED_SD, PER_RUN_SD, IID_SD = 0.00506, 0.00323, 0.0060


def composition(H, omega):
    return 2.147725304425704 + 0.009777858238130434 * omega * (H / 16) ** 0.5411560058593752


def log_additive(H, omega):
    return 2.172248368597358 + 0.008318967229966633 * omega + 0.029074606969831558 * np.log(H / 16)


def mixture(w):
    return lambda H, omega: w * composition(H, omega) + (1 - w) * log_additive(H, omega)


DENSE_H, DENSE_KEEP = np.meshgrid(2 ** np.arange(0, 6.01, 0.5), 2 ** np.arange(-4, 0.01, 1 / 3))
DENSE = {"H": DENSE_H.ravel(), "omega": 1 / DENSE_KEEP.ravel() - 1}  # 13 x 13 = 169 cells


METRIC = ERROR_METRICS["relative"]  # the held-out error of the verdicts (--error-metric)


def old_p(cmp, a: str, b: str):
    """The corrected t test on the descriptive splits (what compare printed before)."""
    r = cmp.results
    wide = r.pivot(index="split", columns="form", values="heldout_error")
    ok = r.pivot(index="split", columns="form", values="used")
    both = (ok[a] & ok[b]).to_numpy(bool)
    v = paired_verdict(
        wide[a].to_numpy()[both],
        wide[b].to_numpy()[both],
        int(r["n_train"].min()),
        int(r["n_test"].min()),
    )
    return v["p"], v["ratio"]


# ------------------------------------------------------------------ grids
def synthetic_grid(rng, truth, cells: int = 20, seeds: int = 3, noise: float = 0.005):
    x1, x2 = rng.uniform(0, 1, cells), rng.uniform(0, 1, cells)
    mean = truth(x1, x2)
    rows = [
        {"x1": x1[i], "x2": x2[i], "seed": s, "loss": mean[i] + noise * rng.standard_normal()}
        for i in range(cells)
        for s in range(seeds)
    ]
    return load_grid("synthetic.csv", frame=pd.DataFrame(rows))


def default_shaped_grid(rng, truth, seeds: int = 3, sd: float = RUN_SD):
    rows = [
        {"H": H, "omega": o, "seed": s, "loss": truth(H, o) + sd * rng.standard_normal()}
        for H in H_LEVELS
        for o in OMEGA_LEVELS
        for s in range(seeds)
    ]
    return load_grid("default-shaped.csv", frame=pd.DataFrame(rows))


# ------------------------------------------------------------------ 1. false positives
def null_rates(name, make, forms, n_grids, splits, train_frac, seed) -> dict:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    new, old = [], []
    for i in range(n_grids):
        cmp = compare(make(rng), forms, RandomSplit(splits, train_frac, i), metric=METRIC)
        new.append(cmp.paired.iloc[0]["p"])
        old.append(old_p(cmp, forms[0].name, forms[1].name)[0])
    rate = float(np.mean(np.array(new, float) < 0.05))
    rate_old = float(np.mean(np.array(old, float) < 0.05))
    print(
        f"  {name}: {n_grids} grids x {splits} splits, {time.perf_counter() - t0:.0f} s: "
        f"verdict rejects at 0.05 in {rate:.3f} (test on the descriptive splits: {rate_old:.3f})",
        flush=True,
    )
    return {"verdict": rate, "descriptive": rate_old}


def fixed_design_weight(n_grids: int, splits: int, seed: int) -> tuple[float, float]:
    """The mixture weight at which composition and log_additive are equally good under the
    verdict protocol on the default grid's design: the zero of their mean log error ratio,
    interpolated between two weights, on calibration grids not used for the rate."""
    forms = [BUILTIN_FORMS["composition"], BUILTIN_FORMS["log_additive"]]
    means = {}
    for w in (0.45, 0.55):
        rng = np.random.default_rng(seed)
        logs = []
        for i in range(n_grids):
            grid = default_shaped_grid(rng, mixture(w))
            cmp = compare(grid, forms, RandomSplit(splits, 1 / 3, i), metric=METRIC)
            logs.append(math.log(cmp.paired.iloc[0]["ratio"]))
        means[w] = float(np.mean(logs))
    (w0, m0), (w1, m1) = means.items()
    w = w0 - m0 * (w1 - w0) / (m1 - m0)
    return float(w), float(np.std([m0, m1]))


def verdict_section(n_grids: int, splits: int) -> dict:
    print(f"1. verdict false positives at 0.05 ({n_grids} grids per row):", flush=True)
    out = {}
    out["additive"] = null_rates(
        "additive null, 20 cells, train 1/3",
        lambda rng: synthetic_grid(rng, lambda x1, x2: 2 + 0.05 * x1 + 0.05 * x2),
        FORMS,
        n_grids,
        splits,
        1 / 3,
        seed=0,
    )
    out["multiplicative"] = null_rates(
        "multiplicative null, 30 cells, train 0.5",
        lambda rng: synthetic_grid(
            rng, lambda x1, x2: 2 * (1 + 0.1 * x1) * (1 + 0.1 * x2), cells=30
        ),
        FORMS,
        n_grids,
        splits,
        0.5,
        seed=1,
    )
    t0 = time.perf_counter()
    w, _ = fixed_design_weight(max(n_grids // 4, 20), splits, seed=11)
    print(
        f"  fixed-design null: w = {w:.3f} (the zero of the mean log error ratio, interpolated "
        f"from w = 0.45 and 0.55 on {max(n_grids // 4, 20)} calibration grids each, "
        f"{time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    out["fixed"] = null_rates(
        "fixed-design null, default grid's 20 cells, composition vs log_additive",
        lambda rng: default_shaped_grid(rng, mixture(w)),
        [BUILTIN_FORMS["composition"], BUILTIN_FORMS["log_additive"]],
        n_grids,
        splits,
        1 / 3,
        seed=2,
    )
    worst = max(v["verdict"] for v in out.values())
    print(f"  target: every null at most 0.06: {'met' if worst <= 0.06 else 'NOT met'} "
          f"(worst {worst:.3f})", flush=True)  # fmt: skip
    return out


# ------------------------------------------------------------------ 1b. a 12-cell grid
SMALL_H = np.repeat([1.0, 4.0, 16.0], 4)
SMALL_OMEGA = np.tile([0.0, 1.0, 3.0, 7.0], 3)  # keep 1, 1/2, 1/4, 1/8
SMALL_DENSE_H, SMALL_DENSE_KEEP = np.meshgrid(
    2 ** np.arange(0, 4.01, 0.5), 2 ** np.arange(-3, 0.01, 1 / 3)
)
SMALL_DENSE = {"H": SMALL_DENSE_H.ravel(), "omega": 1 / SMALL_DENSE_KEEP.ravel() - 1}


def small_grid(rng, truth, noise: str = "shared"):
    """3 H x 4 keep, 3 seeds; ``shared``: a seed effect (sd 0.506% of the value) shared by
    every cell with that seed id plus per-run noise (0.323%); ``iid``: 0.60% per run."""
    u = rng.standard_normal(3) * (SHARED_SD if noise == "shared" else 0.0)
    sd = PER_RUN_SD if noise == "shared" else IID_SD
    mu = truth(SMALL_H, SMALL_OMEGA)
    rows = [
        {"H": SMALL_H[i], "omega": SMALL_OMEGA[i], "seed": s,
         "loss": mu[i] * (1 + u[s] + sd * rng.standard_normal())}
        for i in range(len(mu))
        for s in range(3)
    ]  # fmt: skip
    return load_grid("small.csv", frame=pd.DataFrame(rows))


def small_weight(n_grids: int, seed: int = 11) -> float:
    """The mixture weight at which composition and log_additive are equally good under the
    12-cell grid's verdict protocol (leave one cell out): the zero of the mean log error ratio
    over the cells, interpolated between two weights, on calibration grids not used after."""
    from fitrules.engine.fit import Objective, fit_splits

    forms = [BUILTIN_FORMS[n].bind(["H", "omega"]) for n in ("composition", "log_additive")]
    X = {"H": SMALL_H, "omega": SMALL_OMEGA}
    masks = ~np.eye(len(SMALL_H), dtype=bool)
    rng = np.random.default_rng(seed)
    means = {}
    for w in (0.74, 0.78):
        logs = []
        for _ in range(n_grids):
            y = small_grid(rng, mixture(w)).cells(("H", "omega")).y
            errs = []
            for f in forms:
                fits = fit_splits(f, X, y, masks, Objective())
                pred = np.array([
                    predict(f, {k: v[i : i + 1] for k, v in X.items()}, r.constants)[0]
                    for i, r in enumerate(fits)
                ])  # fmt: skip
                errs.append(np.abs(pred - y) / y)
            logs.append(float(np.mean(np.log(errs[0]) - np.log(errs[1]))))
        means[w] = float(np.mean(logs))
    (w0, m0), (w1, m1) = means.items()
    return float(w0 - m0 * (w1 - w0) / (m1 - m0))


def small_true_ratio(w: float) -> float:
    """log_additive's over composition's mean |relative error| on dense cells of the 12-cell
    grid's range, each fitted to the noise-free truth on the 12 cells."""
    from fitrules.engine.fit import fit

    truth = mixture(w)
    y = truth(SMALL_H, SMALL_OMEGA)
    target = truth(SMALL_DENSE["H"], SMALL_DENSE["omega"])
    err = {}
    for n in ("composition", "log_additive"):
        f = BUILTIN_FORMS[n].bind(["H", "omega"])
        c = fit(f, {"H": SMALL_H, "omega": SMALL_OMEGA}, y).constants
        err[n] = float(np.mean(np.abs(predict(f, SMALL_DENSE, c) - target) / target))
    return err["log_additive"] / err["composition"]


def small_section(n_null: int, n_power: int, splits: int, weights=(0.88, 0.9, 0.95)) -> dict:
    print(
        f"1b. the verdict on a 12-cell grid (3 H x 4 keep, 3 seeds, shared-seed noise: seed "
        f"effect sd {100 * SHARED_SD:.3f}% shared by every cell with that seed id plus per-run "
        f"sd {100 * PER_RUN_SD:.3f}%); its verdict protocol leaves one cell out, so the test is "
        "the exact sign-flip over the 12 cells (the old test: corrected t over 300 random "
        "splits that repeat the 12 leave-one-out splits)",
        flush=True,
    )
    t0 = time.perf_counter()
    w0 = small_weight(max(n_null // 4, 50))
    print(f"  null: w = {w0:.4f} (zero of the mean log error ratio, {time.perf_counter() - t0:.0f}"
          " s of calibration grids)", flush=True)  # fmt: skip
    forms = [BUILTIN_FORMS["composition"], BUILTIN_FORMS["log_additive"]]
    out = {}
    rows = [("null", w0, n_null)] + [(f"w = {w:g}", w, n_power) for w in weights]
    print("  | truth | true error ratio (dense cells) | grids | rejects at 0.05 | naming "
          "composition | sign-flip p unattainable |")  # fmt: skip
    print("  |---|---:|---:|---:|---:|---:|")
    for name, w, n in rows:
        rng = np.random.default_rng(21 if name == "null" else 22)
        rej = right = none = 0
        for i in range(n):
            cmp = compare(
                small_grid(rng, mixture(w)), forms, RandomSplit(splits, 1 / 3, i), metric=METRIC
            )
            r = cmp.paired.iloc[0]
            if r["p"] is None:
                none += 1
                continue
            rej += r["p"] < 0.05
            right += r["p"] < 0.05 and r["ratio"] < 1
        ratio = small_true_ratio(w)
        out[name] = {"rate": rej / n, "ratio": ratio, "grids": n, "right": right / n}
        print(f"  | {name} | {ratio:.2f} | {n} | {rej / n:.3f} | {right / n:.3f} | {none} |",
              flush=True)  # fmt: skip
    print(f"  target: false positives at most 0.05 over at least 400 null grids: "
          f"{'met' if out['null']['rate'] <= 0.05 and n_null >= 400 else 'NOT met'} "
          f"({out['null']['rate']:.3f} over {n_null}); {time.perf_counter() - t0:.0f} s",
          flush=True)  # fmt: skip
    return out


# ------------------------------------------------------------------ 2. power
def true_ratio(cmp, truth) -> float:
    """Mean over the descriptive splits of log(err log_additive / err composition) on dense
    new cells against the noise-free truth, each error in the metric the verdicts use."""
    target = truth(DENSE["H"], DENSE["omega"])
    res = cmp.results[cmp.results["used"]]
    err = {}
    for name in ("composition", "log_additive"):
        f = cmp.form(name)
        rows = res[res["form"] == name]
        err[name] = pd.Series(
            [float(np.mean(METRIC.cells(target, predict(f, DENSE, c)))) for c in rows["constants"]],
            index=rows["split"].to_numpy(),
        )
    both = err["composition"].index.intersection(err["log_additive"].index)
    return float(np.mean(np.log(err["log_additive"][both] / err["composition"][both])))


def power_section(n_grids: int, splits: int, weights: list[float], five: bool) -> list[dict]:
    """Rates of p < 0.05 naming the truly better of composition and log_additive: compared
    alone (two forms), or among all five built-in forms (raw p and Holm over ten pairs)."""
    names = FIVE if five else ["composition", "log_additive"]
    forms = [BUILTIN_FORMS[n] for n in names]
    what = "all five built-in forms" if five else "composition and log_additive alone"
    print(
        f"2{'b' if five else 'a'}. power on default-grid-shaped truths, w*composition + (1-w)*"
        f"log_additive, {what} ({n_grids} grids x {splits} splits per row); rate of p < 0.05 "
        "naming the truly better form of composition vs log_additive:",
        flush=True,
    )
    head = "verdict, raw p | verdict, Holm over 10 pairs" if five else "verdict"
    print(f"  | w | true error ratio | {head} | old test (random thirds) | s |")
    rows = []
    for k, w in enumerate(weights):
        rng = np.random.default_rng(100 + k)
        t0 = time.perf_counter()
        logs, raw, holm, old = [], [], [], []
        rivals: dict[str, list] = {n: [] for n in names if n != "composition"}
        for i in range(n_grids):
            truth = mixture(w)
            cmp = compare(
                default_shaped_grid(rng, truth), forms, RandomSplit(splits, 1 / 3, i), metric=METRIC
            )
            lr = true_ratio(cmp, truth)
            logs.append(lr)
            better = "composition" if lr > 0 else "log_additive"
            p = cmp.paired.set_index(["a", "b"])
            row = p.loc[("composition", "log_additive")]
            named = "composition" if row["ratio"] < 1 else "log_additive"
            raw.append(row["p"] < 0.05 and named == better)
            holm.append(row["p_holm"] < 0.05 and named == better)
            po, ro = old_p(cmp, "composition", "log_additive")
            old.append(po is not None and po < 0.05 and (ro < 1) == (better == "composition"))
            for n in rivals:
                r = p.loc[("composition", n)]
                rivals[n].append((r["p"] < 0.05 and r["ratio"] < 1,
                                  r["p_holm"] < 0.05 and r["ratio"] < 1))  # fmt: skip
        ratio = math.exp(abs(float(np.mean(logs))))
        side = "composition" if np.mean(logs) > 0 else "log_additive"
        out = {"w": w, "ratio": ratio, "better": side, "raw": float(np.mean(raw)),
               "holm": float(np.mean(holm)), "old": float(np.mean(old)), "grids": n_grids,
               "rivals": {n: (float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v])))
                          for n, v in rivals.items()}}  # fmt: skip
        rows.append(out)
        rates = f"{out['raw']:.3f} | {out['holm']:.3f}" if five else f"{out['raw']:.3f}"
        print(
            f"  | {w:4.2f} | {ratio:.2f}x ({side} better) | {rates} | {out['old']:.3f} | "
            f"{time.perf_counter() - t0:.0f} |",
            flush=True,
        )
    if five:
        first = rows[0]
        print(
            f"  at w = {first['w']:g}, composition against each rival (raw / Holm over 10 "
            "pairs): "
            + "; ".join(f"{n} {a:.3f} / {b:.3f}" for n, (a, b) in first["rivals"].items()),
            flush=True,
        )
    else:
        bar = [r for r in rows if 2.0 <= r["ratio"] <= 3.5 and r["better"] == "composition"]
        worst = min((r["raw"] for r in bar), default=float("nan"))
        met = "met" if worst >= 0.8 else "NOT met"
        print(f"  target: power at least 0.8 at the 3x and 2.2x rows: {met} (lowest {worst:.3f})")
    return rows


# ------------------------------------------------------------------ 3. score on new runs
def _score_draw(rng, cells, seeds, shared_sd, run_sd, offsets, fresh, start, mixed=False):
    truth = 2.2 + 0.05 * rng.standard_normal(cells)
    # mixed: each cell's offsets of either sign (a above and b below, or the reverse)
    sign = rng.choice([-1.0, 1.0], cells) if mixed else np.ones(cells)
    ids = [[start + (c * seeds if fresh else 0) + s for s in range(seeds)] for c in range(cells)]
    effect = {i: shared_sd * rng.standard_normal() for row in ids for i in row}
    total_sd = math.hypot(shared_sd, run_sd)
    rows = []
    for c in range(cells):
        values = [truth[c] + effect[i] + run_sd * rng.standard_normal() for i in ids[c]]
        for form, off in zip(("a", "b"), offsets, strict=True):
            off = off * sign[c] if offsets[0] == -offsets[1] else off
            rows.append(
                {"form": form, "point": {"x": float(c)}, "status": "scored",
                 "prediction": truth[c] + off * total_sd, "values": values,
                 "seeds": [str(i) for i in ids[c]]}
            )  # fmt: skip
    return pd.DataFrame(rows)


def _old_score_p(df: pd.DataFrame) -> float:
    a, b = df[df["form"] == "a"], df[df["form"] == "b"]
    d = np.concatenate(
        [
            (np.asarray(ra["values"]) - ra["prediction"]) ** 2
            - (np.asarray(ra["values"]) - rb["prediction"]) ** 2
            for ra, rb in zip(a.to_dict("records"), b.to_dict("records"), strict=True)
        ]
    )
    return float(stats.ttest_1samp(d, 0).pvalue)


def score_section(draws: int) -> dict:
    print(
        f"3. score's test on new runs, seed effect sd 0.011 shared across cells, per-run sd "
        f"0.0071 ({draws} draws per row); rates of p < 0.05:",
        flush=True,
    )
    print("  | new cells x seeds | seed ids | null: score | null: old t over runs | "
          "alternative (1.5 sd off): score | old |")  # fmt: skip
    out = {}
    rng = np.random.default_rng(5)
    for cells, seeds, fresh, shared, mixed in [
        (5, 4, False, 0.011, False), (5, 3, False, 0.011, False), (10, 3, False, 0.011, False),
        (10, 3, False, 0.011, True), (20, 2, False, 0.011, False), (20, 2, False, 0.011, True),
        (5, 4, True, 0.011, False), (10, 3, True, 0.011, False), (5, 4, False, 0.0, False),
    ]:  # fmt: skip
        rates = {}
        for name, offsets in {"null": (1.0, -1.0), "alt": (0.0, 1.5)}.items():
            new = old = 0
            for _ in range(draws):
                df = _score_draw(rng, cells, seeds, shared, 0.0071, offsets, fresh, start=3,
                                 mixed=mixed)  # fmt: skip
                p = compare_scored(df)["p"].iloc[0]
                new += p is not None and p < 0.05
                old += _old_score_p(df) < 0.05
            rates[name] = (new / draws, old / draws)
        ids = "fresh per cell" if fresh else "shared"
        label = (f"{cells} x {seeds}" + ("" if shared else " (no seed effect)")
                 + (", offsets of mixed sign" if mixed else ""))  # fmt: skip
        out[(cells, seeds, fresh, shared, mixed)] = rates
        print(
            f"  | {label} | {ids} | {rates['null'][0]:.3f} | {rates['null'][1]:.3f} | "
            f"{rates['alt'][0]:.3f} | {rates['alt'][1]:.3f} |",
            flush=True,
        )
    worst = max(r["null"][0] for r in out.values())
    print(f"  target: score's false positives at most 0.06: "
          f"{'met' if worst <= 0.06 else 'NOT met'} (worst {worst:.3f})", flush=True)  # fmt: skip
    return out


# ------------------------------------------------------------------ 4. paired-seed intervals
def interval_coverage(n_pairs: list[int], draws: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    print(f"4. paired-seed 95% intervals on normal differences, {draws} draws per row:")
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grids", type=int, default=200, help="grids per row (200)")
    ap.add_argument("--splits", type=int, default=300, help="random splits per grid (300)")
    ap.add_argument("--draws", type=int, default=2000, help="draws per score row (2000)")
    ap.add_argument(
        "--only", choices=["verdict", "small", "power", "holm", "score", "ci"], default=None
    )
    ap.add_argument(
        "--error-metric",
        choices=list(ERROR_METRICS),
        default="relative",
        help="the held-out error compare's verdicts are made on, and the true ratios measured "
        "in (relative)",
    )
    ap.add_argument("--small-null", type=int, default=400, help="null grids of 1b (400)")
    ap.add_argument("--small-power", type=int, default=200, help="grids per power row of 1b")
    ap.add_argument("--small-weights", default="0.88,0.9,0.95", help="mixture weights of 1b")
    ap.add_argument(
        "--small-splits",
        type=int,
        default=50,
        help="descriptive splits per grid in 1b (50; its verdict leaves each cell out once)",
    )
    ap.add_argument(
        "--weights",
        default="1.0,0.9,0.8,0.75,0.58,0.3",
        help="mixture weights of the power rows, pair alone (default 1.0,0.9,0.8,0.75,0.58,0.3)",
    )
    ap.add_argument(
        "--holm-weights",
        default="1.0,0.8,0.75",
        help="mixture weights of the rows with all five forms (default 1.0,0.8,0.75)",
    )
    ap.add_argument(
        "--holm-splits",
        type=int,
        default=100,
        help="splits per grid with all five forms (default 100: five forms cost 5x)",
    )
    args = ap.parse_args(argv)
    global METRIC
    METRIC = ERROR_METRICS[args.error_metric]
    print(f"held-out error metric of the verdicts: {METRIC.name} ({METRIC.quantity})", flush=True)
    ok = True
    if args.only in (None, "verdict"):
        v = verdict_section(args.grids, args.splits)
        ok &= max(r["verdict"] for r in v.values()) <= 0.06
    if args.only in (None, "small"):
        sm = small_section(
            args.small_null, args.small_power, args.small_splits,
            [float(w) for w in args.small_weights.split(",")],
        )  # fmt: skip
        ok &= sm["null"]["rate"] <= 0.05
    if args.only in (None, "power"):
        rows = power_section(
            args.grids, args.splits, [float(w) for w in args.weights.split(",")], five=False
        )
        ok &= all(r["raw"] >= 0.8 for r in rows if 2.0 <= r["ratio"] <= 3.5)
    if args.only in (None, "holm"):
        power_section(
            args.grids, args.holm_splits, [float(w) for w in args.holm_weights.split(",")], True
        )
    if args.only in (None, "score"):
        s = score_section(args.draws)
        ok &= max(r["null"][0] for r in s.values()) <= 0.06
    if args.only in (None, "ci"):
        interval_coverage([3, 5, 11, 20, 30], 400)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
