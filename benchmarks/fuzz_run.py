"""What the long fuzzer runs (fuzz_api.py, fuzz_cli.py) share: their options, the Hypothesis
run of many cases, stopping early with the counts kept, and the failing cases written at once."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
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


def keep(path: Path | None, failure: dict) -> None:
    """Append one failing case to ``path`` at once, so that a long run stopped early keeps
    what it found."""
    if path is not None:
        with open(path, "a") as fh:
            fh.write(json.dumps(failure, default=repr) + "\n")


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


class Tally:
    """What a run has seen: outcomes by kind, cases by group (a call or a command), the
    failures kept (each also written to --failures at once), and when it began."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        if args.failures is not None:  # a fresh file for this run
            args.failures.write_text("")
        self.counts: Counter[str] = Counter()
        self.groups: Counter[str] = Counter()
        self.kept: list[dict] = []
        self.t0 = time.perf_counter()

    def add(self, outcome, group: str, **case) -> None:
        """Count ``outcome`` of a case of ``group``; keep it if it failed (the first 20 of
        each kind)."""
        self.counts[outcome.kind] += 1
        self.groups[group] += 1
        if outcome.failed and sum(k["kind"] == outcome.kind for k in self.kept) < 20:
            self.kept.append({"kind": outcome.kind, **case, "detail": outcome.detail})
            keep(self.args.failures, self.kept[-1])

    def progress(self, n: int, passed: tuple[str, ...]) -> None:
        """Every --every cases, a line on stderr: cases so far, failures (outcomes of a kind
        not in ``passed``), seconds."""
        if self.args.every and n % self.args.every == 0:
            bad = sum(self.counts[k] for k in self.counts if k not in passed)
            print(f"  {n:,} cases, {bad} failures, {time.perf_counter() - self.t0:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip

    def print_tried(self, tried: int, stopped: bool) -> None:
        """The first line of the counts: cases tried, seconds, seed, whether stopped early."""
        print(
            f"cases tried: {tried:,} in {time.perf_counter() - self.t0:.0f} s "
            f"(seed {self.args.seed})" + (" - STOPPED EARLY (interrupted)" if stopped else "")
        )
