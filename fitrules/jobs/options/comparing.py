"""The declarations of the commands that weigh forms on held-out cells: compare, design and
search, each option in the order of its ``--help``."""

from __future__ import annotations

import argparse
from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.error_metrics import DEFAULT_ERROR_METRIC, ERROR_METRICS, error_metric
from fitrules.base.errors import FitrulesError, param
from fitrules.base.limits import (
    RANDOM_SPLITS,
    RANDOM_TRAIN_FRAC,
    SEED_PROTOCOLS,
    VERDICT_TRAIN_FRAC,
)
from fitrules.base.options import Command, Option, as_typed, fraction, in_group, options
from fitrules.jobs.options.groups import (
    CONSTANTS,
    DATA,
    FITTING,
    GUARD,
    HELDOUT_WEIGHTS_OPTION,
    INLINE_FORM,
    JOBS,
    JSON,
    LEVEL_OPTION,
    OBJECTIVE,
    ON_PROGRESS,
    PROGRESS,
    REPORT,
    SCHEDULER,
    TUNING,
    _one_of,
    _real,
    _true_false_or_none,
    choice,
    repeatable,
)

RULES = ("one-se", "best")  # how a search's inner ranking picks


def _metric_help() -> str:
    """The ``error_metric`` option's help, listing every metric of the registry."""
    return "what a held-out cell's error is: " + "; ".join(
        f"{m.name}{' (default)' if m.name == DEFAULT_ERROR_METRIC else ''}: {m.quantity}, in "
        + (m.unit or "the grid's value units").replace("%", "%%")  # argparse's help is %-formatted
        for m in ERROR_METRICS.values()
    )


ERROR_METRIC_OPTION = choice(
    "error_metric",
    tuple(ERROR_METRICS),
    help=_metric_help(),
    default=DEFAULT_ERROR_METRIC,
    check=lambda value, _name: error_metric(value),
)


def _screen(text: str) -> int | str:
    """``--screen``: auto, or a whole number >= 0 (its range is checked by the API)."""
    if text.strip() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise FitrulesError(
            f"{param('screen')} {text!r}: give a whole number >= 0 (0: no screen) or auto"
        ) from None


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
            repeatable(
                "split",
                "PROTOCOL",
                default="random",
                help="random (default), leave-one-level-out:COL, extrapolate:COL, "
                "extrapolate:COL:VALUE (fit below VALUE, score from it on; or "
                "'extrapolate:COL>=VALUE' in quotes), extrapolate:COL[:VALUE],COL2[:VALUE2] "
                "(beyond the grid in several columns at once), transfer (repeatable: one "
                "section per protocol, never pooled)",
                check=arg.text,
                cli_default=None,
            ),
            choice(
                "seeds",
                SEED_PROTOCOLS,
                help="the held-out error's protocol: cells (default: every run of the training "
                "and held-out cells) or cells-and-seeds (a third of the seed ids held out too, "
                "so that the error is what new runs at new seed ids show)",
            ),
            HELDOUT_WEIGHTS_OPTION,
            ERROR_METRIC_OPTION,
            Option(
                "fit_data",
                python=False,
                help="transfer: the grid fitted",
                cli=dict(type=Path),
            ),
            Option(
                "test_grid",
                # flag words: the flag's declaration
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
            # flag words: the flag's declaration
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
            # flag words: the flag's declaration
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
            # flag words: a help group's title
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
            choice(
                "rule",
                RULES,
                help="how the inner ranking picks: one-se (default: fewest constants within "
                "one standard error of the best) or best",
                check=_one_of(RULES),
            ),
            Option(
                "references",
                # flag words: the flag's declaration
                flag="--reference",
                help="comma-separated forms fitted on the same outer splits without "
                "selection (default: composition,log_additive where the grid has their "
                "variables; 'none' for none)",
                cli=dict(metavar="NAMES"),
            ),
            INLINE_FORM.but(
                help="your form, given inline (repeatable): a candidate beside the grammar's, "
                "and the one recommended, fitted on all runs, when the search abstains"
            ),
            JOBS.but(
                help="worker processes (default: the machine's cores; results do not depend on it)"
            ),
            SCHEDULER.but(
                help="run the fits as tasks on a Dask cluster instead of --jobs processes: a "
                "scheduler address (tcp://host:8786) or local:N for N local processes (the same "
                'result); needs pip install "fitrules[distributed]"'
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
            repeatable(
                "at",
                '"N=1e10,D=2e11"',
                help="a point where the pick will be used (repeatable): its fit on all cells "
                "goes through the wild-extrapolation guard there, as compare's fits do at "
                "held-out cells",
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
