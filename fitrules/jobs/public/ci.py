"""fr.ci: paired-seed intervals of each treatment minus the baseline."""

from __future__ import annotations

from collections.abc import Sequence

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, api_terms
from fitrules.base.results import made_from
from fitrules.jobs.inputs import GridLike, as_grid, tune_first
from fitrules.jobs.options import CI
from fitrules.model.grids import Grid
from fitrules.model.grids import load_grid as _load_grid


@api_terms
def ci(
    grid: GridLike | None = None,
    baseline: str | None = None,
    treatment: str | Sequence[str] | None = None,
    *,
    sweep: str | None = None,
    tune: str | Sequence[str] | None = None,
    tune_seeds: Sequence[int] | str | None = None,
    level: float = CI.level,
    resamples: int = CI.resamples,
    seed: int = CI.seed,
):
    """Paired-seed intervals of each treatment minus the baseline.

    With no ``grid``: the committed tuned paired grid, each arm's lr tuned on seeds 0, 1, 2,
    synchronous Adam against DiLoCo at H=16 (``fitrules ci`` with no arguments).

    Parameters
    ----------
    grid : Grid, DataFrame, path or None, optional
        The results table, as :func:`load_grid` reads it; None is the default grid (the
        committed main grid at inner learning rate 3e-4).
    baseline : str, optional
        A selection, e.g. ``"algo=sync"``.
    treatment : str or sequence of str, optional
        One selection or several, e.g. ``"algo=diloco,H=16"``.
    sweep : str, optional
        Compare every level of this column against the baseline.
    tune : str or sequence of str, optional
        Tune these factors per arm first (see :func:`tune`), e.g. ``tune="lr"``.
    tune_seeds : sequence of int or str, optional
        The seeds to choose on when tuning; None cross-fits (see :func:`tune`).
    level : float, optional
        Level of the intervals (default 0.95).
    resamples : int, optional
        Bootstrap resamples (default 10,000).
    seed : int, optional
        Seed of the bootstrap (default 0).

    Returns
    -------
    PairedIntervals
        ``.results`` (one :class:`fitrules.engine.stats.PairedCI` per treatment), ``.table``,
        ``.plot(i)``, ``.report(dir)``, ``.to_json()``.

    Examples
    --------
    >>> fr.ci(g, baseline="algo=sync", treatment="algo=diloco,H=16", tune="lr")  # doctest: +SKIP
    """
    CI.check(locals())  # the declared options' types and ranges, first
    from fitrules.engine.stats import paired_ci, parse_selection, sweep_treatments
    from fitrules.jobs.ci import PairedIntervals

    arg.text(baseline, "baseline", none=True)
    arg.texts(treatment, "treatment")
    arg.text(sweep, "sweep", none=True)
    level, seed = arg.level(level), arg.seed(seed)
    resamples = arg.count(resamples, "resamples")
    if grid is None:
        from fitrules.model.grids import DEFAULT_PAIRED, DEFAULT_PAIRED_TUNE

        g = _load_grid(DEFAULT_PAIRED)
        if tune is None:
            tune, tune_seeds = list(DEFAULT_PAIRED_TUNE[0]), DEFAULT_PAIRED_TUNE[1]
        if baseline is None and not treatment and sweep is None:
            baseline, treatment = "algo=sync", ["algo=diloco,H=16,keep=1"]
    else:
        g = as_grid(grid)
    if baseline is None:
        raise FitrulesError("a baseline is required (--baseline SEL), e.g. 'algo=sync'")
    treatments = [treatment] if isinstance(treatment, str) else list(treatment or [])
    if not treatments and sweep is None:
        raise FitrulesError("give a treatment (--treatment SEL, repeatable) or a sweep COL")
    g, tuning = tune_first(g, tune, tune_seeds)
    base = parse_selection(baseline, "--baseline")
    sels = [parse_selection(t, "--treatment") for t in treatments]
    if sweep is not None:
        sels += sweep_treatments(g.runs, base, sweep)
    results = paired_ci(g.runs, g.metric, g.seed, base, sels, level, resamples, seed, g.unit)
    if tuning is not None:
        for r, sel in zip(results, sels, strict=True):
            r.tuned = _tuning_note(g, tuning, base, sel)
    data = {
        "path": g.label,
        "sha256": g.sha256,
        "runs": len(g.runs),
        "metric": g.metric,
        "unit": g.unit,
        "where": list(g.where),
        "excluded": g.summary()["excluded"],
        **g.handling(()),
    }
    settings = {"baseline": baseline, "level": level, "resamples": resamples, "seed": seed}
    out = PairedIntervals(results, data, settings, tuning)
    made_from(out, g)
    return out


def _tuning_note(grid: Grid, tuning, base: dict, sel: dict) -> str:
    """'both arms tuned: lr from {...}, chosen on seeds 0, 1, 2 (sync 0.003, ...); ...'"""
    from fitrules.engine.stats import _match, label

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
