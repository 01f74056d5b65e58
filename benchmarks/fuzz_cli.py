"""The long run of the command-line fuzzer (tests/fuzzing.py): many cases, counts printed.

    python benchmarks/fuzz_cli.py                   # 10,000 cases
    python benchmarks/fuzz_cli.py --cases 500 --seed 3
    python benchmarks/fuzz_cli.py --cases 1000 --command search   # one command's strategy

Each case is a random command line with its files (grids, forms.toml, ledgers, specs), run
in-process through fitrules.cli.main in a fresh working directory. Printed: the number of
cases tried, how many exited 0, 2 (refused) and 1 (compare --strict), and the failures by
kind: tracebacks (an exception escaped main), exit 1 without --strict, refused inputs that
left or changed a file, refusals that were not exactly one line, non-finite numbers in the
output, anything else on stderr, warnings, a line that must be refused (a value its option's
declaration refuses, ``declared_cases``) that ran, an input file changed. Every failure
count must be 0; the first few of each kind are written to --failures (JSON lines) with
their command lines. Exits 0 either way: the counts are the result.
"""

from __future__ import annotations

import argparse
import sys

# first: importing fuzz_run sets the threads, the backend and the import path
from fuzz_run import Tally, many_cases, run_options, run_until_stopped

import fuzzing
from fuzzing import cases, check

FAILURE_KINDS = (
    "traceback",
    "exit1",
    "leftover",
    "lines",
    "nonfinite",
    "stderr",
    "warning",
    "accepted",
    "changed",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    run_options(ap)
    ap.add_argument(
        "--command",
        default=None,
        metavar="NAME",
        help="only this command's cases (compare, design, fit, validate, ci, ledger, forms, "
        "simulate, search, declared)",
    )
    args = ap.parse_args()
    strategy = cases() if args.command is None else getattr(fuzzing, f"{args.command}_cases")()
    tally = Tally(args)
    counts = tally.counts

    @many_cases(args, strategy)
    def run(case):
        tally.add(check(case), case.command, argv=case.argv)
        counts["must_refuse"] += bool(case.must_refuse)
        n = sum(v for k, v in counts.items() if k != "must_refuse")
        tally.progress(n, ("ok", "refused", "strict", "must_refuse"))

    stopped = run_until_stopped(run)
    must = counts.pop("must_refuse", 0)
    tried = sum(counts.values())
    failures = {k: counts[k] for k in FAILURE_KINDS}
    other = {k: v for k, v in counts.items() if k.startswith("exit") and k != "exit1"}
    tally.print_tried(tried, stopped)
    print(
        f"exit 0: {counts['ok']:,}; exit 2 (refused, one line, nothing written): "
        f"{counts['refused']:,}; exit 1 with --strict: {counts['strict']:,}; lines that had "
        f"to be refused (an option's declaration refuses a value): {must:,}"
    )
    print(
        "tracebacks: {traceback}; exit 1 without --strict: {exit1}; leftover outputs on a "
        "refused input: {leftover}; refusals not one line: {lines}; non-finite output: "
        "{nonfinite}; other stderr on exit 0: {stderr}; warnings: {warning}; bad arguments "
        "accepted: {accepted}; inputs changed: {changed}".format(**failures)
    )
    if other:
        print(f"other exit statuses: {other}")
    print("cases per command: " + ", ".join(f"{k} {v:,}" for k, v in sorted(tally.groups.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
