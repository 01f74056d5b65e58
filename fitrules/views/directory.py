"""Write a report directory atomically: everything goes to a locked temporary sibling first.

The machinery (create-or-fail placeholders, atomic swap for ``--force``, cleaning partials
left by killed runs) lives in :mod:`fitrules.base.outputs`; this module keeps the report's names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fitrules.base.outputs import write_dir


def write_report_dir(target: Path, build: Callable[[Path], None], force: bool = False) -> Path:
    """Run ``build(tmpdir)`` and move the result to ``target``.

    A failure inside ``build`` leaves no trace; ``target`` may be missing or an empty
    placeholder; an existing report is replaced only with ``force``, in one atomic swap,
    once the new report is complete; files put into ``target`` during the build are never
    replaced without ``force``.
    """
    return write_dir(Path(target), build, force)
