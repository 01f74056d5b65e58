"""The paired verdicts: which pairs are tested, the verdict protocol's splits, and the test of
each pair (corrected t, sign-flip over held-out cells or groups) with Holm's adjustment."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fitrules.base.errors import FormError, SplitError, param
from fitrules.engine.fit import fit_splits
from fitrules.engine.metrics import RELATIVE
from fitrules.engine.stats import cells_verdict, holm, paired_verdict, units_verdict
from fitrules.jobs.compare.scoring import (
    _Fitting,
    _unfitted_table,
    heldout_table,
    prediction_table,
)
from fitrules.model.forms import Form
from fitrules.model.splits import RandomSplit
from fitrules.views.text_compare import verdict_of


# Train fraction of the verdict protocol. Random thirds describe what a third of the grid
# predicts, but the corrected t test over them has almost no power on a 20-cell grid (its
# n_test/n_train = 2 term overstates the variance 4 to 9 times); at 0.9 the same test keeps
# its level and has power at 2 to 3x error ratios (benchmarks/bench_calibration.py).
def verdict_splitter(splitter: RandomSplit, n_cells: int, train_frac: float) -> RandomSplit | None:
    """The random splits the paired tests are made on, or None when ``splitter`` is one.

    Same number of splits and seed as ``splitter``, fitting ``train_frac`` of the cells (at
    least one cell held out).
    """
    check_verdict_train_frac(train_frac)
    if splitter.train_frac >= train_frac:
        return None
    k = min(int(np.floor(train_frac * n_cells + 0.5)), n_cells - 1)
    if k <= splitter.n_train(n_cells):
        return None
    return RandomSplit(splitter.n_splits, k / n_cells, splitter.seed)


def check_verdict_train_frac(train_frac: float) -> None:
    """Refuse a verdict train fraction outside (0, 1) with :class:`SplitError`."""
    ok = isinstance(train_frac, int | float) and not isinstance(train_frac, bool)
    if not (ok and 0 < train_frac < 1):
        raise SplitError(
            f"{param('verdict_train_frac')} {train_frac!r}: must be in (0, 1), e.g. 0.9"
        )


def family(
    names: Sequence[str], pairs: Sequence[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """The pairs of forms tested, in the order the forms were given.

    ``None`` means every pair. Each named pair must be two different forms of ``names``;
    a pair named twice (either way round) counts once.

    Raises
    ------
    FormError
        For a pair naming a form not compared, or a form paired with itself.
    """
    if pairs is None:
        return list(itertools.combinations(names, 2))
    out: list[tuple[str, str]] = []
    for a, b in pairs:
        for x in (a, b):
            if x not in names:
                raise FormError(
                    f"pair {a}:{b}: no form {x!r} in this comparison; forms: {', '.join(names)}"
                )
        if a == b:
            raise FormError(f"pair {a}:{b}: a form cannot be compared with itself")
        if (a, b) not in out and (b, a) not in out:
            out.append((a, b))
    if not out:
        raise FormError("no pair of forms to compare: name at least one pair")
    return out


def parse_pairs(text: str | None, against: str | None, names: Sequence[str]):
    """``--pairs "a:b,a:c"`` or ``--against a`` -> the family of pairs (None: all pairs)."""
    if text is not None and against is not None:
        raise FormError(
            f"{param('pairs')} and {param('against')} both name the pairs tested: give one"
        )
    if against is not None:
        if against not in names:
            raise FormError(
                f"{param('against')} {against!r}: no such form in this comparison; forms: "
                + ", ".join(names)
            )
        return [(against, n) for n in names if n != against] or family(names, [])
    if text is None:
        return None
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        a, sep, b = part.partition(":")
        if not sep or not a.strip() or not b.strip():
            raise FormError(f"{param('pairs')} {text!r}: {part!r} is not of the form A:B")
        pairs.append((a.strip(), b.strip()))
    return family(names, pairs)


VERDICT_COLUMNS = ["split", "form", "heldout_error", "n_train", "n_test", "used", "reasons"]


def _verdict_rows(
    f, X, y, masks, objective, options, on_progress, keep_degenerate, heldout=None, metric=RELATIVE
):
    """Held-out errors of one form on the verdict protocol's splits, in ``metric`` (cells
    weighted by ``heldout``, as the descriptive splits' are)."""
    fits = fit_splits(f, X, y, masks, objective, options, on_progress)
    unfitted = _unfitted_table(f, X, masks).any(axis=1)
    errs = heldout_table(y, prediction_table(f, X, fits), masks, heldout, metric)["heldout_error"]
    rows = []
    for s, (mask, r) in enumerate(zip(masks, fits, strict=True)):
        reasons = list(r.reasons)
        err = errs[s] if np.isfinite(r.objective) and not unfitted[s] else np.nan
        if not np.isfinite(err):
            # a level with no training cell has no fitted constant: the split names it
            reasons.append(
                "a held-out cell's level has no training cell"
                if unfitted[s]
                else "prediction is not finite on held-out cells"
            )
            err = np.nan
        rows.append(
            {
                "split": s,
                "form": f.name,
                "heldout_error": float(err),
                "n_train": int(mask.sum()),
                "n_test": int((~mask).sum()),
                "used": bool(np.isfinite(err) and (keep_degenerate or not reasons)),
                "reasons": reasons,
            }
        )
    return pd.DataFrame(rows)


def _leaves_one_out(splitter, vsplit: RandomSplit | None, n: int) -> bool:
    """Whether the verdict protocol holds out one cell: it then has only n distinct splits,
    each cell held out once, and the test is made over the cells (stats.cells_verdict)."""
    return isinstance(splitter, RandomSplit) and n - (vsplit or splitter).n_train(n) == 1


def _verdict_results(
    results: pd.DataFrame,
    bound: list[Form],
    vsplit: RandomSplit | None,
    loo: bool,
    n: int,
    fitting: _Fitting,
) -> pd.DataFrame:
    """The rows the paired tests are made on: the descriptive ones, unless the verdict
    protocol has splits of its own."""
    if vsplit is None and not loo:
        return results
    vmasks = ~np.eye(n, dtype=bool) if loo else vsplit.masks(n)
    X, y, objective, options = fitting.X, fitting.y, fitting.objective, fitting.options
    return pd.concat(
        [
            _verdict_rows(
                f,
                X,
                y,
                vmasks,
                objective,
                options,
                fitting.on_progress,
                fitting.keep_degenerate,
                fitting.heldout,
                fitting.metric,
            )
            for f in bound
        ],
        ignore_index=True,
    )


def _paired(
    results, verdict, pairs, random: bool, level: float, cell_errors, loo: bool = False
) -> pd.DataFrame:
    """Descriptive counts from ``results``; the test from ``verdict`` (the same table when
    the descriptive protocol is its own verdict protocol)."""
    wide = results.pivot(index="split", columns="form", values="heldout_error")
    ok = results.pivot(index="split", columns="form", values="used")
    vwide = verdict.pivot(index="split", columns="form", values="heldout_error")
    vok = verdict.pivot(index="split", columns="form", values="used")
    n_train = int(verdict["n_train"].min())
    n_test = int(verdict["n_test"].min())
    by_form = {
        f: (t["cell"].tolist(), t["median_error"].to_numpy(float))
        for f, t in cell_errors.groupby("form", sort=False)
    }
    rows = []
    for a, b in pairs:
        both = (ok[a] & ok[b]).to_numpy(bool)
        ea, eb = wide[a].to_numpy()[both], wide[b].to_numpy()[both]
        if random:
            v = paired_verdict(ea, eb)  # descriptive: counts, ties, median difference
            vboth = (vok[a] & vok[b]).to_numpy(bool)
            va, vb = vwide[a].to_numpy()[vboth], vwide[b].to_numpy()[vboth]
            if loo:
                test = cells_verdict(va, vb, level)
            else:
                test = paired_verdict(va, vb, n_train, n_test, level)
            v.update({k: test[k] for k in TEST_KEYS})
            v["verdict_n"] = test["n"]
        else:
            v = units_verdict(ea, eb)
        rows.append(
            {
                "a": a,
                "b": b,
                **v,
                "splits": int(len(both)),
                "deciding_cells": _deciding(by_form, a, b),
            }
        )
    paired = pd.DataFrame(rows)
    if len(paired):
        paired["p_holm"] = holm(paired["p"].tolist())
        paired["verdict"] = [verdict_of(r) for r in paired.to_dict("records")]
    return paired


TEST_KEYS = ("test", "t", "df", "p", "ratio", "ratio_ci", "diff_ci")


def _deciding(by_form: dict, a: str, b: str, k: int = 3) -> list[dict]:
    """The cells where the two forms' median held-out errors differ most; ``by_form``: per
    form, its cells' labels and median errors, every form's cells in the same order (as
    :func:`~fitrules.jobs.compare.summaries._cell_table` lists them)."""
    (cells, ea), (_, eb) = by_form[a], by_form[b]
    with np.errstate(invalid="ignore"):
        d = ea - eb
    kept = np.flatnonzero(~np.isnan(d))
    # the largest differences first, ties in the cells' order (a stable descending sort)
    top = kept[np.argsort(-np.abs(d[kept]), kind="stable")[:k]]
    return [{"cell": cells[i], "a": float(ea[i]), "b": float(eb[i])} for i in top.tolist()]
