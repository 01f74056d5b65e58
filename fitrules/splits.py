"""Split generators: seeded sequences of (train, test) cell indices.

One splitter with one seed yields one sequence, and every form is scored on that same
sequence: the pairing is what makes "A beat B in 288 of 300 splits" meaningful. The protocol
follows scikit-learn's splitters: ``split(n_cells)`` validates and ``_iter_indices`` works.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fitrules.errors import SplitError


@dataclass(frozen=True)
class RandomSplit:
    """Random subsets of cells: ``train_frac`` of them fitted, the rest held out.

    Parameters
    ----------
    n_splits : number of splits.
    train_frac : fraction of cells in each training set, in (0, 1); rounded to a count.
    seed : seed of the one random sequence all forms share.

    Examples
    --------
    >>> sp = RandomSplit(n_splits=2, train_frac=0.5, seed=0)
    >>> [len(tr) for tr, te in sp.split(10)]
    [5, 5]
    """

    n_splits: int = 300
    train_frac: float = 1 / 3
    seed: int = 0

    name = "random"

    def n_train(self, n_cells: int) -> int:
        return int(np.floor(self.train_frac * n_cells + 0.5))

    def check(self, n_cells: int) -> None:
        """Raise :class:`SplitError` if these splits cannot be made from ``n_cells`` cells."""
        if not isinstance(self.n_splits, int | np.integer) or self.n_splits < 1:
            raise SplitError(f"--splits {self.n_splits}: must be an integer >= 1")
        if not 0 < self.train_frac < 1:
            raise SplitError(f"--train-frac {self.train_frac}: must be in (0, 1)")
        k = self.n_train(n_cells)
        if k < 1 or k >= n_cells:
            raise SplitError(
                f"--train-frac {self.train_frac:g} of {n_cells} cells gives {k} "
                f"training and {n_cells - k} held-out cells; each needs at least 1"
            )

    def split(self, n_cells: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(train, test)`` sorted index arrays, disjoint and covering all cells."""
        self.check(n_cells)
        yield from self._iter_indices(n_cells)

    def _iter_indices(self, n_cells: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng(self.seed)
        k = self.n_train(n_cells)
        for _ in range(self.n_splits):
            perm = rng.permutation(n_cells)
            yield np.sort(perm[:k]), np.sort(perm[k:])

    def masks(self, n_cells: int) -> np.ndarray:
        """(n_splits, n_cells) boolean array, True for training cells."""
        out = np.zeros((self.n_splits, n_cells), bool)
        for i, (train, _) in enumerate(self.split(n_cells)):
            out[i, train] = True
        return out

    def describe(self) -> dict:
        return {
            "protocol": self.name,
            "n_splits": int(self.n_splits),
            "train_frac": float(self.train_frac),
            "seed": int(self.seed),
        }
