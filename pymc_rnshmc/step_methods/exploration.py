"""The record of a chain's exact evaluations that surrogates are fitted to."""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.surrogates.training import TrainingBuffer

__all__ = ["ExplorationRecord"]


class ExplorationRecord:
    """Exact draws with their potential and gradient, and the explorer's integration times.

    Parameters
    ----------
    dim : int
        Dimension of the sampled vector.
    """

    def __init__(self, dim: int) -> None:
        self.training = TrainingBuffer(dim)
        self._jumps: list[float] = []
        self._tree_lengths: list[float] = []

    def __len__(self) -> int:
        return len(self.training)

    def append(
        self,
        position: np.ndarray,
        potential: float,
        gradient: np.ndarray,
        jump: float | None = None,
        tree_length: float | None = None,
    ) -> None:
        """Add one exact draw.

        ``jump`` and ``tree_length``, if NUTS made the draw, are its integration times to the
        chosen point and of the whole trajectory.
        """
        self.training.append(position, potential, gradient)
        if jump is not None:
            self._jumps.append(jump)
            self._tree_lengths.append(tree_length)

    def window(self, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, potentials and gradients from draw ``first`` on (copies)."""
        return self.training.window(first)

    def integration_times(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """NUTS's jumps and trajectory lengths from draw ``first`` on."""
        return np.asarray(self._jumps[first:]), np.asarray(self._tree_lengths[first:])
