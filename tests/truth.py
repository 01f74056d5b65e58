"""Results tables drawn from a known closed form, for calibration by simulation.

The harness (:mod:`fitrules.sim.runner`) trains real models; this draws each run as the
form's value at its cell times ``1 + cv * z`` (z standard normal), so a method's answer can be
checked against a truth that is known exactly: recovery of a form by ``search``, coverage of
an interval, the level of a test.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import Form


def runs_from_form(
    form: Form,
    constants: Mapping[str, float],
    levels: Mapping[str, Sequence[float]],
    seeds: int = 3,
    cv: float = 0.005,
    seed: int = 0,
    metric: str = "loss",
) -> pd.DataFrame:
    """One row per run over the product of ``levels``: the variables, ``seed``, the metric.

    Parameters
    ----------
    form : a form whose variables are the keys of ``levels``.
    constants : a value for each of its constants.
    levels : each variable's levels; cells are their product.
    seeds : runs per cell (seed ids 0..seeds-1).
    cv : relative noise sd of one run.
    seed : seeds the noise.
    """
    names = list(levels)
    cells = pd.DataFrame(list(itertools.product(*(levels[v] for v in names))), columns=names)
    X = {v: cells[v].to_numpy(float) for v in names}
    cf = CompiledForm(form)
    params = np.array([[float(constants[c]) for c in cf.s.constants]])
    mean = cf.predict(X, params)[0]
    rng = np.random.default_rng(seed)
    runs = cells.loc[cells.index.repeat(seeds)].reset_index(drop=True)
    runs["seed"] = np.tile(np.arange(seeds), len(cells))
    runs[metric] = np.repeat(mean, seeds) * (1 + cv * rng.standard_normal(len(runs)))
    return runs


# ---------------------------------------------------------------- the search tests' truths
H = (1, 4, 16, 64)

OMEGA = (0.0, 1.0, 3.0, 7.0, 15.0)

# A search small enough for a test: two terms, three constants, three factor families.
SMALL = dict(terms=2, max_constants=3, factors="power,linear,log", splits=6, inner_splits=5)


def truth_runs(expr: str, constants: dict, seed: int, cv: float = 0.005) -> pd.DataFrame:
    """Three runs a cell of ``expr`` over H x omega (the levels above), noise ``cv``."""
    form = Form("truth", expr, ("H", "omega"))
    return runs_from_form(form, constants, {"H": H, "omega": OMEGA}, seeds=3, cv=cv, seed=seed)


# The over-training grid's defect (issue 62), made from a known truth: six levels of N at
# M = 20 and one cell off that level, the smallest N at M = 320
ONE_OFF = Form("mine", "E + A*(N/1e8)**-0.3*(M/20)**-0.1", ("N", "M"))
ONE_OFF_TRUTH = {"E": 2.0, "A": 1.5}
ONE_OFF_N = (1e7, 3e7, 1e8, 3e8, 1e9, 3e9)


def one_off_runs(m_levels: Sequence[float] | None = None) -> pd.DataFrame:
    """Two runs a cell of :data:`ONE_OFF`: over N x ``m_levels`` (a grid that can decide),
    or by default the six N at M = 20 and one cell at (the smallest N, M = 320)."""
    levels = {"N": ONE_OFF_N, "M": m_levels or (20,)}
    runs = runs_from_form(ONE_OFF, ONE_OFF_TRUTH, levels, seeds=2, cv=0.003, seed=1)
    if m_levels is not None:
        return runs
    off = runs_from_form(ONE_OFF, ONE_OFF_TRUTH, {"N": ONE_OFF_N[:1], "M": (320,)}, seeds=2,
                         cv=0.003, seed=2)  # fmt: skip
    return pd.concat([runs, off], ignore_index=True)
