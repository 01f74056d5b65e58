"""Write a report directory atomically: everything goes to a temporary sibling first."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from fitrules.errors import ReportError


def check_target(target: Path, force: bool) -> None:
    """Refuse early (before any work) to overwrite a report without ``--force``."""
    target = Path(target)
    if target.exists() and not force:
        raise ReportError(f"{target}: exists; pass --force to replace it")
    if target.exists() and not target.is_dir():
        raise ReportError(f"{target}: exists and is not a directory")


def write_report_dir(target: Path, build: Callable[[Path], None], force: bool = False) -> Path:
    """Run ``build(tmpdir)`` and move the result to ``target``.

    A failure inside ``build`` leaves no trace; an existing ``target`` is replaced only with
    ``force`` and only once the new report is complete.
    """
    target = Path(target)
    check_target(target, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        build(tmp)
        tmp.chmod(0o755)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
