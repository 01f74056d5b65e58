"""The batch: cells chosen greedily by how well they tell the forms apart (the rival refitted
to the truth's predictions), or by how much they pin one form's prediction at a target down."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from fitrules.base.errors import FitrulesError, param
from fitrules.engine.fit import fit_splits
from fitrules.jobs.design.result import _Asked
from fitrules.model.compiled import CompiledForm, predict
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid


def _pair_refit_gap(rival, cells, Xc, truth_pred, chosen, trial, objective):
    """Refit ``rival`` on the grid plus ``truth_pred`` at ``chosen`` + each ``trial`` cell.

    Returns (len(trial), n_candidates): the rival's refitted prediction minus truth_pred at
    every candidate (only chosen + that trial cell are read by the caller).
    """
    n, k = len(cells), len(truth_pred)
    X = {v: np.concatenate([cells.X[v], Xc[v]]) for v in rival.bound_variables}
    y = np.concatenate([cells.y, truth_pred])
    masks = np.zeros((len(trial), n + k), bool)
    masks[:, :n] = True
    if chosen:
        masks[:, n + np.array(chosen)] = True
    masks[np.arange(len(trial)), n + np.array(trial)] = True
    fits = fit_splits(rival, X, y, masks, objective)
    out = np.full((len(trial), k), np.nan)
    for i, r in enumerate(fits):
        if np.isfinite(r.objective):
            out[i] = predict(rival, Xc, r.constants) - truth_pred
    return out


def _choose_batch(
    ask: _Asked,
    grid: Grid,
    bound: list[Form],
    cells: Cells,
    cand: pd.DataFrame,
    Xc: dict,
    full: dict,
    cv: float,
    settings: dict,
) -> pd.DataFrame:
    """The batch: cells that tell the forms apart, or pin the one form's target down (whose
    point is added to ``settings``)."""
    from fitrules.engine.intervals import resolve_point

    zsum = stats.norm.ppf(1 - ask.alpha / 2) + stats.norm.ppf(ask.power)
    if ask.target is None:
        return _discriminate(
            bound, cells, cand, Xc, ask.budget, ask.seeds, ask.max_seeds, zsum, ask.objective
        )
    _, point = resolve_point(ask.target, bound[0], grid.derive, option=param("target"))
    settings["target_point"] = point
    return _pin_down(bound[0], cells, cand, Xc, point, full, ask.budget, ask.seeds, cv)


def _discriminate(bound, cells, cand, Xc, budget, seeds, max_seeds, zsum, objective):
    k = len(cand)
    names = [f.name for f in bound]
    pairs = list(itertools.combinations(range(len(bound)), 2))
    # in units of the typical prediction: the criterion is a ratio of squares, which at
    # values of 1e-300 or 1e90 would under- or overflow in the metric's own units
    unit = float(np.nanmedian(np.abs(cand[[f"pred_{n}" for n in names]].to_numpy())))
    unit = unit if math.isfinite(unit) and unit > 0 else 1.0
    param = {f.name: (cand[f"sd_param_{f.name}"].to_numpy() / unit) ** 2 for f in bound}
    misfit = {f.name: (cand[f"sd_misfit_{f.name}"].to_numpy() / unit) ** 2 for f in bound}

    def model_var(a: str, b: str) -> np.ndarray:
        # both forms' constants, and the misfit of the better-fitting one: the truth lies
        # about that far from its prediction, which can put it near the midpoint of the two
        # predictions where no number of runs tells them apart. The worse form's misfit is
        # the signal the runs are there to show, not noise.
        return param[a] + param[b] + np.minimum(misfit[a], misfit[b])

    seed_var = (cand["seed_sd"].to_numpy() / unit) ** 2
    # separation of each pair at `seeds` seeds, and the seeds each pair needs
    sep = np.zeros(k)
    need = np.full(k, np.inf)
    for i, j in pairs:
        a, b = names[i], names[j]
        delta = np.abs(cand[f"pred_{a}"].to_numpy() - cand[f"pred_{b}"].to_numpy()) / unit
        model = model_var(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):  # no noise at all: infinite
            sep = np.maximum(sep, delta / np.sqrt(model + seed_var / seeds))
        room = (delta / zsum) ** 2 - model
        with np.errstate(divide="ignore", over="ignore"):  # beyond any count: never
            n_ij = np.where(room > 0, np.ceil(seed_var / np.maximum(room, 1e-300)), np.inf)
        need = np.minimum(need, n_ij)
    cand["separation"] = sep
    cand["seeds_needed"] = need
    # where no number of seeds reaches the power (the forms' own uncertainty, misfit
    # included, exceeds their difference), more seeds would not help: plan the minimum
    n_cell = np.clip(np.where(np.isfinite(need), need, seeds), seeds, max_seeds).astype(int)
    cand["seeds_planned"] = n_cell
    preds = {f.name: cand[f"pred_{f.name}"].to_numpy() for f in bound}

    def score(chosen: list[int], trial: list[int]) -> np.ndarray:
        """Batch criterion of chosen + each trial cell, summed over ordered pairs."""
        total = np.zeros(len(trial))
        for i, j in pairs:
            for t, r in ((i, j), (j, i)):
                gap = (
                    _pair_refit_gap(bound[r], cells, Xc, preds[names[t]], chosen, trial, objective)
                    / unit
                )
                with np.errstate(divide="ignore"):  # no noise at all: an infinite weight
                    w = 1 / (model_var(names[t], names[r]) + seed_var / n_cell)
                for row, x in enumerate(trial):
                    idx = [*chosen, x]
                    with np.errstate(invalid="ignore"):  # 0 gap x infinite weight
                        total[row] += np.nansum(gap[row, idx] ** 2 * w[idx])
        return total

    first = score([], list(range(k)))
    cand["score"] = first
    chosen: list[int] = []
    rows: list[dict] = []
    spent, current = 0, 0.0
    while True:
        left = [x for x in range(k) if x not in chosen and spent + n_cell[x] <= budget]
        if not left:
            break
        # the first step scores the same batches as the ranking above: reuse it
        s = first[left] if not chosen else score(chosen, left)
        best = int(np.argmax(s))
        gain = float(s[best] - current)
        if not np.isfinite(s[best]) or gain <= 1e-12 * max(1.0, current):
            break
        x = left[best]
        chosen.append(x)
        spent += int(n_cell[x])
        current = float(s[best])
        rows.append(_chosen_row(cand, x, len(rows) + 1, int(n_cell[x]), current, gain))
    return pd.DataFrame(rows)


def _chosen_row(cand, x, order, n, total, gain) -> dict:
    out = {"order": order, "candidate": int(x), "seeds": n, "runs": n}
    out.update({v: float(val) for v, val in cand.iloc[x].items() if v not in out})
    out["batch_score"] = total
    out["gain"] = gain
    return out


def _pin_down(form, cells, cand, Xc, point, full, budget, seeds, cv) -> pd.DataFrame:
    """Greedy reduction of the delta-method variance of the prediction at ``point``."""
    cf = CompiledForm(form)
    theta = np.array([full[form.name].constants[c] for c in cf.s.constants], float)
    pred = cf.predict(cells.X, theta)
    J = cf.jacobian(cells.X, theta)  # (n, p)
    resid = pred - cells.y
    n, p = J.shape
    # information of the grid: each cell mean weighted by its variance (seed noise of its
    # runs plus the form's misfit, estimated from the residuals)
    with np.errstate(over="ignore", invalid="ignore"):
        misfit = max(float(np.sum(resid**2) / max(n - p, 1)), 0.0)
        seed_var_grid = (cv * cells.y) ** 2 / cells.table["n_seeds"].to_numpy(float)
        w = 1 / (seed_var_grid + misfit)
        info = (J * w[:, None]).T @ J
    g_t = cf.jacobian({v: np.array([point[v]]) for v in form.bound_variables}, theta)[0]
    Gc = cf.jacobian(Xc, theta)  # (k, p)
    pc = cf.predict(Xc, theta)
    with np.errstate(over="ignore", invalid="ignore"):
        var_new = (cv * pc) ** 2 / seeds + misfit
    if not (math.isfinite(misfit) and np.isfinite(info).all() and np.isfinite(var_new).all()):
        raise FitrulesError(
            f"form {form.name!r}: the variances of its predictions overflow at this scale of "
            "the metric (or its fit misses the grid by that much); rescale the metric"
        )

    def target_var(information):
        return float(g_t @ np.linalg.pinv(information, hermitian=True) @ g_t)

    v0 = target_var(info)
    cand["score"] = [
        v0 - target_var(info + np.outer(Gc[i], Gc[i]) / var_new[i]) for i in range(len(cand))
    ]
    cand["target_sd_now"] = math.sqrt(max(v0, 0.0))
    rows: list[dict] = []
    chosen: list[int] = []
    spent, current = 0, v0
    while spent + seeds <= budget:
        left = [i for i in range(len(cand)) if i not in chosen]
        if not left:
            break
        vs = [target_var(info + np.outer(Gc[i], Gc[i]) / var_new[i]) for i in left]
        best = int(np.argmin(vs))
        gain = current - vs[best]
        if gain <= 1e-12 * max(v0, 1e-300):
            break
        x = left[best]
        info = info + np.outer(Gc[x], Gc[x]) / var_new[x]
        chosen.append(x)
        spent += seeds
        current = vs[best]
        row = _chosen_row(cand, x, len(rows) + 1, seeds, current, gain)
        row["target_sd_after"] = math.sqrt(max(current, 0.0))
        rows.append(row)
    return pd.DataFrame(rows)
