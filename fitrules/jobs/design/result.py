"""The :class:`Design` a design returns (candidates ranked, the batch chosen, the loop's
commands), and the options it is asked with, which it records as its settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fitrules.base.results import Result
from fitrules.base.util import json_ready
from fitrules.engine.fit import Objective
from fitrules.jobs.result_docs import view
from fitrules.model.forms import Form


@dataclass
class Design(Result, text=view("design.render_design"), html=view("html.design_html")):
    """Candidate cells ranked, and the batch chosen under the budget.

    Attributes
    ----------
    candidates : one row per candidate cell: its variables, ``in_grid``, each form's
        prediction and its sd (``pred_F``, ``sd_F``), the seed sd of one run ``seed_sd``,
        ``separation`` (largest pairwise difference in standard errors at ``seeds``
        seeds), ``seeds_needed`` (at the stated power) and ``score`` (the criterion of a
        batch of this cell alone).
    chosen : the batch, in the order chosen: cell, seeds, runs, the batch's score after
        adding it and the gain.
    commands : the commands that write each form's predictions for the chosen cells to a
        ledger, then run the cells.
    tuning : the :class:`~fitrules.jobs.tune.Tuning` that reduced the grid, or None.
    spec : the batch as a ``fitrules simulate`` spec (TOML), or None (``no_spec_reason``
        says why).
    """

    candidates: pd.DataFrame
    chosen: pd.DataFrame
    forms: list[Form]
    variables: tuple[str, ...]
    settings: dict
    data: dict
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    grid_cells: pd.DataFrame | None = None  # the cells already run, for figures
    tuning: Any = None  # the Tuning that reduced the grid, if any
    spec: str | None = None  # the batch as a simulate spec (TOML)
    no_spec_reason: str | None = None  # why there is none

    def __repr__(self) -> str:
        return (
            f"Design({', '.join(f.name for f in self.forms)}: {len(self.candidates)} "
            f"candidates, {len(self.chosen)} cells chosen)"
        )

    def plot(self, ax=None, labels=None, units=None):
        """The candidate plane: cells run, candidates by score, the batch chosen; returns the
        matplotlib Axes.

        ``labels`` (``{"N": "parameters"}`` or ``"N=parameters,D=tokens"``) names columns on the
        axes; ``units`` gives columns a unit (``{"loss": "nats"}``)."""
        from fitrules.views.design import design_figure
        from fitrules.views.figures import axis_labels

        with axis_labels(labels, units):
            return design_figure(self, ax=ax)

    def to_dict(self) -> dict:
        return json_ready(
            {
                "data": self.data,
                "settings": self.settings,
                "forms": [f.to_dict() for f in self.forms],
                "variables": list(self.variables),
                "chosen": self.chosen.to_dict("records"),
                "candidates": self.candidates.to_dict("records"),
                "commands": self.commands,
                "notes": self.notes,
            }
        )


@dataclass(frozen=True)
class _Asked:
    """A design's options: what it spends, at what power, how it measures uncertainty."""

    budget: int
    seeds: int
    max_seeds: int
    power: float
    alpha: float
    splits: int
    resamples: int
    seed: int
    target: str | None
    candidates: str | None
    objective: Objective

    def settings(self, cv: float, noise_method: str) -> dict:
        """The settings the design records, with the seed noise it planned against."""
        return {
            "mode": "discriminate" if self.target is None else "target",
            "budget": self.budget,
            "seeds": self.seeds,
            "max_seeds": self.max_seeds,
            "power": self.power,
            "alpha": self.alpha,
            "splits": self.splits,
            "resamples": self.resamples,
            "seed": self.seed,
            "seed_cv": cv,
            "seed_noise": noise_method,
            "candidates": self.candidates or "grid levels and geometric midpoints, minus cells run",
            "target": self.target,
            "objective": self.objective.describe(),
        }
