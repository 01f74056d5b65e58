"""Worker processes that a stop ends at once: a process pool for the search's fits and the
simulations' runs, whose workers leave SIGINT and SIGTERM to the process that started them,
and which an interrupt (or any exception) kills instead of waiting for.

``ProcessPoolExecutor``'s own shutdown waits for every task already submitted, and its workers
inherit their parent's signal handlers: a search stopped by ``timeout`` (SIGTERM to the whole
process group) waited for its workers' chunks, and one such search never exited (one worker
read a pipe the stopped parent no longer fed, the other waited on the pipe's lock). Here the
workers ignore the signals a terminal or ``timeout`` sends the whole group, and (on Linux)
die with their parent whatever kills it; the parent, on a stop, kills them and reaps them,
without touching a queue or a lock the workers share (Python 3.14's ``kill_workers()`` does
the same).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager

from fitrules.base.outputs import held_signals

# the signals that stop a command: its parent handles them (Ctrl-C, SIGTERM); a worker ignores
# them. SIGHUP stays as it is: a closed terminal takes the workers with it, as it takes their
# parent.
_STOPS = {signal.SIGINT, signal.SIGTERM}
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
REAP_SECONDS = 5.0  # how long a killed worker is waited for (it dies at once, unless the
# system is stuck in its I/O)


def fork_context():
    """The start method of a pool: fork where there is one (a script without a ``__main__``
    guard, or a notebook, is not re-imported by the workers; spawn and forkserver would run it
    again)."""
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def _die_with_parent(parent: int) -> None:
    """Ask the kernel (Linux) to kill this process when its parent ends, however it ends: a
    parent killed with SIGKILL cannot stop its workers itself."""
    if not sys.platform.startswith("linux"):
        return
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the request was made
        os._exit(1)


def _start_worker(parent: int, initializer: Callable | None, initargs: tuple) -> None:
    """A worker's first call: the stop signals ignored (they were blocked since its fork, see
    :func:`submit_all`, so none arrived to the parent's handlers), death with the parent,
    then the pool's own initializer."""
    for sig in _STOPS:
        signal.signal(sig, signal.SIG_IGN)
    _die_with_parent(parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)  # a pending one is now dropped
    if initializer is not None:
        initializer(*initargs)


@contextmanager
def worker_pool(
    jobs: int, initializer: Callable | None = None, initargs: tuple = (), mp_context=None
) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``jobs`` workers (``initializer(*initargs)`` run in each),
    shut down as usual when the block ends, and killed at once (its tasks dropped, its workers
    killed and reaped) when an exception leaves it: Ctrl-C, SIGTERM (turned into an exception
    by the command line), an error in the caller's loop. Submit with :func:`submit_all`.

    Example
    -------
    >>> with worker_pool(2) as pool:  # doctest: +SKIP
    ...     sizes = [f.result() for f in submit_all(pool, abs, [-1, -2])]
    """
    pool = ProcessPoolExecutor(
        jobs, mp_context=mp_context, initializer=_start_worker,
        initargs=(os.getpid(), initializer, initargs),
    )  # fmt: skip
    try:
        yield pool
        pool.shutdown(wait=True)  # every task is done: the workers exit at once
    except BaseException:
        with held_signals():  # a second Ctrl-C does not cut the cleanup short
            kill_workers(pool)
        raise


def submit_all(pool: ProcessPoolExecutor, fn: Callable, items: Iterable) -> list[Future]:
    """``pool.submit(fn, item)`` for each item, with SIGINT and SIGTERM held back in this
    process and blocked in the workers it forks meanwhile (the first submission starts them):
    a handler run between a worker's start and its record in the pool would leave it unknown
    to :func:`kill_workers`, and a worker must not run its parent's handlers before it
    ignores them. A held signal acts when the submissions are done."""
    with held_signals():
        # blocked in this thread, which forks the workers: they start with the signals blocked
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            return [pool.submit(fn, item) for item in items]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: drop its tasks, kill its workers (SIGKILL: they hold no output) and
    reap them. Nothing here waits for a task, a queue or a lock a worker may hold."""
    # the executor keeps its processes (which Python 3.14's kill_workers() reads the same way)
    # and its result queue in private attributes; shutdown() forgets them, so they are read
    # first
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        try:
            p.kill()
        except (ProcessLookupError, ValueError, AttributeError):
            pass  # already gone
    for p in processes:
        try:
            p.join(REAP_SECONDS)
        except (ValueError, AssertionError):
            pass
    # A worker killed while it sent a result leaves half a message in the result pipe, and the
    # pool's manager thread (which the interpreter joins at exit) would wait for the rest for
    # ever; with this end of the pipe closed too, it reads the end of the file instead.
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()
    # That thread then closes its wake-up pipe and ends. The interpreter's exit hook writes to
    # the pipe unless it is closed already, unguarded (CPython 3.11): a close between its check
    # and its write ended a stopped search with "OSError: [Errno 9] Bad file descriptor" after
    # its one line. Waiting for the thread here leaves the hook nothing to race.
    if manager is not None:
        manager.join(REAP_SECONDS)
