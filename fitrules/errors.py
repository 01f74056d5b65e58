"""Exceptions for bad input; each message names the bad value and what is allowed.

The CLI turns any :class:`FitrulesError` into one line on stderr and exit status 2.
"""


class FitrulesError(Exception):
    """Base class of every error that reports bad input rather than a bug."""


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


class ReportError(FitrulesError):
    """A report, JSON file or other output cannot be written where asked."""


class LedgerError(FitrulesError):
    """A predictions ledger is malformed or was tampered with."""


class LimitError(FitrulesError, ValueError):
    """A request exceeds a documented size limit (see :mod:`fitrules.limits`)."""


class UsageError(FitrulesError):
    """The command line itself is malformed (unknown option, missing value, bad type)."""


class DegenerateSplitWarning(RuntimeWarning):
    """Some (split, form) pairs could not identify the form's constants."""
