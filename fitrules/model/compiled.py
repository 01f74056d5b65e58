"""A form compiled for evaluation: its predictions and Jacobian at cells, for given constants."""

from __future__ import annotations

import weakref

import numpy as np

from fitrules.base.errors import FitrulesError
from fitrules.model import expr as ex
from fitrules.model.forms import Form, Structure, level_of


_CODE: dict[int, dict] = {}  # id of a structure -> its generated code, while it lives


def trained_levels(x: np.ndarray, masks: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which values of a column each split's training cells hold, every split at once.

    Parameters
    ----------
    x : numpy.ndarray
        The column's value at each cell (n,).
    masks : numpy.ndarray
        The splits' training cells (S, n).
    values : numpy.ndarray
        The values asked about (L,).

    Returns
    -------
    numpy.ndarray
        (S, L) booleans: split s has a training cell at value l (one product of the masks
        with the values' indicators).
    """
    at = np.asarray(x)[:, None] == np.asarray(values)[None, :]  # (n, values)
    return (np.asarray(masks, float) @ at) > 0


class CompiledForm:
    """A bound form with its structure and the numeric pieces fitting evaluates.

    ``params`` may be a vector (p,) or a batch (..., p); predictions then have shape (..., n).
    """

    def __init__(self, form: Form):
        if form.variables is None:
            raise FitrulesError(f"form {form.name!r} must be bound to a grid before fitting")
        self.form = form
        self.s: Structure = form.structure
        self.p = len(self.s.constants)
        self.lin_idx = [self.s.constants.index(c) for c in self.s.linear]
        self.non_idx = [self.s.constants.index(c) for c in self.s.nonlinear]
        self.levels = {k: np.array(v, float) for k, v in (form.levels or {}).items()}
        # per-level constants: which level (column, value) pairs each one belongs to
        self.level_of = {c: level_of(c) for c in self.s.constants if level_of(c)}

    def _code(self, what: str):
        """Generated numpy code (:func:`~fitrules.model.expr.compile_nodes`) of the value,
        the Jacobian's columns or the projection's pieces, made once per bound form (kept
        with its structure, which a form makes once)."""
        memo = _CODE.get(id(self.s))
        if memo is None:  # kept beside the structure, not in it: forms stay picklable
            memo = _CODE[id(self.s)] = {}
            weakref.finalize(self.s, _CODE.pop, id(self.s), None)
        if what not in memo:
            nodes = {
                "value": (self.form.tree,),
                "jacobian": self.s.gradient,
                "pieces": (*self.s.basis, self.s.offset),
            }[what]
            memo[what] = ex.compile_nodes(nodes, f"{self.form.name} ({what})")
        return memo[what]

    def pieces(self, env: dict) -> tuple:
        """The basis of each linear constant, then the offset, on ``env`` (names -> values)."""
        return self._code("pieces")(env)

    def unknown_levels(self, X: dict[str, np.ndarray]) -> np.ndarray | bool:
        """True where a point's level of a per-level column has no constant of its own."""
        out: np.ndarray | bool = False
        for col, lv in self.levels.items():
            out = out | ~np.isin(X[col], lv)
        return out

    def unfitted(self, X: dict[str, np.ndarray], mask: np.ndarray) -> list[tuple[str, float]]:
        """Levels (column, value) with no training cell in ``mask``."""
        out = []
        for col, lv in self.levels.items():
            seen = set(np.unique(X[col][mask]).tolist())
            out += [(col, float(v)) for v in lv if float(v) not in seen]
        return out

    def env(self, X: dict[str, np.ndarray], params: np.ndarray) -> dict:
        params = np.asarray(params, float)
        env: dict = {v: X[v] for v in self.form.bound_variables}
        for j, c in enumerate(self.s.constants):
            env[c] = params[..., j, None] if params.ndim > 1 else params[j]
        return env

    def _shape(self, X, params) -> tuple[int, ...]:
        n = np.shape(next(iter(X.values())))[-1]
        return (*np.shape(params)[:-1], n)

    def predict(self, X: dict[str, np.ndarray], params: np.ndarray) -> np.ndarray:
        """Predictions; NaN at a level of a per-level column that has no constant."""
        with np.errstate(all="ignore"):
            (out,) = self._code("value")(self.env(X, params))
        out = np.broadcast_to(out, self._shape(X, params)).astype(float)
        if self.levels:
            out = np.where(self.unknown_levels(X), np.nan, out)
        return out

    def jacobian(self, X: dict[str, np.ndarray], params: np.ndarray) -> np.ndarray:
        """d prediction / d constants, shape (..., n, p)."""
        env = self.env(X, params)
        shape = self._shape(X, params)
        with np.errstate(all="ignore"):
            cols = self._code("jacobian")(env)
        out = np.empty((*shape, len(cols)))
        for j, g in enumerate(cols):  # each column written in place (numpy broadcasts it)
            out[..., j] = g
        return out


def predict(form: Form, X: dict[str, np.ndarray], constants: dict[str, float]) -> np.ndarray:
    cf = CompiledForm(form)
    return cf.predict(X, np.array([constants[c] for c in cf.s.constants], float))
