"""Leapfrog integration of Hamiltonian dynamics driven by a surrogate gradient.

The integrator is written by hand because PyMC's ``CpuLeapfrogIntegrator`` evaluates the model's
exact ``(logp, dlogp)`` at every step and derives the energy from it; here every step calls only
the surrogate's gradient, and the exact energy is computed once, at the end, by the caller.
Leapfrog with any fixed gradient field of a potential is reversible and volume preserving, which
is all the exact Metropolis test needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["Trajectory", "jittered_n_steps", "leapfrog"]


class Trajectory(NamedTuple):
    """End of a leapfrog trajectory.

    Attributes
    ----------
    position, momentum, gradient : ndarray
        End point and the potential gradient there (as returned by the gradient function).
    n_steps : int
        Steps taken (fewer than requested if the integration failed).
    failed : bool
        A gradient, position or momentum became non-finite; the proposal must be rejected.
    """

    position: np.ndarray
    momentum: np.ndarray
    gradient: np.ndarray
    n_steps: int
    failed: bool


def leapfrog(
    position: np.ndarray,
    momentum: np.ndarray,
    gradient: np.ndarray,
    step_size: float,
    n_steps: int,
    potential_gradient: Callable[[np.ndarray], np.ndarray],
    velocity: Callable[[np.ndarray], np.ndarray],
) -> Trajectory:
    """Integrate ``n_steps`` leapfrog steps of ``H(q, p) = U(q) + K(p)``.

    Parameters
    ----------
    position, momentum : ndarray, shape (d,)
        Start point (not modified).
    gradient : ndarray, shape (d,)
        ``grad U`` at ``position`` (of the same potential the trajectory follows).
    step_size : float
        Signed step size; a negative value integrates backwards in time.
    n_steps : int
        Number of steps (at least 1).
    potential_gradient : callable
        ``q -> grad U(q)``.
    velocity : callable
        ``p -> dK/dp``, e.g. ``M^{-1} p``.
    """
    half = 0.5 * step_size
    momentum = momentum - half * gradient
    for step in range(1, n_steps + 1):
        position = position + step_size * velocity(momentum)
        gradient = potential_gradient(position)
        if not np.isfinite(gradient).all():  # the method: half np.all's call overhead
            return Trajectory(position, momentum, gradient, step, True)
        momentum = momentum - (half if step == n_steps else step_size) * gradient
    failed = not (np.all(np.isfinite(position)) and np.all(np.isfinite(momentum)))
    return Trajectory(position, momentum, gradient, n_steps, failed)


def jittered_n_steps(
    rng: np.random.Generator,
    path_length: float,
    step_size: float,
    max_steps: int,
    jitter: float = 0.2,
) -> int:
    """Draw the number of leapfrog steps of one trajectory.

    Uniform on about +-20 % around ``path_length / step_size`` (at least two distinct values),
    so trajectory lengths never lock into a period of the dynamics.
    """
    centre = path_length / step_size
    low = max(1, round((1.0 - jitter) * centre))
    high = max(low + 1, round((1.0 + jitter) * centre))
    return int(min(rng.integers(low, high + 1), max_steps))
