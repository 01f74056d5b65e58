"""Diagnostics of a fit: the named reasons its constants may not be identified."""

from __future__ import annotations

import numpy as np

from fitrules.engine.fit.lm import _gather
from fitrules.engine.fit.weights import _root_weights
from fitrules.model import expr as ex
from fitrules.model.compiled import CompiledForm, trained_levels
from fitrules.model.forms import base_name, format_level

RANK_TOL = 1e-9  # singular values below this fraction of the largest count as zero
COND_LIMIT = 1e6  # condition number of the scaled Jacobian above which a fit is flagged


def _diagnose(cf: CompiledForm, X, y, masks, params, objective, converged):
    """Condition numbers and reasons for every split at once; params (S, p)."""
    ok = np.isfinite(params).all(axis=1)
    safe = np.where(ok[:, None], params, 0.0)
    Js, colnorm, sv_full, vt = _relative_jacobians(cf, X, y, masks, safe, objective)
    smax = sv_full.max(axis=1)
    null = sv_full <= RANK_TOL * smax[:, None]
    with np.errstate(divide="ignore"):
        cond = np.where(sv_full.min(axis=1) > 0, smax / sv_full.min(axis=1), np.inf)
    validity = _validity(cf, X, safe)
    # which splits can have a design or a bound reason, for all splits at once: the loop
    # below then makes their sentences only where there is one
    one_value = _one_value(cf, X, masks)
    at_bound = np.any(_near_bounds(cf, params), axis=(0, 2))
    # the splits with nothing to report (most of them), found for all at once
    clean = ok & ~one_value & ~at_bound & np.asarray(converged, bool) & ~null.any(axis=1)
    clean &= (cond <= COND_LIMIT) & (masks.sum(axis=1) >= cf.p + 1)
    clean &= np.array([v is None for v in validity], bool) & _every_level_fitted(cf, X, masks)
    out = []
    for si in range(len(masks)):
        if clean[si]:
            out.append((float(cond[si]), []))
            continue
        mask = masks[si]
        n = int(mask.sum())
        if not ok[si]:
            out.append((np.inf, ["no starting point gives a finite prediction"]))
            continue
        reasons, idle = _unfitted_level_reasons(cf, X, mask)
        p_eff = cf.p - len(idle)
        if n < p_eff + 1:
            reasons.append(
                f"only {n} training cells for {p_eff} constants (need at least {p_eff + 1})"
            )
        null_si, cond_si, vt_si, sv_si = null[si], cond[si], vt[si], sv_full[si]
        if idle:  # the unfitted levels' constants are set aside, not a rank deficiency
            null_si, cond_si, vt_si, sv_si = _spectrum_without(cf, Js[si], idle)
        names = cf.s.constants
        weak = {names[j] for j in np.flatnonzero(colnorm[si] == 0) if names[j] not in idle}
        for i in np.flatnonzero(null_si):
            weak |= {names[j] for j in np.flatnonzero(np.abs(vt_si[i]) > 0.1)}
        design = _design_reasons(cf, X, mask, weak) if one_value[si] else []
        reasons.extend(design)
        if not design and n >= p_eff:
            reasons += _rank_reasons(cf, params[si], null_si, cond_si, vt_si, sv_si, weak, p_eff)
        if at_bound[si]:
            reasons += _bound_reasons(cf, params[si])
        if not converged[si]:
            reasons.append("optimiser did not converge")
        if validity[si]:
            reasons.append(validity[si])
        out.append((float(cond_si), reasons))
    return out


def _every_level_fitted(cf: CompiledForm, X, masks: np.ndarray) -> np.ndarray:
    """Per split, whether every level of each per-level column has a training cell."""
    out = np.ones(len(masks), bool)
    for col, lv in cf.levels.items():
        out &= trained_levels(X[col], masks, lv).all(axis=1)
    return out


def _relative_jacobians(cf: CompiledForm, X, y, masks, safe: np.ndarray, objective):
    """Each split's Jacobian of the weighted residuals in relative sensitivities, its
    columns' norms, singular values and right singular vectors."""
    S = len(masks)
    Xg, yg, mg = _gather(X, y, masks)  # each split's training cells
    pred = cf.predict(Xg, safe)  # (S, n_train)
    with np.errstate(all="ignore"):
        J = cf.jacobian(Xg, safe) * objective.dres_dpred(pred, yg)[..., None]
        J = J * np.asarray(_root_weights(Xg))[..., None]
    J = np.where(np.isfinite(J) & mg[..., None], J, 0.0)
    # Relative sensitivities: each column scaled by its constant's size (at least 1), so a
    # constant whose effect has vanished (an exponent run off to where its term is ~0) is a
    # tiny column instead of being normalised back to unit length.
    Js = np.clip(J * np.maximum(np.abs(safe), 1.0)[:, None, :], -1e150, 1e150)
    colnorm = np.linalg.norm(Js, axis=1)  # (S, p)
    if Js.shape[1] < cf.p:  # fewer cells than constants: zero rows give all p directions
        Js = np.concatenate([Js, np.zeros((S, cf.p - Js.shape[1], cf.p))], axis=1)
    # only the singular values and right singular vectors are needed: the thin SVD's left
    # vectors are (S, n, p), where full ones would be (S, n, n), splits x n_train^2
    _, sv, vt = np.linalg.svd(Js, full_matrices=False)  # sv (S, p), vt (S, p, p)
    sv_full = np.zeros((S, cf.p))
    sv_full[:, : sv.shape[1]] = sv
    return Js, colnorm, sv_full, vt


def _unfitted_level_reasons(cf: CompiledForm, X, mask: np.ndarray) -> tuple[list[str], list[str]]:
    """A reason per level with no training cell, and the constants it leaves unfitted."""
    reasons = []
    missing = cf.unfitted(X, mask)
    idle = [c for c, at in cf.level_of.items() if any(a in missing for a in at)]
    for col, level in missing:
        own = [c for c in idle if (col, level) in cf.level_of[c]]
        at = f"{col}={format_level(level)}"
        reasons.append(
            f"level {at} has no training cell: {', '.join(own)} not fitted, held-out "
            f"cells at {at} cannot be predicted"
        )
    return reasons, idle


def _spectrum_without(cf: CompiledForm, Js_si: np.ndarray, idle: list[str]):
    """One split's null directions, condition number, right singular vectors and singular
    values over the constants it fits."""
    keep = [j for j, c in enumerate(cf.s.constants) if c not in idle]
    _, sv_k, vt_k = np.linalg.svd(Js_si[:, keep], full_matrices=True)
    sv_si = np.zeros(len(keep))
    sv_si[: len(sv_k)] = sv_k
    null_si = sv_si <= RANK_TOL * sv_si.max()
    cond_si = sv_si.max() / sv_si.min() if sv_si.min() > 0 else np.inf
    vt_si = np.zeros((len(keep), cf.p))
    vt_si[:, keep] = vt_k
    return null_si, cond_si, vt_si, sv_si


def _design_reasons(cf: CompiledForm, X, mask: np.ndarray, weak: set[str]) -> list[str]:
    """A reason per variable the training cells hold at one value."""
    names = cf.s.constants
    design = []
    for v in cf.form.bound_variables:
        values = np.unique(X[v][mask])
        if len(values) == 1:
            which = [c for c in names if c in weak]
            what = (
                f"{', '.join(which)} {'is' if len(which) == 1 else 'are'} not identifiable"
                if which
                else "its effect cannot be identified"
            )
            design.append(f"all training cells have {v}={values[0]:g}: {what}")
    return design


def _rank_reasons(
    cf: CompiledForm, x, null_si, cond_si, vt_si, sv_si, weak: set[str], p_eff: int
) -> list[str]:
    """A reason when the Jacobian at the fit is rank-deficient or badly conditioned."""
    names = cf.s.constants
    if null_si.any():
        rank = int((~null_si).sum())
        return [
            f"Jacobian is rank-deficient at the fit (rank {rank} of {p_eff}; "
            f"{', '.join(c for c in names if c in weak)} not identifiable)",
            *_edge_hints(cf, x),
        ]
    if cond_si > COND_LIMIT:
        worst = np.abs(vt_si[np.argmin(sv_si)])
        top = [names[j] for j in np.argsort(-worst)[:2]]
        return [
            f"Jacobian is badly conditioned at the fit (condition number "
            f"{cond_si:.1e}; weakest direction mostly {', '.join(top)})"
        ]
    return []


def _one_value(cf: CompiledForm, X, masks: np.ndarray) -> np.ndarray:
    """Per split, whether its training cells hold some variable the form reads at one value
    (what :func:`_design_reasons` names)."""
    out = np.zeros(len(masks), bool)
    for v in cf.form.bound_variables:
        lo = np.where(masks, X[v], np.inf).min(axis=1, initial=np.inf)
        hi = np.where(masks, X[v], -np.inf).max(axis=1, initial=-np.inf)
        out |= lo == hi
    return out


def _near_bounds(cf: CompiledForm, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of constants ``x`` (..., p), which are at their lower and at their upper
    bound: near it relative to the bound itself (a range over decades, A in [540, 4e15], is
    not "at" 540 when A = 1e8)."""
    lo, hi = np.array(cf.s.lower), np.array(cf.s.upper)
    with np.errstate(invalid="ignore"):
        near_lo = np.isfinite(lo) & (x - lo <= 1e-6 * np.maximum(1.0, np.abs(lo)))
        near_hi = np.isfinite(hi) & (hi - x <= 1e-6 * np.maximum(1.0, np.abs(hi)))
    return near_lo, near_hi


def _bound_reasons(cf: CompiledForm, x: np.ndarray) -> list[str]:
    """A reason per constant at one of its bounds, with how to widen it."""
    lo, hi = np.array(cf.s.lower), np.array(cf.s.upper)
    reasons = []
    near = _near_bounds(cf, x)
    for j, c in enumerate(cf.s.constants):
        near_lo, near_hi = near[0][j], near[1][j]
        if near_lo or near_hi:
            kind = "bound"
            if base_name(c) not in cf.form.bounds and c in cf.form.ranges:
                kind = f"default bound (its range as {cf.form.ranges[c].role})"
            reasons.append(
                f"constant {c} is at its {kind} {lo[j] if near_lo else hi[j]:g}; widen it "
                # flag words: advice shown on both faces
                f"with --bound '{base_name(c)}=LOW..HIGH' (or bounds in forms.toml)"
            )
    return reasons


VALIDITY_CELLS = 2048  # cells at most whose terms are checked (with the box's corners)


def _check_points(cf: CompiledForm, X) -> dict[str, np.ndarray]:
    """Where a fit must be defined: the grid's cells (a spread of at most VALIDITY_CELLS,
    every variable's extremes among them) and the corners and midpoints of the box they
    span (3^d points for d <= 4 variables, the 2^d corners up to 6)."""
    names = [v for v in cf.form.bound_variables if v in X]
    n = len(X[names[0]]) if names else 0
    take = np.unique(np.linspace(0, n - 1, min(n, VALIDITY_CELLS)).astype(int)) if n else []
    for v in names:
        take = np.union1d(take, [int(np.argmin(X[v])), int(np.argmax(X[v]))])
    points = {v: X[v][take] for v in names}
    d = len(names)
    if 0 < d <= 6:
        axes = []
        for v in names:
            lo, hi = float(np.min(X[v])), float(np.max(X[v]))
            mid = np.sqrt(lo * hi) if lo > 0 and hi > 10 * lo else (lo + hi) / 2
            axes.append([lo, mid, hi] if d <= 4 else [lo, hi])
        box = np.meshgrid(*axes, indexing="ij")
        points = {
            v: np.concatenate([points[v], b.ravel()]) for v, b in zip(names, box, strict=True)
        }
    return points


def _subterms(node: ex.Node, constants: set[str]) -> list[ex.Node]:
    """The nodes of ``node`` that read a constant, innermost first (each once)."""
    out: list[ex.Node] = []
    for a in node.args:
        if isinstance(a, ex.Node):
            out += _subterms(a, constants)
    if node.op not in ("num", "str", "name") and set(ex.names(node)) & constants:
        out.append(node)
    return list(dict.fromkeys(out))


def _validity(cf: CompiledForm, X, params: np.ndarray) -> list[str | None]:
    """Per row of ``params`` (S, p), why the fit is not a valid rule over the grid's box:
    the first term (innermost first) whose value is not finite at a check point, with
    the constants it reads and the place; ``None`` where every term is finite."""
    points = _check_points(cf, X)
    if not points:
        return [None] * len(params)
    env = cf.env(points, params)
    # variables as (1, m) so that they broadcast against the constants' (S, 1)
    env.update({v: a[None, :] for v, a in points.items()})
    consts = set(cf.s.constants)
    m = len(next(iter(points.values())))
    out: list[str | None] = [None] * len(params)
    finite_rows = np.isfinite(params).all(axis=1)
    for node in _subterms(cf.form.tree, consts):
        with np.errstate(all="ignore"):
            val = np.broadcast_to(ex.evaluate(node, env), (len(params), m))
        bad = ~np.isfinite(val)
        for si in np.flatnonzero(bad.any(axis=1) & finite_rows):
            if out[si] is not None:
                continue
            j = int(np.flatnonzero(bad[si])[0])
            reads = ex.names(node)
            at = ", ".join(f"{v}={points[v][j]:.4g}" for v in reads if v in points)
            with_c = ", ".join(
                f"{c}={params[si][cf.s.constants.index(c)]:.4g}" for c in reads if c in consts
            )
            what = "prediction" if node is cf.form.tree else f"term {ex.unparse(node)}"
            out[si] = (
                f"not a valid rule on the grid's box: {what} is not finite at {at} (with {with_c})"
            )
    return out


def _edge_hints(cf: CompiledForm, x: np.ndarray) -> list[str]:
    """For a fit that failed: nonlinear constants searched over the default range that
    stopped on its edge. Their optimum may lie far outside (Kaplan's Nc ~ 1e13), which
    only a wider range given with --bound reaches."""
    out = []
    for i, c in enumerate(cf.s.nonlinear):
        if base_name(c) in cf.form.bounds or base_name(c) in cf.form.start:
            continue
        v = x[cf.non_idx[i]]
        lo, hi = cf.s.start_lo[i], cf.s.start_hi[i]
        # (a constant at its bound has its own reason, which names --bound too)
        if any(abs(v - e) <= 1e-9 * max(1.0, abs(e)) for e in (lo, hi)):
            out.append(
                f"constant {c} stopped at the edge of its default search range {lo:g}..{hi:g}; "
                # flag words: advice shown on both faces
                f"if its value lies outside, give its range with --bound '{base_name(c)}=LOW..HIGH'"
            )
    return out
