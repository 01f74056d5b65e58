"""DiLoCo on a small character-level decoder-only transformer, trained with PyTorch.

The third backend of ``fitrules simulate`` (``model = "gpt"``), beside the numpy MLP of
:mod:`fitrules.sim.diloco` and the noisy quadratic: the same rounds (M workers start from
the global model, take H inner AdamW steps each on its own shard, their deltas are
compressed, attacked, aggregated, and an outer SGD step with Nesterov momentum moves the
global model), the synchronous data-parallel baseline (``algo = "sync"``), on a GPT: token
and learned position embeddings, pre-LayerNorm blocks of causal multi-head attention and a
4x GELU MLP, a final LayerNorm and a linear head over the corpus's characters.

The M copies of the model live in one float32 array of shape (M, P), as in
:mod:`fitrules.sim.model`: each named tensor is a view with a leading worker axis, the
forward pass is batched over workers, and one AdamW over the array is M independent AdamWs
whose state each worker keeps across rounds. With ``device = ""`` (the default, the committed
grids') the array is numpy's and torch's on one memory, and compression, attacks and
aggregation are numpy's (:mod:`fitrules.sim.common`); with ``device = "cpu"`` or ``"cuda"``
all of it is torch tensors on that device (:mod:`fitrules.sim.tensors`), the same numbers on
the CPU.

The programme's settings are options whose defaults keep the behaviour before them: i.i.d.
windows per worker (``sampling``), warm-up and cosine decay of the inner lr, weight decay on
the weight matrices only (``decay_on``), tied embeddings and the two model sizes
(:data:`PRESETS`). A corpus file (``corpus``) takes Tiny Shakespeare when the user has it.

Random streams are keyed by the seed alone (initialisation, data order, masks, all numpy's),
so runs pair by seed as the MLP's do. PyTorch is an optional extra, imported only here and
only when a run is checked or made: ``pip install "fitrules[gpt]"``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fitrules.base.errors import SimError
from fitrules.base.limits import MAX_SEED
from fitrules.sim import common
from fitrules.sim.corpus import Corpus, CorpusFacts, corpus_facts, load_corpus, read_text_corpus
from fitrules.sim.diloco import ALGOS

NEEDS_TORCH = 'model = "gpt" needs PyTorch: pip install "fitrules[gpt]"'
GPT_INT_LIMITS = {  # largest value of each integer setting of a transformer run
    "M": 1_024,
    "H": 1_000_000,
    "layers": 64,
    "width": 8_192,
    "heads": 256,
    "context": 4_096,
    "batch": 16_384,
    "steps": 1_000_000,
    "eval_windows": 1_000_000,
}
EVAL_CHUNK = 64  # validation windows per forward pass
# resident memory torch adds to the process that runs a gpt run, besides the run's arrays:
# 182 MiB on import and 91 MiB at the first steps of the tiniest run (a 2-core AMD EPYC VM,
# torch 2.13 CPU); rounded up
TORCH_BYTES = 300 * 2**20
SAMPLINGS = ("shards", "iid")
SCHEDULES = ("constant", "cosine")
DECAY_ON = ("all", "matrices")
DEVICES = ("", "cpu", "cuda")
# the programme's two model sizes (tied embeddings, context 64, heads of width 32). On a
# 65-character alphabet (Tiny Shakespeare's) a block of width D has 12 D^2 + 13 D parameters
# (LayerNorms 4 D, attention 4 D^2 + 4 D, MLP 8 D^2 + 5 D), and the rest is the token
# embedding (65 D, also the head), the position embedding (64 D) and the final LayerNorm (2 D):
# D = 128: 2 x 198,272 + 8,320 + 8,192 + 256 = 413,312; D = 192: 2 x 444,864 + 12,480 +
# 12,288 + 384 = 914,880. On the shipped 37-character slice: 409,728 and 909,504.
PRESETS = {
    "413k": {"layers": 2, "width": 128, "heads": 4, "context": 64, "tied": True},
    "915k": {"layers": 2, "width": 192, "heads": 6, "context": 64, "tied": True},
}
PRESET_SETTINGS = ("layers", "width", "heads", "context", "tied")


@dataclass(frozen=True)
class GPTConfig:
    """One transformer run. Every field but ``model`` is a factor a spec may vary."""

    model: str = "gpt"
    algo: str = "diloco"
    M: int = 4
    H: int = 16
    keep: float = 1.0
    compressor: str = "randk"
    masks: str = "independent"
    aggregator: str = "mean"
    trim: float = 0.25
    attackers: int = 0
    attack: str = "signflip"
    attack_scale: float = 1.0
    attack_mode: str = "independent"
    lr: float = 1e-3
    weight_decay: float = 0.0
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    nesterov: bool = True
    layers: int = 2
    width: int = 64
    heads: int = 4
    context: int = 64
    batch: int = 16
    steps: int = 512
    eval_windows: int = 256
    corpus: str = ""
    seed: int = 0
    sampling: str = "shards"
    warmup: int = 0
    schedule: str = "constant"
    min_lr_fraction: float = 0.1
    decay_on: str = "all"
    tied: bool = False
    preset: str = ""
    device: str = ""

    # settings added after the first gpt tables were committed: a table without their
    # columns was made at their defaults, the behaviour before them (the runner reads it so)
    ADDED_SETTINGS: ClassVar[tuple[str, ...]] = (
        "sampling", "warmup", "schedule", "min_lr_fraction", "decay_on", "tied", "preset",
        "device",
    )  # fmt: skip

    @classmethod
    def with_preset(cls, values: dict) -> dict:
        """``values`` with the model sizes of the preset they name (:data:`PRESETS`) for
        those they do not give; a size given that differs is refused by :meth:`validate`."""
        preset = values.get("preset")
        return {**PRESETS.get(preset, {}), **values} if isinstance(preset, str) else values

    def validate(self) -> GPTConfig:
        """Return self, or raise :class:`SimError` naming the bad field and what is allowed."""
        choices = {"model": ("gpt",), "algo": ALGOS, **common.CHOICES,
                   "attack": common.ATTACKS, "attack_mode": common.ATTACK_MODES,
                   "sampling": SAMPLINGS, "schedule": SCHEDULES, "decay_on": DECAY_ON,
                   "preset": ("", *PRESETS), "device": DEVICES}  # fmt: skip
        common.check_settings(self, choices)
        common.check_limits(self, GPT_INT_LIMITS)
        self._check_preset()
        self._check_schedule()
        if self.width % self.heads:
            raise SimError(f"heads={self.heads} must divide width={self.width}")
        if not 0 <= self.seed <= MAX_SEED:
            raise SimError(f"seed={self.seed} must be from 0 to 2**63 - 1")
        if not 0 < self.keep <= 1:
            raise SimError(f"keep={self.keep} is outside (0, 1]")
        for name in ("lr", "outer_lr"):
            if not 0 < getattr(self, name) <= 1e6:
                raise SimError(f"{name}={getattr(self, name)} is outside (0, 1e6]")
        if not 0 <= self.weight_decay <= 1e6:
            raise SimError(f"weight_decay={self.weight_decay} is outside [0, 1e6]")
        if not 0 <= self.outer_momentum < 1:
            raise SimError(f"outer_momentum={self.outer_momentum} is outside [0, 1)")
        if not 0 <= self.trim < 0.5:
            raise SimError(f"trim={self.trim} is outside [0, 0.5)")
        common.check_attack(self)
        self._check_corpus()
        self._check_device()
        return self

    def _check_preset(self) -> None:
        """Refuse a model size that differs from the one the preset sets."""
        for name, value in PRESETS.get(self.preset, {}).items():
            if getattr(self, name) != value:
                raise SimError(f"preset={self.preset!r} sets {name}={value}, but "
                               f"{name}={getattr(self, name)}; give one of them")  # fmt: skip

    def _check_schedule(self) -> None:
        """Refuse a warm-up longer than the run or a final lr fraction outside [0, 1]."""
        if not 0 <= self.warmup <= self.steps:
            raise SimError(f"warmup={self.warmup} must be from 0 to steps = {self.steps}")
        if not 0 <= self.min_lr_fraction <= 1:
            raise SimError(f"min_lr_fraction={self.min_lr_fraction} is outside [0, 1]")

    def _check_device(self) -> None:
        """Refuse ``device = "cuda"`` where PyTorch sees no CUDA device."""
        if self.device == "cuda" and not require_torch().cuda.is_available():
            raise SimError('device=\'cuda\': PyTorch sees no CUDA device here; use device = '
                           '"cpu", or "" for the numpy path')  # fmt: skip

    def inner_lr(self, t: int) -> float:
        """The inner AdamW's learning rate at step ``t`` (from 0): ``lr`` raised linearly over
        the first ``warmup`` steps, then constant or, with ``schedule = "cosine"``, decayed
        along a half cosine to ``min_lr_fraction`` x ``lr`` at step ``steps``."""
        if t < self.warmup:
            return self.lr * (t + 1) / self.warmup
        if self.schedule == "constant":
            return self.lr
        done = (t - self.warmup) / max(1, self.steps - self.warmup)
        low = self.min_lr_fraction * self.lr
        return low + 0.5 * (self.lr - low) * (1 + math.cos(math.pi * done))

    def text(self) -> Corpus:
        """The run's corpus: the shipped slice, or the file ``corpus`` names, read whole."""
        return read_text_corpus(self.corpus) if self.corpus else load_corpus()

    def facts(self) -> CorpusFacts:
        """The run's corpus's length, vocabulary and sha256, without holding its text: what
        the checks and estimates made before any run read."""
        return corpus_facts(self.corpus)

    def shape(self, vocab: int | None = None) -> GPTShape:
        """The model's sizes (the vocabulary is the corpus's unless given)."""
        vocab = self.facts().vocab_size if vocab is None else vocab
        return GPTShape(vocab, self.layers, self.width, self.heads, self.context, self.tied)

    def _check_corpus(self) -> None:
        """Refuse a corpus that is missing, not a regular file, empty, larger than the cap,
        not UTF-8, or too short for a training window in each worker's shard and a
        validation window."""
        corpus = self.facts()
        parts = self.M if self.sampling == "shards" else 1
        if corpus.train_chars // parts <= self.context or corpus.valid_chars <= self.context:
            raise SimError(
                f"corpus={self.corpus!r}: {corpus.train_chars:,} training and "
                f"{corpus.valid_chars:,} validation characters are too few for context="
                f"{self.context} and M={self.M}; each worker's shard (with sampling = \"iid\", "
                "the training part) and the validation part need more than context characters"
            )

    def memory(self, vocab: int | None = None) -> float:
        """Bytes one run takes: parameters, gradients, AdamW's state, deltas and masks; the
        activations autograd keeps; the corpus, as it is read (:attr:`CorpusFacts.read_bytes`);
        torch itself (:data:`TORCH_BYTES`). ``vocab`` is ignored (the run's own corpus decides
        it)."""
        corpus = self.facts()
        V, D, T, L = corpus.vocab_size, self.width, self.context, self.layers
        P = self.shape(V).n_params
        state = 4.0 * P * (8 * self.M + 4)
        tokens = self.M * self.batch * T
        acts = 4.0 * tokens * (L * (20 * D + self.heads * T) + 4 * V)
        evals = 4.0 * EVAL_CHUNK * T * (L * (8 * D + self.heads * T) + 2 * V)
        return state + acts + evals + corpus.read_bytes + TORCH_BYTES

    def describe(self) -> str:
        """The settings that size a run, for messages."""
        return (
            f"a gpt run at layers={self.layers}, width={self.width}, context={self.context}, "
            f"M={self.M}, batch={self.batch}"
        )

    @property
    def omega(self) -> float:
        """Relative variance of unbiased rand-k, 1/keep - 1; for top-k a nominal label."""
        return common.compressor_omega(self.compressor, self.keep)

    @property
    def tokens(self) -> int:
        """The run's token budget: steps x M workers x batch x context characters."""
        return self.steps * self.M * self.batch * self.context


@dataclass(frozen=True)
class GPTShape:
    """Sizes of the transformer: vocabulary, blocks, width, attention heads, context, and
    whether the head is the token embedding (``tied``: no head matrix and no head bias)."""

    vocab: int
    layers: int
    width: int
    heads: int
    context: int
    tied: bool = False

    @property
    def blocks(self) -> list[tuple[str, tuple[int, ...]]]:
        D = self.width
        out = [("tok", (self.vocab, D)), ("pos", (self.context, D))]
        for i in range(self.layers):
            out += [
                (f"b{i}.ln1_w", (D,)), (f"b{i}.ln1_b", (D,)),
                (f"b{i}.qkv_w", (D, 3 * D)), (f"b{i}.qkv_b", (3 * D,)),
                (f"b{i}.proj_w", (D, D)), (f"b{i}.proj_b", (D,)),
                (f"b{i}.ln2_w", (D,)), (f"b{i}.ln2_b", (D,)),
                (f"b{i}.fc_w", (D, 4 * D)), (f"b{i}.fc_b", (4 * D,)),
                (f"b{i}.out_w", (4 * D, D)), (f"b{i}.out_b", (D,)),
            ]  # fmt: skip
        out += [("lnf_w", (D,)), ("lnf_b", (D,))]
        return out if self.tied else out + [("head_w", (D, self.vocab)), ("head_b", (self.vocab,))]

    @property
    def n_params(self) -> int:
        return sum(math.prod(s) for _, s in self.blocks)

    def matrices(self) -> np.ndarray:
        """A (P,) float32 mask, 1 on the weight matrices of the linear maps (attention's
        qkv and projection, the MLP's two, the head when untied), 0 on embeddings (the tied
        head among them), LayerNorms and biases: what ``decay_on = "matrices"`` decays."""
        mask = np.zeros(self.n_params, dtype=np.float32)
        at = 0
        for name, s in self.blocks:
            n = math.prod(s)
            if name.endswith("_w") and len(s) == 2:
                mask[at : at + n] = 1.0
            at += n
        return mask


def require_torch():
    """PyTorch, or :class:`SimError` in one line saying how to install it."""
    try:
        import torch
    except ImportError:
        raise SimError(NEEDS_TORCH) from None
    return torch


def init_params(shape: GPTShape, rng: np.random.Generator) -> np.ndarray:
    """One model's parameters, shape (P,): GPT-2's initialisation (normal weights of sd 0.02,
    the residual projections' scaled by 1/sqrt(2 layers), zero biases, unit LayerNorms)."""
    out = np.zeros(shape.n_params, dtype=np.float32)
    at = 0
    for name, s in shape.blocks:
        n = math.prod(s)
        kind = name.rsplit(".", 1)[-1]
        if kind in ("ln1_w", "ln2_w", "lnf_w"):
            out[at : at + n] = 1.0
        elif not kind.endswith("_b"):
            sd = 0.02 / math.sqrt(2 * shape.layers) if kind in ("proj_w", "out_w") else 0.02
            out[at : at + n] = rng.standard_normal(n) * sd
        at += n
    return out


def _views(flat, shape: GPTShape) -> dict:
    """Named views, each with the leading worker axis, of a (M, P) tensor."""
    out, at = {}, 0
    for name, s in shape.blocks:
        n = math.prod(s)
        out[name] = flat[:, at : at + n].reshape(flat.shape[0], *s)
        at += n
    return out


def losses(flat, x, y, shape: GPTShape):
    """Mean cross-entropy (nats per character) of each model copy: ``flat`` (M, P) tensor,
    ``x`` and ``y`` (M, B, T) token ids and next-character targets; returns (M,)."""
    import torch
    import torch.nn.functional as F

    p = _views(flat, shape)
    m, b, t = x.shape
    D, heads = shape.width, shape.heads

    def norm(h, name):  # LayerNorm with each worker's own gain and bias
        return F.layer_norm(h, (D,)) * p[f"{name}_w"][:, None] + p[f"{name}_b"][:, None]

    def linear(h, name):  # h (M, N, in) @ (M, in, out) + (M, out)
        return torch.baddbmm(p[f"{name}_b"][:, None], h, p[f"{name}_w"])

    rows = torch.arange(m, device=x.device)[:, None, None]
    h = (p["tok"][rows, x] + p["pos"][:, None, :t]).reshape(m, b * t, D)
    for i in range(shape.layers):
        qkv = linear(norm(h, f"b{i}.ln1"), f"b{i}.qkv")
        q, k, v = qkv.reshape(m * b, t, 3, heads, D // heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + linear(a.transpose(1, 2).reshape(m, b * t, D), f"b{i}.proj")
        h = h + linear(F.gelu(linear(norm(h, f"b{i}.ln2"), f"b{i}.fc")), f"b{i}.out")
    h = norm(h, "lnf")
    logits = torch.bmm(h, p["tok"].transpose(1, 2)) if shape.tied else linear(h, "head")
    ce = F.cross_entropy(logits.reshape(-1, shape.vocab), y.reshape(-1), reduction="none")
    return ce.reshape(m, b * t).mean(dim=1)


def _batches(corpus: Corpus, cfg: GPTConfig):
    """Yield (x, y), each (M, B, context), per inner step: windows of the training text and
    the characters after each of their positions. ``sampling = "shards"``: worker m reads
    shard m (as the MLP's); ``"iid"``: worker m draws its windows uniformly from the whole
    training text, from its own stream. The validation text is in no window."""
    windows = sliding_window_view(corpus.train, cfg.context + 1)
    if cfg.sampling == "iid":
        rngs = [np.random.default_rng([cfg.seed, 1, m]) for m in range(cfg.M)]
        for _ in range(cfg.steps):
            starts = np.stack([r.integers(0, len(windows), size=cfg.batch) for r in rngs])
            w = windows[starts].astype(np.int64)
            yield w[..., :-1], w[..., 1:]
        return
    shard = len(windows) // cfg.M
    rng = np.random.default_rng([cfg.seed, 1])
    offsets = (np.arange(cfg.M) * shard)[:, None]
    for _ in range(cfg.steps):
        w = windows[offsets + rng.integers(0, shard, size=(cfg.M, cfg.batch))].astype(np.int64)
        yield w[..., :-1], w[..., 1:]


def _outer_step(workers, global_p, buf, cfg: GPTConfig, rng, error):
    """One DiLoCo outer step from the workers' parameters (M, P): compressed, attacked and
    aggregated deltas, Nesterov momentum; the workers restart from the new global model.
    Numpy arrays on the numpy path, torch tensors (no gradient) on the device path."""
    if isinstance(workers, np.ndarray):
        delta = workers - global_p
        sent = common.attack(common.compress(delta, cfg, rng, error, np.float32), cfg)
        outer_grad = -common.aggregate(sent, cfg)
        mu, lr = np.float32(cfg.outer_momentum), np.float32(cfg.outer_lr)
    else:
        from fitrules.sim import tensors

        sent = tensors.attack(tensors.compress(workers - global_p, cfg, rng, error), cfg)
        outer_grad = -tensors.aggregate(sent, cfg)
        mu, lr = float(np.float32(cfg.outer_momentum)), float(np.float32(cfg.outer_lr))
    buf = mu * buf + outer_grad
    step = outer_grad + mu * buf if cfg.nesterov else buf
    global_p = global_p - lr * step
    workers[:] = global_p
    return global_p, buf


class _Workers:
    """A run's parameters and what moves them: the workers' copies (M, P) (one shared copy
    when synchronous) as one torch tensor with one AdamW over it, the global model, the outer
    momentum and top-k's residuals.

    ``device = ""`` (the numpy path, the committed grids'): the copies are a numpy array and
    the tensor on one memory, and the outer step is numpy's on the CPU. ``"cpu"`` or
    ``"cuda"`` (the device path): everything is a tensor on that device."""

    def __init__(self, cfg: GPTConfig, shape: GPTShape):
        torch = require_torch()
        self.cfg, self.torch = cfg, torch
        self.device = torch.device(cfg.device or "cpu")
        start = init_params(shape, np.random.default_rng([cfg.seed, 0]))
        self.workers = np.tile(start, (1 if cfg.algo == "sync" else cfg.M, 1))
        self.params = torch.from_numpy(self.workers).to(self.device).requires_grad_()
        put = (lambda a: a) if not cfg.device else (lambda a: torch.from_numpy(a).to(self.device))
        self.global_p, self.buf = put(start), put(np.zeros_like(start))
        self.error = put(np.zeros_like(self.workers)) if cfg.compressor == "topk" else None
        every = cfg.decay_on == "all"
        self.opt = torch.optim.AdamW([self.params], lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8,
                                     weight_decay=cfg.weight_decay if every else 0.0)  # fmt: skip
        self.mask = None
        if not every and cfg.weight_decay > 0:
            self.mask = torch.from_numpy(shape.matrices()).to(self.device)
        self.rng = np.random.default_rng([cfg.seed, 2])

    def tensor(self, a: np.ndarray):
        """``a`` as a tensor on the run's device."""
        return self.torch.from_numpy(a).to(self.device)

    def inner_step(self, t: int, loss) -> None:
        """The inner AdamW step ``t`` down ``loss``'s gradient, at the schedule's lr; with
        ``decay_on = "matrices"``, the decoupled weight decay on the matrices alone."""
        lr = self.cfg.inner_lr(t)
        self.opt.param_groups[0]["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.mask is not None:  # as AdamW's own decay, before its step, masked
            with self.torch.no_grad():
                self.params.mul_(1 - lr * self.cfg.weight_decay * self.mask)
        self.opt.step()

    def outer_step(self) -> None:
        """One outer step (:func:`_outer_step`), on the numpy arrays or the tensors."""
        if not self.cfg.device:
            self.global_p, self.buf = _outer_step(self.workers, self.global_p, self.buf,
                                                  self.cfg, self.rng, self.error)  # fmt: skip
            return
        with self.torch.no_grad():
            self.global_p, self.buf = _outer_step(self.params, self.global_p, self.buf,
                                                  self.cfg, self.rng, self.error)  # fmt: skip

    def result(self) -> np.ndarray:
        """The run's model (P,) as a numpy array: the global one, or the synchronous copy."""
        if self.cfg.algo == "sync":
            return self.params[0].detach().cpu().numpy().copy()
        g = self.global_p
        return g if isinstance(g, np.ndarray) else g.cpu().numpy()


def train(
    cfg: GPTConfig, corpus: Corpus, history: list | None = None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Train one configuration; return the global parameters (P,), the workers' last
    training losses and whether the run diverged. ``history``, if given, gets each step's
    training loss (the mean over workers) appended."""
    require_torch().set_num_threads(1)  # small matrices: one thread a run, as one_blas_thread
    shape = cfg.validate().shape(corpus.vocab_size)
    run = _Workers(cfg, shape)
    sync, train_losses = cfg.algo == "sync", np.full(cfg.M, np.nan)
    for t, (x, y) in enumerate(_batches(corpus, cfg)):
        live = run.params.expand(cfg.M, -1) if sync else run.params
        per_worker = losses(live, run.tensor(x), run.tensor(y), shape)
        train_losses = per_worker.detach().cpu().numpy().astype(np.float64)
        if not np.isfinite(train_losses).all():
            return run.result(), train_losses, True
        if history is not None:
            history.append(float(train_losses.mean()))
        # synchronous: the mean of the workers' gradients; DiLoCo: each worker's own
        run.inner_step(t, per_worker.mean() if sync else per_worker.sum())
        if not sync and ((t + 1) % cfg.H == 0 or t + 1 == cfg.steps):
            run.outer_step()
    return run.result(), train_losses, False


def mean_loss(params: np.ndarray, corpus: Corpus, cfg: GPTConfig) -> float:
    """Validation cross-entropy of one model (P,), in nats per character: every position of
    ``eval_windows`` windows spread evenly over the validation text."""
    import torch

    windows = sliding_window_view(corpus.valid, cfg.context + 1)
    pick = np.linspace(0, len(windows) - 1, min(cfg.eval_windows, len(windows))).astype(int)
    shape = cfg.shape(corpus.vocab_size)
    device = torch.device(cfg.device or "cpu")
    flat = torch.from_numpy(params[None, :]).to(device)
    total = 0.0
    with torch.no_grad():
        for s in range(0, len(pick), EVAL_CHUNK):
            w = torch.from_numpy(windows[pick[s : s + EVAL_CHUNK]].astype(np.int64))[None]
            w = w.to(device)
            total += float(losses(flat, w[..., :-1], w[..., 1:], shape)[0]) * w.shape[1]
    return total / len(pick)


def run(cfg: GPTConfig, corpus: object = None) -> dict:
    """Train one configuration and return its results row (config fields + outcomes).

    ``corpus`` is ignored: a run reads its own (the shipped slice, or the file its
    ``corpus`` setting names), and records its sha256 and the sizes of its two parts. The
    loss is the validation cross-entropy in nats per character of the final global model; a
    run whose loss is not finite or exceeds ln(vocabulary size), a uniform guess, is recorded
    with ``diverged = True``, as the MLP's.
    """
    t0 = time.perf_counter()
    text = cfg.text()
    params, train_losses, diverged = train(cfg, text)
    loss = float("nan")
    if not diverged and np.isfinite(params).all():
        loss = mean_loss(params, text, cfg)
    diverged = diverged or not np.isfinite(loss) or loss > math.log(text.vocab_size)
    row = asdict(cfg)
    row.update(
        omega=cfg.omega,
        n_params=cfg.shape(text.vocab_size).n_params,
        tokens=cfg.tokens,
        loss=loss,
        train_loss=float(np.mean(train_losses)),
        diverged=bool(diverged),
        corpus_sha256=text.sha256,
        train_chars=len(text.train),
        valid_chars=len(text.valid),
        wall_s=round(time.perf_counter() - t0, 3),
    )
    return row
