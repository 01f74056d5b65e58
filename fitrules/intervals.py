"""Bootstrap intervals over seeds: for a full-grid fit's constants and for predictions.

Each resample draws, within every cell, as many runs as the cell has, with replacement, and
refits the form to the resampled cell means. Percentile intervals of the constants and of the
prediction at any point (in the grid or not) follow from the refits. Cells with one run cannot
vary and are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fitrules import expr as ex
from fitrules.errors import FitrulesError
from fitrules.fit import FitOptions, FitResult, Objective, fit, predict
from fitrules.forms import Form
from fitrules.grids import Grid
from fitrules.limits import MAX_ABS_VALUE, MAX_BOOTSTRAP_RESAMPLES, check_count, check_seed


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
        if not ok.any():
            raise FitrulesError(
                f"form {self.form.name!r}: none of the {self.resamples} bootstrap refits gave "
                "finite constants, so there are no intervals"
            )
        out = {}
        for j, c in enumerate(self.form.constants):
            lo, hi = np.quantile(self.draws[ok, j], [a, 1 - a])
            out[c] = (float(lo), float(hi))
        return out

    def predict_at(self, point: dict[str, float]) -> dict:
        """Prediction and percentile interval at ``point`` (variable name -> value).

        Raises
        ------
        FitrulesError
            If the fitted form, or every bootstrap refit, predicts a value that is not
            finite there.
        """
        X = {v: np.array([float(point[v])]) for v in self.form.bound_variables}
        value = float(predict(self.form, X, self.fit.constants)[0])
        where = ", ".join(f"{k}={v:g}" for k, v in point.items())
        if not np.isfinite(value):
            raise FitrulesError(
                f"form {self.form.name!r} predicts {value} at {where}: not a finite number"
            )
        ok = np.isfinite(self.draws).all(axis=1)
        preds = np.array(
            [
                predict(self.form, X, dict(zip(self.form.constants, d, strict=True)))[0]
                for d in self.draws[ok]
            ]
        )
        preds = preds[np.isfinite(preds)]
        if not len(preds):
            raise FitrulesError(
                f"form {self.form.name!r}: no bootstrap refit gives a finite prediction at "
                f"{where}, so there is no interval"
            )
        a = (1 - self.level) / 2
        lo, hi = np.quantile(preds, [a, 1 - a])
        return {"point": dict(point), "prediction": value, "interval": [float(lo), float(hi)]}


def check_bootstrap_options(resamples: int, seed: int, level: float) -> None:
    """Refuse bootstrap settings outside what is allowed, before any work.

    Raises
    ------
    FitrulesError
        For fewer than 20 or more than :data:`~fitrules.limits.MAX_BOOTSTRAP_RESAMPLES`
        resamples, a seed outside 0 to 2**63 - 1, or a level outside (0, 1).
    """
    check_count(
        resamples,
        "--resamples",
        20,
        MAX_BOOTSTRAP_RESAMPLES,
        "at least 20 for a percentile interval; each resample is one full fit",
    )
    check_seed(seed, "--bootstrap-seed")
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise FitrulesError(f"--level {level}: must be in (0, 1), e.g. 0.95")


def parse_point(text: str, option: str = "--predict") -> dict[str, float]:
    """``"H=8,keep=0.25"`` -> {"H": 8.0, "keep": 0.25}; every value a finite number.

    Raises
    ------
    FitrulesError
        For a part that is not NAME=NUMBER, a name given twice, a value that is not finite,
        or an empty point.
    """
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().strip("`")
        try:
            if not sep or not key:
                raise ValueError
            number = float(value)
        except ValueError:
            raise FitrulesError(
                f"{option} {text!r}: {part!r} is not of the form NAME=NUMBER"
            ) from None
        if not math.isfinite(number):
            raise FitrulesError(f"{option} {text!r}: {key}={value.strip()} is not finite")
        if key in given:
            raise FitrulesError(f"{option} {text!r}: {key!r} is given twice")
        given[key] = number
    if not given:
        raise FitrulesError(f"{option} {text!r}: no NAME=NUMBER given")
    return given


def resolve_point(
    text_or_dict, form: Form, derive=(), option: str = "--predict"
) -> tuple[dict, dict]:
    """``"H=8,keep=0.25"`` -> (the values as given, the form's variables at that point).

    Variables the point does not name are computed from the ``--derive`` expressions, and
    ``omega`` from ``keep`` (omega = 1/keep - 1) when the grid's convention is needed. Every
    name must be a variable of the form or an input of a derivation; a variable that is both
    given and derivable must agree with its derivation; values with a known domain (H, M,
    keep, omega) must lie in it.

    Raises
    ------
    FitrulesError
        For an unknown name, a value outside its domain, a contradiction, or a variable the
        point does not determine.
    """
    if isinstance(text_or_dict, dict):
        given = {str(k): float(v) for k, v in text_or_dict.items()}
        shown = text_or_dict
    else:
        given = parse_point(text_or_dict, option)
        shown = text_or_dict
    rules: list[tuple[str, ex.Node, str]] = []
    for text in derive:
        name, _, rhs = text.partition("=")
        rules.append((name.strip().strip("`"), ex.parse(rhs), text))
    if "omega" in form.bound_variables and not any(r[0] == "omega" for r in rules):
        rules.append(("omega", ex.parse("1/keep - 1"), "omega = 1/keep - 1"))
    inputs = {n for _, node, _ in rules for n in ex.names(node)}
    known = set(form.bound_variables) | inputs | {r[0] for r in rules}
    unknown = [k for k in given if k not in known]
    if unknown:
        raise FitrulesError(
            f"{option} {shown!r}: {unknown[0]!r} is not a variable of form {form.name!r} "
            f"(variables: {', '.join(form.bound_variables)})"
        )
    _check_domain(given, shown, option)
    values = dict(given)
    for name, node, text in rules:
        if not all(n in values for n in ex.names(node)):
            continue
        with np.errstate(all="ignore"):
            v = float(ex.evaluate(node, values))
        if name in given:
            if not math.isclose(v, given[name], rel_tol=1e-9, abs_tol=1e-12):
                raise FitrulesError(
                    f"{option} {shown!r}: {name}={given[name]:g} contradicts {text!r}, which "
                    f"gives {name}={v:g}; give one of them"
                )
            continue
        if not math.isfinite(v):
            raise FitrulesError(f"{option} {shown!r}: {text!r} gives {name}={v} there")
        values[name] = v
    _check_domain(values, shown, option)
    missing = [v for v in form.bound_variables if v not in values]
    if missing:
        raise FitrulesError(
            f"{option} {shown!r} does not give {', '.join(missing)}, which form {form.name!r} reads"
        )
    return given, {v: values[v] for v in form.bound_variables}


def _check_domain(values: dict[str, float], shown, option: str) -> None:
    from fitrules.grids import DOMAIN

    for name, v in values.items():
        if not math.isfinite(v) or abs(v) > MAX_ABS_VALUE:
            raise FitrulesError(f"{option} {shown!r}: {name}={v:g} is not a finite value")
        if name in DOMAIN:
            test, allowed = DOMAIN[name]
            if not bool(test(np.float64(v))):
                raise FitrulesError(f"{option} {shown!r}: {name}={v:g}; {allowed}")


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
    check_bootstrap_options(resamples, seed, level)
    form = form.bind(grid.columns)
    obj = objective or Objective()
    cells = grid.cells(form.bound_variables, positive=obj.kind != "abs_ls")
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
