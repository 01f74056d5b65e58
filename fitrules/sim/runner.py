"""Run a grid spec in processes, appending each finished run to the output at once.

The output CSV is the checkpoint: runs already in it are skipped, so an interrupted grid
resumes where it stopped and loses at most the runs in flight. When every run is in, the
file is rewritten (atomically) in spec order so the committed table does not depend on
which process finished first, and a manifest is written beside it.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, fields
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from fitrules import __version__
from fitrules.errors import SimError
from fitrules.sim.corpus import load_corpus
from fitrules.sim.diloco import RunConfig, run
from fitrules.sim.spec import GridSpec
from fitrules.util import atomic_write_text, progress

KEY_FIELDS = [f.name for f in fields(RunConfig)]


def run_key(cfg: RunConfig) -> str:
    return json.dumps(asdict(cfg), sort_keys=True)


def _row_key(row: dict) -> str:
    values = {}
    for f in fields(RunConfig):
        v = row[f.name]
        kind = str(f.type)
        if kind == "bool":
            v = v if isinstance(v, bool) else str(v).lower() == "true"
        else:
            v = {"int": int, "float": float, "str": str}[kind](v)
        values[f.name] = v
    return run_key(RunConfig(**values))


def _init_worker() -> None:
    # Small matrices: one BLAS thread per process is several times faster than many.
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _one(cfg: RunConfig) -> dict:
    return run(cfg, load_corpus())


def manifest_path(out: Path) -> Path:
    return out.with_name(out.stem + ".manifest.json")


def _git_commit() -> str | None:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def _existing(out: Path, spec: GridSpec) -> dict[str, dict]:
    if not out.exists() or out.stat().st_size == 0:
        return {}
    try:
        table = pd.read_csv(out, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise SimError(
            f"{out}: exists and is not a results table ({err}); refusing to touch it"
        ) from None
    if "spec_sha256" not in table.columns or set(KEY_FIELDS) - set(table.columns):
        raise SimError(
            f"{out}: exists and was not written by 'fitrules simulate'; choose another --out"
        )
    other = set(table["spec_sha256"]) - {spec.sha256}
    if other:
        raise SimError(
            f"{out}: holds runs of a different spec (sha256 {sorted(other)[0][:12]}); "
            f"refusing to mix them with spec {spec.name!r}; choose another --out"
        )
    rows = table.to_dict("records")
    return {_row_key(r): r for r in rows}


LOG_EVERY_S = 10.0


def _finished(out: Path, spec: GridSpec) -> bool:
    """``out`` holds every run of ``spec`` in spec order, with its manifest beside it."""
    try:
        manifest = json.loads(manifest_path(out).read_text())
        table = pd.read_csv(out, keep_default_na=False)
    except (OSError, ValueError):
        return False
    if manifest.get("spec_sha256") != spec.sha256 or manifest.get("runs") != len(spec.runs):
        return False
    keys = [_row_key(r) for r in table.to_dict("records")]
    return keys == [run_key(cfg) for cfg in spec.runs]


def simulate(
    spec: GridSpec,
    out: Path,
    jobs: int = 1,
    show_progress: bool | None = None,
    command: str | None = None,
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run every run of ``spec`` not already in ``out``; return the finished table.

    Parameters
    ----------
    spec : the grid to run.
    out : CSV path; created, or resumed if it holds runs of the same spec.
    jobs : number of worker processes.
    show_progress : progress bar on stderr; default when stderr is a terminal.
    command : the command line recorded in the manifest.
    log : called with a line of progress, at most every ``LOG_EVERY_S`` seconds and at the
        end, when no progress bar is shown (stderr not a terminal): a long grid is never
        silent in a log file.

    Nothing is written when every run is already in ``out`` in spec order and the manifest
    beside it describes the same spec: rerunning a finished grid (``make grids`` after a
    fresh clone, whose file times say nothing) leaves the committed files as they are.
    """
    out = Path(out)
    if jobs < 1:
        raise SimError(f"--jobs {jobs}: must be >= 1")
    corpus = load_corpus()
    done = _existing(out, spec)
    todo = [cfg for cfg in spec.runs if run_key(cfg) not in done]
    if not todo and _finished(out, spec):
        return pd.read_csv(out)
    bar_shown = show_progress if show_progress is not None else sys.stderr.isatty()
    last_log = [time.perf_counter()]
    n_diverged = [0]
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = None
    t0 = time.perf_counter()
    new_file = not out.exists() or out.stat().st_size == 0
    with (
        open(out, "a", newline="") as fh,
        progress(
            total=len(spec.runs), initial=len(done), desc=spec.name, enabled=show_progress
        ) as bar,
    ):
        writer = None

        def append(row: dict) -> None:
            nonlocal writer, columns, new_file
            row = {**row, "spec": spec.name, "spec_sha256": spec.sha256}
            if writer is None:
                columns = list(row)
                writer = csv.DictWriter(fh, fieldnames=columns)
                if new_file:
                    writer.writeheader()
            writer.writerow(row)
            fh.flush()
            os.fsync(fh.fileno())
            done[run_key(RunConfig(**{k: row[k] for k in KEY_FIELDS}))] = row
            bar.update(1)
            n_diverged[0] += str(row.get("diverged")).lower() == "true"
            now = time.perf_counter()
            if log is not None and not bar_shown:
                if now - last_log[0] >= LOG_EVERY_S or len(done) == len(spec.runs):
                    last_log[0] = now
                    log(
                        f"{spec.name}: {len(done)} of {len(spec.runs)} runs done "
                        f"({n_diverged[0]} of this invocation diverged), {now - t0:.0f} s"
                    )

        if jobs == 1 or len(todo) <= 1:
            _init_worker()
            for cfg in todo:
                append(run(cfg, corpus))
        else:
            with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker) as pool:
                futures = [pool.submit(_one, cfg) for cfg in todo]
                for fut in as_completed(futures):
                    append(fut.result())

    table = pd.DataFrame([done[run_key(cfg)] for cfg in spec.runs])
    atomic_write_text(out, table.to_csv(index=False))
    manifest = {
        "spec_name": spec.name,
        "spec_sha256": spec.sha256,
        "spec": spec.text,
        "command": command or " ".join(sys.argv),
        "fitrules_version": __version__,
        "git_commit": _git_commit(),
        "corpus_sha256": corpus.sha256,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": len(table),
        "runs_this_invocation": len(todo),
        "jobs": jobs,
        "wall_s_this_invocation": round(time.perf_counter() - t0, 1),
        "wall_s_per_run": [float(x) for x in table["wall_s"]],
    }
    atomic_write_text(manifest_path(out), json.dumps(manifest, indent=2) + "\n")
    return table
