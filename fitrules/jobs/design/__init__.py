"""Which runs to do next: cells that would tell rival forms apart, or pin one form down.

A verdict between forms is bounded by the cells already in the grid. This package ranks
candidate cells (by default the grid's levels and the geometric midpoints between them, for
every variable the forms read, minus the cells already run) by how well a few seeds there
would separate the forms, and picks a batch under a budget of runs.

Discrimination (two or more forms) follows the T-optimal idea (Atkinson and Fedorov, 1975):
if form T were the truth, how badly would its rival R fit after R is refitted to the grid
plus T's predictions at the new cells? The lack of fit at the new cells, in units of the
combined uncertainty, summed over ordered pairs, is the score. Because the rival is refitted,
a second cell in a region where the rival can bend adds less than the first: the batch is
chosen greedily, each cell given the ones already chosen.

Uncertainty at a cell: each form's prediction from the full-grid fit carries the larger of
(a) the spread of its refits over random splits (robust sd, scaled by n_train / n to the size
of the full grid) and (b) the sd of its seed-bootstrap refits (``sd_param_F``), and (c) the
form's misfit as held-out cells show it (leave-one-cell-out refits, ``sd_misfit_F``; see
:class:`fitrules.engine.intervals.HeldOut`); ``sd_F`` adds (c) to the larger of (a) and (b) in
quadrature: the sd of the prediction for the configuration's mean. No form is exactly true:
a pair's difference is judged against both forms' constants' uncertainty plus the misfit of
the better-fitting of the two (the truth lies about that far from its prediction, which may
put it midway between the two, where no number of runs separates them; the worse form's
misfit is what the runs are to show, not noise). The mean of n new seeds
carries the seed noise, modelled as a constant coefficient of variation pooled over the grid's
cells (a MAD of the runs' deviations, so that a corrupted run does not multiply it; see
:func:`fitrules.engine.intervals.seed_noise`). The seeds a cell needs are those that make the two
forms' difference exceed (z_alpha/2 + z_power) standard errors; where no number of seeds can
(the forms' own uncertainty is larger than the difference), the cell is planned with the
minimum ``seeds``, since more would not reach the power.

With one form and a target cell, cells are ranked by how much n seeds there would shrink the
delta-method variance of the prediction at the target; the batch again greedy.

Only the grid's cells are used: nothing here reads a value the design will later be scored
on (new cells are not in the grid; cells that are, when named, are flagged "in grid").
"""

from __future__ import annotations

from fitrules.jobs.design.job import check_design_options, design, design_forms
from fitrules.jobs.design.loop import batch_spec, loop_commands, no_spec_reason
from fitrules.jobs.design.result import Design

__all__ = [
    "Design",
    "batch_spec",
    "check_design_options",
    "design",
    "design_forms",
    "loop_commands",
    "no_spec_reason",
]
