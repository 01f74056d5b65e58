"""Predictions written before the run: an append-only, hash-chained JSON-lines ledger.

``fitrules predict`` appends one record per prediction: the form, its constants, the
prediction and its bootstrap interval at the cell, the sha256 of the data it was fitted on,
the command, the time and the tolerance its author commits to. Each record carries the sha256
of its own content and of the record before it, so a changed, removed or reordered record is
detected. ``fitrules score`` reads the ledger, never writes it, and scores every record whose
cell now has results.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from fitrules import expr as ex
from fitrules.errors import LedgerError
from fitrules.grids import Grid, display_path
from fitrules.util import atomic_write_text


def _digest(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=False).encode()).hexdigest()


def read_ledger(path: Path) -> list[dict]:
    """Every record, after checking each one's hash and the chain between them."""
    path = Path(path)
    if not path.exists():
        return []
    records, prev = [], None
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise LedgerError(f"{display_path(path)}: line {i} is not JSON ({err.msg})") from None
        if not isinstance(rec, dict) or "sha256" not in rec:
            raise LedgerError(f"{display_path(path)}: line {i} is not a prediction record")
        if _digest(rec) != rec["sha256"]:
            raise LedgerError(
                f"{display_path(path)}: record {rec.get('id', i)} (line {i}) was "
                "changed after it was written: its stored sha256 no longer matches"
            )
        if rec.get("prev_sha256") != prev:
            raise LedgerError(
                f"{display_path(path)}: record {rec.get('id', i)} (line {i}) does "
                "not follow the record before it: a record was removed or reordered"
            )
        prev = rec["sha256"]
        records.append(rec)
    return records


def append_prediction(path: Path, record: dict) -> dict:
    """Append ``record`` (id, chain and hash are added); existing records are never changed."""
    path = Path(path)
    records = read_ledger(path)
    for r in records:
        if (r["form"], r["point"], r["data"]["sha256"]) == (
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
    rec["sha256"] = _digest(rec)
    old = path.read_text() if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    atomic_write_text(path, old + json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")
    return rec


def score_ledger(path: Path, grid: Grid) -> pd.DataFrame:
    """One row per record: observed mean where the cell now has runs, error, verdicts."""
    records = read_ledger(path)
    if not records:
        raise LedgerError(f"{display_path(path)}: no predictions to score")
    rows = []
    runs = grid.runs
    for r in records:
        mask = pd.Series(True, index=runs.index)
        missing = [k for k in r["point"] if k not in runs.columns]
        for k, v in r["point"].items():
            if k in runs.columns:
                mask &= np.isclose(runs[k].astype(float), v, rtol=1e-9, atol=0)
        for cond in r["data"].get("where", []):
            node = ex.parse(cond, logical=True)
            if all(n in runs.columns for n in ex.names(node)):
                mask &= np.asarray(
                    ex.evaluate(node, {c: runs[c].to_numpy() for c in ex.names(node)}), bool
                )
        hit = runs.loc[mask, grid.metric] if not missing else runs.iloc[0:0][grid.metric]
        row = {
            "id": r["id"],
            "form": r["form"],
            "point": r["point"],
            "prediction": r["prediction"],
            "interval": r["interval"],
            "tolerance_pct": r.get("tolerance_pct"),
            "runs": int(len(hit)),
            "values": hit.to_numpy(float).tolist(),
        }
        if len(hit):
            obs = float(hit.mean())
            err = 100 * (r["prediction"] - obs) / obs
            lo, hi = r["interval"]
            tol = r.get("tolerance_pct")
            row.update(
                observed=obs,
                error_pct=err,
                inside_interval=bool(lo <= obs <= hi),
                within_tolerance=None if tol is None else bool(abs(err) <= tol),
                status="scored",
            )
        else:
            row.update(
                observed=None,
                error_pct=None,
                inside_interval=None,
                within_tolerance=None,
                status="no results yet",
            )
        rows.append(row)
    return pd.DataFrame(rows)


def compare_scored(scores: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Paired tests between forms whose predictions, written before the runs, share cells.

    For each pair of forms, over every new run at a cell both predicted, the loss
    differential ``d = (y - pred_a)**2 - (y - pred_b)**2`` (a Diebold-Mariano comparison of
    fixed predictions): the runs are independent given the cells, so a t test over them asks
    whether one form's predictions are closer to what the runs gave. Holm across pairs.
    """
    from scipy import stats as sst

    from fitrules.stats import holm

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
            parts: list[np.ndarray] = []
            closer_a = 0
            for k in common:
                y = np.asarray(A[k]["values"], float)
                pa, pb = float(A[k]["prediction"]), float(B[k]["prediction"])
                parts.append((y - pa) ** 2 - (y - pb) ** 2)
                closer_a += abs(y.mean() - pa) < abs(y.mean() - pb)
            d = np.concatenate(parts) if parts else np.zeros(0)
            row = {
                "a": a,
                "b": b,
                "cells": len(common),
                "runs": len(d),
                "a_closer_cells": int(closer_a),
                "mean_sq_diff": float(d.mean()) if len(d) else None,
                "t": None,
                "p": None,
                "ci": (None, None),
            }
            if len(d) >= 2 and d.std(ddof=1) > 0:
                se = d.std(ddof=1) / np.sqrt(len(d))
                q = sst.t.ppf(0.5 + level / 2, len(d) - 1)
                row.update(
                    t=float(d.mean() / se),
                    p=float(2 * sst.t.sf(abs(d.mean() / se), len(d) - 1)),
                    ci=(float(d.mean() - q * se), float(d.mean() + q * se)),
                )
            rows.append(row)
    out = pd.DataFrame(
        rows, columns=["a", "b", "cells", "runs", "a_closer_cells", "mean_sq_diff", "t", "p", "ci"]
    )
    out["p_holm"] = holm(out["p"].tolist()) if len(out) else []
    return out
