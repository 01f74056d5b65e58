"""What the long fuzzer runs (fuzz_api.py, fuzz_cli.py) share: their options, the Hypothesis
run of many cases, stopping early with the counts kept, and the failing cases written at once."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

# set on import, before numpy or matplotlib is: one BLAS thread, no display; fitrules and the
# tests' fuzzing module importable from the checkout
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

STOP: list[int] = []  # set by SIGUSR1: stop before the next case


def run_options(ap: argparse.ArgumentParser) -> None:
    """The options every long fuzzer run takes."""
    ap.add_argument("--cases", type=int, default=10_000, help="cases to try (10,000)")
    ap.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0)")
    ap.add_argument("--failures", type=Path, default=None, help="write failing cases here")
    ap.add_argument("--every", type=int, default=500, help="print progress every N cases")


def many_cases(args: argparse.Namespace, strategy):
    """A decorator: the function of one case, run by Hypothesis on ``args.cases`` cases of
    ``strategy`` from ``args.seed``, generation only; it stops at once when STOP is set."""

    def wrap(one):
        @seed(args.seed)
        @settings(
            max_examples=args.cases,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def run(case):
            if STOP:
                raise KeyboardInterrupt
            one(case)

        return run

    return wrap


def clear_failures(args: argparse.Namespace) -> None:
    """Empty the --failures file, if one is named, before the run appends to it."""
    if args.failures is not None:
        args.failures.write_text("")


def note_failure(kept: list[dict], outcome, args: argparse.Namespace, **case) -> None:
    """Keep a failed ``outcome`` of ``case`` (the first 20 of each kind), at once also in
    --failures."""
    if outcome.failed and sum(k["kind"] == outcome.kind for k in kept) < 20:
        kept.append({"kind": outcome.kind, **case, "detail": outcome.detail})
        keep(args.failures, kept[-1])


def keep(path: Path | None, failure: dict) -> None:
    """Append one failing case to ``path`` at once, so that a long run stopped early keeps
    what it found."""
    if path is not None:
        with open(path, "a") as fh:
            fh.write(json.dumps(failure, default=repr) + "\n")


def progress(n: int, bad: int, t0: float) -> None:
    """One progress line on stderr: cases so far, failures, seconds."""
    print(f"  {n:,} cases, {bad} failures, {time.perf_counter() - t0:.0f} s",
          file=sys.stderr, flush=True)  # fmt: skip


def run_until_stopped(run) -> bool:
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


def print_tried(tried: int, t0: float, args: argparse.Namespace, stopped: bool) -> None:
    """The first line of the counts: cases tried, seconds, seed, and whether stopped early."""
    print(
        f"cases tried: {tried:,} in {time.perf_counter() - t0:.0f} s (seed {args.seed})"
        + (" - STOPPED EARLY (interrupted)" if stopped else "")
    )
