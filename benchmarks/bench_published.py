"""Published laws fitted as their authors wrote them, on the public grids they were fitted to
(issue 27).

For each grid described in ``data/external/published.toml``: the law is fitted by fitrules
on the grid's training runs (one fit per group where the authors fitted one per group), the
same problem goes to an independent reference (``benchmarks/reference.py``: scipy's
``least_squares`` from 200 random starts inside the starting box of
``data/external/check_published.py``), and both fits predict the held-out runs. Printed per
grid: fitrules' training objective over the reference's, the time of each, and the held-out
metric of fitrules' fit beside the reference's and the published one.

    python benchmarks/bench_published.py                 # every grid that is present
    python benchmarks/bench_published.py --only parscale_chen,vocab_tao --starts 50
    python benchmarks/bench_published.py --data-dir DIR  # grids kept in another folder
    python benchmarks/bench_published.py --search        # issue 29: the search on each grid
    python benchmarks/bench_published.py --reach 4       # what the grammar holds (not a pick)
    python benchmarks/bench_published.py --peers-only    # the law and the peers, no search
    python benchmarks/bench_published.py --peers-only --seeds 0 --evaluations 10000  # a quick look

``--search``: on each grid with a held-out split and search settings in the catalogue
(``search``: variables, the outer split asking the held-out split's question, grammar
options), ``fitrules search`` on the training runs; its pick and the published form, each
fitted on the training runs, predict the held-out runs. Printed per grid: the pick, both
held-out metrics, their ratio (for R2, of 1 - R2), the search's quoted outer error, and
whether the pick is within 1.5x of the published form. Both forms are fitted as the plain
route fits the published law (:func:`plain_fit_options`: the same weights and bounds). Beside
them: pyoperon and gplearn (``pip install -e ".[bench]"``; a peer not installed is left out),
SLDBench's best where the catalogue has it, and issue 41's bar: the pick at least the
published law's (R2 no more than 0.005 below, an error no more than 1.1x) and at least each
peer's.

The peers (issue 62) are fitted as the law is: once per group where the catalogue fits the law
per group, on the search's variables (the log of each positive one), and scored with the
catalogue's metric (the mean over ``published_metric_by`` where it is set). Each runs with
seeds 0, 1, 2 (each seed printed, the median is the peer's value) and a fixed budget, not a
wall-clock one: pyoperon 10^6 evaluations (its time cap a day, printed as never reached),
gplearn its population and generations. Every setting is printed first. Beside pyoperon's
default selection, a record labelled as such: the best held-out value of its final population,
chosen on the held-out rows.

``--peers-only``: the published law refitted and the peers, without the search (a peer fit is
about 20 CPU seconds on these grids, so the SFT grid's 42 groups take about 80 CPU minutes for
both peers and three seeds).

``--reach K``: every form of the default grammar with at most K constants, fitted on the
training runs and scored on the held-out runs: per budget the best held-out metric, where that
form ranks by training error, and how many forms meet issue 41's bar. It tells a grammar that
lacks a law from a selection that misses it, and chooses nothing.

A grid's CSV is looked for in ``--data-dir``, ``data/external/`` and ``../shared/external/``;
a grid found in none is skipped with one line (see data/external/README.md for where each
comes from).
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # this checkout's fitrules, whatever is installed
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "data" / "external"))
from check_published import STARTS  # noqa: E402  (the independent check's starting boxes)
from reference import _compile, multistart, objective_value, residual_fn  # noqa: E402

import fitrules as fr  # noqa: E402

CATALOGUE = ROOT / "data" / "external" / "published.toml"
DEFAULT_BOX = (-3.0, 3.0)
CHINCHILLA_STARTS = {"E": (0.5, 3.0), "A": (1.0, 1e4), "alpha": (0.05, 1.5), "B": (1.0, 1e5),
                     "beta": (0.05, 1.5)}  # fmt: skip


def find(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        if (d / name).exists():
            return d / name
    return None


def present(names, catalogue, dirs):
    """(name, entry, path) of each named grid whose CSV is found; one line for the others."""
    for name in names:
        entry = catalogue[name]
        path = find(entry["file"], dirs)
        if path is None:
            print(f"skipping {name}: {entry['file']} is in none of the data folders")
            continue
        yield name, entry, path


def _range(text: str) -> tuple[float, float]:
    lo, hi = text.split("..")
    return float(lo), float(hi)


def _box(entry: dict, constants) -> dict:
    spec = STARTS.get(entry["name"], CHINCHILLA_STARTS if "chinchilla" in entry["name"] else {})
    box = {}
    for c in constants:
        if c in spec:
            box[c] = spec[c][:2]
        else:
            box[c] = DEFAULT_BOX
    return box


def metric_value(kind: str, pred: np.ndarray, y: np.ndarray, by: np.ndarray | None = None) -> float:
    """The held-out metric as the source defines it: R2 (1 - MSE/Var over the rows, or with
    ``by`` the mean of that over each value of ``by``, as the catalogue's
    ``published_metric_by`` says) or the mean absolute relative error in percent."""
    if kind == "R2":
        if by is not None:
            by = np.asarray(by)
            return float(np.mean([metric_value(kind, pred[by == v], y[by == v])
                                  for v in sorted(set(by.tolist()))]))  # fmt: skip
        return float(1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    return float(np.mean(100 * np.abs(pred - y) / np.abs(y)))


def metric_by(entry: dict, test: pd.DataFrame) -> np.ndarray | None:
    """The column the published metric is averaged over (``published_metric_by``), per row."""
    col = entry.get("published_metric_by")
    return None if not col else test[col].to_numpy()


def run_entry(entry: dict, path: Path, starts: int, seed: int) -> dict:
    table = pd.read_csv(path)
    derive = list(entry.get("derive", []))
    for d in derive:
        name, expr = d.split("=", 1)
        table[name.strip()] = table.eval(expr.strip())
    groups = [None] if not entry.get("group") else sorted(table[entry["group"]].unique().tolist())
    bounds = {k: _range(v) for k, v in entry.get("bounds", {}).items()}
    head, expr = entry["form"].split("=", 1)
    variables = head[head.index("(") + 1 : head.index(")")].replace(" ", "").split(",")
    t_fr = t_ref = 0.0
    obj_fr = obj_ref = 0.0
    test_rows, pred_fr, pred_ref, test_by = [], [], [], []
    reasons: list[str] = []
    skipped: set[str] = set()
    nonlinear = plain_fit_options(entry, entry["form"]).get("bounds") or {}
    for g in groups:
        where = [entry["train"]] + ([f"`{entry['group']}` == {g!r}"] if g is not None else [])
        rows = table.query(" and ".join(f"({w})" for w in where))
        t0 = time.perf_counter()
        # every row is its own run (a "seed" column there may be one value for all)
        seed_col = "run" if "run" in rows else None
        grid = fr.load_grid(rows, metric=entry["metric"], seed_col=seed_col)
        f = fr.fit(grid, entry["form"], **plain_fit_options(entry, entry["form"]))
        t_fr += time.perf_counter() - t0
        reasons += [r for r in f.reasons if r not in reasons]
        constants = list(f.form.structure.constants)
        # the reference fits the runs themselves; both fits are scored on them
        X = {v: rows[v].to_numpy(float) for v in variables}
        y = rows[entry["metric"]].to_numpy(float)
        ref = multistart(
            expr.strip(), variables, constants, X, y, entry["objective"], nonlinear,
            n_starts=starts, seed=seed, start_box=_box(entry, constants),
        )  # fmt: skip
        t_ref += ref.seconds
        model = _compile(expr.strip(), variables, constants)
        r = residual_fn(entry["objective"])[0](model([f.constants[c] for c in constants], X), y)
        obj_fr += objective_value(entry["objective"], r)
        obj_ref += ref.objective
        skipped |= set(bounds) - set(nonlinear)
        if entry.get("test"):
            where = [entry["test"]] + ([f"`{entry['group']}` == {g!r}"] if g is not None else [])
            test = table.query(" and ".join(f"({w})" for w in where))
            model = _compile(expr.strip(), variables, constants)
            Xt = {v: test[v].to_numpy(float) for v in variables}
            test_rows.append(test[entry["metric"]].to_numpy(float))
            test_by.append(metric_by(entry, test))
            pred_fr.append(model([f.constants[c] for c in constants], Xt))
            pred_ref.append(model([ref.constants.get(c, np.nan) for c in constants], Xt))
    out = {
        "grid": entry["name"],
        "groups": len(groups),
        "cells": None,
        "fitrules": obj_fr,
        "reference": obj_ref,
        "ratio": obj_fr / obj_ref if obj_ref > 0 else np.nan,
        "fitrules_s": t_fr,
        "reference_s": t_ref,
        "metric": entry.get("published_metric_name", ""),
        "published": entry.get("published_metric_value", np.nan),
        "reasons": "; ".join(reasons),
        "unbounded": ", ".join(sorted(skipped)),
    }
    if test_rows:
        y = np.concatenate(test_rows)
        by = None if test_by[0] is None else np.concatenate(test_by)
        out["fitrules_heldout"] = metric_value(out["metric"], np.concatenate(pred_fr), y, by)
        out["reference_heldout"] = metric_value(out["metric"], np.concatenate(pred_ref), y, by)
    if entry.get("published_constants") and groups == [None]:
        pub = entry["published_constants"]
        out["constants"] = ", ".join(f"{c} {f.constants[c]:.4g} ({pub[c]:.4g})" for c in pub
                                     if c in f.constants)  # fmt: skip
    return out


def plain_fit_options(entry: dict, form) -> dict:
    """How the plain route fits ``form`` on an entry's grid, and so every route: cells of
    several runs (MoE's routers) count by their runs, as the authors fit runs (by cells under
    log_huber); the entry's bounds hold the published form's nonlinear constants (a string
    ``name(vars) = expr``); a searched form keeps its own."""
    opts: dict = dict(objective=entry["objective"],
                      weights="runs" if entry["objective"] != "log_huber" else "cells")  # fmt: skip
    if isinstance(form, str):
        head, expr = form.split("=", 1)
        variables = head[head.index("(") + 1 : head.index(")")].replace(" ", "").split(",")
        probe = fr.Form("probe", expr.strip(), tuple(variables))
        bounds = {k: _range(v) for k, v in entry.get("bounds", {}).items()}
        nonlinear = {k: v for k, v in bounds.items() if k in probe.structure.nonlinear}
        if nonlinear:
            opts["bounds"] = nonlinear
    return opts


def _table(entry: dict, path: Path) -> pd.DataFrame:
    table = pd.read_csv(path)
    for d in entry.get("derive", []):
        name, expr = d.split("=", 1)
        table[name.strip()] = table.eval(expr.strip())
    return table


def _heldout_fit(entry, form, train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """``form`` fitted on ``train`` (one fit per group where the authors fitted per group),
    its predictions at ``test``'s rows."""
    from fitrules.model.compiled import predict

    group = entry.get("group")
    pred = np.full(len(test), np.nan)
    for g in [None] if not group else sorted(test[group].unique().tolist()):
        tr = train if g is None else train[train[group] == g]
        at = np.ones(len(test), bool) if g is None else (test[group] == g).to_numpy()
        seed_col = "run" if "run" in tr else None
        grid = fr.load_grid(tr, metric=entry["metric"], seed_col=seed_col)
        f = fr.fit(grid, form, **plain_fit_options(entry, form))
        X = {v: test.loc[at, v].to_numpy(float) for v in f.form.bound_variables}
        pred[at] = predict(f.form, X, f.constants)
    return pred


def search_entry(entry: dict, path: Path, jobs: int, grammar: dict | None = None,
                 settings: dict | None = None) -> dict | None:  # fmt: skip
    """Issue 29: the search on a published grid's training runs with the split's protocol
    (``search`` in the catalogue), its pick and the published form each fitted on the
    training runs and scored on the held-out ones. On a grid fitted per group the search
    reads the largest group's training runs, and its pick is then fitted per group as the
    published form is. A grid of several targets (``by``: the domain mixture's five domain
    losses, one law each) is searched once per target, on that target's largest group, and
    each pick is fitted and scored on its target's groups; the metric is the published one
    (for the domain mixture the mean of R2 over the five domains, ``published_metric_by``).
    ``grammar`` (options such as ``factors``) applies to every grid alike; the entry's own
    grammar options come after it. ``settings``: the peers' (:func:`peer_settings`)."""
    spec = entry.get("search")
    if not spec or not entry.get("test"):
        return None
    table = _table(entry, path)
    train, test = table.query(entry["train"]), table.query(entry["test"])
    group, by = entry.get("group"), spec.get("by")
    targets = sorted(train[by].unique().tolist()) if by else [None]
    y = test[entry["metric"]].to_numpy(float)
    pick_pred = np.full(len(test), np.nan)
    picks, searched, outer, seconds = [], [], [], 0.0
    for target in targets:
        tr = train if target is None else train[train[by] == target]
        at = np.ones(len(test), bool) if target is None else (test[by] == target).to_numpy()
        rows = tr
        if group:
            biggest = tr[group].value_counts().index[0]
            biggest = biggest.item() if hasattr(biggest, "item") else biggest  # 1, not np.int64(1)
            rows = tr[tr[group] == biggest]
            searched.append(biggest)
        seed_col = "run" if "run" in rows else None
        grid = fr.load_grid(rows, metric=entry["metric"], seed_col=seed_col)
        t0 = time.perf_counter()
        s = fr.search(grid, variables=spec["variables"], split=spec.get("split", "random"),
                      objective=entry["objective"], references=[], jobs=jobs, yes=True,
                      **{**(grammar or {}), **spec.get("grammar", {})})  # fmt: skip
        seconds += time.perf_counter() - t0
        if s.chosen is None and s.abstention.get("abstains"):  # issue 62: no pick to score
            unchecked = ", ".join(s.abstention["unchecked"])
            why = f"the runs cannot inform {unchecked}" if unchecked else "a size set by the split"
            picks.append(f"abstains ({why})")
            outer.append(float("nan"))
            continue
        picks.append(s.chosen.expression)
        outer.append(float(s.best["outer_median_pct"]))
        with np.errstate(all="ignore"):
            pick_pred[at] = _heldout_fit(entry, s.chosen, tr, test[at])
    kind = entry.get("published_metric_name", "")
    with np.errstate(all="ignore"):
        pick = metric_value(kind, pick_pred, y, metric_by(entry, test))
        pub = metric_value(kind, _heldout_fit(entry, entry["form"], train, test), y,
                           metric_by(entry, test))  # fmt: skip
    # an error metric compared as a ratio; R2 as the ratio of what it leaves unexplained
    ratio = (1 - pick) / (1 - pub) if kind == "R2" else pick / pub
    peers = peer_metrics(entry, spec, train, test, settings)
    return {
        **peers, "sldbench": entry.get("sldbench_best"),
        "grid": entry["name"], "split": spec.get("split", "random"), "seconds": seconds,
        "pick": "; ".join(picks), "metric": kind or "mean abs rel error %",
        "pick_heldout": pick, "published_heldout": pub, "ratio": ratio,
        "quoted_outer_pct": float(np.median(outer)),
        "group_searched": ", ".join(map(str, searched)) if group else None,
        "by": by,
    }  # fmt: skip


PEER_SEEDS = (0, 1, 2)
# a fixed budget, not a wall-clock one (issue 62): 10^6 evaluations bind first (1,000 offspring
# a generation, so the generation limit is set far beyond them); the time cap, a day, is there
# to be reported as never reached
PYOPERON = dict(allowed_symbols="add,sub,mul,div,exp,log,constant,variable", n_threads=1,
                max_evaluations=10**6, generations=10**4, population_size=1000,
                max_time=86400)  # fmt: skip
GPLEARN = dict(population_size=1000, generations=20, function_set=("add", "sub", "mul", "div",
               "log", "sqrt"), metric="mse", n_jobs=1)  # fmt: skip


def peer_settings(seeds=PEER_SEEDS, evaluations: int | None = None) -> dict:
    """The peers' settings for one run of the benchmark.

    Parameters
    ----------
    seeds : tuple of int
        The random states each peer is fitted with (:data:`PEER_SEEDS` by default).
    evaluations : int or None
        pyoperon's evaluation budget; None keeps :data:`PYOPERON`'s 10^6.

    Returns
    -------
    dict
        ``seeds``, ``pyoperon`` and ``gplearn`` (each peer's keyword arguments).
    """
    operon = {**PYOPERON, **({"max_evaluations": evaluations} if evaluations else {})}
    return {"seeds": tuple(seeds), "pyoperon": operon, "gplearn": dict(GPLEARN)}


def _peer_units(entry: dict, train: pd.DataFrame, test: pd.DataFrame) -> list:
    """(training mask, held-out mask) of each fit a peer makes: one per group where the
    catalogue fits the law per group (``group``), else one on all the training rows."""
    group = entry.get("group")
    if not group:
        return [(np.ones(len(train), bool), np.ones(len(test), bool))]
    return [((train[group] == g).to_numpy(), (test[group] == g).to_numpy())
            for g in sorted(test[group].unique().tolist())]  # fmt: skip


def _peer_features(entry: dict, spec: dict, train: pd.DataFrame, test: pd.DataFrame):
    """The search's variables as the peers read them: the log of a variable positive on every
    row of the grid, else the variable; contiguous float64 (pyoperon's bindings take no
    strided view). The group is not an input: each group is its own fit."""
    both = pd.concat([train, test])
    out = []
    for frame in (train, test):
        X = []
        for c in dict.fromkeys(spec["variables"]):
            v = pd.to_numeric(frame[c], errors="coerce").to_numpy(float)
            positive = (pd.to_numeric(both[c], errors="coerce") > 0).all()
            X.append(np.log(v) if positive else v)
        out.append(np.ascontiguousarray(np.column_stack(X), float))
    return out


def _unit_loss(kind: str, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """What a group adds to the metric's loss, per candidate (rows of ``pred``): the squared
    error for R2 (pooled or averaged over ``by`` values that hold whole groups), else the summed
    relative error. Minimised per group it gives the best metric over all groups."""
    err = (pred - y) ** 2 if kind == "R2" else np.abs(pred - y) / np.abs(y)
    loss = err.sum(axis=-1)
    return np.where(np.isfinite(loss), loss, np.inf)


def _population_best(m, x32, ytr, t32, y: np.ndarray, kind: str, default: np.ndarray):
    """A record, not a selection: of pyoperon's final population (``individuals_``, each
    scaled on the training rows as pyoperon scales its pick) and its pick, the prediction
    with the best held-out loss on this group's held-out rows ``y``."""
    with np.errstate(all="ignore"):
        trees = [ind.Genotype for ind in m.individuals_]
        P = np.array([m.evaluate_model(t, x32) for t in trees], float)
        Q = np.array([m.evaluate_model(t, t32) for t in trees], float)
        mp, my = P.mean(axis=1, keepdims=True), ytr.mean()
        var = ((P - mp) ** 2).sum(axis=1, keepdims=True)
        slope = np.where(var > 0, ((P - mp) * (ytr - my)).sum(axis=1, keepdims=True) / var, 0)
        pred = np.vstack([my + slope * (Q - mp), default[None, :]])
    return pred[int(np.argmin(_unit_loss(kind, pred, y)))]


def _operon_seed(entry, units, feats, seed: int, settings: dict):
    """pyoperon with one seed, fitted once per unit of :func:`_peer_units`: its predictions at
    the held-out rows (its default selection), the population record's, and per fit its
    seconds, generations and evaluations."""
    from pyoperon.sklearn import SymbolicRegressor as Operon

    kind, n = entry.get("published_metric_name", ""), len(units[0][1])
    pred, record, fits = np.full(n, np.nan), np.full(n, np.nan), []
    for trm, at in units:
        # float32: pyoperon 0.6.2 mixes its own float32 predictions with float64 targets
        # (FitLeastSquares raises a TypeError) when given float64
        x32, t32 = (np.ascontiguousarray(feats[0][trm], np.float32),
                    np.ascontiguousarray(feats[1][at], np.float32))  # fmt: skip
        ytr = entry["_train_y"][trm]
        t0 = time.perf_counter()
        m = Operon(random_state=seed, **settings["pyoperon"]).fit(x32, ytr.astype(np.float32))
        fits.append((time.perf_counter() - t0, m.stats_["generations"],
                     m.stats_["evaluation_count"]))  # fmt: skip
        with np.errstate(all="ignore"):
            pred[at] = m.predict(t32).astype(float)
        y = entry["_test_y"][at]
        record[at] = _population_best(m, x32, ytr, t32, y, kind, pred[at])
    return pred, record, fits


def _gplearn_seed(entry, units, feats, seed: int, settings: dict) -> np.ndarray:
    """gplearn with one seed, fitted once per unit of :func:`_peer_units`: its predictions at
    the held-out rows."""
    from gplearn.genetic import SymbolicRegressor as GP

    pred = np.full(len(units[0][1]), np.nan)
    for trm, at in units:
        m = GP(random_state=seed, **settings["gplearn"]).fit(feats[0][trm], entry["_train_y"][trm])
        with np.errstate(all="ignore"):
            pred[at] = m.predict(feats[1][at])
    return pred


def _score(entry: dict, test: pd.DataFrame, pred: np.ndarray) -> float:
    """The catalogue's metric of ``pred`` at the held-out rows, as the law and the pick are
    scored; a non-finite value counts as the worst (a NaN made the median NaN)."""
    kind = entry.get("published_metric_name", "")
    with np.errstate(all="ignore"):
        v = metric_value(kind, pred, entry["_test_y"], metric_by(entry, test))
    return v if np.isfinite(v) else (-np.inf if kind == "R2" else np.inf)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def peer_metrics(entry: dict, spec: dict, train: pd.DataFrame, test: pd.DataFrame,
                 settings: dict | None = None) -> dict:  # fmt: skip
    """Two symbolic-regression peers fitted as the law is and scored as the law is.

    Each peer is fitted once per group where the catalogue fits the law per group (else on
    all the training rows), on the search's variables (:func:`_peer_features`), with each
    seed of ``settings``; each seed's predictions over every group are scored with the
    catalogue's metric (:func:`metric_value`, ``published_metric_by``).

    Parameters
    ----------
    entry : dict
        The grid's catalogue entry.
    spec : dict
        Its ``search`` settings (the variables).
    train, test : pandas.DataFrame
        The training and held-out rows.
    settings : dict or None
        :func:`peer_settings`' output; None for its defaults.

    Returns
    -------
    dict
        Per peer installed (``pip install -e ".[bench]"``): ``NAME`` (the median over the
        seeds), ``NAME_seeds``, ``NAME_s`` (wall seconds per seed); for pyoperon also
        ``pyoperon_record`` / ``_record_seeds`` (the final population's best held-out value,
        a record chosen on the held-out rows) and ``pyoperon_fits`` (seconds, generations,
        evaluations of each fit).
    """
    settings = settings or peer_settings()
    entry = {**entry, "_test_y": test[entry["metric"]].to_numpy(float),
             "_train_y": train[entry["metric"]].to_numpy(float)}  # fmt: skip
    units = _peer_units(entry, train, test)
    feats = _peer_features(entry, spec, train, test)
    out: dict = {"fits_per_seed": len(units)}
    for name, module in (("pyoperon", "pyoperon"), ("gplearn", "gplearn")):
        if _installed(module):
            out.update(_peer_runs(name, entry, test, units, feats, settings))
    return out


def _peer_runs(name: str, entry, test, units, feats, settings: dict) -> dict:
    """One peer over every seed of ``settings``: the keys :func:`peer_metrics` describes."""
    values, records, fits, seconds = [], [], [], []
    for seed in settings["seeds"]:
        t0 = time.perf_counter()
        if name == "pyoperon":
            pred, record, f = _operon_seed(entry, units, feats, seed, settings)
            records.append(_score(entry, test, record))
            fits += f
        else:
            pred = _gplearn_seed(entry, units, feats, seed, settings)
        seconds.append(time.perf_counter() - t0)
        values.append(_score(entry, test, pred))
        if settings.get("progress"):  # a run stopped early still shows what it finished
            print(f"  ({name} seed {seed}: {_fmt(values[-1])}, {seconds[-1]:.0f} s)", flush=True)
    out = {name: float(np.median(values)), f"{name}_seeds": values, f"{name}_s": seconds}
    if records:
        out.update(pyoperon_record=float(np.median(records)), pyoperon_record_seeds=records,
                   pyoperon_fits=fits)  # fmt: skip
    return out


def _fmt(v: float) -> str:
    return f"{v:.4f}"


def peer_lines(r: dict, settings: dict) -> list[str]:
    """The peers' printed lines for one grid: each seed's value, the median, seconds, and
    whether pyoperon's time cap bound (it should never: the evaluation budget is the limit).

    Parameters
    ----------
    r : dict
        :func:`peer_metrics`' output.
    settings : dict
        :func:`peer_settings`' output.

    Returns
    -------
    list of str
        One line per peer installed, and pyoperon's record line.
    """
    lines = []
    seeds = ", ".join(map(str, settings["seeds"]))
    for p in ("pyoperon", "gplearn"):
        if p in r:
            label = " (its default selection)" if p == "pyoperon" else ""
            lines.append(f"  {p}{label}, seeds {seeds}: "
                         f"{', '.join(map(_fmt, r[p + '_seeds']))}; median {_fmt(r[p])}; "
                         f"{r['fits_per_seed']} fit(s) a seed, "
                         f"{np.mean(r[p + '_s']):.0f} s a seed")  # fmt: skip
    if "pyoperon_fits" in r:
        op = settings["pyoperon"]
        s, gens, evals = (np.array(c) for c in zip(*r["pyoperon_fits"]))
        lines.append(f"  pyoperon's stops: {int((evals >= op['max_evaluations']).sum())} of "
                     f"{len(evals)} fits at the evaluation budget ({int(evals.min())} to "
                     f"{int(evals.max())} evaluations, {int(gens.max())} generations at most); "
                     f"time cap of {op['max_time']} s bound: "
                     f"{'yes' if (s >= op['max_time']).any() else 'no'} (longest fit "
                     f"{s.max():.0f} s)")  # fmt: skip
        lines.append(f"  a record, not a selection: pyoperon's final population's best on the "
                     f"held-out rows (chosen on them, per group), seeds {seeds}: "
                     f"{', '.join(map(_fmt, r['pyoperon_record_seeds']))}; median "
                     f"{_fmt(r['pyoperon_record'])}")  # fmt: skip
    return lines


def settings_lines(settings: dict) -> list[str]:
    """The header of a run with peers: every setting they use.

    Parameters
    ----------
    settings : dict
        :func:`peer_settings`' output.

    Returns
    -------
    list of str
        The lines to print before the first grid.
    """
    return [
        f"peers: pyoperon {settings['pyoperon']}; gplearn {settings['gplearn']}; seeds "
        f"{settings['seeds']} for both (the median over them is the peer's value)",
        "peers' inputs: the search's variables of the catalogue entry, the log of each one "
        "positive on every row; one fit per group where the catalogue fits the law per group "
        "(the group is no input); scored with the catalogue's metric (the mean over "
        "published_metric_by where it is set), as the law and the pick are",
        "pyoperon's default selection: its pick on the training rows (its default single "
        "objective r2, so pareto_front_ holds that one model); its record: the best held-out "
        "value of its final population (individuals_, scaled on the training rows), chosen "
        "on the held-out rows, printed as a record",
    ]


def _no_worse(kind: str, a: float, b: float) -> bool:
    """Issue 41's bar: R^2 no more than 0.005 below, an error no more than 1.1x above."""
    if not np.isfinite(b):
        return bool(np.isfinite(a))
    return bool(a >= b - 0.005) if kind == "R2" else bool(a <= 1.1 * b)


def main_search(names, catalogue, dirs, jobs: int, grammar: dict | None = None,
                settings: dict | None = None) -> int:  # fmt: skip
    rows = []
    settings = settings or peer_settings()
    print("\n".join(settings_lines(settings)), flush=True)
    if grammar:
        print(f"grammar options for every grid: {grammar}", flush=True)
    for name, entry, path in present(names, catalogue, dirs):
        try:
            r = search_entry(entry, path, jobs, grammar, settings)
        except fr.FitrulesError as err:  # a refusal is a result: the search cannot ask this
            print(f"{name}: the search refused: {err}; the search did NOT match the published "
                  "form", flush=True)  # fmt: skip
            rows.append({"ratio": np.inf})
            continue
        if r is None:
            print(f"skipping {name}: no held-out split or no search settings in the catalogue")
            continue
        rows.append(r)
        matched = r["ratio"] <= 1.5
        where = (f" (searched on group {r['group_searched']}"
                 + (f", one search per {r['by']}" if r["by"] else "") + ")"
                 if r["group_searched"] else "")  # fmt: skip
        print(
            f"{name}{where}: search --split {r['split']} picks `{r['pick']}` in "
            f"{r['seconds']:.0f} s; held-out {r['metric']}: pick {r['pick_heldout']:.4f}, "
            f"published form refitted {r['published_heldout']:.4f} (ratio {r['ratio']:.2f}; "
            f"quoted outer error {r['quoted_outer_pct']:.3f}%"
            + (" the searches' median" if r["by"] else "") + "): "
            + ("within 1.5x of the published form" if matched
               else "the search did NOT match the published form"),
            flush=True,
        )  # fmt: skip
        kind = r["metric"] if r["metric"] == "R2" else ""
        r["as_published"] = _no_worse(kind, r["pick_heldout"], r["published_heldout"])
        r["as_peers"] = all(_no_worse(kind, r["pick_heldout"], r[p])
                            for p in ("pyoperon", "gplearn") if p in r)  # fmt: skip
        peers = "; ".join(f"{p} {r[p]:.4f} (median; {np.mean(r[p + '_s']):.0f} s a seed)"
                          for p in ("pyoperon", "gplearn")
                          if p in r)  # fmt: skip
        print(f"  beside it: {peers or 'no peer installed'}"
              + (f"; SLDBench's best {r['sldbench']}" if r.get("sldbench") else "")
              + f"; at least the published law's (issue 41's bar): "
              f"{'yes' if r['as_published'] else 'no'}; at least the peers': "
              f"{'yes' if r['as_peers'] else 'no'}", flush=True)  # fmt: skip
        print("\n".join(peer_lines(r, settings)), flush=True)
    if rows:
        ok = sum(r["ratio"] <= 1.5 for r in rows)
        print(f"{len(rows)} grids searched; the pick within 1.5x of the published form on {ok}")
        bar = [r for r in rows if "as_published" in r]
        print(f"issue 41's bar: at least the published law's on "
              f"{sum(r['as_published'] for r in bar)} of {len(rows)}, at least the peers' on "
              f"{sum(r['as_peers'] for r in bar)} of {len(rows)} (each peer the median over "
              f"seeds {settings['seeds']})")  # fmt: skip
    return 0


def peers_entry(entry: dict, path: Path, settings: dict) -> dict | None:
    """The published law refitted and the peers, on a grid's held-out split, without the
    search (issue 62: the peers' table in minutes rather than the search's hour).

    Parameters
    ----------
    entry : dict
        The grid's catalogue entry.
    path : pathlib.Path
        Its CSV.
    settings : dict
        :func:`peer_settings`' output.

    Returns
    -------
    dict or None
        ``law`` (the law fitted as :func:`search_entry` fits it, scored with the catalogue's
        metric), ``metric`` and :func:`peer_metrics`' keys; None without a held-out split
        or search settings (the peers read the search's variables).
    """
    spec = entry.get("search")
    if not spec or not entry.get("test"):
        return None
    table = _table(entry, path)
    train, test = table.query(entry["train"]), table.query(entry["test"])
    kind = entry.get("published_metric_name", "")
    with np.errstate(all="ignore"):
        law = metric_value(kind, _heldout_fit(entry, entry["form"], train, test),
                           test[entry["metric"]].to_numpy(float), metric_by(entry, test))  # fmt: skip
    if settings.get("progress"):
        print(f"{entry['name']}: the published law refitted {_fmt(law)}", flush=True)
    t0 = time.process_time()
    out = peer_metrics(entry, spec, train, test, settings)
    return {**out, "law": law, "metric": kind or "mean abs rel error %",
            "cpu_s": time.process_time() - t0}  # fmt: skip


def main_peers(names, catalogue, dirs, settings: dict) -> int:
    """``--peers-only``: per grid the law's refit and the peers' lines, then one table."""
    settings = {**settings, "progress": True}
    print("\n".join(settings_lines(settings)), flush=True)
    rows = []
    for name, entry, path in present(names, catalogue, dirs):
        r = peers_entry(entry, path, settings)
        if r is None:
            print(f"skipping {name}: no held-out split or no search settings in the catalogue")
            continue
        by = f" (the mean over {entry['published_metric_by']})" if entry.get("published_metric_by") else ""
        print(f"{name}: held-out {r['metric']}{by}; the published law refitted "
              f"{_fmt(r['law'])}; peers' CPU {r['cpu_s']:.0f} s", flush=True)  # fmt: skip
        print("\n".join(peer_lines(r, settings)), flush=True)
        rows.append((name, r))
    seeds = ", ".join(map(str, settings["seeds"]))
    print(f"| grid (metric) | fits a seed | published law | pyoperon, median of seeds {seeds} "
          f"(each seed) | pyoperon's record (not a selection) | gplearn, median (each seed) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows:
        cell = {p: (f"{_fmt(r[p])} ({', '.join(map(_fmt, r[p + '_seeds']))})" if p in r else "")
                for p in ("pyoperon", "gplearn")}  # fmt: skip
        record = _fmt(r["pyoperon_record"]) if "pyoperon_record" in r else ""
        print(f"| {name} ({r['metric']}) | {r['fits_per_seed']} | {_fmt(r['law'])} | "
              f"{cell['pyoperon']} | {record} | {cell['gplearn']} |", flush=True)
    return 0


def reach_entry(entry: dict, path: Path, max_constants: int) -> dict | None:
    """What the default grammar holds for a grid's held-out question, not a selection: every
    form of at most ``max_constants`` constants over the search's variables, fitted on the
    training runs as the pick is (:func:`_heldout_fit`) and scored on the held-out runs. Per
    budget, the best held-out metric and its form, how many forms are at least the published
    law's (issue 41's bar), and where the best one ranks among its budget by training error
    (1: the training fit alone would find it). Choosing by this held-out metric is what a
    search must not do; it tells a grammar that lacks a law from a selection that misses it."""
    from fitrules.engine.grammar import Grammar, generate

    spec = entry.get("search")
    if not spec or not entry.get("test") or spec.get("by"):
        return None
    table = _table(entry, path)
    train, test = table.query(entry["train"]), table.query(entry["test"])
    kind = entry.get("published_metric_name", "")
    y, y_train = (f[entry["metric"]].to_numpy(float) for f in (test, train))
    variables = tuple(spec["variables"])
    grammar = Grammar(variables=variables, max_constants=max_constants)
    forms = generate(grammar, {v: train[v].to_numpy(float) for v in variables})
    with np.errstate(all="ignore"):
        pub = metric_value(kind, _heldout_fit(entry, entry["form"], train, test), y,
                           metric_by(entry, test))  # fmt: skip
    better = (lambda a, b: a > b) if kind == "R2" else (lambda a, b: a < b)
    both = pd.concat([test, train])
    rows = []
    t0 = time.perf_counter()
    for c in forms:
        try:
            with np.errstate(all="ignore"):  # one fit, predicting held-out and training runs
                pred = _heldout_fit(entry, c.form, train, both)
                held = metric_value(kind, pred[: len(test)], y, metric_by(entry, test))
            rss = float(np.sum((pred[len(test) :] - y_train) ** 2))
        except fr.FitrulesError:
            held, rss = np.nan, np.inf
        worst = -np.inf if kind == "R2" else np.inf
        rows.append((c.n_constants, held if np.isfinite(held) else worst, rss, c.expression))
    out = {"grid": entry["name"], "published": pub, "metric": kind or "mean abs rel error %",
           "forms": len(rows), "seconds": time.perf_counter() - t0, "budgets": []}  # fmt: skip
    for k in sorted({r[0] for r in rows}):
        at = [r for r in rows if r[0] <= k]
        best = max(at, key=lambda r: r[1]) if kind == "R2" else min(at, key=lambda r: r[1])
        own = [r for r in rows if r[0] == best[0]]
        rank = 1 + sum(r[2] < best[2] for r in own)
        out["budgets"].append({
            "k": k, "forms": len(at), "best": best[1], "form": best[3], "rank": rank,
            "of": len(own), "as_published": sum(_no_worse(kind, r[1], pub) for r in at),
            "beats_published": sum(better(r[1], pub) for r in at),
        })  # fmt: skip
    return out


def main_reach(names, catalogue, dirs, max_constants: int) -> int:
    for name, entry, path in present(names, catalogue, dirs):
        r = reach_entry(entry, path, max_constants)
        if r is None:
            print(f"skipping {name}: no held-out split, no search settings, or several targets")
            continue
        print(f"{name}: {r['forms']} forms of the default grammar fitted on the training runs in "
              f"{r['seconds']:.0f} s; held-out {r['metric']} of the published law refitted "
              f"{r['published']:.4f}", flush=True)  # fmt: skip
        print("|  k | forms | best held-out | its form | its training-error rank in its "
              "budget | forms at least the published law's (issue 41's bar) |")
        print("|---:|---:|---:|---|---:|---:|")
        for b in r["budgets"]:
            print(f"| {b['k']} | {b['forms']} | {b['best']:.4f} | `{b['form']}` | "
                  f"{b['rank']} of {b['of']} | {b['as_published']} |", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated grid names")
    ap.add_argument("--starts", type=int, default=200, help="reference starts (default 200)")
    ap.add_argument("--data-dir", help="another folder to look for the grids' CSVs in")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--search",
        action="store_true",
        help="run the search on each grid with its split's protocol instead",
    )
    ap.add_argument("--jobs", type=int, default=2, help="search processes (default 2)")
    ap.add_argument(
        "--peers-only",
        action="store_true",
        help="instead: the published law refitted and the peers on each grid's held-out split, "
        "without the search",
    )
    ap.add_argument(
        "--seeds",
        default=",".join(map(str, PEER_SEEDS)),
        help="the peers' seeds, comma-separated (default 0,1,2)",
    )
    ap.add_argument(
        "--evaluations",
        type=int,
        help="pyoperon's evaluation budget (default 10**6; a smaller one for a quick look)",
    )
    ap.add_argument(
        "--reach",
        type=int,
        metavar="K",
        help="instead: every default-grammar form of at most K constants fitted on the training "
        "runs and scored on the held-out ones (what the grammar holds; not a selection)",
    )
    ap.add_argument(
        "--factors",
        help="with --search: the factor kinds of every grid's grammar (comma-separated, as "
        "fitrules search --factors; default the search's)",
    )
    args = ap.parse_args(argv)
    catalogue = tomllib.loads(CATALOGUE.read_text())
    dirs = ([Path(args.data_dir)] if args.data_dir else []) + [
        ROOT / "data" / "external",
        ROOT.parent / "shared" / "external",
    ]
    names = args.only.split(",") if args.only else list(catalogue)
    if args.reach is not None:
        return main_reach(names, catalogue, dirs, args.reach)
    settings = peer_settings(tuple(int(x) for x in args.seeds.split(",")), args.evaluations)
    if args.peers_only:
        return main_peers(names, catalogue, dirs, settings)
    if args.search:
        grammar = {"factors": tuple(args.factors.split(","))} if args.factors else None
        return main_search(names, catalogue, dirs, args.jobs, grammar, settings)
    rows = []
    for name, entry, path in present(names, catalogue, dirs):
        with np.errstate(all="ignore"):
            rows.append(run_entry(entry, path, args.starts, args.seed))
        r = rows[-1]
        line = (
            f"{name}: {r['groups']} fit(s); objective fitrules/reference {r['ratio']:.9f} "
            f"({r['fitrules']:.6g} / {r['reference']:.6g}); time {r['fitrules_s']:.1f} s "
            f"against {r['reference_s']:.1f} s ({r['reference_s'] / r['fitrules_s']:.0f}x)"
        )
        if "fitrules_heldout" in r:
            line += (
                f"; held-out {r['metric']}: fitrules {r['fitrules_heldout']:.4f}, reference "
                f"{r['reference_heldout']:.4f}, published {r['published']:.4f}"
            )
        if "constants" in r:
            line += f"; constants (published): {r['constants']}"
        if r["reasons"]:
            line += f"; flags: {r['reasons']}"
        if r["unbounded"]:
            line += (
                f"; published bounds on linear constants {r['unbounded']} not applied "
                "(fitrules solves them exactly, unbounded; so does the reference here)"
            )
        print(line, flush=True)
    if rows:
        df = pd.DataFrame(rows)
        ok = (df["ratio"] <= 1 + 1e-9).sum()
        print(
            f"{len(df)} grids; fitrules at or below the reference's objective (1e-9 relative) on "
            f"{ok}; total time fitrules {df['fitrules_s'].sum():.1f} s, reference "
            f"{df['reference_s'].sum():.1f} s from {args.starts} starts a fit"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
