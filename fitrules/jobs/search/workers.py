"""Where the search's fits run: in this process, a pool of processes or a Dask cluster, each
worker holding the search's state for the tasks it runs."""

from __future__ import annotations

from collections.abc import Sequence

from fitrules.base.processes import fork_context, submit_all, worker_pool

# what the workers read: the forms, cells, masks and settings, set once per process; changed in
# place only, since the tasks (staging) import this very dict
_STATE: dict = {}


def _set_state(state: dict) -> None:
    """A worker's initializer: one BLAS thread (the pool is the parallelism), then the state."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    _STATE.clear()
    _STATE.update(state)


def _check_reachable(scheduler: str) -> None:
    from fitrules.sim.cluster import check_reachable

    check_reachable(scheduler)


def _connect(scheduler: str):
    """A client of the Dask cluster ``scheduler`` (imported here: Dask is optional)."""
    from fitrules.sim.cluster import connect

    return connect(scheduler)


def _with_state(worker, state: dict, task: list[int]) -> list:
    """``worker(task)`` with the search's state set (a Dask task: the state is scattered to
    the workers once, and set per task, since a worker may run tasks of several searches)."""
    _set_state(state)
    return worker(task)


def _run(tasks: list[list[int]], worker, state: dict, jobs: int, on_done, client=None) -> list:
    """Run ``worker`` over index chunks, in this process (jobs 1), a pool, or on a Dask
    cluster (``client``), in order: the results do not depend on where they ran."""
    results: list = []
    if client is not None:
        from distributed import as_completed

        # one future for the whole state (a dict would be scattered value by value, under
        # its keys, which the next scatter of a search would replace)
        (shared,) = client.scatter([state], broadcast=True, hash=False)
        futures = [client.submit(_with_state, worker, shared, t, pure=False) for t in tasks]
        size = {f.key: len(t) for f, t in zip(futures, tasks, strict=True)}
        for f in as_completed(futures):
            on_done(size[f.key])
        for f in futures:
            results += f.result()
        return results
    if jobs <= 1:
        saved = dict(_STATE)  # a search run inside a callback of another keeps its state
        _STATE.clear()
        _STATE.update(state)
        try:
            for t in tasks:
                results += worker(t)
                on_done(len(t))
        finally:
            _STATE.clear()
            _STATE.update(saved)
        return results
    # a pool that a stop (Ctrl-C, SIGTERM, an error in on_done) kills at once: the executor's
    # own shutdown waited for the chunks in flight, and a search stopped by `timeout` never
    # exited (issue 61)
    with worker_pool(jobs, _set_state, (state,), fork_context()) as pool:
        futures = submit_all(pool, worker, tasks)
        for t, f in zip(tasks, futures, strict=True):
            results += f.result()
            on_done(len(t))
    return results


def _chunks(indices: Sequence[int], size: int) -> list[list[int]]:
    return [list(indices[a : a + size]) for a in range(0, len(indices), size)]
