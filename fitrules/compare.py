"""Splits x forms -> a tidy table of held-out errors, per-form summaries and paired verdicts."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fitrules import __version__
from fitrules.errors import SplitError
from fitrules.fit import FitOptions, FitResult, Objective, fit_splits, predict
from fitrules.forms import Form
from fitrules.grids import Cells, Grid
from fitrules.splits import RandomSplit
from fitrules.stats import paired_verdict
from fitrules.util import json_ready


@dataclass
class Comparison:
    """The outcome of comparing forms on paired splits.

    Attributes
    ----------
    results : one row per (split, form): held-out errors, constants, degenerate reasons.
    summary : one row per form: valid and degenerate split counts, error percentiles.
    paired : one row per pair of forms, on the splits valid for both.
    full_fits : each form fitted on every cell.
    """

    results: pd.DataFrame
    summary: pd.DataFrame
    paired: pd.DataFrame
    forms: list[Form]
    cells: Cells
    full_fits: dict[str, FitResult]
    data: dict
    settings: dict
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Everything, JSON-ready (NaN and infinities become null)."""
        return json_ready(
            {
                "fitrules_version": __version__,
                "data": self.data,
                "settings": self.settings,
                "forms": [f.to_dict() for f in self.forms],
                "summary": self.summary.to_dict("records"),
                "paired": self.paired.to_dict("records"),
                "degenerate_reasons": self.reasons,
                "full_fit": {
                    name: {
                        "constants": r.constants,
                        "train_objective": r.objective,
                        "degenerate": r.degenerate,
                        "reasons": r.reasons,
                    }
                    for name, r in self.full_fits.items()
                },
                "cells": self.cells.table.to_dict("records"),
                "results": self.results.to_dict("records"),
            }
        )


def _reason_key(reason: str) -> str:
    """Group reasons that differ only in numbers after a colon or in parentheses."""
    return reason.split(" (")[0]


def noise_floor(cells: Cells, masks: np.ndarray) -> tuple[list[float | None], int]:
    """Per split, the held-out error of a predictor that knew every cell's true mean.

    Such a predictor still misses each cell's seed mean by its sampling error, whose
    expected absolute size is sem * sqrt(2/pi); the floor is its mean over the held-out
    cells, relative to the cell value, in percent. Cells with one seed have no estimate and
    are left out (and counted).
    """
    t = cells.table
    rel = (t["sem"] * np.sqrt(2 / np.pi) / t["value"].abs()).to_numpy()
    known = np.isfinite(rel)
    out: list[float | None] = []
    for mask in masks:
        test = ~mask & known
        out.append(float(100 * rel[test].mean()) if test.any() else None)
    return out, int((~known).sum())


def heldout_errors(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    rel = np.abs(y_pred - y_true) / np.abs(y_true)
    return {
        "heldout_error_pct": float(100 * rel.mean()),
        "max_pct": float(100 * rel.max()),
        "rmse": float(np.sqrt(np.mean((y_pred - y_true) ** 2))),
    }


def compare(
    grid: Grid,
    forms: Sequence[Form],
    splitter=None,
    objective: Objective | None = None,
    keep_degenerate: bool = False,
    options: FitOptions | None = None,
    on_progress: Callable[[int], None] | None = None,
    test_grid: Grid | None = None,
) -> Comparison:
    """Fit every form on the same splits of ``grid``'s cells and score the held-out cells.

    Parameters
    ----------
    grid : the checked results table.
    forms : candidate forms; bound to the grid's columns here.
    splitter : the split protocol (default: 300 random thirds, seed 0); see
        :mod:`fitrules.splits`.
    objective : training objective (default relative least squares).
    keep_degenerate : keep flagged (split, form) pairs in summaries and paired verdicts.
    on_progress : called with the number of splits finished, for progress bars.
    test_grid : for the transfer protocol, the grid whose cells are scored.

    Raises
    ------
    FormError, GridError, SplitError
        For forms the grid cannot support or splits that cannot be made.
    """
    splitter = splitter or RandomSplit()
    objective = objective or Objective()
    bound = [f.bind(grid.columns) for f in forms]
    if test_grid is not None:
        bound = [f.bind(test_grid.columns) for f in bound]
    variables = list(dict.fromkeys(v for f in bound for v in f.bound_variables))
    cells = grid.cells(variables)
    if test_grid is not None:  # transfer: cells of both grids, marked by where they come from
        other = test_grid.cells(variables)
        table = pd.concat(
            [cells.table.assign(_source="fit"), other.table.assign(_source="test")],
            ignore_index=True,
        )
        cells = Cells(table, cells.variables, cells.metric)
    n = len(cells)
    if isinstance(splitter, RandomSplit):
        splitter.check(n)
    masks = splitter.masks_for(cells.table)
    labels = splitter.labels(cells.table)
    n_train = int(masks.sum(axis=1).min())
    for f in bound:
        p = len(f.constants)
        if n_train < p:
            if isinstance(splitter, RandomSplit):
                need = (p - 0.5) / n
                raise SplitError(
                    f"form {f.name!r} has {p} constants but each split fits only "
                    f"{n_train} of {n} cells; raise --train-frac to at least "
                    f"{need:.2f} or drop the form"
                )
            raise SplitError(
                f"form {f.name!r} has {p} constants but {labels[0]!r} fits only "
                f"{n_train} cells; drop the form or choose another --split"
            )
    floor, no_noise = noise_floor(cells, masks)
    X, y = cells.X, cells.y
    rows = []
    full = {}
    for f in bound:
        fits = fit_splits(f, X, y, masks, objective, options, on_progress)
        for s, (mask, r) in enumerate(zip(masks, fits, strict=True)):
            test = ~mask
            split_reasons = list(r.reasons)
            if np.isfinite(r.objective):
                pred = predict(f, {v: a[test] for v, a in X.items()}, r.constants)
            else:
                pred = np.full(test.sum(), np.nan)
            if not np.isfinite(pred).all():
                split_reasons.append("prediction is not finite on held-out cells")
                errs = {"heldout_error_pct": np.nan, "max_pct": np.nan, "rmse": np.nan}
            else:
                errs = heldout_errors(y[test], pred)
            rows.append(
                {
                    "split": s,
                    "split_label": labels[s],
                    "form": f.name,
                    **errs,
                    "noise_floor_pct": floor[s],
                    "train_objective": r.objective,
                    "n_train": int(mask.sum()),
                    "n_test": int(test.sum()),
                    "degenerate": bool(split_reasons),
                    "reasons": split_reasons,
                    "constants": r.constants,
                }
            )
        full[f.name] = fit_splits(f, X, y, np.ones((1, n), bool), objective, options)[0]
    results = pd.DataFrame(rows)

    def usable(df: pd.DataFrame) -> pd.Series:
        ok = df["heldout_error_pct"].notna()
        return ok if keep_degenerate else ok & ~df["degenerate"]

    summary_rows, reasons = [], {}
    for f in bound:
        df = results[results["form"] == f.name]
        e = df.loc[usable(df), "heldout_error_pct"].to_numpy()
        counts = Counter(_reason_key(x) for rs in df["reasons"] for x in rs)
        reasons[f.name] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        fl = df.loc[usable(df), "noise_floor_pct"].dropna().to_numpy(float)
        summary_rows.append(
            {
                "form": f.name,
                "constants": len(f.constants),
                "valid_splits": int(len(e)),
                "degenerate_splits": int(df["degenerate"].sum()),
                "mean_pct": float(e.mean()) if len(e) else np.nan,
                "median_pct": float(np.median(e)) if len(e) else np.nan,
                "p90_pct": float(np.percentile(e, 90)) if len(e) else np.nan,
                "max_pct": float(df.loc[usable(df), "max_pct"].max()) if len(e) else np.nan,
                "noise_floor_pct": float(np.median(fl)) if len(fl) else np.nan,
            }
        )
    summary = pd.DataFrame(summary_rows)

    wide = results.pivot(index="split", columns="form", values="heldout_error_pct")
    ok = results.assign(ok=usable(results)).pivot(index="split", columns="form", values="ok")
    paired_rows = []
    for a, b in itertools.combinations([f.name for f in bound], 2):
        both = (ok[a] & ok[b]).to_numpy(bool)
        v = paired_verdict(wide[a].to_numpy()[both], wide[b].to_numpy()[both])
        paired_rows.append({"a": a, "b": b, **v})
    paired = pd.DataFrame(
        paired_rows,
        columns=[
            "a",
            "b",
            "n",
            "a_better",
            "b_better",
            "ties",
            "median_diff_pct",
            "mean_diff_pct",
            "wilcoxon_p",
        ],
    )
    data = {
        "path": str(grid.path) if grid.path else None,
        "sha256": grid.sha256,
        "runs": int(len(grid.runs)),
        "cells": int(n if test_grid is None else (cells.table["_source"] == "fit").sum()),
        "metric": grid.metric,
        "where": list(grid.where),
        "derive": list(grid.derive),
        "excluded": grid.summary()["excluded"],
        "variables": variables,
        "cells_without_noise_estimate": no_noise,
    }
    if test_grid is not None:
        data["test"] = {
            "path": str(test_grid.path),
            "sha256": test_grid.sha256,
            "runs": int(len(test_grid.runs)),
            "cells": int((cells.table["_source"] == "test").sum()),
        }
    settings = {
        **splitter.describe(),
        "objective": objective.describe(),
        "keep_degenerate": bool(keep_degenerate),
    }
    return Comparison(results, summary, paired, bound, cells, full, data, settings, reasons)
