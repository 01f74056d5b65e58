"""The GPT grids' two claims, measured and written to reports/gpt/README.md.

    python -m tools.gpt_report            # reads data/gpt.csv and data/gpt_attack.csv

1. Random sparsification: at each sync interval H, the excess loss of rand-k at keep fraction k
   over keep 1 (the same H and seed, then the mean over seeds) against 1 + omega, omega = 1/k - 1,
   fitted by a least-squares line; its R^2 is printed, and whether it reaches 0.95.
2. A coordinate-wise median over 16 workers with 0 to 8 coordinated sign-flip attackers: each
   count's loss, and the first count at which it is no longer bounded (diverged, or above the
   loss of a uniform guess over the vocabulary).

The comparison, paired interval and design made on the same grid are the other reports under
reports/gpt/ (``python -m tools.rebuild gpt-compare gpt-ci gpt-design``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

R2_BAR = 0.95


def excess_lines(table: pd.DataFrame) -> pd.DataFrame:
    """Per H: the seed-mean excess loss over keep 1 at each keep, and the line in 1 + omega."""
    runs = table[(table["algo"] == "diloco") & ~table["diverged"].astype(bool)]
    base = runs[runs["keep"] == 1.0].set_index(["H", "seed"])["loss"]
    rows = []
    for H, at_h in runs.groupby("H"):
        pts = []
        for keep, g in at_h.groupby("keep"):
            diffs = g.set_index("seed")["loss"] - base.loc[H].reindex(g["seed"]).to_numpy()
            pts.append((1 / keep, float(diffs.mean()), float(diffs.std(ddof=1)), len(diffs)))
        x = np.array([p[0] for p in pts])  # 1 + omega = 1 / keep
        y = np.array([p[1] for p in pts])
        slope, icept = np.polyfit(x, y, 1)
        fitted = slope * x + icept
        r2 = 1 - float(np.sum((y - fitted) ** 2) / np.sum((y - y.mean()) ** 2))
        order = np.argsort(x)
        rising = bool(np.all(np.diff(y[order]) > 0))
        rows.append({"H": int(H), "points": pts, "slope": float(slope),
                     "intercept": float(icept), "r2": r2, "rising": rising})  # fmt: skip
    return pd.DataFrame(rows)


def attack_table(table: pd.DataFrame, vocab: int) -> tuple[pd.DataFrame, int | None]:
    """Each attacker count's loss and whether it is bounded; the first count that is not."""
    ceiling = math.log(vocab)
    t = table.sort_values("attackers")[["attackers", "loss", "diverged"]].copy()
    t["bounded"] = ~t["diverged"].astype(bool) & (t["loss"] < ceiling)
    broken = t.loc[~t["bounded"], "attackers"]
    return t, (int(broken.min()) if len(broken) else None)


def _vocabulary(table: pd.DataFrame) -> int:
    """The vocabulary size of the corpus the runs trained on (each row's, all the same)."""
    from fitrules.sim.corpus import load_corpus, read_text_corpus

    paths = [c if isinstance(c, str) else "" for c in table["corpus"].unique()]  # "" reads NaN
    if len(paths) != 1:
        raise SystemExit(f"runs on {len(paths)} corpora; the report reads one")
    return (read_text_corpus(paths[0]) if paths[0] else load_corpus()).vocab_size


def _reading(lines: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """What the table says where the excess does not rise with 1 + omega."""
    flat = [r for r in lines.to_dict("records") if not r["rising"]]
    if not flat:
        return []
    where = ", ".join(str(r["H"]) for r in flat)
    return [
        f"The excess does not rise steadily with 1 + omega at H = {where}: it falls below "
        "zero before it rises, or falls throughout. These runs share one inner learning rate "
        f"and one outer step ({_settings(table, 'outer_lr', 'lr')}, "
        f"{_settings(table, 'outer_momentum', 'momentum')}), tuned for neither this "
        "model nor each H; results about H and compression have reversed before once each "
        "setting was tuned, so this grid says how the untuned harness behaves, not yet what "
        "compression costs a tuned one.",
        "",
    ]


def _settings(table: pd.DataFrame, column: str, name: str) -> str:
    """``name`` and the value(s) the DiLoCo runs of ``table`` share in ``column``."""
    values = sorted(table.loc[table["algo"] == "diloco", column].unique())
    return f"{name} " + " or ".join(f"{v:g}" for v in values)


def _manifest(csv: Path) -> dict:
    path = csv.with_suffix(".manifest.json")
    return json.loads(path.read_text()) if path.exists() else {}


def report(root: Path) -> str:
    """The README text of reports/gpt/."""
    grid, attack = root / "data" / "gpt.csv", root / "data" / "gpt_attack.csv"
    table, hostile = pd.read_csv(grid), pd.read_csv(attack)
    lines = excess_lines(table)
    vocab = _vocabulary(hostile)
    rows, broken = attack_table(hostile, vocab=vocab)
    m, ma = _manifest(grid), _manifest(attack)
    met = bool((lines["r2"] >= R2_BAR).all())
    out = [
        "# The GPT grid: DiLoCo on a character-level transformer",
        "",
        "Made by `python -m tools.gpt_report` from `data/gpt.csv` and `data/gpt_attack.csv` "
        '(specs in `data/specs/`; `fitrules simulate` with `model = "gpt"`); '
        f"{len(table)} runs in {_wall(m)} and {len(hostile)} in {_wall(ma)}. The comparison of the "
        "rules, the paired interval against synchronous training and the next runs' design "
        "on this grid are in `compare/`, `ci/` and `design/`.",
        "",
        "## Random sparsification: excess loss against 1 + omega",
        "",
        "At each H, the loss at keep fraction k minus the loss at keep 1 for the same seed, "
        "averaged over the seeds (standard deviation over seeds beside it), against "
        "1 + omega = 1/k; a least-squares line through the points (keep 1 included, at 0).",
        "",
        "| H | 1 + omega: excess loss, nats (sd, seeds) | slope | intercept | R^2 | rising |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for r in lines.to_dict("records"):
        pts = "; ".join(f"{x:g}: {y:+.4f} ({s:.4f}, {n})" if n > 1 else f"{x:g}: {y:+.4f}"
                        for x, y, s, n in r["points"])  # fmt: skip
        out.append(
            f"| {r['H']} | {pts} | {r['slope']:.4f} | {r['intercept']:+.4f} | {r['r2']:.3f} | "
            f"{'yes' if r['rising'] else 'no'} |"
        )
    worst = lines.loc[lines["r2"].idxmin()]
    out += [
        "",
        f"R^2 of the line is at least {R2_BAR} at every H: **{'yes' if met else 'no'}**"
        + (
            "."
            if met
            else f"; at H = {int(worst['H'])} it is {worst['r2']:.3f}, "
            f"{R2_BAR - worst['r2']:.3f} short of the bar."
        ),
        "",
        *_reading(lines, table),
        "## A median aggregator under attack",
        "",
        "16 workers, the coordinate-wise median; the first `attackers` workers send the honest "
        "workers' mean message sign-flipped and scaled by 10, all the same vector. Bounded: "
        f"not diverged and below ln({vocab}) = {math.log(vocab):.3f} nats, a uniform guess.",
        "",
        "| attackers | loss, nats | bounded |",
        "|---:|---:|---|",
        *[
            f"| {int(r['attackers'])} | "
            f"{'n/a' if not np.isfinite(r['loss']) else format(r['loss'], '.4f')} | "
            f"{'yes' if r['bounded'] else 'no'} |"
            for r in rows.to_dict("records")
        ],
        "",
        (
            f"It stays bounded below {broken} attackers and breaks at {broken}"
            + (" (8 of 16: the median's middle pair takes one attacker)." if broken == 8 else ".")
            if broken is not None
            else "It stays bounded at every count run, 8 of 16 included."
        ),
        "",
    ]
    return "\n".join(out)


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
