"""Stop a two-process search and a two-process simulation with SIGTERM or SIGINT at random
(seeded) moments, and print for each stop how long the command took to exit and what it left:
processes of its group still alive (its workers) and partial outputs.

    python tools/stop_at_random.py                        # 20 stops of each command, seed 0
    python tools/stop_at_random.py --times 5 --seed 3 --only search

Each command is started in a session of its own, as a terminal or ``timeout`` starts one, and
stopped at a moment drawn between its start and ``--max-delay`` seconds (its start-up, its
plan, its pool of workers starting, its workers at work), with SIGTERM or SIGINT, sent to its
whole process group (what ``timeout`` and a terminal's Ctrl-C do) or to its first process only
(``kill PID``). A stop passes when the command exits within 10 s, no process of its group is
left alive, and no partial output is left: no staging file (``*.partial``), no result of a
search that did not finish, and a simulation's table holds only complete rows (the runs that
finished before the stop, kept on purpose: a rerun resumes from them) and no manifest.

Exit status: 0 when every stop passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXIT_WITHIN = 10.0  # seconds a stopped command may take to exit
GIVE_UP = 60.0  # a command still running then is killed (and the stop fails)

# flag words: the command lines this script runs
COMMANDS = {
    # 30 forms on the default grid, each fitted 6,341 times (300 outer splits, 20 inner): a
    # chunk of 4 forms keeps a worker busy for half a minute and more
    "search": ["search", "--terms", "1", "--max-constants", "3", "--splits", "300",
               "--inner-splits", "20", "--jobs", "2", "--json", "s.json", "--forms-out",
               "f.toml", "--report", "R"],  # fmt: skip
    # four runs of 20,000 steps (about 20 s of CPU each), two at a time
    "simulate": ["simulate", "--cell", "H=4,keep=0.5,steps=20000", "--seeds", "0,1,2,3",
                 "--jobs", "2", "--out", "o.csv"],  # fmt: skip
}
STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130}
WORDS = {signal.SIGTERM: "terminated", signal.SIGINT: "interrupted"}


def _stat(pid: str) -> tuple[str, int, int, float] | None:
    """(state, parent, process group, CPU seconds) of process ``pid`` from /proc, or None if
    it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return fields[0], int(fields[1]), int(fields[2]), cpu


def _live(match) -> list[int]:
    """Processes (not zombies) whose parent and group satisfy ``match(parent, group)``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            s = _stat(entry)
            if s is not None and s[0] != "Z" and match(s[1], s[2]):
                out.append(int(entry))
    return out


def group_left(pgid: int) -> list[int]:
    """Processes of group ``pgid`` still alive (a command's workers keep its group after it
    ends, when they outlive it)."""
    return _live(lambda ppid, pgrp: pgrp == pgid)


def busy_workers(pid: int, cpu: float) -> int:
    """How many live child processes of ``pid`` have used ``cpu`` seconds of CPU or more."""
    return sum(
        (s := _stat(str(child))) is not None and s[3] >= cpu
        for child in _live(lambda ppid, pgrp: ppid == pid)
    )


@dataclass
class Stop:
    """One stop: what was sent when, and what the command did and left."""

    command: str
    sig: signal.Signals
    target: str  # "group" or "process"
    delay: float  # seconds from the start (or from two workers at work) to the signal
    seconds: float | None = None  # from the signal to the exit (None: it did not exit)
    code: int | None = None
    last_line: str = ""
    stderr: str = ""
    left: list[int] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    finished_first: bool = False  # the command was done before the signal

    @property
    def ok(self) -> bool:
        return (
            self.seconds is not None and self.seconds < EXIT_WITHIN and not self.left
            and not self.partial
        )  # fmt: skip


def _partial_outputs(command: str, folder: Path, code: int | None) -> list[str]:
    """What a stopped ``command`` left in ``folder`` that is not a complete output."""
    bad = [str(p.relative_to(folder)) for p in folder.rglob("*") if "partial" in p.name]
    done = code == 0
    if command == "search":
        for name, read in (("s.json", json.loads), ("f.toml", tomllib.loads)):
            path = folder / name
            if path.exists():
                try:
                    read(path.read_text())
                except ValueError:
                    bad.append(f"{name} (unreadable)")
                if not done:
                    bad.append(f"{name} (from a search that did not finish)")
        report = folder / "R"
        if report.exists() and not (done and (report / "report.md").exists()):
            bad.append("R (a report directory of a search that did not finish)")
    else:
        table = folder / "o.csv"
        if table.exists():
            data = table.read_bytes()
            lines = data.decode().splitlines()
            if data and not data.endswith(b"\n"):
                bad.append("o.csv (a cut-off last row)")
            elif lines and any(line.count(",") != lines[0].count(",") for line in lines):
                bad.append("o.csv (a row of the wrong width)")
        manifest = folder / "o.manifest.json"
        if manifest.exists() and not done:
            bad.append("o.manifest.json (of a grid that did not finish)")
    return bad


def stop_once(
    command: str,
    sig: signal.Signals,
    target: str,
    folder: Path,
    delay: float,
    busy: float = 0.0,
    settle: float = 0.0,
) -> Stop:
    """Start ``command`` (a key of :data:`COMMANDS`) in ``folder``, send ``sig`` to its group
    or its process ``delay`` seconds after its start (with ``busy``, after two of its workers
    have each used ``busy`` seconds of CPU: they are at work), and see how long it takes to
    exit and what it leaves: the processes of its group alive when it has exited (or, with
    ``settle``, still alive that many seconds later: a process killed with its parent dies a
    moment after it)."""
    run = folder / "run"
    run.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(folder / "stderr.txt", "w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fitrules", *COMMANDS[command]], cwd=run,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
            start_new_session=True,
            # a terminal's command takes Ctrl-C: whatever this script inherited (SIGINT ignored
            # in a background job), the command gets the default, as it would in a terminal
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        stop = Stop(command, sig, target, delay)
        try:
            if busy:
                t0 = time.monotonic()
                while busy_workers(proc.pid, busy) < 2 and proc.poll() is None:
                    if time.monotonic() - t0 > 2 * GIVE_UP:
                        raise RuntimeError(f"{command}: no two busy workers in {2 * GIVE_UP} s")
                    time.sleep(0.05)
            time.sleep(delay)
            stop.finished_first = proc.poll() is not None
            if target == "group":
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
            t_sent = time.monotonic()
            try:
                proc.wait(GIVE_UP)
                stop.seconds = time.monotonic() - t_sent
            except subprocess.TimeoutExpired:
                pass
            stop.left = group_left(proc.pid)
            t_exit = time.monotonic()
            while stop.left and time.monotonic() - t_exit < settle:
                time.sleep(0.05)
                stop.left = group_left(proc.pid)
        finally:
            if proc.poll() is None or group_left(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)  # nothing of this script outlives it
                proc.wait()
        err.seek(0)
        stop.stderr = err.read()
    lines = stop.stderr.strip().splitlines()
    stop.code = proc.returncode
    stop.last_line = lines[-1] if lines else ""
    stop.partial = _partial_outputs(command, run, stop.code)
    return stop


def _row(s: Stop) -> str:
    took = f"{s.seconds:.2f}" if s.seconds is not None else "did not exit"
    return (
        f"| {s.command} | {s.sig.name} | {s.target} | {s.delay:.2f} | {took} | {s.code} "
        f"| {len(s.left)} | {', '.join(s.partial) or 'none'} | {s.last_line[:40]} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=20, help="stops of each command")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=10.0,
                        help="the latest moment drawn, in seconds from the start")  # fmt: skip
    parser.add_argument("--only", choices=sorted(COMMANDS), help="one command only")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    stops: list[Stop] = []
    load = os.getloadavg()[0]
    print(f"load average at the start: {load:.2f}; {os.cpu_count()} cores; seed {args.seed}")
    print("| command | signal | to | delay s | exit s | status | left | partial | last line |")
    print("|---|---|---|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for command in [args.only] if args.only else sorted(COMMANDS):
            for i in range(args.times):
                sig = rng.choice([signal.SIGTERM, signal.SIGINT])
                target = rng.choice(["group", "process"])
                delay = rng.uniform(0.0, args.max_delay)
                s = stop_once(command, sig, target, Path(tmp) / f"{command}{i}", delay)
                stops.append(s)
                print(_row(s), flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for command in sorted({s.command for s in stops}):
        mine = [s for s in stops if s.command == command]
        took = [s.seconds for s in mine if s.seconds is not None]
        print(
            f"{command}: {sum(s.ok for s in mine)} of {len(mine)} stops passed; exit after "
            f"the signal at most {max(took):.2f} s (median {sorted(took)[len(took) // 2]:.2f})"
            if took else f"{command}: no stop exited",
            end="",
        )  # fmt: skip
        print(
            f"; {sum(len(s.left) for s in mine)} processes left, "
            f"{sum(bool(s.partial) for s in mine)} stops left a partial output, "
            f"{sum(s.finished_first for s in mine)} finished before their signal"
        )
    return 0 if all(s.ok for s in stops) else 1


if __name__ == "__main__":
    sys.exit(main())
