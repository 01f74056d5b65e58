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
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, fields
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from fitrules import __version__
from fitrules.errors import SimError
from fitrules.limits import MAX_SIM_JOBS, check_count, check_memory
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


def check_out(out: Path, jobs: int = 1) -> None:
    """Before the spec is read: ``--out`` and its manifest can be written, ``--jobs`` is sane.

    Raises
    ------
    SimError
        For an empty path, a directory or device at ``--out`` or at its manifest path, a
        parent that is not a writable directory, or ``--jobs`` outside 1 to
        :data:`~fitrules.limits.MAX_SIM_JOBS`.
    """
    check_count(jobs, "--jobs", 1, MAX_SIM_JOBS)
    out = Path(out)
    if not str(out).strip() or out.name in ("", ".", ".."):
        raise SimError(f"--out {str(out)!r}: give a CSV file name")
    for path in (out, manifest_path(out)):
        if path.is_dir():
            raise SimError(f"--out {out}: {path} is a directory; give a CSV file name")
        if path.exists() and not path.is_file():
            raise SimError(f"--out {out}: {path} exists and is not a regular file")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise SimError(f"--out {out}: cannot create files in {parent}")
    if out.parent.exists():
        try:  # a real probe: access() says yes to root even where nothing can be created
            fd, probe = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".probe")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise SimError(
                f"--out {out}: cannot create files in {out.parent} ({err.strerror})"
            ) from None


def _drop_cut_off_row(out: Path) -> None:
    """A run killed while appending leaves a last line without its newline: drop that line
    (its run is simply made again), keeping every complete row."""
    with open(out, "rb") as fh:
        data = fh.read()
    if data and not data.endswith(b"\n"):
        os.truncate(out, data.rfind(b"\n") + 1)


def _existing(out: Path, spec: GridSpec) -> dict[str, dict]:
    if not out.exists() or out.stat().st_size == 0:
        return {}
    try:
        head = out.read_bytes()[: 1 << 16]
        head.decode()
    except UnicodeDecodeError:
        raise SimError(f"{out}: exists and is not a results table; refusing to touch it") from None
    if not head.strip():
        return {}  # blank: no runs in it (left by fitrules before 0.2 when --seeds was empty)
    try:
        table = pd.read_csv(out, keep_default_na=False, dtype=str, nrows=0)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        msg = " ".join(str(err).split())
        raise SimError(
            f"{out}: exists and is not a results table ({msg}); refusing to touch it"
        ) from None
    if "spec_sha256" not in table.columns or set(KEY_FIELDS) - set(table.columns):
        raise SimError(
            f"{out}: exists and was not written by 'fitrules simulate'; choose another --out"
        )
    _drop_cut_off_row(out)
    try:
        table = pd.read_csv(out, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        msg = " ".join(str(err).split())
        raise SimError(
            f"{out}: exists and is not a results table ({msg}); refusing to touch it"
        ) from None
    other = set(table["spec_sha256"].astype(str)) - {spec.sha256}
    if other:
        raise SimError(
            f"{out}: holds runs of a different spec (sha256 {sorted(other)[0][:12]}); "
            f"refusing to mix them with spec {spec.name!r}; choose another --out"
        )
    rows = table.to_dict("records")
    out_rows = {}
    for i, r in enumerate(rows):
        try:
            out_rows[_row_key(r)] = r
        except (TypeError, ValueError, SimError):
            raise SimError(
                f"{out}: line {i + 2} is not a complete run; refusing to touch the file"
            ) from None
    return out_rows


def simulate(
    spec: GridSpec,
    out: Path,
    jobs: int = 1,
    show_progress: bool | None = None,
    command: str | None = None,
) -> pd.DataFrame:
    """Run every run of ``spec`` not already in ``out``; return the finished table.

    Parameters
    ----------
    spec : the grid to run.
    out : CSV path; created, or resumed if it holds runs of the same spec.
    jobs : number of worker processes.
    show_progress : progress bar on stderr; default when stderr is a terminal.
    command : the command line recorded in the manifest.
    """
    out = Path(out)
    check_out(out, jobs)
    corpus = load_corpus()
    done = _existing(out, spec)
    todo = [cfg for cfg in spec.runs if run_key(cfg) not in done]
    if todo:
        workers = min(jobs, len(todo))
        check_memory(
            workers * max(cfg.memory(corpus.vocab_size) for cfg in todo),
            f"{workers} simulation process(es) at once",
            "use fewer --jobs or a smaller model",
        )
    columns = None
    t0 = time.perf_counter()
    with open(out, "rb") if out.exists() else open(os.devnull, "rb") as fh0:
        new_file = not fh0.read(1 << 16).strip()
    fh = None
    try:
        with progress(
            total=len(spec.runs), initial=len(done), desc=spec.name, enabled=show_progress
        ) as bar:
            writer = None

            def append(row: dict) -> None:
                nonlocal writer, columns, new_file, fh
                row = {**row, "spec": spec.name, "spec_sha256": spec.sha256}
                if fh is None:  # opened at the first finished run: no empty file on failure
                    out.parent.mkdir(parents=True, exist_ok=True)
                    fh = open(out, "w" if new_file else "a", newline="")
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

            if jobs == 1 or len(todo) <= 1:
                _init_worker()
                for cfg in todo:
                    append(run(cfg, corpus))
            else:
                with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker) as pool:
                    futures = [pool.submit(_one, cfg) for cfg in todo]
                    for fut in as_completed(futures):
                        append(fut.result())
    finally:
        if fh is not None:
            fh.close()

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
