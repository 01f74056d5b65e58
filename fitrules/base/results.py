"""The view protocol a result follows: its text, its HTML and its JSON from two methods.

A result says what it is in words (:meth:`Result.text`) and as data (:meth:`Result.to_dict`);
``print(r)``, ``r.summary()``, a notebook's HTML and ``r.to_json(path)`` follow from them
(statsmodels' ``results.summary()``, lmfit's ``fit_report()``).
"""

from __future__ import annotations

import json
from pathlib import Path

from fitrules.base.util import Text, json_ready


class Views:
    """What every result renders from :meth:`text` and :meth:`to_dict`: ``print``, HTML
    in a notebook, ``to_json``. :class:`Result` adds ``summary()``; a result whose
    ``summary`` is a table of its own (``Comparison``) takes these alone."""

    def text(self) -> str:
        """The result in words, as the command line prints it."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """The result as plain data (what :meth:`to_json` writes)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()

    def html(self) -> str:
        """The result as HTML for a notebook (default: its text, preformatted)."""
        return Text(self.text())._repr_html_()

    def _repr_html_(self) -> str:
        return self.html()

    def to_json(self, path=None) -> str:
        """The JSON text of :meth:`to_dict`; written to ``path`` too when given (atomically,
        never over one of the files the result was made from)."""
        from fitrules.base.outputs import inputs_of
        from fitrules.base.util import atomic_write_text

        text = json.dumps(json_ready(self.to_dict()), indent=1, allow_nan=False) + "\n"
        if path is not None:
            atomic_write_text(Path(path), text, "path", inputs=inputs_of(self))
        return text


class Result(Views):
    """Base of a job's result: subclasses give :meth:`text` and :meth:`to_dict`."""

    def summary(self) -> Text:
        """The whole result in words (the same as ``str(self)``); in a notebook it shows
        as text."""
        return Text(self.text())
