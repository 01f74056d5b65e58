"""Library entry points behind the CLI commands that combine several modules."""

from __future__ import annotations

import numpy as np

from fitrules.compare import heldout_errors
from fitrules.errors import FitrulesError
from fitrules.fit import Objective, fit, predict
from fitrules.forms import Form
from fitrules.grids import Grid
from fitrules.util import json_ready


def fit_grid(grid: Grid, form: Form, objective: str = "rel_ls", delta: float = 1e-3) -> dict:
    """Fit ``form`` on every cell of ``grid``: the result, the cells and a JSON view."""
    form = form.bind(grid.columns)
    obj = Objective(objective, delta)
    cells = grid.cells(form.bound_variables, positive=obj.kind != "abs_ls")
    result = fit(form, cells.X, cells.y, obj)
    if not np.isfinite(result.objective):
        raise FitrulesError(
            f"form {form.name!r}: no values of its constants give a finite prediction at "
            f"every one of the {len(cells)} cells; {'; '.join(result.reasons)}"
        )
    pred = predict(form, cells.X, result.constants)
    train_error = heldout_errors(cells.y, pred)
    payload = json_ready(
        {
            "data": {
                "path": str(grid.path),
                "sha256": grid.sha256,
                "runs": len(grid.runs),
                "cells": len(cells),
                "where": list(grid.where),
                "metric": grid.metric,
            },
            "form": form.to_dict(),
            "objective": obj.describe(),
            "constants": result.constants,
            "train_objective": result.objective,
            "train_error": train_error,
            "condition_number": result.cond,
            "degenerate": result.degenerate,
            "reasons": result.reasons,
            "cells": cells.table.assign(predicted=pred).to_dict("records"),
        }
    )
    return {
        "form": form,
        "result": result,
        "cells": cells,
        "train_error": train_error,
        "json": payload,
    }


def paired_seed_report(
    grid: Grid,
    baseline: str,
    treatments: list[str],
    sweep: str | None,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    tuning=None,
):
    """Paired-seed intervals of each treatment against the baseline, and a JSON view.

    With ``tuning`` (a :class:`fitrules.tune.Tuning` whose grid is ``grid``), each sentence
    says which levels were tried, which won for each arm and on which seeds.
    """
    from fitrules.stats import paired_ci, parse_selection, sweep_treatments

    base = parse_selection(baseline, "--baseline")
    sels = [parse_selection(t, "--treatment") for t in treatments]
    if sweep is not None:
        sels += sweep_treatments(grid.runs, base, sweep)
    results = paired_ci(grid.runs, grid.metric, grid.seed, base, sels, level, resamples, seed)
    if tuning is not None:
        for r, sel in zip(results, sels, strict=True):
            r.tuned = _tuning_note(grid, tuning, base, sel)
    payload = json_ready(
        {
            "data": {
                "path": str(grid.path),
                "sha256": grid.sha256,
                "runs": len(grid.runs),
                "metric": grid.metric,
                "where": list(grid.where),
                "excluded": grid.summary()["excluded"],
            },
            "settings": {
                "baseline": baseline,
                "level": level,
                "resamples": resamples,
                "seed": seed,
            },
            "results": [dict(r.to_dict(), sentence=r.sentence()) for r in results],
        }
    )
    return results, payload


def fit_intervals(
    grid: Grid,
    form: Form,
    objective: str,
    delta: float,
    points: list[str],
    resamples: int,
    seed: int,
    level: float,
    derive=(),
    option: str = "--predict",
):
    """Seed-bootstrap fit of ``form`` and predictions (with intervals) at ``points``.

    Every point is resolved (and refused if it names an unknown variable or a value outside
    its domain) before the bootstrap starts.
    """
    from fitrules.intervals import bootstrap_fit, check_bootstrap_options, resolve_point

    check_bootstrap_options(resamples, seed, level)
    bound = form.bind(grid.columns)
    resolved = [resolve_point(text, bound, derive, option) for text in points]
    boot = bootstrap_fit(grid, form, Objective(objective, delta), resamples, seed, level)
    preds = [boot.predict_at(at) | {"given": given} for given, at in resolved]
    return boot, preds


def _tuning_note(grid: Grid, tuning, base: dict, sel: dict) -> str:
    """'both arms tuned: lr from {...}, chosen on seeds 0, 1, 2 (sync 0.003, ...); ...'"""
    from fitrules.stats import _match, label

    def chosen(s: dict) -> str:
        rows = grid.runs[_match(grid.runs, s, "selection")]
        return "; ".join(
            f"{f} {', '.join(f'{v:g}' for v in sorted(rows[f'tuned_{f}'].unique()))}"
            for f in tuning.factors
        )

    d = tuning.describe()
    levels = "; ".join(
        f"{k} from {{{', '.join(f'{v:g}' for v in vs)}}}" for k, vs in d["levels"].items()
    )
    if tuning.scheme == "tune seeds":
        seeds = (
            f"chosen per arm on seeds {', '.join(map(str, d['tune_seeds']))}; the interval "
            f"uses only seeds {', '.join(map(str, d['evaluation_seeds']))}"
        )
    else:
        seeds = "cross-fitted: each seed's value at the level the other half of the seeds chose"
    return (
        f"both arms tuned: {levels}, {seeds} ({label(base)}: {chosen(base)}; "
        f"{label(sel)}: {chosen(sel)})"
    )
