"""The long run of the Python API fuzzer (tests/fuzzing.py, ``api_cases``): counts printed.

    python benchmarks/fuzz_api.py                   # 10,000 cases
    python benchmarks/fuzz_api.py --cases 500 --seed 3

Each case calls one public function of fitrules (load_grid, compare, fit, a fitted form's
predict, ci, tune, design, search, Form, Grammar, a result's to_json and report, and
fitrules.sim.theory's stationary_loss and exact_loss) with arguments of every type: good values,
numpy scalars, and a third of the cases hostile ones (wrong types, out of range, NaN, odd
tables). The
property: a documented fitrules.base.errors exception with a one-line message, or a result of the
documented type whose JSON view holds only finite numbers. Printed: cases tried, results and
refusals, and the failures by kind: raw exceptions (anything but a FitrulesError), messages
that are not one line, bad arguments accepted, results of the wrong type, warnings. Every
failure count must be 0; the first few of each kind go to --failures (JSON lines).
"""

from __future__ import annotations

import argparse
import sys

# first: importing fuzz_run sets the threads, the backend and the import path
from fuzz_run import Tally, many_cases, run_options, run_until_stopped

from fuzzing import API_FAILURES, api_cases, check_api


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    run_options(ap)
    ap.add_argument("--calls", default=None,
                    help="only these calls, comma-separated: validate,record,...")  # fmt: skip
    args = ap.parse_args()
    calls = set(args.calls.split(",")) if args.calls else None
    cases = api_cases() if calls is None else api_cases().filter(lambda c: c.call in calls)
    tally = Tally(args)
    counts = tally.counts

    @many_cases(args, cases)
    def run(case):
        tally.add(check_api(case), case.call, call=case.argv)
        tally.progress(sum(counts.values()), ("ok", "refused"))

    stopped = run_until_stopped(run)
    tally.print_tried(sum(counts.values()), stopped)
    print(
        f"results: {counts['ok']:,}; refused (fitrules.base.errors, one line): "
        f"{counts['refused']:,}"
    )
    print(
        "raw exceptions: {raw}; messages not one line: {lines}; bad arguments accepted: "
        "{accepted}; results of the wrong type: {wrong}; warnings: {warning}; inputs changed: "
        "{changed}".format(**{k: counts[k] for k in API_FAILURES})
    )
    print("cases per function: " + ", ".join(f"{k} {v:,}" for k, v in sorted(tally.groups.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
