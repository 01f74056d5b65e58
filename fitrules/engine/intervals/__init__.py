"""Uncertainty of a fit on all cells: Jacobian standard errors, bootstrap intervals and
prediction intervals with the form's misfit.

Every answer is labelled with how it was made. The modules, each importing only those
before it in this list:

- ``jacobian``: standard errors and correlations of the constants, ``s^2 (J'J)^-1`` at the
  fit (Huber's sandwich factor for ``log_huber``), and the delta method for a prediction;
- ``points``: a point to predict at, parsed, resolved to the form's variables and checked;
- ``noise``: the seed noise of one run, and cells reduced robustly for ``log_huber``;
- ``bootstrap``: intervals from refits of resampled data (the kinds ``studentized``,
  ``seeds``, ``residuals`` and ``auto`` are described there);
- ``offset``: the grid's seed offset, the effect its seed ids share across cells;
- ``design``: positions in design steps and the cells' weights about a point;
- ``misfit``: the local misfit, the lean of the fit's residuals about a point;
- ``extrapolation``: how fast the misfit grows beyond the fitted cells;
- ``prediction``: :class:`HeldOut`, the prediction intervals assembled from those terms;
- ``heldout``: the leave-one-cell-out and leave-edge-out refits a :class:`HeldOut` holds.
"""

from fitrules.engine.intervals.bootstrap import BootstrapFit, bootstrap_fit, check_bootstrap_options
from fitrules.engine.intervals.heldout import heldout_fit
from fitrules.engine.intervals.jacobian import (
    JacobianUncertainty,
    _huber_scale2,
    jacobian_uncertainty,
)
from fitrules.engine.intervals.noise import robust_cells, seed_noise
from fitrules.engine.intervals.offset import (
    NO_SHARED_IDS,
    SeedOffset,
    no_offset_reason,
    offset_response,
    seed_offset,
)
from fitrules.engine.intervals.points import format_point, parse_point, resolve_point
from fitrules.engine.intervals.prediction import COVERS_GRID_SEEDS, HeldOut

__all__ = [
    "COVERS_GRID_SEEDS",
    "NO_SHARED_IDS",
    "BootstrapFit",
    "HeldOut",
    "JacobianUncertainty",
    "SeedOffset",
    "_huber_scale2",  # for fitrules.engine.profile's profile-likelihood scale
    "bootstrap_fit",
    "check_bootstrap_options",
    "format_point",
    "heldout_fit",
    "jacobian_uncertainty",
    "no_offset_reason",
    "offset_response",
    "parse_point",
    "resolve_point",
    "robust_cells",
    "seed_noise",
    "seed_offset",
]
