"""The README's times and sizes, measured: each printed with the machine it ran on.

    python benchmarks/bench_readme.py                 # compare at 10,000 splits, its report
    python benchmarks/bench_readme.py --splits 1000   # a shorter run
    python benchmarks/bench_readme.py --suite         # also the test suite (python -m pytest)

What it prints, one line each: the machine (CPU model, cores, memory, load average,
Python, numpy); ``fitrules compare --splits N`` on the default grid (CPU and wall time, in a
child process); the size of the report it writes with ``--report``; and with ``--suite``
the default test run (tests passed and skipped, CPU and wall time). The README quotes these
lines; rerun the script to check them.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """The machine in one line: CPU, cores, memory, load, Python and numpy."""
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"model name\s*:\s*(.+)", text)
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        memory = f"{mem:.0f} GiB"
    except (ValueError, OSError):
        memory = "memory unknown"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, {memory}, load average {load} "
        f"(1, 5, 15 min) at the start; Python {platform.python_version()}, numpy {np.__version__}"
    )


def timed(argv: list[str], cwd: Path) -> tuple[int, float, float, str]:
    """Exit status, CPU seconds (user + system of the child) and wall seconds of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, cpu, wall, done.stdout + done.stderr


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=10_000)
    ap.add_argument("--suite", action="store_true", help="also time the default test run")
    args = ap.parse_args(argv)
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="fitrules-bench-readme-") as tmp:
        report = Path(tmp) / "report"
        cmd = [sys.executable, "-m", "fitrules", "compare", "--splits", str(args.splits),
               "--report", str(report), "--quiet"]  # fmt: skip
        code, cpu, wall, out = timed(cmd, ROOT)
        if code:
            print(out, file=sys.stderr)
            return code
        print(
            f"fitrules compare --splits {args.splits:,} --report DIR on the default grid "
            f"(6 built-in forms, 20 cells): {cpu:.0f} s of CPU, {wall:.0f} s of wall time; "
            f"the report: {size_of(report) / 1e6:.1f} MB",
            flush=True,
        )
    if args.suite:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        code, cpu, wall, out = timed(cmd, ROOT)
        tail = [ln for ln in out.strip().splitlines() if re.search(r"\d+ (passed|failed)", ln)]
        print(
            f"python -m pytest -q (the default run): {tail[-1] if tail else 'no summary'}; "
            f"{cpu:.0f} s of CPU, {wall:.0f} s of wall time",
            flush=True,
        )
        if code:  # what failed, for the reader of the run's output
            print("\n".join(out.strip().splitlines()[-60:]), file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
