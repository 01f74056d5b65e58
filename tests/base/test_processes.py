"""Worker pools a stop ends at once: an exception kills and reaps busy workers without waiting
for their tasks, and the workers leave SIGINT and SIGTERM to their parent."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

from fitrules.base.processes import submit_all, worker_pool

pytestmark = pytest.mark.timing  # "at once" is read off the wall clock, against minute tasks


def _nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _started(futures, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not all(f.running() for f in futures):
        assert time.monotonic() - t0 < timeout, "the tasks did not start"
        time.sleep(0.01)


def test_an_exception_in_the_block_kills_busy_workers_at_once():
    """An exception leaving the pool's block (as Ctrl-C's does) kills and reaps its two
    workers within 10 s, though each holds a task of a minute; the pending task never runs."""
    before = set(mp.active_children())
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), worker_pool(2) as pool:
        futures = submit_all(pool, _nap, [60, 60, 60])
        _started(futures[:2])
        workers = set(mp.active_children()) - before
        raise KeyboardInterrupt
    assert time.monotonic() - t0 < 10
    assert len(workers) == 2 and not any(p.is_alive() for p in workers)
    last = futures[2]  # never run: cancelled, or (already queued) failed with the pool
    assert last.cancelled() or last.exception(timeout=1) is not None


def test_workers_ignore_the_signals_their_parent_handles():
    """SIGTERM and SIGINT sent to the workers themselves (as `timeout` or Ctrl-C send them to
    the whole group) do not end them: their tasks finish and the pool ends as usual."""
    before = set(mp.active_children())
    with worker_pool(2) as pool:
        futures = submit_all(pool, _nap, [1.0, 1.0])
        _started(futures)
        for p in set(mp.active_children()) - before:
            os.kill(p.pid, signal.SIGTERM)
            os.kill(p.pid, signal.SIGINT)
        pids = {f.result(timeout=60) for f in futures}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_killed_pool_leaves_no_thread_for_the_exit_hook_to_race(monkeypatch):
    """When the block has been left, the pool's manager thread has ended: the interpreter's
    exit hook (``concurrent.futures.process._python_exit``) writes to that thread's wake-up
    pipe unless it is closed, and one that was being closed meanwhile made a search stopped
    by SIGTERM end with ``OSError: [Errno 9] Bad file descriptor`` after its one line (CI,
    2026-12-07). The manager thread is slowed here so that the race is certain."""
    import concurrent.futures.process as cfp

    slow_end = cfp._ExecutorManagerThread.terminate_broken

    def terminate_broken(self, cause):
        time.sleep(0.5)
        return slow_end(self, cause)

    monkeypatch.setattr(cfp._ExecutorManagerThread, "terminate_broken", terminate_broken)
    with pytest.raises(KeyboardInterrupt), worker_pool(2) as pool:
        futures = submit_all(pool, _nap, [60, 60])
        _started(futures)
        manager = pool._executor_manager_thread
        raise KeyboardInterrupt
    assert not manager.is_alive()
