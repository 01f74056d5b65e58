"""What `fitrules compare` costs in CPU, against the import of its libraries, in one run (issue 63).

    python benchmarks/bench_engine.py                 # compare at 30, 300 and 3,000 splits
    python benchmarks/bench_engine.py --why           # ... and where a 300-split run goes
    python benchmarks/bench_engine.py --published     # ... and one fit of each published law
    python benchmarks/bench_engine.py --objectives now.csv [--against before.csv]
    python benchmarks/bench_engine.py --fair --trials 20 --seeds 1   # against a fair baseline
    python benchmarks/bench_engine.py --splits 30,3000 --old DIR   # beside a checkout DIR

Every time is CPU seconds of a child process (user + system, ``getrusage`` of the children),
not wall time: the development machine is shared, and CPU is what load stretches least. Each
command runs ``--repeat`` times, interleaved with the others, and the smallest time counts.
Printed: the import baseline (``python -c "import numpy, scipy.optimize, pandas"``), the
command at 30, 300 and 3,000 splits, its fixed cost and cost a split (the straight line through
the 30- and 3,000-split times) and each time's ratio to the baseline. ``--old DIR``: the
same commands run from another checkout DIR (an older commit), in the same rounds, printed
after them: a change's effect measured under the same load.

``--why``: one 300-split run in a child, instrumented: the CPU of the whole command and of its
fits (per form: calls, splits asked, distinct training sets among them), the calls of the
tree-walking evaluator (``fitrules.model.expr.evaluate``, recursive calls counted), the CPU
spent building the JSON payload, and the pyarrow modules the run imports beyond those pandas
itself imports.

``--published``: one ``fr.fit`` of each published law whose grid is present (as
``bench_published.py`` fits it, without its reference), CPU per fit and the calls of
``Grid.summary`` it makes.

``--split-objectives PATH``: every split fit's training objective of ``compare --splits
300`` on the default grid (3,600 fits), written to PATH; with ``--against OLD``, counted as
within 1e-9 relative, lower or higher than an older file's, fits flagged degenerate apart
(their constants are not identified, so their path along a flat direction may differ).

``--fair``: each published law present (one fit per group where the authors fitted per group)
and each family of the corpus (``--seeds`` seeds) against a careful scipy user: the same
objective written in numpy (``reference.Problem``), a single random start's rate p of reaching
the best known objective (within 1e-6 relative) measured over ``--trials`` seeded starts, and
k = ceil(log(0.001)/log(1 - p)) starts actually run (restarted until 99.9% sure; their CPU
is the baseline's, see ``reference.restart_until_sure``); the same with lmfit on the published
laws. Printed per law and family: fitrules' CPU (the smallest of ``--repeat`` fits), each
baseline's p, k, CPU and ratio, the objectives side by side, and the totals against the
200-start reference (200 / trials times the trials' CPU).

``--objectives PATH``: the training objective of every case of ``bench_fit_corpus.py``
(``--seeds``, default 8) and of every published law present, written to PATH; with
``--against OLD``, compared case by case with an older file: the engine may change only where
an objective stays within 1e-9 relative or goes down.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = "import numpy, scipy.optimize, pandas"
SPLITS = (30, 300, 3000)
TOL = 1e-9


def _env(root: Path = ROOT) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def child_cpu(argv: list[str], root: Path = ROOT) -> tuple[float, str]:
    """CPU seconds (user + system) of one child process run from checkout ``root``, and its
    stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        argv, env=_env(root), cwd=root, capture_output=True, text=True, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out.stdout


def compile_package(root: Path = ROOT) -> None:
    """Write the package's bytecode first, as an install or a first run does: a checkout run
    with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module in every timed run,
    which the baseline's installed libraries never do."""
    import compileall

    compileall.compile_dir(root / "fitrules", quiet=1)


def compare_cpu(splits: tuple[int, ...], repeat: int, old: Path | None = None) -> dict:
    """The smallest CPU of each command over ``repeat`` interleaved rounds (the package's
    bytecode written first: see :func:`compile_package`); with ``old`` (another checkout),
    its commands too, in the same rounds, under keys ``("old", n)``."""
    compile_package()
    cmd = [sys.executable, "-m", "fitrules", "compare", "--no-progress", "--splits"]
    cmds = {"baseline": ([sys.executable, "-c", BASELINE], ROOT)}
    for n in splits:
        cmds[n] = ([*cmd, str(n)], ROOT)
    if old is not None:
        compile_package(old)
        for n in splits:
            cmds["old", n] = ([*cmd, str(n)], old)
    best: dict = {k: float("inf") for k in cmds}
    first_lines = None
    for _ in range(repeat):
        for k, (argv, root) in cmds.items():
            cpu, out = child_cpu(argv, root)
            best[k] = min(best[k], cpu)
            if k == 300:
                first_lines = out.splitlines()[:2]
    best["first_lines"] = first_lines
    return best


def print_compare(best: dict, splits: tuple[int, ...]) -> None:
    base = best["baseline"]
    print(f'import baseline (python -c "{BASELINE}"): {base:.2f} CPU s')
    versions = [("", lambda n: n)]
    if ("old", splits[0]) in best:
        versions.append(("--old ", lambda n: ("old", n)))
    for label, key in versions:
        for n in splits:
            ratio = best[key(n)] / base
            print(
                f"{label}fitrules compare --splits {n:>5,}: {best[key(n)]:6.2f} CPU s  "
                f"({ratio:.2f}x baseline)"
            )
        lo, hi = min(splits), max(splits)
        if hi > lo:  # one split count (--splits 300) has no line through two
            per = (best[key(hi)] - best[key(lo)]) / (hi - lo)
            fixed = best[key(lo)] - lo * per
            print(
                f"{label}per split: {1000 * per:.2f} ms CPU (the line through {lo:,} and "
                f"{hi:,} splits); fixed: {fixed:.2f} CPU s ({fixed / base:.2f}x the baseline)"
            )
    if best.get("first_lines"):
        print("first lines at 300 splits:")
        for line in best["first_lines"]:
            print("  " + line)


# ------------------------------------------------------------------ --why (in a child)
def why_child() -> None:
    import io
    from contextlib import redirect_stdout

    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import scipy.optimize  # noqa: F401

    baseline_modules = set(sys.modules)
    import fitrules.jobs.compare.result as result_mod
    import fitrules.jobs.compare.scoring as scoring
    import fitrules.jobs.compare.verdicts as verdicts
    import fitrules.model.expr as ex
    from fitrules.cli.app import main

    fits: dict = {}
    calls = {"evaluate": 0, "payload_s": 0.0, "payloads": 0}
    original = ex.evaluate

    def counted(node, env):
        calls["evaluate"] += 1
        return original(node, env)

    ex.evaluate = counted

    def timed_fit(fn, where):
        def wrapper(form, X, y, masks, *a, **k):
            import numpy as np

            t0 = time.process_time()
            out = fn(form, X, y, masks, *a, **k)
            row = fits.setdefault(form.name, {"calls": 0, "splits": 0, "distinct": 0, "cpu": 0.0})
            row["calls"] += 1
            row["splits"] += len(masks)
            row["distinct"] += len(np.unique(np.asarray(masks, bool), axis=0))
            row["cpu"] += time.process_time() - t0
            return out

        return wrapper

    scoring.fit_splits = timed_fit(scoring.fit_splits, "descriptive")
    verdicts.fit_splits = timed_fit(verdicts.fit_splits, "verdict")
    to_dict = result_mod.Comparison.to_dict

    def timed_to_dict(self, *a, **k):
        t0 = time.process_time()
        out = to_dict(self, *a, **k)
        calls["payload_s"] += time.process_time() - t0
        calls["payloads"] += 1
        return out

    result_mod.Comparison.to_dict = timed_to_dict
    t0 = time.process_time()
    with redirect_stdout(io.StringIO()):
        try:
            main(["compare", "--splits", "300", "--no-progress"])
        except SystemExit:
            pass
    total = time.process_time() - t0
    extra = sorted(m for m in set(sys.modules) - baseline_modules if m.startswith("pyarrow"))
    print(json.dumps({"total": total, "fits": fits, **calls, "pyarrow": extra}))


def print_why() -> None:
    out = subprocess.run(
        [sys.executable, __file__, "--_why-child"], env=_env(), cwd=ROOT,
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    w = json.loads(out.splitlines()[-1])
    fit_cpu = sum(r["cpu"] for r in w["fits"].values())
    n_fits = sum(r["splits"] for r in w["fits"].values())
    n_distinct = sum(r["distinct"] for r in w["fits"].values())
    print(f"--why, one 300-split run in a child after its imports: {w['total']:.2f} CPU s")
    print(
        f"  fits: {fit_cpu:.2f} CPU s ({fit_cpu / w['total']:.0%}), {n_fits:,} fits asked "
        f"({n_distinct:,} distinct training sets), {1000 * fit_cpu / max(n_fits, 1):.2f} ms a fit"
    )
    for name, r in sorted(w["fits"].items(), key=lambda kv: -kv[1]["cpu"]):
        print(
            f"    {name:<18} {r['cpu']:5.2f} CPU s  {r['splits']:>5} fits, "
            f"{r['distinct']:>5} distinct training sets"
        )
    print(f"  tree-walking evaluations (expr.evaluate, recursive calls counted): {w['evaluate']:,}")
    print(f"  JSON payload built {w['payloads']} time(s), {w['payload_s']:.2f} CPU s")
    print(f"  pyarrow modules imported beyond pandas' own: {', '.join(w['pyarrow']) or 'none'}")


# ------------------------------------------------------------------ published laws
def _catalogue():
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import bench_published as bp

    catalogue = tomllib.loads(bp.CATALOGUE.read_text())
    dirs = [ROOT / "data" / "external", ROOT.parent / "shared" / "external"]
    return bp, catalogue, dirs


def published_groups():
    """(grid name, key, catalogue entry, training rows, grid, fit options) of each fit of a
    published law whose grid is present: one per group where the authors fitted per group."""
    import pandas as pd

    import fitrules as fr

    bp, catalogue, dirs = _catalogue()
    for name, entry, path in bp.present(list(catalogue), catalogue, dirs):
        table = pd.read_csv(path)
        for d in entry.get("derive", []):
            col, expr = d.split("=", 1)
            table[col.strip()] = table.eval(expr.strip())
        by = entry.get("group")
        groups = [None] if not by else sorted(table[by].unique().tolist())
        opts = bp.plain_fit_options(entry, entry["form"])
        for g in groups:
            where = [entry["train"]] + ([f"`{entry['group']}` == {g!r}"] if g is not None else [])
            rows = table.query(" and ".join(f"({w})" for w in where))
            seed_col = "run" if "run" in rows else None
            grid = fr.load_grid(rows, metric=entry["metric"], seed_col=seed_col)
            key = name if g is None else f"{name}[{g}]"
            yield name, key, entry, rows, grid, opts


def _timed_fit(grid, form, opts, repeat):
    """The smallest CPU of ``repeat`` ``fr.fit`` calls, and the last fit."""
    import numpy as np

    import fitrules as fr

    best, f = float("inf"), None
    with np.errstate(all="ignore"):
        for _ in range(repeat):
            t0 = time.process_time()
            f = fr.fit(grid, form, **opts)
            best = min(best, time.process_time() - t0)
    return best, f


def published_fits(repeat: int = 1):
    """(name, CPU s per fit, Grid.summary calls per fit, objective) of each published law."""
    from fitrules.model import grid_class

    calls = {"summary": 0}
    original = grid_class.Grid.summary

    def counted(self, *a, **k):
        calls["summary"] += 1
        return original(self, *a, **k)

    grid_class.Grid.summary = counted
    out = []
    for _, key, entry, _, grid, opts in published_groups():
        calls["summary"] = 0
        best, f = _timed_fit(grid, entry["form"], opts, repeat)
        out.append((key, best, calls["summary"] / repeat, f.result.objective))
    grid_class.Grid.summary = original
    return out


def print_published(repeat: int) -> None:
    print(f"--published: one fr.fit of each published law (the smallest CPU of {repeat} fits)")
    for key, cpu, summaries, obj in published_fits(repeat):
        print(
            f"  {key:<45} {1000 * cpu:8.1f} ms CPU  Grid.summary calls {summaries:5.0f}  "
            f"objective {obj:.12g}"
        )


# ------------------------------------------------------------------ --fair
def _fair_case(problem, x_fitrules, cpu_fitrules: float, trials: int, seed: int, repeat: int,
               with_lmfit: bool) -> dict:  # fmt: skip
    """One fit against the restart-until-sure baselines (``reference.restart_until_sure``):
    scipy ``least_squares`` and lmfit, the best known objective the smallest of fitrules'
    and every trial's."""
    import reference as ref

    obj = problem.value(x_fitrules)
    runs = {"scipy": ref.trials(problem, trials, seed)}
    if with_lmfit:
        runs["lmfit"] = ref.trials(problem, trials, seed, ref.lmfit_start)
    best = min([obj] + [float(v.min()) for v, _ in runs.values()])
    finish = {"scipy": None, "lmfit": ref.lmfit_start}
    out = {"fitrules_cpu": cpu_fitrules, "fitrules": obj, "best": best,
           "fitrules_hit": bool(obj <= best + ref.HIT * abs(best))}  # fmt: skip
    for name, (vals, cpu) in runs.items():
        out[name] = ref.restart_until_sure(problem, vals, cpu, best, seed, 1, finish[name])
    return out


def fair_published(trials: int, seed: int, repeat: int, with_lmfit: bool):
    """(grid name, :func:`_fair_case` row) of each fit of a published law present."""
    import reference as ref

    bp, _, _ = _catalogue()
    for name, _, entry, rows, grid, opts in published_groups():
        cpu, f = _timed_fit(grid, entry["form"], opts, repeat)
        head, expr = entry["form"].split("=", 1)
        variables = head[head.index("(") + 1 : head.index(")")].replace(" ", "").split(",")
        constants = list(f.form.structure.constants)
        X = {v: rows[v].to_numpy(float) for v in variables}
        problem = ref.Problem(expr.strip(), variables, constants, X,
                              rows[entry["metric"]].to_numpy(float), entry["objective"],
                              opts.get("bounds"), start_box=bp._box(entry, constants))  # fmt: skip
        x = [f.constants[c] for c in constants]
        yield name, _fair_case(problem, x, cpu, trials, seed, repeat, with_lmfit)


def fair_corpus(seeds: int, trials: int, seed: int, repeat: int, with_lmfit: bool):
    """(family, :func:`_fair_case` row) of each case of ``bench_fit_corpus.py``."""
    import numpy as np

    import bench_fit_corpus as bc
    import reference as ref

    from fitrules.engine.fit import Objective, fit

    for case in bc.corpus(range(seeds)):
        form, X, y = bc.case_inputs(case)
        cpu = float("inf")
        with np.errstate(all="ignore"):
            for _ in range(repeat):
                t0 = time.process_time()
                r = fit(form, X, y, Objective(case.objective))
                cpu = min(cpu, time.process_time() - t0)
        problem = ref.Problem(X=X, y=y, **bc.reference_inputs(case, form))
        x = [r.constants[c] for c in form.structure.constants]
        yield case.family, _fair_case(problem, x, cpu, trials, seed, repeat, with_lmfit)


def _fair_group(rows: list[dict], trials: int) -> dict:
    """One line of the table: the sums over a grid's fits (or a family's cases)."""
    out = {"fits": len(rows), "fitrules_cpu": sum(r["fitrules_cpu"] for r in rows),
           "fitrules": sum(r["fitrules"] for r in rows),
           "misses": sum(not r["fitrules_hit"] for r in rows),
           "ref200": sum(r["scipy"]["trials_cpu"] for r in rows) * 200 / trials}  # fmt: skip
    for side in ("scipy", "lmfit"):
        if side in rows[0]:
            b = [r[side] for r in rows]
            out[side] = {"cpu": sum(x["cpu"] for x in b), "objective": sum(x["objective"] for x in b),
                         "p": (min(x["p"] for x in b), max(x["p"] for x in b)),
                         "k": sum(x["k"] or 0 for x in b),
                         "never": sum(x["k"] is None for x in b)}  # fmt: skip
    return out


def _fair_cells(g: dict, side: str) -> str:
    b = g.get(side)
    if b is None:
        return " | | | |"
    p = f"{b['p'][0]:.2f}" if b["p"][0] == b["p"][1] else f"{b['p'][0]:.2f}-{b['p'][1]:.2f}"
    k = f"{b['k']}" + (f" (+{b['never']} never)" if b["never"] else "")
    ge = ">=" if b["never"] else ""
    return (f" {p} | {k} | {ge}{b['cpu']:.3f} | {ge}{b['cpu'] / g['fitrules_cpu']:.2f}x |"
            f" {b['objective']:.6g} |")  # fmt: skip


def print_fair(seeds: int, trials: int, seed: int, repeat: int, with_lmfit: bool) -> None:
    """The published laws and the corpus against scipy and lmfit restarted until 99.9% sure."""
    import platform

    print(f"--fair: python {sys.version.split()[0]}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.1f}; p from "
          f"{trials} single starts (seed {seed}), k = ceil(log(0.001)/log(1 - p)) starts run "
          f"from seed {seed + 1} once; CPU seconds (process_time), fitrules the smallest of "
          f"{repeat} fits; 200-start reference CPU = 200/trials x the trials' CPU; lmfit on "
          "the published laws only")  # fmt: skip
    head = ("| {what} | fits | fitrules CPU s | fitrules objective | misses | scipy p | scipy k | "
            "scipy CPU s | scipy/fitrules | scipy objective |"
            + (" lmfit p | lmfit k | lmfit CPU s | lmfit/fitrules | lmfit objective |"
               if with_lmfit else ""))  # fmt: skip
    totals = {}
    for label, plural, lm, source in (
        ("published law", "published laws", with_lmfit,
         fair_published(trials, seed, repeat, with_lmfit)),
        ("corpus family", "corpus families", False, fair_corpus(seeds, trials, seed, repeat, False)),
    ):  # fmt: skip
        by: dict = {}
        for key, row in source:
            by.setdefault(key, []).append(row)
        groups = {k: _fair_group(v, trials) for k, v in by.items()}
        line = head.format(what=label) if lm else head.format(what=label).split(" lmfit p |")[0]
        print()
        print(line)
        print("|---" + "|---:" * (line.count("|") - 2) + "|")
        for key, g in groups.items():
            print(f"| {key} | {g['fits']} | {g['fitrules_cpu']:.3f} | {g['fitrules']:.6g} | "
                  f"{g['misses']} |" + _fair_cells(g, "scipy")
                  + (_fair_cells(g, "lmfit") if lm else ""))  # fmt: skip
        fast = sum(g["fitrules_cpu"] <= g["scipy"]["cpu"] for g in groups.values())
        fr_cpu = sum(g["fitrules_cpu"] for g in groups.values())
        sc_cpu = sum(g["scipy"]["cpu"] for g in groups.values())
        ref200 = sum(g["ref200"] for g in groups.values())
        totals[label] = (fr_cpu, ref200)
        print(f"{plural}: fitrules at least as fast as scipy restarted until sure on {fast} of "
              f"{len(groups)}; total CPU fitrules {fr_cpu:.2f} s, scipy until sure "
              f"{sc_cpu:.2f} s ({sc_cpu / fr_cpu:.2f}x), 200-start reference {ref200:.1f} s "
              f"({ref200 / fr_cpu:.0f}x); fitrules above the best known objective (1e-6 "
              f"relative) on {sum(g['misses'] for g in groups.values())} of "
              f"{sum(g['fits'] for g in groups.values())} fits")  # fmt: skip
    fr_cpu = sum(t[0] for t in totals.values())
    ref200 = sum(t[1] for t in totals.values())
    print(f"published laws and corpus together: fitrules {fr_cpu:.2f} CPU s, the 200-start "
          f"reference {ref200:.1f} CPU s ({ref200 / fr_cpu:.0f}x)")


# ------------------------------------------------------------------ objectives
def objectives(seeds: int) -> dict[str, float]:
    import numpy as np

    sys.path.insert(0, str(HERE))
    import bench_fit_corpus as bc

    from fitrules.engine.fit import Objective, fit

    out = {}
    for i, case in enumerate(bc.corpus(range(seeds))):
        form, X, y = bc.case_inputs(case)
        with np.errstate(all="ignore"):
            r = fit(form, X, y, Objective(case.objective))
        out[f"corpus/{i}/{case.family}/{case.objective}"] = r.objective
    for key, _, _, obj in published_fits(1):
        out[f"published/{key}"] = obj
    return out


def write_objectives(path: str, seeds: int, against: str | None) -> int:
    import pandas as pd

    t0 = time.process_time()
    now = objectives(seeds)
    cpu = time.process_time() - t0
    pd.Series(now, name="objective").rename_axis("case").to_csv(path, float_format="%.17g")
    print(f"{len(now)} objectives written to {path} ({cpu:.1f} CPU s)")
    if against is None:
        return 0
    old = pd.read_csv(against, index_col="case")["objective"]
    worse, lower, same = [], 0, 0
    for case, v in now.items():
        if case not in old.index:
            continue
        o = float(old[case])
        if v <= o * (1 + TOL) + 1e-300 or (v != v and o != o):
            if v < o * (1 - TOL):
                lower += 1
            else:
                same += 1
        else:
            worse.append((case, o, v))
    print(f"against {against}: {same} within {TOL:g} relative, {lower} lower, {len(worse)} higher")
    for case, o, v in worse:
        print(f"  higher: {case}: {o:.12g} -> {v:.12g} ({v / o - 1:+.3g})")
    return 1 if worse else 0


# ------------------------------------------------------------------ split objectives
def split_objectives(splits: int) -> tuple[list[str], list[float], list[bool]]:
    """Every split fit's (form, training objective, flagged) of one ``compare`` on the
    default grid, in the order the job asks for them."""
    import contextlib
    import io

    import fitrules.jobs.compare.scoring as scoring
    import fitrules.jobs.compare.verdicts as verdicts

    names, values, flagged = [], [], []
    original = scoring.fit_splits

    def recorded(form, *a, **k):
        fits = original(form, *a, **k)
        names.extend(form.name for _ in fits)
        values.extend(r.objective for r in fits)
        flagged.extend(bool(r.reasons) for r in fits)
        return fits

    scoring.fit_splits = verdicts.fit_splits = recorded
    from fitrules.cli import main as cli

    with contextlib.redirect_stdout(io.StringIO()):
        cli(["compare", "--splits", str(splits), "--no-progress"])
    return names, values, flagged


def write_split_objectives(path: str, splits: int, against: str | None) -> int:
    """Write every split fit's objective to ``path``; with ``against``, count the fits that
    end higher, lower or the same (1e-9 relative) as an older file's, flagged apart."""
    import pandas as pd

    names, values, flagged = split_objectives(splits)
    now = pd.DataFrame({"form": names, "objective": values, "flagged": flagged})
    now.to_csv(path, index_label="fit", float_format="%.17g")
    print(f"{len(now)} split fits of compare --splits {splits} written to {path}")
    if against is None:
        return 0
    old = pd.read_csv(against, index_col="fit")
    if len(old) != len(now) or (old["form"] != now["form"]).any():
        print(f"{against} holds other fits ({len(old)}): not comparable")
        return 1
    rel = (now["objective"] - old["objective"]) / old["objective"].abs().clip(lower=1e-300)
    for label, rows in (("not flagged", ~now["flagged"]), ("flagged", now["flagged"])):
        r = rel[rows]
        print(f"  {label:>11}: {len(r):5d} fits; {int((r.abs() <= TOL).sum())} within {TOL:g}, "
              f"{int((r < -TOL).sum())} lower, {int((r > TOL).sum())} higher"
              f" (largest rise {max(r.max(), 0.0):.2g})")  # fmt: skip
    return 1 if (rel[~now["flagged"]] > TOL).any() else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the smallest CPU counts (3)")
    ap.add_argument("--splits", default="30,300,3000", help="split counts (30,300,3000)")
    ap.add_argument("--why", action="store_true", help="where a 300-split run's CPU goes")
    ap.add_argument("--published", action="store_true", help="one fit of each published law")
    ap.add_argument("--objectives", metavar="PATH", help="write every corpus and law's objective")
    ap.add_argument("--against", metavar="OLD", help="with --objectives: compare with an old file")
    ap.add_argument("--seeds", type=int, default=8, help="corpus seeds for --objectives (8)")
    ap.add_argument("--split-objectives", metavar="PATH",
                    help="write every split fit's objective of compare --splits 300")
    ap.add_argument("--fair", action="store_true",
                    help="published laws and corpus against scipy/lmfit restarted until sure")
    ap.add_argument("--trials", type=int, default=30,
                    help="--fair: single starts that measure a start's hit rate (30)")
    ap.add_argument("--no-lmfit", action="store_true", help="--fair: scipy only")
    ap.add_argument("--old", metavar="DIR", type=Path,
                    help="another checkout whose compare runs in the same rounds")
    ap.add_argument("--_why-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._why_child:
        why_child()
        return 0
    if args.fair:
        sys.path.insert(0, str(HERE))
        print_fair(args.seeds, args.trials, 0, args.repeat, not args.no_lmfit)
        return 0
    if args.objectives:
        return write_objectives(args.objectives, args.seeds, args.against)
    if args.split_objectives:
        return write_split_objectives(args.split_objectives, 300, args.against)
    splits = tuple(int(s) for s in args.splits.split(","))
    print(f"python {sys.version.split()[0]}; load average at start {os.getloadavg()[0]:.1f}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")  # fmt: skip
    print_compare(compare_cpu(splits, args.repeat, args.old), splits)
    if args.why:
        print_why()
    if args.published:
        print_published(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
