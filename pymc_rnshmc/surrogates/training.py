"""What surrogates are fitted to: exact evaluations of the potential and its gradient."""

from __future__ import annotations

import numpy as np

__all__ = ["TrainingBuffer"]


class TrainingBuffer:
    """Positions with their exact potential ``U = -logp`` and its gradient.

    Storage grows geometrically, so appending is amortized ``O(d)``.

    Parameters
    ----------
    dim : int
        Dimension of the positions.
    capacity : int
        Initial number of rows.
    """

    def __init__(self, dim: int, capacity: int = 256) -> None:
        self.dim = int(dim)
        capacity = max(1, int(capacity))
        self._positions = np.empty((capacity, self.dim))
        self._potentials = np.empty(capacity)
        self._gradients = np.empty((capacity, self.dim))
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, position: np.ndarray, potential: float, gradient: np.ndarray) -> None:
        """Add one exact evaluation."""
        if self._size == self._potentials.shape[0]:
            self._grow()
        self._positions[self._size] = position
        self._potentials[self._size] = potential
        self._gradients[self._size] = gradient
        self._size += 1

    def _grow(self) -> None:
        capacity = 2 * self._potentials.shape[0]
        for name in ("_positions", "_gradients"):
            old = getattr(self, name)
            new = np.empty((capacity, self.dim))
            new[: self._size] = old[: self._size]
            setattr(self, name, new)
        potentials = np.empty(capacity)
        potentials[: self._size] = self._potentials[: self._size]
        self._potentials = potentials

    def clear(self) -> None:
        """Forget every point (keeps the storage)."""
        self._size = 0

    def window(self, start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of ``(positions, potentials, gradients)`` from row ``start`` on."""
        rows = slice(max(0, int(start)), self._size)
        return (
            self._positions[rows].copy(),
            self._potentials[rows].copy(),
            self._gradients[rows].copy(),
        )
