"""Run a grid spec in processes or on a Dask cluster, appending each finished run at once.

The output CSV is the checkpoint: runs already in it are skipped, so an interrupted grid
resumes where it stopped and loses at most the runs in flight. When every run is in, the
file is rewritten (atomically) in spec order so the committed table does not depend on
which process finished first, and a manifest is written beside it.

Every way of running (here, in a local process pool, or on a Dask cluster through
:mod:`fitrules.sim.cluster`) hands its results to one :class:`_Checkpoint`, which writes
each run once. A run that raises is recorded as failed and the others go on; at the end
:class:`~fitrules.base.errors.SimError` names the failed runs and their errors, every finished
run is in the output, and the final rewrite and manifest wait for a rerun that completes
the grid.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import as_completed
from contextlib import ExitStack
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import pandas as pd

from fitrules import __version__
from fitrules.base.errors import SimError, param
from fitrules.base.limits import MAX_SIM_JOBS, check_count, check_memory
from fitrules.base.outputs import link_refusal
from fitrules.base.processes import submit_all, worker_pool
from fitrules.base.util import atomic_write_text, progress
from fitrules.sim.corpus import corpus_facts, corpus_label, load_corpus
from fitrules.sim.diloco import RunConfig, run
from fitrules.sim.gpt import GPTConfig, require_torch
from fitrules.sim.quadratic import QuadConfig
from fitrules.sim.spec import MODELS, GridSpec
from fitrules.sim.tasks import execute, one_blas_thread, run_key

KEY_FIELDS = [f.name for f in fields(RunConfig)]


def _config_class(spec_or_row: GridSpec | dict) -> type:
    """The config class of a spec's runs, or of a results row (by its ``model`` column)."""
    if isinstance(spec_or_row, GridSpec):
        return type(spec_or_row.runs[0]) if spec_or_row.runs else RunConfig
    model = spec_or_row.get("model")  # the MLP's rows have no model column
    return MODELS[model][0] if model in MODELS else RunConfig


def _row_config(row: dict) -> RunConfig | QuadConfig | GPTConfig:
    """The config of a results row, from its settings' columns."""
    values = {}
    cls = _config_class(row)
    for f in fields(cls):
        if f.name not in row and f.name in _added(cls):
            continue  # a table from before the setting: its runs were made at its default
        v = row[f.name]
        kind = str(f.type)
        if kind == "bool":
            v = v if isinstance(v, bool) else str(v).lower() == "true"
        else:
            v = {"int": int, "float": float, "str": str}[kind](v)
        values[f.name] = v
    return cls(**values)


def _added(cls: type) -> tuple[str, ...]:
    """The settings of ``cls`` that a table may lack (:attr:`GPTConfig.ADDED_SETTINGS`)."""
    return getattr(cls, "ADDED_SETTINGS", ())


def _row_key(row: dict) -> str:
    return run_key(_row_config(row))


def _corpora(spec: GridSpec) -> dict[str, str]:
    """The sha256 of each corpus a gpt spec's runs read, by their ``corpus`` setting, as the
    files are now; empty for the other backends (the MLP reads the shipped slice, which
    changes only with fitrules, and the quadratic none)."""
    runs: tuple = spec.runs  # of one config class (GridSpec's annotation names the MLP's)
    settings = sorted({cfg.corpus for cfg in runs if isinstance(cfg, GPTConfig)})
    return {setting: corpus_facts(setting).sha256 for setting in settings}


def _corpus_changed(out: Path, setting: str, was: str, now: str) -> SimError:
    """The refusal of a table whose runs read another version of a corpus than the file
    holds now: each corpus of a grid is one version, so that one table is one experiment."""
    return SimError(
        f"{out}: its runs read {corpus_label(setting)} with sha256 {was[:12]}, but the file "
        f"has sha256 {now[:12]} now; restore the file, or write to a new {param('out')}"
    )


def _one(cfg: RunConfig | QuadConfig | GPTConfig) -> dict:
    return execute(cfg)


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
        For an empty path, a directory, device or symbolic link at ``--out`` or at its
        manifest path, a parent that is not a writable directory, or ``--jobs`` outside 1 to
        :data:`~fitrules.base.limits.MAX_SIM_JOBS`.
    """
    check_count(jobs, param("jobs"), 1, MAX_SIM_JOBS)
    out = Path(out)
    if not str(out).strip() or out.name in ("", ".", ".."):
        raise SimError(f"{param('out')} {str(out)!r}: give a CSV file name")
    # the runs are appended to --out, and the table and manifest rewritten at the end: a link
    # is refused now, as every output refuses one, not after the runs went through it
    for path, what in (
        (out, ""),
        (manifest_path(out), f"{out}: its manifest {manifest_path(out)}"),
    ):
        refusal = link_refusal(path, param("out"), what)
        if refusal is not None:
            raise SimError(refusal)
    for path in (out, manifest_path(out)):
        if path.is_dir():
            raise SimError(f"{param('out')} {out}: {path} is a directory; give a CSV file name")
        if path.exists() and not path.is_file():
            raise SimError(f"{param('out')} {out}: {path} exists and is not a regular file")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise SimError(f"{param('out')} {out}: cannot create files in {parent}")
    if out.parent.exists():
        try:  # a real probe: access() says yes to root even where nothing can be created
            fd, probe = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".probe")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise SimError(
                f"{param('out')} {out}: cannot create files in {out.parent} ({err.strerror})"
            ) from None


def _existing(out: Path, spec: GridSpec, corpora: dict[str, str]) -> dict[str, dict]:
    """The runs already in ``out``, by their keys, when they are runs of ``spec`` that read
    the corpora it reads now (``corpora``, from :func:`_corpora`); else a refusal."""
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
    key_fields = [f.name for f in fields(_config_class(spec))]
    if "spec_sha256" not in table.columns:
        raise SimError(
            f"{out}: exists and was not written by 'fitrules simulate'; choose another "
            f"{param('out')}"
        )
    added = _added(_config_class(spec))
    missing = [n for n in key_fields if n not in table.columns and n not in added]
    if missing:  # simulate's table of another backend (a gpt table for an MLP spec)
        raise SimError(
            f"{out}: holds runs without the setting {missing[0]!r} that the runs of spec "
            f"{spec.name!r} have (another model's runs, or an older fitrules's); refusing to "
            f"mix them; choose another {param('out')}"
        )
    # a run killed while appending leaves a last line without its newline: that line is
    # dropped (its run is simply made again), once the complete rows are found to be this
    # grid's; a refusal leaves the file as it was
    data = out.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    try:
        table = pd.read_csv(io.BytesIO(complete), keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        msg = " ".join(str(err).split())
        raise SimError(
            f"{out}: exists and is not a results table ({msg}); refusing to touch it"
        ) from None
    other = set(table["spec_sha256"].astype(str)) - {spec.sha256}
    if other:
        raise SimError(
            f"{out}: holds runs of a different spec (sha256 {sorted(other)[0][:12]}); "
            f"refusing to mix them with spec {spec.name!r}; choose another {param('out')}"
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
        if "corpus_sha256" in r and str(r["corpus"]) in corpora:
            now = corpora[str(r["corpus"])]
            if str(r["corpus_sha256"]) != now:
                raise _corpus_changed(out, str(r["corpus"]), str(r["corpus_sha256"]), now)
    if len(complete) < len(data):
        os.truncate(out, len(complete))
    return out_rows


LOG_EVERY_S = 10.0


def _finished(out: Path, spec: GridSpec) -> bool:
    """``out`` holds every run of ``spec`` in spec order, with its manifest beside it naming
    the corpus they read (a manifest that names another is written again)."""
    try:
        manifest = json.loads(manifest_path(out).read_text())
        table = pd.read_csv(out, keep_default_na=False)
    except (OSError, ValueError):
        return False
    if manifest.get("spec_sha256") != spec.sha256 or manifest.get("runs") != len(spec.runs):
        return False
    record = _corpus_record(spec, table)
    if any(v is not None and manifest.get(k) != v for k, v in record.items()):
        return False
    keys = [_row_key(r) for r in table.to_dict("records")]
    return keys == [run_key(cfg) for cfg in spec.runs]


def _varying(spec: GridSpec) -> list[str]:
    """The factors that differ between the spec's runs, and the seed: enough to name a run."""
    kind = _config_class(spec)
    names = [f.name for f in fields(kind) if len({getattr(r, f.name) for r in spec.runs}) > 1]
    return names if "seed" in names else [*names, "seed"]


class _Checkpoint:
    """The output CSV as it fills: each finished run appended and synced at once, and once.

    ``done`` maps run keys to rows: the runs read from the output on resume, then each run
    appended. A run already there is not written again, whoever reports it twice.
    """

    def __init__(
        self,
        out: Path,
        spec: GridSpec,
        done: dict[str, dict],
        show_progress: bool | None,
        on_run: Callable[[dict], None] | None,
        log: Callable[[str], None] | None = None,
        corpora: dict[str, str] | None = None,
    ) -> None:
        self.out, self.spec, self.done, self.on_run = out, spec, done, on_run
        self.corpora = corpora or {}  # the sha256 of each corpus the grid's runs must read
        self.show_progress = show_progress
        # a line of progress every LOG_EVERY_S seconds when no bar is shown (stderr not a
        # terminal): a long grid is never silent in a log file
        bar_shown = show_progress if show_progress is not None else sys.stderr.isatty()
        self.log = None if bar_shown else log
        self._t0 = self._last_log = time.perf_counter()
        self._diverged = 0
        self.failed: list[tuple[RunConfig | QuadConfig | GPTConfig, str]] = []
        self._stack = ExitStack()
        self._writer: csv.DictWriter | None = None

    def __enter__(self) -> _Checkpoint:
        if self.out.exists():
            with open(self.out, "rb") as fh:
                self._header = not fh.read(1 << 16).strip()
        else:
            self._header = True
        self._fh: TextIO | None = None  # opened at the first run: no empty file on failure
        self._bar = self._stack.enter_context(
            progress(
                total=len(self.spec.runs),
                initial=len(self.done),
                desc=self.spec.name,
                enabled=self.show_progress,
            )
        )
        return self

    def __exit__(self, *exc_info) -> None:
        self._stack.close()

    def append(self, row: dict) -> None:
        """Write one finished run (its row from :func:`fitrules.sim.diloco.run`); a run that
        read another version of its corpus than the grid's is failed instead, so that the
        table never mixes two."""
        row = {**row, "spec": self.spec.name, "spec_sha256": self.spec.sha256}
        key = _row_key(row)
        if key in self.done:
            return
        want = self.corpora.get(str(row.get("corpus")))
        if want is not None and row.get("corpus_sha256") != want:
            self.fail(_row_config(row), SimError(
                f"it read {corpus_label(str(row['corpus']))} with sha256 "
                f"{str(row['corpus_sha256'])[:12]}, not the {want[:12]} of the grid's other "
                "runs (the file changed while the grid ran, or a worker reads another copy)"
            ))  # fmt: skip
            return
        fh = self._fh
        if fh is None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            fh = self._fh = self._stack.enter_context(
                open(self.out, "w" if self._header else "a", newline="")
            )
        if self._writer is None:
            self._writer = csv.DictWriter(fh, fieldnames=list(row))
            if self._header:
                self._writer.writeheader()
        self._writer.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())
        self.done[key] = row
        self._bar.update(1)
        self._diverged += str(row.get("diverged")).lower() == "true"
        now = time.perf_counter()
        if self.log is not None and (
            now - self._last_log >= LOG_EVERY_S or len(self.done) == len(self.spec.runs)
        ):
            self._last_log = now
            self.log(
                f"{self.spec.name}: {len(self.done)} of {len(self.spec.runs)} runs done "
                f"({self._diverged} of this invocation diverged), {now - self._t0:.0f} s"
            )
        if self.on_run is not None:
            self.on_run(row)

    def fail(self, cfg: RunConfig | QuadConfig | GPTConfig, err: BaseException) -> None:
        """Record a run that raised; :func:`simulate` names it when the grid ends."""
        message = " ".join(f"{type(err).__name__}: {err}".split())
        self.failed.append((cfg, message[:300]))

    def error(self) -> SimError:
        """One line naming the failed runs and their errors, and what a rerun does."""
        names = _varying(self.spec)
        shown = "; ".join(
            ",".join(f"{n}={getattr(cfg, n)}" for n in names) + f": {message}"
            for cfg, message in self.failed[:5]
        )
        more = f"; and {len(self.failed) - 5} more" if len(self.failed) > 5 else ""
        return SimError(
            f"{len(self.failed)} run(s) failed: {shown}{more}. "
            f"{self.out} holds the {len(self.done)} of {len(self.spec.runs)} runs that "
            "finished; rerun the same command to retry the others"
        )


def _run_here(todo: Iterable[RunConfig], checkpoint: _Checkpoint) -> None:
    one_blas_thread()
    corpus = load_corpus()
    for cfg in todo:
        try:
            row = run(cfg, corpus) if isinstance(cfg, RunConfig) else execute(cfg)
        except Exception as err:  # named when the grid ends; the other runs go on
            checkpoint.fail(cfg, err)
        else:
            checkpoint.append(row)


def _run_pool(todo: list[RunConfig], jobs: int, checkpoint: _Checkpoint) -> None:
    # On an interrupt (or an error in on_run) the runs in flight are killed and those not yet
    # started dropped: the finished runs are in the output, and a rerun makes the others. The
    # executor's own shutdown waited for the runs in flight, minutes each (issue 61).
    with worker_pool(jobs, one_blas_thread) as pool:
        futures = dict(zip(submit_all(pool, _one, todo), todo, strict=True))
        for fut in as_completed(futures):
            err = fut.exception()
            if err is None:
                checkpoint.append(fut.result())
            else:
                checkpoint.fail(futures[fut], err)


def simulate(
    spec: GridSpec,
    out: Path,
    jobs: int = 1,
    show_progress: bool | None = None,
    command: str | None = None,
    scheduler: str | None = None,
    on_run: Callable[[dict], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run every run of ``spec`` not already in ``out``; return the finished table.

    Parameters
    ----------
    spec : the grid to run.
    out : CSV path; created, or resumed if it holds runs of the same spec.
    jobs : number of local worker processes (without ``scheduler``).
    show_progress : progress bar on stderr; default when stderr is a terminal.
    command : the command line recorded in the manifest.
    scheduler : run each run as a task on a Dask cluster instead: a scheduler address such
        as ``tcp://host:8786``, or ``local:N`` for a local cluster of N single-threaded
        processes (needs the ``distributed`` extra; see :mod:`fitrules.sim.cluster`).
    on_run : called with each finished run's row once it is in ``out``; an exception it
        raises stops the grid, with every finished run kept.
    log : called with a line of progress, at most every ``LOG_EVERY_S`` seconds and at the
        end, when no progress bar is shown (stderr not a terminal).

    Nothing is written when every run is already in ``out`` in spec order and the manifest
    beside it describes the same spec: rerunning a finished grid (``make grids`` after a
    fresh clone, whose file times say nothing) leaves the committed files as they are.

    Returns
    -------
    The table of every run of ``spec``, in spec order, as written to ``out``.

    Raises
    ------
    SimError
        If ``out`` holds something else, the scheduler cannot be used or its workers do not
        match this process, or some runs failed (named in the message; the runs that
        finished are in ``out``, and a rerun retries the others).

    Example
    -------
    >>> simulate(load_spec("data/specs/smoke.toml"), Path("smoke.csv"), scheduler="local:2")
    ... # doctest: +SKIP
    """
    out = Path(out)
    check_out(out, jobs)
    if scheduler is not None and jobs != 1:
        raise SimError(
            f"{param('jobs')} {jobs} with {param('scheduler')} {scheduler}: give one of them; on "
            "a cluster "
            "the workers' threads decide how many runs go at once"
        )
    target = None
    if scheduler is not None:
        from fitrules.sim import cluster

        target = cluster.parse_scheduler(scheduler)
    corpus = load_corpus()
    corpora = _corpora(spec)
    done = _existing(out, spec, corpora)
    todo = [cfg for cfg in spec.runs if run_key(cfg) not in done]
    if not todo and _finished(out, spec):
        return pd.read_csv(out)
    if todo:
        if isinstance(todo[0], GPTConfig):
            require_torch()  # one line now, not one failed run each
        check_memory(*_memory_estimate(todo, jobs, target, corpus.vocab_size))
    t0 = time.perf_counter()
    where = _run_todo(out, spec, done, todo, jobs, scheduler, show_progress, on_run, log, corpora)
    table = pd.DataFrame([done[run_key(cfg)] for cfg in spec.runs])
    atomic_write_text(out, table.to_csv(index=False))
    _write_manifest(out, spec, command, table, len(todo), where, t0)
    return table


def _corpus_record(spec: GridSpec, table: pd.DataFrame) -> dict:
    """What the manifest says of the corpus the runs read: ``corpus_sha256``, the sha256 of
    the one corpus every run read (None when they read none, as the quadratic's, or several);
    and for a gpt grid of several corpora ``corpora``, each ``corpus`` setting's sha256. A
    gpt run's is the one its row records, the text it trained on."""
    kind = _config_class(spec)
    if kind is QuadConfig:
        return {"corpus_sha256": None}
    if kind is not GPTConfig:
        return {"corpus_sha256": load_corpus().sha256}
    pairs = table[["corpus", "corpus_sha256"]].drop_duplicates().astype(str)
    corpora = dict(zip(pairs["corpus"], pairs["corpus_sha256"], strict=True))
    if len(corpora) == 1:
        return {"corpus_sha256": next(iter(corpora.values()))}
    return {"corpus_sha256": None, "corpora": dict(sorted(corpora.items()))}


def _memory_estimate(
    todo: list[RunConfig], jobs: int, target: int | str | None, vocab: int
) -> tuple[float, str, str]:
    """Bytes the runs need here at once, what they are and what to reduce (for
    :func:`~fitrules.base.limits.check_memory`): ``jobs`` processes' runs; under ``local:N``
    N worker processes, each :data:`~fitrules.sim.cluster.LOCAL_WORKER_BYTES` before it runs
    anything, holding up to N runs; a remote cluster's runs are counted as one process."""
    run_bytes = max(cfg.memory(vocab) for cfg in todo)
    if isinstance(target, int):
        from fitrules.sim.cluster import LOCAL_WORKER_BYTES

        return (
            target * LOCAL_WORKER_BYTES + min(target, len(todo)) * run_bytes,
            f"a local cluster of {target} worker process(es)",
            "use a smaller local:N or a smaller model",
        )
    at_once = 1 if target is not None else min(jobs, len(todo))
    return (
        at_once * run_bytes,
        f"{at_once} simulation process(es) at once",
        f"use fewer {param('jobs')} or a smaller model",
    )


def _run_todo(
    out: Path,
    spec: GridSpec,
    done: dict[str, dict],
    todo: list[RunConfig],
    jobs: int,
    scheduler: str | None,
    show_progress: bool | None,
    on_run: Callable[[dict], None] | None,
    log: Callable[[str], None] | None,
    corpora: dict[str, str],
) -> dict:
    """Run ``todo`` here, in a pool or on the cluster, each run checkpointed as it ends (a
    gpt run only if it read the version of its corpus in ``corpora``); where they ran, for
    the manifest."""
    # The manifest names where the runs ran: the local jobs, or the scheduler and its workers
    # with the runs each finished this time.
    where: dict = {"jobs": jobs} if scheduler is None else {"scheduler": scheduler, "workers": {}}
    with ExitStack() as stack:
        client = None
        if scheduler is not None and todo:
            from fitrules.sim import cluster

            client = stack.enter_context(cluster.connect(scheduler))
            workers = dict.fromkeys(cluster.check_workers(client), 0)
        checkpoint = stack.enter_context(
            _Checkpoint(out, spec, done, show_progress, on_run, log, corpora)
        )
        if client is not None:
            ran = cluster.run_grid(client, todo, checkpoint.append, checkpoint.fail)
            where["workers"] = dict(sorted({**workers, **ran}.items()))
        elif jobs == 1 or len(todo) <= 1:
            _run_here(todo, checkpoint)
        else:
            _run_pool(todo, jobs, checkpoint)
    if checkpoint.failed:
        raise checkpoint.error()
    return where


def _write_manifest(
    out: Path,
    spec: GridSpec,
    command: str | None,
    table: pd.DataFrame,
    n_todo: int,
    where: dict,
    t0: float,
) -> None:
    """Write the manifest beside ``out``: the spec, the command, the corpus the runs read,
    where and how long."""
    manifest = {
        "spec_name": spec.name,
        "spec_sha256": spec.sha256,
        "spec": spec.text,
        "command": command or " ".join(sys.argv),
        "fitrules_version": __version__,
        "git_commit": _git_commit(),
        **_corpus_record(spec, table),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": len(table),
        "runs_this_invocation": n_todo,
        **where,
        "wall_s_this_invocation": round(time.perf_counter() - t0, 1),
        "wall_s_per_run": [float(x) for x in table["wall_s"]],
    }
    atomic_write_text(manifest_path(out), json.dumps(manifest, indent=2) + "\n")
