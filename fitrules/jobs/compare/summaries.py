"""Per-form summaries of held-out error, ranked on the splits valid for every form, and each
cell's error per form; warnings for forms most of whose splits were set aside."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pandas as pd

from fitrules.engine.metrics import robust_summary
from fitrules.model.forms import Form
from fitrules.model.grids import Cells
from fitrules.views.text_compare import rank_value


def _reason_key(reason: str) -> str:
    """Group reasons that differ only in numbers after a colon or in parentheses."""
    return reason.split(" (")[0]


MOST = 0.5  # a form with more than this fraction of its splits set aside gets a warning


def set_aside_warnings(summary: pd.DataFrame, reasons: dict, n_splits: int) -> list[str]:
    """A sentence for each form most of whose splits were set aside, saying why.

    A verdict on the splits that remain describes those splits only: when most were set
    aside (e.g. the optimiser did not converge on them), the reader must know.
    """
    out = []
    for r in summary.to_dict("records"):
        gone = n_splits - int(r["splits_used"])
        if n_splits and gone > MOST * n_splits:
            why = "; ".join(f"{c} x {k}" for k, c in list(reasons.get(r["form"], {}).items())[:3])
            out.append(
                f"{r['form']}: {gone} of {n_splits} splits set aside ({why or 'no valid error'}); "
                f"its summary and verdicts rest on the other {r['splits_used']}, which may not "
                "be typical"
            )
    return out


COMMON_MIN = 30  # fewest splits valid for every form on which the ranking is made


def _summarise(results: pd.DataFrame, forms: list[Form], keep_degenerate: bool):
    rows, reasons, wild = [], {}, {}
    # the splits valid for every form: a median over each form's own valid splits favours a
    # form that fails on the hard splits, so the ranking is made on these when there are
    # enough of them (issue 42: composition over 279, composition_per_h over 186)
    used_by = results.pivot(index="split", columns="form", values="used").astype(bool)
    common = used_by.all(axis=1)
    n_common = int(common.sum())
    ranked_on = "common" if n_common >= COMMON_MIN or len(forms) == 1 else "own"
    for f in forms:
        df = results[results["form"] == f.name]
        used = df[df["used"]]
        e = used["heldout_error"].to_numpy(float)
        tame = used.loc[~used["wild"], "heldout_error"].to_numpy(float)
        counts = Counter(_reason_key(x) for rs in df["reasons"] for x in rs)
        reasons[f.name] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        named = used[used["wild"]]
        wild[f.name] = [
            f"split {s}: {'; '.join(g)}"
            for s, g in zip(named["split"], named["guard_reasons"], strict=True)
        ]
        fl = used["noise_floor"].dropna().to_numpy(float)
        on_common = used[used["split"].map(common).fillna(False).astype(bool)]
        ec = on_common["heldout_error"].to_numpy(float)
        rows.append(
            {
                "form": f.name,
                "constants": len(f.constants),
                "splits_used": int(len(e)),
                "common_splits": n_common,
                "common_median": float(np.median(ec)) if len(ec) else np.nan,
                "ranked_on": ranked_on,
                "degenerate_splits": int(df["degenerate"].sum()),
                "wild_splits": int(used["wild"].sum()),
                **robust_summary(e),
                "worst_split": float(e.max()) if len(e) else np.nan,
                "worst_cell": float(used["worst_cell"].max()) if len(e) else np.nan,
                "noise_floor": float(np.median(fl)) if len(fl) else np.nan,
                **robust_summary(tame, "tame_"),
                "mean": float(e.mean()) if len(e) else np.nan,
            }
        )
    return pd.DataFrame(rows), reasons, wild


def _cell_table(cells: Cells, at_cell: dict) -> pd.DataFrame:
    """Each cell's held-out error per form over the used splits that held it out: median
    (robust to a runaway split) and mean."""
    rows = []
    source = cells.table["_source"] if "_source" in cells.table else None
    labels = [
        cells.label(i) + (f" ({source.iloc[i]} grid)" if source is not None else "")
        for i in range(len(cells))
    ]
    values = np.asarray(cells.y, float).tolist()
    for f, errs in at_cell.items():
        cnt = np.isfinite(errs).sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a cell never held out: NaN
            med, mean = np.nanmedian(errs, axis=0), np.nanmean(errs, axis=0)
        for i in range(len(cells)):
            rows.append(
                {
                    "cell_index": i,
                    "cell": labels[i],
                    "value": values[i],
                    "form": f,
                    "splits": int(cnt[i]),
                    "median_error": float(med[i]),
                    "mean_error": float(mean[i]),
                }
            )
    return pd.DataFrame(rows)


def ranked(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's rows ranked by median held-out error (the robust statistic every view
    ranks by) on the splits valid for every form, or on each form's own valid splits when
    too few are common (:func:`fitrules.views.text.rank_value`); forms without a valid
    split last; ties keep the forms' order."""
    key = np.array([rank_value(r) for r in summary.to_dict("records")], float)
    return summary.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
