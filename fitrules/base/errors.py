"""Exceptions for bad input; each message names the bad value and what is allowed.

The CLI turns any :class:`FitrulesError` into one line on stderr and exit status 2. A
message names a parameter with :func:`param`: ``str(err)`` says the parameter (``where``) to
a Python caller and the running command's flag for it (``--where``) on the command line.
Messages still written with flags are put in parameter words by :func:`api_terms`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class FitrulesError(Exception):
    """Base class of every error that reports bad input rather than a bug.

    ``fixes``: the command-line options that would take this refusal away, each a
    ``(flag, value)`` pair (value None for a switch), when the refusal knows them; the
    command line then tries them in turn so that one message lists every option a table
    needs (:func:`fitrules.cli.io.load`)."""

    fixes: tuple[tuple[str, str | None], ...] = ()

    def __str__(self) -> str:
        return in_words(super().__str__())


def with_fixes(err: FitrulesError, *fixes: tuple[str, str | None]) -> FitrulesError:
    """``err`` with the options that would take it away (see :class:`FitrulesError`)."""
    err.fixes = tuple(fixes)
    return err


class GridError(FitrulesError, ValueError):
    """A results table cannot be read or does not have the required shape."""


class FormError(FitrulesError, ValueError):
    """A candidate form's expression or constants are invalid."""


class ExpressionError(FormError):
    """An expression cannot be parsed or uses something outside the allowed grammar."""


class SplitError(FitrulesError, ValueError):
    """The requested splits cannot be made from the grid."""


class SelectionError(FitrulesError, ValueError):
    """A baseline / treatment selection does not match the grid."""


class SimError(FitrulesError, ValueError):
    """A simulation spec or request is invalid."""


class TheoryError(FitrulesError, ValueError):
    """A setting of :mod:`fitrules.sim.theory` is out of range, or a run it does not cover."""


class ReportError(FitrulesError):
    """A report, JSON file or other output cannot be written where asked."""


class LedgerError(FitrulesError):
    """A predictions ledger is malformed or was tampered with."""


class SavedFitError(FitrulesError, ValueError):
    """A saved fit (``FittedForm.to_json``) cannot be loaded: the file cannot be read, is
    malformed (a key missing, a value of the wrong type, a number not finite), or is not the
    fit its data makes again.

    Its message names the file's keys, which are the fit's parameters' names, so it reads
    the same on both faces (``call.level``, never a command's flag)."""

    def __str__(self) -> str:
        return in_api_terms(_MARK.sub(r"\1", Exception.__str__(self)))


class LimitError(FitrulesError, ValueError):
    """A request exceeds a documented size limit (see :mod:`fitrules.base.limits`)."""


class UsageError(FitrulesError):
    """The command line itself is malformed (unknown option, missing value, bad type)."""


# ---------------------------------------------------------------- the words of an error
# the command line's flag of each parameter while it runs a command (None: a Python caller)
_flags: ContextVar[dict[str, str] | None] = ContextVar("fitrules_flags", default=None)
_MARK = re.compile("\ue000([a-z][a-z0-9_]*)\ue001")  # private-use characters: never typed
# options whose parameter is not the option's name with '_' for '-'
_PARAMETERS = {
    "data": "grid",
    "fit-data": "grid",
    "fit": "saved_fit",
    "test-data": "test_grid",
    "form": "forms",
    "at": "predict",
    "treatment-sweep": "sweep",
    "bootstrap-seed": "seed",
    "design-splits": "splits",
    "figure-format": "figure_format",
    "bound": "bounds",
    "constraint": "constraints",
}
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def param(name: str) -> str:
    """The parameter ``name`` in a message: ``f"{param('splits')} {n}: must be >= 1"`` reads
    ``splits 0: ...`` in Python and ``--splits 0: ...`` (or the command's flag) on the
    command line."""
    return f"\ue000{name}\ue001"


def in_words(message: str, flags: Mapping[str, str] | None = None) -> str:
    """``message`` with each :func:`param` as its flag in ``flags`` (default: the running
    command's, see :func:`command_line`), or as the parameter's name for a Python caller."""
    flags = _flags.get() if flags is None else flags
    if flags is None:
        return _MARK.sub(r"\1", message)
    # a parameter the command does not declare: the flag an Option makes from its name
    return _MARK.sub(lambda m: flags.get(m[1]) or "--" + m[1].replace("_", "-"), message)


@contextmanager
def command_line() -> Iterator[dict[str, str]]:
    """Within the block errors name command-line options (the CLI's ``main``); it fills the
    dictionary yielded with the running command's flags (parameter -> flag) once parsed."""
    flags: dict[str, str] = {}
    token = _flags.set(flags)
    try:
        yield flags
    finally:
        _flags.reset(token)


def in_api_terms(message: str) -> str:
    """``"--where 'x >': cannot parse"`` -> ``"where 'x >': cannot parse"``."""
    return _OPTION.sub(lambda m: _PARAMETERS.get(m[1], m[1].replace("-", "_")), message)


@contextmanager
def report_parameter(name: str) -> Iterator[None]:
    """Within the block a :class:`ReportError` naming the parameter ``report`` names the
    parameter ``name`` instead, unless the command line is running (a result's
    ``report(target)``)."""
    try:
        yield
    except ReportError as err:
        text = Exception.__str__(err)  # with its marks
        if _flags.get() is not None or param("report") not in text:
            raise
        raise type(err)(text.replace(param("report"), name)) from None


def api_terms(func: F) -> F:
    """Re-raise a :class:`FitrulesError` from ``func`` with parameter names for options,
    unless the command line is running."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FitrulesError as err:
            if _flags.get() is not None:
                raise
            text = str(err)
            new = in_api_terms(text)
            if new == text:
                raise
            raise type(err)(new) from None

    return wrapper  # type: ignore[return-value]
