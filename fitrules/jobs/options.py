"""Every job's options, declared once (see :mod:`fitrules.base.options`).

The shared groups (data, tuning, objective, fitting, guard, bootstrap, outputs) come first,
then one :class:`~fitrules.base.options.Command` per command, its options in the order of its
``--help``. The Python functions of :mod:`fitrules.api` take their defaults from here, the
command line (:mod:`fitrules.cli`) is made from here, and ``tests/api/test_faces.py`` checks
that the two agree.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError
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
    RANDOM_SPLITS,
    RANDOM_TRAIN_FRAC,
    SEED_PROTOCOLS,
    VERDICT_TRAIN_FRAC,
    WEIGHTS,
)
from fitrules.base.options import Command, Option, as_typed, fraction, in_group, options

RULES = ("one-se", "best")  # how a search's inner ranking picks

DATA_HELP = (
    "results table (CSV, Parquet or JSON lines), one row a run, or the name of a shipped grid "
    "such as "
    "main (default: the committed main grid, data/main.csv, at inner lr 3e-4)"
)
PAIRED_DATA_HELP = (
    "results table (CSV or Parquet), one row a run (default: the committed tuned paired "
    "grid, data/paired_tuned.csv, with --tune lr --tune-seeds 0,1,2)"
)
FORM_HELP = 'a form name (see "fitrules forms list") or an inline form "NAME = EXPR"'

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
    Option(
        "where",
        (),
        help='keep rows where COND holds, e.g. "lr == 3e-4" (repeatable)',
        cli=dict(action="append", metavar="COND"),
        cli_default=None,
    ),
    Option(
        "derive",
        (),
        help='add a column, e.g. "omega = 1/keep - 1" (repeatable; names with spaces in '
        'backticks: "N = `Model Size`")',
        cli=dict(action="append", metavar="NAME=EXPR"),
        cli_default=[],
    ),
    Option(
        "rename",
        help="rename a column as the table is read, e.g. inner_steps=H or compression.keep=keep "
        "(repeatable; before --derive and --where)",
        cli=dict(action="append", metavar="OLD=NEW"),
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
        tuple(o.but(name="source", flag="--data") if o.name == "data" else o for o in DATA),
        Option("frame", flag=None),
    ),
)
# in a command, the data options read its grid: its Python function takes the grid instead
DATA, DATA_UNLABELLED = (tuple(o.but(python=False) for o in d) for d in (DATA, DATA_UNLABELLED))


# ---------------------------------------------------------------- shared groups
def tune_seed_list(text: str | None) -> list[int] | None:
    """``--tune-seeds 0,1,2`` as a list of distinct seeds (None: not given)."""
    return None if text is None else arg.seed_list(text, "--tune-seeds")


TUNING = in_group(
    "tuning (choose a factor's level per configuration on some seeds, measure on others)",
    Option(
        "tune",
        help="tune FACTOR (e.g. lr) per configuration of the other factors (repeatable: "
        "tuned jointly)",
        cli=dict(action="append", metavar="FACTOR"),
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
    Option(
        "objective",
        OBJECTIVES[0],
        help="training objective (default rel_ls: relative least squares)",
        check=arg.text,
        cli=dict(choices=list(OBJECTIVES)),
    ),
    Option(
        "delta",
        as_typed(HUBER_DELTA),
        help="Huber delta for log_huber (default %(default)s)",
        check=lambda v, n: arg.real(v, n, 0.0),
        cli=dict(type=float),
    ),
)
CONSTANTS = (
    Option(
        "fix",
        help="hold a constant at a value, e.g. alpha=0.34 (repeatable)",
        cli=dict(action="append", metavar="NAME=VALUE"),
    ),
    Option(
        "bounds",
        flag="--bound",
        help="bounds of a nonlinear constant, e.g. 'Nc=1e10..1e16' (repeatable; a wide "
        "positive range is searched on a log scale)",
        cli=dict(action="append", metavar="NAME=LOW..HIGH"),
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
    Option(
        "weights",
        WEIGHTS[0],
        help="how each cell's squared residual counts: cells (default, once each), runs (by "
        "its number of runs), inverse-variance (by 1/standard error^2)",
        cli=dict(choices=list(WEIGHTS)),
    ),
    CONSTANTS,
)
GUARD = in_group(
    "wild-extrapolation guard (training fit and design only; fixed before scoring)",
    Option(
        "guard_span",
        as_typed(GUARD_SPAN),
        help="name a fit whose predictions over the grid's cells spread more than X times "
        "its training values (default %(default)s)",
        check=lambda v, n: arg.real(v, n, 1.0),
        cli=dict(type=float, metavar="X"),
    ),
    Option(
        "guard_se",
        as_typed(GUARD_SE),
        help="name a fit whose delta-method standard error exceeds X times a prediction "
        "(default %(default)s)",
        check=lambda v, n: arg.real(v, n, 0.0),
        cli=dict(type=float, metavar="X"),
    ),
    Option(
        "guard_excursion",
        as_typed(GUARD_EXCURSION),
        help="name a fit whose predictions at the cells it did not fit lie on average more "
        "than PCT%% of the training values' level outside their range and their "
        "straight-line trend (default %(default)s)",
        check=lambda v, n: arg.real(v, n, 0.0),
        cli=dict(type=float, metavar="PCT"),
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


INTERVAL_METHODS = ("bootstrap", "profile")


def _interval_method(value, name: str) -> None:
    """``intervals``: False or True (the bootstrap), or a method's name."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return
    if not (isinstance(value, str) and value in INTERVAL_METHODS):
        raise FitrulesError(
            f"{name} {value!r}: give True or False, or one of {', '.join(INTERVAL_METHODS)}"
        )


def _metric_range(text: str | None):
    from fitrules.engine.guard import parse_metric_range  # numpy: not for --help

    return parse_metric_range(text)


def _screen(text: str) -> int | str:
    """``--screen``: auto, or a whole number >= 0 (its range is checked by the API)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise FitrulesError(
            f"--screen {text!r}: give a whole number >= 0 (0: no screen) or auto"
        ) from None


HELDOUT_WEIGHTS_OPTION = Option(
    "heldout_weights",
    HELDOUT_WEIGHTS[0],
    help="how a split's held-out cells count in its error: box (default: by their share of "
    "the grid's box, half on an edge of a variable, a quarter at a corner, so that the error "
    "is what new configurations spread over the grid's range would show) or equal (each once)",
    cli=dict(choices=list(HELDOUT_WEIGHTS)),
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
        flag="--bootstrap-seed",
        help="bootstrap seed (%(default)s)",
        cli=dict(type=int),
    ),
    Option(
        "bootstrap",
        DEFAULT_BOOTSTRAP,
        help="studentized (default): the fit's residuals across cells, symmetric bootstrap-t "
        "intervals from each refit's standard errors; seeds: the runs within each cell, or "
        "residuals, with percentile intervals; auto: residuals when any cell has a single "
        "run, else seeds (percentile; the default before)",
        cli=dict(choices=list(BOOTSTRAP_KINDS)),
    ),
)
JSON = Option(
    "json_out",
    flag="--json",
    python=False,
    help="write the full result as JSON to PATH ('-' for stdout, instead of the text)",
    cli=dict(metavar="PATH"),
)


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


def _real(low: float | None = None, high: float | None = None):
    return lambda v, n: arg.real(v, n, low, high)


def _one_of(choices: tuple[str, ...]):
    def check(value, name: str) -> None:
        arg.text(value, name)
        if value not in choices:
            raise FitrulesError(f"{name} {value!r} is unknown; allowed: {', '.join(choices)}")

    return check


INLINE_FORM = Option(
    "form",
    python=False,
    help="a form given inline (repeatable); compared together with the --forms names, "
    "or on its own when --forms is not given (the built-in set is then left out)",
    cli=dict(action="append", metavar='"NAME = EXPR"'),
    cli_default=[],
)
ONE_FORM = Option(
    "form",
    help=FORM_HELP,
    cli=dict(required=True, metavar='NAME or "NAME = EXPR"'),
)

# ---------------------------------------------------------------- the commands
COMPARE = Command(
    "compare",
    "fit forms on paired random splits, compare held-out error",
    options(
        DATA,
        TUNING,
        in_group(
            "forms",
            Option(
                "forms",
                help="comma-separated form names (default: the built-in set, unless --form is "
                "given; see 'fitrules forms list')",
                cli=dict(metavar="NAMES"),
            ),
            INLINE_FORM,
        ),
        in_group(
            "splits",
            Option(
                "splits",
                help=f"number of random splits (default {RANDOM_SPLITS}; structured protocols "
                "make their own)",
                cli=dict(type=int),
            ),
            Option(
                "train_frac",
                str(RANDOM_TRAIN_FRAC),
                help="fraction of cells fitted in each split (default %(default)s)",
                check=_real(0.0, 1.0),
                cli=dict(type=fraction),
            ),
            Option(
                "seed",
                "0",
                help="seed of the split sequence (default %(default)s)",
                check=arg.seed,
                cli=dict(type=int),
            ),
            Option(
                "verdict_train_frac",
                as_typed(VERDICT_TRAIN_FRAC),
                help="random splits: the paired tests are made on as many splits (same seed) "
                "fitting this fraction of the cells, where the test has power (default "
                "%(default)s); summaries and counts of splits won describe the --train-frac "
                "splits",
                cli=dict(type=fraction, metavar="F"),
            ),
            Option(
                "split",
                "random",
                help="random (default), leave-one-level-out:COL, extrapolate:COL, "
                "extrapolate:COL:VALUE (fit below VALUE, score from it on; or "
                "'extrapolate:COL>=VALUE' in quotes), extrapolate:COL[:VALUE],COL2[:VALUE2] "
                "(beyond the grid in several columns at once), transfer (repeatable: one "
                "section per protocol, never pooled)",
                check=arg.text,
                cli=dict(action="append", metavar="PROTOCOL"),
                cli_default=None,
            ),
            Option(
                "seeds",
                SEED_PROTOCOLS[0],
                help="the held-out error's protocol: cells (default: every run of the training "
                "and held-out cells) or cells-and-seeds (a third of the seed ids held out too, "
                "so that the error is what new runs at new seed ids show)",
                cli=dict(choices=list(SEED_PROTOCOLS)),
            ),
            HELDOUT_WEIGHTS_OPTION,
            Option(
                "fit_data",
                python=False,
                help="transfer: the grid fitted",
                cli=dict(type=Path),
            ),
            Option(
                "test_grid",
                flag="--test-data",
                help="transfer: the grid scored",
                cli=dict(type=Path),
            ),
        ),
        in_group(
            "verdicts (which pairs are tested; Holm runs over them)",
            Option(
                "against",
                help="test FORM against each other form only (default: every pair)",
                cli=dict(metavar="FORM"),
            ),
            Option(
                "pairs",
                help='test only these pairs, e.g. "composition:additive,composition:log_additive"',
                cli=dict(metavar="A:B,..."),
            ),
        ),
        FITTING,
        GUARD,
        Option(
            "keep_degenerate",
            False,
            help="keep flagged (split, form) pairs in summaries and paired verdicts",
            check=arg.flag,
            cli=dict(action="store_true"),
        ),
        Option(
            "strict",
            False,
            python=False,
            help="exit with status 1 if any (split, form) pair is degenerate",
            cli=dict(action="store_true"),
        ),
        JSON,
        PROGRESS,
        REPORT,
        LEVEL_OPTION.but(flag=None),
        ON_PROGRESS,
    ),
    description="Fit every candidate form on the same random "
    "subsets of cells and compare their held-out errors, split by split.",
    examples=(
        "fitrules compare --splits 300",
        "fitrules compare --forms composition,additive --form 'mine = L0 + a*omega**c' "
        "--report reports/mine",
        "fitrules compare --data wandb_export.csv --metric val/loss --rename inner_steps=H "
        "--derive 'omega = 1/`compression.keep` - 1' --drop-duplicates",
    ),
)

DESIGN = Command(
    "design",
    "which runs to do next: cells that tell forms apart",
    options(
        DATA,
        TUNING,
        Option(
            "forms",
            help="forms to discriminate, or one form",
            cli=dict(required=True, metavar="A,B[,...]"),
        ),
        INLINE_FORM.but(help="a form given inline, also to be named in --forms (repeatable)"),
        Option(
            "candidates",
            help="cells to consider (default: the grid's levels and geometric midpoints, minus "
            "the cells already run)",
            cli=dict(metavar='"H=2,8,32;keep=1/32"'),
        ),
        Option(
            "target",
            help="one form: the cell whose prediction the batch should pin down",
            cli=dict(metavar='"H=256,omega=63"'),
        ),
        Option("budget", "24", help="runs to spend (default %(default)s)", cli=dict(type=int)),
        Option(
            "seeds", "3", help="seeds per cell, at least (default %(default)s)", cli=dict(type=int)
        ),
        Option("max_seeds", "12", help="seeds per cell, at most (%(default)s)", cli=dict(type=int)),
        Option("power", "0.8", help="power for seeds needed (%(default)s)", cli=dict(type=float)),
        Option("alpha", "0.05", help="two-sided level (%(default)s)", cli=dict(type=float)),
        Option(
            "splits",
            "100",
            flag="--design-splits",
            help="random-split refits (%(default)s)",
            cli=dict(type=int),
        ),
        Option("resamples", "100", help="seed-bootstrap refits (%(default)s)", cli=dict(type=int)),
        Option("seed", "0", help="seed of splits and bootstrap (%(default)s)", cli=dict(type=int)),
        in_group("fitting", OBJECTIVE),
        Option(
            "ledger_name",
            "design.jsonl",
            flag="--ledger",
            python=False,
            help="ledger named in the commands (not read or written by design)",
            cli=dict(metavar="LEDGER_NAME"),
        ),
        Option(
            "runs_out",
            "design_runs.csv",
            python=False,
            help="results CSV named in the commands",
        ),
        Option(
            "spec_out",
            python=False,
            help="write the batch as a simulate spec here (with --report: runs.toml inside it); "
            "each cell gets fresh seed ids, so that a seed's effect, shared by every cell it "
            "runs at, averages out over the new cells (a tuned spec keeps one set of ids)",
            cli=dict(type=Path),
        ),
        JSON,
        REPORT,
        in_group("constants", CONSTANTS),
    ),
    description="Rank candidate cells by how well a few seeds there would tell the forms "
    "apart (or, with one form and --target, pin down its prediction there), choose a "
    "batch under --budget, and print the commands of the loop design -> predict -> "
    "simulate -> score.",
    examples=("fitrules design --forms composition,additive --budget 24",),
)

SEARCH = Command(
    "search",
    "propose forms from a grammar; choose by nested validation",
    options(
        DATA,
        TUNING,
        in_group(
            "grammar (see fitrules.engine.grammar; each replaces --grammar's value)",
            Option(
                "grammar",
                help="a TOML file of grammar fields (variables, terms, max_constants, ...)",
                cli=dict(type=Path, metavar="FILE"),
            ),
            Option(
                "variables",
                help="comma-separated columns the forms read (default: the varying numeric "
                "columns; of two that map one to one, such as keep and omega, the last)",
                cli=dict(metavar="COLS"),
            ),
            Option(
                "terms", help="most terms besides the intercept (default 3)", cli=dict(type=int)
            ),
            Option(
                "max_constants",
                help="most constants of a form, intercept included: the ceiling the budget "
                "grows to while each larger budget beats the one before (default 7)",
                cli=dict(type=int, metavar="C"),
            ),
            Option(
                "first_constants",
                help="the budget searched first; one more constant at a time after it while "
                "the front still falls (default 4; at --max-constants: every budget at once)",
                cli=dict(type=int, metavar="C"),
            ),
            Option(
                "max_nonlinear",
                help="most exponents and saturation scales of a form (default 3)",
                cli=dict(type=int, metavar="Q"),
            ),
            Option(
                "interactions",
                help="most variables in one product term (default 2 for a search of one or "
                "two variables, 1 for three or more)",
                cli=dict(type=int, metavar="V"),
            ),
            Option(
                "factors",
                help="factor kinds: power, linear, inverse, sqrt, log, saturating, hill "
                "(default all but hill)",
                cli=dict(metavar="KINDS"),
            ),
            Option(
                "levels",
                help="also propose one intercept per level of these columns (L0[COL])",
                cli=dict(metavar="COLS"),
            ),
            Option(
                "tie_exponents",
                help="also propose each set of terms with two or more power factors with one "
                "exponent shared by them (Gadre et al. 2024's E + A*N**-b + B*D**-b; default: "
                "the grammar file's value, else no)",
                check=_true_false_or_none,
                cli=dict(action=argparse.BooleanOptionalAction),
            ),
        ),
        in_group(
            "nested validation",
            Option(
                "split",
                "random",
                help="outer protocol: random (default), extrapolate:COL[:VALUE] (several "
                "columns at once: extrapolate:N:4.2e9,D:6e11), leave-one-level-out:COL",
                cli=dict(metavar="PROTOCOL"),
            ),
            Option(
                "splits", "20", help="outer random splits (default %(default)s)", cli=dict(type=int)
            ),
            Option(
                "train_frac",
                "0.8",
                help="fraction of cells fitted in each outer random split (default %(default)s)",
                cli=dict(type=fraction),
            ),
            Option(
                "inner_splits",
                "10",
                help="inner random splits of each outer training set (default %(default)s)",
                cli=dict(type=int),
            ),
            Option(
                "inner_train_frac",
                "0.75",
                help="fraction of an outer training set fitted in each inner split (%(default)s)",
                cli=dict(type=fraction, metavar="F"),
            ),
            Option(
                "seed",
                "0",
                help="seed of the outer and inner splits (%(default)s)",
                cli=dict(type=int),
            ),
            Option(
                "rule",
                "one-se",
                help="how the inner ranking picks: one-se (default: fewest constants within "
                "one standard error of the best) or best",
                check=_one_of(RULES),
                cli=dict(choices=list(RULES)),
            ),
            Option(
                "references",
                flag="--reference",
                help="comma-separated forms fitted on the same outer splits without "
                "selection (default: composition,log_additive where the grid has their "
                "variables; 'none' for none)",
                cli=dict(metavar="NAMES"),
            ),
            INLINE_FORM.but(help="a reference form given inline (repeatable)"),
            Option(
                "jobs",
                help="worker processes (default: the machine's cores; results do not depend on it)",
                check=_processes,
                cli=dict(type=int),
            ),
            Option(
                "scheduler",
                help="run the fits as tasks on a Dask cluster instead of --jobs processes: a "
                "scheduler address (tcp://host:8786) or local:N for N local processes (the same "
                'result); needs pip install "fitrules[distributed]"',
                check=_scheduler,
                cli=dict(metavar="ADDRESS"),
            ),
            Option(
                "screen",
                "auto",
                help="a staged search: screen every candidate on 2 inner splits of each outer "
                "split, fit the K best of each number of constants there in full (0: every "
                "candidate in full; default auto: 25 above 2,000 candidates)",
                cli=dict(metavar="K"),
                parse=_screen,
            ),
            Option(
                "at",
                help="a point where the pick will be used (repeatable): its fit on all cells "
                "goes through the wild-extrapolation guard there, as compare's fits do at "
                "held-out cells",
                cli=dict(action="append", metavar='"N=1e10,D=2e11"'),
                cli_default=[],
                parse=lambda points: points or None,
            ),
            Option(
                "yes",
                False,
                help="run a search estimated to take longer than the time budget (15 min; "
                "without --yes it is refused before any fit, naming the options that would "
                "shrink it)",
                check=arg.flag,
                cli=dict(action="store_true"),
            ),
        ),
        in_group("fitting", OBJECTIVE, HELDOUT_WEIGHTS_OPTION),
        GUARD,
        Option(
            "forms_out",
            python=False,
            help="write the front's forms as forms.toml entries to PATH",
            cli=dict(type=Path, metavar="PATH"),
        ),
        JSON,
        PROGRESS,
        REPORT,
        Option("seeds", SEED_PROTOCOLS[1], flag=None),
        Option("on_plan", flag=None, check=arg.callback),
        ON_PROGRESS,
    ),
    description="Propose candidate forms from a small grammar over the grid's variables, "
    "rank them inside each outer training set by inner random splits, and report the "
    "outer error of whatever the ranking picks: the error of the search itself, with the "
    "optimism of selection, a front of outer error against constants, and the front's "
    "forms as forms.toml entries for compare. See docs/tutorials/search.md.",
    examples=("fitrules search --terms 3 --max-constants 5 --jobs 2 --report reports/search",),
)

FIT = Command(
    "fit",
    "fit one form on all cells",
    options(
        DATA,
        ONE_FORM,
        TUNING,
        FITTING,
        in_group(
            "intervals (bootstrap: over the residuals, studentized by default; or over the "
            "runs within each cell)",
            Option(
                "intervals",
                False,
                help="intervals for the constants: bootstrap (the default when no METHOD is "
                "given) or profile (profile likelihood: each constant held on a path of "
                "values, the others refitted)",
                check=lambda v, n: _interval_method(v, n),
                cli=dict(nargs="?", const="bootstrap", choices=list(INTERVAL_METHODS),
                         metavar="METHOD"),
            ),
            Option(
                "predict",
                (),
                help="prediction with interval at a point, in the grid or not (repeatable)",
                cli=dict(action="append", metavar='"H=8,keep=0.25"'),
                cli_default=[],
            ),
            RUNS,
            BOOTSTRAP,
        ),
        in_group(
            "constraints",
            Option(
                "constraints",
                flag="--constraint",
                help="a linear constraint between constants, e.g. 'b > a', 'a + b = 1' or "
                "'c >= 0.5*b' (repeatable); enforced by the optimiser, kept by --intervals "
                "profile",
                cli=dict(action="append", metavar="'b > a'"),
            ),
        ),
        JSON,
        REPORT,
        Option(
            "cells",
            True,
            flag="--no-cells",
            python=False,
            help="leave the per-cell table (observed values, predictions, residuals) out of "
            "the JSON and the report's results.json, e.g. for data that may not be "
            "redistributed",
            cli=dict(action="store_false"),
        ),
    ),
    description="Fit one form on every cell of the grid and print its constants with "
    "standard errors and correlations (from the Jacobian), training error and "
    "diagnostics; with --intervals, bootstrap intervals too.",
    examples=(
        "fitrules fit --form composition --intervals --predict 'H=8,keep=0.25' --runs 3",
        "fitrules fit --form 'mine = L0 + a*omega**c' --report reports/fit-mine",
    ),
)


def _budgets(value, name: str) -> None:
    from fitrules.jobs.allocate import check_budgets  # numpy: not for --help

    check_budgets(value, name)


def _allocate_intervals(value, name: str) -> None:
    from fitrules.jobs.allocate import check_intervals

    check_intervals(value, name)


ALLOCATE = Command(
    "allocate",
    "the loss-optimal split of a budget between two variables (N and D for 6*N*D)",
    options(
        DATA,
        ONE_FORM,
        in_group(
            "allocation",
            Option(
                "cost",
                "6*N*D",
                help="the cost of a run, a product of powers of two of the form's variables "
                "(default %(default)s: training compute)",
                check=lambda v, n: arg.text(v, n),
                cli=dict(metavar="EXPR"),
            ),
            Option(
                "budgets",
                "1e18:1e24:7",
                help="budgets of the cost: a number, a comma-separated list, or LOW:HIGH:COUNT "
                "log-spaced (default %(default)s)",
                check=_budgets,
                cli=dict(metavar="C"),
            ),
            Option(
                "intervals",
                "covariance",
                help="how the fit's uncertainty reaches the optimum: covariance (default: "
                "delta method on the Jacobian covariance), bootstrap (the fit's bootstrap "
                "refits, --resamples), none",
                check=_allocate_intervals,
                cli=dict(choices=["covariance", "bootstrap", "none"]),
            ),
        ),
        in_group(
            "fitting",
            OBJECTIVE,
            tuple(o for o in FITTING if o.name in ("weights", "fix", "bounds")),
        ),
        in_group("intervals", BOOTSTRAP),
        JSON,
    ),
    description="Fit a form in two variables whose product a cost names (a law "
    "E + A/N**alpha + B/D**beta and the compute 6*N*D), then give for each budget the "
    "values of the two that reach the lowest fitted loss, with intervals from the fit's "
    "uncertainty, the exponents of the frontier (N* ~ C^a), and where the optimum leaves "
    "the grid's range. Closed form for E + A*N**-alpha + B*D**-beta; a bounded numerical "
    "search along the cost otherwise.",
    examples=(
        "fitrules allocate --data runs.csv --form 'chin(N, D) = E + A/N**alpha + B/D**beta' "
        "--objective log_huber --budgets 1e20:1e24:5",
    ),
)

VALIDATE = Command(
    "validate",
    "check a results grid and summarise it",
    options(
        Option(
            "path",
            flag="path",
            python=False,
            help="results table (the same as --data; give one)",
            cli=dict(nargs="?", type=Path),
        ),
        DATA,
        TUNING,
        JSON,
    ),
    description="Check a results table and print runs, cells, levels per "
    "factor, seeds per cell and excluded rows.",
    examples=("fitrules validate data/main.csv --where 'lr == 3e-4'",),
)

CI = Command(
    "ci",
    "paired-seed confidence intervals: treatment vs baseline",
    options(
        tuple(o.but(help=PAIRED_DATA_HELP) if o.name == "data" else o for o in DATA),
        TUNING,
        Option(
            "baseline",
            help='baseline runs, e.g. "algo=sync" (required with --data)',
            cli=dict(metavar="SEL"),
        ),
        Option(
            "treatment",
            help='treatment runs, e.g. "algo=diloco,H=16,keep=1" (repeatable)',
            cli=dict(action="append", metavar="SEL"),
            cli_default=[],
        ),
        Option(
            "sweep",
            flag="--treatment-sweep",
            help="compare every level of COL against the baseline, other factors fixed",
            cli=dict(metavar="COL"),
        ),
        LEVEL_OPTION.but(group=None, help="interval level (default %(default)s)"),
        Option(
            "resamples",
            "10000",
            help="bootstrap resamples (default %(default)s)",
            cli=dict(type=int),
        ),
        Option("seed", "0", help="bootstrap seed (default %(default)s)", cli=dict(type=int)),
        JSON,
        REPORT,
    ),
    description="Pair runs by seed and estimate treatment - baseline with a "
    "paired t interval, a BCa bootstrap interval, Wilcoxon and sign-flip "
    "p-values. With no --data: the committed tuned paired grid, synchronous "
    "baseline against DiLoCo at H=16, each arm's lr tuned on seeds 0,1,2 and the "
    "interval over the other seeds.",
    examples=(
        "fitrules ci",
        "fitrules ci --data main --where 'lr == 3e-4' --baseline H=1,keep=1 --treatment-sweep H",
    ),
)

PREDICT = Command(
    "predict",
    "write a prediction to a ledger before the run",
    options(
        DATA,
        TUNING,
        ONE_FORM.but(cli=dict(metavar='NAME or "NAME = EXPR"')),
        Option(
            "saved_fit",
            flag="--fit",
            help="predict with a fit saved by fit --json or to_json (FILE): its form and fit "
            "options, on the data it was made from (checked), in place of --form",
            cli=dict(type=Path, metavar="FILE"),
        ),
        Option(
            "at",
            help="the cell predicted",
            cli=dict(required=True, metavar='"H=8,keep=0.25"'),
        ),
        Option(
            "tolerance",
            help="the relative error (percent) the prediction commits to (default: none, the "
            "record then commits only to its interval)",
            cli=dict(type=float, metavar="PCT"),
        ),
        Option(
            "ledger",
            help="JSON-lines ledger to append to (created if missing; an existing one is "
            "checked first)",
            cli=dict(type=Path, required=True),
        ),
        FITTING,
        in_group("interval", RUNS, BOOTSTRAP),
        Option("command", flag=None),
    ),
    description="Fit a form on all cells, predict one cell with an interval that "
    "carries the form's misfit (leave-one-cell-out refits) as well as its constants' "
    "uncertainty and, with --runs K, the seed noise of K new runs, and append the "
    "prediction to an append-only, hash-chained ledger.",
    examples=(
        "fitrules predict --form composition --at 'H=8,keep=0.25' --ledger predictions.jsonl",
    ),
)

SCORE = Command(
    "score",
    "score ledger predictions against new results",
    options(
        Option(
            "ledger",
            help="the JSON-lines ledger to score",
            cli=dict(type=Path, required=True),
        ),
        HEAD,
        tuple(
            o.but(help="results table with the new runs (CSV or Parquet; required)")
            if o.name == "data"
            else o
            for o in DATA
        ),
        JSON,
        TUNING,
    ),
    description="Check the ledger's hashes (and its head, with --head), then score every "
    "prediction whose cell has results in --data. The ledger is never written.",
    examples=("fitrules score --ledger predictions.jsonl --data new_runs.csv",),
)

LEDGER = Command(
    "ledger",
    "check a predictions ledger",
    description="Check a ledger's records and hash chain; with --head, also that the head "
    "recorded elsewhere is still in the chain (a removed last record or a rewritten chain "
    "is caught only that way).",
    examples=("fitrules ledger verify --ledger predictions.jsonl",),
)
LEDGER_VERIFY = Command(
    "ledger verify",
    "check the records, the chain and (--head) the head",
    options(
        Option(
            "ledger",
            help="the JSON-lines ledger to check",
            cli=dict(type=Path, required=True),
        ),
        HEAD,
    ),
    examples=("fitrules ledger verify --ledger predictions.jsonl --head HASH",),
)

FORMS = Command(
    "forms",
    "list, show, add or remove forms",
    examples=("fitrules forms list", "fitrules forms show composition"),
)
FORM_NAME = Option("name", flag="name", help="the form's name")
FORMS_LIST = Command("forms list", "list the available forms", examples=("fitrules forms list",))
FORMS_SHOW = Command(
    "forms show",
    "explain one form: variables, linear and nonlinear constants",
    options(FORM_NAME.but(python=False), DATA_UNLABELLED),
    description="Explain one form. A form that declares its variables needs no grid; "
    "otherwise its variables are resolved against --data (default: the main grid).",
    examples=("fitrules forms show composition",),
)
FORMS_ADD = Command(
    "forms add",
    "add a form to forms.toml in the working directory",
    options(
        FORM_NAME.but(
            python=False,
            help='the form\'s name, optionally with its variables: "mine(H, omega)"',
        ),
        Option(
            "expression",
            flag="expression",
            python=False,
            help='the expression, e.g. "L0 + a*omega**c"',
        ),
        DATA_UNLABELLED,
        Option("line", flag=None),
        Option("folder", flag=None),
    ),
    description="Add a form to forms.toml in the working directory. Declare its "
    'variables in the name, e.g. "chin(N, D)"; otherwise every name is checked against '
    "the columns of --data (default: the main grid), so that a misspelt variable is "
    "refused instead of becoming a constant.",
    examples=("fitrules forms add 'mine(H, omega)' 'L0 + a*omega**c*(H/16)**b'",),
)
FORMS_REMOVE = Command(
    "forms remove",
    "remove a form from forms.toml in the working directory",
    options(FORM_NAME, Option("folder", flag=None)),
    examples=("fitrules forms remove mine",),
)

SIMULATE = Command(
    "simulate",
    "run a DiLoCo simulation grid (spec TOML) or one cell",
    options(
        Option(
            "spec",
            flag="spec",
            help="grid spec (TOML), or the name of a committed spec such as main "
            "(data/specs/main.toml; shipped with the package)",
            cli=dict(nargs="?", type=Path),
        ),
        Option(
            "out",
            help="results CSV to create or resume",
            cli=dict(type=Path, required=True),
        ),
        Option(
            "jobs",
            "1",
            help="worker processes (default %(default)s)",
            check=_processes,
            cli=dict(type=int),
        ),
        Option(
            "scheduler",
            help="run each run as a task on a Dask cluster instead: a scheduler address "
            "(tcp://host:8786) or local:N for N local processes; needs "
            'pip install "fitrules[distributed]"',
            check=_scheduler,
            cli=dict(metavar="ADDRESS"),
        ),
        Option(
            "cell",
            help='one configuration, e.g. "H=8,keep=0.25", on top of the '
            "spec's fixed settings when a spec is given",
        ),
        Option(
            "seeds",
            help="seeds for --cell, e.g. 0,1,2 (default: the spec's seeds, or 0)",
            check=lambda v, n: arg.text(v, n, none=True),
        ),
        PROGRESS,
        Option("quiet", False, flag=None, check=arg.flag),
        Option("command", flag=None, check=lambda v, n: arg.text(v, n, none=True)),
    ),
    description="Run the numpy DiLoCo harness over a grid spec, appending "
    "each finished run to --out (resumable), and write a manifest beside it. When "
    "stderr is not a terminal, a line of progress is printed at most every 10 seconds.",
    examples=(
        "fitrules simulate main --out runs.csv --jobs 2",
        "fitrules simulate main --cell 'H=8,keep=0.25' --out one.csv",
    ),
)

# in the order of `fitrules --help`
COMMANDS = (
    COMPARE,
    DESIGN,
    SEARCH,
    FIT,
    ALLOCATE,
    VALIDATE,
    CI,
    PREDICT,
    SCORE,
    LEDGER,
    LEDGER_VERIFY,
    FORMS,
    FORMS_LIST,
    FORMS_SHOW,
    FORMS_ADD,
    FORMS_REMOVE,
    SIMULATE,
)
