"""Where a result's ``report`` writes: the target checked against the result's inputs, and
while it writes, errors naming the parameter and the figures' formats and axis names set."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def report_target(
    result,
    target,
    name: str = "target",
    figure_format: str | Sequence[str] | None = None,
    labels: str | dict | None = None,
) -> Iterator[Path]:
    """The report directory ``target`` as a Path, refused first when it would replace one of
    the files ``result`` was made from; within the block an error about the report names the
    parameter ``name``, and figures are written in ``figure_format`` with axes named by
    ``labels`` (None: as already in force)."""
    from fitrules.base.errors import report_parameter
    from fitrules.base.outputs import check_result_output, inputs_of
    from fitrules.views.figures import axis_labels, figure_formats

    check_result_output(target, inputs_of(result), name, "dir")
    with report_parameter(name), figure_formats(figure_format), axis_labels(labels):
        yield Path(target)
