"""The view protocol a result follows: its text, its HTML and its JSON from two methods.

A result says what it is in words (:meth:`Result.text`) and as data (:meth:`Result.to_dict`);
``print(r)``, ``r.summary()``, a notebook's HTML and ``r.to_json(path)`` follow from them
(statsmodels' ``results.summary()``, lmfit's ``fit_report()``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fitrules.base.util import Text, json_ready


def made_from(result, *sources):
    """Record on ``result`` the files it was made from, which none of its writers may replace
    (:func:`fitrules.base.outputs.inputs_of`); return ``result``.

    ``sources`` are grids (anything with a ``path``, None for a table given as a DataFrame),
    paths, or None; every job's result goes through here, and a test walks every result
    class to check that its writers refuse its inputs.
    """
    paths = [Path(os.path.abspath(p)) for p in getattr(result, "inputs", ()) or ()]
    for src in sources:
        # a grid's ``source`` is the file read; its ``path`` is a label for messages, only the
        # file's name when it lies outside the working directory (a result written over its
        # own table there was not refused)
        path = getattr(src, "source", None) or getattr(src, "path", src)
        # absolute now: a relative path would name another file once the working directory
        # changes (a notebook's os.chdir), and the refusal would silently stop applying
        if path is not None and str(path).strip():
            path = Path(os.path.abspath(path))
            if path not in paths:
                paths.append(path)
    object.__setattr__(result, "inputs", paths)  # set once, at its making, frozen or not
    return result


class Views:
    """What every result renders from :meth:`text` and :meth:`to_dict`: ``print``, HTML
    in a notebook, ``to_json``. :class:`Result` adds ``summary()``; a result whose
    ``summary`` is a table of its own (``Comparison``) takes these alone.

    ``inputs`` are the files the result was made from (see :func:`made_from`): its writers
    refuse to replace them, directly or through a link.

    A subclass may give in its class line the functions that make its :meth:`text` and
    :meth:`html` from it: ``class Tuning(Result, text=render, html=as_html)``."""

    inputs: list[Path] = []  # noqa: RUF012 - read only; made_from sets a list per result

    def __init_subclass__(cls, text=None, html=None, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, view in (("text", text), ("html", html)):
            if view is not None:
                setattr(cls, name, _rendering(cls, name, view))

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

    def to_json(self, path=None) -> str | None:
        """The JSON text of :meth:`to_dict`; with ``path``, written there instead (atomically,
        never over one of the files the result was made from) and None returned, so that a
        notebook cell that saves prints nothing."""
        from fitrules.base.outputs import inputs_of
        from fitrules.base.util import atomic_write_text

        text = json.dumps(json_ready(self.to_dict()), indent=1, allow_nan=False) + "\n"
        if path is not None:
            atomic_write_text(Path(path), text, "path", inputs=inputs_of(self))
            return None
        return text


class Result(Views):
    """Base of a job's result: subclasses give :meth:`text` and :meth:`to_dict`."""

    def summary(self) -> Text:
        """The whole result in words (the same as ``str(self)``); in a notebook it shows
        as text."""
        return Text(self.text())


def _rendering(cls: type, name: str, view):
    """The method ``name`` of ``cls`` that returns ``view(result)``."""

    def method(self) -> str:
        return view(self)

    method.__module__, method.__name__ = cls.__module__, name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method
