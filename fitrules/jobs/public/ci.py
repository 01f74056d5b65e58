"""fr.ci: paired-seed intervals of each treatment minus the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, api_terms, param
from fitrules.base.results import made_from
from fitrules.jobs.inputs import GridLike, as_grid, tune_first
from fitrules.jobs.options import CI
from fitrules.jobs.public.shared_docs import shared_params
from fitrules.model.grids import Grid
from fitrules.model.grids import load_grid as _load_grid


@api_terms
@shared_params
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
    {grid}
    baseline : str, optional
        A selection, e.g. ``"algo=sync"``.
    treatment : str or sequence of str, optional
        One selection or several, e.g. ``"algo=diloco,H=16"``.
    sweep : str, optional
        Compare every level of this column against the baseline.
    tune : str or sequence of str, optional
        Tune these factors per arm first (see :func:`tune`), e.g. ``tune="lr"``.
    {tune_seeds}
    {level}
    resamples : int, optional
        Bootstrap resamples (default 10,000).
    {seed}

    Returns
    -------
    PairedIntervals
        ``.results`` (one :class:`fitrules.engine.stats.PairedCI` per treatment), ``.table``,
        ``.plot(i)``, ``.report(dir)``, ``.to_json()``.

    Examples
    --------
    >>> fr.ci(g, baseline="algo=sync", treatment="algo=diloco,H=16", tune="lr")  # doctest: +SKIP
    """
    check(locals())
    given = paired_defaults(grid, baseline, treatment, sweep, tune, tune_seeds)
    if grid is None:
        from fitrules.model.grids import DEFAULT_PAIRED

        g = _load_grid(DEFAULT_PAIRED)
    else:
        g = as_grid(grid)
    g, tuning = tune_first(g, given["tune"], given["tune_seeds"])
    out = _intervals(g, tuning, given["baseline"], given["treatment"], sweep, level, resamples,
                     seed)  # fmt: skip
    return made_from(out, g)


def paired_defaults(grid, baseline, treatment, sweep, tune, tune_seeds) -> dict:
    """The arms and tuning given, or with no grid the committed paired grid's: its lr tuned
    on seeds 0, 1, 2 unless ``tune`` is given, sync against DiLoCo at H=16 unless an arm or a
    sweep is."""
    out = dict(baseline=baseline, treatment=treatment, tune=tune, tune_seeds=tune_seeds)
    if grid is None:
        from fitrules.model.grids import DEFAULT_PAIRED_TUNE

        if tune is None:
            out.update(tune=list(DEFAULT_PAIRED_TUNE[0]), tune_seeds=DEFAULT_PAIRED_TUNE[1])
        if baseline is None and not treatment and not sweep:
            out.update(baseline="algo=sync", treatment=["algo=diloco,H=16,keep=1"])
    return out


def check(values: Mapping[str, Any]) -> None:
    """Refuse what ``values`` (fr.ci's arguments; ``grid`` None for the committed paired grid)
    gives before any grid is read: the command line calls this before it takes its outputs,
    fr.ci first, the command line's checks first."""
    from fitrules.engine.stats import check_ci_options, parse_selection

    v = {o.name: o.value for o in CI.python} | dict(values)
    check_ci_options(v["level"], v["resamples"], v["seed"])
    arms = paired_defaults(v.get("grid"), v["baseline"], v["treatment"], v["sweep"], None, None)
    if arms["baseline"] is None:
        raise FitrulesError(f"{param('baseline')} is required with {param('grid')}")
    if not arms["treatment"] and v["sweep"] is None:
        raise FitrulesError(f"give {param('treatment')} SEL (repeatable) or {param('sweep')} COL")
    CI.check(v)
    arg.text(arms["baseline"], "baseline")
    treatments = arg.texts(arms["treatment"], "treatment")
    arg.text(v["sweep"], "sweep", none=True)
    parse_selection(arms["baseline"], param("baseline"))
    for t in treatments:
        parse_selection(t, param("treatment"))


def _intervals(g: Grid, tuning, baseline, treatment, sweep, level, resamples, seed):
    """The paired intervals of each treatment (and each level of ``sweep``) against the
    baseline, on ``g`` as tuned."""
    from fitrules.engine.stats import paired_ci, parse_selection, sweep_treatments
    from fitrules.jobs.ci import PairedIntervals

    level, seed, resamples = arg.level(level), arg.seed(seed), arg.count(resamples, "resamples")
    treatments = [treatment] if isinstance(treatment, str) else list(treatment or [])
    base = parse_selection(baseline, param("baseline"))
    sels = [parse_selection(t, param("treatment")) for t in treatments]
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
    return PairedIntervals(results, data, settings, tuning)


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
