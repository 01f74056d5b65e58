"""Reading a results table: a CSV, Parquet or JSON file (or a DataFrame) into one frame, its
header checked and its rows labelled by their line in the file; and the grids shipped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError
from fitrules.model.grid_columns import HARNESS_COLUMNS, _line, _shown, beyond_doubles

IN_MEMORY = "DataFrame"
A_TABLE = "a results table (CSV, Parquet or JSON lines)"  # what a data file must be

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
    if path.parts[:2] == ("/", "dev"):  # a device's name is the same on every machine
        return str(path)
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
    from fitrules.base.inputs import check_file, check_table_size

    check_file(path, label, GridError, A_TABLE)  # before anything opens it
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
    dtypes = df.dtypes  # once: a wide table has thousands of columns
    narrow = [c for c, t in dtypes.items() if t.kind == "f" and t.itemsize < 8]
    if narrow:
        df = df.astype({c: float for c in narrow})
    for c in [c for c, t in dtypes.items() if pd.api.types.is_object_dtype(t)]:
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


# ---------------------------------------------------------------- one kind of value a column
# Text that counts as a missing number among numbers (as the metric's check reads it), and
# the words for an infinity; any other text that pandas does not parse as a number is text.
_MISSING_TEXT = ("", "nan")
_INFINITY = ("inf", "infinity")
# integers beyond this range are no 64-bit integer: read as a double only where one is exact
_INT_RANGE = (-(2**63), 2**64)
# an integer written with more digits than a 64-bit one has is read with Python's int(),
# never through a double (ASCII digits only: other scripts' digits are text)
_LONG_INTEGER = re.compile(r"[+-]?[0-9]{19,}")


def _kind(v: Any) -> str | None:
    """What a cell holds: ``"number"``, ``"text"``, ``"true/false"`` or its type's name;
    None for a missing value."""
    if isinstance(v, str):
        return "text"
    if isinstance(v, bool | np.bool_):
        return "true/false"
    if isinstance(v, int | float | np.integer | np.floating):
        return None if v != v else "number"
    missing = pd.isna(v)
    if isinstance(missing, bool | np.bool_) and missing:
        return None
    return type(v).__name__


def _kinds(col: pd.Series) -> tuple[list[str | None], list[str]]:
    """Each cell's kind (None where missing) and the kinds present, in the order of the rows."""
    if isinstance(col.dtype, pd.StringDtype):
        kinds: list[str | None] = [None if m else "text" for m in col.isna().to_numpy()]
    else:
        kinds = [_kind(v) for v in col.to_numpy(dtype=object)]
    return kinds, list(dict.fromkeys(k for k in kinds if k is not None))


def _numbers(col: pd.Series, name: str, label: str) -> tuple[pd.Series | None, int]:
    """``col`` (numbers, numbers written as text, missing values) as int64 or float64, and
    -1; or None and the position of the first text that is not a number.

    Raises
    ------
    GridError
        For a number beyond the largest double (a 400-digit integer, ``1e400``), or an integer
        beyond 64 bits that no double holds exactly.
    """
    cells = col.to_numpy(dtype=object)
    values = cells.copy()
    rest: list[int] = []  # text for pandas to parse
    for i, v in enumerate(cells):
        if not isinstance(v, str):
            continue
        t = v.strip()
        if t.lower().lstrip("+-") in _MISSING_TEXT:
            values[i] = np.nan
        elif _LONG_INTEGER.fullmatch(t):
            values[i] = int(t)
        else:
            values[i] = t
            rest.append(i)
    if rest:
        parsed = pd.to_numeric(pd.Series(values[rest], dtype=object), errors="coerce")
        numbers = parsed.to_numpy(dtype=float)
        bad = np.isnan(numbers)
        if bad.any():
            return None, rest[int(np.flatnonzero(bad)[0])]
        for i, x in zip(rest, numbers, strict=True):
            if np.isinf(x) and values[i].lower().lstrip("+-") not in _INFINITY:
                raise beyond_doubles(label, name, cells[i], col.index[i])
        values[rest] = parsed.to_numpy(dtype=object)
    _exact_doubles(values, col, _INT_RANGE, name, label)
    out = pd.to_numeric(pd.Series(values, index=col.index, dtype=object))
    if out.dtype == object:  # beyond int64 beside a negative or missing value: no uint64
        values = out.to_numpy(dtype=object)
        _exact_doubles(values, col, (-(2**63), 2**63), name, label)
        out = pd.to_numeric(pd.Series(values, index=col.index, dtype=object))
    return out, -1


def _exact_doubles(
    values: np.ndarray, col: pd.Series, within: tuple[int, int], name: str, label: str
) -> None:
    """Each integer of ``values`` outside ``within`` made the double that is exactly it, in
    place (a double only where it is exact); else refused, naming the cell of ``col``."""
    for i, v in enumerate(values):
        if isinstance(v, int | np.integer) and not within[0] <= v < within[1]:
            values[i] = _exact_double(int(v), col.iloc[i], name, label, col.index[i])


def _exact_double(v: int, cell: Any, name: str, label: str, index: Any) -> float:
    """The double that is exactly the integer ``v``; else refused, naming the cell."""
    try:
        f = float(v)
    except OverflowError:
        raise beyond_doubles(label, name, cell, index) from None
    if int(f) != v:
        raise GridError(
            f"{label}: column {name!r} has {_shown(cell)} in line {_line(index)}, an integer "
            f"beyond 64 bits that no double holds exactly; allowed: integers within 64 bits, "
            f"larger ones a double holds exactly (2**70), or a number written with an "
            f"exponent ({f:.6e}), read as the nearest double"
        )
    return f


def _what(kind: str, kinds: set) -> str:
    """A kind of value as a message names it."""
    if kind == "number":
        return "numbers"
    if kind == "text":
        return "text that is not a number" if "number" in kinds else "text"
    return kind if kind == "true/false" else f"{kind} values"


def check_mixed(df: pd.DataFrame, mixed: dict, metric: str | None, label: str) -> None:
    """Refuse a column that holds two kinds of value (``mixed``, from :func:`_settle_types`,
    under the table's names after any rename), other than ``metric``, whose own check
    refuses text in the words of a metric.

    Raises
    ------
    GridError
        Naming the column, one value of each kind and their lines.
    """
    for name, (first, other, kinds) in mixed.items():
        if name == metric or name not in df.columns:
            continue
        col = df[name]
        raise GridError(
            f"{label}: column {name!r} mixes {_what(kinds[0], set(kinds))} "
            f"({_shown(col[first])} in line {_line(first)}) and {_what(kinds[1], set(kinds))} "
            f"({_shown(col[other])} in line {_line(other)}); a column holds one kind of value: "
            "write each of its values as a number, or each as text"
        )


def _settle_types(
    df: pd.DataFrame, label: str
) -> tuple[pd.DataFrame, tuple[str, ...], dict[str, tuple]]:
    """Each column of one kind of value: numbers, text or true/false; the names of the
    columns whose numbers were (some or all) written as text; and the columns that hold two
    kinds of value, each with the labels of its first value of two kinds and the kinds
    (left as they are, for :func:`check_mixed` to refuse by the column's role).

    A CSV is parsed into numbers by pandas; a Parquet file, a JSON export or a DataFrame
    (``mlflow.search_runs()`` stores parameters as text) may hold ``'20000000'`` where a
    number is meant, and a form could not read it (issue 44). A column whose every value is
    a number or a number written as text (``1`` and ``"1"`` in JSON lines) is read as
    numbers; empty text and ``nan`` count as missing. A column of text with any value that
    is not a number (``'sync'``, ``'1e-3x'``, fullwidth ``'１２'``) stays text, and a column
    of booleans stays as it is. An integer beyond 64 bits (an object column of Python ints)
    is read as a double where one holds it exactly.

    Raises
    ------
    GridError
        For a number beyond the largest double, or an integer beyond 64 bits that no double
        holds exactly, naming the column, the value and its line.
    """
    converted = {}
    from_text = []
    mixed: dict[str, tuple] = {}
    for c, dtype in df.dtypes.items():
        if not pd.api.types.is_object_dtype(dtype) and not isinstance(dtype, pd.StringDtype):
            continue
        col = df[c]
        kinds, present = _kinds(col)
        if not present:
            continue
        if set(present) <= {"number", "text"}:
            values, bad = _numbers(col, str(c), label)
            if values is not None:
                converted[c] = values
                if "text" in present:
                    from_text.append(str(c))
            elif "number" in present:
                first = kinds.index("number")
                mixed[str(c)] = (col.index[first], col.index[bad], ("number", "text"))
        elif len(present) > 1:
            first, other = (col.index[kinds.index(k)] for k in present[:2])
            mixed[str(c)] = (first, other, tuple(present[:2]))
    if not converted:
        return df, (), mixed
    # the columns replaced at once: one assignment a column would leave the frame in pieces
    # (pandas warns past 100), and a wide table has thousands
    numbers = pd.DataFrame(converted, index=df.index)
    out = pd.concat([df.drop(columns=list(converted)), numbers], axis=1)[list(df.columns)]
    return out, tuple(from_text), mixed


def _overflowed_floats(df: pd.DataFrame, path: Path, label: str) -> None:
    """Refuse a number in a CSV that pandas read as an infinity although its text is no
    infinity (``1e400``, or a 400-digit integer in a column of decimals).

    Raises
    ------
    GridError
        Naming the column, the value as written and its line.
    """
    floats = [i for i, dtype in enumerate(df.dtypes) if dtype.kind == "f"]
    if not floats:
        return
    with np.errstate(invalid="ignore"):
        inf = np.isinf(df.iloc[:, floats].to_numpy(float)).any(axis=0)
    if not inf.any():
        return
    positions = [p for p, has in zip(floats, inf, strict=True) if has]
    text = pd.read_csv(path, usecols=positions, dtype=str, keep_default_na=False)
    for p in positions:
        written = text.iloc[:, positions.index(p)].str.strip()
        values = df.iloc[:, p].to_numpy(float)
        spelled = written.str.lower().str.lstrip("+-").isin(_INFINITY).to_numpy()
        overflow = np.isinf(values) & ~spelled
        if overflow.any():
            r = int(np.flatnonzero(overflow)[0])
            raise beyond_doubles(label, str(df.columns[p]), written.iloc[r], df.index[r])


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
        if not formats.is_json(path):
            _overflowed_floats(df, path, label)
    return _plain_dtypes(df, label)
