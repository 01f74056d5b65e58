"""A character-level MLP language model in numpy, batched over workers.

Parameters of M model copies live in one float32 array of shape (M, P) so that inner
optimiser steps, compression and averaging are single array operations; the named tensors
are views into it. Gradients are analytic (checked against finite differences in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MLPShape:
    """Sizes of the model: vocabulary, context length, embedding and hidden width."""

    vocab: int
    context: int = 8
    embed: int = 16
    hidden: int = 256

    @property
    def blocks(self) -> list[tuple[str, tuple[int, ...]]]:
        cd = self.context * self.embed
        return [
            ("emb", (self.vocab, self.embed)),
            ("w1", (cd, self.hidden)),
            ("b1", (self.hidden,)),
            ("w2", (self.hidden, self.vocab)),
            ("b2", (self.vocab,)),
        ]

    @property
    def n_params(self) -> int:
        return sum(int(np.prod(s)) for _, s in self.blocks)


def views(flat: np.ndarray, shape: MLPShape) -> dict[str, np.ndarray]:
    """Named views of a (M, P) parameter (or gradient) array."""
    out, at = {}, 0
    m = flat.shape[0]
    for name, s in shape.blocks:
        n = int(np.prod(s))
        out[name] = flat[:, at : at + n].reshape((m, *s))
        at += n
    return out


def init_params(shape: MLPShape, rng: np.random.Generator) -> np.ndarray:
    """One model's parameters, shape (P,): scaled-normal weights, zero biases."""
    flat = np.zeros((1, shape.n_params), dtype=np.float32)
    p = views(flat, shape)
    p["emb"][:] = rng.standard_normal(p["emb"].shape[1:]) * 1.0
    p["w1"][:] = rng.standard_normal(p["w1"].shape[1:]) / np.sqrt(shape.context * shape.embed)
    p["w2"][:] = rng.standard_normal(p["w2"].shape[1:]) / np.sqrt(shape.hidden)
    return flat[0]


def loss_and_grad(
    flat: np.ndarray, x: np.ndarray, y: np.ndarray, shape: MLPShape, grad: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean cross-entropy per model copy and its gradient.

    Parameters
    ----------
    flat : (M, P) float32 parameters.
    x : (M, B, context) int token ids; y : (M, B) int targets.
    grad : optional (M, P) array to write the gradient into.

    Returns
    -------
    loss : (M,) float64 mean loss of each copy; grad : (M, P) float32.
    """
    m, b, c = x.shape
    p = views(flat, shape)
    rows = np.arange(m)[:, None, None]
    xe = p["emb"][rows, x].reshape(m, b, c * shape.embed)
    h = np.tanh(xe @ p["w1"] + p["b1"][:, None, :])
    logits = h @ p["w2"] + p["b2"][:, None, :]
    logits -= logits.max(axis=2, keepdims=True)
    e = np.exp(logits)
    z = e.sum(axis=2, keepdims=True)
    probs = e / z
    bi = np.arange(b)[None, :]
    mi = np.arange(m)[:, None]
    loss = (np.log(z[..., 0]) - logits[mi, bi, y]).mean(axis=1, dtype=np.float64)

    if grad is None:
        grad = np.empty_like(flat)
    g = views(grad, shape)
    dlog = probs
    dlog[mi, bi, y] -= 1.0
    dlog /= b
    np.matmul(h.transpose(0, 2, 1), dlog, out=g["w2"])
    g["b2"][:] = dlog.sum(axis=1)
    dpre = (dlog @ p["w2"].transpose(0, 2, 1)) * (1.0 - h * h)
    np.matmul(xe.transpose(0, 2, 1), dpre, out=g["w1"])
    g["b1"][:] = dpre.sum(axis=1)
    dxe = (dpre @ p["w1"].transpose(0, 2, 1)).reshape(m * b * c, shape.embed)
    # Scatter-add into a contiguous buffer: g["emb"] is a strided view of the flat gradient,
    # and reshaping it to (M*V, D) would silently give a copy.
    demb = np.zeros((m * shape.vocab, shape.embed), dtype=grad.dtype)
    flat_idx = (np.arange(m)[:, None, None] * shape.vocab + x).reshape(-1)
    np.add.at(demb, flat_idx, dxe)
    g["emb"][:] = demb.reshape(m, shape.vocab, shape.embed)
    return loss, grad


def mean_loss(
    params: np.ndarray, x: np.ndarray, y: np.ndarray, shape: MLPShape, chunk: int = 4096
) -> float:
    """Mean cross-entropy of one model (P,) over windows ``x`` (N, context), targets ``y``."""
    p = views(params[None, :], shape)
    total = 0.0
    for s in range(0, len(y), chunk):
        xb, yb = x[s : s + chunk], y[s : s + chunk]
        xe = p["emb"][0][xb].reshape(len(yb), -1)
        h = np.tanh(xe @ p["w1"][0] + p["b1"][0])
        logits = h @ p["w2"][0] + p["b2"][0]
        mx = logits.max(axis=1, keepdims=True)
        lse = np.log(np.exp(logits - mx).sum(axis=1)) + mx[:, 0]
        total += float((lse - logits[np.arange(len(yb)), yb]).sum(dtype=np.float64))
    return total / len(y)
