"""Fitting a form's constants to cells: the global optimum of the training objective.

For fixed values of the nonlinear constants, the constants that enter linearly solve a
weighted least-squares problem exactly (variable projection). The nonlinear constants
(usually one to three exponents) are searched on a grid shared by every split, so all splits
of a form are scored in a few array operations. From the best grid point of each separate
basin of each split:

- least-squares objectives refine the nonlinear constants on shrinking local grids (the
  linear ones re-solved exactly at every point), all splits at once;
- log-Huber, whose linear constants the projection only approximates, is finished by
  Levenberg-Marquardt on all constants, all splits at once.

A least-squares row whose window keeps moving (an optimum beyond the grid, a constant
running away) is finished by the same Levenberg-Marquardt, with the analytic Jacobian of the
parsed expression; a row that does not converge within its iterations is flagged. The
fit is then checked, again for all splits at once, for the ways its constants can fail to be
identified; those become named reasons, not errors.

The modules, each importing only those above it: ``objective`` (the training objective),
``weights`` (cell weights), ``options`` (search settings and a fit's result),
``projection`` (the linear constants solved exactly), ``search`` (grid, starts and local
refinement of the nonlinear constants), ``lm`` (Levenberg-Marquardt), ``diagnose`` (why
constants may not be identified), ``memory`` (a fit's peak memory), ``driver`` (the fit of
each split, and refits) and ``criteria`` (AIC, BIC, R^2).
"""

from fitrules.engine.fit.criteria import information_criteria
from fitrules.engine.fit.driver import fit, fit_splits, refit, value_scale
from fitrules.engine.fit.memory import fit_memory
from fitrules.engine.fit.objective import Objective
from fitrules.engine.fit.options import FitOptions, FitResult
from fitrules.engine.fit.weights import WEIGHT_KEY, cell_weights

__all__ = [
    "WEIGHT_KEY",
    "FitOptions",
    "FitResult",
    "Objective",
    "cell_weights",
    "fit",
    "fit_memory",
    "fit_splits",
    "information_criteria",
    "refit",
    "value_scale",
]
