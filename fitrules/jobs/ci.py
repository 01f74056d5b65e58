"""Paired-seed intervals of treatments against a baseline, as a result: what ``fr.ci`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from fitrules.base.results import Result
from fitrules.engine.stats import PairedCI
from fitrules.jobs.reports import report_target
from fitrules.jobs.result_docs import figure_doc, report_doc, view


@dataclass
class PairedIntervals(Result, html=view("html.intervals_html")):
    """Paired-seed intervals of several treatments against one baseline: what ``fitrules.ci``
    returns.

    Attributes
    ----------
    results : list of PairedCI
        One :class:`fitrules.engine.stats.PairedCI` per treatment.
    data : dict
        Where the runs came from.
    settings : dict
        Level, resamples, seed, baseline.
    tuning : Tuning or None
        The :class:`fitrules.Tuning` applied first, if any.
    """

    results: list[PairedCI]
    data: dict
    settings: dict
    tuning: Any = None

    @property
    def table(self) -> pd.DataFrame:
        """One row per treatment: pairs, mean difference, intervals and p-values."""
        return pd.DataFrame([r.to_dict() for r in self.results]).drop(columns=["diffs"])

    def to_dict(self) -> dict:
        from fitrules.base.util import json_ready

        out = {
            "data": self.data,
            "settings": self.settings,
            "results": [dict(r.to_dict(), sentence=r.sentence()) for r in self.results],
        }
        if self.tuning is not None:
            out["tuning"] = self.tuning.to_dict()
        return json_ready(out)

    def text(self) -> str:
        from fitrules.views.text import render_ci

        return render_ci(self.results, self.to_dict())

    def __repr__(self) -> str:
        return f"PairedIntervals({'; '.join(r.sentence() for r in self.results)})"

    @figure_doc
    def plot(self, i: int = 0, ax=None, labels=None, units=None):
        """Per-seed differences of the ``i``-th treatment, its mean and intervals (Axes).

        Parameters
        ----------
        i : int, optional
            The position of the treatment in ``results`` (default 0).
        """
        from fitrules.views import figures

        with figures.axis_labels(labels, units):
            return figures.paired_differences(self.results[i], ax)

    @report_doc
    def report(self, target, force: bool = False, command: str = "", figure_format=None):
        """Write a report directory: report.md, one figure per treatment, results.json;
        figures as PNG and, with ``figure_format="png,svg"`` (or pdf), as vector files.
        """
        from fitrules.views.markdown import ci_report

        with report_target(self, target, "target", figure_format) as path:
            payload = self.to_dict() | {"command": command}
            return ci_report(self.results, payload, path, command, force, self.tuning)
