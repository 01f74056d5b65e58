"""The tuned GPT grid's claims, measured and written to reports/gpt/README.md.

    python -m tools.gpt_report     # reads data/gpt_tuning.csv, data/gpt_tuned.csv,
                                   # data/gpt_tuned_attack.csv (and data/gpt.csv, untuned)

1. The outer step: ``fitrules.api.tune`` over ``outer_lr`` x ``outer_momentum`` on the tuning
   runs (seeds 100 and 101 choose) with the grid's keep-1 runs (seeds 0 to 2 measure); the
   level it chooses must be the one the grid ran at.
2. Random sparsification at H = 16: per seed, the excess loss of rand-k at keep k over keep 1
   against 1 + omega = 1/k and its least-squares line; the slope and R^2 with a t interval over
   the seeds, whose coverage is printed from simulated lines with this grid's noise (a line and
   a curve, independent noise and a per-seed slope shared by a seed's cells).
3. Top-k with error feedback against rand-k at the same keep, and DiLoCo at keep 1 against
   synchronous AdamW: paired by seed, a t interval.
4. A coordinate-wise median over 16 workers with 0 to 8 attackers, independent and
   coordinated: each count's loss over the seeds, how many seeds stay bounded, and the first
   count at which a seed breaks.
5. Each claim the programme makes, marked supported, contradicted or undecided by the
   intervals above when the grid tests it, and "not tested" (never false) when it does not.

The comparison, paired interval and design made on the untuned grid (data/gpt.csv) are the
other reports under reports/gpt/ (``python -m tools.rebuild gpt-compare gpt-ci gpt-design``).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

R2_BAR = 0.95
LEVEL = 0.95
N_SIM = 10_000  # simulated grids per coverage row
TUNED = ("outer_lr", "outer_momentum")
ERRATIC = 0.1  # nats between a step's tuning seeds beyond which the report names it


# -- the outer step ------------------------------------------------------------------------


def tuning_choice(tuning: pd.DataFrame, grid: pd.DataFrame):
    """The tune job on the tuning runs (their seeds choose) and the grid's keep-1 rand-k
    DiLoCo runs (their seeds measure): its :class:`~fitrules.jobs.tune.Tuning` result."""
    from fitrules.api import load_grid, tune

    from fitrules.sim.gpt import GPTConfig

    measured = grid[_keep_one(grid)]
    settings = [f.name for f in fields(GPTConfig) if f.name in tuning.columns]
    cols = [*settings, "loss"]  # the run's settings (its seed among them) and its loss
    runs = pd.concat([tuning[cols], measured[cols]], ignore_index=True)
    g = load_grid(runs, metric="loss")
    return tune(g, list(TUNED), tune_seeds=sorted(tuning["seed"].unique().tolist()))


def _keep_one(grid: pd.DataFrame) -> pd.Series:
    return (grid["algo"] == "diloco") & (grid["compressor"] == "randk") & (grid["keep"] == 1.0)


def chosen_is_run(choices: pd.DataFrame, grid: pd.DataFrame) -> bool:
    """Whether every DiLoCo run of ``grid`` is at the outer step chosen for its H."""
    diloco = grid[grid["algo"] == "diloco"]
    for row in choices.to_dict("records"):
        at = diloco[diloco["H"] == row["H"]] if "H" in row else diloco
        for f in TUNED:
            if not np.allclose(at[f].to_numpy(float), float(row[f"chosen_{f}"])):
                return False
    return len(choices) > 0


# -- intervals over seeds ------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A mean over seeds with its two-sided t interval."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values) -> Interval:
        """The t interval at LEVEL of the mean of ``values`` (n - 1 degrees of freedom)."""
        v = np.asarray(values, float)
        n = len(v)
        if n < 2:
            return cls(float(v.mean()) if n else math.nan, math.nan, math.nan, n)
        half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * v.std(ddof=1) / math.sqrt(n)
        return cls(float(v.mean()), float(v.mean() - half), float(v.mean() + half), n)

    def clipped(self, bottom: float, top: float) -> Interval:
        """The interval with its ends cut to [bottom, top] (an R^2 is from 0 to 1)."""
        return Interval(self.mean, min(max(self.low, bottom), top),
                        min(max(self.high, bottom), top), self.n)  # fmt: skip

    def text(self, fmt: str = "+.4f") -> str:
        if self.n < 2:
            return f"{self.mean:{fmt}} (one seed: no interval)"
        return f"{self.mean:{fmt}}, {LEVEL:.0%} interval {self.low:{fmt}} to {self.high:{fmt}}"

    def sign(self) -> int:
        """+1 or -1 when the interval excludes 0 on that side, else 0."""
        return 1 if self.low > 0 else -1 if self.high < 0 else 0


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R^2 of y on x."""
    slope, icept = np.polyfit(x, y, 1)
    resid = y - (slope * x + icept)
    tss = float(np.sum((y - y.mean()) ** 2))
    return float(slope), float(icept), (1 - float(np.sum(resid**2)) / tss) if tss > 0 else math.nan


def randk_line(grid: pd.DataFrame) -> dict:
    """Per seed, the excess over keep 1 of each rand-k keep and its line in 1 + omega; the
    seed-mean line; the slope's and R^2's t intervals over seeds."""
    runs = grid[(grid["algo"] == "diloco") & (grid["compressor"] == "randk")]
    wide = runs.pivot_table(index="seed", columns="keep", values="loss").dropna()
    keeps = np.array(sorted(wide.columns, reverse=True), float)
    x = 1 / keeps
    excess = wide[keeps].to_numpy() - wide[[1.0]].to_numpy()
    per_seed = [_line(x, e) for e in excess]
    mean_line = _line(x, excess.mean(axis=0))
    return {
        "H": sorted(runs["H"].unique().tolist()),
        "x": x,
        "excess": excess,
        "seeds": wide.index.tolist(),
        "slope": Interval.of([s for s, _, _ in per_seed]),
        "r2": Interval.of([r for _, _, r in per_seed]).clipped(0.0, 1.0),
        "per_seed": per_seed,
        "mean_line": mean_line,
    }


def paired(grid: pd.DataFrame, a: dict, b: dict) -> Interval:
    """loss(a) - loss(b) paired by seed, each a dict of column values: the t interval of
    :func:`fitrules.api.ci` (``a`` the treatment, ``b`` the baseline), whose calibration
    benchmarks/bench_calibration.py prints."""
    from fitrules.api import ci

    def sel(d: dict) -> str:
        return ",".join(f"{k}={v}" for k, v in d.items())

    row = ci(grid, baseline=sel(b), treatment=sel(a)).table.iloc[0]
    low, high = row["t_interval"]
    return Interval(float(row["mean_diff"]), float(low), float(high), int(row["n"]))


def topk_against_randk(grid: pd.DataFrame) -> dict[tuple[float, float], Interval]:
    """Each top-k keep against rand-k at the same keep, or where rand-k did not go that low,
    at its smallest keep (which sends more): {(top-k keep, rand-k keep): paired interval}."""
    diloco = grid[grid["algo"] == "diloco"]
    rand = sorted(diloco.loc[diloco["compressor"] == "randk", "keep"].unique())
    out = {}
    for k in sorted(diloco.loc[diloco["compressor"] == "topk", "keep"].unique()):
        against = k if k in rand else rand[0]
        out[(float(k), float(against))] = paired(
            diloco, {"compressor": "topk", "keep": k}, {"compressor": "randk", "keep": against})
    return out


def coverage(x: np.ndarray, line: dict, rng: np.random.Generator, n_sim: int = N_SIM) -> list:
    """The slope's t interval's coverage over ``n_sim`` simulated grids of this line's design
    (its keeps and seeds): the truth no slope (where a decided sign is a false positive), a
    line at this grid's slope (where it is the power), or a curve (the line bent by a factor
    rising from 0.5 to 1.5 along 1 + omega); the runs' noise independent (at the sd of this
    grid's residuals) or with a per-seed slope shared by a seed's cells (sd half the slope).
    Each row: the coverage of the truth's least-squares slope and the share of intervals
    that exclude 0 ("decided")."""
    n = line["slope"].n
    resid = np.array([e - (s * x + i) for e, (s, i, _) in zip(line["excess"], line["per_seed"])])
    # an excess is two runs' difference: its residual variance is twice a run's
    sd = max(math.sqrt(float(np.sum(resid**2)) / max(resid.size - 2 * n, 1) / 2), 1e-4)
    base = int(np.argmin(np.abs(x - 1)))  # keep 1, each seed's baseline
    slope = abs(line["mean_line"][0]) or 0.01
    u = (x - x.min()) / (x.max() - x.min())
    truths = {"no slope": 0.0 * x, "a line": slope * (x - 1),
              "a curve": slope * (x - 1) * (0.5 + u)}  # fmt: skip
    t = stats.t.ppf(0.5 + LEVEL / 2, n - 1)
    rows = []
    for name, mean in truths.items():
        target = _line(x, mean)[0]  # the slope the interval is for: the truth's LS line
        for noise in ("independent", "per-seed slope"):
            runs = rng.normal(0, sd, (n_sim, n, len(x)))
            e = mean + runs - runs[..., [base]]
            if noise != "independent":
                e = e + rng.normal(0, 0.5 * slope, (n_sim, n, 1)) * (x - 1)
            xc = x - x.mean()
            slopes = (e * xc).sum(-1) / (xc**2).sum()  # (n_sim, n) least-squares slopes
            half = t * slopes.std(axis=1, ddof=1) / math.sqrt(n)
            centre = slopes.mean(axis=1)
            hit = np.abs(centre - target) <= half
            decided = np.abs(centre) > half  # the interval excludes 0: a sign claimed
            rows.append({"truth": name, "noise": noise, "coverage": float(hit.mean()),
                         "decided": float(decided.mean()), "grids": n_sim})  # fmt: skip
    return rows


# -- the attack ------------------------------------------------------------------------------


def attack_table(table: pd.DataFrame, vocab: int) -> tuple[pd.DataFrame, dict]:
    """Per (mode, attackers): the mean loss over bounded seeds, the seeds bounded of those
    run; per mode the first count at which a seed is not bounded (None when none breaks). A
    run at 0 attackers belongs to every mode."""
    ceiling = math.log(vocab)
    t = table.copy()
    t["bounded"] = ~t["diverged"].astype(bool) & (t["loss"] < ceiling)
    modes = sorted(t.loc[t["attackers"] > 0, "attack_mode"].unique()) or ["coordinated"]
    rows, broken = [], {}
    for mode in modes:
        sub = t[(t["attack_mode"] == mode) | (t["attackers"] == 0)]
        for k, g in sub.groupby("attackers"):
            ok = g[g["bounded"]]
            rows.append({"mode": mode, "attackers": int(k), "seeds": len(g),
                         "bounded": int(g["bounded"].sum()),
                         "loss": float(ok["loss"].mean()) if len(ok) else math.nan,
                         "low": float(ok["loss"].min()) if len(ok) else math.nan,
                         "high": float(ok["loss"].max()) if len(ok) else math.nan})  # fmt: skip
        bad = sub.loc[~sub["bounded"], "attackers"]
        broken[mode] = int(bad.min()) if len(bad) else None
    return pd.DataFrame(rows), broken


# -- claims ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A claim of the programme and what this grid says of it: ``status`` is "supported",
    "contradicted" or "undecided" when the grid tests it, "not tested" when it cannot."""

    text: str
    status: str
    evidence: str

    @property
    def tested(self) -> bool:
        return self.status != "not tested"


def _status(sign: int, want: int) -> str:
    return "undecided" if sign == 0 else "supported" if sign == want else "contradicted"


def claims(line: dict, topk: dict[float, Interval], gap: Interval, broken: dict,
           n_workers: int, hs: list) -> list[Claim]:  # fmt: skip
    """The programme's claims against this grid (see the module docstring)."""
    r2, rising = line["r2"], line["slope"].sign()
    # a line's R^2 says something of its shape only where there is a slope: through noise
    # about a flat excess it is low whatever the shape, so without a slope it is undecided
    lin = ("supported" if r2.low >= R2_BAR else
           "contradicted" if r2.high < R2_BAR and rising != 0 else "undecided")  # fmt: skip
    out = [
        Claim("rand-k's excess loss grows with 1 + omega (slope > 0)",
              _status(line["slope"].sign(), +1), f"slope {line['slope'].text()}"),
        Claim(f"the excess is linear in 1 + omega (R^2 at least {R2_BAR})", lin,
              f"R^2 over seeds {r2.text('.3f')}"
              + ("" if rising else "; no slope to judge a shape by")),
    ]  # fmt: skip
    for (keep, against), iv in sorted(topk.items(), reverse=True):
        out.append(Claim(f"top-k with error feedback at keep 1/{1 / keep:g} ends lower than rand-k "
                         f"at keep 1/{1 / against:g}", _status(iv.sign(), -1),
                         f"top-k minus rand-k {iv.text()} nats"))  # fmt: skip
    out.append(Claim(f"DiLoCo at H = {hs[0] if len(hs) == 1 else hs} with the tuned outer step "
                     "ends lower than synchronous AdamW", _status(gap.sign(), -1),
                     f"DiLoCo minus sync {gap.text()} nats"))  # fmt: skip
    half = n_workers // 2
    for mode, k in broken.items():
        fine = k is None or k >= half
        out.append(Claim(f"the median stays bounded below {half} of {n_workers} {mode} attackers",
                         "supported" if fine else "contradicted",
                         "no seed breaks at any count run" if k is None else
                         f"the first count at which a seed breaks: {k}"))  # fmt: skip
    n = line["slope"].n
    out += [
        Claim("the excess is linear at every H", "not tested" if len(hs) < 2 else "undecided",
              f"one H (H = {hs[0]})" if len(hs) < 2 else "see the table"),
        Claim("the slope in 1 + omega grows with H", "not tested",
              "one H" if len(hs) < 2 else "no interval across H here"),
        Claim("the same holds at the programme's sizes (413k, 915k) on Tiny Shakespeare",
              "not tested", "one 107k-parameter model on the shipped 37-character slice"),
        Claim("the outer step tuned per keep changes the line", "not tested",
              "the outer step was tuned at keep 1 and used at every keep"),
        Claim("the line holds below keep 1/16", "not tested",
              f"rand-k ran down to keep 1/{line['x'].max():g}, on {n} seeds"),
    ]  # fmt: skip
    return out


# -- the report --------------------------------------------------------------------------------


def _vocabulary(table: pd.DataFrame) -> int:
    """The vocabulary size of the corpus the runs trained on (each row's, all the same)."""
    from fitrules.sim.corpus import load_corpus, read_text_corpus

    paths = [c if isinstance(c, str) else "" for c in table["corpus"].unique()]  # "" reads NaN
    if len(paths) != 1:
        raise SystemExit(f"runs on {len(paths)} corpora; the report reads one")
    return (read_text_corpus(paths[0]) if paths[0] else load_corpus()).vocab_size


def _manifest(csv: Path) -> dict:
    path = csv.with_suffix(".manifest.json")
    return json.loads(path.read_text()) if path.exists() else {}


def _wall(manifest: dict) -> str:
    """The grid's wall time and its runs' total time, from its manifest."""
    per_run = manifest.get("wall_s_per_run") or []
    wall = manifest.get("wall_s_this_invocation")
    if not per_run or wall is None:
        return "an unknown time"
    return (
        f"{float(wall) / 60:.0f} min of wall time on {manifest.get('jobs', '?')} processes "
        f"({sum(float(x) for x in per_run) / 60:.0f} min of run time)"
    )


def _tuning_section(tuning: pd.DataFrame, grid: pd.DataFrame) -> list[str]:
    result = tuning_choice(tuning, grid)
    ch = result.choices
    curves = tuning.groupby(list(TUNED))["loss"].agg(["mean", "std", "count"]).reset_index()
    best = curves["mean"].idxmin()
    seeds = sorted(map(int, tuning["seed"].unique()))
    out = [
        "## The outer step, tuned",
        "",
        f"`fitrules.api.tune(grid, {list(TUNED)}, tune_seeds={seeds})` "
        f"on the {len(tuning)} tuning runs (`data/gpt_tuning.csv`) and the grid's keep-1 runs: "
        "the tuning seeds choose, the grid's seeds measure. Mean validation loss over the tuning "
        "seeds (the tune job's criterion):",
        "",
        "| outer lr | momentum | loss, nats (sd, seeds) |",
        "|---:|---:|---|",
        *[f"| {r['outer_lr']:g} | {r['outer_momentum']:g} | {r['mean']:.4f} "
          f"({r['std']:.4f}, {int(r['count'])}){' **chosen**' if i == best else ''} |"
          for i, r in curves.iterrows()],  # fmt: skip
        "",
    ]
    hs = sorted(tuning["H"].unique())
    for r in ch.to_dict("records"):
        edge = f"; at the edge of the swept range ({r['edge']})" if r.get("at_edge") else ""
        out.append(f"Chosen at H = {r.get('H', hs[0])}: outer lr {r['chosen_outer_lr']:g}, "
                   f"momentum {r['chosen_outer_momentum']:g}{edge}.")  # fmt: skip
    fl = result.flattery.iloc[0]
    crit = float(ch["criterion"].iloc[0])
    measured = result.runs.sort_values("seed")
    out += ["", f"Measured on the grid's seeds ({', '.join(map(str, measured['seed']))}) at the "
            f"chosen step: {fl['honest']:.4f} nats (runs "
            f"{', '.join(f'{v:.4f}' for v in measured['loss'])}), against {crit:.4f} on the "
            f"tuning seeds that chose it: "
            + (f"choosing on {len(seeds)} seeds flattered the step by "
               f"{fl['honest'] - crit:.4f} nats." if fl["honest"] > crit else
               f"the measuring seeds did {crit - fl['honest']:.4f} nats better.")]  # fmt: skip
    spread = tuning.groupby(list(TUNED))["loss"].agg(lambda v: v.max() - v.min())
    erratic = spread[spread > ERRATIC]
    if len(erratic):
        out.append("Steps whose tuning seeds differ by more than "
                   f"{ERRATIC} nats (one seed's run ends far worse than the other's): "
                   + ", ".join(f"outer lr {a:g} with momentum {b:g} ({d:.2f})"
                               for (a, b), d in erratic.items()) + ".")  # fmt: skip
    same = chosen_is_run(ch, grid)
    out += ["", f"The grid's DiLoCo runs use the chosen step: **{'yes' if same else 'no'}**. "
            f"The tuning runs hold one H ({', '.join(map(str, hs))}), the grid's; where they hold "
            "several, the tune job chooses per H (a configuration is every other varying "
            "factor). The step was tuned at keep 1 and is used at every keep.", ""]
    return out


def _line_section(line: dict, cov: list[dict]) -> list[str]:
    x, ex = line["x"], line["excess"]
    slope, icept, r2 = line["mean_line"]
    head = " | ".join(f"keep 1/{v:g}" for v in x)
    out = [
        f"## Rand-k at H = {line['H'][0]}: excess loss against 1 + omega",
        "",
        "Per seed, the loss at keep fraction k minus the loss at keep 1 (nats), against "
        "1 + omega = 1/k, and the least-squares line through the points (keep 1 included, at 0).",
        "",
        f"| seed | {head} | slope | R^2 |",
        "|---:|" + "---:|" * (len(x) + 2),
    ]
    for s, e, (sl, _, rr) in zip(line["seeds"], ex, line["per_seed"]):
        out.append(f"| {s} | " + " | ".join(f"{v:+.4f}" for v in e) + f" | {sl:.5f} | {rr:.3f} |")
    out.append("| mean | " + " | ".join(f"{v:+.4f}" for v in ex.mean(axis=0))
               + f" | {slope:.5f} | {r2:.3f} |")  # fmt: skip
    out += [
        "",
        f"Slope over seeds: {line['slope'].text('.5f')} nats per unit of 1 + omega. "
        f"R^2 over seeds: {line['r2'].text('.3f')} (t intervals on {line['slope'].n - 1} "
        "degrees of freedom).",
        "",
        f"The slope interval's coverage, {N_SIM:,} simulated grids a row with this grid's keeps, "
        "seeds and residual noise:",
        "",
        "| truth | noise | coverage | interval excludes 0 |",
        "|---|---|---:|---:|",
        *[f"| {c['truth']} | {c['noise']} | {c['coverage']:.3f} | {c['decided']:.3f} |"
          for c in cov],
        "",
        "Excluding 0 where there is no slope is a false positive; at this grid's slope it is "
        "the power to decide the sign.",
        "",
    ]
    return out


def _attack_section(rows: pd.DataFrame, broken: dict, vocab: int, m: int) -> list[str]:
    out = [
        "## A median aggregator under attack",
        "",
        f"{m} workers, the coordinate-wise median; the first `attackers` workers send a "
        "sign-flipped message scaled by 10: each its own (independent) or all the honest "
        "workers' mean (coordinated). Bounded: not diverged and below "
        f"ln({vocab}) = {math.log(vocab):.3f} nats, a uniform guess. Loss: the mean over the "
        "bounded seeds (their range beside it).",
        "",
        "| attackers | mode | loss, nats (range) | seeds bounded |",
        "|---:|---|---|---:|",
    ]
    for r in rows.to_dict("records"):
        loss = ("n/a" if not np.isfinite(r["loss"]) else
                f"{r['loss']:.4f} ({r['low']:.4f} to {r['high']:.4f})")  # fmt: skip
        out.append(f"| {r['attackers']} | {r['mode']} | {loss} | {r['bounded']} of {r['seeds']} |")
    out.append("")
    for mode, k in broken.items():
        if k is None:
            out.append(f"{mode.capitalize()}: every seed stays bounded at every count run.")
        else:
            g = rows[(rows["mode"] == mode) & (rows["attackers"] == k)].iloc[0]
            out.append(f"{mode.capitalize()}: bounded on every seed below {k} attackers; at {k}, "
                       f"{g['seeds'] - g['bounded']} of {g['seeds']} seeds break.")  # fmt: skip
    return [*out, ""]


def _untuned_section(old: pd.DataFrame) -> list[str]:
    runs = old[(old["algo"] == "diloco")]
    wide = runs.pivot_table(index=["H", "seed"], columns="keep", values="loss")
    worse = (wide[0.5] < wide[1.0]).groupby("H").mean()
    return [
        "## Before tuning (data/gpt.csv)",
        "",
        "The first grid ran every H with DiLoCo's outer step for H = 500 (lr 0.7, momentum 0.9), "
        "untuned, on contiguous shards per worker. There keep 1/2 beat keep 1 on "
        + ", ".join(f"{v:.0%} of seeds at H = {h}" for h, v in worse.items())
        + ": the uncompressed baseline was the broken point, so its excess loss said nothing "
        "of what compression costs. The comparison, interval and design under `compare/`, "
        "`ci/` and `design/` still read that grid.",
        "",
    ]


def report(root: Path) -> str:
    """The README text of reports/gpt/."""
    data = root / "data"
    paths = [data / f"{n}.csv" for n in ("gpt_tuning", "gpt_tuned", "gpt_tuned_attack")]
    tuning, grid, hostile = (pd.read_csv(p) for p in paths)
    line = randk_line(grid)
    cov = coverage(line["x"], line, np.random.default_rng(0))
    topk = topk_against_randk(grid)
    gap = paired(grid, {"algo": "diloco", "compressor": "randk", "keep": 1.0}, {"algo": "sync"})
    vocab = _vocabulary(hostile)
    rows, broken = attack_table(hostile, vocab)
    m = int(hostile["M"].iloc[0])
    found = claims(line, topk, gap, broken, m, line["H"])
    walls = ", ".join(f"`{p.name}` {len(t)} runs in {_wall(_manifest(p))}"
                      for p, t in zip(paths, (tuning, grid, hostile)))  # fmt: skip
    out = [
        "# The GPT grid: DiLoCo on a character-level transformer, outer step tuned",
        "",
        "Made by `python -m tools.gpt_report` from the runs of `data/specs/gpt_tuning.toml`, "
        f"`gpt_tuned.toml` and `gpt_tuned_attack.toml` (`fitrules simulate`): {walls}.",
        "",
        "## What the grid says",
        "",
        "| claim | this grid | evidence |",
        "|---|---|---|",
        *[f"| {c.text} | {c.status} | {c.evidence} |" for c in found],
        "",
        "Supported or contradicted: the 95% interval over seeds excludes the other side; "
        "undecided: it does not; not tested: the grid holds no runs that could tell.",
        "",
        *_tuning_section(tuning, grid),
        *_line_section(line, cov),
        "## Top-k with error feedback, and synchronous training",
        "",
        *[f"- top-k at keep 1/{1 / k:g} minus rand-k at keep 1/{1 / a:g}: {iv.text()} nats "
          f"over {iv.n} paired seeds." for (k, a), iv in sorted(topk.items(), reverse=True)],
        f"- DiLoCo (keep 1) minus synchronous AdamW: {gap.text()} nats over {gap.n} paired seeds.",
        "",
        *_attack_section(rows, broken, vocab, m),
        *_untuned_section(pd.read_csv(data / "gpt.csv")),
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    from fitrules.base.paths import project_root

    root = project_root()
    target = root / "reports" / "gpt" / "README.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = report(root)
    target.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
