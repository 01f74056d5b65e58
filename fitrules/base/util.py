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
    (see :func:`fitrules.base.outputs.write_text`)."""
    from fitrules.base.outputs import write_text

    write_text(path, text, option, update, inputs)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def in_notebook() -> bool:
    """True inside a Jupyter kernel (a notebook), where progress shows as a widget."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - no shell, no notebook
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _bar_class():
    """tqdm's notebook widget in a notebook with ipywidgets, else the text bar."""
    if in_notebook():
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as notebook_tqdm
        except ImportError:  # the text bar, on the notebook's stderr
            return tqdm
        return notebook_tqdm
    return tqdm


@contextmanager
def progress(
    total: float | None,
    desc: str = "",
    enabled: bool | None = None,
    initial: int = 0,
    unit: str = "it",
):
    """A progress bar: on stderr, shown by default only when stderr is a terminal; in a
    notebook, tqdm's widget, shown by default. The ETA is the mean rate since the start
    (``smoothing=0``), which steps between unequal pieces of work do not swing."""
    if enabled is None:
        enabled = sys.stderr.isatty() or in_notebook()
    cls = _bar_class() if enabled else tqdm
    kwargs: dict = dict(total=total, initial=initial, desc=desc, disable=not enabled,
                        leave=False, unit=unit, smoothing=0)  # fmt: skip
    if cls is tqdm:
        kwargs.update(file=sys.stderr, dynamic_ncols=True)
    if unit != "it" and total is not None:  # whole units of a fractional count
        kwargs["bar_format"] = (
            "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} "
            + unit
            + "s [{elapsed}<{remaining}]"
        )
    bar = cls(**kwargs)
    try:
        yield bar
    finally:
        bar.close()


@contextmanager
def split_progress(splits: int | None, fits_per_split: int, desc: str, enabled: bool | None):
    """A bar that counts splits (what a user asked for), fed with fits: ``on_progress(k)``
    for k fits done advances it by k / ``fits_per_split`` splits. Without a known number of
    splits it counts fits."""
    if splits is None:
        with progress(None, desc, enabled, unit="fit") as bar:
            yield bar.update
        return
    per = max(int(fits_per_split), 1)
    with progress(float(splits), desc, enabled, unit="split") as bar:

        def on_progress(k: int) -> None:
            bar.update(k / per)

        on_progress.bar = bar  # type: ignore[attr-defined]
        yield on_progress


def spread_unit(relative: bool) -> tuple[str, float]:
    """The unit and factor a spread is quoted in.

    Parameters
    ----------
    relative : whether the spread is relative to the value.

    Returns
    -------
    tuple of (str, float)
        ``("%", 100.0)``, percent of the value, for a relative spread; ``("", 1.0)``, the
        metric's own units, otherwise.
    """
    return ("%", 100.0) if relative else ("", 1.0)


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
