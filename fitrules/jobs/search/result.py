"""The Search result: the tables a search found, and its views (text, JSON, HTML, the front
figure, a report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fitrules.base.results import Result
from fitrules.engine.grammar import Grammar
from fitrules.jobs.reports import report_target
from fitrules.jobs.result_docs import figure_doc, view
from fitrules.model.forms import Form


@dataclass
class Search(Result, text=view("search.render_search"), html=view("html.search_html")):
    """What :func:`run_search` found; every view renders these tables.

    Attributes
    ----------
    grid_label : str
        Where the grid came from, for messages.
    grammar : Grammar
        The grammar the candidates were proposed from.
    settings : dict
        The search's settings (splits, seeds, rule, budgets grown, ...).
    candidates : DataFrame
        One row per fitted candidate: name, expression, constants, how often the
        unrestricted procedure picked it across outer splits and its median outer error in
        those splits, and its own median outer error over all outer splits (descriptive:
        never a selection criterion).
    budgets : DataFrame
        One row per budget (at most k constants): the procedure's outer error (median,
        trimmed mean, p90 over outer splits), the winners' median inner error, the optimism
        (outer / inner), the most-picked form and its share, the form picked from all cells,
        and whether the budget is on the Pareto front.
    choices : DataFrame
        One row per (budget, outer split): the form picked, its inner and outer error.
    references : DataFrame
        One row per reference form: its outer error on the same outer splits and how often
        the unrestricted procedure's pick beat it.
    pruned : dict of str to int
        Why candidates were dropped before the nested fits, with counts.
    dropped : DataFrame
        One row per dropped candidate: name, expression, reason.
    n_generated : int
        Candidates the grammar proposed.
    forms : dict of str to Form
        The forms of the candidates kept for the nested fits, by name.
    seconds : float
        Wall time of the search.
    warnings : list of str
        One-line warnings about the search.
    pick_guard : dict
        The wild-extrapolation guard's verdict on the pick at the points of ``at``.
    abstention : dict
        Whether the search abstains (``abstains``: the runs cannot rank the forms the
        question needs, :mod:`fitrules.jobs.search.abstention`), why (``unchecked``: each
        variable no split checks, with its values; ``size``: a pick's size set by the
        split), and the user's forms fitted on all cells (``forms``) with the one
        recommended (``recommended``).
    reference_forms : dict of str to Form
        The reference forms (``references``, ``--form``), by name.
    """

    grid_label: str
    grammar: Grammar
    settings: dict
    candidates: pd.DataFrame
    budgets: pd.DataFrame
    choices: pd.DataFrame
    references: pd.DataFrame
    pruned: dict[str, int]
    dropped: pd.DataFrame
    n_generated: int
    forms: dict[str, Form]
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    pick_guard: dict = field(default_factory=dict)
    abstention: dict = field(default_factory=dict)
    reference_forms: dict[str, Form] = field(default_factory=dict)

    @property
    def front(self) -> pd.DataFrame:
        return self.budgets[self.budgets["on_front"]]

    @property
    def best(self) -> pd.Series:
        """The budget on the front with the lowest outer error (the front's last)."""
        b = self.budgets
        return b[b["max_constants"] == self.settings["best_budget"]].iloc[0]

    @property
    def chosen(self) -> Form | None:
        """The form the procedure picks from all cells at the best budget on the front (None
        if every candidate failed there, or if the search abstains: :attr:`abstention`)."""
        if self.abstention.get("abstains"):
            return None
        name = self.best["final_choice"]
        # a budget without a final choice holds None (NaN once pandas mixes it with names)
        return self.forms[name] if isinstance(name, str) else None

    @property
    def recommended(self) -> Form | None:
        """When the search abstains, the user's form it recommends (the first given whose fit
        on all cells is well posed), else None."""
        name = self.abstention.get("recommended")
        return self.reference_forms[name] if name else None

    def forms_toml(self) -> str:
        """The front's forms as ``forms.toml`` entries ready for ``compare``."""
        from fitrules.views.search import forms_toml

        return forms_toml(self)

    def to_dict(self) -> dict:
        from fitrules.views.search import search_dict

        return search_dict(self)

    def to_json(self, path: str | Path | None = None) -> str | None:
        """The JSON text of :meth:`to_dict`; with ``path``, written there instead.

        Parameters
        ----------
        path : str or path, optional
            The file to write.

        Returns
        -------
        str or None
            The JSON text; None when it was written to ``path``.
        """
        import json

        from fitrules.base.util import json_ready

        text = json.dumps(json_ready(self.to_dict()), indent=2)
        if path is not None:
            from fitrules.base.outputs import inputs_of, write_text

            write_text(Path(path), text + "\n", "path", inputs=inputs_of(self))
            return None
        return text

    def __repr__(self) -> str:
        picked = self.chosen.expression if self.chosen is not None else None
        return (
            f"Search({self.grid_label}: {len(self.candidates)} candidates fitted of "
            f"{self.n_generated} proposed; picked {picked!r})"
        )

    @figure_doc
    def plot_front(self, ax=None, labels=None, units=None):
        """Outer held-out error against the number of constants: the search at each budget,
        its front, every candidate and the references.

        Parameters
        ----------
        labels : dict or str, optional
            Taken as by the other results' ``plot_*`` (this figure's axes name no column).
        units : dict or str, optional
            Taken as by the other results' ``plot_*``.
        """
        from fitrules.views.figures import axis_labels
        from fitrules.views.search import plot_front

        with axis_labels(labels, units):
            return plot_front(self, ax)

    def report(self, path: str | Path, command: str | None = None, force: bool = False) -> Path:
        from fitrules.views.search import write_search_report

        with report_target(self, path, "path") as target:
            return write_search_report(self, target, command, force)
