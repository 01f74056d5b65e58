"""Plain-text views for the terminal: the names the rest of fitrules imports from here, made by
one module per result family (``text_compare``, ``text_fit``, ``text_grid``, ``text_ci``,
``text_ledger``) from the pieces they share (``text_parts``)."""

from __future__ import annotations

from fitrules.views.text_ci import render_ci
from fitrules.views.text_compare import (
    conclusion,
    guard_line,
    heldout_definition,
    paired_heading,
    protocol_line,
    rank_value,
    render_comparison,
    verdict_of,
    verdict_sentence,
    worst_notes,
)
from fitrules.views.text_fit import (
    information_line,
    prediction_line,
    render_fitted,
    render_form,
    render_forms,
    uncertainty_lines,
)
from fitrules.views.text_grid import render_summary, render_tuning
from fitrules.views.text_ledger import render_coverage, render_scored_pairs, render_scores
from fitrules.views.text_parts import data_line, fmt_p, table, table_notes

__all__ = [
    "conclusion",
    "data_line",
    "fmt_p",
    "guard_line",
    "heldout_definition",
    "information_line",
    "paired_heading",
    "prediction_line",
    "protocol_line",
    "rank_value",
    "render_ci",
    "render_comparison",
    "render_coverage",
    "render_fitted",
    "render_form",
    "render_forms",
    "render_scored_pairs",
    "render_scores",
    "render_summary",
    "render_tuning",
    "table",
    "table_notes",
    "uncertainty_lines",
    "verdict_of",
    "verdict_sentence",
    "worst_notes",
]
