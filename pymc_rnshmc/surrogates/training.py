"""What surrogates are fitted to: exact evaluations of the potential and, if known, its gradient."""

from __future__ import annotations

import numpy as np

__all__ = ["TrainingBuffer", "finite_rows"]


def finite_rows(
    positions, potentials, gradients=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The training rows whose position, potential and gradient are all finite, as floats.

    Raises
    ------
    ValueError
        ``positions`` and ``potentials`` have different numbers of rows.
    """
    positions = np.atleast_2d(np.asarray(positions, dtype=float))
    potentials = np.asarray(potentials, dtype=float).reshape(-1)
    if potentials.shape[0] != positions.shape[0]:
        raise ValueError("positions and potentials must have the same number of rows.")
    finite = np.all(np.isfinite(positions), axis=1) & np.isfinite(potentials)
    if gradients is not None:
        gradients = np.asarray(gradients, dtype=float).reshape(positions.shape)
        finite &= np.all(np.isfinite(gradients), axis=1)
        gradients = gradients[finite]
    return positions[finite], potentials[finite], gradients


class TrainingBuffer:
    """Positions with their exact potential ``U = -logp`` and, for models with one, its gradient.

    Storage grows geometrically, so appending is amortized ``O(d)``.

    Parameters
    ----------
    dim : int
        Dimension of the positions.
    capacity : int
        Initial number of rows.
    with_gradients : bool
        Whether every point comes with its gradient (``False`` for a model without one).

    Attributes
    ----------
    lowest_potential : float
        The lowest potential recorded (``inf`` while empty).
    """

    def __init__(self, dim: int, capacity: int = 256, with_gradients: bool = True) -> None:
        self.dim = int(dim)
        self.with_gradients = bool(with_gradients)
        capacity = max(1, int(capacity))
        self._positions = np.empty((capacity, self.dim))
        self._potentials = np.empty(capacity)
        self._gradients = np.empty((capacity, self.dim)) if self.with_gradients else None
        self._size = 0
        self.lowest_potential = np.inf

    def __len__(self) -> int:
        return self._size

    def append(
        self, position: np.ndarray, potential: float, gradient: np.ndarray | None = None
    ) -> None:
        """Add one exact evaluation (``gradient`` required exactly when ``with_gradients``)."""
        if (gradient is not None) != self.with_gradients:
            needed = "needs" if self.with_gradients else "takes no"
            raise ValueError(f"This training buffer {needed} gradients.")
        if self._size == self._potentials.shape[0]:
            self._grow()
        self._positions[self._size] = position
        self._potentials[self._size] = potential
        self.lowest_potential = min(self.lowest_potential, float(potential))
        if gradient is not None:
            self._gradients[self._size] = gradient
        self._size += 1

    def _grow(self) -> None:
        capacity = 2 * self._potentials.shape[0]
        self._positions = self._grown(self._positions, capacity)
        self._potentials = self._grown(self._potentials, capacity)
        if self._gradients is not None:
            self._gradients = self._grown(self._gradients, capacity)

    def _grown(self, rows: np.ndarray, capacity: int) -> np.ndarray:
        new = np.empty((capacity, *rows.shape[1:]))
        new[: self._size] = rows[: self._size]
        return new

    def clear(self) -> None:
        """Forget every point (keeps the storage)."""
        self._size = 0
        self.lowest_potential = np.inf

    def window(self, start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Copies of ``(positions, potentials, gradients)`` from row ``start`` on.

        ``gradients`` is ``None`` without gradients.
        """
        rows = slice(max(0, int(start)), self._size)
        gradients = None if self._gradients is None else self._gradients[rows].copy()
        return self._positions[rows].copy(), self._potentials[rows].copy(), gradients
