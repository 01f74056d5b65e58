"""Bootstrap intervals over seeds: for a full-grid fit's constants and for predictions.

Each resample draws, within every cell, as many runs as the cell has, with replacement, and
refits the form to the resampled cell means. Percentile intervals of the constants and of the
prediction at any point (in the grid or not) follow from the refits. Cells with one run cannot
vary and are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fitrules import expr as ex
from fitrules.errors import FitrulesError
from fitrules.fit import FitOptions, FitResult, Objective, fit, predict
from fitrules.forms import Form
from fitrules.grids import Grid


@dataclass
class BootstrapFit:
    """A full-grid fit with seed-bootstrap intervals."""

    form: Form
    fit: FitResult
    level: float
    resamples: int
    seed: int
    draws: np.ndarray  # (resamples, p) constants of each refit
    failed: int
    single_run_cells: int
    points: list[dict] = field(default_factory=list)

    def constant_intervals(self) -> dict[str, tuple[float, float]]:
        a = (1 - self.level) / 2
        ok = np.isfinite(self.draws).all(axis=1)
        out = {}
        for j, c in enumerate(self.form.constants):
            lo, hi = np.quantile(self.draws[ok, j], [a, 1 - a])
            out[c] = (float(lo), float(hi))
        return out

    def predict_at(self, point: dict[str, float]) -> dict:
        """Prediction and percentile interval at ``point`` (variable name -> value)."""
        X = {v: np.array([float(point[v])]) for v in self.form.bound_variables}
        value = float(predict(self.form, X, self.fit.constants)[0])
        ok = np.isfinite(self.draws).all(axis=1)
        preds = np.array(
            [
                predict(self.form, X, dict(zip(self.form.constants, d, strict=True)))[0]
                for d in self.draws[ok]
            ]
        )
        preds = preds[np.isfinite(preds)]
        a = (1 - self.level) / 2
        lo, hi = np.quantile(preds, [a, 1 - a]) if len(preds) else (np.nan, np.nan)
        return {"point": dict(point), "prediction": value, "interval": [float(lo), float(hi)]}


def resolve_point(text_or_dict, form: Form, derive=()) -> tuple[dict, dict]:
    """``"H=8,keep=0.25"`` -> (the values as given, the form's variables at that point).

    Variables the point does not name are computed from the ``--derive`` expressions, and
    ``omega`` from ``keep`` (omega = 1/keep - 1) when the grid's convention is needed.
    """
    if isinstance(text_or_dict, dict):
        given = {k: float(v) for k, v in text_or_dict.items()}
    else:
        given = {}
        for part in filter(None, (p.strip() for p in str(text_or_dict).split(","))):
            key, sep, value = part.partition("=")
            try:
                if not sep:
                    raise ValueError
                given[key.strip()] = float(value)
            except ValueError:
                raise FitrulesError(
                    f"--at/--predict {text_or_dict!r}: {part!r} is not of the form NAME=NUMBER"
                ) from None
    values = dict(given)
    for text in derive:
        name, _, rhs = text.partition("=")
        node = ex.parse(rhs)
        if all(n in values for n in ex.names(node)) and name.strip() not in values:
            values[name.strip().strip("`")] = float(ex.evaluate(node, values))
    if "omega" in form.bound_variables and "omega" not in values and "keep" in values:
        if not 0 < values["keep"] <= 1:
            raise FitrulesError(f"keep={values['keep']:g} is outside (0, 1]")
        values["omega"] = 1 / values["keep"] - 1
    missing = [v for v in form.bound_variables if v not in values]
    if missing:
        raise FitrulesError(
            f"the point {given} does not give {', '.join(missing)}, which form {form.name!r} reads"
        )
    return given, {v: values[v] for v in form.bound_variables}


def bootstrap_fit(
    grid: Grid,
    form: Form,
    objective: Objective | None = None,
    resamples: int = 200,
    seed: int = 0,
    level: float = 0.95,
    options: FitOptions | None = None,
) -> BootstrapFit:
    """Fit ``form`` on all cells and refit it on ``resamples`` seed-bootstrap replicates.

    Examples
    --------
    >>> path, where = default_grid()  # doctest: +SKIP
    >>> grid = load_grid(path, where=where)  # doctest: +SKIP
    >>> b = bootstrap_fit(grid, BUILTIN_FORMS["composition"])  # doctest: +SKIP
    >>> b.constant_intervals()["b"]  # doctest: +SKIP
    """
    if resamples < 20:
        raise FitrulesError(f"--resamples {resamples}: use at least 20")
    if not 0 < level < 1:
        raise FitrulesError(f"--level {level}: must be in (0, 1)")
    form = form.bind(grid.columns)
    cells = grid.cells(form.bound_variables)
    obj = objective or Objective()
    base = fit(form, cells.X, cells.y, obj, options)
    runs = grid.runs
    keys = list(cells.variables)
    groups = runs.groupby(keys, sort=True)[grid.metric].apply(lambda s: s.to_numpy(float))
    values = list(groups.to_numpy())
    rng = np.random.default_rng(seed)
    draws = np.full((resamples, len(form.constants)), np.nan)
    failed = 0
    for b in range(resamples):
        yb = np.array([v[rng.integers(0, len(v), len(v))].mean() for v in values])
        r = fit(form, cells.X, yb, obj, options)
        if np.isfinite(r.objective):
            draws[b] = [r.constants[c] for c in form.constants]
        else:
            failed += 1
    single = int(sum(len(v) == 1 for v in values))
    return BootstrapFit(form, base, level, resamples, seed, draws, failed, single)
