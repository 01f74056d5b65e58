"""Documented size limits, and the memory check made before anything large is allocated.

Every limit here is far above real use (the default grid at 10,000 splits, a few hundred
bootstrap resamples, forms with two or three exponents, simulations at width 256) and far
below what would exhaust a laptop: a request beyond one is refused with one line naming the
option, the value and the limit, before any work is done. A request within the limits whose
estimated memory exceeds :func:`memory_budget` is refused the same way.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

from fitrules.base.errors import LimitError

# compare
MAX_SPLITS = 100_000  # random splits per protocol; the default grid at 10,000 takes ~40 s
# bootstrap refits (fit --intervals, predict): each resample is one full fit
MAX_BOOTSTRAP_RESAMPLES = 100_000
# the bootstrap kinds (see fitrules.engine.intervals), here so that the command line's parser can
# list them without importing numpy; the default's coverage is measured in
# benchmarks/bench_intervals.py (section 2)
BOOTSTRAP_KINDS = ("studentized", "auto", "seeds", "residuals")
DEFAULT_BOOTSTRAP = "studentized"
BOOTSTRAP_RESAMPLES = 200  # a fit's bootstrap, by default
# defaults several layers share, here so that each is written once (fitrules.jobs.options
# declares the commands' options from them without importing numpy)
LEVEL = 0.95  # of intervals and tests
OBJECTIVES = ("rel_ls", "log_huber", "abs_ls")  # training objectives; the first is the default
HUBER_DELTA = 1e-3  # of log_huber
WEIGHTS = ("cells", "runs", "inverse-variance")  # how cells count; the first is the default
SEED_PROTOCOLS = ("cells", "cells-and-seeds")  # what a held-out error holds out
# how a split's held-out cells count in its error: by their share of the grid's box (the
# trapezoid rule: half on an edge of each variable, a quarter at a corner), or each once
HELDOUT_WEIGHTS = ("box", "equal")
RANDOM_SPLITS = 300  # random splits compare makes when none is given
RANDOM_TRAIN_FRAC = Fraction(1, 3)  # of the cells, fitted in each of them
VERDICT_TRAIN_FRAC = 0.9  # of the cells, fitted in each of the paired verdicts' splits
# the wild-extrapolation guard's thresholds (fitrules.engine.guard)
GUARD_SPAN = 20.0
GUARD_SE = 1.0
GUARD_EXCURSION = 10.0
# ci: resamples of the BCa bootstrap over paired seeds (drawn in bounded batches)
MAX_CI_RESAMPLES = 1_000_000
# forms
MAX_CONSTANTS = 32  # constants of one form
MAX_NONLINEAR = 8  # nonlinear constants (searched on a grid, then refined)
MAX_EXPRESSION_CHARS = 5_000  # characters of one expression (form, --derive, --where)
MAX_EXPRESSION_DEPTH = 50  # nesting of the parsed expression (a sum of 50 terms is depth 50)
# values: the metric and every variable a form reads must lie within +-MAX_ABS_VALUE, so that
# squares and products of a few of them stay finite in double precision
MAX_ABS_VALUE = 1e100
MAX_SEED = 2**63 - 1  # seeds are non-negative 64-bit integers
# simulate
MAX_SIM_RUNS = 100_000  # runs of one spec (factor levels x seeds)
MAX_SIM_JOBS = 256  # worker processes
# one run's estimated time on one core (a quadratic run is estimated from the coordinate
# updates it draws, fitrules.sim.quadratic.QuadConfig.seconds): the committed grids' runs take
# seconds; a run of hours is a typo in rounds, dim or M, refused before it starts
MAX_SIM_RUN_SECONDS = 60 * 60
SIM_INT_LIMITS = {  # largest value of each integer setting of a run
    "M": 1_024,
    "H": 1_000_000,
    "steps": 1_000_000,
    "batch": 16_384,
    "width": 16_384,
    "embed": 4_096,
    "context": 1_024,
    "eval_windows": 10_000_000,
}
# search: candidates of one grammar (each is made and pruned, then screened or fitted on every
# nested mask; making 20,000 takes a few seconds, and a search of more is staged), and the
# estimated time above which a search runs only when confirmed (--yes; yes=True from Python)
MAX_SEARCH_CANDIDATES = 60_000
SEARCH_TIME_BUDGET_SECONDS = 15 * 60
# input files read whole (grammar, forms.toml, specs, ledgers' sidecars): far above any real
# one; TOML and JSON nesting deeper than this is refused before the parser recurses
MAX_INPUT_BYTES = 16 * 2**20
MAX_INPUT_DEPTH = 64
# results tables: bytes of text after decompression (a gzip table is counted while streaming)
MAX_TABLE_BYTES = 2**30
# memory: never plan to use more than this, nor more than the memory available now
MEMORY_CAP_BYTES = 8 * 2**30


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation now, if the system says (else None)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget() -> int:
    """The most a single request may plan to allocate: the cap, or less if less is free."""
    free = available_memory()
    return MEMORY_CAP_BYTES if free is None else min(MEMORY_CAP_BYTES, free)


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def check_memory(estimate: float, what: str, hint: str = "") -> None:
    """Refuse ``what`` if its estimated memory ``estimate`` (bytes) exceeds the budget.

    Raises
    ------
    LimitError
        Naming the request, its estimate, the budget and, if given, what to reduce.
    """
    budget = memory_budget()
    if not math.isfinite(estimate) or estimate > budget:
        shown = "an unbounded amount" if not math.isfinite(estimate) else _gib(estimate)
        raise LimitError(
            f"{what} would need about {shown} of memory, more than the {_gib(budget)} "
            f"allowed (the lesser of {_gib(MEMORY_CAP_BYTES)} and the memory free now)"
            + (f"; {hint}" if hint else "")
        )


def check_count(value: int, option: str, low: int, high: int, why: str = "") -> int:
    """``value`` as an int in ``[low, high]``, or a :class:`LimitError` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{option} {value!r}: must be an integer from {low:,} to {high:,}")
    if not low <= value <= high:
        raise LimitError(
            f"{option} {value:,}: must be from {low:,} to {high:,}" + (f" ({why})" if why else "")
        )
    return value


def check_seed(value: int, option: str) -> int:
    """A seed: an integer from 0 to 2**63 - 1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise LimitError(f"{option} {value!r}: a seed must be an integer from 0 to 2**63 - 1")
    return value
