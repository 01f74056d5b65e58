"""The transformer backend of ``fitrules simulate`` (``model = "gpt"``) beside the numpy twin.

    python benchmarks/bench_gpt.py            # the cell, the grid and the presets below
    python benchmarks/bench_gpt.py --only presets   # the programme's two models' step time
    python benchmarks/bench_gpt.py --only programme # the full grid spec's estimated cost
    python benchmarks/bench_gpt.py --quick    # tiny sizes: checks the script in seconds
    python benchmarks/bench_gpt.py --only cell --cell steps=256,batch=32 --gpt layers=4
    python benchmarks/bench_gpt.py --only grid --grid-H 1,4,16,64 --grid-seeds 0,1
    python benchmarks/bench_gpt.py --only shapes   # the GPT's step alone at three sizes
    python benchmarks/bench_gpt.py --shape layers=4,width=96,heads=4,context=128,batch=16,M=1
    python benchmarks/bench_gpt.py --run layers=2,width=64,heads=4,context=64,M=4,steps=1024

Needs the gpt extra (PyTorch, ``pip install "fitrules[gpt]"``) and, for the grid, Dask's
distributed (``pip install "fitrules[distributed]"``). Printed first: the machine (CPU model,
cores, memory) and the load average, since on a shared machine other processes slow every
time below.

1. One cell on both backends: the GPT (``model = "gpt"``, layers=2, width=64, heads=4,
   context=64) and the numpy MLP of fitrules.sim.diloco (``model = "mlp"``, its defaults:
   width 256, context 8), with the same M=4, H=16, keep=0.5, batch=16, steps=64, seed=0
   (``--cell``, ``--gpt``, ``--mlp``, each changing only the settings it names); the models
   differ in kind, so both parameter counts are printed. Per backend, on one thread:

   - step time: one inner step of all M workers at once (forward, backward, optimiser
     update), timed over the cell's steps after ``--warmup`` (5) of warm-up; the median and
     the fastest, and the median per worker. The outer step every H steps is not in it;
   - peak memory: the peak RSS (VmHWM) of a fresh Python process that makes the cell's
     whole run as a pool process does (one BLAS thread, ``fitrules.sim.tasks.execute``), and
     its peak after the imports (torch's, for the GPT); also the run's wall time (with
     torch's one-off set-up in a process, about 1 s) and loss. RSS, not tracemalloc, which
     sees only Python's allocations and none of torch's. The same process then times the
     steps, so this one never runs torch (part 2's pool processes are forks of it).

   Then the ratios gpt / mlp of the median step and of the peak RSS, measured in this run.

2. A small grid in two ways, from scratch into a temporary directory: a spec written there
   (``model = "gpt"``, the model above, M=4, batch=16, steps=128, H = [4, 16] x keep =
   [1.0, 0.5], seed 0: 4 runs; ``--grid``, ``--grid-H``, ``--grid-keep``, ``--grid-seeds``)
   is run by ``fitrules.sim.runner.simulate`` on ``--jobs`` (2) local processes, as
   ``fitrules simulate --jobs 2`` does, and on the Dask LocalCluster of as many
   single-threaded workers that ``--scheduler local:2`` starts
   (``fitrules.sim.cluster.local_cluster``; its start-up is timed apart, as in
   bench_cluster.py). Printed: both wall times (best of ``--repeat``), their ratios
   (LocalCluster / processes, with and without start-up), the runs' own time summed on each
   side (``wall_s``: every process sets torch up in its first run, and a cluster worker
   imports it there too, where the pool's processes are forks of one that has), and whether
   the two tables are identical (the same runs in the same order, the same losses, every
   column but the wall time equal).

3. The presets (``preset = "413k"`` and ``"915k"``, the programme's two models): the step
   time of one inner step of all M workers on the CPU, one thread (``--presets``: the
   settings besides the preset, M=4, batch=16; ``--preset-steps`` timed steps, 10, after
   ``--warmup``), with each preset's parameters on the corpus used (the shipped 37-character
   slice unless ``--presets`` names a corpus) and on a 65-character alphabet (Tiny
   Shakespeare's). ``--device`` (``""``) times the device path's step instead.

4. The programme's full grid (``data/specs/gpt_programme.toml``, not run here): its runs
   per preset, each preset's inner step timed on one thread (as in part 3, at the spec's M
   and batch), and the estimated cost: CPU core-hours (the step time x steps, summed over
   runs) and GPU-hours from the runs' training FLOPs at an assumed sustained rate
   (``GPU_FLOPS``, a guess: this machine has no GPU, so that number is no measurement).

``--shape`` times inner steps of the GPT alone at the given settings (``--steps`` timed
steps each; ``--only shapes``: the three sizes docs/tutorials/cluster.md quotes), and
``--run`` makes whole GPT runs (wall time and loss); given either, only they are done.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fitrules.base.errors import SimError  # noqa: E402
from fitrules.sim.corpus import load_corpus  # noqa: E402
from fitrules.sim.diloco import RunConfig  # noqa: E402
from fitrules.sim.gpt import PRESETS, GPTConfig, require_torch  # noqa: E402
from fitrules.sim.tasks import execute, one_blas_thread  # noqa: E402

# the settings of the cell both backends share, the GPT's model, the MLP's (empty: its
# defaults), and the grid's fixed settings besides the GPT's model; QUICK: --quick's changes
SIZES = {
    "cell": "M=4,H=16,keep=0.5,batch=16,steps=64,seed=0",
    "gpt": "layers=2,width=64,heads=4,context=64",
    "mlp": "",
    "grid": "M=4,batch=16,steps=128",
    "grid_H": "4,16",
    "grid_keep": "1.0,0.5",
    "grid_seeds": "0",
    "presets": "M=4,batch=16",
}
QUICK = SIZES | {
    "cell": "M=2,H=4,keep=0.5,batch=4,steps=12",
    "gpt": "layers=1,width=16,heads=2,context=16",
    "grid": "M=2,batch=4,steps=8",
    "presets": "M=1,batch=2",
}
# the sizes docs/tutorials/cluster.md quotes (layers=4, width=96: about 0.4M parameters)
DEFAULT_SHAPES = [
    "layers=4,width=96,heads=4,context=128,batch=16,M=1",
    "layers=2,width=64,heads=4,context=64,batch=16,M=1",
    "layers=2,width=64,heads=4,context=64,batch=16,M=4",
]


def machine() -> str:
    """CPU model, cores, memory, load average and versions, in one line."""
    cpu = platform.processor() or platform.machine()
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    try:
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError):
        memory = "memory unknown"
    import torch

    versions = f"Python {platform.python_version()}, numpy {np.__version__}"
    versions += f", torch {torch.__version__}"
    try:
        import distributed

        versions += f", dask/distributed {distributed.__version__}"
    except ImportError:
        pass
    return f"machine: {cpu}, {os.cpu_count()} cores, {memory}; {load()}; {versions}"


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1, 5, 15 min)"


def settings(text: str) -> dict:
    """``key=value,...`` as a dict; numbers as int or float, other values as text."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep:
            raise SimError(f"{part!r}: expected key=value")
        try:
            out[key.strip()] = float(raw) if any(c in raw for c in ".eE") else int(raw)
        except ValueError:
            out[key.strip()] = raw.strip()
    return out


def shown(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def levels(text: str) -> list:
    """``a,b,...`` as a list of numbers (a factor's levels)."""
    return [settings(f"x={x}")["x"] for x in text.split(",") if x.strip()]


def make(cls: type, values: dict):
    """A validated config of ``cls``; a setting it does not have is refused in one line."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise SimError(f"{cls.__name__} has no setting(s) {', '.join(unknown)}")
    return cls(**values).validate()


# ---- 1. step time and peak memory of one cell on both backends ------------------------------


def gpt_step_times(cfg: GPTConfig, warmup: int) -> np.ndarray:
    """Seconds of each inner step of ``cfg``'s run after ``warmup`` steps: the forward and
    backward pass of every worker's copy at once and the AdamW update, as gpt.train does."""
    torch = require_torch()
    from fitrules.sim.gpt import _batches, _Workers, losses

    torch.set_num_threads(1)
    corpus = cfg.text()
    shape = cfg.shape(corpus.vocab_size)
    run = _Workers(cfg, shape)  # the run's parameters, AdamW and device, as gpt.train's
    times = []
    for t, (x, y) in enumerate(_batches(corpus, cfg)):
        t0 = time.perf_counter()
        run.inner_step(t, losses(run.params, run.tensor(x), run.tensor(y), shape).sum())
        if cfg.device == "cuda":
            torch.cuda.synchronize()
        if t >= warmup:
            times.append(time.perf_counter() - t0)
    return np.array(times)


def mlp_step_times(cfg: RunConfig, warmup: int) -> np.ndarray:
    """Seconds of each inner step of ``cfg``'s run after ``warmup`` steps: the loss and
    gradient of every worker's copy at once and the optimiser update, as diloco.train does."""
    from fitrules.sim.diloco import _Adam, _batches
    from fitrules.sim.model import init_params, loss_and_grad

    corpus = load_corpus()
    shape = cfg.shape(corpus.vocab_size)
    workers = np.tile(init_params(shape, np.random.default_rng([cfg.seed, 0])), (cfg.M, 1))
    grad = np.empty_like(workers)
    opt = _Adam(cfg.inner_opt, cfg.lr, cfg.weight_decay, workers.shape)
    times = []
    for t, (x, y) in enumerate(_batches(corpus, cfg)):
        t0 = time.perf_counter()
        loss_and_grad(workers, x, y, shape, grad)
        opt.step(workers, grad)
        if t >= warmup:
            times.append(time.perf_counter() - t0)
    return np.array(times)


def peak_kib() -> int:
    """This process's peak RSS since exec (VmHWM), in KiB. Not ru_maxrss, its own or the
    parent's RUSAGE_CHILDREN: on Linux it keeps the RSS a child had before exec, as a fork of
    its parent (400 MiB measured beside torch where the child's own peak was 11)."""
    try:
        with open("/proc/self/status") as fh:
            return int(re.search(r"VmHWM:\s*(\d+) kB", fh.read()).group(1))
    except (OSError, AttributeError):  # not Linux: the peak since fork, a bound from above
        ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return ru // 1024 if sys.platform == "darwin" else ru


def child(model: str, values: str, warmup: int) -> None:
    """In a fresh process: one whole run of the cell, as a pool process makes it (one BLAS
    thread, ``execute``), its memory measured; then its inner steps timed. Prints JSON."""
    one_blas_thread()
    if model == "gpt":
        require_torch()  # torch's own memory is part of every gpt run: counted as imports
    cfg = (GPTConfig if model == "gpt" else RunConfig)(**json.loads(values))
    imports = peak_kib()
    row = execute(cfg)
    peak = peak_kib()  # before the timing loop, which holds a run's arrays again
    times = (gpt_step_times if model == "gpt" else mlp_step_times)(cfg, warmup)
    print(json.dumps({"imports_kib": imports, "peak_kib": peak, "wall_s": row["wall_s"],
                      "loss": row["loss"], "times": times.tolist()}))  # fmt: skip


def fresh_process(model: str, cfg, warmup: int) -> dict:
    """:func:`child` in a fresh Python process. Both backends are measured so, never here:
    part 2's pool processes are forks of this one, and a fork of a process that has run torch
    would skip the set-up that the processes of ``fitrules simulate --jobs`` pay in their first
    run (about 1 s: torch.optim's first AdamW imports torch._dynamo)."""
    values = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name != "model"}
    argv = [sys.executable, __file__, "--child", model, json.dumps(values), str(warmup)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SimError(f"the {model} run's process failed: {last}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {**out, "times": np.array(out["times"])}


def bench_cell(args) -> None:
    cell = settings(args.cell)
    gpt_cfg = make(GPTConfig, {**cell, **settings(args.gpt)})
    mlp_cfg = make(RunConfig, {**cell, **settings(args.mlp)})
    if min(gpt_cfg.steps, mlp_cfg.steps) <= args.warmup:
        raise SimError(f"steps={gpt_cfg.steps} leaves no step to time after --warmup {args.warmup}")
    print(f"\n1. one cell on both backends, one thread each: {shown(cell)}")
    print(f"   gpt: layers={gpt_cfg.layers}, width={gpt_cfg.width}, heads={gpt_cfg.heads}, "
          f"context={gpt_cfg.context}, lr={gpt_cfg.lr:g}: "
          f"{gpt_cfg.shape().n_params:,} parameters")  # fmt: skip
    print(f"   mlp: width={mlp_cfg.width}, embed={mlp_cfg.embed}, context={mlp_cfg.context}, "
          f"lr={mlp_cfg.lr:g}: {mlp_cfg.shape(load_corpus().vocab_size).n_params:,} "
          "parameters")  # fmt: skip
    print(f"   step ms: one inner step of all {gpt_cfg.M} workers at once (forward, backward, "
          f"optimiser update), median and fastest of {gpt_cfg.steps - args.warmup} after "
          f"{args.warmup} of warm-up; per worker: the median / M. Run s, loss, peak RSS: the "
          "whole run in a fresh process (which then times the steps); after imports: its peak "
          "before the run")  # fmt: skip
    rows = {name: {**fresh_process(name, cfg, args.warmup), "M": cfg.M}
            for name, cfg in (("mlp", mlp_cfg), ("gpt", gpt_cfg))}  # fmt: skip
    head = (f"   {'backend':<7} {'step ms':>8} {'fastest':>8} {'per worker':>10} "
            f"{'run s':>7} {'loss':>7} {'peak RSS MiB':>12} {'after imports':>13}")  # fmt: skip
    print(head)
    for name in ("gpt", "mlp"):
        r = rows[name]
        med = float(np.median(r["times"]))
        print(f"   {name:<7} {1e3 * med:8.2f} {1e3 * r['times'].min():8.2f} "
              f"{1e3 * med / r['M']:10.2f} {r['wall_s']:7.2f} "
              f"{r['loss']:7.4f} {r['peak_kib'] / 1024:12.0f} "
              f"{r['imports_kib'] / 1024:13.0f}")  # fmt: skip
    step = np.median(rows["gpt"]["times"]) / np.median(rows["mlp"]["times"])
    peak = rows["gpt"]["peak_kib"] / rows["mlp"]["peak_kib"]
    grown = {k: r["peak_kib"] - r["imports_kib"] for k, r in rows.items()}
    above = f"{grown['gpt'] / grown['mlp']:.1f}x" if grown["mlp"] > 0 else "n/a"
    print(f"   gpt / mlp: step time {step:.1f}x, peak memory {peak:.1f}x ({above} above the "
          "imports)")  # fmt: skip


# ---- 2. a small grid on local processes and on a LocalCluster --------------------------------


def grid_spec_text(args) -> str:
    fixed = {**settings(args.grid), **settings(args.gpt)}
    seeds = ", ".join(str(s) for s in levels(args.grid_seeds))
    lines = ['name = "bench-gpt"', 'model = "gpt"', f"seeds = [{seeds}]", "[fixed]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in fixed.items()]
    lines += ["[[block]]", "[block.factors]",
              f"H = {json.dumps(levels(args.grid_H))}",
              f"keep = {json.dumps(levels(args.grid_keep))}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def bench_grid(args) -> None:
    from bench_cluster import pool_and_cluster, print_overhead  # as bench_cluster.py's

    from fitrules.sim.cluster import _distributed
    from fitrules.sim.spec import load_spec

    _distributed()  # one line now if Dask's distributed is missing
    with tempfile.TemporaryDirectory(prefix="fitrules-bench-gpt-") as tmp:
        path = Path(tmp) / "bench-gpt.toml"
        path.write_text(grid_spec_text(args))
        spec = load_spec(path)
        fixed = shown({**settings(args.gpt), **settings(args.grid)})
        print(f"\n2. grid {spec.name!r}, model = \"gpt\", {fixed}; "
              f"H = {levels(args.grid_H)} x keep = {levels(args.grid_keep)}, seeds "
              f"{levels(args.grid_seeds)}: {len(spec.runs)} runs; best of {args.repeat}; "
              f"{load()}")  # fmt: skip
        # fresh outputs each round: both sides run every run from scratch
        best_pool, start, grid, pool_t, dask_t = pool_and_cluster(
            spec, Path(tmp), args.jobs, args.repeat
        )
    print_overhead(args.jobs, best_pool, start, grid, pool_t, dask_t, "   ")
    print(f"   tables identical: {same_tables(pool_t, dask_t)}")


def same_tables(a, b) -> str:
    """Yes with what was compared, or NO and what differs (the wall time aside)."""
    if len(a) != len(b) or list(a.columns) != list(b.columns):
        return f"NO ({len(a)} and {len(b)} rows; columns {list(a.columns)} and {list(b.columns)})"
    keys = [c for c in a.columns if c in {f.name for f in fields(GPTConfig)}]
    if not a[keys].equals(b[keys]):
        return "NO (the runs differ, or come in another order)"
    rel = np.abs(a["loss"].to_numpy() / b["loss"].to_numpy() - 1)
    cols = [c for c in a.columns if c != "wall_s" and not a[c].equals(b[c])]
    if cols:
        return (f"NO (columns differ: {', '.join(cols)}; largest relative loss difference "
                f"{np.nanmax(rel):.1e})")  # fmt: skip
    return f"yes ({len(a)} runs in the same order, equal losses and every other column but wall_s)"


# ---- the GPT's step time at given shapes, and whole runs ------------------------------------


def bench_shapes(args) -> None:
    for text in args.shape or (DEFAULT_SHAPES if args.only == "shapes" else []):
        cfg = make(GPTConfig, {**settings(text), "steps": args.steps + args.warmup})
        times = gpt_step_times(cfg, args.warmup)
        med = float(np.median(times))
        print(f"{text}: {cfg.shape().n_params:,} parameters; one inner step of {cfg.M} worker(s) "
              f"{1e3 * med:.1f} ms median ({1e3 * times.min():.1f} fastest), "
              f"{1e3 * med / cfg.M:.1f} ms per worker")  # fmt: skip
    from fitrules.sim.gpt import run

    for text in args.run:
        row = run(make(GPTConfig, settings(text)))
        print(f"run {text}: {row['wall_s']:.1f} s, loss {row['loss']:.4f} nats/char, "
              f"{row['n_params']:,} parameters, {row['tokens']:,} tokens")  # fmt: skip


# ---- 3. the presets' step time on the CPU ---------------------------------------------------


def bench_presets(args) -> None:
    base = {**settings(args.presets), "steps": args.preset_steps + args.warmup}
    if args.device:
        base["device"] = args.device
    print(f"\n3. the presets' inner step on one thread: {shown(base)}; the median and fastest "
          f"of {args.preset_steps} steps after {args.warmup} of warm-up")  # fmt: skip
    for name, sizes in PRESETS.items():
        cfg = make(GPTConfig, {**base, **sizes, "preset": name})
        times = gpt_step_times(cfg, args.warmup)
        med = float(np.median(times))
        print(f"   preset {name} ({shown(sizes)}): {cfg.shape().n_params:,} parameters here, "
              f"{cfg.shape(65).n_params:,} on 65 characters; one inner step of {cfg.M} "
              f"worker(s) {1e3 * med:.1f} ms median ({1e3 * times.min():.1f} fastest), "
              f"{1e3 * med / cfg.M:.1f} ms per worker")  # fmt: skip


# ---- 4. the programme's full grid: its cost, estimated ----------------------------------------

PROGRAMME = ROOT / "data" / "specs" / "gpt_programme.toml"
GPU_FLOPS = 5e12  # an assumed sustained rate (no GPU measured here): a guess for small models


def run_flops(cfg: GPTConfig, vocab: int = 65) -> float:
    """Training FLOPs of one run: 6 per parameter per token (forward and backward), plus
    attention's scores and mixing (2 x 2 x context^2 x width a sequence and layer, x3)."""
    tokens = cfg.steps * cfg.M * cfg.batch * cfg.context
    attention = 12 * cfg.layers * cfg.context * cfg.width * tokens
    return 6.0 * cfg.shape(vocab).n_params * tokens + attention


def bench_programme(args) -> None:
    from fitrules.sim.spec import load_spec

    spec = load_spec(PROGRAMME)
    configs = list(spec.runs)  # GPTConfig each, validated by load_spec
    print(f"\n4. the programme's full grid (data/specs/{PROGRAMME.name}): {len(configs)} runs; "
          f"CPU from each preset's inner step timed here on one thread ({args.preset_steps} "
          f"steps after {args.warmup}); GPU from FLOPs at an assumed {GPU_FLOPS / 1e12:g} "
          "TFLOP/s sustained (not measured: no GPU here)")  # fmt: skip
    total_cpu = total_gpu = 0.0
    for name in PRESETS:
        mine = [c for c in configs if c.preset == name]
        steps = args.preset_steps + args.warmup
        probe = make(GPTConfig, {**_probe_settings(mine[0]), "steps": steps})
        step = float(np.median(gpt_step_times(probe, args.warmup)))
        cpu = sum(step * c.steps * c.M / probe.M for c in mine)
        gpu = sum(run_flops(c) for c in mine) / GPU_FLOPS
        total_cpu, total_gpu = total_cpu + cpu, total_gpu + gpu
        print(f"   preset {name}: {len(mine)} runs of {mine[0].steps:,} steps; inner step "
              f"{1e3 * step:.0f} ms (M={probe.M}); CPU {cpu / 3600:,.1f} core-hours; "
              f"{run_flops(mine[0]):.3g} FLOPs a run, GPU {gpu / 3600:,.2f} GPU-hours")  # fmt: skip
    print(f"   in all: CPU {total_cpu / 3600:,.1f} core-hours ({total_cpu / 3600 / 2:,.1f} h on 2 "
          f"cores); GPU {total_gpu / 3600:,.2f} GPU-hours at the assumed rate, a lower bound (a "
          "model this small rarely keeps a GPU busy)")  # fmt: skip


def _probe_settings(cfg: GPTConfig) -> dict:
    """The settings of ``cfg`` a step's time depends on (its run length left out)."""
    keep = ("M", "batch", "layers", "width", "heads", "context", "tied", "preset", "device",
            "decay_on", "weight_decay", "sampling")  # fmt: skip
    return {k: getattr(cfg, k) for k in keep}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script")
    parts = ("cell", "grid", "shapes", "presets", "programme")
    parser.add_argument("--only", choices=parts, help="one part only (shapes: see --shape)")
    # --cell, --gpt, --mlp and --grid change only the settings they name
    parser.add_argument("--cell", help=f"settings both backends share ({SIZES['cell']})")
    parser.add_argument("--gpt", help=f"the GPT's model, cell and grid ({SIZES['gpt']})")
    parser.add_argument("--mlp", help="the MLP's model settings (its defaults)")
    parser.add_argument("--warmup", type=int, default=5, help="steps not timed (5)")
    parser.add_argument("--grid", help=f"the grid's fixed settings ({SIZES['grid']})")
    parser.add_argument("--grid-H", help=f"the grid's levels of H ({SIZES['grid_H']})")
    parser.add_argument("--grid-keep", help=f"levels of keep ({SIZES['grid_keep']})")
    parser.add_argument("--grid-seeds", help=f"the grid's seeds ({SIZES['grid_seeds']})")
    parser.add_argument("--jobs", type=int, default=2, help="processes on each side (2)")
    parser.add_argument("--repeat", type=int, default=1, help="grid rounds; the best kept (1)")
    parser.add_argument("--shape", action="append", help="GPT settings to time steps of")
    parser.add_argument("--steps", type=int, default=40, help="steps timed per --shape (40)")
    parser.add_argument("--run", action="append", default=[], help="GPT settings of a run")
    parser.add_argument("--presets", help=f"the presets' other settings ({SIZES['presets']})")
    parser.add_argument("--preset-steps", type=int, default=10, help="steps timed a preset (10)")
    parser.add_argument("--device", default="", help='the presets\' device ("": numpy path)')
    args = parser.parse_args()
    for key, base in (QUICK if args.quick else SIZES).items():
        given = getattr(args, key)
        # settings given change the defaults' (a later key=value wins); levels replace them
        merge = key in ("cell", "gpt", "mlp", "grid", "presets") and given is not None
        setattr(args, key, f"{base},{given}" if merge else base if given is None else given)
    sys.stdout.reconfigure(line_buffering=True)  # each line as it comes, into a file too
    try:
        if args.repeat < 1 or args.warmup < 0:
            raise SimError(f"--repeat {args.repeat}, --warmup {args.warmup}: need >= 1, >= 0")
        require_torch()  # one line, naming the extra, before anything is printed
        print(machine(), flush=True)
        one_blas_thread()  # numpy on one thread, as every process that trains runs
        if args.shape or args.run or args.only == "shapes":
            bench_shapes(args)
            return
        if args.only in (None, "cell"):
            bench_cell(args)
        if args.only in (None, "grid"):
            bench_grid(args)
        if args.only in (None, "presets"):
            bench_presets(args)
        if args.only in (None, "programme"):
            bench_programme(args)
    except SimError as err:
        sys.exit(f"bench_gpt.py: {err}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # fresh_process's child
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
