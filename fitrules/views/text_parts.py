"""What every plain-text view shares: fixed-width tables, p-values, the line saying which data
a result was made from and how its table was taken."""

from __future__ import annotations

import math

import pandas as pd


def seed_effect_sentence(e: dict | None, unit: str = "") -> str | None:
    """One line on a shared per-seed effect, or None when the data show none."""
    if not e or not e["shown"]:
        return None
    u = f" {unit}" if unit else ""
    return (
        f"per-seed effect shared across cells: seed {e['extreme_seed']} sits "
        f"{e['extreme_offset']:+.4g}{u} from its cells' means on average; F({e['df'][0]}, "
        f"{e['df'][1]}) = {e['F']:.3g}, p = {e['p']:.2g}; shared sd {e['sd_shared']:.3g}{u}, "
        f"per-run sd {e['sd_run']:.3g}{u}. Runs that share a seed id are correlated across "
        "cells: new runs at fresh seed ids average it out"
    )


def sentence(clauses: list[str]) -> str:
    """The clauses joined by semicolons into one sentence: capitalised, with a full stop."""
    text = "; ".join(clauses)
    return text[0].upper() + text[1:] + "."


def fmt_p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def with_unit(value: float, spec: str, unit: str) -> str:
    """``value`` formatted by ``spec`` and followed by its unit: ``3.200%``, ``0.012 nats``
    or ``0.012`` (an error metric's unit is data in a result, not part of a column's name)."""
    text = format(value, spec)
    return text + unit if unit == "%" else f"{text} {unit}" if unit else text


def headed(label: str, unit: str) -> str:
    """A column header with its unit: ``median %``, ``median nats``, ``median``."""
    return f"{label} {unit}" if unit else label


def difference_unit(unit: str) -> str:
    """What the difference of two errors is in: points of a percentage, else the unit."""
    return "points" if unit == "%" else unit


def table(df: pd.DataFrame, columns: list[tuple[str, str, str]]) -> str:
    """Fixed-width table: columns are (key, header, format) with format '' for str()."""
    cells = [[h for _, h, _ in columns]]
    for _, row in df.iterrows():
        cells.append(
            [
                (
                    format(row[k], f)
                    if f and not pd.isna(row[k])
                    else ("n/a" if pd.isna(row[k]) else str(row[k]))
                )
                for k, _, f in columns
            ]
        )
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for j, r in enumerate(cells):
        parts = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
        lines.append("  ".join(parts).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def numbers_note(columns: list[str]) -> str:
    """The line naming the columns whose numbers the table stored (some or all) as text."""
    return f"read as numbers: {', '.join(columns)} (numbers stored as text in the table)"


def table_notes(data: dict) -> list[str]:
    """Lines on how a table was taken: rows filtered out, columns ignored or pooled."""
    from fitrules.model.grids import pooled_note

    out = []
    if data.get("numbers_from_text"):
        out.append(numbers_note(data["numbers_from_text"]))
    if data.get("duplicates_dropped"):
        n = data["duplicates_dropped"]
        out.append(
            # flag words: advice shown on both faces
            f"dropped {n} exact cop{'ies' if n != 1 else 'y'} of other rows (--drop-duplicates)"
        )
    if data.get("where"):
        n = data.get("filtered_out", 0)
        out.append(f"filtered out by where: {n} row{'s' if n != 1 else ''}")
    if data.get("ignored_columns"):
        out.append(
            "ignored per-run columns (no form reads them; they label runs, not cells): "
            + ", ".join(data["ignored_columns"])
        )
    for col, levels in (data.get("pooled") or {}).items():
        out.append(pooled_note(col, levels))
    return out


def data_line(data: dict) -> str:
    where = f" where {' and '.join(data['where'])}" if data.get("where") else ""
    excl = data.get("excluded") or {}
    excluded = ", ".join(f"{v} {k}" for k, v in excl.items()) or "none"
    sha = (data.get("sha256") or "")[:12]
    out = (
        f"data: {data['path']} (sha256 {sha}){where}: {data['runs']} runs in "
        f"{data['cells']} cells; excluded: {excluded}"
    )
    if data.get("test"):
        t = data["test"]
        out += (
            f"; scored on {t['path']} (sha256 {(t['sha256'] or '')[:12]}): {t['runs']} runs "
            f"in {t['cells']} cells"
        )
    notes = table_notes(data)
    return out + ("\n" + "\n".join(notes) if notes else "")
