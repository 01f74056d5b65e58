"""The declarations of the commands on a grid itself: validate, ci (paired-seed intervals)
and simulate, each option in the order of its ``--help``."""

from __future__ import annotations

from pathlib import Path

from fitrules.base import arguments as arg
from fitrules.base.options import Command, Option, options
from fitrules.jobs.options.groups import (
    DATA,
    JOBS,
    JSON,
    LEVEL_OPTION,
    PAIRED_DATA_HELP,
    PROGRESS,
    REPORT,
    SCHEDULER,
    TUNING,
    repeatable,
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
        repeatable(
            "treatment",
            "SEL",
            help='treatment runs, e.g. "algo=diloco,H=16,keep=1" (repeatable)',
            cli_default=[],
        ),
        Option(
            "sweep",
            # flag words: the flag's declaration
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
        JOBS.but(default="1", help="worker processes (default %(default)s)"),
        SCHEDULER.but(
            help="run each run as a task on a Dask cluster instead: a scheduler address "
            "(tcp://host:8786) or local:N for N local processes; needs "
            'pip install "fitrules[distributed]"'
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
    description="Run a DiLoCo harness over a grid spec (model = mlp, the numpy twin; "
    "quadratic, with exact theory; or gpt, a character-level transformer in PyTorch, with "
    'pip install "fitrules[gpt]"), appending '
    "each finished run to --out (resumable), and write a manifest beside it. When "
    "stderr is not a terminal, a line of progress is printed at most every 10 seconds.",
    examples=(
        "fitrules simulate main --out runs.csv --jobs 2",
        "fitrules simulate main --cell 'H=8,keep=0.25' --out one.csv",
        "fitrules simulate gpt --out gpt.csv --jobs 2",
    ),
)
