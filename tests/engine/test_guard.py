"""The guard on fits (fitrules.engine.guard): its reasons in words, never inf."""

from __future__ import annotations

import numpy as np

import fitrules as fr
from conftest import composition_grid


def test_an_overflowing_standard_error_is_not_printed_as_inf(monkeypatch):
    """(Moved from tests/test_round_two_minor.py.)"""
    # found by the long fuzz run (seed 2): the guard's reason read "standard error inf times"
    from fitrules.engine import guard
    from fitrules.engine.fit import Objective, fit_splits
    from fitrules.model.forms import BUILTIN_FORMS

    g = fr.load_grid(composition_grid())
    f = BUILTIN_FORMS["composition"].bind(g.columns)
    cells = g.cells(f.bound_variables)
    masks = np.ones((1, len(cells)), bool)
    fits = fit_splits(f, cells.X, cells.y, masks)
    rel_se = np.full((1, len(cells)), np.inf)
    rel_se[0, 0] = 0.1  # one finite, the others overflowed
    monkeypatch.setattr(guard, "_delta_rel_se", lambda *a: rel_se)
    (res,) = guard.check_fits(
        f, cells.X, cells.y, masks, fits, Objective(), guard.GuardOptions(20.0, 0.5, None)
    )
    text = "; ".join(res.reasons)
    assert "beyond any multiple of the prediction" in text and "inf" not in text
