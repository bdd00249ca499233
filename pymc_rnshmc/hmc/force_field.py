"""The force of surrogate trajectories: the surrogate's gradient, the exact one where it fails.

Where the surrogate's gradient is not finite or implausibly large, the exact gradient is used
instead. Either way the force is a fixed function of the position, so the leapfrog stays
reversible and volume preserving (the sparse-grid HMC paper's eq. 3.11 mixes fields the same
way), and a surrogate that fails somewhere cannot wall that region off from the chain.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["FORCE_BOUND_FACTOR", "ForceField", "force_bound"]

FORCE_BOUND_FACTOR = 1e3
"""A surrogate force component this many times larger than any exact one seen in training is
treated as a surrogate failure (like a non-finite one): the exact gradient is used there."""


def force_bound(positions: np.ndarray, gradients: np.ndarray) -> np.ndarray:
    """Largest plausible force per coordinate, from the training draws and their exact gradients.

    ``FORCE_BOUND_FACTOR`` times the largest exact force seen, or times ``1 / sd`` of the
    coordinate if that is larger: for a posterior ``E[dU/dq_i (q_i - mean_i)] = 1``, so ``1 / sd``
    is the force's natural scale even where the training gradients are (near) zero, as on a
    flat coordinate, where a bound from the gradients alone collapsed and sent every step to the
    exact gradient.
    """
    largest = np.max(np.abs(gradients), axis=0)
    spread = np.std(positions, axis=0)
    natural = np.divide(1.0, spread, out=np.zeros_like(spread), where=spread > 0)
    return FORCE_BOUND_FACTOR * np.maximum(np.maximum(largest, natural), np.finfo(float).tiny)


class ForceField:
    """``grad U~``, or the exact ``grad U`` where the surrogate's is unusable.

    Parameters
    ----------
    surrogate_gradient : callable
        ``q -> grad U~(q)`` at one point.
    exact_gradient : callable
        ``q -> grad U(q)`` at one point (an exact model evaluation).
    bound : ndarray
        Largest plausible magnitude of each component (see :func:`force_bound`).

    Attributes
    ----------
    exact_points : int
        Points where the exact gradient was used since the last :meth:`reset`.
    """

    def __init__(
        self,
        surrogate_gradient: Callable[[np.ndarray], np.ndarray],
        exact_gradient: Callable[[np.ndarray], np.ndarray],
        bound: np.ndarray,
    ) -> None:
        self.surrogate_gradient = surrogate_gradient
        self.exact_gradient = exact_gradient
        self.bound = bound
        self.exact_points = 0

    def reset(self) -> None:
        """Start counting exact points afresh (once per trajectory)."""
        self.exact_points = 0

    def __call__(self, position: np.ndarray) -> np.ndarray:
        gradient = self.surrogate_gradient(position)
        with np.errstate(invalid="ignore"):
            if (np.abs(gradient) <= self.bound).all():  # False for NaN as well
                return gradient
        self.exact_points += 1
        return self.exact_gradient(position)
