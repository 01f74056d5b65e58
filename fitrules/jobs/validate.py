"""Check a results grid and summarise it: what ``fr.validate`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fitrules.base.results import Result
from fitrules.engine.stats import grid_seed_effect
from fitrules.model.grids import Grid


@dataclass
class Validation(Result):
    """A grid checked and summarised.

    Attributes
    ----------
    grid : the grid checked (after tuning, when it was tuned).
    facts : runs, cells, levels per factor, seeds per cell, excluded rows, the columns left
        out or pooled, and the per-seed effect shared across cells (None when none shows).
    tuning : the :class:`fitrules.jobs.tune.Tuning` applied first, if any.
    """

    grid: Grid
    facts: dict
    tuning: Any = None
    inputs: list[Path] = field(default_factory=list, repr=False)

    def text(self) -> str:
        from fitrules.views.text import render_summary, render_tuning

        text = render_summary(self.facts)
        return text if self.tuning is None else render_tuning(self.tuning) + "\n\n" + text

    def to_dict(self) -> dict:
        if self.tuning is None:
            return dict(self.facts)
        return self.facts | {"tuning": self.tuning.to_dict()}

    def __repr__(self) -> str:
        f = self.facts
        return f"Validation({f['path']}: {f['runs']} runs in {f['cells']} cells)"


def validate(grid: Grid, tuning=None) -> Validation:
    """Check ``grid`` as ``compare`` would (seed ids that mean one thing in every cell)
    and summarise it, with the per-seed effect shared across its cells."""
    grid.check_seeds()  # what compare refuses, validate refuses
    facts = grid.summary() | {"seed_effect": grid_seed_effect(grid)}
    inputs = [Path(grid.input_file)] if grid.input_file is not None else []
    return Validation(grid, facts, tuning, inputs)
