"""Run a grid's runs as tasks on a Dask cluster: ``fitrules simulate --scheduler ADDRESS``.

Dask is optional (``pip install "fitrules[distributed]"``) and imported only when a scheduler
is asked for. Each run is one task; :func:`fitrules.sim.runner.simulate` appends each result
to the output as it arrives, exactly as with local processes, so the output stays the
checkpoint.

Faults:

- a task that raises is retried :data:`RETRIES` times (on any worker), then recorded as
  failed; the grid goes on, and ends with one error naming the failed runs;
- a worker that dies loses only the runs it had in flight, which the scheduler gives to
  other workers (or to the worker its nanny restarts);
- every worker must run the same fitrules version on the same corpus as the client: checked
  on connect (:func:`check_workers`) and again by each task, for workers that join later.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import signal
import socket
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from fitrules.base.errors import SimError, param
from fitrules.base.limits import MAX_SIM_JOBS
from fitrules.sim.corpus import load_corpus
from fitrules.sim.diloco import RunConfig, run
from fitrules.sim.tasks import execute, one_blas_thread, run_key

if TYPE_CHECKING:
    from distributed import Client

RETRIES = 2
"""Extra attempts for a task that raises, before its run is recorded as failed."""

CONNECT_TIMEOUT = 30
"""Seconds to wait for the scheduler, and then for its first worker."""

INSTALL = 'pip install "fitrules[distributed]"'


def _distributed():
    try:
        import distributed
    except ImportError:
        raise SimError(
            f"{param('scheduler')} needs Dask's distributed scheduler, which is not installed: "
            f"{INSTALL}"
        ) from None
    return distributed


SCHEMES = ("tcp", "tls", "ws", "wss", "inproc", "ucx")
"""The address schemes of Dask's comm backends (``distributed.comm.registry``)."""

DEFAULT_PORT = 8786
"""The port of an address that names none (Dask's scheduler port)."""

PROBE_TIMEOUT = 5
"""Seconds a TCP connection to a scheduler's host and port may take before it is refused:
Dask would retry for :data:`CONNECT_TIMEOUT` s before saying nothing answers."""

LOCAL_WORKER_BYTES = 100 * 2**20
"""Memory of one worker process of a local cluster besides its runs (the interpreter, numpy,
pandas, Dask, the corpus), measured by benchmarks/bench_cluster_memory.py: on a 2-core AMD
EPYC VM a worker's RSS is about 130 MiB, of which about 80 MiB are its own (USS), the rest the
shared libraries every process maps; elsewhere 18 processes held 1,291 MiB of RSS at
local:16, about 75 MiB each. 100 MiB keeps the estimate within 1.5x of both sums. The memory
check of ``local:N`` counts N of them, besides the runs they hold."""

# HOST[:PORT] or [IPV6][:PORT]
_HOST_PORT = re.compile(
    r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:/\[\]]+))(?::(?P<port>[0-9]+))?$"
)


def check_scheduler(scheduler: str) -> int | str:
    """The number of processes of ``local:N``, or the address of a running scheduler; the
    form only: Dask is not imported.

    Raises
    ------
    SimError
        If ``local:N`` has no whole N from 1 to :data:`~fitrules.base.limits.MAX_SIM_JOBS`,
        the text is empty, or an address is not ``[SCHEME://]HOST[:PORT]`` with a scheme of
        :data:`SCHEMES`.
    """
    if not isinstance(scheduler, str):
        raise SimError(f"{param('scheduler')} {scheduler!r}: must be text or None")
    if scheduler.startswith("local:"):
        n = scheduler.removeprefix("local:")
        if not (n.isascii() and n.isdigit()) or int(n) < 1:
            raise SimError(
                f"{param('scheduler')} {scheduler!r}: local:N needs a whole number of processes "
                "N >= 1, e.g. local:2"
            )
        if int(n) > MAX_SIM_JOBS:
            raise SimError(
                f"{param('scheduler')} {scheduler!r}: local:N starts N worker processes, N from "
                "1 to "
                f"{MAX_SIM_JOBS:,} (as {param('jobs')})"
            )
        return int(n)
    if not scheduler.strip():
        raise SimError(
            f"{param('scheduler')} '': expected a scheduler address such as tcp://host:8786, or "
            "local:N"
        )
    if _host_port(scheduler) is None:
        raise SimError(
            f"{param('scheduler')} {scheduler!r}: expected local:N (N from 1 to "
            f"{MAX_SIM_JOBS:,}) or a "
            f"scheduler address such as tcp://host:8786 (schemes: {', '.join(SCHEMES)})"
        )
    return scheduler


def _host_port(address: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an address of a known scheme (port None where the scheme
    names no TCP port: inproc, ucx), or None for an address Dask cannot dial."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme not in SCHEMES or not rest.isascii() or not rest.strip():
        return None
    if scheme in ("inproc", "ucx"):
        return scheme, rest, None
    m = _HOST_PORT.match(rest.rstrip("/"))
    if m is None:
        return None
    port = int(m["port"]) if m["port"] is not None else DEFAULT_PORT
    if not 1 <= port <= 65535:
        return None
    return scheme, m["v6"] or m["host"], port


def parse_scheduler(scheduler: str) -> int | str:
    """:func:`check_scheduler`, and Dask installed.

    Raises
    ------
    SimError
        As :func:`check_scheduler`, or if Dask is not installed.
    """
    target = check_scheduler(scheduler)
    _distributed()
    return target


def check_reachable(scheduler: str) -> None:
    """:func:`parse_scheduler`, and a scheduler's address refused at once when nothing
    answers there (``local:N`` starts its own: nothing to reach).

    Raises
    ------
    SimError
        As :func:`parse_scheduler`, or if nothing accepts a connection at the address within
        :data:`PROBE_TIMEOUT` seconds.
    """
    target = parse_scheduler(scheduler)
    if isinstance(target, str):
        _probe(scheduler, target)


def _probe(scheduler: str, address: str) -> None:
    """Refuse an address of a TCP scheme at which nothing accepts a connection within
    :data:`PROBE_TIMEOUT` seconds (a closed port answers at once; Dask would retry for
    :data:`CONNECT_TIMEOUT` s)."""
    found = _host_port(address)
    if found is None or found[2] is None:
        return
    _, host, port = found
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT).close()
    except TimeoutError:
        raise SimError(
            f"{param('scheduler')} {scheduler}: cannot connect: nothing answered at {host}:{port} "
            f"within {PROBE_TIMEOUT} s; is the scheduler running (dask scheduler)?"
        ) from None
    except OSError as err:
        why = err.strerror or " ".join(str(err).split()) or type(err).__name__
        raise SimError(
            f"{param('scheduler')} {scheduler}: cannot connect: nothing answers at {host}:{port} "
            f"({why}); is the scheduler running (dask scheduler)?"
        ) from None


def _dial_address(address: str) -> str:
    """``address`` as Dask dials it: a TCP address with its scheme and port written out (Dask
    refuses a host with no port, ``2.0`` or ``host``, with a raw ``ValueError``)."""
    found = _host_port(address)
    if found is None or found[2] is None:
        return address
    scheme, host, port = found
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def local_cluster(n_workers: int):
    """A ``distributed.LocalCluster`` of ``n_workers`` processes of one thread each.

    Its workers keep glibc's default memory allocation, as the processes of ``--jobs`` do.
    Dask's nanny otherwise sets ``MALLOC_TRIM_THRESHOLD_`` in each worker, which pins glibc's
    mmap threshold: every large numpy temporary of a run is then mapped and unmapped again,
    and the runs of ``data/specs/workers.toml`` take about twice as long.
    """
    distributed = _distributed()
    import dask

    with (
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}),
        _children_ignore_sigint(),
        warnings.catch_warnings(),
    ):
        # another cluster on the machine may hold Dask's default HTTP port: not our concern
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
        return distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # fitrules reports what matters (failed runs); Dask's own errors at shutdown
            # (a worker's heartbeat to a scheduler already gone) would follow Ctrl-C
            silence_logs=logging.CRITICAL,
        )


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Start processes that ignore SIGINT: Ctrl-C reaches the whole process group, and the
    cluster's nannies and workers would each print a traceback of KeyboardInterrupt while
    this process stops them anyway (a child inherits an ignored signal, even across exec).
    A Ctrl-C during the second the cluster takes to start is therefore lost; SIGTERM is not.
    Outside the main thread nothing can be changed, and nothing is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def connect(scheduler: str) -> Iterator[Client]:
    """A client of ``scheduler`` with at least one worker, closed on exit.

    ``scheduler`` is a running scheduler's address (``tcp://host:8786``) or ``local:N``: a
    ``LocalCluster`` of N processes of one thread each, started here and stopped on exit.
    """
    target = parse_scheduler(scheduler)
    distributed = _distributed()
    with ExitStack() as stack:
        if isinstance(target, int):
            cluster = stack.enter_context(local_cluster(target))
            address = cluster.scheduler_address
        else:
            _probe(scheduler, target)
            address = _dial_address(target)
        try:
            client = stack.enter_context(distributed.Client(address, timeout=CONNECT_TIMEOUT))
        except (OSError, TimeoutError) as err:
            raise SimError(
                f"{param('scheduler')} {scheduler}: cannot connect: {' '.join(str(err).split())}"
            ) from None
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        except TimeoutError:
            raise SimError(
                f"{param('scheduler')} {scheduler}: no worker joined within {CONNECT_TIMEOUT} s; "
                # flag words: dask's own option
                f"start some with: dask worker {address} --nthreads 1"
            ) from None
        yield client


def worker_identity() -> tuple[str, str]:
    """This process's fitrules version and corpus sha256, which client and workers share."""
    from fitrules import __version__

    return __version__, load_corpus().sha256


def match_workers(
    found: Mapping[str, tuple[str, str] | BaseException], expected: tuple[str, str]
) -> list[str]:
    """The worker addresses of ``found``, or an error naming each one that does not match.

    ``found`` maps worker addresses to their :func:`worker_identity`, or to the exception a
    worker raised computing it (no fitrules installed, no corpus file).
    """
    bad = []
    for address, identity in sorted(found.items()):
        if isinstance(identity, BaseException):
            error = " ".join(f"{type(identity).__name__}: {identity}".split())
            bad.append(f"{address} cannot load fitrules and its corpus ({error})")
        elif tuple(identity) != tuple(expected):
            their_version, their_sha = identity
            bad.append(f"{address} has fitrules {their_version} with corpus {their_sha[:12]}")
    if bad:
        version, sha = expected
        raise SimError(
            f"workers do not match this client (fitrules {version}, corpus sha256 "
            f"{sha[:12]}): {'; '.join(bad)}; install the same fitrules and data on every worker"
        )
    return sorted(found)


def check_workers(client: Client) -> list[str]:
    """Ask every worker for its :func:`worker_identity`; return their addresses.

    Raises
    ------
    SimError
        Naming every worker whose fitrules version or corpus differs from this process's.
    """
    found = client.run(worker_identity, on_error="return")
    return match_workers(found, worker_identity())


@functools.cache
def _one_blas_thread_here() -> None:
    one_blas_thread()


def _run_task(cfg: RunConfig, expected: tuple[str, str]) -> tuple[dict, str]:
    """One run on a worker: its row and the worker's address."""
    from distributed import get_worker

    address = get_worker().address
    found = worker_identity()
    if found != tuple(expected):  # a worker that joined after the check on connect
        match_workers({address: found}, expected)
    _one_blas_thread_here()
    return (run(cfg, load_corpus()) if isinstance(cfg, RunConfig) else execute(cfg)), address


def _task_key(cfg: RunConfig, invocation: str) -> str:
    # Named by the run and this invocation: a rerun right after a failure must not be handed
    # the failed task the scheduler may still hold for a moment.
    return f"fitrules-run-{hashlib.sha256(run_key(cfg).encode()).hexdigest()[:16]}-{invocation}"


def run_grid(
    client: Client,
    todo: Iterable[RunConfig],
    append: Callable[[dict], None],
    fail: Callable[[RunConfig, BaseException], None],
) -> dict[str, int]:
    """Run each of ``todo`` as a task; hand each row to ``append`` as it finishes.

    A run whose task still raises after :data:`RETRIES` retries, or is lost with its workers
    too often, goes to ``fail`` with its error. Returns the runs finished per worker.
    """
    distributed = _distributed()
    expected = worker_identity()
    invocation = uuid.uuid4().hex[:8]
    futures = {
        client.submit(
            _run_task, cfg, expected, key=_task_key(cfg, invocation), retries=RETRIES
        ): cfg
        for cfg in todo
    }
    per_worker: Counter[str] = Counter()
    results = distributed.as_completed(futures, with_results=True, raise_errors=False)
    for future, result in results:
        if future.status == "finished":
            row, address = result
            append(row)
            per_worker[address] += 1
        elif isinstance(result, BaseException):
            fail(futures[future], result)
        else:
            fail(futures[future], RuntimeError(f"task {future.key} ended {future.status}"))
    return dict(per_worker)
