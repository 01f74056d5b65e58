"""The held-out error metrics: each one's name, unit and per-cell error, declared once.

A result holds the metric it was scored in (:meth:`ErrorMetric.as_dict`), and its columns are
named without a unit (``median``, ``heldout_error``): views read the unit from the result.
Adding a metric is one entry in :data:`ERROR_METRICS`; the ``error_metric`` option lists the
names from here, and its help, its check and every view follow. The per-cell errors use only
``abs`` and arithmetic so that this module imports no numpy (the command line's parser reads
the names for ``--help``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fitrules.base.errors import FitrulesError, param


@dataclass(frozen=True)
class ErrorMetric:
    """How a held-out cell's error is measured.

    Parameters
    ----------
    name : str
        The ``error_metric`` option's value.
    unit : str or None
        What the numbers are in: ``"%"`` is written after them (``3.2%``), another unit after
        a space, an empty one not at all; None is the grid's value unit (its ``unit``, when
        known).
    quantity : str
        What is averaged over a split's held-out cells, in words (``|relative error|``);
        results print it.
    per_cell : callable
        ``per_cell(value, residual)``: a cell's error from its measured value and the
        prediction's residual (prediction minus value), before ``scale``. Errors of one split
        are averaged (weighted), then multiplied by ``scale``.
    scale : float
        The factor to the unit (100 for a percentage).
    """

    name: str
    unit: str | None
    quantity: str
    per_cell: Callable
    scale: float = 1.0

    def cells(self, value, prediction):
        """Each cell's error, in the metric's unit.

        Parameters
        ----------
        value : numpy.ndarray
            The cells' measured values.
        prediction : numpy.ndarray
            A form's predictions at the same cells.

        Returns
        -------
        numpy.ndarray
            ``scale * per_cell(value, prediction - value)``.
        """
        return self.scale * self.per_cell(value, prediction - value)

    def as_dict(self, value_unit: str | None = None) -> dict:
        """The metric as a result records it.

        Parameters
        ----------
        value_unit : str, optional
            The grid's value unit, the unit of a metric whose ``unit`` is None.

        Returns
        -------
        dict
            ``name``, ``unit`` and ``quantity``.
        """
        unit = self.unit if self.unit is not None else (value_unit or "")
        return {"name": self.name, "unit": unit, "quantity": self.quantity}


def _relative(value, residual):
    return abs(residual) / abs(value)


def _absolute(value, residual):
    return abs(residual)


ERROR_METRICS: dict[str, ErrorMetric] = {
    m.name: m
    for m in (
        ErrorMetric("relative", "%", "|relative error|", _relative, 100.0),
        ErrorMetric("absolute", None, "|error|", _absolute),
    )
}
DEFAULT_ERROR_METRIC = "relative"


def error_metric(name: str | ErrorMetric) -> ErrorMetric:
    """The metric called ``name`` (an :class:`ErrorMetric` is returned as it is).

    Parameters
    ----------
    name : str or ErrorMetric
        A name of :data:`ERROR_METRICS`, or a metric.

    Returns
    -------
    ErrorMetric
        The metric.

    Raises
    ------
    FitrulesError
        For a name :data:`ERROR_METRICS` does not hold.
    """
    if isinstance(name, ErrorMetric):
        return name
    if not isinstance(name, str) or name not in ERROR_METRICS:
        raise FitrulesError(
            f"{param('error_metric')} {name!r} is unknown; allowed: {', '.join(ERROR_METRICS)}"
        )
    return ERROR_METRICS[name]
