"""Results as LaTeX tables for a paper: a plain ``tabular`` that needs no LaTeX package and no
Python one beyond pandas (pandas' own ``to_latex`` needs jinja2, which fitrules does not
depend on).

Numbers are written with 4 significant digits, g-style, as the figures write them; a power of
ten is set as ``$1.613\\times10^{10}$``; a missing value is ``--``. What a reader needs to know
about the numbers (the form, the intervals' method, the error's unit) is said in ``%`` comment
lines above the table, for the caption.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import pandas as pd

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def escape(text: object) -> str:
    """``text`` with LaTeX's special characters escaped (``a_1 & 5%`` -> ``a\\_1 \\& 5\\%``).

    Parameters
    ----------
    text : object
        Any value; its ``str`` is escaped.

    Returns
    -------
    str
        Text that LaTeX sets as written.
    """
    return "".join(_SPECIAL.get(ch, ch) for ch in str(text))


def number(value: object) -> str:
    """One cell of a table: an integer as it is, a real number in 4 significant digits
    (g-style, a power of ten in math mode), a missing number (NaN, None) as ``--``, anything
    else escaped (an empty text stays empty).

    Parameters
    ----------
    value : object
        The cell's value.

    Returns
    -------
    str
        The cell in LaTeX.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "--" if value is None else escape(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "--"
    if math.isinf(v):
        return r"$\infty$" if v > 0 else r"$-\infty$"
    text = f"{v:.4g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return rf"${mantissa}\times10^{{{int(exponent)}}}$"


def tabular(
    frame: pd.DataFrame,
    headers: dict[str, str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """``frame`` as a LaTeX ``tabular``: text columns left-aligned, numbers right-aligned,
    ``\\hline`` rules, one row per row of ``frame``.

    Parameters
    ----------
    frame : DataFrame
        The rows and columns to set, in their order.
    headers : dict of str to str, optional
        A column's header when it is not the column's name (written as LaTeX, not escaped).
    notes : sequence of str
        Lines said in ``%`` comments above the table.

    Returns
    -------
    str
        The table, ending in a newline.
    """
    headers = headers or {}
    align = "".join(
        "r" if pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool else "l"
        for c in frame.columns
    )
    head = " & ".join(headers.get(c, escape(c)) for c in frame.columns)
    rows = [" & ".join(number(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    lines = [f"% {' '.join(str(note).split())}" for note in notes]
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\hline", head + r" \\", r"\hline", *rows]
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
