"""What a fit is asked and what it returns: the search settings and one fit's result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class FitOptions:
    """Search settings: grid points per nonlinear dimension and polished starts per split."""

    grid_points: Sequence[int] = (121, 41, 17)  # for 1, 2, 3 nonlinear constants
    grid_points_high_dim: int = 4096  # quasi-random points for 4 or more
    n_starts: int = 2  # starts per split, from separate basins of the grid
    # starts shared out among the splits of a batch when that gives each more than
    # n_starts: a fit on all cells polishes 64 starts, which multi-basin laws need
    # (Muennighoff's data-constrained law has four local optima on its grid)
    start_budget: int = 64
    start_cells: int = 20_000  # ... as long as starts x training cells stay within this
    resolution: float = 1e-6  # local refinement stops at this fraction of the start range
    max_rounds: int = 80  # local refinement rounds, counting moves of the window
    lm_iterations: int = 200  # Levenberg-Marquardt iterations; a row still moving is flagged
    huber_iterations: int = 800  # the same for log-Huber, whose kinks slow the last steps
    chunk_splits: int = 512  # splits fitted together; bounds memory at any number of splits


@dataclass
class FitResult:
    """One fit of a form on one set of training cells, with its diagnostics.

    Attributes
    ----------
    constants : fitted value of each constant.
    objective : training objective at the fit.
    converged : the optimiser reported convergence.
    reasons : why the constants may not be identified; empty when the fit is well posed.
    cond : condition number of the column-scaled Jacobian at the fit.
    """

    form: str
    constants: dict[str, float]
    objective: float
    n_train: int
    converged: bool
    cond: float
    reasons: list[str] = field(default_factory=list)

    @property
    def degenerate(self) -> bool:
        return bool(self.reasons)
