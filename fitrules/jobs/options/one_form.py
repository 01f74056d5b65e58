"""The declarations of the commands on one form: fit, allocate, and predict with the ledger it
writes (score, ledger verify), each option in the order of its ``--help``."""

from __future__ import annotations

from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.errors import FitrulesError
from fitrules.base.options import Command, Option, in_group, options
from fitrules.jobs.options.groups import (
    BOOTSTRAP,
    DATA,
    FITTING,
    HEAD,
    JSON,
    LEDGER_FILE,
    OBJECTIVE,
    ONE_FORM,
    REPORT,
    RUNS,
    TUNING,
    choice,
    repeatable,
)

INTERVAL_METHODS = ("bootstrap", "profile")

# a fit saved by `fit --json` or `to_json`, read in place of a form (and, for fit and
# allocate, of the data): declared once, each command saying what it does with it
SAVED_FIT_FILE = Option(
    "saved_fit",
    # flag words: the flag's declaration and predict's help
    flag="--fit",
    help="predict with a fit saved by fit --json or to_json (FILE): its form and fit "
    "options, on the data it was made from (checked), in place of --form",
    cli=dict(type=Path, metavar="FILE"),
)


# outside information about the seed noise, which fit and predict take alike (issue 64)
SEED_INFORMATION = (
    Option(
        "seed_sd",
        help="one seed id's shared effect as an sd relative to the loss (e.g. 0.005), "
        "known from outside the grid: intervals over new seed ids take it as known "
        "instead of estimating it from the grid's few seed ids",
        check=lambda v, n: v is None or arg.real(v, n, 0.0),
        cli=dict(type=float, metavar="SD"),
    ),
    repeatable(
        "seed_pool",
        "'lr == 1e-3'",
        help="a filter naming another slice of the data file whose seed variance is "
        "pooled with the grid's (repeatable); refused when the slices' seed noise "
        "differs (F tests at 5%%)",
        check=lambda v, n: arg.texts(v, n),
    ),
)


def _interval_method(value, name: str) -> None:
    """``intervals``: False or True (the bootstrap), or a method's name."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return
    if not (isinstance(value, str) and value in INTERVAL_METHODS):
        raise FitrulesError(
            f"{name} {value!r}: give True or False, or one of {', '.join(INTERVAL_METHODS)}"
        )


FIT = Command(
    "fit",
    "fit one form on all cells",
    options(
        DATA,
        ONE_FORM.but(cli=dict(metavar='NAME or "NAME = EXPR"')),
        SAVED_FIT_FILE.but(
            python=False,
            # flag words: the option's help
            help="print a fit saved by fit --json or to_json (FILE), and its --predict points, "
            "in place of --form and --data: no data is read and nothing is refitted",
        ),
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
                cli=dict(
                    nargs="?", const="bootstrap", choices=list(INTERVAL_METHODS), metavar="METHOD"
                ),
            ),
            repeatable(
                "predict",
                '"H=8,keep=0.25"',
                default=(),
                help="prediction with interval at a point, in the grid or not (repeatable)",
                cli_default=[],
            ),
            RUNS,
            BOOTSTRAP,
            SEED_INFORMATION,
        ),
        in_group(
            "constraints",
            repeatable(
                "constraints",
                "'b > a'",
                # flag words: the flag's declaration
                flag="--constraint",
                help="a linear constraint between constants, e.g. 'b > a', 'a + b = 1' or "
                "'c >= 0.5*b' (repeatable); enforced by the optimiser, kept by --intervals "
                "profile",
            ),
        ),
        JSON,
        REPORT,
        Option(
            "cells",
            True,
            # flag words: the flag's declaration
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
        "fitrules fit --fit fit.json --predict 'H=8,keep=0.25' --runs 3",
    ),
)


def _budgets(value, name: str) -> None:
    from fitrules.jobs.allocate import check_budgets  # numpy: not for --help

    check_budgets(value, name)


def _family(value, name: str) -> None:
    from fitrules.jobs.allocate import check_family

    check_family(value, name)


def _allocate_intervals(value, name: str) -> None:
    from fitrules.jobs.allocate import check_intervals

    check_intervals(value, name)


ALLOCATE = Command(
    "allocate",
    "the loss-optimal split of a budget between two variables (N and D for 6*N*D)",
    options(
        DATA,
        ONE_FORM.but(cli=dict(metavar='NAME or "NAME = EXPR"')),
        SAVED_FIT_FILE.but(
            python=False,
            # flag words: the option's help
            help="allocate with a fit saved by fit --json or to_json (FILE), in place of "
            "--form and --data: no data is read and nothing is refitted",
        ),
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
            choice(
                "intervals",
                ("covariance", "bootstrap", "none"),
                help="how the fit's uncertainty reaches the optimum: covariance (default: "
                "delta method on the Jacobian covariance), bootstrap (the fit's bootstrap "
                "refits, --resamples), none",
                check=_allocate_intervals,
            ),
            choice(
                "family",
                ("none", "default"),
                help="candidate forms beside the given one: none (default), or default (the "
                "Chinchilla form, one with an interaction, sums of two power laws in either "
                "variable, a broken power law), each fitted and allocated, with the interval "
                "over the forms the grid cannot tell apart",
                check=_family,
            ),
        ),
        in_group(
            "fitting",
            OBJECTIVE,
            tuple(o for o in FITTING if o.name in ("weights", "fix", "bounds")),
        ),
        in_group("intervals", BOOTSTRAP),
        JSON,
        REPORT,
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
        "fitrules allocate --fit fit.json --budgets 5.76e23 --report reports/allocation",
    ),
)

PREDICT = Command(
    "predict",
    # flag words: a command's summary (help)
    "predict a cell with its interval; with --ledger, write it there before the run",
    options(
        DATA,
        TUNING,
        ONE_FORM.but(cli=dict(metavar='NAME or "NAME = EXPR"')),
        SAVED_FIT_FILE,
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
        LEDGER_FILE.but(
            help="JSON-lines ledger to append to (created if missing; an existing one is "
            "checked first); without it the prediction is printed and nothing is written",
            cli=dict(type=Path),
        ),
        FITTING,
        in_group("interval", RUNS, BOOTSTRAP, SEED_INFORMATION),
        Option("command", flag=None),
    ),
    description="Fit a form on all cells, predict one cell with an interval that "
    "carries the form's misfit (leave-one-cell-out refits) as well as its constants' "
    "uncertainty and, with --runs K, the seed noise of K new runs, and append the "
    "prediction to an append-only, hash-chained ledger.",
    examples=(
        "fitrules predict --form composition --at 'H=8,keep=0.25' --ledger predictions.jsonl",
        "fitrules predict --fit fit.json --at 'N=7e10,D=1.4e12'",
    ),
)

SCORE = Command(
    "score",
    "score ledger predictions against new results",
    options(
        LEDGER_FILE.but(help="the JSON-lines ledger to score"),
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
    # flag words: a command's summary (help)
    "check the records, the chain and (--head) the head",
    options(
        LEDGER_FILE.but(help="the JSON-lines ledger to check"),
        HEAD,
    ),
    examples=("fitrules ledger verify --ledger predictions.jsonl --head HASH",),
)
