"""Synthetic tables several tests read: each a small grid with a known truth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from conftest import composition_grid
from fitrules.model.grids import Grid, load_grid


def chinchilla_like(n=40, seed=0) -> pd.DataFrame:
    """One run per cell, columns named as in the Chinchilla table, figure colours as text."""
    rng = np.random.default_rng(seed)
    size = rng.choice(np.round(np.geomspace(3e7, 1e10, 15), -3), n)  # repeated sizes
    flop = 6 * size * 10 ** rng.uniform(9, 11.5, n)
    loss = 1.8 + 480 / size**0.35 + 2000 / (flop / 6 / size) ** 0.37
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 500, n),
            "color": [f"#{i:06x}" for i in rng.integers(0, 2**24, n)],
            "Model Size": size,
            "Training FLOP": flop,
            "loss": loss * np.exp(0.01 * rng.standard_normal(n)),
        }
    )


def chinchilla_runs(corrupted: int, rng_seed: int = 0) -> pd.DataFrame:
    """108 runs: 6 x 6 cells of E + A/N**alpha + B/D**beta, 3 seeds, 0.35% log-normal noise;
    ``corrupted`` of them multiplied by 1.3."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for n in np.geomspace(5e7, 5e9, 6):
        for d in np.geomspace(1e9, 1e11, 6):
            mu = 1.69 + 406.4 / n**0.34 + 410.7 / d**0.28
            for s in range(3):
                rows.append({"N": n, "D": d, "seed": s,
                             "loss": mu * math.exp(0.0035 * rng.standard_normal())})  # fmt: skip
    frame = pd.DataFrame(rows)
    frame.loc[[7, 61, 90, 15, 100][:corrupted], "loss"] *= 1.3
    return frame


def grouped_table(seed=0):
    rng = np.random.default_rng(seed)
    E = {1: 2.0, 2: 2.3, 3: 1.8, 4: 2.6}
    A = {1: 1.5, 2: 0.9, 3: 2.2, 4: 1.1}
    alpha = 0.35
    rows = []
    for m in E:
        for n in [1, 2, 4, 8, 16, 32, 64, 128]:
            for s in range(2):
                value = E[m] + A[m] * n**-alpha
                rows.append({"N": n, "M": m, "seed": s, "loss": value * (1 + 1e-4 * rng.normal())})
    return pd.DataFrame(rows), E, A, alpha


def unequal_runs(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i, x in enumerate([1.0, 2, 3, 5, 8, 13, 21, 34]):
        for s in range(1 + (i * 5) % 7):  # 1 to 7 runs per cell
            # a truth the form misses (the bump), so that weighting cells moves the fit
            truth = 2 + 0.8 * x**0.5 + 0.3 * np.sin(x)
            rows.append({"x": x, "seed": s, "loss": truth + 0.05 * rng.normal()})
    return pd.DataFrame(rows)


def two_losses(seeds: int = 1) -> pd.DataFrame:
    """An N x M grid (4 x 4) with the metric ``loss`` and a second, correlated outcome."""
    rng = np.random.default_rng(29)
    rows = []
    for N in (1e7, 3e7, 1e8, 3e8):
        for M in (5, 10, 20, 40):
            for s in range(seeds):
                loss = 2 + 40 * N**-0.25 + 3 * (M * N) ** -0.1 + 0.005 * rng.standard_normal()
                rows.append(
                    {
                        "N": N,
                        "M": M,
                        "seed": s,
                        "loss": loss,
                        "loss_indist": 0.9 * loss + 0.01 * rng.standard_normal(),
                    }
                )
    df = pd.DataFrame(rows)
    return df if seeds > 1 else df.drop(columns="seed")


def nd_runs() -> pd.DataFrame:
    """A 5 x 4 grid of N x D from a Chinchilla-like law, 0.3% noise, no seeds."""
    rng = np.random.default_rng(29)
    rows = []
    for N in (1e7, 3e7, 1e8, 3e8, 1e9):
        for D in (1e9, 3e9, 1e10, 3e10):
            loss = 1.8 + 400 * N**-0.34 + 900 * D**-0.28
            rows.append({"N": N, "D": D, "loss": loss * (1 + 0.003 * rng.standard_normal())})
    return pd.DataFrame(rows)


def user_table(seeds: int = 3) -> pd.DataFrame:
    """A composition grid as an ML researcher's logger would write it."""
    df = composition_grid(seeds=seeds).rename(columns={"seed": "run_seed"})
    n = len(df)
    df["run_name"] = [f"sweep-{i:03d}" for i in range(n)]
    df["timestamp"] = pd.date_range("2026-01-01", periods=n, freq="17min").astype(str)
    df["path"] = [f"runs/sweep-{i:03d}/final.pt" for i in range(n)]
    df["M"] = 0.07  # a model size in billions, not the harness's number of workers
    df["spec"] = "my sweep"  # names the harness uses, without the harness's manifest
    df["spec_sha256"] = "x"
    return df


# ---------------------------------------------------------------- learning-rate sweeps
LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)


def lr_frame(loss, H=(1, 4, 16, 64), lrs=LRS, seeds=range(6), **extra) -> pd.DataFrame:
    """One run per (H, lr, seed); ``loss(H, lr, seed)`` gives the metric."""
    rows = [
        {"H": h, "lr": lr, "seed": s, "loss": loss(h, lr, s), "diverged": False, **extra}
        for h in H
        for lr in lrs
        for s in seeds
    ]
    return pd.DataFrame(rows)


def as_grid(frame: pd.DataFrame, where=()) -> Grid:
    return load_grid("synthetic.csv", frame=frame, where=where)


def bowl(best: dict, depth: float = 0.05):
    """Loss with a minimum in log10(lr) at ``best[H]`` (which may lie outside the sweep)."""
    return lambda h, lr, s: 2 + depth * (np.log10(lr) - np.log10(best[h])) ** 2


# ---------------------------------------------------------------- paired runs
BASE = [2.00, 2.10, 2.05, 1.95, 2.02]

TREAT = [1.98, 2.07, 2.06, 1.90, 2.00]


def paired_runs(base=BASE, treat=TREAT, seeds=None) -> pd.DataFrame:
    """Runs of sync (H=1, losses ``base``) and diloco (H=16, ``treat``) paired by seed."""
    seeds = seeds or list(range(len(base)))
    rows = [
        {"algo": "sync", "H": 1, "seed": s, "loss": v} for s, v in zip(seeds, base, strict=True)
    ]
    rows += [
        {"algo": "diloco", "H": 16, "seed": s, "loss": v} for s, v in zip(seeds, treat, strict=True)
    ]
    return pd.DataFrame(rows)
