"""Reading a results table: a CSV, Parquet or JSON file (or a DataFrame) into one frame, its
header checked and its rows labelled by their line in the file; and the grids shipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError
from fitrules.model.grid_columns import HARNESS_COLUMNS, _line

IN_MEMORY = "DataFrame"

DEFAULT_GRID = "main.csv"
DEFAULT_WHERE = ("lr == 3e-4",)


def _data_file(name: str) -> Path:
    from fitrules.base.paths import data_dir

    return data_dir() / name


DEFAULT_PAIRED = _data_file("paired_tuned.csv")
# the default paired comparison tunes lr per arm on these seeds and measures on the others
DEFAULT_PAIRED_TUNE = (("lr",), "0,1,2")


def default_grid(where: Sequence[str] | None = None) -> tuple[Path, list[str]]:
    """The committed main grid at the inner learning rate the composition rule is tested at."""
    from fitrules.base.paths import data_dir

    return data_dir() / DEFAULT_GRID, list(DEFAULT_WHERE) + list(where or [])


def display_path(path: Path) -> str:
    """``path`` relative to the working directory or the checkout, never this machine's root.

    The data shipped inside an installed package shows as ``data/NAME``, as in a checkout.
    """
    from fitrules.base.paths import packaged_data_dir, project_root

    path = Path(path)
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of links: shown as given
        return str(path) if not path.is_absolute() else path.name
    try:
        return str(Path("data") / resolved.relative_to(packaged_data_dir()))
    except ValueError:
        pass
    for base in (Path.cwd(), project_root()):
        try:
            return str(resolved.relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path) if not path.is_absolute() else path.name


def written_by_harness(path: Path | None, columns: Sequence[str]) -> bool:
    """True for a table ``fitrules simulate`` wrote: its columns name the spec, and the
    manifest the harness writes beside it (``NAME.manifest.json``) names the same spec."""
    if path is None or not all(c in columns for c in HARNESS_COLUMNS):
        return False
    import json

    from fitrules.base.inputs import read_text

    manifest = path.with_name(path.stem + ".manifest.json")
    try:
        # a pipe or device put there is not a manifest (and a read would never end)
        return "spec_sha256" in json.loads(read_text(manifest, str(manifest), GridError))
    except (GridError, ValueError, TypeError, RecursionError):
        return False


def _first_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def _read(path: Path) -> pd.DataFrame:
    label = display_path(path)
    if not path.exists():
        raise GridError(f"{label}: file not found")
    if path.is_dir():
        raise GridError(f"{label}: is a directory; give a results table (CSV or Parquet)")
    if not path.is_file():  # a pipe with no writer would wait forever; a device never ends
        raise GridError(
            f"{label}: is not a regular file (a pipe, socket or device); give a results table "
            "(CSV or Parquet) saved to a file"
        )
    from fitrules.base.inputs import check_table_size

    check_table_size(path, label, GridError)  # a gzip bomb is counted while streaming
    parquet = path.suffix.lower() in (".parquet", ".pq")
    from fitrules.model import formats

    if not parquet and formats.is_json(path):
        return formats.read_json_runs(path, label)
    try:
        if parquet:
            return pd.read_parquet(path)
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
        names = [str(c).strip() for c in header.iloc[0].tolist()] if len(header) else []
        _check_unique(names, label)
        return pd.read_csv(path, low_memory=False)
    except GridError:
        raise
    except ImportError:
        raise GridError(
            f"{display_path(path)}: cannot read Parquet here (no pyarrow installed); install "
            'the parquet extra (pip install "fitrules[parquet]", which adds pyarrow) or use CSV'
        ) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise GridError(f"{label}: not a readable results table ({_first_line(err)})") from None
    except OSError as err:
        raise GridError(f"{label}: cannot be read ({err.strerror or _first_line(err)})") from None


def _index_as_columns(df: pd.DataFrame, label: str) -> pd.DataFrame:
    """A named index (``df.set_index("lr")``, kept by Parquet) holds data: its levels become
    columns. An unnamed index is only row labels and is dropped later."""
    names = [n for n in df.index.names if n is not None]
    if not names:
        return df
    clash = [n for n in names if str(n).strip() in {str(c).strip() for c in df.columns}]
    if clash:
        raise GridError(
            f"{label}: the index is named {str(clash[0])!r}, which is also a column; rename "
            "one (the index holds data and becomes a column)"
        )
    return df.reset_index(level=names)


def _plain_dtypes(df: pd.DataFrame, label: str) -> pd.DataFrame:
    """One scalar per cell, in a dtype pandas can group by: half and single precision
    widened to double (pandas cannot index float16), lists and tables refused.

    Raises
    ------
    GridError
        For a cell holding a list, array, tuple, set or table (Parquet list columns).
    """
    narrow = [c for c in df.columns if df[c].dtype.kind == "f" and df[c].dtype.itemsize < 8]
    if narrow:
        df = df.astype({c: float for c in narrow})
    for c in df.columns:
        if df[c].dtype != object:
            continue
        nested = df[c].map(lambda v: isinstance(v, list | tuple | set | dict | np.ndarray))
        if nested.any():
            i = int(np.flatnonzero(nested.to_numpy())[0])
            raise GridError(
                f"{label}: column {c!r} holds a {type(df[c].iloc[i]).__name__} in line "
                f"{_line(df.index[i])}; a results table holds one value per cell (a number or text)"
            )
    # one block per dtype: pandas warns on every later column added to a frame of 100+
    # separate blocks (as read_csv makes for a wide table)
    return df.copy()


def _numbers_from_text(df: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Text columns whose every value parses as a number, read as numbers, and their names.

    A CSV is parsed into numbers by pandas; a Parquet file, a JSON export or a DataFrame
    (``mlflow.search_runs()`` stores parameters as text) may hold ``'20000000'`` where a
    number is meant, and a form could not read it (issue 44). Empty text counts as missing;
    a column with any value that is not a number (``'sync'``, ``'1e-3x'``) stays text, and a
    column of booleans stays as it is."""
    converted = {}
    for c in df.columns:
        col = df[c]
        if col.dtype.kind != "O" and not isinstance(col.dtype, pd.StringDtype):
            continue
        vals = col.dropna()
        if not len(vals) or not vals.map(lambda v: isinstance(v, str)).all():
            continue
        text = vals.str.strip()
        text = text[text != ""]
        if not len(text):
            continue
        try:
            pd.to_numeric(text, errors="raise")
        except (ValueError, TypeError):
            continue
        stripped = col.map(lambda v: v.strip() if isinstance(v, str) else v)
        converted[c] = pd.to_numeric(stripped.replace("", np.nan), errors="coerce")
    if not converted:
        return df, ()
    out = df.copy()
    for c, v in converted.items():
        out[c] = v
    return out, tuple(converted)


def _csv_lines(path: Path, n_rows: int) -> np.ndarray | None:
    """The line of the file each row starts on, counting blank lines (which pandas skips)
    and newlines inside quoted fields; None when the file does not parse the same way."""
    import csv

    starts: list[int] = []
    end = 0
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            for record in reader:
                start, end = end + 1, reader.line_num
                if record:
                    starts.append(start)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return np.array(starts[1:], dtype=np.int64) if len(starts) == n_rows + 1 else None


def _check_unique(names: Sequence[str], label: str) -> None:
    """Refuse a header that names a column twice (pandas would rename one to 'NAME.1')."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise GridError(
                f"{label}: the header names column {n!r} twice; every column needs its own "
                "name (pandas would rename one and a form could read the wrong one)"
            )
        seen.add(n)


def _check_arguments(
    source: Any, metric: Any, unit: Any, frame: Any
) -> tuple[Path | None, pd.DataFrame | None]:
    """Refuse arguments of the wrong type; the path read and the frame given."""
    for name, value in (("metric", metric), ("unit", unit)):
        if value is not None and not isinstance(value, str):
            raise GridError(f"{name} {value!r}: must be a column name (text) or None")
    if not isinstance(source, pd.DataFrame | str | Path):
        raise GridError(
            f"source {type(source).__name__}: give a pandas DataFrame or the path of a CSV or "
            "Parquet file"
        )
    path: Path | None
    if isinstance(source, pd.DataFrame):
        frame, path = source, None
    else:
        path = Path(source)
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise GridError(f"frame: expected a pandas DataFrame, got {type(frame).__name__}")
    return path, frame


def _read_table(path: Path | None, frame: pd.DataFrame | None, label: str) -> pd.DataFrame:
    """The table read (or copied), its header checked and its rows labelled by file line."""
    if frame is not None:
        df = frame.copy()
    elif path is not None:
        df = _index_as_columns(_read(path), label)
    if len(df) == 0:
        raise GridError(f"{label}: the table has no rows")
    df.columns = [str(c).strip() for c in df.columns]
    _check_unique(list(df.columns), label)
    df = df.reset_index(drop=True)
    if path is not None and frame is None and path.suffix.lower() not in (".parquet", ".pq"):
        from fitrules.model import formats

        if formats.is_json(path):
            lines = formats.json_lines(path, len(df))  # no header: the run's own line
        else:
            lines = _csv_lines(path, len(df))
        if lines is not None:  # rows labelled so that _line(label) is the line in the file
            df.index = pd.Index(lines - 2)
    return _plain_dtypes(df, label)
