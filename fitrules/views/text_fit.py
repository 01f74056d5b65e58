"""A form and its fit in plain text: the fitted form with its uncertainty and predictions, one
form's structure, the list of forms."""

from __future__ import annotations

import math

from fitrules.base.util import spread_unit
from fitrules.views.text_parts import data_line


def uncertainty_lines(f) -> list[str]:
    """How the uncertainty of a fitted form was estimated, in sentences."""
    u = f.uncertainty
    kind = f.objective.kind
    if kind == "rel_ls":
        sd = f"{100 * u.residual_sd:.3g}% (relative)"
    elif kind == "log_huber":
        sd = f"{u.residual_sd:.3g} (log residuals)"
    else:
        sd = f"{u.residual_sd:.4g}{' ' + f.unit if f.unit else ''}"
    lines = []
    if u.ok:
        lines.append(
            "standard errors: from the Jacobian at the fit, scaled by the residual variance "
            f"(residual sd {sd}, {u.dof} degrees of freedom)"
        )
        if u.note:
            lines.append(f"note: {u.note}")
        top = u.strongest(3, above=0.5)
        if top:
            lines.append(
                "strongest correlations: " + ", ".join(f"C({a}, {b}) = {c:+.4f}" for a, b, c in top)
            )
    else:
        lines.append(f"standard errors: not available ({u.note})")
    m = f.interval_method
    if m is not None:
        pct = round(100 * m.level)
        lines.append(f"intervals: {pct}% {m.interval_kind}, {m.describe()}")
        lines.append(f"the intervals cover {f.intervals_covers}" + _offset_note(f))
        notes = getattr(m, "notes", None) or {}
        lines += [f"{c}: {n}" for c, n in notes.items() if n]
    if f.constraints:
        theta = [f.constants[c] for c in f.constraints.constants]
        active = f.constraints.active(theta)
        lines.append(
            "constraints: "
            + "; ".join(c.text for c in f.constraints.items)
            + (f" (active at the fit: {'; '.join(active)})" if active else " (none active)")
        )
    return lines


def _offset_note(f) -> str:
    """How the constants' intervals carry the grid's seed offset, if they do."""
    off = f.seed_offset
    if off is None:
        return ""
    moved = [c for c, v in f.seed_offset_sd.items() if v > 0 and math.isfinite(v)]
    unit, scale = spread_unit(off.relative)
    whose = "profile intervals" if f.profile is not None else "bootstrap's"
    return (
        f": the {whose}, widened in quadrature by the grid's seed offset (one seed id's "
        f"shared effect {scale * math.sqrt(off.shared_var):.3g}{unit} over {len(off.seeds)} "
        f"ids, t quantile on {off.df} degrees of freedom), which moves "
        + (", ".join(moved) if moved else "no constant")
    )


def information_line(f) -> str:
    """AIC, AICc, BIC and R^2 of a fitted form, with what they are not."""
    ic = f.information
    if not all(math.isfinite(ic[k]) for k in ("aic", "bic", "r2")):
        return (
            "information criteria: not available (an exact or non-finite fit has no Gaussian "
            "likelihood)"
        )
    aicc = f"{ic['aicc']:.4g}" if math.isfinite(ic["aicc"]) else "undefined (n - k - 1 <= 0)"
    return (
        f"information criteria ({ic['k']} constants, {ic['n']} cells): AIC {ic['aic']:.4g}, "
        f"AICc {aicc}, BIC {ic['bic']:.4g}, R^2 {ic['r2']:.4f} (in-sample, on cell "
        "means; held-out error, not these, is what compare ranks)"
    )


def _span(pair) -> str:
    """``lo to hi``, or why there is none: an interval whose bound is not finite (a part
    the grid cannot bound, such as the seed offset's effect on constants it does not
    identify) is said to be unbounded, never printed as inf."""
    lo, hi = pair
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{lo:.5g} to {hi:.5g}"
    return "unbounded (a part of it the grid's cells do not bound)"


def prediction_line(p: dict) -> str:
    """One prediction in words: the value, its standard error and its intervals."""
    where = ", ".join(f"{k}={v:g}" for k, v in p["given"].items())
    se = p["stderr"]
    se_text = f"{se:.2g}" if se is not None and math.isfinite(se) else "n/a"
    line = f"prediction at {where}: {p['prediction']:.5g} (standard error {se_text}"
    pct = round(100 * p["level"]) if p.get("level") else None
    if p.get("interval") is not None:
        line += (
            f"; {pct}% interval for the configuration's mean over new seed ids "
            f"{_span(p['interval'])}"
        )
    elif "not covered" in (p.get("interval_kind") or ""):
        why = p["interval_kind"].split("not covered: ", 1)[1].split(";")[0]
        line += f"; no interval for the configuration's mean over new seed ids: {why}"
    lean, iv = p.get("misfit_lean"), p.get("interval")
    if lean and iv is not None and abs(lean) > 0.25 * (iv[1] - iv[0]) and p["prediction"]:
        # an interval visibly off-centre says why
        cells = (
            "the nearest cells' misfit, continued along its trend, runs"
            if p.get("extrapolation")
            else "the cells about it run"
        )
        line += (
            f", leaning {'up' if lean > 0 else 'down'}: {cells} "
            f"{100 * abs(lean / p['prediction']):.2g}% {'above' if lean > 0 else 'below'} the form"
        )
    if p.get("interval_grid_seeds") is not None and p["interval_grid_seeds"] != p.get("interval"):
        line += f"; {pct}% interval at the grid's seed ids {_span(p['interval_grid_seeds'])}"
    if p.get("interval_runs") is not None:
        line += (
            f"; for the mean of {p['runs']} new runs at fresh seed ids {_span(p['interval_runs'])}"
        )
    few = p.get("few_seed_ids")
    if few and few["share_of_width"] >= 0.5:
        line += (
            f"; with {few['seed_ids']} seed ids the seed offset's term (t quantile "
            f"{few['quantile']:.3g}) is {100 * few['share_of_width']:.0f}% of this interval's "
            f"squared width: one more seed id would make that term about "
            f"{few['term_narrower']:.2g}x narrower and the interval about "
            f"{few['interval_narrower']:.2g}x"
        )
    if p.get("constants_interval") is not None:
        line += f"; constants' uncertainty only {_span(p['constants_interval'])}"
    if p.get("extrapolation"):
        line += "; outside the fitted cells: " + ", ".join(
            f"{k} {v:.3g}x beyond" for k, v in p["extrapolation"].items()
        )
    if p.get("misfit_shown_beyond"):
        line += (
            f"; beyond an edge in {', '.join(p['misfit_shown_beyond'])} where the form, "
            "fitted without the edge cells, misses them by more than noise: the form is "
            "wrong there, and the interval takes its misfit to grow as a missed curvature "
            "would"
        )
    if p.get("misfit_power_shown"):
        line += (
            f"; the cells show the form misses a power of {', '.join(p['misfit_power_shown'])}"
            ": the interval takes at least the largest change the form refitted with a power "
            "they allow makes here"
        )
    return line + ")"


def render_fitted(f) -> str:
    """A fitted form: data, constants with standard errors (and intervals), correlations,
    training error, diagnostics and predictions."""
    has_iv = f.interval_method is not None
    pct = f"{100 * f.interval_method.level:g}" if has_iv else "95"
    lines = [
        data_line(f.data),
        f"form {f.form.name} = {f.form.expression}"
        + (f" ({f.form.constant_notes})" if f.form.constant_notes else ""),
        f"fitted on all {len(f.cells)} cells; objective {f.objective.describe()} "
        f"{f.result.objective:.6g}; weights {f.weights}; "
        + (
            f"condition number {f.result.cond:.3g}"
            if math.isfinite(f.result.cond)
            else "condition number infinite (singular Jacobian)"
        ),
        "",
        (
            f"constants (value, standard error se, {pct}% interval, which is not value ± se):"
            if has_iv
            else "constants (value and standard error se):"
        ),
    ]
    w = max(len(c) for c in f.constants)
    iv = f.intervals or {}
    for c, v in f.constants.items():
        se = f.stderr[c]
        # issue 42: "L0 = 2.148 ± 0.006 [2.116, 2.179]" read the standard error as the
        # interval's half width; each number is named instead
        line = f"  {c.ljust(w)} = {v:.6g}"
        line += f"  se {se:.3g}" if math.isfinite(se) else "  se n/a"
        if c in iv:
            lo, hi = iv[c]
            # a constant the grid does not identify (an intercept per group beside a term
            # that is constant within each group) has no finite interval: said, not printed
            line += (
                f"  {pct}% interval [{lo:.6g}, {hi:.6g}]"
                if math.isfinite(lo) and math.isfinite(hi)
                else "  interval unbounded (not identified by these cells)"
            )
        lines.append(line)
    lines += [f"  {x}" for x in uncertainty_lines(f)]
    te = f.train_error
    if math.isfinite(te["heldout_error_pct"]) and math.isfinite(te["worst_cell_pct"]):
        relative = f"mean {te['heldout_error_pct']:.3f}%, worst cell {te['worst_cell_pct']:.3f}%, "
    else:  # a cell whose value is 0 has no relative error (abs_ls fits such grids)
        relative = "relative error not defined (a cell's value is 0), "
    lines += [
        "",
        f"training error: {relative}rmse {te['rmse']:.4g}",
        information_line(f),
        "diagnostics: " + ("none (well posed)" if not f.reasons else "; ".join(f.reasons)),
    ]
    lines += [prediction_line(p) for p in f.predictions]
    if f.heldout is not None and f.predictions:
        lines.append(
            f"prediction intervals: {f.heldout.describe()}; they do not cover a change of "
            "regime outside the fitted cells (the further out, the less the held-out cells "
            "say)"
        )
    return "\n".join(lines)


def _nodes(tree):
    stack = [tree]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.args)


def render_form(f, resolved_by: str | None = None) -> str:
    """A bound form: its variables, which constants are linear, bounds and starting ranges."""
    s = f.structure
    how = f"resolved against {resolved_by}" if resolved_by else "declared"
    lines = [f"{f.name} = {f.expression}"]
    if f.description:
        lines.append(f"  {f.description}")
    per_level = sorted({(n.value, n.args[0].value) for n in _nodes(f.tree) if n.op == "at"})
    lines += [
        f"  source: {f.source}",
        f"  variables ({how}): {', '.join(f.bound_variables)}",
        *[f"  {c}[{col}]: one constant {c} per level of {col}" for c, col in per_level],
        f"  constants entering linearly (solved exactly): {', '.join(s.linear) or 'none'}",
        f"  nonlinear constants (grid search, then polish): {', '.join(s.nonlinear) or 'none'}",
    ]
    for c, lo, hi in zip(s.constants, s.lower, s.upper, strict=True):
        if c in s.nonlinear:
            i = s.nonlinear.index(c)
            lines.append(
                f"    {c}: bounds [{lo:g}, {hi:g}], starting grid over "
                f"[{s.start_lo[i]:g}, {s.start_hi[i]:g}]"
            )
    return "\n".join(lines)


def render_forms(forms: dict) -> str:
    """One line a form: its name with its variables, its expression, where it comes from."""
    heads = {
        n: n + (f"({', '.join(f.variables)})" if f.variables else "") for n, f in forms.items()
    }
    w = max(len(h) for h in heads.values())
    return "\n".join(
        f"{heads[name].ljust(w)}  {f.expression}    [{f.source}]" for name, f in forms.items()
    )
