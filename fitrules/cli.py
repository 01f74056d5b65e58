"""Command line: parse arguments, call one library function, print or write. No logic here."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from fitrules.errors import FitrulesError

_ARGV: list[str] = []  # the arguments of the running command, for manifests and reports


def _command_line() -> str:
    return shlex.join(["fitrules", *_ARGV])


# ---------------------------------------------------------------- simulate
def _add_simulate(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a DiLoCo simulation grid (spec TOML) or one cell",
        description="Run the numpy DiLoCo harness over a grid spec, appending "
        "each finished run to --out (resumable), and write a manifest beside it.",
    )
    p.add_argument(
        "spec",
        nargs="?",
        type=Path,
        help="grid spec (TOML), or the name of a committed spec such as main "
        "(data/specs/main.toml; shipped with the package)",
    )
    p.add_argument("--out", type=Path, required=True, help="results CSV to create or resume")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--cell",
        help='one configuration, e.g. "H=8,keep=0.25", on top of the '
        "spec's fixed settings when a spec is given",
    )
    p.add_argument(
        "--seeds",
        default=None,
        help="seeds for --cell, e.g. 0,1,2 (default: the spec's seeds, or 0)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: when stderr is a terminal)",
    )
    p.set_defaults(func=_simulate)


def _simulate(args) -> int:
    from fitrules.sim.runner import simulate
    from fitrules.sim.spec import cell_spec, load_spec

    base = load_spec(args.spec) if args.spec is not None else None
    if args.cell is not None:
        spec = cell_spec(args.cell, base, args.seeds)
    elif base is not None:
        spec = base
    else:
        raise FitrulesError("simulate needs a SPEC file or --cell")
    table = simulate(
        spec, args.out, jobs=args.jobs, show_progress=args.progress, command=_command_line()
    )
    n_div = int(table["diverged"].astype(str).str.lower().eq("true").sum())
    print(f"{args.out}: {len(table)} runs of {spec.name!r} ({n_div} diverged)")
    return 0


# ---------------------------------------------------------------- shared options
def _fraction(text: str) -> float:
    try:
        if "/" in text:
            num, den = text.split("/", 1)
            return float(num) / float(den)
        return float(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or fraction") from None


def _add_data_options(p) -> None:
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        type=Path,
        default=None,
        help="results table (CSV or Parquet), one row a run (default: the committed "
        "main grid at inner lr 3e-4)",
    )
    g.add_argument("--metric", default=None, help="metric column (default: loss, else val_loss)")
    g.add_argument(
        "--where",
        action="append",
        default=None,
        metavar="COND",
        help='keep rows where COND holds, e.g. "lr == 3e-4" (repeatable)',
    )
    g.add_argument(
        "--derive",
        action="append",
        default=[],
        metavar="NAME=EXPR",
        help='add a column, e.g. "omega = 1/keep - 1" (repeatable)',
    )


def _add_tune_options(p) -> None:
    g = p.add_argument_group(
        "tuning (choose a factor's level per configuration on some seeds, measure on others)"
    )
    g.add_argument(
        "--tune",
        action="append",
        default=None,
        metavar="FACTOR",
        help="tune FACTOR (e.g. lr) per configuration of the other factors (repeatable: "
        "tuned jointly)",
    )
    g.add_argument(
        "--tune-seeds",
        default=None,
        metavar="SEEDS",
        help="seeds that choose the level, e.g. 0,1,2; the others measure it (default: "
        "cross-fitting, each half of the seeds chooses for the other)",
    )


def _seed_list(text: str, option: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise FitrulesError(f"{option} {text!r}: expected integers separated by commas") from None
    if not seeds:
        raise FitrulesError(f"{option} {text!r}: no seed given")
    return seeds


def _tuned(args, grid):
    """Reduce ``grid`` by --tune, keeping the record on ``args`` for the views."""
    args.tuning = None
    if not getattr(args, "tune", None):
        if getattr(args, "tune_seeds", None) is not None:
            raise FitrulesError("--tune-seeds needs --tune FACTOR")
        return grid
    from fitrules.tune import tune

    seeds = _seed_list(args.tune_seeds, "--tune-seeds") if args.tune_seeds is not None else None
    args.tuning = tune(grid, args.tune, seeds)
    return args.tuning.grid


def _with_tuning(args, text: str, payload: dict) -> tuple[str, dict]:
    if getattr(args, "tuning", None) is None:
        return text, payload
    from fitrules.report.text import render_tuning

    return render_tuning(args.tuning) + "\n\n" + text, payload | {
        "tuning": args.tuning.to_dict()
    }


def _load(args):
    from fitrules.grids import default_grid, load_grid

    path, where = (args.data, args.where or []) if args.data else default_grid(args.where)
    return _tuned(args, load_grid(path, metric=args.metric, where=where, derive=args.derive))


def _add_output_options(p) -> None:
    p.add_argument(
        "--json",
        dest="json_out",
        default=None,
        metavar="PATH",
        help="write the full result as JSON to PATH ('-' for stdout)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def _write_json(target: str | None, payload: dict) -> None:
    import json

    from fitrules.util import atomic_write_text

    if target is None:
        return
    text = json.dumps(payload, indent=1, sort_keys=False, allow_nan=False) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(target), text)


def _add_bootstrap_options(g) -> None:
    g.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (200)")
    g.add_argument("--level", type=float, default=0.95, help="interval level (0.95)")
    g.add_argument("--bootstrap-seed", type=int, default=0, help="bootstrap seed (0)")


def _add_report_options(p) -> None:
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a report directory (report.md, figures, results.json)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --report DIR")


def _check_outputs(args) -> None:
    """Refuse an existing report directory before any work is done."""
    if getattr(args, "report", None) is not None:
        from fitrules.report.directory import check_target

        check_target(args.report, args.force)


def _emit(args, text: str, payload: dict) -> None:
    """Print the text view, unless the JSON goes to stdout; write the JSON if asked."""
    if args.json_out != "-":
        print(text)
    _write_json(args.json_out, payload)


def _add_fit_options(p) -> None:
    g = p.add_argument_group("fitting")
    g.add_argument(
        "--objective",
        default="rel_ls",
        choices=["rel_ls", "log_huber", "abs_ls"],
        help="training objective (default rel_ls: relative least squares)",
    )
    g.add_argument(
        "--delta", type=float, default=1e-3, help="Huber delta for log_huber (default 1e-3)"
    )


# ---------------------------------------------------------------- validate
def _add_validate(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="check a results grid and summarise it",
        description="Check a results table and print runs, cells, levels per "
        "factor, seeds per cell and excluded rows.",
    )
    p.add_argument("path", nargs="?", type=Path, help="results table (default: main grid)")
    _add_data_options(p)
    _add_tune_options(p)
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH")
    p.set_defaults(func=_validate)


def _validate(args) -> int:
    from fitrules.report.text import render_summary

    if args.path is not None:
        args.data = args.path
    summary = _load(args).summary()
    _emit(args, *_with_tuning(args, render_summary(summary), summary))
    return 0


# ---------------------------------------------------------------- compare
def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="fit forms on paired random splits, compare held-out error",
        description="Fit every candidate form on the same random "
        "subsets of cells and compare their held-out errors, split by split.",
    )
    _add_data_options(p)
    _add_tune_options(p)
    g = p.add_argument_group("forms")
    g.add_argument(
        "--forms",
        default=None,
        metavar="NAMES",
        help="comma-separated form names (default: the built-in set; see 'fitrules forms list')",
    )
    g.add_argument(
        "--form",
        action="append",
        default=[],
        metavar='"NAME = EXPR"',
        help="add a form given inline (repeatable)",
    )
    g = p.add_argument_group("splits")
    g.add_argument("--splits", type=int, default=300, help="number of splits (default 300)")
    g.add_argument(
        "--train-frac",
        type=_fraction,
        default=1 / 3,
        help="fraction of cells fitted in each split (default 1/3)",
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the split sequence (default 0)")
    g.add_argument(
        "--split",
        action="append",
        default=None,
        metavar="PROTOCOL",
        help="random (default), leave-one-level-out:COL, extrapolate:COL, "
        "extrapolate:COL>=VALUE, transfer (repeatable: one section per protocol, never pooled)",
    )
    g.add_argument("--fit-data", type=Path, default=None, help="transfer: the grid fitted")
    g.add_argument("--test-data", type=Path, default=None, help="transfer: the grid scored")
    _add_fit_options(p)
    g = p.add_argument_group(
        "wild-extrapolation guard (training fit and design only; fixed before scoring)"
    )
    g.add_argument(
        "--guard-span",
        type=float,
        default=20.0,
        metavar="X",
        help="name a fit whose predictions over the grid's cells spread more than X times "
        "its training values (default 20)",
    )
    g.add_argument(
        "--guard-se",
        type=float,
        default=1.0,
        metavar="X",
        help="name a fit whose delta-method standard error exceeds X times a prediction "
        "(default 1)",
    )
    g.add_argument(
        "--metric-range",
        default=None,
        metavar="LO,HI",
        help="name a fit that predicts outside this plausible range of the metric, e.g. "
        "0,3.61 for nats over 37 characters (default: no range)",
    )
    p.add_argument(
        "--keep-degenerate",
        action="store_true",
        help="keep flagged (split, form) pairs in summaries and paired verdicts",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 if any (split, form) pair is degenerate",
    )
    _add_output_options(p)
    _add_report_options(p)
    p.set_defaults(func=_compare)


def _compare(args) -> int:
    from fitrules.compare import compare
    from fitrules.fit import Objective
    from fitrules.forms import select_forms
    from fitrules.guard import GuardOptions, parse_metric_range
    from fitrules.report.text import render_comparison
    from fitrules.splits import RandomSplit, Transfer, parse_protocol
    from fitrules.util import progress

    _check_outputs(args)
    names = [n.strip() for n in args.forms.split(",") if n.strip()] if args.forms else None
    forms = select_forms(names, args.form)
    objective = Objective(args.objective, args.delta)
    guard = GuardOptions(args.guard_span, args.guard_se, parse_metric_range(args.metric_range))
    protocols = args.split or ["random"]
    grid = _load(args)
    test_grid = None
    labels = None
    if "transfer" in protocols:
        if args.fit_data is None or args.test_data is None:
            raise FitrulesError("--split transfer needs --fit-data A and --test-data B")
        from fitrules.grids import display_path, load_grid

        if args.tune:
            raise FitrulesError("--tune with --split transfer is not supported: tune each grid")
        labels = (display_path(args.fit_data), display_path(args.test_data))
        fit_grid, test_grid = (
            load_grid(p, metric=args.metric, where=args.where or [], derive=args.derive)
            for p in (args.fit_data, args.test_data)
        )
    splitters = [
        parse_protocol(t, args.splits, args.train_frac, args.seed, labels) for t in protocols
    ]
    results = []
    # structured protocols' split counts depend on the grid: no total, just a count
    total = (
        args.splits * len(splitters) * len(forms)
        if all(isinstance(sp, RandomSplit) for sp in splitters)
        else None
    )
    with progress(total=total, desc="fitting", enabled=args.progress) as bar:
        for sp in splitters:
            if isinstance(sp, Transfer):
                results.append(
                    compare(
                        fit_grid,
                        forms,
                        sp,
                        objective,
                        args.keep_degenerate,
                        on_progress=bar.update,
                        test_grid=test_grid,
                        guard=guard,
                    )
                )
            else:
                results.append(
                    compare(
                        grid,
                        forms,
                        sp,
                        objective,
                        args.keep_degenerate,
                        on_progress=bar.update,
                        guard=guard,
                    )
                )
    payloads = [r.to_dict() for r in results]
    if args.tuning is not None:
        payloads = [p | {"tuning": args.tuning.to_dict()} for p in payloads]
    payload = payloads[0] if len(payloads) == 1 else {"protocols": payloads}
    if args.report is not None:
        from fitrules.report.markdown import comparison_report, protocols_report

        if len(results) == 1:
            comparison_report(
                results[0], payloads[0], args.report, _command_line(), args.force, args.tuning
            )
        else:
            protocols_report(results, payloads, args.report, _command_line(), args.force)
    text = "\n\n".join(render_comparison(r) for r in results)
    if args.tuning is not None:
        from fitrules.report.text import render_tuning

        text = render_tuning(args.tuning) + "\n\n" + text
    if args.report is not None:
        text += f"\n\nreport written to {args.report}/report.md"
    _emit(args, text, payload)
    n_degenerate = sum(int(r.results["degenerate"].sum()) for r in results)
    if args.strict and n_degenerate:
        print(
            f"fitrules compare: {n_degenerate} degenerate (split, form) pairs (--strict)",
            file=sys.stderr,
        )
        return 1
    return 0


# ---------------------------------------------------------------- fit
def _add_fit(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit one form on all cells",
        description="Fit one form on every cell of the grid and print its "
        "constants, training error and diagnostics.",
    )
    _add_data_options(p)
    p.add_argument(
        "--form",
        required=True,
        metavar='NAME or "NAME = EXPR"',
        help="a form name or an inline form",
    )
    _add_tune_options(p)
    _add_fit_options(p)
    g = p.add_argument_group("intervals (bootstrap over seeds within cells)")
    g.add_argument("--intervals", action="store_true", help="bootstrap intervals for the constants")
    g.add_argument(
        "--predict",
        action="append",
        default=[],
        metavar='"H=8,keep=0.25"',
        help="prediction with interval at a point, in the grid or not (repeatable)",
    )
    _add_bootstrap_options(g)
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH")
    _add_report_options(p)
    p.set_defaults(func=_fit)


def _fit(args) -> int:
    from fitrules.api import fit_grid
    from fitrules.forms import resolve_form
    from fitrules.report.text import render_fit

    _check_outputs(args)
    form = resolve_form(args.form)
    grid = _load(args)
    out = fit_grid(grid, form, args.objective, args.delta)
    if args.report is not None:
        from fitrules.report.markdown import fit_report

        fit_report(out, args.report, _command_line(), args.force)
    payload = out["json"]
    text = render_fit(out["form"], out["result"], out["cells"], out["train_error"])
    if args.intervals or args.predict:
        from fitrules.api import fit_intervals
        from fitrules.report.text import render_intervals

        boot, preds = fit_intervals(
            grid,
            form,
            args.objective,
            args.delta,
            args.predict,
            args.resamples,
            args.bootstrap_seed,
            args.level,
            args.derive,
        )
        payload = payload | {
            "bootstrap": {
                "resamples": boot.resamples,
                "seed": boot.seed,
                "level": boot.level,
                "failed": boot.failed,
                "single_run_cells": boot.single_run_cells,
                "constants": {k: list(v) for k, v in boot.constant_intervals().items()},
                "predictions": preds,
            }
        }
        text += "\n\n" + render_intervals(boot, preds)
    _emit(args, *_with_tuning(args, text, payload))
    return 0


# ---------------------------------------------------------------- forms
def _add_forms(sub) -> None:
    p = sub.add_parser("forms", help="list, show or add candidate forms")
    fsub = p.add_subparsers(dest="forms_command", required=True, metavar="ACTION")
    q = fsub.add_parser("list", help="list the available forms")
    q.set_defaults(func=_forms_list)
    q = fsub.add_parser("show", help="explain one form")
    q.add_argument("name")
    q.set_defaults(func=_forms_show)
    q = fsub.add_parser("add", help="add a form to forms.toml in the working directory")
    q.add_argument("name")
    q.add_argument("expression")
    q.set_defaults(func=_forms_add)


def _forms_list(args) -> int:
    from fitrules.forms import available_forms

    forms = available_forms()
    w = max(len(n) for n in forms)
    for name, f in forms.items():
        print(f"{name.ljust(w)}  {f.expression}    [{f.source}]")
    return 0


def _forms_show(args) -> int:
    from fitrules.forms import select_forms

    f = select_forms([args.name])[0]
    if f.variables is None:
        from fitrules.grids import default_grid, load_grid

        path, where = default_grid(None)
        f = f.bind(load_grid(path, where=where).columns)
    s = f.structure
    print(f"{f.name} = {f.expression}")
    if f.description:
        print(f"  {f.description}")
    print(f"  source: {f.source}")
    print(f"  variables: {', '.join(f.bound_variables)}")
    print(f"  constants entering linearly (solved exactly): {', '.join(s.linear) or 'none'}")
    print(f"  nonlinear constants (grid search, then polish): {', '.join(s.nonlinear) or 'none'}")
    for c, lo, hi in zip(s.constants, s.lower, s.upper, strict=True):
        if c in s.nonlinear:
            i = s.nonlinear.index(c)
            print(
                f"    {c}: bounds [{lo:g}, {hi:g}], starting grid over "
                f"[{s.start_lo[i]:g}, {s.start_hi[i]:g}]"
            )
    return 0


def _forms_add(args) -> int:
    from fitrules.forms import add_form_to_file

    path = add_form_to_file(args.name, args.expression)
    print(f"added {args.name} = {args.expression} to {path}")
    return 0


# ---------------------------------------------------------------- ci
def _add_ci(sub) -> None:
    p = sub.add_parser(
        "ci",
        help="paired-seed confidence intervals: treatment vs baseline",
        description="Pair runs by seed and estimate treatment - baseline with a "
        "paired t interval, a BCa bootstrap interval, Wilcoxon and sign-flip "
        "p-values. With no --data: the committed tuned paired grid, synchronous "
        "baseline against DiLoCo at H=16, each arm's lr tuned on seeds 0,1,2 and the "
        "interval over the other seeds.",
    )
    _add_data_options(p)
    _add_tune_options(p)
    p.add_argument(
        "--baseline", default=None, metavar="SEL", help='baseline runs, e.g. "algo=sync"'
    )
    p.add_argument(
        "--treatment",
        action="append",
        default=[],
        metavar="SEL",
        help='treatment runs, e.g. "algo=diloco,H=16,keep=1" (repeatable)',
    )
    p.add_argument(
        "--treatment-sweep",
        default=None,
        metavar="COL",
        help="compare every level of COL against the baseline, other factors fixed",
    )
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument(
        "--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)"
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH")
    _add_report_options(p)
    p.set_defaults(func=_ci)


def _ci(args) -> int:
    from fitrules.api import paired_seed_report

    _check_outputs(args)
    if args.data is None:
        from fitrules.grids import DEFAULT_PAIRED, DEFAULT_PAIRED_TUNE, load_grid

        if args.tune is None:
            args.tune, args.tune_seeds = list(DEFAULT_PAIRED_TUNE[0]), DEFAULT_PAIRED_TUNE[1]
        grid = _tuned(
            args,
            load_grid(
                DEFAULT_PAIRED, metric=args.metric, where=args.where or [], derive=args.derive
            ),
        )
        if args.baseline is None and not args.treatment and args.treatment_sweep is None:
            args.baseline, args.treatment = "algo=sync", ["algo=diloco,H=16,keep=1"]
    else:
        grid = _load(args)
    if args.baseline is None:
        raise FitrulesError("--baseline is required with --data")
    if not args.treatment and args.treatment_sweep is None:
        raise FitrulesError("give --treatment SEL (repeatable) or --treatment-sweep COL")
    results, payload = paired_seed_report(
        grid,
        args.baseline,
        args.treatment,
        args.treatment_sweep,
        args.level,
        args.resamples,
        args.seed,
        args.tuning,
    )
    payload["command"] = _command_line()
    if args.report is not None:
        from fitrules.report.markdown import ci_report

        ci_report(results, payload, args.report, _command_line(), args.force, args.tuning)
    from fitrules.report.text import render_ci

    _emit(args, *_with_tuning(args, render_ci(results, payload), payload))
    return 0


# ---------------------------------------------------------------- predict / score
def _add_predict(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="write a prediction to a ledger before the run",
        description="Fit a form on all cells, predict one cell with a seed-"
        "bootstrap interval, and append the prediction to an append-only, "
        "hash-chained ledger.",
    )
    _add_data_options(p)
    p.add_argument("--form", required=True, metavar='NAME or "NAME = EXPR"')
    p.add_argument("--at", required=True, metavar='"H=8,keep=0.25"', help="the cell predicted")
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        metavar="PCT",
        help="the relative error (percent) the prediction commits to",
    )
    p.add_argument("--ledger", type=Path, required=True, help="JSON-lines ledger to append to")
    _add_fit_options(p)
    _add_bootstrap_options(p.add_argument_group("interval (bootstrap over seeds within cells)"))
    p.set_defaults(func=_predict)


def _predict(args) -> int:
    from fitrules.api import fit_intervals
    from fitrules.forms import resolve_form
    from fitrules.ledger import append_prediction, read_ledger

    if args.tolerance is not None and not args.tolerance > 0:
        raise FitrulesError(f"--tolerance {args.tolerance}: must be a positive percentage")
    read_ledger(args.ledger)  # refuse a tampered ledger before any work
    form = resolve_form(args.form)
    grid = _load(args)
    boot, preds = fit_intervals(
        grid,
        form,
        args.objective,
        args.delta,
        [args.at],
        args.resamples,
        args.bootstrap_seed,
        args.level,
        args.derive,
    )
    pred = preds[0]
    rec = append_prediction(
        args.ledger,
        {
            "form": boot.form.name,
            "expression": boot.form.expression,
            "variables": list(boot.form.variables),
            "constants": boot.fit.constants,
            "objective": args.objective,
            "point": pred["given"],
            "at": pred["point"],
            "prediction": pred["prediction"],
            "interval": pred["interval"],
            "level": args.level,
            "resamples": args.resamples,
            "tolerance_pct": args.tolerance,
            "data": {
                "path": str(grid.path),
                "sha256": grid.sha256,
                "where": list(grid.where),
                "derive": list(grid.derive),
                "metric": grid.metric,
            },
            "command": _command_line(),
        },
    )
    lo, hi = rec["interval"]
    print(
        f"{args.ledger}: record {rec['id']}: {rec['form']} predicts {rec['prediction']:.4f} "
        f"at {rec['point']} ({round(100 * args.level)}% interval {lo:.4f} to {hi:.4f}"
        + (f"; tolerance {args.tolerance:g}%" if args.tolerance is not None else "")
        + ")"
    )
    return 0


def _add_score(sub) -> None:
    p = sub.add_parser(
        "score",
        help="score ledger predictions against new results",
        description="Check the ledger's hashes, then score every prediction "
        "whose cell has results in --data. The ledger is never written.",
    )
    p.add_argument("--ledger", type=Path, required=True)
    _add_data_options(p)
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH")
    p.set_defaults(func=_score)


def _score(args) -> int:
    from fitrules.grids import load_grid
    from fitrules.ledger import score_ledger
    from fitrules.report.text import render_scores

    if args.data is None:
        raise FitrulesError("score needs --data: the results table with the new runs")
    table = score_ledger(
        args.ledger,
        load_grid(args.data, metric=args.metric, where=args.where or [], derive=args.derive),
    )
    from fitrules.util import json_ready

    _emit(args, render_scores(table), json_ready({"scores": table.to_dict("records")}))
    return 0


# ---------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from fitrules import __version__

    parser = argparse.ArgumentParser(
        prog="fitrules",
        description="Decide honestly whether a closed-form rule predicts a grid of experiments.",
    )
    parser.add_argument("--version", action="version", version=f"fitrules {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _ADDERS:
        add(sub)
    return parser


_ADDERS = [
    _add_compare,
    _add_fit,
    _add_validate,
    _add_ci,
    _add_predict,
    _add_score,
    _add_forms,
    _add_simulate,
]


def main(argv: list[str] | None = None) -> int:
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(_ARGV)
    try:
        return int(args.func(args) or 0)
    except FitrulesError as err:
        print(f"fitrules {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fitrules {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
