"""The base layer's helpers: JSON floats that do not follow the last digit, the progress bar
that counts splits at the mean rate."""

from __future__ import annotations

import numpy as np
import pytest


def test_progress_bar_uses_the_mean_rate():
    """The ETA is the mean rate since the start (smoothing 0), so unequal pieces of work
    (forms of unequal cost, the verdict's fits) do not swing it; the bar counts splits."""
    from fitrules.base.util import split_progress

    with split_progress(300, 12, "fitting 6 forms", True) as step:
        bar = step.bar
        assert bar.smoothing == 0 and bar.total == 300
        for _ in range(6 * 2):
            step(300)  # a form's 300 fits of one pass
        assert bar.n == pytest.approx(300)


def test_json_floats_do_not_change_with_the_last_digit():
    """Another BLAS changes the last of a float's 17 digits; reports must not follow it."""
    from fitrules.base.util import json_ready

    for x in (0.06698664605963957, 2.1397175121455803, 665669.6759764799, 1e-7 / 3):
        assert json_ready(x) == json_ready(float(np.nextafter(x, np.inf)))
        assert json_ready(x) == pytest.approx(x, rel=1e-11)
