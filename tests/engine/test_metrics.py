"""Held-out error metrics: box weights of held-out cells (issue 42, item 5)."""

from __future__ import annotations

import numpy as np
import pytest

from fitrules.base.errors import FitrulesError
from fitrules.engine.metrics import box_weights, heldout_errors


def _grid(h_levels, o_levels):
    h, o = np.meshgrid(np.asarray(h_levels, float), np.asarray(o_levels, float), indexing="ij")
    return {"H": h.ravel(), "omega": o.ravel()}


def test_box_weights_halve_each_edge_and_quarter_the_corners():
    """A cell on an edge of one variable counts half, on edges of two (a corner) a quarter."""
    X = _grid([1, 4, 16, 64], [0, 1, 3])
    w = box_weights(X).reshape(4, 3)
    assert w[1, 1] == w[2, 1] == 1.0
    assert w[0, 1] == w[3, 1] == w[1, 0] == w[2, 2] == 0.5
    assert w[0, 0] == w[0, 2] == w[3, 0] == w[3, 2] == 0.25


def test_equal_heldout_weights_count_every_cell_once():
    """``equal`` gives every cell weight 1, whatever the design."""
    assert (box_weights(_grid([1, 2, 4], [0, 1]), "equal") == 1).all()


def test_a_variable_with_one_value_or_no_numbers_weighs_every_cell_alike():
    """One value is its own edge in every cell, and a categorical column has no box: neither
    changes the relative weights."""
    X = _grid([1, 2, 4], [0, 1, 3])
    w = box_weights(X)
    flat = box_weights({**X, "width": np.full(9, 64.0)})
    assert np.allclose(flat / flat.sum(), w / w.sum())
    named = box_weights({**X, "opt": np.array(["adam"] * 9, object)})
    assert np.allclose(named, w)


def test_unknown_heldout_weights_are_refused_with_the_allowed_values():
    """A kind that is neither box nor equal is one line naming both."""
    allowed = "^heldout_weights 'trapezoid' is unknown; allowed: box, equal"
    with pytest.raises(FitrulesError, match=allowed):
        box_weights(_grid([1, 2], [0, 1]), "trapezoid")


def test_box_weighted_error_is_the_mean_over_the_box_for_an_error_linear_in_each_variable():
    """The trapezoid rule is exact for an error linear in each variable on evenly spaced
    levels: the box-weighted mean over the cells is the error's mean over the whole box,
    where the equal mean over-counts the edges (the reason for the weights)."""
    X = _grid(np.log2([1, 4, 16, 64]), [0, 1, 2, 3, 4])
    rel = 0.01 * (X["H"] / 6 + X["omega"] / 8)  # 0 at the low corner, 0.015 at the high one
    y = np.ones_like(rel)
    want = 100 * 0.01 * (0.5 + 0.25)  # the mean of a linear function over the box
    box = heldout_errors(y, y + rel, box_weights(X))["heldout_error"]
    equal = heldout_errors(y, y + rel)["heldout_error"]
    assert box == pytest.approx(want, rel=1e-12)
    assert equal == pytest.approx(want, rel=1e-12)  # linear and symmetric: both exact here
    # a convex error (largest at the edges, as a form's misfit is) is over-counted equally
    rel = 0.01 * ((X["H"] / 6 - 0.5) ** 2 + (X["omega"] / 4 - 0.5) ** 2)
    truth = 100 * 0.01 * (1 / 12 + 1 / 12)  # the mean of (u - 1/2)^2 over [0, 1], twice
    box = heldout_errors(y, y + rel, box_weights(X))["heldout_error"]
    equal = heldout_errors(y, y + rel)["heldout_error"]
    assert abs(box - truth) < abs(equal - truth)
