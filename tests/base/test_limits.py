"""The documented limits (fitrules.base.limits) and what the default grid needs of them."""

from __future__ import annotations

from conftest import DATA


def test_the_default_grid_at_ten_thousand_splits_is_within_the_limits():
    """10,000 random splits are allowed; the default forms' fits on 20 cells need under 1 GiB."""
    from fitrules.engine.fit import fit_memory
    from fitrules.model.forms import BUILTIN_FORMS, DEFAULT_FORMS
    from fitrules.model.splits import RandomSplit

    RandomSplit(10_000)  # accepted
    worst = max(fit_memory(BUILTIN_FORMS[f], 20, 10_000) for f in DEFAULT_FORMS)
    assert worst < 2**30  # well inside the cap
    assert (DATA / "main.csv").exists()


def test_limits_are_documented():
    """fitrules.base.limits documents the 10,000-split limit and holds its limits as integers."""
    from fitrules.base import limits

    doc = limits.__doc__ or ""
    assert "10,000 splits" in doc
    for name in ("MAX_SPLITS", "MAX_BOOTSTRAP_RESAMPLES", "MAX_CI_RESAMPLES", "MAX_NONLINEAR"):
        assert isinstance(getattr(limits, name), int)
