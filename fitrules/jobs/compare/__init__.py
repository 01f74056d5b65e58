"""Splits x forms -> a tidy table of held-out errors, per-form summaries and paired verdicts.

What a verdict may claim: random splits of one grid share cells, so they are not independent
samples. Paired verdicts over random splits use the corrected resampled t test (Nadeau and
Bengio, 2003), whose p-value does not shrink as splits are added; counts of splits won are
descriptive. Structured protocols are tested over their held-out groups, or say that too few
groups exist for any test to reject. Summaries are robust (median, trimmed mean, p90), and
fits that the wild-extrapolation guard names are shown with and without.

The package: :mod:`~fitrules.jobs.compare.job` (``compare``, run from here),
:mod:`~fitrules.jobs.compare.scoring` (the splits fitted and scored),
:mod:`~fitrules.jobs.compare.summaries`, :mod:`~fitrules.jobs.compare.verdicts` and
:mod:`~fitrules.jobs.compare.result` (the :class:`Comparison` and its views).
"""

from __future__ import annotations

from fitrules.jobs.compare.job import compare
from fitrules.jobs.compare.result import Comparison
from fitrules.jobs.compare.verdicts import check_verdict_train_frac, parse_pairs

__all__ = ["Comparison", "check_verdict_train_frac", "compare", "parse_pairs"]
