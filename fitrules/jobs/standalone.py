"""A fit that travels: what :meth:`FittedForm.to_dict` records so that
:func:`fitrules.load_fit` makes the fit again with no data beside it and no refit.

The record (the ``standalone`` key of a saved fit, declared in
:data:`fitrules.jobs.saved_fit.STANDALONE`) holds the ingredients of every number a fit
gives: the fitted cells (the grid's ranges, which the extrapolation words read), the fit's
result, the Jacobian covariance, the leave-one-cell-out refits that prediction intervals
read, the bootstrap's refits and the profile's intervals when there were any. Every float is
written as its hexadecimal text (``float.hex``), so the loaded fit predicts, allocates and
renders exactly what the saved one did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fitrules.base.errors import SavedFitError

if TYPE_CHECKING:
    from fitrules.jobs.fit import FittedForm
    from fitrules.jobs.saved_fit import SavedFit


# ------------------------------------------------------------------ writing
def _hex(x: Any) -> str:
    return float(x).hex()


def _array(a: Any) -> dict:
    a = np.asarray(a)
    out: dict = {"shape": list(a.shape), "values": [_hex(v) for v in a.astype(float).ravel()]}
    if np.issubdtype(a.dtype, np.integer):
        out["dtype"] = "int64"
    return out


def _maybe(a: Any) -> dict | None:
    return None if a is None else _array(a)


def _offset(o) -> dict | None:
    if o is None:
        return None
    return {"var": _hex(o.var), "df": int(o.df), "var_run": _hex(o.var_run),
            "shares": _array(o.shares), "seeds": [str(s) for s in o.seeds],
            "relative": bool(o.relative), "shared_var": _hex(o.shared_var),
            "method": o.method}  # fmt: skip


def _column(values: pd.Series) -> dict | list:
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return _array(values.to_numpy())
    return [str(v) for v in values]


def _edges(edges: dict) -> dict:
    out = {}
    for v, pair in edges.items():
        out[str(v)] = [
            None if side is None else {"residuals": _array(side[0]),
                                       "cells": [int(i) for i in side[1]],
                                       "se2": _array(side[2]), "s2": _hex(side[3])}
            for side in pair
        ]  # fmt: skip
    return out


def standalone_record(fitted: FittedForm) -> dict:
    """The ingredients of ``fitted`` (see the module): what :func:`standalone_fit` reads."""
    cells, r, u = fitted.cells, fitted.result, fitted.uncertainty
    held = fitted.prediction_heldout
    out: dict = {
        "constants": list(fitted.form.constants),
        "cells": {
            "variables": list(cells.variables),
            "metric": str(cells.metric),
            "units": {str(k): str(v) for k, v in (cells.units or {}).items()},
            "columns": {str(c): _column(cells.table[c]) for c in cells.table.columns},
        },
        "result": {"objective": _hex(r.objective), "n_train": int(r.n_train),
                   "converged": bool(r.converged), "cond": _hex(r.cond),
                   "reasons": [str(x) for x in r.reasons]},  # fmt: skip
        "uncertainty": {"covariance": _array(u.covariance), "residual_sd": _hex(u.residual_sd),
                        "dof": int(u.dof), "rank": int(u.rank), "note": str(u.note)},  # fmt: skip
        "derive": list(fitted.derive),
        "harness": bool(fitted.harness),
        "unit": fitted.unit,
        "heldout": None,
        "seed_offset": _offset(fitted.seed_offset),
        "offset_response": _maybe(fitted.offset_response),
        "bootstrap": None,
        "profile": None,
    }
    if held is not None:
        out["heldout"] = {
            "asked": fitted.heldout is not None,
            "draws": _array(held.draws), "residuals": _array(held.residuals),
            "noise": {"cv": _hex(held.noise.cv), "runs": int(held.noise.runs),
                      "cells": int(held.noise.cells), "method": held.noise.method},
            "relative": bool(held.relative), "level": float(held.level),
            "robust": bool(held.robust), "offset": _offset(held.offset),
            "response": _maybe(held.response), "offset_note": str(held.offset_note),
            "edges": _edges(held.edges),
        }  # fmt: skip
    b = fitted.bootstrap
    if b is not None:
        out["bootstrap"] = {"level": float(b.level), "resamples": int(b.resamples),
                            "seed": int(b.seed), "draws": _array(b.draws),
                            "failed": int(b.failed), "single_run_cells": int(b.single_run_cells),
                            "kind": b.kind, "reason": str(b.reason),
                            "covariance": _maybe(b.covariance),
                            "covariances": _maybe(b.covariances)}  # fmt: skip
    p = fitted.profile
    if p is not None:
        out["profile"] = {
            "constants": list(p.constants),
            "intervals": {c: [_hex(lo), _hex(hi)] for c, (lo, hi) in p.intervals.items()},
            "notes": {c: str(n) for c, n in p.notes.items()},
            "level": float(p.level), "dof": int(p.dof), "threshold": _hex(p.threshold),
            "objective": _hex(p.objective), "refits": int(p.refits),
            "wald_se": {c: _hex(v) for c, v in p.wald_se.items()},
            "calibration": str(p.calibration),
            "better": None if p.better is None else _hex(p.better),
            "constrained": [str(c) for c in p.constrained],
        }  # fmt: skip
    return out


# ------------------------------------------------------------------ reading
def _float(text: str) -> float:
    return float.fromhex(text)


def _unarray(d: dict) -> np.ndarray:
    a = np.array([float.fromhex(v) for v in d["values"]], float).reshape(d["shape"])
    return a.astype(np.int64) if d.get("dtype") == "int64" else a


def _unmaybe(d: dict | None) -> np.ndarray | None:
    return None if d is None else _unarray(d)


def _unoffset(d: dict | None):
    from fitrules.engine.intervals import SeedOffset

    if d is None:
        return None
    return SeedOffset(_float(d["var"]), d["df"], _float(d["var_run"]), _unarray(d["shares"]),
                      tuple(d["seeds"]), d["relative"], _float(d["shared_var"]),
                      d["method"])  # fmt: skip


def _unedges(d: dict) -> dict:
    return {
        v: tuple(None if s is None else (_unarray(s["residuals"]), np.array(s["cells"], int),
                                         _unarray(s["se2"]), _float(s["s2"]))
                 for s in pair)
        for v, pair in d.items()
    }  # fmt: skip


def standalone_fit(saved: SavedFit, form, constants: dict[str, float]) -> FittedForm:
    """The fit ``saved`` records, made from its ``standalone`` ingredients (no data, no
    refit): ``form`` is the saved form as given (customised, unbound), ``constants`` the
    saved constants as exactly as saved.

    Raises
    ------
    SavedFitError
        In one line naming the file, for ingredients that do not fit together (an array of
        another shape than the form's constants and the cells give, a form that binds to
        other constants).
    """
    try:
        return _standalone_fit(saved, form, constants)
    except SavedFitError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise SavedFitError(
            f"{saved.label}: standalone does not fit together ({type(err).__name__}: "
            f"{str(err)[:120]}); load it with data= to refit it from its table"
        ) from None


def _standalone_fit(saved: SavedFit, form, constants: dict[str, float]) -> FittedForm:
    from fitrules.engine.constraints import parse_constraints
    from fitrules.engine.fit import FitResult, Objective
    from fitrules.engine.intervals import BootstrapFit, HeldOut, JacobianUncertainty
    from fitrules.engine.intervals.noise import SeedNoise
    from fitrules.engine.profile import ProfileFit
    from fitrules.jobs.fit import FittedForm
    from fitrules.model.grids import Cells

    doc, label = saved.doc, saved.label
    rec, call = doc["standalone"], doc["call"]
    c = rec["cells"]
    table = pd.DataFrame(
        {k: _unarray(v) if isinstance(v, dict) else list(v) for k, v in c["columns"].items()}
    )
    lacking = [v for v in c["variables"] if v not in table.columns]
    if lacking or "value" not in table.columns or "n_seeds" not in table.columns:
        raise SavedFitError(
            f"{label}: standalone.cells.columns lacks "
            f"{', '.join(map(repr, lacking or ['value', 'n_seeds']))}; it must hold every "
            "variable, value and n_seeds"
        )
    cells = Cells(table, tuple(c["variables"]), c["metric"], dict(c["units"]))
    with saved.refusals():
        bound = form.bind(list(table.columns), table)
    if list(bound.constants) != list(rec["constants"]) or set(constants) != set(bound.constants):
        raise SavedFitError(
            f"{label}: the form binds to constants {', '.join(bound.constants)}, not the saved "
            f"{', '.join(rec['constants'])}"
        )
    theta = {k: constants[k] for k in bound.constants}
    p, n = len(bound.constants), len(table)
    r = rec["result"]
    result = FitResult(bound.name, theta, _float(r["objective"]), r["n_train"], r["converged"],
                       _float(r["cond"]), list(r["reasons"]))  # fmt: skip
    u = rec["uncertainty"]
    cov = _unarray(u["covariance"]).reshape(p, p)
    unc = JacobianUncertainty(tuple(bound.constants), cov, _float(u["residual_sd"]), u["dof"],
                              u["rank"], u["note"])  # fmt: skip
    obj = Objective(call["objective"], call["delta"])
    boot = None
    if (b := rec["bootstrap"]) is not None:
        cv = _unmaybe(b["covariances"])
        boot = BootstrapFit(bound, result, b["level"], b["resamples"], b["seed"],
                            _unarray(b["draws"]).reshape(-1, p), b["failed"],
                            b["single_run_cells"], [], b["kind"], b["reason"],
                            None if b["covariance"] is None
                            else _unarray(b["covariance"]).reshape(p, p),
                            None if cv is None else cv.reshape(-1, p, p))  # fmt: skip
    fitted = FittedForm(bound, result, cells, obj, unc, dict(doc["data"]), rec["unit"], boot,
                        derive=tuple(rec["derive"]), weights=call["weights"],
                        harness=rec["harness"])  # fmt: skip
    fitted.seed_offset = _unoffset(rec["seed_offset"])
    fitted.offset_response = _unmaybe(rec["offset_response"])
    if (h := rec["heldout"]) is not None:
        nz = h["noise"]
        held = HeldOut(
            bound, dict(theta), cells.X, cells.y, table["n_seeds"].to_numpy(float),
            _unarray(h["draws"]).reshape(n, p), _unarray(h["residuals"]).reshape(n),
            SeedNoise(_float(nz["cv"]), nz["runs"], nz["cells"], nz["method"]),
            h["relative"], float(h["level"]), h["robust"], _unoffset(h["offset"]),
            _unmaybe(h["response"]), h["offset_note"], _unedges(h["edges"]),
        )  # fmt: skip
        if h["asked"]:
            fitted.heldout = held
        else:
            fitted.keep_heldout(held)
    if (pr := rec["profile"]) is not None:
        fitted.profile = ProfileFit(
            tuple(pr["constants"]),
            {k: (_float(lo), _float(hi)) for k, (lo, hi) in pr["intervals"].items()},
            dict(pr["notes"]), pr["level"], pr["dof"], _float(pr["threshold"]),
            _float(pr["objective"]), pr["refits"], {k: _float(v) for k, v in pr["wald_se"].items()},
            pr["calibration"], None if pr["better"] is None else _float(pr["better"]),
            list(pr["constrained"]),
        )  # fmt: skip
    given = call.get("constraints")
    fitted.constraints = parse_constraints(given, bound.constants, bound.name) if given else None
    fitted.call = {k: v for k, v in call.items() if k != "constants_exact"}
    fitted.predictions = []
    return fitted
