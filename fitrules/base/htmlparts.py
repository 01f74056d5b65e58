"""HTML pieces every ``_repr_html_`` is made of: a table, a paragraph, a list."""

from __future__ import annotations

import html

import pandas as pd

FLOAT = "{:.4g}".format


def html_table(df: pd.DataFrame, formatters: dict | None = None) -> str:
    return df.to_html(index=False, border=0, na_rep="n/a", float_format=FLOAT,
                      formatters=formatters, classes="fitrules")  # fmt: skip


def html_p(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def html_list(items) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(str(x))}</li>" for x in items) + "</ul>"
