"""Independent check of data/external/published.toml (numpy, scipy, pandas only).

For every grid: load its CSV, apply `derive`, split by `train`/`test`, fit `form`
by least squares from many seeded starts (scipy.optimize.least_squares, starts
drawn log-uniformly for positive scales and uniformly otherwise, inside `bounds`
where given), separately per `group` if the grid has one. Prints the fitted
constants, the training SSE and the test R^2 the way SLDBench computes it
(1 - MSE/Var over the pooled test rows; for a grid with several outcomes stacked
in one column, the mean of that over the outcomes), beside the published value.

    python data/external/check_published.py [--starts 100] [--only NAME,NAME]

A grid whose CSV is absent here is looked for in ../shared/external/ beside the
project and skipped with a line when it is in neither.
"""

import argparse
import ast
import os
import re
import sys
import time
import tomllib
import warnings
import zlib

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "external"))
FUNCS = {"log": np.log, "exp": np.exp, "sqrt": np.sqrt}

# Where the starts are drawn for each constant: (lo, hi, "log" | "lin").
STARTS = {
    "vocab_tao": {
        "E": (0.5, 10, "lin"),
        "A1": (1, 1e5, "log"),
        "a1": (0.05, 1.5, "lin"),
        "A2": (1e-2, 1e4, "log"),
        "a2": (0.01, 1.5, "lin"),
        "B": (1, 1e6, "log"),
        "b": (0.05, 1.5, "lin"),
    },
    "moe_clark": {
        "a": (-0.3, 0.0, "lin"),
        "b": (-0.2, 0.1, "lin"),
        "c": (-0.02, 0.02, "lin"),
        "d": (0.0, 5.0, "lin"),
    },
    "sft_rectified_lin": {
        "B": (1, 1e4, "log"),
        "Dl": (1, 1e5, "log"),
        "beta": (0.1, 1.5, "lin"),
        "E": (0.0, 4.0, "lin"),
    },
    "domain_mixture_ye": {
        "c": (0.0, 4.0, "lin"),
        "k": (1e-2, 10, "log"),
        **{f"t{j}": (-5.0, 5.0, "lin") for j in range(1, 6)},
    },
    "parscale_chen": {
        "E": (0.0, 2.0, "lin"),
        "A": (1e5, 1e11, "log"),
        "k": (0.02, 2.0, "lin"),
        "alpha": (0.05, 1.5, "lin"),
    },
    "overtraining_gadre": {
        "alpha": (1.0, 1e4, "log"),
        "beta": (1.0, 1e5, "log"),
        "b": (-1.0, -0.02, "lin"),
        "E": (0.0, 3.0, "lin"),
    },
    "data_constrained_muennighoff": {
        "E": (1.0, 3.0, "lin"),
        "A": (10, 1e5, "log"),
        "alpha": (0.1, 1.0, "lin"),
        "B": (10, 1e6, "log"),
        "beta": (0.1, 1.0, "lin"),
        "rn": (0.1, 1000, "log"),
        "rd": (0.1, 1000, "log"),
    },
    "chinchilla_epoch": {  # ranges about Epoch's published fit, wide on each side
        "E": (0.5, 3.0, "lin"),
        "A": (10, 1e5, "log"),
        "alpha": (0.05, 1.0, "lin"),
        "B": (10, 1e6, "log"),
        "beta": (0.05, 1.0, "lin"),
    },
}
POLISH = 5  # starts polished to convergence after the short runs


def parse_form(form):
    m = re.fullmatch(r"\s*\w+\(([^)]*)\)\s*=\s*(.+)", form)
    variables = [v.strip() for v in m.group(1).split(",")]
    expr = m.group(2).strip()
    names = {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}
    constants = sorted(names - set(variables) - set(FUNCS), key=expr.index)
    return variables, constants, compile(expr, "<form>", "eval")


def evaluate(code, env):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(eval(code, {"__builtins__": {}}, {**FUNCS, **env}), dtype=float)


def load(entry):
    for d in (HERE, SHARED):
        path = os.path.join(d, entry["file"])
        if os.path.exists(path):
            df = pd.read_csv(path)
            for line in entry.get("derive", []):
                name, expr = (s.strip() for s in line.split("=", 1))
                # a column whose name is not an identifier is quoted in backticks (as pandas
                # and fitrules --derive quote it); Python's compile rejects them, so each
                # becomes a plain name here
                quoted = dict.fromkeys(re.findall(r"`([^`]+)`", expr))
                env = {c: df[c].to_numpy() for c in df}
                for i, col in enumerate(quoted):
                    expr = expr.replace(f"`{col}`", f"_col{i}")
                    env[f"_col{i}"] = df[col].to_numpy()
                df[name] = evaluate(compile(expr, "<derive>", "eval"), env)
            return df
    return None


def parse_bounds(entry, constants):
    lo = np.full(len(constants), -np.inf)
    hi = np.full(len(constants), np.inf)
    for k, v in entry.get("bounds", {}).items():
        a, b = v.split("..")
        lo[constants.index(k)], hi[constants.index(k)] = float(a), float(b)
    return lo, hi


def draw_starts(rng, spec, constants, lo, hi, n):
    x = np.empty((n, len(constants)))
    for j, c in enumerate(constants):
        a, b, kind = spec[c]
        a, b = max(a, lo[j]), min(b, hi[j])
        x[:, j] = (
            np.exp(rng.uniform(np.log(a), np.log(b), n)) if kind == "log" else rng.uniform(a, b, n)
        )
    return x


def fit(code, variables, constants, X, y, starts, lo, hi, objective):
    """Best of the starts: least squares on the outcome (abs_ls), or Huber with delta 1e-3
    on log residuals (log_huber, as Hoffmann et al., Epoch and the ParScale authors fit)."""
    log_obj = objective == "log_huber"
    target = np.log(y) if log_obj else y

    def resid(theta):
        p = evaluate(code, {**X, **dict(zip(constants, theta, strict=True))})
        with np.errstate(all="ignore"):
            r = (np.log(p) if log_obj else p) - target
        return np.where(np.isfinite(r), r, 1e6)

    def value(theta):
        r = resid(theta)
        if not log_obj:
            return float(np.sum(r**2))
        a = np.abs(r)
        return float(np.sum(np.where(a <= 1e-3, 0.5 * r**2, 1e-3 * (a - 0.5e-3))))

    bounded = np.isfinite(lo).any() or np.isfinite(hi).any()

    def solve(x0, max_nfev):
        warnings.simplefilter("ignore")
        kw = dict(x_scale="jac", xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=max_nfev)
        if bounded or log_obj:
            kw.update(bounds=(lo, hi), method="trf", loss="huber" if log_obj else "linear")
            kw.update(f_scale=1e-3 if log_obj else 1.0)
        else:
            kw.update(method="lm")
        try:
            return least_squares(resid, x0, **kw).x
        except (ValueError, FloatingPointError):
            return None

    # every start run briefly, then the best few polished to convergence: most of the
    # time of a plain multistart goes into starts that wander in a flat, useless region
    short = [x for x in (solve(x0, 30 * (len(constants) + 1)) for x0 in starts) if x is not None]
    short.sort(key=value)
    best = None
    for x0 in short[:POLISH]:
        x = solve(x0, 5000)
        if x is None:
            continue
        v = value(x)
        if best is None or v < best[0]:
            best = (v, x)
    return best


def r2(pred, truth):
    if not np.all(np.isfinite(pred)):
        return -1.0
    return 1.0 - np.mean((pred - truth) ** 2) / np.var(truth)


def score(entry, test, pred):
    """The published metric: R2 as SLDBench computes it, or the mean absolute relative
    error in percent over the test runs (Gadre et al.)."""
    metric, kind = entry["metric"], entry.get("published_metric_name", "R2")
    truth = test[metric].to_numpy()
    if kind == "mean_abs_rel_error_pct":
        return float(np.mean(np.abs(pred - truth) / truth) * 100)
    # a grid whose outcome column stacks several outcomes: R^2 per value of this column,
    # averaged, as its source defines its metric
    col = entry.get("published_metric_by")
    if col:
        return float(
            np.mean(
                [
                    r2(pred[test[col].to_numpy() == v], truth[test[col].to_numpy() == v])
                    for v in sorted(test[col].unique())
                ]
            )
        )
    return float(r2(pred, truth))


def run_entry(entry, n_starts, rng):
    name, metric = entry["name"], entry["metric"]
    df = load(entry)
    if df is None:
        print(
            f"{name}: SKIPPED, {entry['file']} is in neither data/external/ nor ../shared/external/"
        )
        return
    variables, constants, code = parse_form(entry["form"])
    train = df.query(entry["train"])
    # an entry without a held-out split (Epoch's Chinchilla point fit) is checked on its
    # training runs alone
    test = df.query(entry["test"]) if "test" in entry else df.iloc[:0]
    lo, hi = parse_bounds(entry, constants)
    group = entry.get("group")
    keys = sorted(train[group].unique()) if group else [None]
    t0 = time.time()
    total, sse_loss, pred, fitted = 0.0, 0.0, np.full(len(test), np.nan), {}
    for g in keys:
        tr = train if g is None else train[train[group] == g]
        te_mask = np.ones(len(test), bool) if g is None else (test[group] == g).to_numpy()
        X = {v: tr[v].to_numpy(float) for v in variables}
        starts = draw_starts(rng, STARTS[name], constants, lo, hi, n_starts)
        obj, theta = fit(
            code,
            variables,
            constants,
            X,
            tr[metric].to_numpy(float),
            starts,
            lo,
            hi,
            entry.get("objective", "abs_ls"),
        )
        total += obj
        sse_loss += float(
            np.sum(
                (evaluate(code, {**X, **dict(zip(constants, theta, strict=True))}) - tr[metric])
                ** 2
            )
        )
        fitted[g] = theta
        if te_mask.any():
            Xt = {v: test.loc[te_mask, v].to_numpy(float) for v in variables}
            pred[te_mask] = evaluate(code, {**Xt, **dict(zip(constants, theta, strict=True))})
    secs = time.time() - t0
    print(
        f"{name}: {len(df)} rows, train {len(train)}, test {len(test)}, "
        f"{len(keys)} group(s), {n_starts} starts per group, {secs:.1f} s"
    )
    print(f"  form: {entry['form']}")
    if group is None:
        print(
            "  fitted: "
            + ", ".join(f"{c} = {v:.6g}" for c, v in zip(constants, fitted[None], strict=True))
        )
        th = fitted[None]
        at = [
            c
            for j, c in enumerate(constants)
            if np.isclose(th[j], lo[j]) or np.isclose(th[j], hi[j])
        ]
        if at:
            print(f"  at a bound: {', '.join(at)}")
    else:
        tab = pd.DataFrame({str(g): th for g, th in fitted.items()}, index=constants).T
        if len(tab) <= 3:
            for g, row in tab.iterrows():
                print(
                    f"  fitted, {group} {g}: " + ", ".join(f"{c} = {v:.6g}" for c, v in row.items())
                )
        else:
            print(
                f"  fitted per {group} (median over {len(tab)} groups): "
                + ", ".join(f"{c} = {tab[c].median():.4g}" for c in constants)
            )
        at = {
            c: int(np.sum(np.isclose(tab[c], lo[j]) | np.isclose(tab[c], hi[j])))
            for j, c in enumerate(constants)
        }
        if any(at.values()):
            print(
                "  groups with a constant at a bound: "
                + ", ".join(f"{c} {n}" for c, n in at.items() if n)
            )
    if entry.get("objective", "abs_ls") == "log_huber":
        print(
            f"  train objective (log_huber, delta 1e-3) {total:.6g}, SSE on {metric} {sse_loss:.6g}"
        )
    else:
        print(f"  train SSE {total:.6g}")
    pc = entry.get("published_constants")
    if not len(test):
        print("  test: none (the entry names no held-out split)")
        if pc and all(c in pc for c in constants):
            Xr = {v: train[v].to_numpy(float) for v in variables}
            fit_pub = evaluate(code, {**Xr, **{c: pc[c] for c in constants}})
            print(f"  with the published constants: train SSE "
                  f"{float(np.sum((fit_pub - train[metric]) ** 2)):.6g}")  # fmt: skip
        return
    ours = score(entry, test, pred)
    pub = entry.get("published_metric_value")
    if len(test) <= 4:
        print(
            "  test runs (observed -> predicted, relative error): "
            + "; ".join(
                f"{r} {t:.4f} -> {q:.4f}, {100 * abs(q - t) / t:.4f}%"
                for r, t, q in zip(test.get("run", test.index), test[metric], pred, strict=True)
            )
        )
    print(
        f"  test {entry.get('published_metric_name', 'R2')}: refit {ours:.4f}; published {pub} "
        f"({entry.get('published_metric_source', '')})"
    )
    if pc and all(c in pc for c in constants):
        Xt = {v: test[v].to_numpy(float) for v in variables}
        p = evaluate(code, {**Xt, **{c: pc[c] for c in constants}})
        Xr = {v: train[v].to_numpy(float) for v in variables}
        sse_pub = float(
            np.sum((evaluate(code, {**Xr, **{c: pc[c] for c in constants}}) - train[metric]) ** 2)
        )
        print(
            f"  with the published constants: test {entry.get('published_metric_name', 'R2')} "
            f"{score(entry, test, p):.4f}, train SSE {sse_pub:.6g}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--starts",
        type=int,
        default=100,
        help="starts for a grid fitted as one group; a per-group fit uses a sixth (16 at least)",
    )
    ap.add_argument("--only", default="")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with open(os.path.join(HERE, "published.toml"), "rb") as f:
        grids = tomllib.load(f)
    only = set(filter(None, a.only.split(",")))
    t0 = time.time()
    for entry in grids.values():
        if only and entry["name"] not in only:
            continue
        # one stream per grid, so a grid's starts do not depend on which others run
        rng = np.random.default_rng([a.seed, zlib.crc32(entry["name"].encode())])
        run_entry(entry, a.starts if not entry.get("group") else max(16, a.starts // 6), rng)
    print(f"total {time.time() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
