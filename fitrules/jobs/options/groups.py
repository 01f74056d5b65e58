"""The option groups several commands share (data, tuning, objective, fitting, guard,
bootstrap, outputs), the checks they name, the kinds of option the declarations repeat (a real
above a bound, a repeatable flag, a choice), and load_grid's declaration, made from the data
group."""

from __future__ import annotations

import argparse
from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import (
    BOOTSTRAP_KINDS,
    BOOTSTRAP_RESAMPLES,
    DEFAULT_BOOTSTRAP,
    GUARD_EXCURSION,
    GUARD_SE,
    GUARD_SPAN,
    HELDOUT_WEIGHTS,
    HUBER_DELTA,
    LEVEL,
    MAX_SIM_JOBS,
    OBJECTIVES,
    WEIGHTS,
)
from fitrules.base.options import Command, Option, as_typed, in_group, options

DATA_HELP = (
    "results table (CSV, Parquet or JSON lines), one row a run, or the name of a shipped grid "
    "such as "
    "main (default: the committed main grid, data/main.csv, at inner lr 3e-4)"
)
PAIRED_DATA_HELP = (
    # flag words: help text
    "results table (CSV or Parquet), one row a run (default: the committed tuned paired "
    "grid, data/paired_tuned.csv, with --tune lr --tune-seeds 0,1,2)"
)
FORM_HELP = 'a form name (see "fitrules forms list") or an inline form "NAME = EXPR"'


# ---------------------------------------------------------------- checks and kinds of option
def _true_false_or_none(value, name: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise FitrulesError(f"{name} {value!r}: must be True, False or None")


def _processes(value, name: str) -> None:
    """None (the command's default) or a whole number of processes, 1 to MAX_SIM_JOBS."""
    if value is not None:
        arg.integer(value, name, 1, MAX_SIM_JOBS)


def _scheduler(value, name: str) -> None:
    """None, ``local:N`` or a scheduler's address, in a form Dask can dial."""
    if arg.text(value, name, none=True) is not None:
        from fitrules.sim.cluster import check_scheduler

        check_scheduler(value)


def _real(low: float | None = None, high: float | None = None):
    return lambda v, n: arg.real(v, n, low, high)


def _one_of(choices: tuple[str, ...]):
    def check(value, name: str) -> None:
        arg.text(value, name)
        if value not in choices:
            raise unknown(name, value, choices)

    return check


def unknown(name: str, value, choices) -> FitrulesError:
    """The refusal of a value that is not one of ``choices``."""
    return FitrulesError(f"{name} {value!r} is unknown; allowed: {', '.join(choices)}")


def real_above(
    name: str, limit: float, low: float, metavar: str | None = None, *, help: str
) -> Option:
    """A real number above ``low`` whose default is a shared limit, shown as typed."""
    cli = dict(type=float) if metavar is None else dict(type=float, metavar=metavar)
    return Option(name, as_typed(limit), help=help, check=_real(low), cli=cli)


def repeatable(name: str, metavar: str, *, help: str, **more) -> Option:
    """A flag given as often as wanted, its values collected in a list."""
    return Option(name, help=help, cli=dict(action="append", metavar=metavar), **more)


def choice(
    name: str, choices: tuple[str, ...], *, help: str, default: str | None = None, check=None
) -> Option:
    """One of ``choices``: the first unless ``default`` says otherwise."""
    first = choices[0] if default is None else default
    return Option(name, first, help=help, check=check, cli=dict(choices=list(choices)))


# ---------------------------------------------------------------- data (fr.load_grid)
# the command line reads a grid with these; in Python they are load_grid's parameters
DATA = in_group(
    "data",
    Option("data", help=DATA_HELP, cli=dict(type=Path)),
    Option("metric", help="metric column (default: loss, else val_loss)"),
    Option(
        "seed_col",
        help="the column that names each run's seed (default: seed, when there is one)",
        cli=dict(metavar="COL"),
    ),
    repeatable(
        "where",
        "COND",
        default=(),
        help='keep rows where COND holds, e.g. "lr == 3e-4" (repeatable)',
        cli_default=None,
    ),
    repeatable(
        "derive",
        "NAME=EXPR",
        default=(),
        help='add a column, e.g. "omega = 1/keep - 1" (repeatable; names with spaces in '
        'backticks: "N = `Model Size`")',
        cli_default=[],
    ),
    repeatable(
        "rename",
        "OLD=NEW",
        help="rename a column as the table is read, e.g. inner_steps=H or compression.keep=keep "
        "(repeatable; before --derive and --where)",
    ),
    Option(
        "drop_duplicates",
        False,
        help="drop rows that repeat an earlier row in every column (a run exported twice); "
        "the count is printed",
        cli=dict(action="store_true"),
    ),
    Option(
        "unit",
        help="the metric's unit for labels, e.g. nats (default: nats for tables written by "
        "fitrules simulate, otherwise none)",
    ),
    Option(
        "units",
        help='units of variables for axis labels, e.g. "N=parameters,D=tokens"',
        cli=dict(metavar="NAME=UNIT,..."),
    ),
)
# commands that draw and label nothing accept the label options but do not list them
DATA_UNLABELLED = tuple(
    o.but(help=argparse.SUPPRESS) if o.name in ("unit", "units") else o for o in DATA
)
LOAD_GRID = Command(
    "load_grid",
    "read a results table",
    options(
        # flag words: the flag's declaration
        tuple(o.but(name="source", flag="--data") if o.name == "data" else o for o in DATA),
        Option("frame", flag=None),
    ),
)
# in a command, the data options read its grid: its Python function takes the grid instead
DATA, DATA_UNLABELLED = (tuple(o.but(python=False) for o in d) for d in (DATA, DATA_UNLABELLED))


# ---------------------------------------------------------------- shared groups
def tune_seed_list(text: str | None) -> list[int] | None:
    """``--tune-seeds 0,1,2`` as a list of distinct seeds (None: not given)."""
    return None if text is None else arg.seed_list(text, param("tune_seeds"))


TUNING = in_group(
    "tuning (choose a factor's level per configuration on some seeds, measure on others)",
    repeatable(
        "tune",
        "FACTOR",
        help="tune FACTOR (e.g. lr) per configuration of the other factors (repeatable: "
        "tuned jointly)",
    ),
    Option(
        "tune_seeds",
        help="seeds that choose the level, e.g. 0,1,2; the others measure it (default: "
        "cross-fitting, each half of the seeds chooses for the other)",
        cli=dict(metavar="SEEDS"),
        parse=lambda text: tune_seed_list(text),
    ),
)
OBJECTIVE = (
    choice(
        "objective",
        OBJECTIVES,
        help="training objective (default rel_ls: relative least squares)",
        check=arg.text,
    ),
    real_above("delta", HUBER_DELTA, 0.0, help="Huber delta for log_huber (default %(default)s)"),
)
CONSTANTS = (
    repeatable(
        "fix",
        "NAME=VALUE",
        help="hold a constant at a value, e.g. alpha=0.34 (repeatable)",
    ),
    repeatable(
        "bounds",
        "NAME=LOW..HIGH",
        # flag words: the flag's declaration
        flag="--bound",
        help="bounds of a nonlinear constant, e.g. 'Nc=1e10..1e16' (repeatable; a wide "
        "positive range is searched on a log scale)",
    ),
    Option(
        "by",
        help="one form per level of COLUMN, fitted jointly: --shared constants common to all "
        "groups, the others one per group",
        cli=dict(metavar="COLUMN"),
    ),
    Option(
        "shared",
        help="with --by: comma-separated constants common to all groups (default: the "
        "nonlinear ones, e.g. exponents)",
        cli=dict(metavar="NAMES"),
    ),
)
FITTING = in_group(
    "fitting",
    OBJECTIVE,
    choice(
        "weights",
        WEIGHTS,
        help="how each cell's squared residual counts: cells (default, once each), runs (by "
        "its number of runs), inverse-variance (by 1/standard error^2)",
    ),
    CONSTANTS,
)
GUARD = in_group(
    "wild-extrapolation guard (training fit and design only; fixed before scoring)",
    real_above(
        "guard_span",
        GUARD_SPAN,
        1.0,
        "X",
        help="name a fit whose predictions over the grid's cells spread more than X times "
        "its training values (default %(default)s)",
    ),
    real_above(
        "guard_se",
        GUARD_SE,
        0.0,
        "X",
        help="name a fit whose delta-method standard error exceeds X times a prediction "
        "(default %(default)s)",
    ),
    real_above(
        "guard_excursion",
        GUARD_EXCURSION,
        0.0,
        "PCT",
        help="name a fit whose predictions at the cells it did not fit lie on average more "
        "than PCT%% of the training values' level outside their range and their "
        "straight-line trend (default %(default)s)",
    ),
    Option(
        "metric_range",
        help="name a fit that predicts outside this plausible range of the metric, e.g. "
        "0,3.61 for nats over 37 characters (default: no range)",
        check=arg.interval,
        cli=dict(metavar="LO,HI"),
        parse=lambda text: _metric_range(text),
    ),
)


def _metric_range(text: str | None):
    from fitrules.engine.guard import parse_metric_range  # numpy: not for --help

    return parse_metric_range(text)


HELDOUT_WEIGHTS_OPTION = choice(
    "heldout_weights",
    HELDOUT_WEIGHTS,
    help="how a split's held-out cells count in its error: box (default: by their share of "
    "the grid's box, half on an edge of a variable, a quarter at a corner, so that the error "
    "is what new configurations spread over the grid's range would show) or equal (each once)",
)
LEVEL_OPTION = Option(
    "level",
    as_typed(LEVEL),
    help="interval level (%(default)s)",
    check=arg.level,
    cli=dict(type=float),
)
RUNS = Option(
    "runs",
    help="also give the interval for the mean of K new runs at the point (the "
    "configuration's mean plus the seed noise of K runs); predict records that one",
    cli=dict(type=int, metavar="K"),
)
BOOTSTRAP = (
    Option(
        "resamples",
        str(BOOTSTRAP_RESAMPLES),
        help="bootstrap resamples (%(default)s)",
        cli=dict(type=int),
    ),
    LEVEL_OPTION,
    Option(
        "seed",
        "0",
        # flag words: the flag's declaration
        flag="--bootstrap-seed",
        help="bootstrap seed (%(default)s)",
        cli=dict(type=int),
    ),
    choice(
        "bootstrap",
        BOOTSTRAP_KINDS,
        default=DEFAULT_BOOTSTRAP,
        help="studentized (default): the fit's residuals across cells, symmetric bootstrap-t "
        "intervals from each refit's standard errors; seeds: the runs within each cell, or "
        "residuals, with percentile intervals; auto: residuals when any cell has a single "
        "run, else seeds (percentile; the default before)",
    ),
)
JSON = Option(
    "json_out",
    # flag words: the flag's declaration
    flag="--json",
    python=False,
    help="write the full result as JSON to PATH ('-' for stdout, instead of the text)",
    cli=dict(metavar="PATH"),
)


PROGRESS = Option(
    "progress",
    help="progress bar on stderr (default: when stderr is a terminal and not --quiet)",
    check=_true_false_or_none,
    cli=dict(action=argparse.BooleanOptionalAction),
)
REPORT = tuple(
    o.but(python=False)
    for o in (
        Option(
            "report",
            help="write a report directory (report.md, figures, results.json)",
            cli=dict(type=Path, metavar="DIR"),
        ),
        Option(
            "force", False, help="replace an existing --report DIR", cli=dict(action="store_true")
        ),
        Option(
            "figure_format",
            "png",
            help="figure formats in the report, comma-separated: png (always), svg, pdf "
            "(default %(default)s)",
            cli=dict(metavar="FORMATS"),
        ),
        Option(
            "labels",
            help="axis labels for columns in the report's figures, e.g. 'val/loss=validation "
            "loss' (default: the column names)",
            cli=dict(metavar="COL=LABEL,..."),
        ),
    )
)
HEAD = Option(
    "head",
    help="the head printed by 'fitrules predict' and recorded elsewhere (a commit, a "
    "paper): refuse the ledger unless that record is still in its chain; HASH or N:HASH, "
    "at least 12 hex digits",
    cli=dict(metavar="HASH"),
)
ON_PROGRESS = Option("on_progress", flag=None, check=arg.callback)
# worker processes, or a Dask cluster instead; each command says what its default is
JOBS = Option("jobs", check=_processes, cli=dict(type=int))
SCHEDULER = Option("scheduler", check=_scheduler, cli=dict(metavar="ADDRESS"))
# the JSON-lines ledger predict appends to and score and ledger verify read
LEDGER_FILE = Option("ledger", cli=dict(type=Path, required=True))


INLINE_FORM = repeatable(
    "form",
    '"NAME = EXPR"',
    python=False,
    help="a form given inline (repeatable); compared together with the --forms names, "
    "or on its own when --forms is not given (the built-in set is then left out)",
    cli_default=[],
)
ONE_FORM = Option(
    "form",
    help=FORM_HELP,
    cli=dict(required=True, metavar='NAME or "NAME = EXPR"'),
)
