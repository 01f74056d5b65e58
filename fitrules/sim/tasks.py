"""One run as a task, the same in a process pool and on a Dask worker: its key, its
execution by the backend its config belongs to, the one-BLAS-thread rule."""

from __future__ import annotations

import json
from dataclasses import asdict

from fitrules.sim import gpt, quadratic
from fitrules.sim.corpus import load_corpus
from fitrules.sim.diloco import RunConfig, run
from fitrules.sim.gpt import GPTConfig
from fitrules.sim.quadratic import QuadConfig


def run_key(cfg: RunConfig | QuadConfig | GPTConfig) -> str:
    return json.dumps(asdict(cfg), sort_keys=True)


def execute(cfg: RunConfig | QuadConfig | GPTConfig, corpus=None) -> dict:
    """One run's results row, by the backend its config belongs to."""
    if isinstance(cfg, QuadConfig):
        return quadratic.run(cfg)
    if isinstance(cfg, GPTConfig):
        return gpt.run(cfg)  # it reads its own corpus, and keeps torch to one thread
    return run(cfg, corpus if corpus is not None else load_corpus())


def one_blas_thread() -> None:
    """Limit this process to one BLAS thread: every process that trains runs calls it first."""
    # Small matrices: one BLAS thread per process is several times faster than many.
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
