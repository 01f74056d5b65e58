"""Predictions written before the run: an append-only, hash-chained JSON-lines ledger.

``fitrules predict`` appends one record per prediction: the form, its constants, the
prediction and its interval at the cell (``interval_kind`` says which: the configuration's
mean or the mean of k new runs, both with the form's held-out misfit; records written before
intervals carried misfit hold a constants-only bootstrap interval and no kind), the sha256 of
the data it was fitted on,
the command, the time and the tolerance its author commits to. ``fitrules score`` reads the
ledger, never writes it, and scores every record whose cell now has results.

What the chain proves, exactly. Each record stores the sha256 of its own content and the
sha256 of the record before it. On its own, the ledger therefore shows that it is *a*
well-formed chain: an edit to one record that leaves its stored hash alone, a record removed
from the middle, or records reordered are refused. It cannot show that it is *the* chain that
was written: anyone can recompute every hash after an edit, and deleting the last records
leaves a valid chain. Only a head kept elsewhere (a commit, a paper, an e-mail) closes that
gap: ``predict`` prints the new head (record count and hash), and ``score --head`` or
``fitrules ledger verify --head`` refuse a ledger in which that record is no longer the one
recorded, so a removed or rewritten record up to the head is caught. Records appended after
the head was taken are covered by the chain only, until a newer head is recorded.

Appends hold an exclusive ``flock`` on the ledger's directory while they re-read the ledger,
choose the next id and replace the file atomically, so concurrent ``predict`` runs cannot
take the same id or lose each other's record.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fitrules.base.errors import LedgerError, param
from fitrules.base.limits import LEVEL
from fitrules.base.outputs import follow_link, update_lock, write_text
from fitrules.base.results import Result
from fitrules.model import expr as ex
from fitrules.model.grids import Grid, display_path, to_float

HEX = re.compile(r"^[0-9a-f]{64}$")
HEAD = re.compile(r"^(?:(\d+):)?([0-9a-fA-F]{12,64})$")
MIN_HEAD_DIGITS = 12


def _digest(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text} is out of range")
    return v


def _loads(line: str):
    """JSON with finite numbers only: NaN, Infinity and 1e999 are refused, as is deep nesting."""
    return json.loads(line, parse_constant=_reject_constant, parse_float=_finite_float)


def _is_num(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _schema_problem(rec: dict) -> str | None:
    """What is wrong with a record's fields, or None. Only what scoring and printing read."""
    if not isinstance(rec.get("id"), int) or isinstance(rec.get("id"), bool):
        return "'id' is not an integer"
    for key in ("form", "sha256"):
        if not isinstance(rec.get(key), str):
            return f"{key!r} is missing or not text"
    if not HEX.match(rec["sha256"]):
        return "'sha256' is not 64 hex digits"
    prev = rec.get("prev_sha256", "missing")
    if prev is not None and not (isinstance(prev, str) and HEX.match(prev)):
        return "'prev_sha256' is missing or not 64 hex digits"
    point = rec.get("point")
    if not isinstance(point, dict) or not point:
        return "'point' is missing or not a table of values"
    if not all(isinstance(k, str) and _is_num(v) for k, v in point.items()):
        return "'point' holds a value that is not a finite number"
    if not _is_num(rec.get("prediction")):
        return "'prediction' is missing or not a finite number"
    interval = rec.get("interval")
    if not (isinstance(interval, list) and len(interval) == 2 and all(map(_is_num, interval))):
        return "'interval' is not two finite numbers"
    kind = rec.get("interval_kind")
    if kind is not None and not isinstance(kind, str):
        return "'interval_kind' is not text"
    tol = rec.get("tolerance_pct")
    if tol is not None and not (_is_num(tol) and tol > 0):
        return "'tolerance_pct' is not a positive number"
    setup = rec.get("setup", {})
    if not isinstance(setup, dict) or not all(
        isinstance(k, str) and (isinstance(v, str | bool) or _is_num(v)) for k, v in setup.items()
    ):
        return "'setup' is not a table of levels"
    data = rec.get("data")
    if not isinstance(data, dict):
        return "'data' is missing or not a table"
    if data.get("sha256") is not None and not isinstance(data.get("sha256"), str):
        return "'data.sha256' is not text"
    where = data.get("where", [])
    if not (isinstance(where, list) and all(isinstance(w, str) for w in where)):
        return "'data.where' is not a list of conditions"
    return None


def _read_text(path: Path) -> str | None:
    if path.exists() and not path.is_dir() and not path.is_file():
        raise LedgerError(
            f"{display_path(path)}: is not a regular file (a pipe, socket or device); a "
            "ledger is a file"
        )
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise LedgerError(f"{display_path(path)}: is a directory, not a ledger file") from None
    except UnicodeDecodeError as err:
        raise LedgerError(
            f"{display_path(path)}: is not UTF-8 text (byte {err.start}); not a ledger"
        ) from None
    except OSError as err:
        raise LedgerError(f"{display_path(path)}: cannot be read ({err.strerror})") from None


def read_ledger(path: Path, must_exist: bool = False) -> list[dict]:
    """Every record, after checking each one's fields, its hash and the chain between them.

    Parameters
    ----------
    path : the JSON-lines ledger.
    must_exist : refuse a missing file instead of reading it as empty.

    Raises
    ------
    LedgerError
        For a line that is not JSON with finite numbers, a record missing a field or holding
        the wrong type, a hash that does not match, or a break in the chain; the message
        names the line and the record.
    """
    path = Path(path)
    text = _read_text(path)
    if text is None:
        if must_exist:
            raise LedgerError(f"{display_path(path)}: no such ledger")
        return []
    records: list[dict] = []
    prev = None
    where = display_path(path)
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = _loads(line)
        except json.JSONDecodeError as err:
            raise LedgerError(f"{where}: line {i} is not JSON ({err.msg})") from None
        except ValueError as err:
            raise LedgerError(f"{where}: line {i} is not valid here ({err})") from None
        except RecursionError:
            raise LedgerError(f"{where}: line {i} is nested too deeply to be a record") from None
        digest = None
        if isinstance(rec, dict) and "sha256" in rec:
            with contextlib.suppress(TypeError, ValueError, RecursionError):
                digest = _digest(rec)
        if digest is None:
            raise LedgerError(f"{where}: line {i} is not a prediction record")
        label = rec.get("id", i) if isinstance(rec.get("id"), int | str) else i
        if digest != rec["sha256"]:
            raise LedgerError(
                f"{where}: record {label} (line {i}) was changed after it was written: its "
                "stored sha256 no longer matches"
            )
        problem = _schema_problem(rec)
        if problem is not None:
            raise LedgerError(f"{where}: record {label} (line {i}) is malformed: {problem}")
        if rec.get("prev_sha256") != prev:
            raise LedgerError(
                f"{where}: record {label} (line {i}) does not follow the record before it: a "
                "record was removed or reordered"
            )
        if rec["id"] != len(records) + 1:
            raise LedgerError(
                f"{where}: record {label} (line {i}) should be record {len(records) + 1}: "
                "records were removed or reordered"
            )
        prev = rec["sha256"]
        records.append(rec)
    return records


def check_ledger_target(path: Path) -> list[dict]:
    """Before any work: the ledger's records (a tampered one is refused), and that a record
    can be appended there."""
    path = follow_link(Path(path), param("ledger"))
    records = read_ledger(path)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    problem = None
    if not parent.is_dir():
        problem = f"{parent} is not a directory"
    else:
        try:  # a real probe: access() says yes to root even where nothing can be created
            before = os.stat(parent)
            fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            problem = f"cannot create files in {parent}: {err.strerror}"
        else:
            try:  # the probe leaves no trace, not even the time of a shared ledger's folder
                os.utime(parent, ns=(before.st_atime_ns, before.st_mtime_ns))
            except OSError:
                pass
    if problem is not None:
        raise LedgerError(f"{param('ledger')} {path}: {problem}")
    return records


def describe_head(count: int, sha256: str) -> str:
    """The head as ``predict`` prints it: record it elsewhere to anchor the ledger."""
    return (
        # flag words: printed advice on the command line
        f"head {count}:{sha256} (record it elsewhere; --head {count}:{sha256[:16]} on "
        "'fitrules score' or 'fitrules ledger verify' then refuses a ledger that lost or "
        "rewrote any record up to it)"
    )


def parse_head(text: str) -> tuple[int | None, str]:
    """``"HASH"`` or ``"N:HASH"`` (at least 12 hex digits) -> (N or None, lower-case hash)."""
    m = HEAD.match((text or "").strip())
    if not m:
        raise LedgerError(
            f"{param('head')} {text!r}: expected the head printed by 'fitrules predict', HASH or "
            "N:HASH "
            f"with at least {MIN_HEAD_DIGITS} hex digits"
        )
    return (int(m.group(1)) if m.group(1) else None), m.group(2).lower()


def verify_head(path: Path, records: list[dict], head: tuple[int | None, str]) -> int:
    """The 1-based number of the record the head names; refuse a ledger that lost it.

    Raises
    ------
    LedgerError
        If no record of the chain has that hash (or record N has another): a record up to
        the head was removed or the chain was rewritten.
    """
    n, digits = head
    where = display_path(Path(path))
    hits = [i for i, r in enumerate(records, start=1) if r["sha256"].startswith(digits)]
    if n is not None:
        if n < 1:
            raise LedgerError(
                f"{param('head')} {n}:{digits[:16]}: record numbers start at 1; give the head as "
                "'fitrules predict' printed it"
            )
        if n > len(records):
            raise LedgerError(
                f"{where}: the recorded head is record {n} but the ledger holds "
                f"{len(records)} records: records were removed"
            )
        if n not in hits:
            raise LedgerError(
                f"{where}: record {n} has sha256 {records[n - 1]['sha256'][:16]}..., not the "
                f"recorded head {digits[:16]}...: the chain was rewritten"
            )
        return n
    if not hits:
        raise LedgerError(
            f"{where}: the recorded head {digits[:16]}... is not in the chain: a record up to "
            "it was removed or the chain was rewritten"
        )
    return hits[0]


def append_prediction(path: Path, record: dict) -> dict:
    """Append ``record`` (id, chain and hash are added); existing records are never changed.

    The ledger is re-read, checked and extended under an exclusive lock, so two concurrent
    appends get consecutive ids.
    """
    # a ledger reached through a link is the file it points to: locked and extended there
    with update_lock(path, param("ledger")) as path:
        records = read_ledger(path)
        for r in records:
            if (r["form"], r["point"], r["data"].get("sha256")) == (
                record["form"],
                record["point"],
                record["data"]["sha256"],
            ):
                raise LedgerError(
                    f"{display_path(path)}: record {r['id']} already predicts form "
                    f"{r['form']!r} at {r['point']} from this data; records are "
                    "never changed: score it, or predict another cell"
                )
        rec = {
            "id": len(records) + 1,
            **record,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "prev_sha256": records[-1]["sha256"] if records else None,
        }
        try:
            rec["sha256"] = _digest(rec)
            line = json.dumps(rec, sort_keys=True, allow_nan=False)
        except ValueError:
            raise LedgerError(
                f"{display_path(path)}: the prediction holds a value that is not a finite "
                "number; nothing was written"
            ) from None
        old = _read_text(path) or ""
        if old and not old.endswith("\n"):
            old += "\n"
        write_text(path, old + line + "\n", param("ledger"))
    return rec


def _column_match(col: pd.Series, value) -> np.ndarray:
    if isinstance(value, str) or isinstance(value, bool):
        return (col.astype(str).str.strip() == str(value)).to_numpy()
    numeric = to_float(col).to_numpy(float)
    with np.errstate(invalid="ignore"):
        return np.isclose(numeric, value, rtol=1e-9, atol=0)


def _point_mask(runs: pd.DataFrame, point: dict) -> np.ndarray | None:
    """Runs at ``point`` (None when the table lacks one of its columns)."""
    mask = np.ones(len(runs), bool)
    for k, v in point.items():
        if k not in runs.columns:
            return None
        mask &= _column_match(runs[k], v)
    return mask


def _identity(value) -> str:
    """A run's seed id as text: 3, 3.0 and "3" are the same seed; "３" (fullwidth) and "1_0",
    which the tables read as text, are not numbers (Python's float() would make them 3 and 10)."""
    if isinstance(value, str) and (not value.isascii() or "_" in value):
        return value
    try:
        f = float(value)
        return repr(int(f)) if f.is_integer() else repr(f)
    except (TypeError, ValueError):
        return str(value)


def fitted_runs_at(grid: Grid, point: dict) -> dict:
    """Who the fitted runs at ``point`` were, for ``score`` to refuse them later.

    A prediction at a cell the grid already has is a training error, whatever file the runs
    come back in (a copy, a shuffled or re-exported table): recorded by seed id when the grid
    has a seed column, else by the metric's values.
    """
    mask = _point_mask(grid.runs, point)
    runs = grid.runs[mask] if mask is not None else grid.runs.iloc[0:0]
    if grid.seed is not None:
        return {"by": "seed", "seeds": sorted({_identity(v) for v in runs[grid.seed]})}
    return {"by": "value", "values": sorted(float(v) for v in runs[grid.metric])}


def _fitted_mask(rec: dict, hit: pd.DataFrame, grid: Grid) -> np.ndarray | None:
    """Which of the runs at a record's point it was fitted on (None: not recorded)."""
    fitted = rec["data"].get("fitted_runs")
    if not isinstance(fitted, dict):
        return None
    if fitted.get("by") == "seed" and grid.seed is not None:
        seeds = set(map(str, fitted.get("seeds", [])))
        return hit[grid.seed].map(_identity).isin(seeds).to_numpy(bool)
    values = np.asarray(fitted.get("values", []), float)
    y = hit[grid.metric].to_numpy(float)
    return (
        np.isclose(y[:, None], values[None, :], rtol=1e-12, atol=0).any(axis=1)
        if len(values)
        else np.zeros(len(y), bool)
    )


def score_data(grid: Grid, records: list[dict]) -> dict:
    """The data block of a scoring: the table, and how it was taken over the variables the
    records' points name."""
    variables = [k for r in records for k in r["point"] if k in grid.runs.columns]
    return {
        "path": grid.label,
        "sha256": grid.sha256,
        "runs": int(len(grid.runs)),
        "where": list(grid.where),
        "excluded": grid.summary()["excluded"],
        **grid.handling(list(dict.fromkeys(variables))),
    }


def prediction_setup(grid: Grid, variables) -> dict:
    """The levels a prediction was made at besides its point: every factor that is constant
    over the runs it was fitted on (tuned choices and the form's variables left out), so that
    :func:`score_ledger` scores it only against new runs made at those levels."""
    from fitrules.model.grids import _plain

    skip = set(variables)
    out = {}
    for c in grid.factors:
        if c in skip or c.startswith("tuned_"):
            continue
        values = grid.runs[c].unique()
        if len(values) == 1:
            v = _plain(values[0])
            if isinstance(v, bool | str) or (isinstance(v, int | float) and math.isfinite(v)):
                out[c] = v
    return out


def _record_runs(r: dict, grid: Grid) -> np.ndarray | None:
    """The new runs a record predicts: at its point, under its filters and at every level it
    was made at (``setup``). None when the table lacks a column of the point."""
    runs = grid.runs
    if any(k not in runs.columns for k in r["point"]):
        return None
    mask = np.ones(len(runs), bool)
    for k, v in r["point"].items():
        mask &= _column_match(runs[k], v)
    for k, v in (r.get("setup") or {}).items():
        if k in runs.columns:
            mask &= _column_match(runs[k], v)
    for cond in r["data"].get("where", []):
        node = ex.parse(cond, logical=True, what=f"record {r['id']}'s filter")
        if all(n in runs.columns for n in ex.names(node)):
            try:
                with np.errstate(all="ignore"):
                    hit = ex.evaluate(node, {c: runs[c].to_numpy() for c in ex.names(node)})
                mask &= np.broadcast_to(np.asarray(hit, bool), mask.shape)
            except (TypeError, ValueError):
                mask &= False
    return mask


def _check_one_setup(r: dict, grid: Grid, mask: np.ndarray, where: str) -> None:
    """Refuse to pool new runs that differ in a factor the prediction did not vary."""
    from fitrules.model.grids import level_list

    runs = grid.runs[mask]
    fixed = set(r["point"]) | set(r.get("setup") or {})
    for c in grid.factors:
        if c in fixed or c.startswith("tuned_"):
            continue
        if runs[c].nunique(dropna=False) > 1:
            raise LedgerError(
                f"{where}: record {r['id']} predicts {r['form']!r} at "
                f"{', '.join(f'{k}={v:g}' for k, v in r['point'].items())}, but the runs "
                f"there in {grid.label} differ in {c!r} ({level_list(runs[c])}), which the "
                f"prediction did not vary; keep one level with {param('where')}"
            )


def _metric_problem(r: dict, grid: Grid) -> str | None:
    metric = r["data"].get("metric")
    if metric is not None and metric != grid.metric:
        return f"predicts {metric!r}, the runs give {grid.metric!r}: not scored"
    return None


def score_ledger(path: Path, grid: Grid, records: list[dict] | None = None) -> pd.DataFrame:
    """One row per record: observed mean where the cell now has runs, error, verdicts.

    New runs are matched to a record by its point, its filters, every level of the other
    factors it was made at, and its metric: runs that differ in a factor the prediction did
    not vary are refused, and a record of another metric is not scored. Runs the record's
    form was fitted on (the same cell and seed id, recorded by ``predict``) are not a test of
    it: when every run at the cell is one of them the record is marked "fitted on this data:
    not a test"; otherwise they are left out and counted. Records written before run
    identities were kept fall back to the data's sha256.

    Raises
    ------
    LedgerError
        For an empty ledger, runs at a record's cell that differ in a factor it did not vary,
        or a ledger none of whose records predicts the table's metric.
    """
    records = read_ledger(path, must_exist=True) if records is None else records
    if not records:
        raise LedgerError(f"{display_path(path)}: no predictions to score")
    metrics = {r["data"].get("metric") for r in records}
    if None not in metrics and grid.metric not in metrics:
        raise LedgerError(
            f"{display_path(path)}: its records predict {', '.join(map(repr, sorted(metrics)))}"
            f", but the metric of {grid.label} is {grid.metric!r}; choose the metric the "
            f"predictions were made for with {param('metric')}"
        )
    rows = []
    runs = grid.runs
    for r in records:
        mask = _record_runs(r, grid)
        other_metric = _metric_problem(r, grid)
        if mask is not None and other_metric is None:
            _check_one_setup(r, grid, mask, display_path(path))
        frame = runs.iloc[0:0] if mask is None or other_metric is not None else runs.loc[mask]
        fitted = _fitted_mask(r, frame, grid)
        if fitted is None:  # an older record: only the file's bytes say what it was fitted on
            same = grid.sha256 is not None and r["data"].get("sha256") == grid.sha256
            n_fitted = len(frame) if same else 0
        else:
            n_fitted = int(fitted.sum())
            same = bool(len(frame)) and n_fitted == len(frame)
            if not same:
                frame = frame[~fitted]
        hit = frame[grid.metric]
        row = {
            "id": r["id"],
            "form": r["form"],
            "point": r["point"],
            "prediction": r["prediction"],
            "interval": r["interval"],
            "interval_kind": r.get("interval_kind") or OLD_INTERVAL_KIND,
            "tolerance_pct": r.get("tolerance_pct"),
            "runs": int(len(hit)),
            "fitted_on_this_data": same,
            "fitted_runs_left_out": 0 if same else n_fitted,
            "values": hit.to_numpy(float).tolist(),
            "seeds": ([_identity(v) for v in frame[grid.seed]] if grid.seed is not None else None),
        }
        obs = float(hit.mean()) if len(hit) else math.nan
        if len(hit) and math.isfinite(obs) and obs != 0:
            err = 100 * (r["prediction"] - obs) / obs
            lo, hi = r["interval"]
            tol = r.get("tolerance_pct")
            row.update(
                observed=obs,
                error_pct=err,
                inside_interval=bool(lo <= obs <= hi),
                within_tolerance=None if tol is None else bool(abs(err) <= tol),
                status="fitted on this data: not a test" if same else "scored",
            )
        else:
            row.update(
                observed=obs if len(hit) and math.isfinite(obs) else None,
                error_pct=None,
                inside_interval=None,
                within_tolerance=None,
                status=other_metric
                or (
                    "observed mean is 0: no relative error"
                    if len(hit) and obs == 0
                    else "no results yet"
                ),
            )
        rows.append(row)
    return pd.DataFrame(rows)


OLD_INTERVAL_KIND = "bootstrap: the constants only (written before intervals carried misfit)"


def interval_coverage(scores: pd.DataFrame) -> pd.DataFrame:
    """How many recorded intervals covered the observed mean, per interval kind and form.

    Only records scored against new runs count (not those fitted on the same data, nor
    cells without results). One row per (interval kind, form) and a row ``form="all"`` per
    kind: ``scored``, ``covered``, ``fraction``.
    """
    cols = ["interval_kind", "form", "scored", "covered", "fraction"]
    done = scores[scores["status"] == "scored"] if len(scores) else scores
    rows = []
    for kind, part in done.groupby("interval_kind", sort=False) if len(done) else []:
        groups = [*part.groupby("form", sort=False), ("all", part)]
        for form, sub in groups:
            covered = int(sub["inside_interval"].astype(bool).sum())
            rows.append(
                {
                    "interval_kind": kind,
                    "form": form,
                    "scored": len(sub),
                    "covered": covered,
                    "fraction": covered / len(sub),
                }
            )
    return pd.DataFrame(rows, columns=cols)


def compare_scored(scores: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """Paired tests between forms whose predictions, written before the runs, share cells.

    For each pair of forms, over the cells both predicted, the mean over cells of the
    squared-error difference of the cell means, ``(ybar - pred_a)**2 - (ybar - pred_b)**2``
    (a Diebold-Mariano comparison of fixed predictions; its expectation is the difference
    of the squared distances to the cells' true means). It is linear in the cell means, so
    its variance is exact under a model with a cell effect, a seed effect shared by runs
    with the same seed id at different cells, and run noise
    (:func:`fitrules.engine.stats.contrast_test`). Runs are not independent units when new cells
    reuse seed ids (a seed that sits low everywhere moves every cell mean together). Holm
    across pairs.
    """
    from fitrules.engine.stats import holm

    done = scores[scores["status"] == "scored"]
    key = done["point"].map(lambda p: tuple(sorted((k, round(float(v), 12)) for k, v in p.items())))
    done = done.assign(_key=key)
    forms = list(dict.fromkeys(done["form"]))
    rows = []
    for i, a in enumerate(forms):
        for b in forms[i + 1 :]:
            # the last record of each form at each cell
            A = {r["_key"]: r for r in done[done["form"] == a].to_dict("records")}
            B = {r["_key"]: r for r in done[done["form"] == b].to_dict("records")}
            common = [k for k in A if k in B]
            rows.append(_scored_pair(a, b, common, A, B, level))
    out = pd.DataFrame(rows, columns=SCORED_PAIR_COLUMNS)
    out["p_holm"] = holm(out["p"].tolist()) if len(out) else []
    return out


SCORED_PAIR_COLUMNS = [
    "a", "b", "cells", "runs", "a_closer_cells", "mean_sq_diff", "t", "df", "p", "ci", "units"
]  # fmt: skip


def _scored_pair(a, b, common, A, B, level) -> dict:
    """The contrast test of two forms' fixed predictions over the cells both predicted."""
    from fitrules.engine.stats import contrast_test

    cell, seed, y = [], [], []
    weights, offset, closer_a = {}, 0.0, 0
    has_seeds = all(A[k].get("seeds") is not None for k in common)
    for j, k in enumerate(common):
        v = np.asarray(A[k]["values"], float)
        pa, pb = float(A[k]["prediction"]), float(B[k]["prediction"])
        cell += [j] * len(v)
        seed += list(A[k]["seeds"]) if has_seeds else [f"{j}:{i}" for i in range(len(v))]
        y += v.tolist()
        # (ybar - pa)**2 - (ybar - pb)**2 = (pb - pa) * (2 * ybar - pa - pb), averaged
        weights[j] = 2 * (pb - pa) / len(common)
        offset -= (pb - pa) * (pa + pb) / len(common)
        closer_a += abs(v.mean() - pa) < abs(v.mean() - pb)
    row = {"a": a, "b": b, "cells": len(common), "runs": len(y), "a_closer_cells": int(closer_a),
           "mean_sq_diff": None, "t": None, "df": None, "p": None, "ci": (None, None),
           "units": ""}  # fmt: skip
    if not y:
        return row
    r = contrast_test(np.array(cell), np.array(seed, dtype=object).astype(str), np.array(y),
                      weights, offset, level)  # fmt: skip
    row.update(mean_sq_diff=r["estimate"], t=r["t"], df=r["df"], p=r["p"], ci=r["ci"],
               units=r["units"])  # fmt: skip
    return row


def prediction_record(fitted, grid: Grid, *, objective: str, level: float, resamples: int,
                      runs: int | None, tolerance: float | None, command: str) -> dict:  # fmt: skip
    """The ledger record of ``fitted``'s first prediction (before it is appended: no id or
    hashes yet). The interval scored later is the one for what will be measured: the mean
    of ``runs`` new runs when given, else the configuration's mean."""
    from fitrules.model.grids import derived_inputs

    pred = fitted.predictions[0]
    if runs is not None:
        interval, kind = pred["interval_runs"], pred["interval_runs_kind"]
    else:
        interval, kind = pred["interval"], pred["interval_kind"]
    if interval is None:  # one seed id in every cell: new runs' interval is not covered
        raise LedgerError(
            f"no interval for new runs to be scored against: {kind.split(': ', 1)[-1]}"
        )
    form = fitted.form
    return {
        "form": form.name,
        "expression": form.expression,
        "variables": list(form.bound_variables),
        # groups, fixed values and bounds, which the expression alone does not show
        **({"constant_setup": form.constant_notes} if form.constant_notes else {}),
        "constants": fitted.constants,
        "objective": objective,
        "point": pred["given"],
        "at": pred["point"],
        "prediction": pred["prediction"],
        "interval": interval,
        "interval_kind": kind,
        "intervals": {
            "mean": pred["interval"],
            **({f"mean_of_{runs}_runs": pred["interval_runs"]} if runs else {}),
            **(
                {"mean_at_grid_seed_ids": pred["interval_grid_seeds"]}
                if pred.get("interval_grid_seeds") is not None
                else {}
            ),
            "constants_only": pred.get("constants_interval"),
        },
        "runs": runs,
        "misfit_sd": pred["misfit_sd"],
        "extrapolation": pred["extrapolation"],
        "level": level,
        "resamples": resamples,
        "bootstrap": fitted.bootstrap.kind if fitted.bootstrap else None,
        "tolerance_pct": tolerance,
        # outside information about the seed noise the interval took, when given
        **{k: v for k, v in (fitted.call or {}).items() if k in ("seed_sd", "seed_pool")},
        "setup": prediction_setup(
            grid, [*form.bound_variables, *pred["given"], *derived_inputs(grid)]
        ),
        "data": {
            "path": grid.label,
            "sha256": grid.sha256,
            "where": list(grid.where),
            "derive": list(grid.derive),
            "metric": grid.metric,
            "fitted_runs": fitted_runs_at(grid, pred["given"]),
        },
        "command": command,
    }


@dataclass
class LedgerEntry(Result):
    """A prediction written to a ledger before its runs: what ``fr.predict`` returns.

    Attributes
    ----------
    ledger : the ledger's path.
    record : the record as appended (its id, hashes and every field scoring reads).
    notes : lines on how the table was taken (rows filtered out, columns pooled).
    fitted : the :class:`fitrules.jobs.fit.FittedForm` the prediction came from.
    """

    ledger: Path
    record: dict
    notes: list[str]
    fitted: Any = field(default=None, repr=False)

    @property
    def sentence(self) -> str:
        """What was recorded, in one line."""
        from fitrules.engine.intervals import format_point

        rec = self.record
        lo, hi = rec["interval"]
        extra = rec["extrapolation"]
        return (
            f"{self.ledger}: record {rec['id']}: {rec['form']} predicts {rec['prediction']:.4f} "
            f"at {format_point(rec['point'])} ({round(100 * rec['level'])}% interval {lo:.4f} "
            f"to {hi:.4f}, {rec['interval_kind']}"
            + (
                "; outside the fitted cells: "
                + ", ".join(f"{k} {v:.3g}x beyond" for k, v in extra.items())
                if extra
                else ""
            )
            + (f"; tolerance {rec['tolerance_pct']:g}%" if rec["tolerance_pct"] is not None else "")
            + ")"
        )

    @property
    def head(self) -> str:
        """The ledger's head after this record: keep it elsewhere to detect a rewrite."""
        return f"{self.ledger}: {describe_head(self.record['id'], self.record['sha256'])}"

    def text(self) -> str:
        return "\n".join([self.sentence, *self.notes, self.head])

    def to_dict(self) -> dict:
        return {"ledger": str(self.ledger), "record": self.record}


@dataclass
class Scores(Result):
    """A ledger's predictions scored against the new runs: what ``fr.score`` returns.

    Attributes
    ----------
    scores : one row per record: the new runs' mean, the error, whether the interval covered.
    coverage : per form, how many intervals covered the new means.
    pairs : per pair of forms, the paired test on the records both predicted.
    data : where the new runs came from.
    """

    scores: pd.DataFrame
    coverage: pd.DataFrame
    pairs: pd.DataFrame
    data: dict
    inputs: list[Path] = field(default_factory=list, repr=False)

    def text(self) -> str:
        from fitrules.views.text import render_coverage, render_scored_pairs, render_scores

        text = render_scores(self.scores, self.data)
        if len(self.coverage):
            text += "\n\n" + render_coverage(self.coverage)
        if len(self.pairs):
            text += "\n\n" + render_scored_pairs(self.pairs)
        return text

    def to_dict(self) -> dict:
        from fitrules.base.util import json_ready

        return json_ready({
            "data": self.data,
            "scores": self.scores.to_dict("records"),
            "coverage": self.coverage.to_dict("records"),
            "pairs": self.pairs.to_dict("records"),
        })  # fmt: skip


def score(ledger: Path, grid: Grid, head: str | None = None) -> Scores:
    """Score every record of ``ledger`` against ``grid``'s runs (refusing a ledger whose
    chain does not hold ``head``, when given)."""
    parsed = parse_head(head) if head is not None else None
    records = read_ledger(ledger, must_exist=True)
    if parsed is not None:
        verify_head(ledger, records, parsed)
    return _scored(ledger, grid, records)


def _scored(ledger: Path, grid: Grid, records: list[dict]) -> Scores:
    table = score_ledger(ledger, grid, records=records)
    inputs = [Path(ledger), *([Path(grid.input_file)] if grid.input_file is not None else [])]
    return Scores(table, interval_coverage(table), compare_scored(table),
                  score_data(grid, records), inputs)  # fmt: skip


@dataclass
class LedgerCheck(Result):
    """A ledger's chain checked: what ``fr.verify_ledger`` returns.

    Attributes
    ----------
    ledger : the ledger's path; records : how many it holds.
    head_index : the record the given head names (None without a head).
    last : the last record (its id and hash make the head to keep).
    """

    ledger: Path
    records: int
    head_index: int | None
    last: dict = field(repr=False)

    @property
    def sentence(self) -> str:
        n, i = self.records, self.head_index
        if i is None:
            return (
                # flag words: printed advice on the command line
                f"{self.ledger}: {n} records, chain intact (without --head a removed "
                "last record or a rewritten chain cannot be detected)"
            )
        return f"{self.ledger}: {n} records, chain intact; the recorded head is record {i}" + (
            f"; records {i + 1} to {n} came after it and are covered by the chain only"
            if n - i
            else ""
        )

    @property
    def head(self) -> str:
        """The head to keep elsewhere: the last record's id and hash."""
        return f"{self.ledger}: {describe_head(self.last['id'], self.last['sha256'])}"

    def text(self) -> str:
        return self.sentence + "\n" + self.head

    def to_dict(self) -> dict:
        return {"ledger": str(self.ledger), "records": self.records,
                "head_index": self.head_index, "last": self.last}  # fmt: skip


def verify_ledger(ledger: Path, head: str | None = None) -> LedgerCheck:
    """Check ``ledger``'s hash chain, and that it still holds ``head`` when given."""
    parsed = parse_head(head) if head is not None else None
    records = read_ledger(ledger, must_exist=True)
    if not records:
        raise LedgerError(f"{ledger}: holds no records")
    i = verify_head(ledger, records, parsed) if parsed is not None else None
    return LedgerCheck(Path(ledger), len(records), i, records[-1])
