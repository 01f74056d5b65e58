"""`fitrules search`: speed against a per-form scipy loop, and recovery of known truths.

    python benchmarks/bench_search.py                  # every section (about 15 minutes)
    python benchmarks/bench_search.py --only speed     # the default search, timed
    python benchmarks/bench_search.py --only recovery  # 10 grids with a known truth
    python benchmarks/bench_search.py --only front     # the front's rule under a null
    python benchmarks/bench_search.py --only optimism  # outer / inner without selection
    python benchmarks/bench_search.py --only chinchilla  # the real runs (skipped if absent)
    python benchmarks/bench_search.py --only extrapolation  # issue 29: asked to extrapolate
    python benchmarks/bench_search.py --only staged  # issue 29: staged, and on a cluster
    python benchmarks/bench_search.py --only outer-seeds --outer-default-only  # issues 28, 42
    python benchmarks/bench_search.py --only outer-seeds --outer-default-only --outer-weights equal
    python benchmarks/bench_search.py --only outer-holdouts --outer-grids 200  # issue 28
    python benchmarks/bench_search.py --only cost --old DIR  # issue 63: beside a checkout DIR
    python benchmarks/bench_search.py --only catalogue  # issue 62: each grid's default search
    python benchmarks/bench_search.py --only selection  # issue 62: the budget picked, 4 truths
    python benchmarks/bench_search.py --only selection --selection-grids 1 --quick  # its check

speed: `fitrules search` with its defaults on the default grid (every form of the default
grammar, 20 outer x 10 inner random splits, 230 fits per form) on ``--jobs`` processes, timed
from the command's start to its end (pruning and pilots included). The baseline, in the same
run, is what a careful user writes by hand: for each form, for each of the same 230 training
masks, ``scipy.optimize.least_squares`` on the relative residuals from a small grid of starts
(every nonlinear constant at 3 points of its starting range), keeping the best, then the
held-out error; timed on a sample of forms stratified by their number of nonlinear
constants, in one process, and scaled to the whole grammar by the sample's mix. Printed:
forms per second each way, per process and on the machine, and their ratio.

recovery: 10 grids drawn from a known 2- or 3-term truth of the grammar (4 truths in turn)
over the default grid's design (H 1, 4, 16, 64 x omega 0, 1, 3, 7, 15), 3 runs per cell with
0.5% relative noise per run (the default grid's own is 0.55%); the default search on each.
Printed per grid: the most-picked form across outer splits, whether it is the truth's family
(up to reparametrisation: the grammar's canonical key), and the form picked from all cells.

front: 10 grids from a 2-constant truth (L0 + a*omega*(H/8)**0.5): how often a larger budget
joins the front, which the rule (more than one corrected standard error of paired outer
improvement) should rarely allow; its power is the recovery section's front reaching the
budget of a 3- or 4-constant truth.

optimism: the outer / inner ratio of composition and log_additive fitted on the default
protocol's nested splits without any selection, over 8 seeds of the splits: the protocol's
own ratio, against which the search's optimism is read.

outer-seeds: ``--outer-grids`` grids per truth (inside the grammar, and outside it with an
extra log(H)**2 term) of the default design under shared seed effects (sd 0.506% shared by
every cell with a seed id, plus 0.323% per run); the search's quoted outer error against its
pick's error at 60 fresh configurations, each measured on 3 new runs at fresh seed ids, under
the ``cells-and-seeds`` protocol (and ``cells``, unless ``--outer-default-only``). Target
(issue 28): median actual / quoted between 0.8 and 1.25.

outer-holdouts: on the same grids, the truth inside the grammar fitted without selection, its
quoted error when the outer splits hold out any 4 of the 20 cells or 2 of the 6 interior cells
only, against its error at the fresh configurations: how much of the gap is which cells are
held out.

extrapolation: 10 grids from a Chinchilla-like law over 9 levels of N x 6 of D; the search
sees the lower 6 levels of N, with ``--split extrapolate:N`` (rolling origins outside, the
same question inside) and with random splits; each pick and the true form, fitted on the seen
cells, scored at the 3 unseen levels. Target: the pick within 1.5x of the true form's error
in at least 8 of 10 grids.

staged: the screen's effect on the outer error on the default grid's grammar (in full and
staged), then the data-constrained grid's default 3-variable grammar staged (timed, target
under 15 minutes on 2 cores) and the same search on a Dask LocalCluster (the same picks and
outer errors).

ceiling: issue 41's Chinchilla-shaped grid (8 N x 5 D, 0.2% noise, the top 3 levels of N held
out) searched with the default grammar, with and without tied exponents; the pick against the
true form refitted, and whether the output said the front was still falling at its largest
budget. Target: within 1.5x.

cost (issue 63): ``fitrules search`` with its defaults on the 50-cell MoE variant grid
(../shared/external/variants/sldbench_moe_step249000.csv, ``N < 1e9``: 10 levels of E x 5 of
N), run as a command by this checkout and, in the same run, by the checkout ``--old`` (318c40e
for the issue), each ``--repeats`` times; the CPU seconds of the command and its workers
(user + system, from getrusage of the children), the minimum over the repeats, their ratio
(target: at most 1/5), and the wall seconds, which on a loaded machine are inflated by the
others' work. Printed beside them: how many candidates the new search pruned as hopeless
(its training fit) or prescreened away (not among the best training fits of its kind) and the
share of the nested rows it fitted.

catalogue (issue 62): ``fitrules search --data GRID`` with no other option (but ``--metric``
where the grid's metric is not a default one) on each grid of data/external/published.toml
that is present, as a command: CPU seconds (command and
workers) and wall seconds, the plan's estimate, the pick, or the refusal. Target: under 5
minutes on 2 idle cores, never refused on the 50-cell, 2-variable grid.

selection (issue 62, item 1): how far the default search grows its budget and which size it
picks, on ``--selection-grids`` grids (20) from each of four known truths
(``--selection-truths``, default all): chinchilla, EXTRAP_TRUTH (5 constants) over 5 levels of
N (1e7 to 1e10) x 4 of D (1e9 to 1e11); vocabulary, ``L0 + a1*(N/1e8)**(-e1) +
a2*(V/1e4)**(-e2) + a3*(D/1e10)**(-e3)`` (7 constants, three variables, each term a few percent
of the loss or more) over 5 N x 4 V x 4 D; saturating, ``L0 + a*omega/(omega + s) +
b*log(H/16)`` (4 constants, the grammar's saturating factor) and composition, ``L0 +
a*omega*(H/16)**b`` (3 constants: a larger budget must not win), both over the default grid's
design. 3 runs a cell (2 for vocabulary) with 0.4% relative noise a run (0.5% on the default
design). Each search is ``fr.search(runs, yes=True)``: the defaults, with the time estimate's
refusal waived (it counts every step up to 7 constants). Printed per grid: the pick, its
constants (or "abstained"), whether it is the truth's family (the canonical key, as in
recovery; a built-in reference picked in place of its grammar twin takes the twin's key), the
front's best budget, the outer median at each budget, how far the budget grew and why it
stopped, the CPU seconds of the search and its workers; per truth, how often each size was
picked, the shares with the true size and in the truth's family, the median CPU seconds.
Target (issue 62): the true size in at least 80% of the grids of every truth. A search costs
about 300 CPU seconds (chinchilla: its budget grows to 6 to stop at 5), 340 (vocabulary), 120
to 240 (saturating) and 130 (composition): 20 grids of each, about 5 hours of CPU. ``--quick``
runs a smaller search (2 terms, from 3 to at most 4 constants, factors power, linear and log,
4 outer x 3 inner splits) to check the code in a minute: its counts measure nothing.

chinchilla: the real Chinchilla runs of ../shared/external (log_huber, over N and D, two
power-law terms or logs); whether the search finds E + A/N**alpha + B/D**beta or a procedure
with lower outer error than that law fitted without selection.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # truth: runs drawn from a known form

from truth import runs_from_form  # noqa: E402

import fitrules as fr  # noqa: E402
from fitrules.engine.grammar import Grammar, generate, named  # noqa: E402
from fitrules.jobs.search.protocol import nested_masks  # noqa: E402
from fitrules.model.compiled import CompiledForm  # noqa: E402
from fitrules.model.compiled import predict as fr_predict  # noqa: E402
from fitrules.model.forms import Form  # noqa: E402
from fitrules.model.splits import RandomSplit  # noqa: E402

CHINCHILLA = ROOT.parent / "shared" / "external" / "chinchilla_epoch_svg_extracted.csv"
H = (1, 4, 16, 64)
OMEGA = (0.0, 1.0, 3.0, 7.0, 15.0)
TRUTHS = [
    ("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.25}, "const + power(H)*linear(omega)"),
    (
        "L0 + a*omega + b*log(H/8)",
        {"L0": 2.15, "a": 0.008, "b": 0.03},
        "const + linear(omega) + log(H)",
    ),
    (
        "L0 + a*omega*(H/8)**b + c*log(H/8)",
        {"L0": 2.15, "a": 0.01, "b": 0.25, "c": 0.02},
        "const + log(H) + power(H)*linear(omega)",
    ),
    (
        "L0 + a*log(1 + omega) + b*(H/8)**d",
        {"L0": 2.1, "a": 0.03, "b": 0.04, "d": -0.7},
        "const + log(omega) + power(H)",
    ),
]


# ------------------------------------------------------------------------------ speed
def scipy_loop(form: Form, X, y, masks) -> float:
    """The per-form loop a user writes: least_squares per mask from a grid of starts; returns
    the median held-out error (so the work cannot be skipped)."""
    cf = CompiledForm(form)
    s = cf.s
    grids = []
    for c in s.constants:
        if c in s.nonlinear:
            j = s.nonlinear.index(c)
            grids.append(np.linspace(s.start_lo[j], s.start_hi[j], 3))
        else:
            grids.append(np.array([0.0 if c != s.constants[0] else float(np.median(y))]))
    starts = [np.array(p) for p in itertools.product(*grids)]
    lower = np.array(s.lower)
    upper = np.array(s.upper)
    errors = []
    for train, test in masks:
        Xt = {k: v[train] for k, v in X.items()}

        def res(p, Xt=Xt, yt=y[train]):
            with np.errstate(all="ignore"):
                r = (cf.predict(Xt, p[None, :])[0] - yt) / yt
            return np.where(np.isfinite(r), r, 1e6)

        best, best_p = np.inf, None
        for p0 in starts:
            try:
                r = least_squares(
                    res, np.clip(p0, lower + 1e-9, upper - 1e-9), bounds=(lower, upper)
                )
            except ValueError:
                continue
            if r.cost < best:
                best, best_p = r.cost, r.x
        if best_p is not None and test.any():  # the fit on every cell scores no cell
            with np.errstate(all="ignore"):
                pred = cf.predict(X, best_p[None, :])[0]
            errors.append(float(np.mean(np.abs(pred[test] - y[test]) / y[test])))
    return float(np.median(errors)) if errors else float("nan")


def section_speed(jobs: int, sample: int) -> None:
    grid = fr.load_grid(fr.example_path("main"), where="lr == 3e-4")
    print(f"## speed: the default search on the default grid, {jobs} processes")
    t0 = time.perf_counter()
    s = fr.search(grid, jobs=jobs)
    wall = time.perf_counter() - t0
    n = s.n_generated
    st = s.settings
    fits = int(st["n_outer"] * (1 + st["n_inner"]) + st["n_final"] + 1)
    print(
        f"search: {n:,} forms proposed, {len(s.candidates):,} fitted with nested validation "
        f"({fits} fits each) in {wall:.1f} s wall on {jobs} processes"
    )
    # the baseline on a stratified sample, one process, same masks
    cells = grid.cells(["H", "omega"], True)
    X, y = cells.X, cells.y
    m = nested_masks(RandomSplit(20, 0.8, 0), cells.table, 10, 0.75, 0)
    pairs = list(zip(m.train, m.test, strict=True))
    cands = named(generate(Grammar(), X))
    by_q: dict[int, list] = {}
    for c in cands:
        by_q.setdefault(c.n_nonlinear, []).append(c)
    per_q = {}
    for q, group in sorted(by_q.items()):
        rng = np.random.default_rng(q)
        pick = [group[i] for i in rng.choice(len(group), min(sample, len(group)), replace=False)]
        t = time.perf_counter()
        for c in pick:
            scipy_loop(c.form.bind(grid.columns, grid.runs), X, y, pairs)
        per_q[q] = (time.perf_counter() - t) / len(pick)
        print(
            f"scipy loop: {len(pick)} forms with {q} nonlinear constants, "
            f"{per_q[q]:.2f} s per form ({len(pairs)} fits)"
        )
    base_total = sum(per_q[q] * len(g) for q, g in by_q.items())
    print(
        f"scipy loop, whole grammar by the sample's mix: {base_total:.0f} s in one process "
        f"({n / base_total:.2f} forms/s)"
    )
    search_rate = n / wall
    print(
        f"search: {search_rate:.2f} forms/s on {jobs} processes "
        f"({search_rate / jobs:.2f} per process)"
    )
    print(
        f"ratio, per process: search {search_rate / jobs / (n / base_total):.1f}x the scipy "
        f"loop; on the machine ({jobs} processes against one): "
        f"{search_rate / (n / base_total):.1f}x"
    )
    verdict = "holds" if n >= 1000 and wall <= 300 else "does not hold"
    print(
        f"target (at least 1,000 forms in at most 5 minutes on 2 cores): {verdict} "
        f"({n:,} forms, {wall:.0f} s)"
    )


# ------------------------------------------------------------------------------ recovery
def section_recovery(grids: int, jobs: int) -> None:
    print(f"## recovery: {grids} grids from known truths, default grammar and protocol")
    print(
        "| grid | truth | most picked at the largest budget (share) | truth? | "
        "the search's pick (at the front's best budget) | truth? |"
    )
    print("|---:|---|---|---|---|---|")
    hits = chosen_hits = 0
    for g in range(grids):
        expr, consts, key = TRUTHS[g % len(TRUTHS)]
        form = Form("truth", expr, ("H", "omega"))
        runs = runs_from_form(
            form, consts, {"H": H, "omega": OMEGA}, seeds=3, cv=0.005, seed=1000 + g
        )
        s = fr.search(runs, jobs=jobs, references=[])
        top_b = s.budgets["max_constants"].max()
        counts = Counter(s.choices[s.choices["budget"] == top_b]["form"].dropna())
        table = s.candidates.set_index("name")
        best = max(counts.items(), key=lambda kv: (kv[1], -table.loc[kv[0], "n_constants"]))
        ok = table.loc[best[0], "key"] == key
        chosen = s.chosen
        ok_chosen = chosen is not None and table.loc[chosen.name, "key"] == key
        hits += ok
        chosen_hits += ok_chosen
        share = best[1] / s.settings["n_outer"]
        print(
            f"| {g} | `{expr}` | `{s.forms[best[0]].expression}` ({share:.0%}) | "
            f"{'yes' if ok else 'no'} | `{chosen.expression if chosen else None}` "
            f"(<= {s.settings['best_budget']}) | {'yes' if ok_chosen else 'no'} |",
            flush=True,
        )
    print(
        f"\nmost-picked form at the largest budget is the truth in {hits} of {grids} grids "
        f"(target: 8 of 10); the search's pick is the truth in {chosen_hits} of {grids}"
    )


# ------------------------------------------------------------------------------ front
def section_front(grids: int, jobs: int) -> None:
    """The front's rule under a null: a truth with 2 constants, so that no larger budget
    should join the front; its power is read from the recovery section (the front reaching
    the budget of a 3- or 4-constant truth)."""
    print(f"## the front under a 2-constant truth: {grids} grids, default grammar and protocol")
    expr = "L0 + a*omega*(H/8)**0.5"
    form = Form("truth", expr, ("H", "omega"))
    added = 0
    for g in range(grids):
        runs = runs_from_form(
            form,
            {"L0": 2.15, "a": 0.01},
            {"H": H, "omega": OMEGA},
            seeds=3,
            cv=0.005,
            seed=2000 + g,
        )
        s = fr.search(runs, jobs=jobs, references=[])
        front = [int(k) for k in s.budgets[s.budgets["on_front"]]["max_constants"]]
        pick = s.chosen.expression if s.chosen is not None else None
        added += any(k > 2 for k in front)
        print(f"grid {g}: front at {front}; pick `{pick}`", flush=True)
    print(
        f"\na budget above the truth's 2 constants joined the front in {added} of {grids} "
        f"grids (truth `{expr}`, 0.5% noise, 3 runs per cell)"
    )


# ------------------------------------------------------------------------------ optimism
def section_optimism(seeds: int) -> None:
    """The outer / inner ratio of a form fitted without any selection, over seeds of the
    splits: how far the protocol alone moves it (a one-form grammar keeps the search cheap)."""
    print(f"## optimism without selection: {seeds} seeds of the default protocol, default grid")
    vals: dict[str, list[float]] = {}
    for seed in range(seeds):
        s = fr.search(None, terms=1, max_constants=2, factors="linear", seed=seed, jobs=1)
        for r in s.references.to_dict("records"):
            vals.setdefault(r["form"], []).append(r["outer_over_inner"])
    for name, v in vals.items():
        print(
            f"{name}: outer / inner {np.round(v, 2).tolist()} (min {min(v):.2f}, max "
            f"{max(v):.2f}) over {seeds} seeds, 20 outer x 10 inner splits"
        )
    print(f"\n## the default search over {seeds // 2} seeds of its splits (default grid)")
    print("| seed | outer median at k = 2, 3, 4 | front | pick | outer / inner at the pick |")
    print("|---:|---|---|---|---:|")
    for seed in range(seeds // 2):
        s = fr.search(None, seed=seed, jobs=2)
        b = s.budgets
        meds = ", ".join(f"{m:.3f}%" for m in b["outer_median_pct"])
        front = ", ".join(str(k) for k in b[b["on_front"]]["max_constants"])
        pick = s.chosen.expression if s.chosen is not None else None
        print(f"| {seed} | {meds} | {front} | `{pick}` | {s.best['optimism']:.2f} |", flush=True)


# ------------------------------------------------------------------------------ chinchilla
def section_chinchilla(jobs: int) -> None:
    print("## chinchilla: the real runs, log_huber, search over N and D")
    if not CHINCHILLA.exists():
        print("skipped: ../shared/external/chinchilla_epoch_svg_extracted.csv is not present")
        return
    g = fr.load_grid(
        CHINCHILLA, derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"], where="loss < 3.42"
    )
    law = Form("chinchilla", "E + A/N**alpha + B/D**beta", ("N", "D"))
    t = time.perf_counter()
    s = fr.search(
        g,
        variables="N,D",
        terms=2,
        max_constants=5,
        objective="log_huber",
        splits=10,
        inner_splits=5,
        references=[law],
        jobs=jobs,
    )
    print(s)
    ref = s.references.iloc[0]
    top = s.budgets.iloc[-1]
    keys = s.candidates.set_index("name")["key"]
    picked = Counter(s.choices[s.choices["budget"] == top["max_constants"]]["form"].dropna())
    law_key = "const + power(D) + power(N)"
    found = sum(v for k, v in picked.items() if keys[k] == law_key)
    print(
        f"\nthe law's family picked in {found} of {s.settings['n_outer']} outer splits; "
        f"search outer median {top['outer_median_pct']:.3f}% against the law's "
        f"{ref['outer_median_pct']:.3f}% ({time.perf_counter() - t:.0f} s)"
    )


# ------------------------------------------------------------------------------ seeds
# the standard shared-seed noise model (relative): a seed effect shared by every cell with
# that seed id plus per-run noise, as the default grid shows them
SHARED_SD, PER_RUN_SD = 0.00506, 0.00323
OUTER_TRUTHS = {
    "inside the grammar": ("L0 + a*omega*(H/8)**b", {"L0": 2.15, "a": 0.01, "b": 0.25}),
    "outside (an extra log(H)**2 term)": (
        "L0 + a*omega*(H/8)**b + c*log(H/8)**2",
        {"L0": 2.15, "a": 0.01, "b": 0.25, "c": 0.004},
    ),
}
OUTER_SEARCH = dict(terms=2, max_constants=3, splits=10, inner_splits=5)


def _shared_runs(rng, truth, consts):
    form = Form("truth", truth, ("H", "omega")).bind(["H", "omega"])
    Hg, Og = np.meshgrid(np.array(H, float), np.array(OMEGA), indexing="ij")
    X = {"H": Hg.ravel(), "omega": Og.ravel()}
    mu = fr_predict(form, X, consts)
    u = SHARED_SD * rng.standard_normal(3)
    rows = [
        {"H": X["H"][i], "omega": X["omega"][i], "seed": s,
         "loss": mu[i] * (1 + u[s] + PER_RUN_SD * rng.standard_normal())}
        for i in range(len(mu))
        for s in range(3)
    ]  # fmt: skip
    import pandas as pd

    return pd.DataFrame(rows), form


def _fresh_configurations(rng, truth, consts):
    """60 fresh configurations (H log-uniform in 1..64, keep log-uniform in 1/16..1) and, at
    each, the mean of 3 new runs at fresh seed ids under the shared-seed noise."""
    newX = {"H": 2 ** rng.uniform(0, 6, 60), "omega": 1 / 2 ** rng.uniform(-4, 0, 60) - 1}
    mu = fr_predict(truth, newX, consts)
    noise = SHARED_SD * rng.standard_normal((60, 3)) + PER_RUN_SD * rng.standard_normal((60, 3))
    return newX, mu * (1 + noise).mean(axis=1)


def _mean_ratio(actual, quoted, rng, resamples: int = 2000) -> tuple[float, float, float]:
    """Mean actual over mean quoted, and its 95% percentile bootstrap interval over grids."""
    a, q = np.asarray(actual, float), np.asarray(quoted, float)
    idx = rng.integers(0, len(a), (resamples, len(a)))
    boot = a[idx].mean(axis=1) / q[idx].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(a.mean() / q.mean()), float(lo), float(hi)


def section_outer_seeds(
    grids: int,
    jobs: int,
    seed: int = 28,
    protocols: tuple[str, ...] = ("cells-and-seeds", "cells"),
    weights: tuple[str, ...] = ("box",),
) -> dict:
    """The search's quoted outer error against its pick's error at 60 fresh configurations,
    each measured on 3 new runs at fresh seed ids, under shared-seed noise; the outer error
    by cells and seed ids (the default) and by cells alone (the old protocol), on the same
    grids (``protocols``: the ones run, the default alone to save time), its held-out cells
    weighted by their share of the grid's box (the default) or each once (``weights``).

    Issue 42's target is the mean actual over the mean quoted (between 0.9 and 1.1, with its
    bootstrap interval over grids): one grid's actual error is right-skewed and set by its
    own seed offset, so the median of per-grid ratios is below 1 even for a quote equal to
    the expected error. Printed for the quote the search prints (the median over outer
    splits) and for the trimmed mean over outer splits."""
    from fitrules.engine.fit import fit as fit_cells

    print(
        f"## outer error against new runs: {grids} grids per truth (default design, 3 seed ids, "
        f"seed effect sd {100 * SHARED_SD:.3f}% shared by every cell with that id plus per-run "
        f"sd {100 * PER_RUN_SD:.3f}%); search {OUTER_SEARCH}; the pick (the search's final "
        "choice) fitted on all cells, scored at 60 configurations (H log-uniform in 1..64, "
        "keep log-uniform in 1/16..1) against the mean of 3 new runs at fresh seed ids"
    )
    print("| truth | outer protocol | held-out weights | grids | median actual / quoted | "
          "quartiles | above 1 | mean actual / mean quoted (95% bootstrap) | the same, "
          "quote = trimmed mean over outer splits | actual inside the printed band |")  # fmt: skip
    print("|---|---|---|---:|---:|---|---:|---|---|---:|")
    out = {}
    boot_rng = np.random.default_rng(seed)
    for tname, (expr, consts) in OUTER_TRUTHS.items():
        rng = np.random.default_rng([seed, len(tname)])
        keys = [(p, w) for p in protocols for w in weights]
        ratios: dict[tuple, list[float]] = {k: [] for k in keys}
        pairs: dict[tuple, list[tuple[float, float, float]]] = {k: [] for k in keys}
        inside: dict[tuple, list[bool]] = {k: [] for k in keys}
        t0 = time.perf_counter()
        for g in range(grids):
            runs, truth = _shared_runs(rng, expr, consts)
            newX, new = _fresh_configurations(rng, truth, consts)
            grid = fr.load_grid(runs)
            cells = grid.cells(["H", "omega"], True)
            for protocol, kind in ratios:
                s = fr.search(runs, **OUTER_SEARCH, references=[], jobs=jobs, seeds=protocol,
                              seed=g, heldout_weights=kind)  # fmt: skip
                pick = s.chosen
                best = s.best
                if pick is None or best is None:
                    continue
                f = pick.bind(grid.columns, grid.runs)
                c = fit_cells(f, cells.X, cells.y).constants
                actual = 100 * float(np.mean(np.abs(fr_predict(f, newX, c) - new) / new))
                ratios[(protocol, kind)].append(actual / float(best["outer_median_pct"]))
                # the band the search prints: the middle 80% of the outer splits' errors
                at = s.choices.loc[s.choices["budget"] == best["max_constants"], "outer_pct"]
                lo_b, hi_b = np.nanpercentile(at.to_numpy(float), [10, 90])
                inside[(protocol, kind)].append(bool(lo_b <= actual <= hi_b))
                pairs[(protocol, kind)].append(
                    (actual, float(best["outer_median_pct"]),
                     float(best["outer_trimmed_mean_pct"]))
                )  # fmt: skip
        for (protocol, kind), r in ratios.items():
            r = np.array(r)
            q1, med, q3 = np.percentile(r, [25, 50, 75]) if len(r) else (np.nan,) * 3
            a, qm, qt = (np.array(x) for x in zip(*pairs[(protocol, kind)], strict=True))
            m, lo, hi = _mean_ratio(a, qm, boot_rng)
            mt, lot, hit = _mean_ratio(a, qt, boot_rng)
            out[(tname, protocol, kind)] = {"median": float(med), "grids": len(r), "mean": m,
                                            "lo": lo, "hi": hi, "mean_trimmed": mt}  # fmt: skip
            print(f"| {tname} | {protocol} | {kind} | {len(r)} | {med:.2f} | {q1:.2f} to "
                  f"{q3:.2f} | {int((r > 1).sum())} | {m:.2f} ({lo:.2f} to {hi:.2f}) | "
                  f"{mt:.2f} ({lot:.2f} to {hit:.2f}) | "
                  f"{np.mean(inside[(protocol, kind)]):.2f} |", flush=True)  # fmt: skip
        print(f"<!-- {tname}: {time.perf_counter() - t0:.0f} s -->", flush=True)
    ok = all(
        0.9 <= v["mean"] <= 1.1
        for (t, p, w), v in out.items()
        if p == "cells-and-seeds" and w == "box"
    )
    if any(w == "box" and p == "cells-and-seeds" for (t, p, w) in out):
        print(f"target (issue 42): mean actual / mean quoted between 0.9 and 1.1 for the default "
              f"protocol and weights, both truths: {'met' if ok else 'NOT met'}",
              flush=True)  # fmt: skip
    return out


OUTER_FORM = "L0 + a*omega*(H/8)**b"  # the truth inside the grammar, fitted without selection


def section_outer_holdouts(grids: int, seed: int = 28) -> dict:
    """Which cells the outer splits hold out, on the outer-seeds section's grids: the truth
    inside the grammar fitted without selection, its quoted error (cells-and-seeds, 10 splits,
    the same rescale) when the splits hold out 4 of the 20 cells at random (the default's
    fraction) or 2 of the 6 interior cells only, against its error at 60 fresh configurations
    on 3 new runs at fresh seed ids. What is left of issue 28's gap with no search at all."""
    from fitrules.engine.fit import Objective
    from fitrules.engine.fit import fit as fit_cells
    from fitrules.engine.intervals import seed_offset
    from fitrules.model.splits import SeedHoldout, seed_folds

    print(
        f"## which cells the outer splits hold out: {grids} grids per truth (the outer-seeds "
        f"grids); `{OUTER_FORM}` fitted without selection, 10 outer splits with seed ids held "
        "out and rescaled as the search does; its error at 60 fresh configurations on 3 new "
        "runs at fresh seed ids"
    )
    print("| truth | held-out cells | grids | median actual / quoted | quartiles |")
    print("|---|---|---:|---:|---|")
    out = {}
    for tname, (expr, consts) in OUTER_TRUTHS.items():
        rng = np.random.default_rng([seed, len(tname)])
        ratios: dict[str, list[float]] = {"4 of 20, any": [], "2 of 6, interior only": []}
        for g in range(grids):
            runs, truth = _shared_runs(rng, expr, consts)
            newX, new = _fresh_configurations(rng, truth, consts)
            grid = fr.load_grid(runs)
            cells = grid.cells(["H", "omega"], True)
            f = Form("f", OUTER_FORM, ("H", "omega")).bind(grid.columns, grid.runs)
            held = seed_folds(grid, cells, seed_offset(grid, cells, Objective()),
                              SeedHoldout(seed=g))  # fmt: skip
            c = fit_cells(f, cells.X, cells.y).constants
            actual = 100 * float(np.mean(np.abs((fr_predict(f, newX, c) - new) / new)))
            Hc, Oc = cells.X["H"], cells.X["omega"]
            inner = (Hc > Hc.min()) & (Hc < Hc.max()) & (Oc > Oc.min()) & (Oc < Oc.max())
            srng = np.random.default_rng([g, 7])
            for kind, r in ratios.items():
                errs, mses = [], []
                for o in range(10):
                    fold = held["folds"][o % len(held["folds"])]
                    te = (srng.choice(len(Hc), 4, replace=False) if kind.startswith("4")
                          else srng.choice(np.flatnonzero(inner), 2, replace=False))  # fmt: skip
                    tr = np.setdiff1d(np.arange(len(Hc)), te)
                    fo = fit_cells(f, {k: v[tr] for k, v in cells.X.items()}, fold["y_fit"][tr])
                    p = fr_predict(f, {k: v[te] for k, v in cells.X.items()}, fo.constants)
                    e = (p - fold["y_test"][te]) / fold["y_test"][te]
                    errs.append(100 * float(np.mean(np.abs(e))))
                    mses.append(float(np.mean(e**2)))
                factor = float(SeedHoldout.rescale(float(np.mean(mses)), held["excess"]))
                r.append(actual / (factor * float(np.median(errs))))
        for kind, r in ratios.items():
            q1, med, q3 = np.percentile(r, [25, 50, 75])
            out[(tname, kind)] = float(med)
            print(f"| {tname} | {kind} | {len(r)} | {med:.2f} | {q1:.2f} to {q3:.2f} |",
                  flush=True)  # fmt: skip
    return out


# ------------------------------------------------------------------ extrapolation
EXTRAP_TRUTH = ("E + A*(N/1e8)**(-alpha) + B*(D/1e10)**(-beta)",
                {"E": 1.7, "A": 0.7, "alpha": 0.34, "B": 0.5, "beta": 0.28})  # fmt: skip
EXTRAP_N = 10 ** np.arange(7, 11.01, 0.5)  # 9 levels; the search sees the lower 6
EXTRAP_D = 10 ** np.arange(9, 11.51, 0.5)  # 6 levels
EXTRAP_SEARCH = dict(terms=2, max_constants=5, factors="power,log", splits=10, inner_splits=5)


def section_extrapolation(grids: int, jobs: int, seed: int = 29) -> dict:
    """Issue 29: a search asked to extrapolate along N, on grids from a Chinchilla-like law.

    Each grid: 9 levels of N (1e7 to 1e11) x 6 of D, one run a cell with 0.3% noise. The
    search sees the cells below the top 3 levels of N; its pick and the true form are each
    fitted on those cells and scored at the 3 unseen levels against the true mean. Printed
    per grid, for ``--split extrapolate:N`` (the question asked) and the default random
    protocol: the pick, its error, the true form's, their ratio."""
    truth = Form("truth", EXTRAP_TRUTH[0], ("N", "D")).bind(["N", "D"])
    consts = EXTRAP_TRUTH[1]
    Ng, Dg = np.meshgrid(EXTRAP_N, EXTRAP_D, indexing="ij")
    X = {"N": Ng.ravel(), "D": Dg.ravel()}
    mu = fr_predict(truth, X, consts)
    seen = X["N"] < EXTRAP_N[-3]
    Xs = {k: v[seen] for k, v in X.items()}
    Xh = {k: v[~seen] for k, v in X.items()}
    print(
        f"## extrapolation along N: {grids} grids from {EXTRAP_TRUTH[0]} ({consts}); "
        f"search {EXTRAP_SEARCH} on N < {EXTRAP_N[-3]:g} ({int(seen.sum())} cells), "
        f"scored at the {int((~seen).sum())} cells of the 3 unseen levels of N against the true "
        "mean; the true form refitted on the same cells beside it"
    )
    print("| grid | protocol | pick | pick's error % | true form's % | ratio | quoted outer % |")
    print("|---:|---|---|---:|---:|---:|---:|")
    from fitrules.engine.fit import fit as fit_cells

    rng = np.random.default_rng(seed)
    ratios: dict[str, list[float]] = {"extrapolate:N": [], "random": []}
    t0 = time.perf_counter()
    for g in range(grids):
        y = mu * (1 + 0.003 * rng.standard_normal(len(mu)))
        runs = pd.DataFrame({"N": Xs["N"], "D": Xs["D"], "loss": y[seen]})
        ct = fit_cells(truth, Xs, y[seen]).constants
        et = 100 * float(np.mean(np.abs(fr_predict(truth, Xh, ct) - mu[~seen]) / mu[~seen]))
        for protocol in ratios:
            s = fr.search(fr.load_grid(runs, metric="loss"), split=protocol, references=[],
                          jobs=jobs, seed=g, **EXTRAP_SEARCH)  # fmt: skip
            pick = s.chosen.bind(["N", "D"])
            cp = fit_cells(pick, Xs, y[seen]).constants
            ep = 100 * float(np.mean(np.abs(fr_predict(pick, Xh, cp) - mu[~seen]) / mu[~seen]))
            ratios[protocol].append(ep / et)
            quoted = float(s.best["outer_median_pct"])
            print(f"| {g} | {protocol} | `{pick.expression}` | {ep:.3f} | {et:.3f} | "
                  f"{ep / et:.2f} | {quoted:.3f} |", flush=True)  # fmt: skip
    print(f"<!-- {time.perf_counter() - t0:.0f} s -->")
    out = {}
    for protocol, r in ratios.items():
        r = np.array(r)
        within = int((r <= 1.5).sum())
        out[protocol] = within
        print(f"- {protocol}: the pick within 1.5x of the true form's error in {within} of "
              f"{len(r)} grids (median ratio {np.median(r):.2f})")  # fmt: skip
    ok = out["extrapolate:N"] >= 0.8 * grids
    print(f"target (extrapolate:N, at least 8 of 10): {'met' if ok else 'NOT met'}", flush=True)
    return out


# ------------------------------------------------------------------ staged, on a cluster
CEILING_N = np.geomspace(1e7, 1e10, 8)  # issue 41's grid: 8 N x 5 D, the top 3 N held out
CEILING_D = np.geomspace(1e9, 1e11, 5)


def section_ceiling(grids: int, jobs: int, seed: int = 41, tie: str = "both") -> dict:
    """Issue 41: the default grammar asked to extrapolate a Chinchilla-shaped grid.

    Each grid: EXTRAP_TRUTH over 8 levels of N (1e7 to 1e10) x 5 of D (1e9 to 1e11), one run
    a cell with 0.2% noise; ``search --split extrapolate:N:1e9`` with the default grammar
    (its budget growing from 4 constants while that pays, to 7), and with ``tie_exponents``.
    The pick and the true form (5 constants), each fitted on the cells below N = 1e9, are
    scored at the 3 levels above it against the runs there; whether the output said the front
    was still falling at its largest budget; how far the budget grew. Target (issue 41): the
    pick within 1.5x of the true form."""
    truth = Form("truth", EXTRAP_TRUTH[0], ("N", "D")).bind(["N", "D"])
    consts = EXTRAP_TRUTH[1]
    Ng, Dg = np.meshgrid(CEILING_N, CEILING_D, indexing="ij")
    X = {"N": Ng.ravel(), "D": Dg.ravel()}
    mu = fr_predict(truth, X, consts)
    seen = X["N"] < 1e9
    Xs = {k: v[seen] for k, v in X.items()}
    Xh = {k: v[~seen] for k, v in X.items()}
    print(
        f"## the default grammar at its ceiling: {grids} grids from {EXTRAP_TRUTH[0]} "
        f"({consts}), 8 N x 5 D, 0.2% noise; search --split extrapolate:N:1e9 (default grammar, "
        "with and without tie_exponents), scored at the 15 cells of N >= 1e9 against the runs "
        "there; the true form refitted on the same cells beside it"
    )
    print("| grid | tied | pick | pick's error % | true form's % | ratio | still falling | "
          "grew to | s |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---|---:|---:|")
    from fitrules.engine.fit import fit as fit_cells

    rng = np.random.default_rng(seed)
    ratios: dict[bool, list[float]] = {t: [] for t in {"no": [False], "yes": [True],
                                                         "both": [False, True]}[tie]}
    for g in range(grids):
        y = mu * (1 + 0.002 * rng.standard_normal(len(mu)))
        runs = pd.DataFrame({"N": X["N"], "D": X["D"], "loss": y})
        ct = fit_cells(truth, Xs, y[seen]).constants
        et = 100 * float(np.mean(np.abs(fr_predict(truth, Xh, ct) - y[~seen]) / y[~seen]))
        for tied in ratios:
            t0 = time.perf_counter()
            grid = fr.load_grid(runs, metric="loss")
            s = fr.search(grid, split="extrapolate:N:1e9", references=[], jobs=jobs, seed=g,
                          tie_exponents=tied, yes=True)  # fmt: skip
            pick = s.chosen.bind(["N", "D"])
            cp = fit_cells(pick, Xs, y[seen]).constants
            ep = 100 * float(np.mean(np.abs(fr_predict(pick, Xh, cp) - y[~seen]) / y[~seen]))
            ratios[tied].append(ep / et)
            print(f"| {g} | {'yes' if tied else 'no'} | `{pick.expression}` | {ep:.3f} | "
                  f"{et:.3f} | {ep / et:.2f} | {'yes' if s.settings['front_at_ceiling'] else 'no'}"
                  f" | {(s.settings['growth'] or {}).get('reached', '-')}"
                  f" | {time.perf_counter() - t0:.0f} |", flush=True)  # fmt: skip
    out = {}
    for tied, r in ratios.items():
        r = np.array(r)
        out[tied] = int((r <= 1.5).sum())
        print(f"- tie_exponents {tied}: the pick within 1.5x of the true form in {out[tied]} of "
              f"{len(r)} grids (median ratio {np.median(r):.2f})")  # fmt: skip
    return out


# ------------------------------------------------------------------ selection (issue 62)
# the four simulated truths of issue 62, item 1: a grid design, a noise level and the truth's
# family in the default grammar (its canonical key, as the recovery section compares them)
SELECTION_TRUTHS: dict[str, dict] = {
    "chinchilla": dict(
        expr=EXTRAP_TRUTH[0], constants=EXTRAP_TRUTH[1],
        levels={"N": tuple(np.geomspace(1e7, 1e10, 5)), "D": tuple(np.geomspace(1e9, 1e11, 4))},
        seeds=3, cv=0.004, key="const + power(D) + power(N)",
    ),
    "vocabulary": dict(
        expr="L0 + a1*(N/1e8)**(-e1) + a2*(V/1e4)**(-e2) + a3*(D/1e10)**(-e3)",
        constants={"L0": 1.8, "a1": 0.5, "e1": 0.3, "a2": 0.15, "e2": 0.4, "a3": 0.4, "e3": 0.28},
        levels={"N": tuple(np.geomspace(1e7, 1e9, 5)), "V": tuple(np.geomspace(4e3, 2.56e5, 4)),
                "D": tuple(np.geomspace(1e9, 1e11, 4))},
        seeds=2, cv=0.004, key="const + power(D) + power(N) + power(V)",
    ),
    "saturating": dict(
        expr="L0 + a*omega/(omega + s) + b*log(H/16)",
        constants={"L0": 2.15, "a": 0.15, "s": 2.0, "b": 0.02},
        levels={"H": H, "omega": OMEGA}, seeds=3, cv=0.005,
        key="const + log(H) + saturating(omega)",
    ),
    "composition": dict(
        expr="L0 + a*omega*(H/16)**b", constants={"L0": 2.15, "a": 0.01, "b": 0.25},
        levels={"H": H, "omega": OMEGA}, seeds=3, cv=0.005,
        key="const + power(H)*linear(omega)",
    ),
}  # fmt: skip
# --quick: a smaller search to check the section's code in a minute; NOT the default rule's
# settings, so its counts measure nothing
SELECTION_QUICK = dict(terms=2, first_constants=3, max_constants=4, factors="power,linear,log",
                       splits=4, inner_splits=3)  # fmt: skip


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished (reaped) workers."""
    import resource

    a, b = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _pick_key(s, name: str, X: dict) -> str:
    """The grammar's canonical key of the candidate ``name``; a built-in reference, which
    competes in its grammar twin's place (the twin is dropped as the same function on these
    cells), takes its twin's key."""
    key = str(s.candidates.set_index("name").loc[name, "key"])
    if not key.startswith("reference "):
        return key
    ref = key.removeprefix("reference ")
    twins = s.dropped[s.dropped["reason"] == f"the same function on these cells as {ref}"]
    k = len(s.reference_forms[ref].constants)
    by_expr = {c.expression: c.key for c in generate(s.grammar, X, only_constants=k)}
    keys = {by_expr.get(e) for e in twins["expression"]} - {None}
    return keys.pop() if len(keys) == 1 else key


def section_selection(grids: int, jobs: int, truths: list[str], quick: bool = False,
                      seed: int = 62) -> dict:  # fmt: skip
    """Issue 62, item 1: how often the default search picks each budget on grids drawn from
    known truths (the budget it grows to and the form it picks, measured, not changed)."""
    options = SELECTION_QUICK if quick else {}
    call = "".join(f", {k}={v!r}" for k, v in options.items())
    print(f"## selection: the budget the default search picks, {grids} grid(s) per truth, "
          f"{jobs} process(es); fr.search(runs, yes=True{call}) (yes: the time estimate's "
          "refusal waived; every other setting the default, the seed of the splits 0)")  # fmt: skip
    if quick:
        print("**quick: a smaller search than the default; its counts measure nothing**")
    print("| truth | constants | family (canonical key) | in the default grammar | grid | "
          "runs a cell | noise a run |")  # fmt: skip
    print("|---|---:|---|---|---|---:|---:|")
    for name in truths:
        t = SELECTION_TRUTHS[name]
        form = Form("truth", t["expr"], tuple(t["levels"]))
        cols = {v: np.array(lv, float) for v, lv in t["levels"].items()}
        in_grammar = any(c.key == t["key"] for c in
                         generate(Grammar(), cols, only_constants=len(form.constants)))  # fmt: skip
        design = " x ".join(f"{v} {', '.join(f'{x:.3g}' for x in lv)}"
                            for v, lv in t["levels"].items())  # fmt: skip
        print(f"| {name}: `{t['expr']}` ({t['constants']}) | {len(form.constants)} | {t['key']} | "
              f"{'yes' if in_grammar else 'no'} | {design} | {t['seeds']} | "
              f"{100 * t['cv']:.2f}% |")  # fmt: skip
    print("\n| truth | grid | pick | constants | family? | front's best budget | outer median % "
          "by budget (* on the front) | grown to | why it stopped | CPU s |")  # fmt: skip
    print("|---|---:|---|---:|---|---:|---|---:|---|---:|")
    out: dict[str, dict] = {}
    for name in truths:
        t = SELECTION_TRUTHS[name]
        i = list(SELECTION_TRUTHS).index(name)  # each truth's grids, whichever are run
        form = Form("truth", t["expr"], tuple(t["levels"]))
        k_true = len(form.constants)
        picks: list[str] = []
        family: list[bool] = []
        cpus: list[float] = []
        for g in range(grids):
            runs = runs_from_form(form, t["constants"], t["levels"], seeds=t["seeds"],
                                  cv=t["cv"], seed=1000 * seed + 100 * i + g)  # fmt: skip
            c0 = _cpu_seconds()
            s = fr.search(runs, jobs=jobs, yes=True, **options)
            cpus.append(_cpu_seconds() - c0)
            chosen = s.chosen
            if s.abstention.get("abstains"):
                size = "abstained"
            elif chosen is None:
                size = "none"
            else:
                size = str(int(s.candidates.set_index("name").loc[chosen.name, "n_constants"]))
            X = {v: np.unique(runs[v].to_numpy(float)) for v in s.settings["variables"]}
            ok = chosen is not None and size != "abstained" and (
                _pick_key(s, chosen.name, X) == t["key"])  # fmt: skip
            picks.append(size)
            family.append(bool(ok))
            b = s.budgets
            meds = ", ".join(f"{int(r['max_constants'])}: {r['outer_median_pct']:.3f}"
                             f"{'*' if r['on_front'] else ''}"
                             for r in b.to_dict("records"))  # fmt: skip
            growth = s.settings["growth"] or {}
            print(f"| {name} | {g} | `{chosen.expression if chosen is not None else None}` | "
                  f"{size} | {'yes' if ok else 'no'} | {s.settings['best_budget']} | {meds} | "
                  f"{growth.get('reached', '-')} | {growth.get('stopped', '-')} | "
                  f"{cpus[-1]:.0f} |", flush=True)  # fmt: skip
        out[name] = dict(k=k_true, picks=picks, family=family, cpu=cpus)
    sizes = [str(k) for k in range(1, Grammar().max_constants + 1)] + ["abstained", "none"]
    print(f"\n| truth | true constants | grids | {' | '.join(f'picked {k}' for k in sizes)} | "
          "true size | truth's family | median CPU s a search |")  # fmt: skip
    print("|---|---:|---:|" + "---:|" * len(sizes) + "---:|---:|---:|")
    for name, r in out.items():
        n = len(r["picks"])
        counts = Counter(r["picks"])
        true = counts[str(r["k"])]
        print(f"| {name} | {r['k']} | {n} | {' | '.join(str(counts[k]) for k in sizes)} | "
              f"{true / n:.0%} | {sum(r['family']) / n:.0%} | {np.median(r['cpu']):.0f} |")
    for name, r in out.items():
        n = len(r["picks"])
        print(f"- {name}: true size picked in {Counter(r['picks'])[str(r['k'])]} of {n} grids "
              f"(target 80%)")  # fmt: skip
    return out


def _find_external(name: str) -> Path | None:
    for d in (ROOT / "data" / "external", ROOT.parent / "shared" / "external"):
        if (d / name).exists():
            return d / name
    return None


def _budget_table(s) -> list[tuple]:
    return [(int(r["max_constants"]), round(float(r["outer_median_pct"]), 9), r["final_choice"])
            for r in s.budgets.to_dict("records")]  # fmt: skip


def section_staged(jobs: int, cluster: bool = True, screen_effect: bool = True) -> None:
    """Issue 29: a search that outgrows a laptop. (1) The screen's effect on the outer error,
    on a grammar small enough to fit every candidate in full (the default grid, its default
    grammar): outer median and pick at each budget, staged (``--screen 25``) and in full.
    (2) The data-constrained grid (../shared/external, variables N, D, U, its training
    split), the default grammar, staged automatically: wall time on ``jobs`` processes, and
    the same search on a Dask LocalCluster of as many processes, whose picks and outer
    errors must be the same."""
    if screen_effect:
        _screen_effect(jobs)
    _data_constrained(jobs, cluster)


def _screen_effect(jobs: int) -> None:
    print("## staged search: the screen's effect (default grid, default grammar)")
    res = {}
    for screen in (0, 25):
        t0 = time.perf_counter()
        s = fr.search(None, references=[], jobs=jobs, screen=screen)
        res[screen] = (s, time.perf_counter() - t0)
    print("| at most k | outer median, full | staged | pick, full | staged |")
    print("|---:|---:|---:|---|---|")
    full, staged = res[0][0], res[25][0]
    for a, b in zip(full.budgets.to_dict("records"), staged.budgets.to_dict("records"),
                    strict=True):  # fmt: skip
        fa = full.forms[a["final_choice"]].expression if a["final_choice"] else "none"
        fb = staged.forms[b["final_choice"]].expression if b["final_choice"] else "none"
        print(f"| {a['max_constants']} | {a['outer_median_pct']:.4f}% | "
              f"{b['outer_median_pct']:.4f}% | `{fa}` | `{fb}` |")  # fmt: skip
    sc = staged.settings["screen"]
    print(f"full: {len(full.candidates):,} candidates in {res[0][1]:.0f} s; staged: "
          f"{sc['validated']:,} of {sc['screened']:,} given the full nested fits, "
          f"{res[25][1]:.0f} s ({res[0][1] / res[25][1]:.1f}x faster); same pick from all "
          f"cells: {full.chosen.expression == staged.chosen.expression}", flush=True)  # fmt: skip


def _data_constrained(jobs: int, cluster: bool) -> None:
    path = _find_external("data_constrained_muennighoff.csv")
    if path is None:
        print("skipping the data-constrained grid: data_constrained_muennighoff.csv is absent")
        return
    grid = fr.load_grid(path, metric="loss", where="D < 6e11 and N < 4.2e9")
    print(f"\n## data-constrained grid ({len(grid.runs)} training runs), variables N, D, U, "
          f"default grammar, staged automatically, {jobs} processes", flush=True)  # fmt: skip
    import resource

    def cpu() -> float:  # this process and its finished workers, user + system
        a, b = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    local = fr.search(grid, variables=["N", "D", "U"], jobs=jobs, references=[], yes=True)
    wall, busy = time.perf_counter() - t0, cpu() - c0
    sc = local.settings["screen"]
    load = os.getloadavg()[0]
    # on a shared machine the wall time measures the others too: the CPU time over the
    # processes is what the search needs, and its share per process is the wall time on
    # as many idle cores (the pool keeps both busy but for the serial parts)
    print(f"local: {sc['screened']:,} candidates screened, {sc['validated']:,} in full; "
          f"{wall / 60:.1f} min wall on {jobs} processes at a load average of {load:.1f}; "
          f"{busy / 60:.1f} min of CPU, {busy / jobs / 60:.1f} min per process (target: "
          f"under 15 min on 2 cores); pick `{local.chosen.expression}`, outer median "
          f"{local.best['outer_median_pct']:.3f}%", flush=True)  # fmt: skip
    if not cluster:
        return
    t0 = time.perf_counter()
    remote = fr.search(grid, variables=["N", "D", "U"], scheduler=f"local:{jobs}",
                       references=[], yes=True)  # fmt: skip
    wall_c = time.perf_counter() - t0
    same = _budget_table(local) == _budget_table(remote)
    print(f"LocalCluster of {jobs} processes: {wall_c / 60:.1f} min; pick "
          f"`{remote.chosen.expression}`; picks and outer errors at every budget the same as "
          f"the local run's: {same}", flush=True)  # fmt: skip


# ------------------------------------------------------------------------------ cost
MOE_VARIANT = ("variants", "sldbench_moe_step249000.csv")
MOE_WHERE = "N < 1e9"  # the 50 cells of issue 62/63: 10 levels of E x the 5 smaller N


def run_commands(jobs: list[tuple[Path, list[str]]]) -> list[tuple[float, float, str, str]]:
    """(CPU seconds of the command and its workers, wall seconds, stdout, stderr) of each
    ``python -m fitrules ARGS`` run from its checkout (its own fitrules on the path), all at
    once (so that each sees the same load); the CPU seconds are each command's own
    (``os.wait4``), user + system, its workers' included."""
    import subprocess
    import tempfile

    procs = []
    for tree, args in jobs:
        env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1")
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        p = subprocess.Popen([sys.executable, "-m", "fitrules", *args], cwd=tree, env=env,
                             stdout=out, stderr=err, text=True)  # fmt: skip
        procs.append((p, out, err, time.perf_counter()))
    res: dict[int, tuple[float, float]] = {}
    while len(res) < len(procs):
        pid, _, ru = os.wait4(-1, 0)
        for i, (p, _, _, t0) in enumerate(procs):
            if p.pid == pid:
                p.returncode = 0  # reaped here; Popen must not wait for it
                res[i] = (ru.ru_utime + ru.ru_stime, time.perf_counter() - t0)
    outs = []
    for i, (_, out, err, _) in enumerate(procs):
        out.seek(0)
        err.seek(0)
        outs.append((*res[i], out.read(), err.read()))
    return outs


def _picks(out: str) -> tuple[str, list[str], dict]:
    """From a search's JSON: the pick (the front's best budget), each budget's choice from
    all cells, and the dropped candidates' reasons with counts."""
    import json

    try:
        d = json.loads(out)
    except ValueError:
        return "(no result)", [], {}
    best = d["settings"]["best_budget"]
    pick = next((f["expression"] for f in d["front"] if f["max_constants"] == best), None)
    per = [f"{b['max_constants']}: {b['final_choice']}" for b in d["budgets"]]
    dropped = dict(d.get("dropped", {}))
    if "hopeless" in d["settings"]:  # the share of the nested rows fitted (jobs.search.hopeless)
        dropped["nested rows fitted"] = f"{d['settings']['hopeless']['rows_fitted']:.1%}"
    return str(pick), per, dropped


def section_cost(old: Path | None, repeats: int) -> dict:
    """Issue 63: the default search on the 50-cell MoE variant grid, this checkout against
    ``old`` in the same run, CPU seconds (minimum over ``repeats``) and their ratio."""
    path = _find_external(str(Path(*MOE_VARIANT)))
    if path is None:
        print("skipped: ../shared/external/variants/sldbench_moe_step249000.csv is not present")
        return {}
    # flag words: the command line each checkout runs
    args = ["search", "--data", str(path), "--where", MOE_WHERE, "--yes", "--json", "-"]
    print(f"## cost: fitrules search --where '{MOE_WHERE}' --yes on {path.name} (50 cells), "
          f"{repeats} repeat(s), load average {os.getloadavg()[0]:.1f} at the start")  # fmt: skip
    trees = {"new": ROOT, **({"old": old} if old else {})}
    res: dict[str, list] = {k: [] for k in trees}
    for _ in range(repeats):  # at once: both see the same load
        for name, r in zip(trees, run_commands([(t, args) for t in trees.values()]),
                           strict=True):  # fmt: skip
            res[name].append(r)
    out = {}
    for name, runs in res.items():
        cpu, wall = min(r[0] for r in runs), min(r[1] for r in runs)
        out[name] = cpu
        pick, per, dropped = _picks(runs[0][2])
        print(f"- {name} ({trees[name].name}): {cpu:.1f} CPU s (min of {len(runs)}: "
              f"{', '.join(f'{r[0]:.1f}' for r in runs)}), {wall:.1f} s wall (inflated by "
              f"load); pick `{pick}`; choice from all cells by budget {per}; dropped before "
              f"the nested fits {dropped}")  # fmt: skip
    if "old" in out:
        print(f"ratio new / old: {out['new'] / out['old']:.3f} (target at most 0.2)")
    return out


def section_catalogue(jobs: int | None) -> None:
    """Issue 62: ``fitrules search --data GRID`` with no other option on each catalogue grid
    present, as a command: CPU and wall seconds, the pick or the refusal."""
    import tomllib

    cat = tomllib.loads((ROOT / "data" / "external" / "published.toml").read_text())
    print(f"## catalogue: fitrules search --data GRID, no other option, load average "
          f"{os.getloadavg()[0]:.1f}; CPU seconds of the command and its workers, wall seconds "
          "(inflated by load)")  # fmt: skip
    print("| grid | cells file | CPU s | wall s | estimate | pick or refusal |")
    print("|---|---|---:|---:|---|---|")
    for name, entry in cat.items():
        path = _find_external(entry["file"])
        if path is None:
            print(f"| {name} | {entry['file']} | - | - | - | not present |")
            continue
        # flag words: the command line; the metric named only where the default misses it
        args = ["search", "--data", str(path)] + (["--jobs", str(jobs)] if jobs else [])
        if entry["metric"] not in ("loss", "val_loss"):
            args += ["--metric", entry["metric"]]  # flag words: as above
        ((cpu, wall, out, err),) = run_commands([(ROOT, [*args, "--json", "-"])])
        est = next((ln.split("estimated ")[1].split(";")[0] for ln in err.splitlines()
                    if "estimated " in ln), "-")  # fmt: skip
        refused = next((ln for ln in err.splitlines() if "error:" in ln), None)
        print(f"| {name} | {path.name} | {cpu:.0f} | {wall:.0f} | {est} | "
              f"{refused[:200] if refused else '`' + _picks(out)[0] + '`'} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        choices=[
            "speed",
            "recovery",
            "front",
            "optimism",
            "chinchilla",
            "outer-seeds",
            "outer-holdouts",
            "extrapolation",
            "staged",
            "ceiling",
            "selection",
            "cost",
            "catalogue",
        ],  # fmt: skip
        default=None,
    )
    ap.add_argument("--outer-grids", type=int, default=30, help="grids per truth, outer-seeds")
    ap.add_argument("--outer-default-only", action="store_true",
                    help="outer-seeds: run the default cells-and-seeds protocol alone")  # fmt: skip
    ap.add_argument("--outer-weights", default="box",
                    help="outer-seeds: held-out weights run, comma-separated (box, equal)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-cluster", action="store_true", help="staged: skip the Dask run")
    ap.add_argument("--no-screen-effect", action="store_true",
                    help="staged: skip the default grid's full-against-staged run")  # fmt: skip
    ap.add_argument("--grids", type=int, default=10)
    ap.add_argument("--tie", choices=["no", "yes", "both"], default="both",
                    help="ceiling: the default grammar without tied exponents, with, or both")
    ap.add_argument("--sample", type=int, default=4, help="baseline forms per class")
    ap.add_argument("--old", type=Path, default=None,
                    help="cost: a checkout of the old code (e.g. a worktree at 318c40e)")
    ap.add_argument("--repeats", type=int, default=1, help="cost: runs of each, the min kept")
    ap.add_argument("--selection-grids", type=int, default=20, help="selection: grids per truth")
    ap.add_argument("--selection-truths", default=",".join(SELECTION_TRUTHS),
                    help=f"selection: comma-separated, of {', '.join(SELECTION_TRUTHS)}")
    ap.add_argument("--quick", action="store_true",
                    help="selection: a smaller search than the default, to check the code")
    args = ap.parse_args()
    if args.only in (None, "speed"):
        section_speed(args.jobs, args.sample)
    if args.only in (None, "recovery"):
        section_recovery(args.grids, args.jobs)
    if args.only in (None, "front"):
        section_front(args.grids, args.jobs)
    if args.only in (None, "optimism"):
        section_optimism(8)
    if args.only in (None, "chinchilla"):
        section_chinchilla(args.jobs)
    if args.only in (None, "outer-seeds"):
        protocols = (
            ("cells-and-seeds",) if args.outer_default_only else ("cells-and-seeds", "cells")
        )
        weights = tuple(w.strip() for w in args.outer_weights.split(",") if w.strip())
        section_outer_seeds(args.outer_grids, args.jobs, protocols=protocols, weights=weights)
    if args.only in (None, "outer-holdouts"):
        section_outer_holdouts(args.outer_grids)
    if args.only in (None, "extrapolation"):
        section_extrapolation(args.grids, args.jobs)
    if args.only in (None, "staged"):
        section_staged(args.jobs, not args.no_cluster, not args.no_screen_effect)
    if args.only in (None, "ceiling"):
        section_ceiling(args.grids, args.jobs, tie=args.tie)
    if args.only == "selection":  # hours at 20 grids a truth: only when asked
        truths = [t.strip() for t in args.selection_truths.split(",") if t.strip()]
        unknown = [t for t in truths if t not in SELECTION_TRUTHS]
        if unknown:
            ap.error(f"unknown truth(s) {unknown}; known: {', '.join(SELECTION_TRUTHS)}")
        section_selection(args.selection_grids, args.jobs, truths, quick=args.quick)
    if args.only == "cost":  # runs commands for minutes: only when asked
        section_cost(args.old, args.repeats)
    if args.only == "catalogue":
        section_catalogue(None)


if __name__ == "__main__":
    main()
