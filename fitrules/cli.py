"""Command line: parse arguments, call one library function, print or write. No logic here.

Every command calls a function of the public API (:mod:`fitrules.api`, ``fitrules.jobs.tune``,
``fitrules.sim``) and prints the text view of what it returns.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path

from fitrules.base.errors import FitrulesError, UsageError, command_line

_ARGV: list[str] = []  # the arguments of the running command, for manifests and reports

DEFAULT_DATA_HELP = (
    "results table (CSV, Parquet or JSON lines), one row a run, or the name of a shipped grid "
    "such as "
    "main (default: the committed main grid, data/main.csv, at inner lr 3e-4)"
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr and exit 2, like every error."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {' '.join(message.split())}")


def _command_line() -> str:
    return shlex.join(["fitrules", *_ARGV])


def _say(args, text: str) -> None:
    """Print a text view unless --quiet."""
    if not getattr(args, "quiet", False):
        print(text)


# ---------------------------------------------------------------- shared options
def _common() -> argparse.ArgumentParser:
    """Options every command takes."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        # SUPPRESS: a -q given before a subcommand (ledger -q verify) is not reset by the
        # subcommand's own default
        default=argparse.SUPPRESS,
        help="print nothing but errors (files asked for are still written; on a command with "
        "--json, --json - still prints the JSON)",
    )
    return p


def _fraction(text: str) -> float:
    try:
        if "/" in text:
            num, den = text.split("/", 1)
            return float(num) / float(den)
        return float(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or fraction") from None


def _add_data_options(p, default_help: str = DEFAULT_DATA_HELP, labels: bool = True) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data", type=Path, default=None, help=default_help)
    g.add_argument("--metric", default=None, help="metric column (default: loss, else val_loss)")
    g.add_argument(
        "--seed-col",
        default=None,
        metavar="COL",
        help="the column that names each run's seed (default: seed, when there is one)",
    )
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
        help='add a column, e.g. "omega = 1/keep - 1" (repeatable; names with spaces in '
        'backticks: "N = `Model Size`")',
    )
    g.add_argument(
        "--rename",
        action="append",
        default=None,
        metavar="OLD=NEW",
        help="rename a column as the table is read, e.g. inner_steps=H or compression.keep=keep "
        "(repeatable; before --derive and --where)",
    )
    g.add_argument(
        "--drop-duplicates",
        action="store_true",
        help="drop rows that repeat an earlier row in every column (a run exported twice); "
        "the count is printed",
    )
    g.add_argument(
        "--unit",
        default=None,
        help="the metric's unit for labels, e.g. nats (default: nats for tables written by "
        "fitrules simulate, otherwise none)"
        if labels
        else argparse.SUPPRESS,  # accepted, but the command draws and labels nothing
    )
    g.add_argument(
        "--units",
        default=None,
        metavar="NAME=UNIT,...",
        help='units of variables for axis labels, e.g. "N=parameters,D=tokens"'
        if labels
        else argparse.SUPPRESS,
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
    from fitrules.base.limits import check_seed

    for seed in seeds:
        check_seed(seed, option)
    if len(set(seeds)) != len(seeds):
        raise FitrulesError(f"{option} {text!r}: a seed is given twice")
    return seeds


def _tune_seeds(args) -> list[int] | None:
    if getattr(args, "tune_seeds", None) is None:
        return None
    return _seed_list(args.tune_seeds, "--tune-seeds")


def _load(args, path: Path | None = None):
    """The grid the data options describe (the default grid without --data)."""
    from fitrules.model.examples import resolve_data
    from fitrules.model.grids import default_grid, load_grid

    path = path or args.data
    if path is None:
        path, where = default_grid(args.where)
    else:
        path, where = resolve_data(path), args.where or []
    return load_grid(
        path,
        metric=args.metric,
        where=where,
        derive=args.derive,
        unit=args.unit,
        seed_col=args.seed_col,
        units=args.units,
        rename=args.rename,
        drop_duplicates=args.drop_duplicates,
    )


def _with_tuning(tuning, text: str, payload: dict) -> tuple[str, dict]:
    if tuning is None:
        return text, payload
    from fitrules.views.text import render_tuning

    return render_tuning(tuning) + "\n\n" + text, payload | {"tuning": tuning.to_dict()}


def _tuned(args, grid):
    """``grid`` reduced by --tune (with the record of the choices), or as it is."""
    from fitrules.api import _tuned as tuned

    return tuned(grid, getattr(args, "tune", None), _tune_seeds(args))


def _add_json_option(p) -> None:
    p.add_argument(
        "--json",
        dest="json_out",
        default=None,
        metavar="PATH",
        help="write the full result as JSON to PATH ('-' for stdout, instead of the text)",
    )


def _add_progress_option(p) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal and not --quiet)",
    )


def _progress_enabled(args) -> bool | None:
    return False if getattr(args, "quiet", False) else args.progress


def _json_text(payload: dict) -> str:
    import json

    from fitrules.base.util import json_ready

    return json.dumps(json_ready(payload), indent=1, sort_keys=False, allow_nan=False) + "\n"


def _add_bootstrap_options(g) -> None:
    from fitrules.base.limits import BOOTSTRAP_KINDS, DEFAULT_BOOTSTRAP

    g.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (200)")
    g.add_argument("--level", type=float, default=0.95, help="interval level (0.95)")
    g.add_argument("--bootstrap-seed", type=int, default=0, help="bootstrap seed (0)")
    g.add_argument(
        "--bootstrap",
        choices=list(BOOTSTRAP_KINDS),
        default=DEFAULT_BOOTSTRAP,
        help="studentized (default): the fit's residuals across cells, symmetric bootstrap-t "
        "intervals from each refit's standard errors; seeds: the runs within each cell, or "
        "residuals, with percentile intervals; auto: residuals when any cell has a single "
        "run, else seeds (percentile; the default before)",
    )


def _add_runs_option(g) -> None:
    g.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="K",
        help="also give the interval for the mean of K new runs at the point (the "
        "configuration's mean plus the seed noise of K runs); predict records that one",
    )


def _add_report_options(p) -> None:
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a report directory (report.md, figures, results.json)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --report DIR")
    p.add_argument(
        "--figure-format",
        default="png",
        metavar="FORMATS",
        help="figure formats in the report, comma-separated: png (always), svg, pdf (default png)",
    )
    p.add_argument(
        "--labels",
        default=None,
        metavar="COL=LABEL,...",
        help="axis labels for columns in the report's figures, e.g. 'val/loss=validation loss' "
        "(default: the column names)",
    )


def _inputs(args) -> list[Path]:
    """The files a command reads, which no output may replace."""
    from fitrules.model.forms import FORMS_FILE
    from fitrules.model.grids import DEFAULT_PAIRED, default_grid

    paths = [
        getattr(args, a, None)
        for a in ("data", "fit_data", "test_data", "ledger", "path", "grammar")
    ]
    if getattr(args, "data", None) is None:
        paths += [default_grid()[0], DEFAULT_PAIRED]
    # every command that reads forms reads it; search reads it only when it exists (its
    # --reference names), so its --forms-out may create it
    if getattr(args, "command", None) != "search" or Path(FORMS_FILE).exists():
        paths.append(Path(FORMS_FILE))
    from fitrules.model.examples import resolve_data

    return [resolve_data(p) for p in paths if p is not None]


def _within(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _file_outputs(args) -> list[tuple[str, Path]]:
    """The files a command writes: (option, path)."""
    out = []
    json_out = getattr(args, "json_out", None)
    if json_out not in (None, "-"):
        out.append(("--json", Path(json_out) if str(json_out).strip() else json_out))
    spec_out = getattr(args, "spec_out", None)
    if spec_out is not None and getattr(args, "report", None) is None:
        out.append(("--spec-out", Path(spec_out)))
    forms_out = getattr(args, "forms_out", None)
    if forms_out is not None:
        out.append(("--forms-out", Path(forms_out)))
    return out


def _take_outputs(args) -> None:
    """Check and take every output before any work: ``--report DIR``, ``--json PATH`` and
    ``--spec-out PATH``.

    No output may be an input or another output (by resolved path and inode). The report
    directory is created empty now (create-or-fail) and each file's staging file beside it,
    so a place that cannot be written, or a report that exists, is refused before the fit;
    :func:`main` removes them if the command then fails.
    """
    from fitrules.base.outputs import check_distinct

    report = getattr(args, "report", None)
    inputs = _inputs(args)
    files = _file_outputs(args)
    args.json_file = None
    args.spec_file = None
    args.forms_file = None
    args.report_slot = None
    check_distinct(files, inputs)
    for option, target in files:
        if report is not None and str(target).strip() and _within(Path(target), report):
            raise FitrulesError(
                f"{option} {target}: is inside --report {report}, which is written whole; "
                "choose a path outside it"
            )
    if report is not None:
        from fitrules.views.figures import parse_formats

        parse_formats(args.figure_format)  # a bad format is refused before any work
        from fitrules.views.figures import parse_labels

        parse_labels(getattr(args, "labels", None))
        for p in inputs:
            if p.exists() and _within(p, report):
                raise FitrulesError(
                    f"--report {report}: holds {p.name}, an input of this command; refusing "
                    "to replace it"
                )
        args.report_slot = args.outputs.reserve_dir(report, args.force)
    for option, target in files:
        staged = args.outputs.stage_file(target, option)
        if option == "--json":
            args.json_file = staged
        elif option == "--forms-out":
            args.forms_file = staged
        else:
            args.spec_file = staged


def _write_report(args, write, *a, **k) -> None:
    """Write the report (into its taken directory) and remember it was written."""
    from fitrules.views.figures import axis_labels, figure_formats

    shown = getattr(args, "progress", None)  # as the progress bar: --progress, or a terminal
    if (sys.stderr.isatty() if shown is None else shown) and not getattr(args, "quiet", False):
        print(f"writing the report (tables and figures) to {args.report} ...", file=sys.stderr)
    with figure_formats(args.figure_format), axis_labels(getattr(args, "labels", None)):
        write(*a, **k)
    if args.report_slot is not None:
        args.report_slot.written = True


def _emit(args, text: str, payload) -> None:
    """Write the JSON if asked (atomically, into the file taken before the work), then print
    the text view (unless the JSON goes to stdout or --quiet). ``payload`` is the JSON's
    dict, or a function that makes it: nothing is built for an output not asked for (the
    per-cell payload of a 200,000-cell fit took longer than the fit)."""
    wanted = getattr(args, "json_file", None) is not None or args.json_out == "-"
    if wanted and callable(payload):
        payload = payload()
    if getattr(args, "json_file", None) is not None:
        args.json_file.commit(_json_text(payload))
    if args.json_out == "-":
        sys.stdout.write(_json_text(payload))
    else:
        _say(args, text)


def _add_objective_options(g) -> None:
    g.add_argument(
        "--objective",
        default="rel_ls",
        choices=["rel_ls", "log_huber", "abs_ls"],
        help="training objective (default rel_ls: relative least squares)",
    )
    g.add_argument(
        "--delta", type=float, default=1e-3, help="Huber delta for log_huber (default 1e-3)"
    )


def _add_fit_options(p) -> None:
    g = p.add_argument_group("fitting")
    _add_objective_options(g)
    g.add_argument(
        "--weights",
        default="cells",
        choices=["cells", "runs", "inverse-variance"],
        help="how each cell's squared residual counts: cells (default, once each), runs (by "
        "its number of runs), inverse-variance (by 1/standard error^2)",
    )
    _add_form_options(g)


def _add_form_options(g) -> None:
    """--fix, --bound, --by, --shared: constants fixed, bounded, or one per group."""
    g.add_argument(
        "--fix",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="hold a constant at a value, e.g. alpha=0.34 (repeatable)",
    )
    g.add_argument(
        "--bound",
        action="append",
        default=None,
        metavar="NAME=LOW..HIGH",
        help="bounds of a nonlinear constant, e.g. 'Nc=1e10..1e16' (repeatable; a wide "
        "positive range is searched on a log scale)",
    )
    g.add_argument(
        "--by",
        default=None,
        metavar="COLUMN",
        help="one form per level of COLUMN, fitted jointly: --shared constants common to all "
        "groups, the others one per group",
    )
    g.add_argument(
        "--shared",
        default=None,
        metavar="NAMES",
        help="with --by: comma-separated constants common to all groups (default: the "
        "nonlinear ones, e.g. exponents)",
    )


def _form_options(args) -> dict:
    """The fit options that change forms or weights, as keyword arguments of the API."""
    from fitrules.model.forms import parse_bounds, parse_fix

    parse_fix(args.fix)  # checked before any output is taken
    parse_bounds(args.bound)
    if args.shared is not None and args.by is None:
        raise FitrulesError("--shared needs --by COLUMN")
    return dict(
        fix=args.fix, bounds=args.bound, by=args.by, shared=args.shared, weights=args.weights
    )


def _customised_forms(args, forms: list) -> list:
    """``forms`` with --fix, --bound, --by and --shared applied (for commands that take
    Form objects rather than the API's keyword arguments)."""
    from fitrules.model.forms import customise, parse_bounds, parse_fix

    if args.shared is not None and args.by is None:
        raise FitrulesError("--shared needs --by COLUMN")
    shared = None
    if args.shared is not None:
        shared = [c.strip() for c in args.shared.split(",") if c.strip()]
    return customise(forms, parse_fix(args.fix), parse_bounds(args.bound), args.by, shared)


FORM_HELP = 'a form name (see "fitrules forms list") or an inline form "NAME = EXPR"'


# ---------------------------------------------------------------- simulate
def _add_simulate(sub, common) -> None:
    p = sub.add_parser(
        "simulate",
        parents=[common],
        help="run a DiLoCo simulation grid (spec TOML) or one cell",
        description="Run the numpy DiLoCo harness over a grid spec, appending "
        "each finished run to --out (resumable), and write a manifest beside it. When "
        "stderr is not a terminal, a line of progress is printed at most every 10 seconds.",
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
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run each run as a task on a Dask cluster instead: a scheduler address "
        "(tcp://host:8786) or local:N for N local processes; needs "
        'pip install "fitrules[distributed]"',
    )
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
    _add_progress_option(p)
    p.set_defaults(func=_simulate)


def _simulate(args) -> int:
    from fitrules import api

    table = api.simulate(args.spec, args.out, cell=args.cell, seeds=args.seeds, jobs=args.jobs,
                         scheduler=args.scheduler, progress=_progress_enabled(args),
                         command=_command_line(), quiet=getattr(args, "quiet", False))  # fmt: skip
    n_div = int(table["diverged"].astype(str).str.lower().eq("true").sum())
    _say(args, f"{args.out}: {len(table)} runs of {table.attrs['spec']!r} ({n_div} diverged)")
    return 0


# ---------------------------------------------------------------- validate
def _add_validate(sub, common) -> None:
    p = sub.add_parser(
        "validate",
        parents=[common],
        help="check a results grid and summarise it",
        description="Check a results table and print runs, cells, levels per "
        "factor, seeds per cell and excluded rows.",
    )
    p.add_argument(
        "path", nargs="?", type=Path, help="results table (the same as --data; give one)"
    )
    _add_data_options(p)
    _add_tune_options(p)
    _add_json_option(p)
    p.set_defaults(func=_validate)


def _validate(args) -> int:
    from fitrules import api

    if args.path is not None and args.data is not None:
        raise FitrulesError(
            f"give the grid once: PATH ({args.path}) or --data ({args.data}), not both"
        )
    _tune_seeds(args)
    _take_outputs(args)
    result = api.validate(
        _load(args, args.path), tune=getattr(args, "tune", None), tune_seeds=_tune_seeds(args)
    )
    _emit(args, result.text(), result.to_dict())
    return 0


# ---------------------------------------------------------------- compare
def _add_compare(sub, common) -> None:
    p = sub.add_parser(
        "compare",
        parents=[common],
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
        help="comma-separated form names (default: the built-in set, unless --form is given; "
        "see 'fitrules forms list')",
    )
    g.add_argument(
        "--form",
        action="append",
        default=[],
        metavar='"NAME = EXPR"',
        help="a form given inline (repeatable); compared together with the --forms names, "
        "or on its own when --forms is not given (the built-in set is then left out)",
    )
    g = p.add_argument_group("splits")
    g.add_argument(
        "--splits",
        type=int,
        default=None,
        help="number of random splits (default 300; structured protocols make their own)",
    )
    g.add_argument(
        "--train-frac",
        type=_fraction,
        default=1 / 3,
        help="fraction of cells fitted in each split (default 1/3)",
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the split sequence (default 0)")
    g.add_argument(
        "--verdict-train-frac",
        type=_fraction,
        default=0.9,
        metavar="F",
        help="random splits: the paired tests are made on as many splits (same seed) fitting "
        "this fraction of the cells, where the test has power (default 0.9); summaries and "
        "counts of splits won describe the --train-frac splits",
    )
    g.add_argument(
        "--split",
        action="append",
        default=None,
        metavar="PROTOCOL",
        help="random (default), leave-one-level-out:COL, extrapolate:COL, "
        "extrapolate:COL:VALUE (fit below VALUE, score from it on; or 'extrapolate:COL>=VALUE' "
        "in quotes), transfer (repeatable: one section per protocol, never pooled)",
    )
    g.add_argument(
        "--seeds",
        default="cells",
        choices=["cells", "cells-and-seeds"],
        help="the held-out error's protocol: cells (default: every run of the training and "
        "held-out cells) or cells-and-seeds (a third of the seed ids held out too, so that "
        "the error is what new runs at new seed ids show)",
    )
    g.add_argument("--fit-data", type=Path, default=None, help="transfer: the grid fitted")
    g.add_argument("--test-data", type=Path, default=None, help="transfer: the grid scored")
    g = p.add_argument_group("verdicts (which pairs are tested; Holm runs over them)")
    g.add_argument(
        "--against",
        default=None,
        metavar="FORM",
        help="test FORM against each other form only (default: every pair)",
    )
    g.add_argument(
        "--pairs",
        default=None,
        metavar="A:B,...",
        help='test only these pairs, e.g. "composition:additive,composition:log_additive"',
    )
    _add_fit_options(p)
    _add_guard_options(p)
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
    _add_json_option(p)
    _add_progress_option(p)
    _add_report_options(p)
    p.set_defaults(func=_compare)


def _add_guard_options(p) -> None:
    """--guard-span, --guard-se, --guard-excursion, --metric-range (compare and search)."""
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
        "--guard-excursion",
        type=float,
        default=10.0,
        metavar="PCT",
        help="name a fit whose predictions at the cells it did not fit lie on average more "
        "than PCT%% of the training values' level outside their range (default 10)",
    )
    g.add_argument(
        "--metric-range",
        default=None,
        metavar="LO,HI",
        help="name a fit that predicts outside this plausible range of the metric, e.g. "
        "0,3.61 for nats over 37 characters (default: no range)",
    )


def _compare(args) -> int:
    from fitrules import api
    from fitrules.base.util import split_progress
    from fitrules.engine.guard import parse_metric_range
    from fitrules.model.forms import select_forms
    from fitrules.views.text import render_comparison

    names = [n.strip() for n in args.forms.split(",") if n.strip()] if args.forms else None
    forms = select_forms(names, args.form)
    metric_range = parse_metric_range(args.metric_range)
    protocols = args.split or ["random"]
    if args.splits is not None and not any(p.strip() == "random" for p in protocols):
        raise FitrulesError(
            f"--splits {args.splits} applies to random splits only; "
            f"{', '.join(protocols)} make their own (one per held-out group)"
        )
    transfer = any(p.strip() == "transfer" for p in protocols)
    if transfer and (args.fit_data is None or args.test_data is None):
        raise FitrulesError("--split transfer needs --fit-data A and --test-data B")
    if not transfer and (args.fit_data is not None or args.test_data is not None):
        raise FitrulesError("--fit-data and --test-data are used only with --split transfer")
    # every option is checked (splitters validate on construction) before any output is
    # taken, and every output is taken before the data are read
    from fitrules.engine.fit import Objective
    from fitrules.engine.guard import GuardOptions
    from fitrules.model.splits import parse_protocol

    Objective(args.objective, args.delta)
    form_options = _form_options(args)
    GuardOptions(args.guard_span, args.guard_se, metric_range, args.guard_excursion)
    labels = (str(args.fit_data), str(args.test_data)) if transfer else None
    for t in protocols:
        parse_protocol(t, args.splits or 300, args.train_frac, args.seed, labels)
    from fitrules.jobs.compare import check_verdict_train_frac, parse_pairs

    check_verdict_train_frac(args.verdict_train_frac)
    parse_pairs(args.pairs, args.against, [f.name for f in forms])
    _take_outputs(args)
    grid = _load(args)
    # structured protocols' split counts depend on the grid: no total, just a count
    n = args.splits if args.splits is not None else 300
    random_only = all(p.strip() == "random" for p in protocols)
    # random splits are fitted twice: the descriptive splits and the verdict's (unless the
    # descriptive train fraction is already the verdict's)
    fits_per_split = 2 if args.train_frac < args.verdict_train_frac else 1
    # the bar counts splits (what --splits asked for), each one fit per form and pass
    total = n * len(protocols) if random_only else None
    common = dict(
        train_frac=args.train_frac,
        seed=args.seed,
        objective=args.objective,
        delta=args.delta,
        keep_degenerate=args.keep_degenerate,
        guard_span=args.guard_span,
        guard_se=args.guard_se,
        guard_excursion=args.guard_excursion,
        metric_range=metric_range,
        against=args.against,
        pairs=args.pairs,
        verdict_train_frac=args.verdict_train_frac,
        seeds=args.seeds,
        **form_options,
    )
    results = []
    desc = f"fitting {len(forms)} form{'s' if len(forms) != 1 else ''}"
    with split_progress(total, len(forms) * fits_per_split, desc, _progress_enabled(args)) as step:
        for proto in protocols:
            splits = n if proto.strip() == "random" else None
            if proto.strip() == "transfer":
                if args.tune:
                    raise FitrulesError(
                        "--tune with --split transfer is not supported: tune each grid"
                    )
                results.append(
                    api.compare(
                        _load(args, args.fit_data),
                        forms,
                        split="transfer",
                        test_grid=_load(args, args.test_data),
                        on_progress=step,
                        **common,
                    )
                )
            else:
                results.append(
                    api.compare(
                        grid,
                        forms,
                        splits,
                        split=proto,
                        tune=args.tune,
                        tune_seeds=_tune_seeds(args),
                        on_progress=step,
                        **common,
                    )
                )
    payloads = [r.to_dict() for r in results]
    payload = payloads[0] if len(payloads) == 1 else {"protocols": payloads}
    text = "\n\n".join(render_comparison(r) for r in results)
    if results[0].tuning is not None:
        from fitrules.views.text import render_tuning

        text = render_tuning(results[0].tuning) + "\n\n" + text
    if args.report is not None:
        from fitrules.views.markdown import comparison_report, protocols_report

        if len(results) == 1:
            _write_report(
                args,
                comparison_report,
                results[0],
                payloads[0],
                args.report,
                _command_line(),
                args.force,
                results[0].tuning,
            )
        else:
            _write_report(
                args, protocols_report, results, payloads, args.report, _command_line(), args.force
            )
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


# ---------------------------------------------------------------- search
def _add_search(sub, common) -> None:
    p = sub.add_parser(
        "search",
        parents=[common],
        help="propose forms from a grammar; choose by nested validation",
        description="Propose candidate forms from a small grammar over the grid's variables, "
        "rank them inside each outer training set by inner random splits, and report the "
        "outer error of whatever the ranking picks: the error of the search itself, with the "
        "optimism of selection, a front of outer error against constants, and the front's "
        "forms as forms.toml entries for compare. See docs/tutorials/search.md.",
    )
    _add_data_options(p)
    _add_tune_options(p)
    g = p.add_argument_group(
        "grammar (see fitrules.engine.grammar; each replaces --grammar's value)"
    )
    g.add_argument(
        "--grammar",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML file of grammar fields (variables, terms, max_constants, ...)",
    )
    g.add_argument(
        "--variables",
        default=None,
        metavar="COLS",
        help="comma-separated columns the forms read (default: the varying numeric "
        "columns; of two that map one to one, such as keep and omega, the last)",
    )
    g.add_argument(
        "--terms", type=int, default=None, help="most terms besides the intercept (default 3)"
    )
    g.add_argument(
        "--max-constants",
        type=int,
        default=None,
        metavar="C",
        help="most constants of a form, intercept included (default 4)",
    )
    g.add_argument(
        "--max-nonlinear",
        type=int,
        default=None,
        metavar="Q",
        help="most exponents and saturation scales of a form (default 2)",
    )
    g.add_argument(
        "--interactions",
        type=int,
        default=None,
        metavar="V",
        help="most variables in one product term (default 2)",
    )
    g.add_argument(
        "--factors",
        default=None,
        metavar="KINDS",
        help="factor kinds: power, linear, inverse, sqrt, log, saturating (default all)",
    )
    g.add_argument(
        "--levels",
        default=None,
        metavar="COLS",
        help="also propose one intercept per level of these columns (L0[COL])",
    )
    g = p.add_argument_group("nested validation")
    g.add_argument(
        "--split",
        default="random",
        metavar="PROTOCOL",
        help="outer protocol: random (default), extrapolate:COL[:VALUE], leave-one-level-out:COL",
    )
    g.add_argument("--splits", type=int, default=20, help="outer random splits (default 20)")
    g.add_argument(
        "--train-frac",
        type=_fraction,
        default=0.8,
        help="fraction of cells fitted in each outer random split (default 0.8)",
    )
    g.add_argument(
        "--inner-splits",
        type=int,
        default=10,
        help="inner random splits of each outer training set (default 10)",
    )
    g.add_argument(
        "--inner-train-frac",
        type=_fraction,
        default=0.75,
        metavar="F",
        help="fraction of an outer training set fitted in each inner split (0.75)",
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the outer and inner splits (0)")
    g.add_argument(
        "--rule",
        default="one-se",
        choices=["one-se", "best"],
        help="how the inner ranking picks: one-se (default: fewest constants within "
        "one standard error of the best) or best",
    )
    g.add_argument(
        "--reference",
        default=None,
        metavar="NAMES",
        help="comma-separated forms fitted on the same outer splits without "
        "selection (default: composition,log_additive where the grid has their "
        "variables; 'none' for none)",
    )
    g.add_argument(
        "--form",
        action="append",
        default=[],
        metavar='"NAME = EXPR"',
        help="a reference form given inline (repeatable)",
    )
    g.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes (default: the machine's cores; results do not depend on it)",
    )
    g.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the fits as tasks on a Dask cluster instead of --jobs processes: a "
        "scheduler address (tcp://host:8786) or local:N for N local processes (the same "
        'result); needs pip install "fitrules[distributed]"',
    )
    g.add_argument(
        "--screen",
        default="auto",
        metavar="K",
        help="a staged search: screen every candidate on 2 inner splits of each outer split, "
        "fit the K best of each number of constants there in full (0: every candidate in "
        "full; default auto: 25 above 2,000 candidates)",
    )
    g.add_argument(
        "--at",
        action="append",
        default=[],
        metavar='"N=1e10,D=2e11"',
        help="a point where the pick will be used (repeatable): its fit on all cells goes "
        "through the wild-extrapolation guard there, as compare's fits do at held-out cells",
    )
    g.add_argument(
        "--yes",
        action="store_true",
        help="run a search estimated to take longer than the time budget (15 min; without "
        "--yes it is refused before any fit, naming the options that would shrink it)",
    )
    g = p.add_argument_group("fitting")
    _add_objective_options(g)
    _add_guard_options(p)
    p.add_argument(
        "--forms-out",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the front's forms as forms.toml entries to PATH",
    )
    _add_json_option(p)
    _add_progress_option(p)
    _add_report_options(p)
    p.set_defaults(func=_search)


def _screen_option(text: str) -> int | str:
    """``--screen``: auto, or a whole number >= 0 (checked by the API)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise FitrulesError(
            f"--screen {text!r}: give a whole number >= 0 (0: no screen) or auto"
        ) from None


def _search(args) -> int:
    import os

    from fitrules import api
    from fitrules.base.util import progress
    from fitrules.engine.guard import parse_metric_range
    from fitrules.jobs.search import estimate_text
    from fitrules.model.forms import select_forms

    metric_range = parse_metric_range(args.metric_range)
    if args.reference is not None and args.reference.strip() == "none":
        refs: list | None = [] if not args.form else select_forms([], args.form)
    elif args.reference is not None or args.form:
        names = [n.strip() for n in (args.reference or "").split(",") if n.strip()]
        refs = select_forms(names, args.form) if names or args.form else []
    else:
        refs = None
    if args.scheduler is not None:
        jobs = args.jobs if args.jobs is not None else 1
    else:
        jobs = args.jobs if args.jobs is not None else max(1, min(os.cpu_count() or 1, 8))
    _take_outputs(args)
    grid = _load(args)
    quiet = getattr(args, "quiet", False)
    shown = _progress_enabled(args)
    state: dict = {}

    def on_plan(plan, seconds) -> None:
        if not quiet:
            print(
                f"fitrules search: {plan.n_generated:,} forms proposed, "
                f"{plan.n_candidates:,} fittable on the fewest cells a split fits; "
                + (
                    f"{plan.fits_per_candidate:,} fits each"
                    if not plan.screen_keep
                    else f"staged: {plan.screen_fits:,} screening fits each, then "
                    f"{plan.fits_per_candidate:,} for the best {plan.screen_keep} of each number "
                    f"of constants in each outer split (at most {plan.survivors_max:,})"
                )
                + f"; estimated {estimate_text(seconds)} on "
                f"{jobs} process{'es' if jobs > 1 else ''}",
                file=sys.stderr,
            )
        open_bar(2 * plan.n_candidates)  # api.search reports 2 x candidates in all

    def open_bar(total) -> None:  # after the plan's line: a bar drawn first leaves "0it"
        if "bar" not in state:
            state["bar"] = bars.enter_context(progress(total, desc="searching", enabled=shown))

    def on_progress(k: int) -> None:
        open_bar(None)
        state["bar"].update(k)

    with ExitStack() as bars:
        result = api.search(
            grid,
            variables=args.variables,
            terms=args.terms,
            max_constants=args.max_constants,
            max_nonlinear=args.max_nonlinear,
            interactions=args.interactions,
            factors=args.factors,
            levels=args.levels,
            grammar=args.grammar,
            split=args.split,
            splits=args.splits,
            train_frac=args.train_frac,
            inner_splits=args.inner_splits,
            inner_train_frac=args.inner_train_frac,
            seed=args.seed,
            rule=args.rule,
            references=refs,
            objective=args.objective,
            delta=args.delta,
            guard_span=args.guard_span,
            guard_se=args.guard_se,
            guard_excursion=args.guard_excursion,
            metric_range=metric_range,
            tune=args.tune,
            tune_seeds=_tune_seeds(args),
            jobs=jobs,
            on_plan=on_plan,
            on_progress=on_progress,
            yes=args.yes,
            at=args.at or None,
            screen=_screen_option(args.screen),
            scheduler=args.scheduler,
        )
    text = str(result)
    if args.forms_out is not None:
        args.forms_file.commit(result.forms_toml())
        text += f"\n\nforms written to {args.forms_out}"
    if args.report is not None:
        _write_report(args, result.report, args.report, _command_line(), args.force)
        text += f"\n\nreport written to {args.report}/report.md"
    _emit(args, text, result.to_dict)
    return 0


# ---------------------------------------------------------------- fit
def _add_fit(sub, common) -> None:
    p = sub.add_parser(
        "fit",
        parents=[common],
        help="fit one form on all cells",
        description="Fit one form on every cell of the grid and print its constants with "
        "standard errors and correlations (from the Jacobian), training error and "
        "diagnostics; with --intervals, bootstrap intervals too.",
    )
    _add_data_options(p)
    p.add_argument("--form", required=True, metavar='NAME or "NAME = EXPR"', help=FORM_HELP)
    _add_tune_options(p)
    _add_fit_options(p)
    g = p.add_argument_group(
        "intervals (bootstrap: over the residuals, studentized by default; or over the runs "
        "within each cell)"
    )
    g.add_argument("--intervals", action="store_true", help="bootstrap intervals for the constants")
    g.add_argument(
        "--predict",
        action="append",
        default=[],
        metavar='"H=8,keep=0.25"',
        help="prediction with interval at a point, in the grid or not (repeatable)",
    )
    _add_runs_option(g)
    _add_bootstrap_options(g)
    _add_json_option(p)
    _add_report_options(p)
    p.add_argument(
        "--no-cells",
        dest="cells",
        action="store_false",
        help="leave the per-cell table (observed values, predictions, residuals) out of the "
        "JSON and the report's results.json, e.g. for data that may not be redistributed",
    )
    p.set_defaults(func=_fit)


def _fit(args) -> int:
    from fitrules import api
    from fitrules.engine.fit import Objective
    from fitrules.engine.intervals import check_bootstrap_options, parse_point
    from fitrules.model.forms import resolve_form

    Objective(args.objective, args.delta)  # checks the objective's options
    form_options = _form_options(args)
    form = resolve_form(args.form)
    if args.intervals or args.predict:
        check_bootstrap_options(args.resamples, args.bootstrap_seed, args.level)
        for text in args.predict:
            parse_point(text)
    _check_runs(args.runs)
    _take_outputs(args)
    fitted = api.fit(
        _load(args),
        form,
        objective=args.objective,
        delta=args.delta,
        intervals=args.intervals,
        predict=args.predict,
        bootstrap=args.bootstrap,
        resamples=args.resamples,
        seed=args.bootstrap_seed,
        level=args.level,
        tune=args.tune,
        tune_seeds=_tune_seeds(args),
        **form_options,
        runs=args.runs,
    )
    if args.report is not None:  # only once everything above has succeeded
        _write_report(args, fitted.report, args.report, args.force, _command_line(), args.cells)
    _emit(args, str(fitted), lambda: fitted.to_dict(args.cells))
    return 0


# ---------------------------------------------------------------- forms
def _add_forms(sub, common) -> None:
    p = sub.add_parser("forms", parents=[common], help="list, show, add or remove forms")
    fsub = p.add_subparsers(dest="forms_command", required=True, metavar="ACTION")
    q = fsub.add_parser("list", parents=[common], help="list the available forms")
    q.set_defaults(func=_forms_list)
    q = fsub.add_parser(
        "show",
        parents=[common],
        help="explain one form: variables, linear and nonlinear constants",
        description="Explain one form. A form that declares its variables needs no grid; "
        "otherwise its variables are resolved against --data (default: the main grid).",
    )
    q.add_argument("name", help="the form's name")
    _add_data_options(q, labels=False)
    q.set_defaults(func=_forms_show)
    q = fsub.add_parser(
        "add",
        parents=[common],
        help="add a form to forms.toml in the working directory",
        description="Add a form to forms.toml in the working directory. Declare its "
        'variables in the name, e.g. "chin(N, D)"; otherwise every name is checked against '
        "the columns of --data (default: the main grid), so that a misspelt variable is "
        "refused instead of becoming a constant.",
    )
    q.add_argument("name", help='the form\'s name, optionally with its variables: "mine(H, omega)"')
    q.add_argument("expression", help='the expression, e.g. "L0 + a*omega**c"')
    _add_data_options(q, labels=False)
    q.set_defaults(func=_forms_add)
    q = fsub.add_parser(
        "remove", parents=[common], help="remove a form from forms.toml in the working directory"
    )
    q.add_argument("name", help="the form's name")
    q.set_defaults(func=_forms_remove)


def _forms_list(args) -> int:
    from fitrules.model.forms import available_forms

    forms = available_forms()
    heads = {
        n: n + (f"({', '.join(f.variables)})" if f.variables else "") for n, f in forms.items()
    }
    w = max(len(h) for h in heads.values())
    for name, f in forms.items():
        _say(args, f"{heads[name].ljust(w)}  {f.expression}    [{f.source}]")
    return 0


def _forms_show(args) -> int:
    from fitrules.model.forms import select_forms
    from fitrules.views.text import render_form

    f = select_forms([args.name])[0]
    resolved_by = None
    if f.variables is None:
        grid = _load(args)
        f = f.bind(grid.columns, grid.runs)
        resolved_by = grid.label
    _say(args, render_form(f, resolved_by))
    return 0


def _forms_add(args) -> int:
    from fitrules import api
    from fitrules.base.paths import FORMS_FILE
    from fitrules.model.forms import parse_form_line

    line = f"{args.name} = {args.expression}"
    unbound = parse_form_line(line, "fitrules forms add").variables is None
    grid = _load(args) if unbound or args.data is not None else None
    form = api.add_form(line, grid)
    checked = (
        f" (variables resolved against {grid.label}: {', '.join(form.bound_variables)})"
        if grid is not None and unbound
        else ""
    )
    _say(args, f"added {form.describe()} to {FORMS_FILE}{checked}")
    return 0


def _forms_remove(args) -> int:
    from fitrules import api

    path = api.remove_form(args.name)
    _say(args, f"removed {args.name} from {path}")
    return 0


# ---------------------------------------------------------------- ci
PAIRED_DATA_HELP = (
    "results table (CSV or Parquet), one row a run (default: the committed tuned paired "
    "grid, data/paired_tuned.csv, with --tune lr --tune-seeds 0,1,2)"
)


def _add_ci(sub, common) -> None:
    p = sub.add_parser(
        "ci",
        parents=[common],
        help="paired-seed confidence intervals: treatment vs baseline",
        description="Pair runs by seed and estimate treatment - baseline with a "
        "paired t interval, a BCa bootstrap interval, Wilcoxon and sign-flip "
        "p-values. With no --data: the committed tuned paired grid, synchronous "
        "baseline against DiLoCo at H=16, each arm's lr tuned on seeds 0,1,2 and the "
        "interval over the other seeds.",
    )
    _add_data_options(p, PAIRED_DATA_HELP)
    _add_tune_options(p)
    p.add_argument(
        "--baseline",
        default=None,
        metavar="SEL",
        help='baseline runs, e.g. "algo=sync" (required with --data)',
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
    _add_json_option(p)
    _add_report_options(p)
    p.set_defaults(func=_ci)


def _ci(args) -> int:
    from fitrules import api
    from fitrules.engine.stats import check_ci_options, parse_selection
    from fitrules.views.text import render_ci

    check_ci_options(args.level, args.resamples, args.seed)
    default = args.data is None
    if default and args.baseline is None and not args.treatment and not args.treatment_sweep:
        args.baseline, args.treatment = "algo=sync", ["algo=diloco,H=16,keep=1"]
    if args.baseline is None:
        raise FitrulesError("--baseline is required with --data")
    if not args.treatment and args.treatment_sweep is None:
        raise FitrulesError("give --treatment SEL (repeatable) or --treatment-sweep COL")
    parse_selection(args.baseline, "--baseline")
    for t in args.treatment:
        parse_selection(t, "--treatment")
    _tune_seeds(args)  # checks --tune-seeds before any output is taken
    _take_outputs(args)
    if default:
        from fitrules.model.grids import DEFAULT_PAIRED, DEFAULT_PAIRED_TUNE, load_grid

        grid = load_grid(DEFAULT_PAIRED, metric=args.metric, where=args.where or [],
                         derive=args.derive, unit=args.unit, seed_col=args.seed_col,
                         units=args.units, rename=args.rename,
                         drop_duplicates=args.drop_duplicates)  # fmt: skip
        if args.tune is None:
            args.tune, args.tune_seeds = list(DEFAULT_PAIRED_TUNE[0]), DEFAULT_PAIRED_TUNE[1]
    else:
        grid = _load(args)
    res = api.ci(
        grid,
        args.baseline,
        args.treatment,
        sweep=args.treatment_sweep,
        tune=args.tune,
        tune_seeds=_tune_seeds(args),
        level=args.level,
        resamples=args.resamples,
        seed=args.seed,
    )
    payload = res.to_dict()
    payload["command"] = _command_line()
    if args.report is not None:  # only once everything above has succeeded
        _write_report(args, res.report, args.report, args.force, _command_line())
    _emit(args, *_with_tuning(res.tuning, render_ci(res.results, payload), payload))
    return 0


# ---------------------------------------------------------------- design
def _add_design(sub, common) -> None:
    p = sub.add_parser(
        "design",
        parents=[common],
        help="which runs to do next: cells that tell forms apart",
        description="Rank candidate cells by how well a few seeds there would tell the forms "
        "apart (or, with one form and --target, pin down its prediction there), choose a "
        "batch under --budget, and print the commands of the loop design -> predict -> "
        "simulate -> score.",
    )
    _add_data_options(p)
    _add_tune_options(p)
    p.add_argument(
        "--forms", required=True, metavar="A,B[,...]", help="forms to discriminate, or one form"
    )
    p.add_argument(
        "--form",
        action="append",
        default=[],
        metavar='"NAME = EXPR"',
        help="a form given inline, also to be named in --forms (repeatable)",
    )
    p.add_argument(
        "--candidates",
        default=None,
        metavar='"H=2,8,32;keep=1/32"',
        help="cells to consider (default: the grid's levels and geometric midpoints, minus "
        "the cells already run)",
    )
    p.add_argument(
        "--target",
        default=None,
        metavar='"H=256,omega=63"',
        help="one form: the cell whose prediction the batch should pin down",
    )
    p.add_argument("--budget", type=int, default=24, help="runs to spend (default 24)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per cell, at least (default 3)")
    p.add_argument("--max-seeds", type=int, default=12, help="seeds per cell, at most (12)")
    p.add_argument("--power", type=float, default=0.8, help="power for seeds needed (0.8)")
    p.add_argument("--alpha", type=float, default=0.05, help="two-sided level (0.05)")
    p.add_argument("--design-splits", type=int, default=100, help="random-split refits (100)")
    p.add_argument("--resamples", type=int, default=100, help="seed-bootstrap refits (100)")
    p.add_argument("--seed", type=int, default=0, help="seed of splits and bootstrap (0)")
    _add_objective_options(p.add_argument_group("fitting"))
    p.add_argument(
        "--ledger",
        dest="ledger_name",
        default="design.jsonl",
        help="ledger named in the commands (not read or written by design)",
    )
    p.add_argument(
        "--runs-out", default="design_runs.csv", help="results CSV named in the commands"
    )
    p.add_argument(
        "--spec-out",
        type=Path,
        default=None,
        help="write the batch as a simulate spec here (with --report: runs.toml inside it); "
        "each cell gets fresh seed ids, so that a seed's effect, shared by every cell it "
        "runs at, averages out over the new cells (a tuned spec keeps one set of ids)",
    )
    _add_json_option(p)
    _add_report_options(p)
    _add_form_options(p.add_argument_group("constants"))
    p.set_defaults(func=_design)


def _design(args) -> int:
    import math
    import shlex

    from fitrules.jobs.design import (
        batch_spec,
        check_design_options,
        design,
        design_forms,
        loop_commands,
        no_spec_reason,
    )
    from fitrules.views.design import design_report, render_design

    forms = design_forms(args.forms, args.form)
    forms = _customised_forms(args, forms)
    check_design_options(
        len(forms),
        args.budget,
        args.seeds,
        args.max_seeds,
        args.power,
        args.alpha,
        args.design_splits,
        args.resamples,
        args.target,
    )
    from fitrules.engine.fit import Objective

    Objective(args.objective, args.delta)  # checks the objective's options
    _tune_seeds(args)
    _take_outputs(args)
    spec_file = args.spec_file
    grid, tuning = _tuned(args, _load(args))
    d = design(
        grid,
        forms,
        args.candidates,
        args.budget,
        args.seeds,
        args.max_seeds,
        args.power,
        args.alpha,
        args.design_splits,
        args.resamples,
        args.seed,
        args.target,
        objective=args.objective,
        delta=args.delta,
    )
    tuned = None
    if tuning is not None:
        tuned = {k: v for k, v in tuning.describe()["levels"].items()}
    spec_text = batch_spec(d, grid, tuned)
    if spec_file is not None and spec_text is None:
        raise FitrulesError(
            f"--spec-out {args.spec_out}: no simulate spec for this batch: "
            f"{no_spec_reason(d, grid, tuned)}; leave out --spec-out"
        )
    if tuned and len(d.chosen):
        per = math.prod(len(v) for v in tuned.values())
        d.notes.append(
            f"the grid is tuned: each chosen cell runs at every level of "
            f"{', '.join(tuned)} ({per} levels), {per * int(d.chosen['runs'].sum())} runs in "
            "all, and score tunes the new runs the same way"
        )
    spec_path = None
    if spec_text is not None:
        if args.report is not None:
            spec_path = str(args.report / "runs.toml")
        elif args.spec_out is not None:
            spec_path = str(args.spec_out)
    data_args: list[str] = []
    if args.data is not None:
        data_args += ["--data", str(args.data)]
    for option in ("metric", "seed_col", "unit"):
        if getattr(args, option) is not None:
            data_args += [f"--{option.replace('_', '-')}", getattr(args, option)]
    for w in args.where or []:
        data_args += ["--where", w]
    for dv in args.derive:
        data_args += ["--derive", dv]
    if args.objective != "rel_ls" or args.delta != 1e-3:  # predict fits as design did
        data_args += ["--objective", args.objective, "--delta", f"{args.delta:g}"]
    for t in args.tune or []:
        data_args += ["--tune", t]
    if args.tune_seeds is not None:
        data_args += ["--tune-seeds", args.tune_seeds]
    d.commands = loop_commands(d, data_args, args.ledger_name, spec_path, args.runs_out)
    if args.report is not None:
        _write_report(args, design_report, d, args.report, _command_line(), spec_text, args.force)
    elif spec_file is not None and spec_text is not None:
        spec_file.commit(spec_text)
    text = render_design(d)
    if args.report is not None:
        text += f"\n\nreport written to {shlex.quote(str(args.report))}/report.md"
    _emit(args, *_with_tuning(tuning, text, d.to_dict() | {"spec": spec_text}))
    return 0


# ---------------------------------------------------------------- predict / score
def _check_runs(runs: int | None) -> None:
    from fitrules.api import check_runs

    check_runs(runs)


def _add_predict(sub, common) -> None:
    p = sub.add_parser(
        "predict",
        parents=[common],
        help="write a prediction to a ledger before the run",
        description="Fit a form on all cells, predict one cell with an interval that "
        "carries the form's misfit (leave-one-cell-out refits) as well as its constants' "
        "uncertainty and, with --runs K, the seed noise of K new runs, and append the "
        "prediction to an append-only, hash-chained ledger.",
    )
    _add_data_options(p)
    _add_tune_options(p)
    p.add_argument("--form", required=True, metavar='NAME or "NAME = EXPR"', help=FORM_HELP)
    p.add_argument("--at", required=True, metavar='"H=8,keep=0.25"', help="the cell predicted")
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        metavar="PCT",
        help="the relative error (percent) the prediction commits to (default: none, the "
        "record then commits only to its interval)",
    )
    p.add_argument(
        "--ledger",
        type=Path,
        required=True,
        help="JSON-lines ledger to append to (created if missing; an existing one is "
        "checked first)",
    )
    _add_fit_options(p)
    g = p.add_argument_group("interval")
    _add_runs_option(g)
    _add_bootstrap_options(g)
    p.set_defaults(func=_predict)


def _predict(args) -> int:
    from fitrules import api
    from fitrules.jobs.ledger import check_ledger_target
    from fitrules.model.forms import resolve_form

    options = dict(runs=args.runs, tolerance=args.tolerance, objective=args.objective,
                   delta=args.delta, resamples=args.resamples, seed=args.bootstrap_seed,
                   level=args.level, fix=args.fix, bounds=args.bound, by=args.by,
                   shared=args.shared)  # fmt: skip
    api.check_predict_options(args.at, **options)
    _tune_seeds(args)
    check_ledger_target(args.ledger)  # a tampered or unwritable ledger is refused now
    resolve_form(args.form)
    entry = api.predict(_load(args), args.form, args.at, ledger=args.ledger,
                        bootstrap=args.bootstrap, weights=args.weights,
                        tune=getattr(args, "tune", None), tune_seeds=_tune_seeds(args),
                        command=_command_line(), **options)  # fmt: skip
    _say(args, entry.sentence)
    for note in entry.notes:
        _say(args, note)
    print(entry.head)
    return 0


def _add_head_option(p) -> None:
    p.add_argument(
        "--head",
        default=None,
        metavar="HASH",
        help="the head printed by 'fitrules predict' and recorded elsewhere (a commit, a "
        "paper): refuse the ledger unless that record is still in its chain; HASH or N:HASH, "
        "at least 12 hex digits",
    )


def _add_score(sub, common) -> None:
    p = sub.add_parser(
        "score",
        parents=[common],
        help="score ledger predictions against new results",
        description="Check the ledger's hashes (and its head, with --head), then score every "
        "prediction whose cell has results in --data. The ledger is never written.",
    )
    p.add_argument("--ledger", type=Path, required=True, help="the JSON-lines ledger to score")
    _add_head_option(p)
    _add_data_options(p, "results table with the new runs (CSV or Parquet; required)")
    _add_json_option(p)
    _add_tune_options(p)
    p.set_defaults(func=_score)


def _score(args) -> int:
    from fitrules import api
    from fitrules.jobs.ledger import parse_head, read_ledger, verify_head

    if args.data is None:
        raise FitrulesError("score needs --data: the results table with the new runs")
    head = parse_head(args.head) if args.head is not None else None
    records = read_ledger(args.ledger, must_exist=True)  # refused before the table is read
    if head is not None:
        verify_head(args.ledger, records, head)
    _tune_seeds(args)
    _take_outputs(args)
    result = api.score(_load(args), args.ledger, head=args.head,
                       tune=getattr(args, "tune", None), tune_seeds=_tune_seeds(args))  # fmt: skip
    _emit(args, result.text(), result.to_dict())
    return 0


def _add_ledger(sub, common) -> None:
    p = sub.add_parser(
        "ledger",
        parents=[common],
        help="check a predictions ledger",
        description="Check a ledger's records and hash chain; with --head, also that the head "
        "recorded elsewhere is still in the chain (a removed last record or a rewritten chain "
        "is caught only that way).",
    )
    lsub = p.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    q = lsub.add_parser(
        "verify", parents=[common], help="check the records, the chain and (--head) the head"
    )
    q.add_argument("--ledger", type=Path, required=True, help="the JSON-lines ledger to check")
    _add_head_option(q)
    q.set_defaults(func=_ledger_verify)


def _ledger_verify(args) -> int:
    from fitrules import api

    check = api.verify_ledger(args.ledger, args.head)
    _say(args, check.sentence)
    _say(args, check.head)
    return 0


# ---------------------------------------------------------------- main
# examples at the end of each command's --help (tests/test_help.py parses every one)
EXAMPLES = {
    "compare": [
        "fitrules compare --splits 300",
        "fitrules compare --forms composition,additive --form 'mine = L0 + a*omega**c' "
        "--report reports/mine",
        "fitrules compare --data wandb_export.csv --metric val/loss --rename inner_steps=H "
        "--derive 'omega = 1/`compression.keep` - 1' --drop-duplicates",
    ],
    "design": ["fitrules design --forms composition,additive --budget 24"],
    "search": ["fitrules search --terms 3 --max-constants 5 --jobs 2 --report reports/search"],
    "fit": [
        "fitrules fit --form composition --intervals --predict 'H=8,keep=0.25' --runs 3",
        "fitrules fit --form 'mine = L0 + a*omega**c' --report reports/fit-mine",
    ],
    "validate": ["fitrules validate data/main.csv --where 'lr == 3e-4'"],
    "ci": [
        "fitrules ci",
        "fitrules ci --data main --where 'lr == 3e-4' --baseline H=1,keep=1 --treatment-sweep H",
    ],
    "predict": [
        "fitrules predict --form composition --at 'H=8,keep=0.25' --ledger predictions.jsonl"
    ],
    "score": ["fitrules score --ledger predictions.jsonl --data new_runs.csv"],
    "ledger": ["fitrules ledger verify --ledger predictions.jsonl"],
    "ledger verify": ["fitrules ledger verify --ledger predictions.jsonl --head HASH"],
    "forms": ["fitrules forms list", "fitrules forms show composition"],
    "forms list": ["fitrules forms list"],
    "forms show": ["fitrules forms show composition"],
    "forms add": ["fitrules forms add 'mine(H, omega)' 'L0 + a*omega**c*(H/16)**b'"],
    "forms remove": ["fitrules forms remove mine"],
    "simulate": [
        "fitrules simulate main --out runs.csv --jobs 2",
        "fitrules simulate main --cell 'H=8,keep=0.25' --out one.csv",
    ],
}


class _ExamplesFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the examples keep their lines (commands are not rewrapped)."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _with_examples(parser: argparse.ArgumentParser, name: str) -> None:
    """``parser`` and its subcommands' parsers end their help with examples."""
    lines = EXAMPLES.get(name)
    if lines:
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in lines)
        parser.formatter_class = _ExamplesFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub_parser in action.choices.items():
                _with_examples(sub_parser, f"{name} {sub_name}".strip())


def build_parser() -> argparse.ArgumentParser:
    from fitrules import __version__

    parser = _Parser(
        prog="fitrules",
        description="Decide honestly whether a closed-form rule predicts a grid of experiments.",
        epilog="examples:\n  fitrules compare --splits 300\n  fitrules compare --help"
        "\n\nfitrules COMMAND --help shows a command's options and examples",
        formatter_class=_ExamplesFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fitrules {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _common()
    for add in _ADDERS:
        add(sub, common)
    _with_examples(parser, "")
    return parser


_ADDERS = [
    _add_compare,
    _add_design,
    _add_search,
    _add_fit,
    _add_validate,
    _add_ci,
    _add_predict,
    _add_score,
    _add_ledger,
    _add_forms,
    _add_simulate,
]


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that cleanup runs as for Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def _headless():
    """Figures go to files: the command line draws with Agg and never opens a window.

    The package itself forces no backend (a notebook keeps its inline one); the choice is
    made here, through the environment, only when matplotlib is not yet loaded, and the
    environment is restored afterwards.
    """
    import os

    if "matplotlib" in sys.modules or "MPLBACKEND" in os.environ:
        yield
        return
    os.environ["MPLBACKEND"] = "Agg"
    try:
        yield
    finally:
        os.environ.pop("MPLBACKEND", None)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error is one line on stderr and exit status 2.

    Exit status: 0 done, 1 only for ``compare --strict`` with degenerate pairs, 2 bad input
    (nothing written), 130 interrupted, 143 terminated.
    """
    from fitrules.base.outputs import Outputs

    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not _ARGV:  # bare `fitrules`: the help, on stdout, exit 0 (as pip and docker do)
        parser.print_help()
        return 0
    outputs = Outputs()
    name = "fitrules"
    with _sigterm_as_interrupt(), _headless(), command_line():
        try:
            args = parser.parse_args(_ARGV)
            name = f"fitrules {args.command}"
            args.outputs = outputs
            code = int(args.func(args) or 0)
            outputs.finish()  # a staged output the command did not write leaves nothing
            return code
        except UsageError as err:
            print(_one_line(err), file=sys.stderr)
            return 2
        except FitrulesError as err:
            outputs.rollback()
            print(f"{name}: error: {_one_line(err)}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # e.g. piped into head: stop quietly
            sys.stderr.close()
            return 0
        except OSError as err:  # the system refused something: a file, a device, a limit
            outputs.rollback()
            where = f"{err.filename}: " if getattr(err, "filename", None) else ""
            print(f"{name}: error: {where}{_one_line(err.strerror or err)}", file=sys.stderr)
            return 2
        except MemoryError:
            outputs.rollback()
            print(
                f"{name}: error: out of memory; ask for less (see fitrules.base.limits)",
                file=sys.stderr,
            )
            return 2
        except _Terminated:
            outputs.rollback()
            print(f"{name}: terminated", file=sys.stderr)
            return 143
        except KeyboardInterrupt:
            outputs.rollback()
            print(f"{name}: interrupted", file=sys.stderr)
            return 130
        except SystemExit as ex:  # --help, --version
            return ex.code if isinstance(ex.code, int) else 0
        except BaseException:
            outputs.rollback()  # a bug: leave nothing behind, then show the traceback
            raise


if __name__ == "__main__":
    sys.exit(main())
