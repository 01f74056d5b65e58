"""Time the transformer backend of ``fitrules simulate`` (``model = "gpt"``) on one core.

    python benchmarks/bench_gpt_step.py         # the sizes docs/tutorials/cluster.md quotes
    python benchmarks/bench_gpt_step.py --shape layers=4,width=96,heads=4,context=128,batch=16,M=1
    python benchmarks/bench_gpt_step.py --run layers=2,width=64,heads=4,context=64,M=4,steps=1024

Needs the gpt extra (PyTorch). One inner step is what each step of a run does: the forward
and backward pass of every worker's copy at once (fitrules.sim.gpt.losses over the batched
(M, P) parameters) and the AdamW update, with torch on one thread, timed over ``--steps``
steps after 5 of warm-up; printed per shape: the parameters, the median and fastest step of
all M workers and per worker. ``--run`` makes whole runs (fitrules.sim.gpt.run) and prints
each one's wall time and loss. The load average is printed first: on a shared machine other
processes slow every number.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

# layers=4, width=96: about 0.4M parameters; the second: the model of the proposed grid
DEFAULT_SHAPES = [
    "layers=4,width=96,heads=4,context=128,batch=16,M=1",
    "layers=2,width=64,heads=4,context=64,batch=16,M=1",
    "layers=2,width=64,heads=4,context=64,batch=16,M=4",
]


def _config(text: str):
    from fitrules.sim.gpt import GPTConfig

    values = {}
    for part in text.split(","):
        key, raw = part.split("=")
        values[key] = float(raw) if any(c in raw for c in ".e") else int(raw)
    return GPTConfig(**values).validate()


def time_steps(cfg, steps: int) -> tuple[int, np.ndarray]:
    """The parameter count and the seconds of each inner step after 5 of warm-up."""
    import torch

    from fitrules.sim.gpt import _batches, init_params, losses

    torch.set_num_threads(1)
    corpus = cfg.text()
    shape = cfg.shape()
    workers = np.tile(init_params(shape, np.random.default_rng(0)), (cfg.M, 1))
    params = torch.from_numpy(workers).requires_grad_()
    opt = torch.optim.AdamW([params], lr=cfg.lr)
    times = []
    for t, (x, y) in enumerate(_batches(corpus, cfg)):
        if t == steps + 5:
            break
        t0 = time.perf_counter()
        loss = losses(params, torch.from_numpy(x), torch.from_numpy(y), shape).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if t >= 5:
            times.append(time.perf_counter() - t0)
    return shape.n_params, np.array(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", action="append", help="settings of a run to time steps of")
    parser.add_argument("--steps", type=int, default=40, help="steps timed per shape")
    parser.add_argument("--run", action="append", default=[], help="settings of a whole run")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for text in args.shape or ([] if args.run else DEFAULT_SHAPES):
        cfg = _config(f"{text},steps={args.steps + 5}")
        n_params, times = time_steps(cfg, args.steps)
        med = float(np.median(times))
        print(f"{text}: {n_params:,} parameters; one inner step of {cfg.M} worker(s) "
              f"{1e3 * med:.1f} ms median ({1e3 * times.min():.1f} fastest), "
              f"{1e3 * med / cfg.M:.1f} ms per worker")  # fmt: skip
    from fitrules.sim.gpt import run

    for text in args.run:
        row = run(_config(text))
        print(f"run {text}: {row['wall_s']:.1f} s, loss {row['loss']:.4f} nats/char, "
              f"{row['n_params']:,} parameters, {row['tokens']:,} tokens")  # fmt: skip


if __name__ == "__main__":
    main()
