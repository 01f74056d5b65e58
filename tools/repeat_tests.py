"""Run the test suite (or part of it) several times and print every test that ever failed.

A test that fails one run in a few can keep finished work from landing, and a real regression
can hide behind "flaky"; one run cannot tell them apart, ten in a row can. Each run is the
README's test command (``python -m pytest``, the parallel runner from pyproject.toml's addopts)
with any extra pytest arguments; the load average is printed before and after each run, since
load is what timing-sensitive tests react to.

    python tools/repeat_tests.py                      # the whole suite, 10 times
    python tools/repeat_tests.py --times 3 tests/cli/test_outputs.py
    python tools/repeat_tests.py --sigint-ignored --busy 1 -k interrupt

``--sigint-ignored`` starts pytest the way a script's background job (``cmd &``), ``nohup`` or
some CI runners do, with SIGINT ignored, which every process it starts inherits; ``--busy N``
keeps N extra processes spinning for the whole time, as a second job on the machine would.

Exit status: 0 when every run passed, 1 when any test failed or errored in any run, 2 for a
run that did not finish (pytest's own error, or a timeout).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spin() -> None:  # pragma: no cover - runs in a child process
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    while True:
        pass


def _failed(junit: Path) -> list[tuple[str, str]]:
    """(node id, first line of the failure) of each test that failed or errored, from a JUnit
    XML report: the line is what tells a timing problem from a real one afterwards."""
    bad = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            path = case.get("classname", "").replace(".", "/")
            why = " ".join((problem.get("message") or problem.text or "").split())[:300]
            bad.append((f"{path}.py::{case.get('name')}", why))
    return bad


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(pytest_args: list[str], sigint_ignored: bool, timeout: float) -> dict:
    """One run of ``python -m pytest PYTEST_ARGS``: its exit status, time and failed tests."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--junitxml={junit}", *pytest_args]  # fmt: skip

        def preexec() -> None:
            signal.signal(signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.SIG_DFL)

        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout, preexec_fn=preexec)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"code": None, "seconds": time.monotonic() - t0, "failed": [], "tail": ""}
        seconds = time.monotonic() - t0
        failed = _failed(junit) if junit.exists() else []
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else [proc.stderr[-300:]]
    return {"code": proc.returncode, "seconds": seconds, "failed": failed, "tail": tail[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=10, help="runs in a row (default 10)")
    ap.add_argument(
        "--sigint-ignored",
        action="store_true",
        help="start pytest with SIGINT ignored, as a background job inherits it",
    )
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="keep N extra processes spinning during the runs (default 0)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds one run may take before it counts as not finished",
    )
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (tests, -k, -m, ...)")
    args, extra = ap.parse_known_args(argv)  # fmt: skip
    args.pytest_args = extra + args.pytest_args  # pytest's own options (-m, -k) pass through
    if not 1 <= args.times <= 1000 or not 0 <= args.busy <= 64:
        ap.error("--times must be from 1 to 1,000 and --busy from 0 to 64")

    print(f"{args.times} runs of python -m pytest {shlex.join(args.pytest_args)}".rstrip()
          + f" on {os.cpu_count()} cores; SIGINT {'ignored' if args.sigint_ignored else 'default'}"
          + f"; {args.busy} busy process(es)", flush=True)  # fmt: skip
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    ever: Counter[str] = Counter()
    unfinished = 0
    try:
        for i in range(1, args.times + 1):
            before = _load()
            r = run_once(args.pytest_args, args.sigint_ignored, args.timeout)
            ever.update(name for name, _ in r["failed"])
            if r["code"] is None:
                unfinished += 1
                status = f"did not finish in {args.timeout:.0f} s"
            elif r["code"] not in (0, 1):
                unfinished += 1
                status = f"pytest exit {r['code']}: {r['tail']}"
            else:
                status = r["tail"]
            print(f"run {i}: {status} ({r['seconds']:.0f} s; load average {before} before, "
                  f"{_load()} after)", flush=True)  # fmt: skip
            for name, why in r["failed"]:
                print(f"  failed: {name}: {why}", flush=True)
    finally:
        for p in spinners:
            p.terminate()
            p.join()
    if ever:
        print(f"tests that failed in any of {args.times} runs:")
        for name, n in sorted(ever.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {n} of {args.times}: {name}")
    else:
        print(f"every test passed in every one of {args.times} runs" if not unfinished
              else "no test failed, but a run did not finish")  # fmt: skip
    return 1 if ever else (2 if unfinished else 0)


if __name__ == "__main__":
    sys.exit(main())
