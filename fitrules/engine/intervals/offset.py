"""The grid's seed offset: the effect its seed ids share across cells, which a fit absorbs,
the fit's response to it and the variance it adds to a prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import FitrulesError, param
from fitrules.engine.fit import Objective
from fitrules.engine.intervals.noise import SeedNoise, seed_noise
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form
from fitrules.model.grids import Cells, Grid

SEED_OFFSET_METHOD = (
    "two-way ANOVA of the runs relative to their cell's value, cells fixed x seed ids random "
    "(the seed mean square over its effective count, an unbiased and never negative estimate "
    "of one seed's shared variance plus a little run noise, chi-square with the seed degrees "
    "of freedom); carried through the fit by its linear response to each seed's effect"
)


CLIP_SDS = 4.0  # runs further than this many seed-noise sds from their cell are clipped


@dataclass(frozen=True)
class SeedOffset:
    """The part of a grid's cell means that its seed ids share, which a fit absorbs.

    Runs that share a seed id share an effect across cells, so the grid's cell means carry
    the average effect of its seed ids (one offset common to every cell when every cell has
    the same ids). A fit's level constants absorb it, held-out cells share it, and no
    leave-one-cell-out residual or residual bootstrap can see it: an interval for the
    configuration's mean over new seeds must add it, one for the mean at the grid's seed ids
    must not. Estimated from the cells x seeds decomposition (:func:`seed_offset`).

    Attributes
    ----------
    var : variance of one seed id's shared effect, relative to the cell's value (absolute
        under ``abs_ls``): the seed mean square over its effective count ``q``, whose
        expectation is the shared variance plus the run variance over ``q``.
    df : its degrees of freedom (seed ids less one in a complete design).
    var_run : the per-run variance beyond the seed effect (same scale).
    shared_var : the unbiased estimate of one seed's shared variance (never below 0), for
        what the cells' own noise does not share.
    shares : (cells, seeds) the share of each cell's runs at each seed id.
    seeds : the seed ids, as text.
    relative : variances relative to the cell's value.
    """

    var: float
    df: int
    var_run: float
    shares: np.ndarray
    seeds: tuple[str, ...]
    relative: bool = True
    shared_var: float = 0.0
    method: str = SEED_OFFSET_METHOD

    def quantile(self, level: float) -> float:
        from scipy import stats

        return float(stats.t.ppf(0.5 + level / 2, max(self.df, 1)))

    def to_dict(self) -> dict:
        return {
            "shared_sd": math.sqrt(self.shared_var),
            "shared_sd_bound": math.sqrt(self.var),
            "run_sd": math.sqrt(self.var_run),
            "df": self.df,
            "seed_ids": len(self.seeds),
            "relative": self.relative,
            "method": self.method,
        }


def seed_offset(
    grid: Grid, cells: Cells, objective: Objective | None = None, noise: SeedNoise | None = None
) -> SeedOffset | None:
    """The variance of the seed effect the grid's seed ids share across ``cells``.

    Each run's deviation from its cell's value is clipped at 4 robust seed-noise sds
    (``noise``) first, so that a corrupted run (loss x 1.3) does not pass for a seed effect;
    Gaussian runs are almost never clipped.

    Parameters
    ----------
    grid : the runs (with a seed column).
    cells : the cells a fit reads (their order is kept in ``shares``).
    objective : ``abs_ls`` makes the variances absolute; otherwise relative.
    noise : the robust seed noise of one run (default: :func:`seed_noise` of the cells).

    Returns
    -------
    SeedOffset or None
        None when the grid has no seed column, or no seed id appears in two cells (fresh
        ids per cell: the runs of different cells are then independent, and nothing is
        shared to add).

    Examples
    --------
    >>> off = seed_offset(grid, grid.cells(("H", "omega")))  # doctest: +SKIP
    >>> round(100 * math.sqrt(off.var), 3)  # one seed's shared effect, % of the value
    ... # doctest: +SKIP
    """
    parts = _offset_anova(grid, cells, objective, noise)
    if parts is None:
        return None
    a, relative, shares = parts
    return SeedOffset(
        float(a["ms_seed"] / a["q"]), int(a["df_seed"]), float(a["ms_e"]), shares,
        tuple(str(s) for s in a["seeds"]), relative,
        max(float((a["ms_seed"] - a["ms_e"]) / a["q"]), 0.0),
    )  # fmt: skip


def _offset_anova(grid: Grid, cells: Cells, objective: Objective | None, noise: SeedNoise | None):
    """The cells x seed ids ANOVA of the runs relative to their cell's value (see
    :func:`seed_offset`), whether it is relative, and each cell's share of each seed id; None
    when there is none."""
    from fitrules.engine.stats import _crossed_anova

    if grid.seed is None or grid.seed not in grid.runs.columns:
        return None
    keys = list(cells.variables)
    index = cells.table[keys].reset_index(drop=True).assign(_cell=np.arange(len(cells)))
    index = index.assign(_value=cells.y)
    runs = grid.runs[[*keys, grid.seed, grid.metric]].dropna(subset=[grid.metric])
    runs = runs.merge(index, on=keys, how="inner")
    if len(runs) < 4:
        return None
    relative = (objective or Objective()).kind != "abs_ls"
    noise = noise if noise is not None else seed_noise(grid, keys, objective)
    value = runs["_value"].to_numpy(float)
    with np.errstate(all="ignore"):
        y = runs[grid.metric].to_numpy(float) - value
        y = y / np.abs(value) if relative else y
    if not np.isfinite(y).all():
        return None
    if noise.known and noise.cv > 0:  # a corrupted run is not a seed effect
        limit = CLIP_SDS * noise.cv * (1.0 if relative else np.abs(value))
        y = np.clip(y, -limit, limit)
    cell = runs["_cell"].to_numpy()
    seed = runs[grid.seed].astype(str).to_numpy()
    a = _crossed_anova(cell, seed, y)
    if a is None or not (a["ms_e"] >= 0 and a["q"] > 0):
        return None
    # shares over the fit's cells (a cell without runs here keeps a row of zeros)
    counts = np.zeros((len(cells), len(a["seeds"])))
    si = np.searchsorted(a["seeds"], seed)
    np.add.at(counts, (cell, si), 1.0)
    tot = counts.sum(axis=1, keepdims=True)
    shares = np.divide(counts, tot, out=np.zeros_like(counts), where=tot > 0)
    return a, relative, shares


GIVEN_DF = 10**6  # a seed sd the user gives is taken as known: a normal quantile
POOL_TEST_SIZE = 0.05  # the variance-ratio tests that refuse to pool unlike slices
GIVEN_METHOD = (
    "one seed id's shared effect as the user gave it (taken as known: a normal quantile), "
    "plus this grid's run noise over the seed ids' effective count"
)
POOL_METHOD = (
    "the seed mean squares of this grid and of the slices named, each over its effective "
    "count, pooled by their degrees of freedom, after two-sided F tests of each slice's "
    "per-run variance and seed variance against this grid's found no difference at 5% "
    "(Bonferroni over the tests)"
)


def given_seed_offset(
    grid: Grid, cells: Cells, sd: float, objective: Objective | None = None,
    noise: SeedNoise | None = None,
) -> SeedOffset | None:  # fmt: skip
    """The seed offset with one seed id's shared effect given (``sd``, relative to the value;
    absolute under ``abs_ls``) rather than estimated from the grid's few seed ids: its
    variance is ``sd**2`` plus the grid's run noise over the ids' effective count, on
    :data:`GIVEN_DF` degrees of freedom (a normal quantile). With one seed id in every cell
    (no estimate at all) every cell carries that id's whole effect. None when no seed id is
    shared across cells (nothing for ``sd`` to stand for)."""
    parts = _offset_anova(grid, cells, objective, noise)
    relative = (objective or Objective()).kind != "abs_ls"
    if parts is None:
        ids = _one_id(grid, cells)
        if ids is None:
            return None
        return SeedOffset(sd**2, GIVEN_DF, 0.0, np.ones((len(cells), 1)), ids, relative, 0.0,
                          GIVEN_METHOD)  # fmt: skip
    a, relative, shares = parts
    return SeedOffset(sd**2 + float(a["ms_e"] / a["q"]), GIVEN_DF, float(a["ms_e"]), shares,
                      tuple(str(s) for s in a["seeds"]), relative, sd**2,
                      GIVEN_METHOD)  # fmt: skip


def _one_id(grid: Grid, cells: Cells) -> tuple[str] | None:
    """The seed id when every run of ``cells`` has the same one, else None."""
    if grid.seed is None or grid.seed not in grid.runs.columns or len(cells) < 2:
        return None
    ids = grid.runs[grid.seed].dropna().astype(str).unique()
    return (str(ids[0]),) if len(ids) == 1 else None


def pooled_seed_offset(
    grid: Grid, cells: Cells, slices, objective: Objective | None = None,
    noise: SeedNoise | None = None,
) -> SeedOffset:  # fmt: skip
    """The seed offset with its variance pooled over ``slices`` ((label, Grid) pairs: other
    slices of comparable runs), which narrows the t quantile of a grid with few seed ids.

    Each slice's cells x seed ids ANOVA is made on the same variables; each slice's per-run
    variance and seed variance are compared with this grid's by two-sided F tests, and
    pooling is refused when any rejects at :data:`POOL_TEST_SIZE` (Bonferroni over the
    tests): slices whose seed effects differ cannot lend theirs.

    Raises
    ------
    FitrulesError
        When this grid or a slice has no seed effect shared across cells, or a slice's seed
        noise differs from this grid's.
    """
    from scipy import stats

    from fitrules.engine.intervals.noise import robust_cells

    own = _offset_anova(grid, cells, objective, noise)
    if own is None:
        raise _nothing_to_pool("", no_offset_reason(grid, cells))
    a, relative, shares = own
    found = []
    for label, g in slices:
        sc = robust_cells(g, cells.variables, objective)
        b = _offset_anova(g, sc, objective, None)
        if b is None:
            raise _nothing_to_pool(f" {label!r}", no_offset_reason(g, sc))
        found.append((label, b[0]))
    size = POOL_TEST_SIZE / (2 * len(found))
    for label, b in found:
        for what, num, den, d1, d2 in (
            ("per-run", b["ms_e"], a["ms_e"], b["df_e"], a["df_e"]),
            ("shared", b["ms_seed"] / b["q"], a["ms_seed"] / a["q"], b["df_seed"], a["df_seed"]),
        ):  # fmt: skip
            with np.errstate(all="ignore"):
                F = num / den
            ok = bool(np.isfinite(F) and F > 0)
            p = float(2 * min(stats.f.cdf(F, d1, d2), stats.f.sf(F, d1, d2))) if ok else 0.0
            if not p > size:
                raise FitrulesError(
                    f"{param('seed_pool')} {label!r}: its {what} seed variance is {F:.3g} "
                    f"times this grid's (F test p = {p:.2g}, below {size:.2g}): slices whose "
                    f"seed noise differs cannot be pooled; leave it out, or give "
                    f"{param('seed_sd')}"
                )
    runs = [a] + [b for _, b in found]
    df = sum(int(r["df_seed"]) for r in runs)
    var = sum(r["ms_seed"] / r["q"] * r["df_seed"] for r in runs) / df
    shared = sum(max((r["ms_seed"] - r["ms_e"]) / r["q"], 0.0) * r["df_seed"] for r in runs) / df
    return SeedOffset(float(var), df, float(a["ms_e"]), shares,
                      tuple(str(s) for s in a["seeds"]), relative, float(shared),
                      POOL_METHOD)  # fmt: skip


NO_SHARED_IDS = "no seed id is shared across cells"


def _nothing_to_pool(label: str, why: str) -> FitrulesError:
    """The refusal of a grid or slice with no seed effect to pool (``label``: the slice's,
    with a leading space, or empty for the grid itself)."""
    return FitrulesError(f"{param('seed_pool')}{label}: {why}; nothing to pool")


def no_offset_reason(grid: Grid, cells: Cells) -> str:
    """Why :func:`seed_offset` found no effect shared across ``cells``, in words: no seed
    column, one seed id in every cell (its effect is then the intercept's, and no interval
    allows for it), or no id in two cells (fresh ids per cell: nothing is shared)."""
    if grid.seed is None or grid.seed not in grid.runs.columns:
        return (
            "the table names no seed column, so runs that share a seed id cannot be told "
            # flag words: advice shown on both faces
            "apart (name it with --seed-col COL, seed_col= in Python, if there is one)"
        )
    keys = list(cells.variables)
    runs = grid.runs[[*keys, grid.seed, grid.metric]].dropna(subset=[grid.metric])
    runs = runs.merge(cells.table[keys], on=keys, how="inner")
    ids = runs[grid.seed].astype(str).unique()
    if len(ids) == 1 and len(cells) > 1:
        return (f"every run has seed id {ids[0]}: one id in every cell, so its shared effect "
                "cannot be told from the intercept and no interval here allows for it; runs "
                "at other seed ids would measure it")  # fmt: skip
    cells_per_id = runs.drop_duplicates([*keys, grid.seed]).groupby(grid.seed).size()
    if len(cells_per_id) and int(cells_per_id.max()) < 2:
        return NO_SHARED_IDS
    return "the seed ids' shared effect could not be estimated from these runs"


def offset_response(
    form: Form,
    X: dict[str, np.ndarray],
    y: np.ndarray,
    constants: dict[str, float],
    objective: Objective,
    shares: np.ndarray,
    relative: bool = True,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """(p, seeds) change of each constant per unit effect of each seed id, to first order.

    A seed effect ``u_s`` moves cell c by ``shares[c, s] * u_s`` (times the cell's value when
    ``relative``); the fit at its optimum moves by the Gauss-Newton response
    ``-pinv(J) dr/dy dy``, J the Jacobian of the (weighted) residuals. NaN where the
    Jacobian is not finite.
    """
    cf = CompiledForm(form)
    theta = np.array([constants[c] for c in form.constants], float)
    with np.errstate(all="ignore"):
        pred = cf.predict(X, theta[None, :])[0]
        J = cf.jacobian(X, theta[None, :])[0] * objective.dres_dpred(pred, y)[:, None]
        h = 1e-6
        dr = objective.residuals(pred, y * (1 + h)) - objective.residuals(pred, y * (1 - h))
        dr_dy = dr / (2 * h * y)
    dy = shares * (y[:, None] if relative else 1.0)
    rhs = dr_dy[:, None] * dy
    if weights is not None:
        root = np.sqrt(np.asarray(weights, float))
        J, rhs = J * root[:, None], rhs * root[:, None]
    if not (np.isfinite(J).all() and np.isfinite(rhs).all()):
        return np.full((len(theta), shares.shape[1]), np.nan)
    return -np.linalg.lstsq(J, rhs, rcond=None)[0]


def offset_var_at(
    form: Form,
    X: dict[str, np.ndarray],
    constants: dict[str, float],
    response: np.ndarray,
    offset: SeedOffset,
) -> np.ndarray:
    """Variance the grid's seed offset adds to the prediction at each point (relative to
    the prediction when ``offset.relative``)."""
    cf = CompiledForm(form)
    theta = np.array([constants[c] for c in form.constants], float)
    with np.errstate(all="ignore"):
        pred = cf.predict(X, theta[None, :])[0]
        moved = cf.jacobian(X, theta[None, :])[0] @ response  # (n, seeds)
        if offset.relative:
            moved = moved / np.abs(pred)[:, None]
    return offset.var * (moved**2).sum(axis=1)
