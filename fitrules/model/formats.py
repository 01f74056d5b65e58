"""Tables as people export them: what the loader takes, and the fix it names for the rest.

Experiment trackers write results tables with quirks: nested names flattened with dots
(``compression.keep``, ``config.seed``), metrics with slashes (``val/loss``), runs exported
twice, crashed runs beside finished ones, run metadata (names, times, users) beside the
design, one row a cell with a column per seed, or JSON lines instead of CSV. This module
recognises each of them; :func:`fitrules.model.grids.load_grid` either takes the table as it is
(JSON lines, exact copies with ``drop_duplicates``, columns renamed with ``rename``) or
refuses it with a message naming the option or the pandas step that fixes it. The recipes
are in ``docs/input-formats.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import GridError, param

JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")

# ---------------------------------------------------------------- names
_SEP = re.compile(r"[./:]")


def quoted(name: str) -> str:
    """``name`` as an expression reads it: in backticks unless it is an identifier."""
    return name if name.isidentifier() else f"`{name}`"


def last_part(name: str) -> str:
    """The last component of a flattened name: ``compression.keep`` -> ``keep``."""
    return _SEP.split(name)[-1]


# Names trackers and training scripts give the variables of the built-in forms.
SYNONYMS = {
    "H": ("inner_steps", "local_steps", "sync_interval", "sync_every", "sync_steps", "h"),
    "keep": ("keep_frac", "keep_fraction", "keep_ratio", "compression_keep"),
    "M": ("workers", "n_workers", "num_workers", "replicas"),
    "N": ("params", "n_params", "num_params", "model_size"),
    "D": ("tokens", "n_tokens", "num_tokens", "data_size"),
}


def column_like(name: str, columns: Sequence[str]) -> str | None:
    """A column that is probably ``name`` under another spelling: a flattened name ending in
    it (``config.H``, ``compression.keep``), or a usual synonym (``inner_steps`` for ``H``)."""
    ends = [c for c in columns if c != name and last_part(c) == name]
    if len(ends) == 1:
        return ends[0]
    for c in columns:
        if last_part(c).lower() in SYNONYMS.get(name, ()):
            return c
    return None


def rename_hint(name: str, columns: Sequence[str]) -> str:
    """`` (add --rename OLD=NAME)`` when a column is probably ``name``; else ``""``.

    ``omega``, which no tracker logs, is derived from a keep-fraction column."""
    if name == "omega":
        keep = "keep" if "keep" in columns else column_like("keep", columns)
        if keep is not None:
            return f" (add {param('derive')} 'omega = 1/{quoted(keep)} - 1')"
    like = column_like(name, columns)
    if like is not None:
        return f" (add {param('rename')} {quoted_arg(like + '=' + name)})"
    return ""


def rename_fix(name: str, columns: Sequence[str]) -> tuple[str, str] | None:
    """The option :func:`rename_hint` suggests, as ``(flag, value)``; None without one."""
    if name == "omega":
        keep = "keep" if "keep" in columns else column_like("keep", columns)
        if keep is not None:
            # flag words: a fix the command line applies
            return ("--derive", f"omega = 1/{quoted(keep)} - 1")
    like = column_like(name, columns)
    # flag words: a fix the command line applies
    return None if like is None else ("--rename", f"{like}={name}")


def backtick_hint(text: str, columns: Sequence[str]) -> str:
    """When ``text`` (an expression) holds a column whose name is not an identifier without
    backticks (``compression.keep``, ``val/loss``), the spelling that reads it."""
    bare = re.sub(r"`[^`]*`", " ", text)
    for c in sorted(columns, key=len, reverse=True):
        if not c.isidentifier() and c in bare:
            return f"; a name with dots, slashes or spaces goes in backticks: {quoted(c)}"
    return ""


def parse_renames(rename: Mapping[str, str] | Sequence[str] | str | None) -> dict[str, str]:
    """``"old=new"`` texts (or a dict) as ``{old: new}``.

    Raises
    ------
    GridError
        For a text without ``=`` or with an empty side, or a column renamed twice.
    """
    if rename is None:
        return {}
    if isinstance(rename, Mapping):
        pairs = list(rename.items())
    else:
        texts = [rename] if isinstance(rename, str) else rename
        if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
            raise GridError(
                f"rename {rename!r}: give 'OLD=NEW' texts (a list of them) or a dict of old -> new"
            )
        pairs = []
        for t in texts:
            old, sep, new = t.rpartition("=")
            if not sep:
                raise GridError(f"{param('rename')} {t!r}: expected OLD=NEW, e.g. inner_steps=H")
            pairs.append((old, new))
    out: dict[str, str] = {}
    for old, new in pairs:
        if not isinstance(old, str) or not isinstance(new, str):
            raise GridError(f"rename {old!r}: {new!r}: both names must be text")
        old, new = old.strip().strip("`"), new.strip().strip("`")
        if not old or not new:
            raise GridError(f"{param('rename')} {old}={new}: expected OLD=NEW, e.g. inner_steps=H")
        if old in out:
            raise GridError(f"{param('rename')}: column {old!r} is renamed twice")
        out[old] = new
    return out


def apply_renames(df: pd.DataFrame, renames: dict[str, str], label: str) -> pd.DataFrame:
    """``df`` with columns renamed; a name that is not a column, or a new name already taken,
    is refused."""
    if not renames:
        return df
    columns = list(df.columns)
    for old, new in renames.items():
        if old not in columns:
            raise GridError(
                f"{param('rename')} {old}={new}: {label} has no column {old!r}; columns: "
                f"{', '.join(columns)}"
            )
    after = [renames.get(c, c) for c in columns]
    for new in renames.values():
        if after.count(new) > 1:
            raise GridError(
                f"{param('rename')}: {label} would have two columns named {new!r}; rename or "
                "drop one"
            )
    return df.rename(columns=renames)


# ---------------------------------------------------------------- seeds, status, wide tables
_SEED_LIKE = re.compile(r"(^|[._/: -])(seed|seed_id|random_seed|run_seed)$", re.IGNORECASE)
_WIDE = re.compile(r"^(?P<stem>.+?)(?P<sep>[_./: -]?)(?P<kind>seed|run|rep|trial|s)(?P<n>\d+)$")


def seed_like(columns: Sequence[str]) -> list[str]:
    """Columns whose name says they hold each run's seed (``config.seed``, ``run_seed``,
    ``params.seed``), other than ``seed`` itself."""
    return [c for c in columns if c != "seed" and _SEED_LIKE.search(c)]


def seed_hint(column: str) -> str:
    return f"give --seed-col {quoted_arg(column)}"  # flag words: advice shown on both faces


def quoted_arg(name: str) -> str:
    """``name`` as a shell argument (quoted when it holds a slash, a space or a quote)."""
    import shlex

    return shlex.quote(name)


# a held-out split's name as a part of a tracker's metric name: val/loss, eval_loss, test.loss
_HELD_OUT = re.compile(r"(?:^|[./_\-])(?:val|valid|validation|eval|test|dev)(?=$|[./_\-])", re.I)


def metric_like(columns: Sequence[str], defaults: Sequence[str]) -> list[str]:
    """The columns that are probably the metric under a tracker's name (``summary.loss``,
    ``metrics.val_loss``, ``val/loss``), held-out ones first (``val/loss`` before
    ``train/loss``: what a grid's metric should be, and what the docs name)."""
    found = [c for m in defaults for c in columns if c != m and last_part(c) == m]
    found = list(dict.fromkeys(found))
    return sorted(found, key=lambda c: _HELD_OUT.search(c) is None)


def wide_groups(columns: Sequence[str]) -> dict[str, list[str]]:
    """Families of two or more columns that hold one metric per seed or repeat
    (``loss_seed0``, ``loss_seed1``, ...): the stem with its separator and kind -> columns."""
    groups: dict[str, list[str]] = {}
    for c in columns:
        m = _WIDE.match(c)
        if m:
            groups.setdefault(m["stem"] + m["sep"] + m["kind"], []).append(c)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def wide_message(label: str, prefix: str, family: list[str], columns: Sequence[str]) -> str:
    """The refusal of a wide table, with the pandas step that makes it long."""
    ids = [c for c in columns if c not in family]
    value = _WIDE.match(family[0])["stem"]  # type: ignore[index]
    return (
        f"{label}: columns {', '.join(family)} hold one {value!r} per seed (a wide table, "
        "one row a cell); fitrules reads one row a run: reshape with pandas, "
        f"df = df.melt(id_vars={ids!r}, value_vars={family!r}, var_name='seed', "
        f"value_name={value!r}); df['seed'] = df['seed'].str.removeprefix({prefix!r})"
        ".astype(int)"
    )


STATUS_NAMES = ("state", "status", "run_state", "run_status")
FAILED = ("crashed", "failed", "failure", "killed", "error", "errored", "aborted", "cancelled")
SUCCEEDED = ("finished", "success", "succeeded", "completed", "complete", "done", "ok")


def is_status(column: str) -> bool:
    return last_part(column).lower() in STATUS_NAMES


def failed_levels(col: pd.Series) -> list[str]:
    """The levels of a status column that say a run did not finish."""
    return sorted({str(v) for v in col.dropna().unique() if str(v).strip().lower() in FAILED})


def status_filter(column: str, levels: Sequence[Any]) -> str | None:
    """A ``where`` condition that keeps finished runs of a status column, or None."""
    ok = [v for v in levels if str(v).strip().lower() in SUCCEEDED]
    if ok:
        return f"{quoted(column)} == {str(ok[0])!r}"
    bad = [v for v in levels if str(v).strip().lower() in FAILED]
    if bad:
        return " and ".join(f"{quoted(column)} != {str(v)!r}" for v in bad)
    return None


# Run metadata of the trackers' exports (Weights & Biases runs tables, MLflow's
# ``search_runs``): who, when, how long, which sweep. They describe runs, never the design.
WANDB_MARKERS = {"Name", "State", "Created", "Runtime"}
WANDB_META = {"Name", "State", "Notes", "User", "Tags", "Created", "Runtime", "Sweep", "ID"}
MLFLOW_MARKERS = {"run_id", "experiment_id", "status", "start_time"}
MLFLOW_META = {"run_id", "experiment_id", "status", "artifact_uri", "start_time", "end_time"}


def tracker_metadata(columns: Sequence[str]) -> set[str]:
    """Columns of a tracker export that are run metadata or outcomes, not design factors:
    W&B's run columns and its ``_step``/``_runtime``/``_timestamp``; MLflow's run columns,
    its ``tags.*`` and its ``metrics.*`` (every metric logged is an outcome of the run)."""
    cols = set(columns)
    out: set[str] = set()
    if WANDB_MARKERS <= cols:
        out |= (WANDB_META & cols) | {c for c in cols if c.startswith("_")}
    if MLFLOW_MARKERS <= cols:
        out |= (MLFLOW_META & cols) | {
            c for c in cols if c.startswith("tags.") or c.startswith("metrics.")
        }
    return out


# ---------------------------------------------------------------- JSON lines
def is_json(path: Path) -> bool:
    """A JSON or JSON-lines table: by its suffix, or by its first character."""
    return path.suffix.lower() in JSON_SUFFIXES or looks_like_json(path)


def json_lines(path: Path, n_rows: int) -> np.ndarray | None:
    """The line of a JSON-lines file each run is on, or None (a JSON array, or a count that
    does not match)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [n for n, line in enumerate(fh, start=1) if line.strip()]
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or len(lines) != n_rows:
        return None
    with open(path, encoding="utf-8") as fh:
        if fh.read(4096).lstrip().startswith("["):
            return None
    return np.array(lines, dtype=np.int64)


def looks_like_json(path: Path) -> bool:
    """A file whose first non-blank character opens a JSON object or array."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError:
        return False
    return head[:1] in (b"{", b"[")


def _json_float(text: str) -> float | str:
    """A JSON number with a fraction or exponent; one beyond the largest double (``1e400``)
    is kept as it is written, for the loader to refuse by column and line, not read as an
    infinity (``Infinity`` itself is a constant, not a number)."""
    value = float(text)
    return value if value not in (float("inf"), float("-inf")) else text


def read_json_runs(path: Path, label: str) -> pd.DataFrame:
    """A JSON-lines file (one run an object), or a JSON array of runs, as a table: nested
    objects flattened with dots (``{"config": {"seed": 0}}`` -> ``config.seed``), as
    ``pandas.json_normalize`` does.

    Raises
    ------
    GridError
        For a line that is not JSON or a run that is not an object.
    """
    import json

    from fitrules.base.inputs import read_text

    text = read_text(path, label, GridError)
    stripped = text.lstrip()
    records: list[Any]
    if stripped.startswith("["):
        try:
            records = json.loads(stripped, parse_float=_json_float)
        except (ValueError, RecursionError) as err:
            raise GridError(f"{label}: not valid JSON ({err})") from None
        where = [f"item {i + 1}" for i in range(len(records))] if isinstance(records, list) else []
    else:
        records, where = [], []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line, parse_float=_json_float))
            except (ValueError, RecursionError) as err:
                raise GridError(
                    f"{label}: line {n} is not JSON ({err}); a JSON-lines table holds one "
                    "run an object a line"
                ) from None
            where.append(f"line {n}")
    if not isinstance(records, list) or not records:
        raise GridError(f"{label}: holds no runs (expected one JSON object a line)")
    for w, r in zip(where, records, strict=True):
        if not isinstance(r, dict):
            raise GridError(
                f"{label}: {w} holds a {type(r).__name__}; each run must be a JSON object "
                "(its keys the columns)"
            )
    df = pd.json_normalize(records, sep=".")
    if len(df.columns) != len({str(c) for c in df.columns}):
        raise GridError(f"{label}: two keys flatten to the same column name")
    return df.replace({None: np.nan})
