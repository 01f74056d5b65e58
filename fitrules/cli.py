"""Command line: parse arguments, call one library function, print or write. No logic here."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from fitrules.errors import FitrulesError


def _command_line() -> str:
    return shlex.join(["fitrules", *sys.argv[1:]])


# ---------------------------------------------------------------- simulate
def _add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="run a DiLoCo simulation grid (spec TOML) or one cell",
                       description="Run the numpy DiLoCo harness over a grid spec, appending "
                       "each finished run to --out (resumable), and write a manifest beside it.")
    p.add_argument("spec", nargs="?", type=Path, help="grid spec (TOML); see data/specs/")
    p.add_argument("--out", type=Path, required=True, help="results CSV to create or resume")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--cell", help='one configuration, e.g. "H=8,keep=0.25", on top of the '
                   "spec's fixed settings when a spec is given")
    p.add_argument("--seeds", default=None, help="seeds for --cell, e.g. 0,1,2 (default: the "
                   "spec's seeds, or 0)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")
    p.set_defaults(func=_simulate)


def _simulate(args) -> int:
    from fitrules.sim.runner import simulate
    from fitrules.sim.spec import cell_spec, load_spec

    if args.spec is None and args.cell is None:
        raise FitrulesError("simulate needs a SPEC file or --cell")
    spec = load_spec(args.spec) if args.spec is not None else None
    if args.cell is not None:
        spec = cell_spec(args.cell, spec, args.seeds)
    table = simulate(spec, args.out, jobs=args.jobs, show_progress=args.progress,
                     command=_command_line())
    n_div = int(table["diverged"].astype(str).str.lower().eq("true").sum())
    print(f"{args.out}: {len(table)} runs of {spec.name!r} ({n_div} diverged)")
    return 0


# ---------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from fitrules import __version__

    parser = argparse.ArgumentParser(
        prog="fitrules",
        description="Decide honestly whether a closed-form rule predicts a grid of experiments.")
    parser.add_argument("--version", action="version", version=f"fitrules {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _ADDERS:
        add(sub)
    return parser


_ADDERS = [_add_simulate]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FitrulesError as err:
        print(f"fitrules {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fitrules {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
