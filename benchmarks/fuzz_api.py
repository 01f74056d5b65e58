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
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from fuzzing import API_FAILURES, api_cases, check_api  # noqa: E402


def _keep(path: Path | None, failure: dict) -> None:
    """Append one failing case to ``path`` at once, so that a long run stopped early keeps
    what it found."""
    if path is not None:
        with open(path, "a") as fh:
            fh.write(json.dumps(failure, default=repr) + "\n")


STOP: list[int] = []  # set by SIGUSR1: stop before the next case


def _run_until_stopped(run) -> bool:
    """Run; Ctrl-C, or SIGUSR1 (``kill -USR1 PID``: taken before the next case, since the
    commands under test handle SIGINT and SIGTERM themselves), stops it, and the counts so
    far are still printed: a long run on a loaded machine may have to end before its last
    case. True if stopped early."""
    signal.signal(signal.SIGUSR1, lambda signum, frame: STOP.append(signum))
    try:
        run()
    except KeyboardInterrupt:
        return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases to try (10,000)")
    ap.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0)")
    ap.add_argument("--failures", type=Path, default=None, help="write failing cases here")
    ap.add_argument("--every", type=int, default=500, help="print progress every N cases")
    ap.add_argument("--calls", default=None,
                    help="only these calls, comma-separated: validate,record,...")  # fmt: skip
    args = ap.parse_args()
    calls = set(args.calls.split(",")) if args.calls else None
    cases = api_cases() if calls is None else api_cases().filter(lambda c: c.call in calls)
    if args.failures is not None:
        args.failures.write_text("")

    counts: Counter[str] = Counter()
    by_call: Counter[str] = Counter()
    kept: list[dict] = []
    t0 = time.perf_counter()

    @seed(args.seed)
    @settings(
        max_examples=args.cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def run(case):
        if STOP:
            raise KeyboardInterrupt
        outcome = check_api(case)
        counts[outcome.kind] += 1
        by_call[case.call] += 1
        if outcome.failed and sum(k["kind"] == outcome.kind for k in kept) < 20:
            kept.append({"kind": outcome.kind, "call": case.argv, "detail": outcome.detail})
            _keep(args.failures, kept[-1])
        n = sum(counts.values())
        if args.every and n % args.every == 0:
            bad = sum(counts[k] for k in counts if k not in ("ok", "refused"))
            print(
                f"  {n:,} cases, {bad} failures, {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    stopped = _run_until_stopped(run)
    tried = sum(counts.values())
    print(
        f"cases tried: {tried:,} in {time.perf_counter() - t0:.0f} s (seed {args.seed})"
        + (" - STOPPED EARLY (interrupted)" if stopped else "")
    )
    print(
        f"results: {counts['ok']:,}; refused (fitrules.base.errors, one line): "
        f"{counts['refused']:,}"
    )
    print(
        "raw exceptions: {raw}; messages not one line: {lines}; bad arguments accepted: "
        "{accepted}; results of the wrong type: {wrong}; warnings: {warning}; inputs changed: "
        "{changed}".format(**{k: counts[k] for k in API_FAILURES})
    )
    print("cases per function: " + ", ".join(f"{k} {v:,}" for k, v in sorted(by_call.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
