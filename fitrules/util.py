"""Small helpers shared by the modules: atomic writes, progress bars, hashing."""

from __future__ import annotations

import hashlib
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from tqdm import tqdm


def atomic_write_text(
    path: Path, text: str, option: str = "output", update: bool = False, inputs=None
) -> None:
    """Write ``text`` to ``path`` via a locked temporary sibling and one rename: never a
    half-written file, never through a link unless ``update``, never over one of ``inputs``
    (see :func:`fitrules.outputs.write_text`)."""
    from fitrules.outputs import write_text

    write_text(path, text, option, update, inputs)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextmanager
def progress(total: int | None, desc: str = "", enabled: bool | None = None, initial: int = 0):
    """A tqdm bar on stderr, shown by default only when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    bar = tqdm(
        total=total,
        initial=initial,
        desc=desc,
        disable=not enabled,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )
    try:
        yield bar
    finally:
        bar.close()


SIGNIFICANT = 12  # digits kept of a float in JSON


def json_ready(obj):
    """Plain Python values for json.dumps: numpy scalars unwrapped, NaN and inf as None,
    floats rounded to 12 significant digits.

    The rounding makes JSON output byte-identical across machines: another BLAS or thread
    count changes the last of a float's 17 digits, far below any digit a result rests on.
    """
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return float(f"{obj:.{SIGNIFICANT}g}") if np.isfinite(obj) else None
    return obj


class Text(str):
    """A result's text view, as ``summary()`` returns it: a ``str`` that shows as itself in
    a notebook or a REPL (not as a quoted string) and as preformatted HTML.

    ``print(r.summary())`` and ``print(r)`` print the same text; the text is also what the
    command line prints (statsmodels' ``results.summary()``, lmfit's ``fit_report()``).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"
